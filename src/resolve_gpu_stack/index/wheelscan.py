"""Which torch and CUDA a compiled wheel's shared objects bind to: read each ``.so`` member's first
bytes, never the whole wheel.

A wheel whose shared objects need ``libtorch*.so`` / ``libc10*.so`` links torch (``torch-abi``);
how it binds (the stable C shim, C++ symbols of one torch, one build per torch) is in the dynamic
symbols those members import, which ``WheelScan.abi`` judges with ``AbiRules`` (``abi.py``). One
whose objects need only CUDA libraries is bound to a CUDA major (``cuda``); one with no shared
object, or objects that need neither, is ``agnostic``; ``unknown`` when a member could not be told
(not ELF, the cap reached first, the wheel's limits reached).

Pure: ``WheelScanner`` plans byte ranges and evaluates what comes back, an I/O layer does the
reading. The reads, in order: the zip's tail (end of central directory), the central directory
when the tail does not hold it, then for every ``.so`` member (largest first) its local header and
first compressed bytes, inflated as they come, in reads sized by what the member's symbol table
says it still needs (``elf.dynamic_symbols``' ``needed_bytes``), else growing chunks. A member that
does not link torch stops when its needed libraries are known (``elf/``: its dynamic section
read; or, a guess from the names scanned, the string table holding the library names ended or its
first loadable segment read); one that links torch reads on until its dynamic symbol table is
complete. The guesses and the ``cap`` (inflated bytes) are not the end for a wheel tied to torch
(``torch_tie``: its METADATA, read first, or its name, or a member that links torch): such a
member is read on by its structure (``elfstream.py``: ``.dynamic`` and the tables it points to,
wherever they lie), as is a torch-linked member whose symbols the first bytes did not finish and
a member of any wheel whose first bytes did not tell. ``stop`` ends a scan for the caller's budget. A wheel stops at ``MAX_MEMBERS`` members, ``MAX_INFLATED`` inflated bytes,
``time_limit`` seconds of the scanner's own work (``clock``), or members that overlap (a zip
bomb's layout: ``ZipError``).

    scanner = WheelScanner(file_size)
    scanner.feed(tail_start, tail)            # optional: bytes already read (METADATA's tail)
    while ranges := scanner.next_ranges():
        for start, end in ranges:             # end exclusive; Range: bytes=start-(end-1)
            scanner.feed(start, fetch(start, end))
    result = scanner.result()

or ``scan_wheel(read, file_size)`` with a ``read(start, end) -> bytes`` callable (``scan_file`` for an
open file).
"""

from __future__ import annotations

import re
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import IO, Literal

from ..data.rules import AbiRules
from ..model.abi import CUDA, NONE, TORCH, UNKNOWN, MemberAbi, WheelAbi
from . import elf
from .abi import demangle, entity_identifier, member_abi
from .elf import DynamicSymbols, ElfError, ElfLayout, ElfLibraries, ElfTruncated
from .elfstream import ElfStream
from .zipmeta import (
    DEFLATED,
    LOCAL_EXTRA_SLACK,
    LOCAL_HEADER_SIZE,
    STORED,
    TAIL_BYTES,
    EndOfCentralDirectory,
    ZipEntry,
    ZipError,
    find_eocd,
    inflate_member,
    local_data_start,
    member_span,
    parse_central_directory,
)

Kind = Literal["torch-abi", "cuda", "agnostic", "unknown"]
# Why a member's scan ended. Its libraries known: "dynamic" (DT_NEEDED read), "end" (whole member
# read), "torch" (a torch library among the scanned names), "strtab-end" (the string table holding
# the library names ended, none of them torch's), "segment-end" (the first loadable segment, which
# holds the dynamic string table, read without a torch name), "symbols" (links torch, and its
# dynamic symbol table is read). Not: "cap", "error", "skipped", "limit" (the wheel's limits) --
# though a member whose scanned names include a torch library links torch whatever its stop.
Stop = Literal["dynamic", "end", "torch", "strtab-end", "segment-end", "symbols", "cap", "error", "skipped", "limit"]
# "strtab-end" and "segment-end" guess from the names scanned: a wheel tied to torch (``torch_tie``)
# reads such a member on by its structure (``elfstream``); an untied one is judged by what they name.
CONCLUSIVE: frozenset[str] = frozenset({"dynamic", "end", "torch", "symbols"})
_READ_ON: frozenset[str] = frozenset({"cap", "error", "strtab-end", "segment-end"})  # stops a structural read may do better

DEFAULT_CAP = 16 * 2**20  # inflated bytes per member (sgl-kernel's flash_ops: its .dynstr ends at 1.6 MB; ray's _raylet.so: past 4 MB)
FIRST_TAIL = 16 * 2**10  # first tail read; TAIL_BYTES when the end record is not in it
WHOLE_FILE = 48 * 2**10  # a wheel this small is read whole, at once
FIRST_CHUNK = 8 * 2**10  # compressed bytes of a member's first read; doubles per read unless its table says more
MAX_CHUNK = 2**20
MIN_CHUNK = 4 * 2**10
MAX_CENTRAL_DIRECTORY = 64 * 2**20
MAX_MEMBERS = 512  # shared objects scanned per wheel
MAX_INFLATED = 64 * 2**20  # inflated bytes per wheel, every member together (also bounds the memory held)
TIME_LIMIT = 1.5  # seconds of the scanner's own work per wheel (CPU time of its thread)
STRINGS_RATIO = 0.2  # compressed over inflated bytes of symbol names (mangled C++: 0.15-0.25)
NAMES_MARGIN = 8 * 2**10  # inflated bytes past a symbol table's last name: the library names follow them
MERGE_GAP = 16 * 2**10  # ranges of one round closer than this are read as one
SMALL_MEMBER = 2  # a member at most this many first chunks long is read whole at once

_SHARED_OBJECT = re.compile(r"\.so(?:\.[0-9]+)*$")
_METADATA = re.compile(r"^[^/]+\.dist-info/METADATA$")
MAX_METADATA = 2**20  # bytes of METADATA read for the torch tie
_REQUIRES_TORCH = re.compile(r"^Requires-Dist:\s*torch(?![A-Za-z0-9._-])", re.IGNORECASE | re.MULTILINE)
_NAME = re.compile(r"^Name:\s*(\S+)", re.IGNORECASE | re.MULTILINE)


def torch_tie(metadata: str | None) -> str | None:
    """Why a wheel may link torch, from its METADATA (None: nothing ties it to torch). The rule: a
    wheel is tied to torch when its METADATA requires torch (any marker, any extra), or its name
    contains "torch", or it has no readable METADATA. A tied wheel's members are read to their
    dynamic sections; an untied one whose reachable members name no torch library is judged by
    what they name (agnostic or CUDA), even where a member's dynamic section was not reached."""
    if metadata is None:
        return "its METADATA was not read"
    if _REQUIRES_TORCH.search(metadata):
        return "its METADATA requires torch"
    name = _NAME.search(metadata)
    if name is None:
        return "its METADATA names no package"
    if "torch" in name.group(1).lower():
        return f"its name ({name.group(1)}) says torch"
    return None


def first_tail(file_size: int | None) -> int:
    """How many bytes of a wheel's end to read first: all of a small wheel (one read, no second
    round trip for its members), else ``FIRST_TAIL``."""
    return file_size if file_size is not None and 0 < file_size <= WHOLE_FILE else FIRST_TAIL


def is_shared_object(name: str) -> bool:
    """A zip member named like a shared object: ``*.so``, ``*.so.12``, ``*.so.1.2.3``."""
    return not name.endswith("/") and bool(_SHARED_OBJECT.search(name.rsplit("/", 1)[-1]))


@dataclass(frozen=True, slots=True)
class MemberScan:
    name: str
    size: int  # inflated size, from the central directory
    stop: Stop
    libraries: ElfLibraries | None  # None when skipped or not ELF
    inflated: int = 0
    read: int = 0  # compressed bytes of the member consumed (local header not counted)
    error: str | None = None
    symbols: DynamicSymbols | None = None  # a torch-linked member's dynamic symbols (complete or not)
    structural: bool = False  # its libraries read from its dynamic section (not guessed from the names scanned)

    @property
    def links_torch(self) -> bool:
        return bool(self.libraries and self.libraries.torch_libs)

    @property
    def conclusive(self) -> bool:
        """Whether the libraries it needs are known (enough to tell torch-linked or not)."""
        return self.stop in CONCLUSIVE or self.links_torch

    @property
    def symbols_complete(self) -> bool:
        return self.symbols is not None and self.symbols.complete


@dataclass(frozen=True, slots=True)
class Evidence:
    member: str
    library: str


@dataclass(frozen=True, slots=True)
class WheelScan:
    kind: Kind
    members: tuple[MemberScan, ...]  # the shared objects, in the order they were considered
    bytes_read: int
    reads: int
    file_size: int
    evidence: Evidence | None = None  # the first torch library found (kind "torch-abi")
    cuda_majors: tuple[int, ...] = ()
    limited: str | None = None  # why the wheel's scan stopped before every member was read (its limits)
    tie: str | None = "not read"  # why the wheel may link torch (``torch_tie``); None: nothing ties it
    stopped: str | None = None  # why the caller stopped the scan before every member was read (its budget)

    @property
    def judged_by_names(self) -> bool:
        """An undecided scan that is judged by the names its members gave (``torch_tie``): nothing
        ties the wheel to torch, no member names a torch library, none is unreadable, and the
        wheel's own limits (a zip bomb's defence) did not stop it."""
        return self.tie is None and self.evidence is None and not self.limited and not any(m.stop == "error" for m in self.members)

    @property
    def reason(self) -> str:
        """One line of evidence, for a coupling's ``reason``."""
        if self.kind == "torch-abi" and self.evidence:
            return f"{self.evidence.member} needs {self.evidence.library}"
        if not self.members:
            return "no shared objects in the wheel"
        if self.kind == "unknown":
            return self._unknown_reason(symbols=False)
        return self._plain_reason()

    def _plain_reason(self) -> str:
        unread = "" if self.decided else f"; {self._unread()}, and nothing ties it to torch (its METADATA does not require torch, its name does not say torch)"
        return self._plain_words() + unread

    def _unread(self) -> str:
        """How much of the wheel's members a partial scan left unread, in words."""
        if self.stopped:
            return f"not every shared object was read ({self.stopped})"
        short = sum(1 for m in self.members if not m.conclusive)
        return f"{short} of {len(self.members)} shared object(s) not read to their dynamic section"

    def _plain_words(self) -> str:
        if self.kind == "cuda":
            libs = sorted({n for m in self.members if m.libraries for n in m.libraries.cuda_libs})
            majors = ", ".join(str(v) for v in self.cuda_majors) or "unknown"
            return f"shared objects need CUDA libraries ({', '.join(libs)}; CUDA major {majors}), no torch library"
        return f"{len(self.members)} shared object(s) need neither torch nor CUDA libraries"

    def _unknown_reason(self, *, symbols: bool) -> str:
        """Why the scan could not tell (``symbols``: a torch-linked member's symbols count too)."""
        bad = next((m for m in self.members if not m.conclusive and m.stop != "limit"), None)
        if bad is None and symbols:
            bad = next((m for m in self.members if _symbols_missing(m)), None)
        if bad is None:
            return f"not every shared object was scanned: {self.limited or self.stopped or 'the scan stopped early'}"
        return _undecided(bad)

    def abi(self, rules: AbiRules) -> WheelAbi:
        """What the shared objects import, judged by ``rules`` (``model/abi.py``): ``TORCH`` (some
        member links torch: every such member with its imports), ``CUDA``, ``NONE``, or ``UNKNOWN``
        when a member's libraries, or a torch-linked member's symbols, could not be read (or the
        wheel's limits stopped the scan): never a guess."""
        majors = self.cuda_majors
        torch_members = [m for m in self.members if m.links_torch]
        described = tuple(_member_abi(m, rules) for m in torch_members if m.symbols_complete)
        if (not self.decided and not self.judged_by_names) or len(described) < len(torch_members):
            return WheelAbi(kind=UNKNOWN, why=self._unknown_reason(symbols=True), members=described, cuda_majors=majors)
        if described:
            linked = WheelAbi(kind=TORCH, why="", members=described, cuda_majors=majors)
            return replace(linked, why=_torch_why(linked, len(self.members), rules))
        if not self.members:
            return WheelAbi(kind=NONE, why="no shared objects in the wheel")
        if not self.needs_cuda:
            return WheelAbi(kind=NONE, why=self._plain_reason())
        # each member that needs CUDA, with its majors: twins per CUDA major (rules.abi) are told apart by them
        cuda = tuple(MemberAbi(name=m.name, cuda_majors=m.libraries.cuda_majors) for m in self.members if m.libraries and m.libraries.cuda_libs)
        return WheelAbi(kind=CUDA, why=self._plain_reason(), members=cuda, cuda_majors=majors)

    @property
    def decided(self) -> bool:
        """Whether every member's libraries are known (and the wheel's limits did not stop the scan)."""
        return not self.limited and not self.stopped and all(m.conclusive for m in self.members)

    @property
    def needs_cuda(self) -> bool:
        return any(m.libraries and m.libraries.cuda_libs for m in self.members)


def _kind_of(scan: WheelScan) -> Kind:
    """What a finished scan says: a torch library found, else undecided (for a wheel tied to torch,
    ``torch_tie``), else CUDA libraries needed, else neither."""
    if scan.evidence is not None:
        return "torch-abi"
    if not scan.decided and not scan.judged_by_names:
        return "unknown"
    return "cuda" if scan.needs_cuda else "agnostic"


def _symbols_missing(m: MemberScan) -> bool:
    """A torch-linked member whose symbols were not all read (not for the wheel's limits)."""
    return m.links_torch and not m.symbols_complete and m.stop != "limit"


def _undecided(bad: MemberScan) -> str:
    """Why the scan of member ``bad`` left the wheel undecided."""
    if bad.links_torch:
        why = bad.error or (f"its symbol table needs more than the first {bad.inflated} bytes" if bad.stop == "cap" else f"stopped ({bad.stop})")
        return f"could not read all the dynamic symbols of {bad.name}, which links torch: {why}"
    if bad.error:
        return f"could not tell what {bad.name} needs: {bad.error}"
    seen = ", ".join(bad.libraries.needed) if bad.libraries and bad.libraries.needed else "no library"
    return f"could not tell whether {bad.name} links torch: its first {bad.inflated} bytes name {seen}, and its dynamic section lies beyond them"


def _member_abi(m: MemberScan, rules: AbiRules) -> MemberAbi:
    assert m.libraries is not None and m.symbols is not None
    return member_abi(m.name, m.libraries, m.symbols.imports, rules)


def _torch_why(abi: WheelAbi, total: int, rules: AbiRules) -> str:
    """One line: how the torch-linked members of ``abi`` bind."""
    members = abi.members
    parts = [f"builds for torch {', '.join(abi.builds)}"] if abi.builds else []
    parts += _locked_words(members, rules) + _stable_words(members)
    return f"{len(members)} of {total} shared object(s) link torch: " + "; ".join(parts)


def _locked_words(members: tuple[MemberAbi, ...], rules: AbiRules) -> list[str]:
    """The first version-locked member's C++ imports, with an example (one of torch's own namespaces first)."""
    first = next((m for m in members if m.cxx), None)
    if first is None:
        return []
    example = next((s for s in first.cxx if entity_identifier(s) in rules.cxx_namespaces), first.cxx[0])
    return [f"{first.name} imports {len(first.cxx)} C++ torch symbol(s) (e.g. {demangle(example)})"]


def _stable_words(members: tuple[MemberAbi, ...]) -> list[str]:
    """The members that import only the C shim, with examples."""
    stable = [m for m in members if not m.cxx]
    if not stable:
        return []
    shim = sum(m.shim for m in stable)
    return [f"{len(stable)} import only the C shim ({shim} function(s), e.g. {', '.join(stable[0].shim_examples) or 'none'})"]


@dataclass(eq=False)
class _Member:
    """One member being read: mutable, private to the scanner."""

    entry: ZipEntry
    chunk: int
    next_offset: int = 0  # absolute file offset of the next byte wanted
    data_start: int | None = None  # absolute offset of the compressed data, once the local header is in
    inflater: zlib._Decompress | None = None
    buf: bytearray = field(default_factory=bytearray)
    layout: ElfLayout | None = None
    names: dict[str, None] = field(default_factory=dict)
    scanned: int = 0
    table_at: int | None = None  # where the first library name is: inside the dynamic string table
    run_checked: int = 0  # the run of strings from table_at is unbroken up to here
    read: int = 0
    libraries: ElfLibraries | None = None  # once known
    known_by: Stop | None = None  # how they became known
    symbols: DynamicSymbols | None = None  # the latest read of its dynamic symbols
    target: int = 0  # inflated bytes the member's symbol table says it needs (0: not known)
    stream: ElfStream | None = None  # reading by structure (``elfstream``), once the first bytes did not tell

    @property
    def data_end(self) -> int | None:
        return None if self.data_start is None else self.data_start + self.entry.compressed_size

    @property
    def own_name(self) -> str:
        return self.entry.name.rsplit("/", 1)[-1]


class WheelScanner:
    """Plan the reads that classify one wheel, and evaluate the bytes fed back.

    ``feed`` raises ``ZipError`` when the bytes are not a readable zip; a member that is not a
    readable ELF object makes the wheel ``unknown``, with the error in its ``MemberScan``.
    ``clock`` (seconds) measures the scanner's own work against ``time_limit``: by default the CPU
    time of the calling thread, so that other work on a busy machine is not counted against it.
    """

    def __init__(
        self,
        file_size: int,
        *,
        cap: int = DEFAULT_CAP,
        first_chunk: int = FIRST_CHUNK,
        max_chunk: int = MAX_CHUNK,
        parallel: int = 1,
        tail_bytes: int | None = None,
        max_members: int = MAX_MEMBERS,
        max_inflated: int = MAX_INFLATED,
        time_limit: float = TIME_LIMIT,
        clock: Callable[[], float] = time.thread_time,
    ) -> None:
        if file_size <= 0 or cap <= 0 or first_chunk <= 0 or parallel <= 0 or max_members <= 0 or max_inflated <= 0:
            raise ValueError("file_size, cap, first_chunk, parallel, max_members and max_inflated must be positive")
        self.file_size = file_size
        self.cap = cap
        self.first_chunk = first_chunk
        self.max_chunk = max(max_chunk, first_chunk)
        self.parallel = parallel
        self.max_members = max_members
        self.max_inflated = max_inflated
        self.time_limit = time_limit
        self.bytes_read = 0
        self.reads = 0
        self.inflated = 0  # every member together
        self.spent = 0.0  # seconds of the scanner's own work
        self._clock = clock
        self._tail_bytes = min(first_tail(file_size) if tail_bytes is None else tail_bytes, file_size)
        self._eocd: EndOfCentralDirectory | None = None
        self._held: tuple[int, bytes] | None = None  # the directory-phase blob (tail), reused for members
        self._pending: list[ZipEntry] | None = None
        self._active: list[_Member] = []
        self._done: list[MemberScan] = []
        self._evidence: Evidence | None = None
        self._limited: str | None = None
        self._metadata: ZipEntry | None = None  # the wheel's METADATA, while it is not read
        self.tie: str | None = "its METADATA was not read"  # ``torch_tie``
        self._stopped: str | None = None
        self._entries: dict[str, ZipEntry] = {}
        self._reread: set[str] = set()  # members read again by structure, from their start
        self.streamed = 0  # compressed bytes read by structure, every member together
        self._exempt = 0.0  # seconds inflating by structure: bounded by the bytes (the caller's budget), not by time_limit

    @property
    def done(self) -> bool:
        return self._pending is not None and not self._active and not self._pending and self._metadata is None

    @property
    def tied(self) -> bool:
        """Whether the wheel is known to be tied to torch (``torch_tie``, or a member links it):
        its members are read to their dynamic sections, which may take more bytes."""
        return self._tied and (self._metadata is None or self._evidence is not None) and self._pending is not None

    def stop(self, why: str) -> None:
        """End the scan here (the caller's budget is spent): every member not finished is left
        unread (stop "limit"), the METADATA too; ``result`` then says what is known."""
        self._metadata = None
        self._stopped = self._stopped or why
        if self._pending is None:
            self._pending = []
        for m in list(self._active):
            m.stream = None
            self._finish(m, "limit")
        self._done += [MemberScan(name=e.name, size=e.uncompressed_size, stop="limit", libraries=None) for e in self._pending]
        self._pending.clear()

    def next_ranges(self) -> list[tuple[int, int]]:
        """The ``(start, end)`` ranges (end exclusive) to read next; empty when the scan is done."""
        if self._eocd is None:
            return [(self.file_size - self._tail_bytes, self.file_size)]
        if self._pending is None:
            return [(self._eocd.cd_offset, self._eocd.cd_offset + self._eocd.cd_size)]
        started = self._clock()
        try:
            self._fill()
        finally:
            self._charge(started)
        first = [member_span(self._metadata, self.file_size)] if self._metadata is not None else []
        return first + _merged([self._range(m) for m in self._active])

    def feed(self, start: int, data: bytes) -> None:
        """Bytes ``[start, start + len(data))`` of the wheel, as asked by ``next_ranges`` or not."""
        self.bytes_read += len(data)
        self.reads += 1
        if self._pending is None:
            self._feed_directory(start, bytes(data))
            return
        started = self._clock()
        try:
            self._feed_metadata(start, data)
            for member in list(self._active):
                if member in self._active:
                    self._feed_member(member, start, data)
                if self._limited is None and self._clock() - started + self.spent - self._exempt > self.time_limit:
                    self._limit(f"its scan took over {self.time_limit:g} s of work")
        finally:
            self._charge(started)

    def _charge(self, started: float) -> None:
        self.spent += self._clock() - started
        if self._limited is None and self.spent - self._exempt > self.time_limit:
            self._limit(f"its scan took over {self.time_limit:g} s of work")

    def result(self) -> WheelScan:
        if not self.done:
            raise RuntimeError("the scan is not finished: read next_ranges() and feed them first")
        members = tuple(self._done)
        majors = tuple(sorted({v for m in members if m.libraries for v in m.libraries.cuda_majors}))
        scan = WheelScan(
            kind="unknown",
            members=members,
            bytes_read=self.bytes_read,
            reads=self.reads,
            file_size=self.file_size,
            evidence=self._evidence,
            cuda_majors=majors,
            limited=self._limited,
            tie=self.tie,
            stopped=self._stopped,
        )
        return replace(scan, kind=_kind_of(scan))

    # -- the zip's directory -------------------------------------------------------------------

    def _feed_directory(self, start: int, data: bytes) -> None:
        end = start + len(data)
        if self._eocd is None:
            if end != self.file_size:
                raise ValueError(f"expected the wheel's tail (bytes up to {self.file_size}), got {start}-{end}")
            try:
                self._eocd = find_eocd(data, self.file_size)
            except ZipError:
                if start > 0 and len(data) < TAIL_BYTES:
                    self._tail_bytes = min(TAIL_BYTES, self.file_size)
                    return
                raise
            if self._eocd.cd_size > MAX_CENTRAL_DIRECTORY:
                raise ZipError(f"central directory of {self._eocd.cd_size} bytes is over the {MAX_CENTRAL_DIRECTORY}-byte cap")
            self._held = (start, data)
        eocd = self._eocd
        for blob_start, blob in ((start, data), self._held or (start, data)):
            lo = eocd.cd_offset - blob_start
            if 0 <= lo and eocd.cd_offset + eocd.cd_size <= blob_start + len(blob):
                self._start_members(parse_central_directory(blob[lo : lo + eocd.cd_size], eocd))
                return

    def _feed_metadata(self, start: int, data: bytes) -> None:
        """The METADATA, when ``data`` holds it: why the wheel may link torch (``torch_tie``)."""
        entry = self._metadata
        if entry is None:
            return
        lo, hi = member_span(entry, self.file_size)
        if not start <= lo < start + len(data):
            return
        self._metadata = None
        try:
            text = inflate_member(bytes(data[lo - start : hi - start]), entry, max_size=MAX_METADATA).decode("utf-8", errors="replace")
        except ZipError:  # unreadable, or cut by the end of the bytes: tied, as for no METADATA
            return
        self.tie = torch_tie(text)
        if self._pending is not None and self.tie is not None:
            self._reopen()

    def _start_members(self, entries: list[ZipEntry]) -> None:
        meta = [e for e in entries if _METADATA.match(e.name)]
        self._metadata = meta[0] if len(meta) == 1 and meta[0].uncompressed_size <= MAX_METADATA else None
        if self._held is not None and self._metadata is not None:
            self._feed_metadata(*self._held)
        shared = [e for e in entries if is_shared_object(e.name)]
        self._entries = {e.name: e for e in shared}
        _refuse_overlaps(shared)
        shared.sort(key=lambda e: -e.uncompressed_size)
        if len(shared) > self.max_members:  # unknown whatever the members say: none is read
            self._done = [MemberScan(name=e.name, size=e.uncompressed_size, stop="limit", libraries=None) for e in shared]
            self._limited = f"{len(shared)} shared objects, over the {self.max_members} one scan reads"
            shared = []
        self._pending = shared

    # -- members -------------------------------------------------------------------------------

    def _fill(self) -> None:
        """Activate members up to ``parallel``; feed them from the held tail where it covers them."""
        assert self._pending is not None and self._eocd is not None
        while True:
            while self._pending and len(self._active) < self.parallel:
                entry = self._pending.pop(0)
                member = _Member(entry=entry, chunk=self.first_chunk, next_offset=entry.header_offset)
                self._active.append(member)
                if entry.header_offset + LOCAL_HEADER_SIZE > self._eocd.cd_offset:
                    self._finish(member, "error", error=f"local header offset {entry.header_offset} is past the members' data")
            held = self._held
            covered = [m for m in self._active if held and held[0] <= m.next_offset < held[0] + len(held[1])]
            if not held or not covered:
                return
            before = [(m, m.next_offset) for m in covered]
            for member in covered:
                if member in self._active:
                    self._feed_member(member, *held)
            if all(m in self._active and m.next_offset == at for m, at in before):
                return  # the held bytes end too soon for them: read

    def _range(self, m: _Member) -> tuple[int, int]:
        if m.stream is not None:
            assert m.data_start is not None
            span = m.stream.wanted()
            assert span is not None  # a finished stream finishes its member
            m.next_offset = m.data_start + span[0]
            return m.next_offset, min(m.data_start + span[1], self.file_size)
        if m.data_start is None:
            header = m.entry.header_offset + LOCAL_HEADER_SIZE + len(m.entry.name.encode("utf-8")) + m.entry.extra_length + LOCAL_EXTRA_SLACK
            small = m.entry.compressed_size <= SMALL_MEMBER * m.chunk  # all of it in one read: no second round trip
            end = header + (m.entry.compressed_size if small else min(m.chunk, m.entry.compressed_size))
        else:
            assert m.data_end is not None
            want = m.chunk
            if m.target > len(m.buf) and m.read and m.buf:  # what its symbol table says is left, at the ratio so far
                ratio = m.read / len(m.buf)
                if m.inflater is not None:
                    ratio = min(ratio, STRINGS_RATIO)  # the names left compress better than the tables read
                want = min(self.max_chunk, max(MIN_CHUNK, int((m.target - len(m.buf)) * ratio) + MIN_CHUNK))
            room = self.cap - len(m.buf)  # deflate never needs much more input than it gives output
            end = min(m.next_offset + min(want, room + room // 1000 + 64), m.data_end)
        return m.next_offset, min(end, self.file_size)

    def _feed_member(self, m: _Member, start: int, data: bytes) -> None:
        if not start <= m.next_offset < start + len(data):
            return
        if m.stream is not None:
            self._feed_stream(m, m.stream, start, data)
            return
        piece = memoryview(data)[m.next_offset - start :]
        if m.data_start is None:
            if len(piece) < LOCAL_HEADER_SIZE:
                if start + len(data) >= self.file_size:
                    self._finish(m, "error", error=f"local header of {m.entry.name} runs past the end of the file")
                return
            try:
                self._open_member(m, bytes(piece[:LOCAL_HEADER_SIZE]))
            except ZipError as exc:
                self._finish(m, "error", error=str(exc))
                return
            assert m.data_start is not None
            piece = piece[m.data_start - m.next_offset :] if m.data_start - m.next_offset < len(piece) else piece[:0]
            m.next_offset = m.data_start
            if m.entry.name in self._reread:
                m.stream, m.inflater = ElfStream(m.entry.method, m.entry.uncompressed_size, m.entry.compressed_size, symbols=_links_torch), None
                if piece:
                    self._feed_stream(m, m.stream, m.data_start, bytes(piece))
                return
        assert m.data_end is not None
        compressed = bytes(piece[: m.data_end - m.next_offset])
        m.next_offset += len(compressed)
        m.read += len(compressed)
        m.chunk = min(m.chunk * 2, self.max_chunk)
        if not compressed:
            return
        self._inflate(m, compressed)

    def _open_member(self, m: _Member, header: bytes) -> None:
        data_start = local_data_start(header)
        if data_start is None:
            raise ZipError(f"no local file header for {m.entry.name} at offset {m.entry.header_offset}")
        if m.entry.encrypted:
            raise ZipError(f"{m.entry.name} is encrypted")
        if m.entry.method not in (STORED, DEFLATED):
            raise ZipError(f"{m.entry.name}: compression method {m.entry.method} is not supported for range reads")
        m.data_start = m.entry.header_offset + data_start
        m.inflater = zlib.decompressobj(-15) if m.entry.method == DEFLATED else None

    def _inflate(self, m: _Member, compressed: bytes) -> None:
        room = min(self.cap - len(m.buf), self.max_inflated - self.inflated + 1)
        if m.inflater is None:
            out = compressed[:room]
        else:
            try:
                out = m.inflater.decompress(compressed, room)
            except zlib.error as exc:
                self._finish(m, "error", error=f"bad deflate data: {exc}")
                return
        m.buf += out
        self.inflated += len(out)
        if self.inflated > self.max_inflated:
            self._limit(f"over {self.max_inflated} bytes inflated")
            return
        self._evaluate(m)

    def _evaluate(self, m: _Member) -> None:
        """Stop reading ``m`` when what it needs is known, or the cap is reached."""
        size = m.entry.uncompressed_size
        whole = len(m.buf) >= size
        ended = (m.inflater is not None and m.inflater.eof) or m.next_offset >= (m.data_end or 0)
        if ended and not whole and len(m.buf) < self.cap:
            self._finish(m, "error", error=f"member data ends after {len(m.buf)} of its {size} bytes")
            return
        try:
            if m.layout is None:
                m.layout = elf.read_layout(m.buf)
            if m.libraries is None:
                self._libraries(m, whole)
            self._symbols(m, whole)
        except ElfTruncated as exc:
            if whole or len(m.buf) >= self.cap:
                self._finish(m, "error", error=str(exc))
            return
        except ElfError as exc:
            self._finish(m, "error", error=str(exc))
            return
        if m in self._active and len(m.buf) >= self.cap:
            self._finish(m, "cap")

    def _libraries(self, m: _Member, whole: bool) -> None:
        """Find the libraries ``m`` needs: exactly from ``.dynamic``, or from the names scanned."""
        assert m.layout is not None
        if whole:
            m.libraries, m.known_by = elf.needed_libraries(m.buf, file_size=len(m.buf)), "end"
            return
        dyn = m.layout.dynamic
        if dyn is not None and dyn.end <= len(m.buf):
            libs = elf.needed_libraries(m.buf)
            if libs.complete:
                m.libraries, m.known_by = libs, "dynamic"
                return
        self._scan_names(m)

    def _scan_names(self, m: _Member) -> None:
        """The library names among the bytes inflated so far (not the member's own name)."""
        if m.layout is None or m.libraries is not None:
            return
        for at, name in elf.find_sonames(m.buf, m.scanned - elf.MAX_NAME - 8):
            if name != m.own_name:
                m.names.setdefault(name, None)
            if m.table_at is None:
                m.table_at = m.run_checked = at
        table_end = None if m.table_at is None else elf.string_table_end(m.buf, m.run_checked)
        m.scanned = m.run_checked = len(m.buf)
        scanned = ElfLibraries(needed=tuple(m.names), method="scan", complete=False, table_ended=table_end is not None)
        bound = m.layout.scan_bound
        if scanned.torch_libs:
            m.libraries, m.known_by = scanned, "torch"
        elif table_end is not None:
            m.libraries, m.known_by = scanned, "strtab-end"
        elif bound is not None and len(m.buf) >= bound:
            m.libraries, m.known_by = scanned, "segment-end"

    def _symbols(self, m: _Member, whole: bool) -> None:
        """A torch-linked member reads on until its dynamic symbol table is complete; the others
        stop once their libraries are known. Either way the table tells how much more to read."""
        assert m.layout is not None
        links_torch = m.libraries is not None and bool(m.libraries.torch_libs)
        if m.libraries is not None and not links_torch:
            self._finish(m, m.known_by or "end")
            return
        if not links_torch:  # the libraries are not known yet: the table only says how far to read
            try:
                syms = elf.dynamic_symbols(m.buf)
            except ElfError:
                return
            m.target = max(syms.needed_bytes or 0, syms.strings_end + NAMES_MARGIN)
            return
        syms = elf.dynamic_symbols(m.buf, file_size=len(m.buf) if whole else None)
        m.symbols = syms
        m.target = syms.needed_bytes or 0
        if syms.complete:
            self._finish(m, "symbols")
        elif syms.needed_bytes is None:
            self._finish(m, "error", error="its dynamic symbol table could not be bounded from its first bytes")
        elif syms.needed_bytes > self.cap:
            self._finish(m, "cap", error=f"its dynamic symbol table ends past the first {self.cap} bytes ({syms.needed_bytes} needed)")

    def _read_on(self, m: _Member, stop: Stop, error: str | None) -> bool:
        """Read ``m`` by its structure instead of stopping at ``stop`` (True: it goes on): a member
        that links torch and lacks its symbols, one whose first bytes (``cap``) did not tell, and
        any member of a wheel tied to torch whose libraries are not read from its dynamic section."""
        if m.stream is not None or stop not in _READ_ON or m.data_start is None or m.entry.method not in (STORED, DEFLATED):
            return False
        if m.entry.method == DEFLATED and m.inflater is None:
            return False
        if error is not None and error.startswith(("bad deflate data", "member data ends", "local header")):
            return False
        links = bool(m.libraries and m.libraries.torch_libs) or bool(elf.torch_libs(m.names))
        if not links and not self._tied and stop != "cap":  # an untied wheel's member that gave its names is judged by them
            return False
        stream = ElfStream(m.entry.method, m.entry.uncompressed_size, m.entry.compressed_size, symbols=_links_torch)
        started = self._clock()
        stream.resume(bytes(m.buf), m.inflater, m.read)
        self._exempt += self._clock() - started
        m.stream, m.buf, m.inflater = stream, bytearray(), None
        if stream.done:
            self._stream_done(m, stream)
        return True

    @property
    def _tied(self) -> bool:
        """Whether the wheel may link torch: its METADATA or name (``torch_tie``), or a member that does."""
        return self.tie is not None or self._evidence is not None

    def _reopen(self) -> None:
        """Once the wheel is tied to torch, the members already finished on a guess from their
        names are read again, by their structure, from their start."""
        again = [d for d in self._done if d.stop in _READ_ON and d.stop != "error" and not d.links_torch and d.name not in self._reread]
        for d in again:
            self._done.remove(d)
            self._reread.add(d.name)
            assert self._pending is not None
            self._pending.append(self._entries[d.name])

    def _feed_stream(self, m: _Member, stream: ElfStream, start: int, data: bytes) -> None:
        assert m.data_start is not None
        span = stream.wanted()
        if span is None:
            return
        lo, hi = m.data_start + span[0], min(m.data_start + span[1], start + len(data))
        if lo < start or hi <= lo:
            return
        piece = bytes(data[lo - start : hi - start])
        m.read += len(piece)
        self.streamed += len(piece)
        started = self._clock()
        stream.feed(span[0], piece)
        self._exempt += self._clock() - started
        after = stream.wanted()
        if after is None:
            self._stream_done(m, stream)
        else:
            m.next_offset = m.data_start + after[0]

    def _stream_done(self, m: _Member, stream: ElfStream) -> None:
        found = stream.structure
        if found is None:
            self._finish(m, "error", error=f"reading it by its structure: {stream.error}")
            return
        m.libraries, m.symbols = found.libraries, found.symbols
        self._finish(m, "symbols" if found.libraries.torch_libs else "dynamic", structural=True)

    def _finish(self, m: _Member, stop: Stop, *, error: str | None = None, structural: bool = False) -> None:
        if m not in self._active:
            return
        if self._read_on(m, stop, error):
            return
        self._active.remove(m)
        libs = m.libraries
        if libs is None and stop in ("cap", "error", "limit") and m.names:
            libs = ElfLibraries(needed=tuple(m.names), method="scan", complete=False)
        symbols = m.symbols if libs is not None and libs.torch_libs else None
        self._done.append(
            MemberScan(
                name=m.entry.name,
                size=m.entry.uncompressed_size,
                stop=stop,
                libraries=libs,
                inflated=len(m.buf),
                read=m.read,
                error=error,
                symbols=symbols,
                structural=structural or stop in ("dynamic", "end"),
            )
        )
        if libs is not None and libs.torch_libs and self._evidence is None:
            self._evidence = Evidence(member=m.entry.name, library=libs.torch_libs[0])
            self._reopen()
        m.buf = bytearray()
        m.inflater = None
        m.stream = None

    def _limit(self, why: str) -> None:
        """The wheel's limits are reached: every member not finished stops here."""
        if not self._active and not self._pending:
            return  # nothing was left to read
        self._limited = self._limited or why
        for m in list(self._active):
            m.stream = None
            self._finish(m, "limit")
        for entry in self._pending or ():
            self._done.append(MemberScan(name=entry.name, size=entry.uncompressed_size, stop="limit", libraries=None))
        if self._pending:
            self._pending.clear()


def _links_torch(libs: ElfLibraries) -> bool:
    return bool(libs.torch_libs)


def _refuse_overlaps(entries: list[ZipEntry]) -> None:
    """Shared objects whose data overlap (several entries sharing one deflate stream: a zip bomb's
    layout) are not a wheel: ``ZipError``."""
    spans = sorted((e.header_offset, e.header_offset + LOCAL_HEADER_SIZE + len(e.name.encode("utf-8")) + e.compressed_size, e.name) for e in entries)
    for (_, end, name), (start, _, other) in zip(spans, spans[1:], strict=False):
        if start < end:
            raise ZipError(f"members {name!r} and {other!r} overlap (a zip bomb's layout, not a wheel)")


def _merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """A round's ranges, as one when the bytes between them are few (one request instead of many)."""
    if len(ranges) < 2:
        return ranges
    lo, hi = min(s for s, _ in ranges), max(e for _, e in ranges)
    if hi - lo <= sum(e - s for s, e in ranges) + MERGE_GAP:
        return [(lo, hi)]
    return ranges


def scan_wheel(read: Callable[[int, int], bytes], file_size: int, **options: object) -> WheelScan:
    """Classify a wheel through ``read(start, end)`` (end exclusive), e.g. HTTP range requests.

    ``options`` are ``WheelScanner``'s (``cap``, ``first_chunk``, ``max_chunk``, ``parallel``,
    ``tail_bytes``, ``max_members``, ``max_inflated``, ``time_limit``, ``clock``). Raises
    ``ZipError`` when the wheel is not a readable zip.
    """
    scanner = WheelScanner(file_size, **options)  # type: ignore[arg-type]
    while ranges := scanner.next_ranges():
        for start, end in ranges:
            data = read(start, end)
            if not data:
                raise ZipError(f"read({start}, {end}) returned no bytes")
            scanner.feed(start, data)
    return scanner.result()


def scan_file(fileobj: IO[bytes], file_size: int, **options: object) -> WheelScan:
    """Classify a whole wheel through an open binary file of ``file_size`` bytes (seek and read,
    never all of it at once): ``scan_wheel`` with the file as its ``read``."""

    def read(start: int, end: int) -> bytes:
        fileobj.seek(start)
        return fileobj.read(end - start)

    return scan_wheel(read, file_size, **options)


__all__ = [
    "CONCLUSIVE",
    "DEFAULT_CAP",
    "Evidence",
    "MemberScan",
    "WheelScan",
    "WheelScanner",
    "first_tail",
    "is_shared_object",
    "scan_file",
    "scan_wheel",
]
