"""Is a wheel built for one torch? Read its ``.so`` members' first bytes, never the whole wheel.

A wheel whose shared objects need ``libtorch*.so`` / ``libc10*.so`` is bound to the C++ ABI of
the torch it was built against (``torch-abi``); one whose objects need only CUDA libraries is
bound to a CUDA major (``cuda``); one with no shared object, or objects that need neither, is
``agnostic``; ``unknown`` when a member could not be told (not ELF, the cap reached first).

Pure: ``WheelScanner`` plans byte ranges and evaluates what comes back, an I/O layer does the
reading. The reads, in order: the zip's tail (end of central directory), the central directory
when the tail does not hold it, then for each ``.so`` member (largest first: kernel libraries are
the ones that link torch) its local header and first compressed bytes, in growing chunks, inflated
as they come until the member's needed libraries are known (``elf.py``: its dynamic section read,
or the string table holding the library names ended), the member's first loadable segment is all
in, or ``cap`` bytes are inflated. The scan stops at the first member that
links torch.

    scanner = WheelScanner(file_size)
    scanner.feed(tail_start, tail)            # optional: bytes already read (METADATA's tail)
    while ranges := scanner.next_ranges():
        for start, end in ranges:             # end exclusive; Range: bytes=start-(end-1)
            scanner.feed(start, fetch(start, end))
    result = scanner.result()

or ``scan_wheel(read, file_size)`` with a ``read(start, end) -> bytes`` callable.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from . import elf
from .elf import ElfError, ElfLayout, ElfLibraries, ElfTruncated
from .zipmeta import (
    _LOCAL,
    DEFLATED,
    LOCAL_EXTRA_SLACK,
    LOCAL_SIG,
    STORED,
    TAIL_BYTES,
    EndOfCentralDirectory,
    ZipEntry,
    ZipError,
    find_eocd,
    parse_central_directory,
)

Kind = Literal["torch-abi", "cuda", "agnostic", "unknown"]
# Why a member's scan ended. Conclusive: "dynamic" (DT_NEEDED read), "end" (whole member read),
# "torch" (a torch library among the scanned names), "strtab-end" (the string table holding the
# library names ended, none of them torch's), "segment-end" (the first loadable segment, which
# holds the dynamic string table, read without a torch name). Not: "cap", "error", "skipped".
Stop = Literal["dynamic", "end", "torch", "strtab-end", "segment-end", "cap", "error", "skipped"]
CONCLUSIVE: frozenset[str] = frozenset({"dynamic", "end", "torch", "strtab-end", "segment-end"})

DEFAULT_CAP = 2 * 2**20  # inflated bytes per member
FIRST_TAIL = 16 * 2**10  # first tail read; TAIL_BYTES when the end record is not in it
FIRST_CHUNK = 64 * 2**10  # compressed bytes of a member's first read; doubles per read
MAX_CHUNK = 2**20
MAX_CENTRAL_DIRECTORY = 64 * 2**20

_SHARED_OBJECT = re.compile(r"\.so(?:\.[0-9]+)*$")


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

    @property
    def conclusive(self) -> bool:
        return self.stop in CONCLUSIVE


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

    @property
    def reason(self) -> str:
        """One line of evidence, for a coupling's ``reason``."""
        if self.kind == "torch-abi" and self.evidence:
            return f"{self.evidence.member} needs {self.evidence.library}"
        if not self.members:
            return "no shared objects in the wheel"
        if self.kind == "unknown":
            bad = next(m for m in self.members if not m.conclusive)
            if bad.error:
                return f"could not tell what {bad.name} needs: {bad.error}"
            seen = ", ".join(bad.libraries.needed) if bad.libraries and bad.libraries.needed else "no library"
            return f"could not tell whether {bad.name} links torch: its first {bad.inflated} bytes name {seen}, and its dynamic section lies beyond them"
        if self.kind == "cuda":
            libs = sorted({n for m in self.members if m.libraries for n in m.libraries.cuda_libs})
            majors = ", ".join(str(v) for v in self.cuda_majors) or "unknown"
            return f"shared objects need CUDA libraries ({', '.join(libs)}; CUDA major {majors}), no torch library"
        return f"{len(self.members)} shared object(s) need neither torch nor CUDA libraries"


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

    @property
    def data_end(self) -> int | None:
        return None if self.data_start is None else self.data_start + self.entry.compressed_size


class WheelScanner:
    """Plan the reads that classify one wheel, and evaluate the bytes fed back.

    ``feed`` raises ``ZipError`` when the bytes are not a readable zip; a member that is not a
    readable ELF object makes the wheel ``unknown``, with the error in its ``MemberScan``.
    """

    def __init__(
        self, file_size: int, *, cap: int = DEFAULT_CAP, first_chunk: int = FIRST_CHUNK, max_chunk: int = MAX_CHUNK,
        parallel: int = 1, tail_bytes: int = FIRST_TAIL,
    ) -> None:
        if file_size <= 0 or cap <= 0 or first_chunk <= 0 or parallel <= 0:
            raise ValueError("file_size, cap, first_chunk and parallel must be positive")
        self.file_size = file_size
        self.cap = cap
        self.first_chunk = first_chunk
        self.max_chunk = max(max_chunk, first_chunk)
        self.parallel = parallel
        self.bytes_read = 0
        self.reads = 0
        self._tail_bytes = min(tail_bytes, file_size)
        self._eocd: EndOfCentralDirectory | None = None
        self._held: tuple[int, bytes] | None = None  # the directory-phase blob (tail), reused for members
        self._pending: list[ZipEntry] | None = None
        self._active: list[_Member] = []
        self._done: list[MemberScan] = []
        self._evidence: Evidence | None = None

    @property
    def done(self) -> bool:
        return self._pending is not None and not self._active and (not self._pending or self._evidence is not None)

    def next_ranges(self) -> list[tuple[int, int]]:
        """The ``(start, end)`` ranges (end exclusive) to read next; empty when the scan is done."""
        if self._eocd is None:
            return [(self.file_size - self._tail_bytes, self.file_size)]
        if self._pending is None:
            return [(self._eocd.cd_offset, self._eocd.cd_offset + self._eocd.cd_size)]
        self._fill()
        return [self._range(m) for m in self._active]

    def feed(self, start: int, data: bytes) -> None:
        """Bytes ``[start, start + len(data))`` of the wheel, as asked by ``next_ranges`` or not."""
        self.bytes_read += len(data)
        self.reads += 1
        if self._pending is None:
            self._feed_directory(start, bytes(data))
            return
        for member in list(self._active):
            self._feed_member(member, start, data)

    def result(self) -> WheelScan:
        if not self.done:
            raise RuntimeError("the scan is not finished: read next_ranges() and feed them first")
        skipped = [MemberScan(name=e.name, size=e.uncompressed_size, stop="skipped", libraries=None) for e in self._pending or ()]
        members = tuple(self._done + skipped)
        majors = tuple(sorted({v for m in members if m.libraries for v in m.libraries.cuda_majors}))
        kind: Kind
        if self._evidence is not None:
            kind = "torch-abi"
        elif any(not m.conclusive for m in members):
            kind = "unknown"
        elif any(m.libraries and m.libraries.cuda_libs for m in members):
            kind = "cuda"
        else:
            kind = "agnostic"
        return WheelScan(
            kind=kind, members=members, bytes_read=self.bytes_read, reads=self.reads, file_size=self.file_size,
            evidence=self._evidence, cuda_majors=majors,
        )

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

    def _start_members(self, entries: list[ZipEntry]) -> None:
        shared = [e for e in entries if is_shared_object(e.name)]
        self._pending = sorted(shared, key=lambda e: -e.uncompressed_size)

    # -- members -------------------------------------------------------------------------------

    def _fill(self) -> None:
        """Activate members up to ``parallel``; feed them from the held tail where it covers them."""
        assert self._pending is not None and self._eocd is not None
        while True:
            while self._evidence is None and self._pending and len(self._active) < self.parallel:
                entry = self._pending.pop(0)
                member = _Member(entry=entry, chunk=self.first_chunk, next_offset=entry.header_offset)
                self._active.append(member)
                if entry.header_offset + _LOCAL.size > self._eocd.cd_offset:
                    self._finish(member, "error", None, error=f"local header offset {entry.header_offset} is past the members' data")
            held = self._held
            covered = [m for m in self._active if held and held[0] <= m.next_offset < held[0] + len(held[1])]
            if not held or not covered:
                return
            before = [(m, m.next_offset) for m in covered]
            for member in covered:
                self._feed_member(member, *held)
            if all(m in self._active and m.next_offset == at for m, at in before):
                return  # the held bytes end too soon for them: read

    def _range(self, m: _Member) -> tuple[int, int]:
        if m.data_start is None:
            name_len = len(m.entry.name.encode("utf-8"))
            end = m.entry.header_offset + _LOCAL.size + name_len + m.entry.extra_length + LOCAL_EXTRA_SLACK + m.chunk
            end = min(end, m.entry.header_offset + _LOCAL.size + name_len + m.entry.extra_length + LOCAL_EXTRA_SLACK + m.entry.compressed_size)
        else:
            assert m.data_end is not None
            room = self.cap - len(m.buf)  # deflate never needs much more input than it gives output
            end = min(m.next_offset + min(m.chunk, room + room // 1000 + 64), m.data_end)
        return m.next_offset, min(end, self.file_size)

    def _feed_member(self, m: _Member, start: int, data: bytes) -> None:
        if not start <= m.next_offset < start + len(data):
            return
        piece = memoryview(data)[m.next_offset - start :]
        if m.data_start is None:
            if len(piece) < _LOCAL.size:
                if start + len(data) >= self.file_size:
                    self._finish(m, "error", None, error=f"local header of {m.entry.name} runs past the end of the file")
                return
            try:
                self._open_member(m, bytes(piece[: _LOCAL.size]))
            except ZipError as exc:
                self._finish(m, "error", None, error=str(exc))
                return
            assert m.data_start is not None
            piece = piece[m.data_start - m.next_offset :] if m.data_start - m.next_offset < len(piece) else piece[:0]
            m.next_offset = m.data_start
        assert m.data_end is not None
        compressed = bytes(piece[: m.data_end - m.next_offset])
        m.next_offset += len(compressed)
        m.read += len(compressed)
        m.chunk = min(m.chunk * 2, self.max_chunk)
        if not compressed:
            return
        self._inflate(m, compressed)

    def _open_member(self, m: _Member, header: bytes) -> None:
        f = _LOCAL.unpack_from(header, 0)
        if f[0] != LOCAL_SIG:
            raise ZipError(f"no local file header for {m.entry.name} at offset {m.entry.header_offset}")
        if m.entry.encrypted:
            raise ZipError(f"{m.entry.name} is encrypted")
        if m.entry.method not in (STORED, DEFLATED):
            raise ZipError(f"{m.entry.name}: compression method {m.entry.method} is not supported for range reads")
        m.data_start = m.entry.header_offset + _LOCAL.size + f[10] + f[11]  # name and extra lengths
        m.inflater = zlib.decompressobj(-15) if m.entry.method == DEFLATED else None

    def _inflate(self, m: _Member, compressed: bytes) -> None:
        room = self.cap - len(m.buf)
        if m.inflater is None:
            out = compressed[:room]
        else:
            try:
                out = m.inflater.decompress(compressed, room)
            except zlib.error as exc:
                self._finish(m, "error", None, error=f"bad deflate data: {exc}")
                return
        m.buf += out
        self._evaluate(m)

    def _evaluate(self, m: _Member) -> None:
        """Stop reading ``m`` when what it needs is known, or the cap is reached."""
        size = m.entry.uncompressed_size
        whole = len(m.buf) >= size
        ended = (m.inflater is not None and m.inflater.eof) or m.next_offset >= (m.data_end or 0)
        if ended and not whole and len(m.buf) < self.cap:
            self._finish(m, "error", None, error=f"member data ends after {len(m.buf)} of its {size} bytes")
            return
        try:
            if m.layout is None:
                m.layout = elf.read_layout(m.buf)
            if whole:
                self._finish(m, "end", elf.needed_libraries(m.buf, file_size=len(m.buf)))
                return
            dyn = m.layout.dynamic
            if dyn is not None and dyn.end <= len(m.buf):
                libs = elf.needed_libraries(m.buf)
                if libs.complete:
                    self._finish(m, "dynamic", libs)
                    return
        except ElfTruncated as exc:
            if whole or len(m.buf) >= self.cap:
                self._finish(m, "error", None, error=str(exc))
            return
        except ElfError as exc:
            self._finish(m, "error", None, error=str(exc))
            return
        for at, name in elf.find_sonames(m.buf, m.scanned - elf.MAX_NAME - 8):
            m.names.setdefault(name, None)
            if m.table_at is None:
                m.table_at = m.run_checked = at
        table_end = None if m.table_at is None else elf.string_table_end(m.buf, m.run_checked)
        m.scanned = m.run_checked = len(m.buf)
        scanned = ElfLibraries(needed=tuple(m.names), method="scan", complete=False, table_ended=table_end is not None)
        bound = m.layout.scan_bound
        if scanned.torch_libs:
            self._finish(m, "torch", scanned)
        elif table_end is not None:
            self._finish(m, "strtab-end", scanned)
        elif bound is not None and len(m.buf) >= bound:
            self._finish(m, "segment-end", scanned)
        elif len(m.buf) >= self.cap:
            self._finish(m, "cap", scanned)

    def _finish(self, m: _Member, stop: Stop, libs: ElfLibraries | None, *, error: str | None = None) -> None:
        self._active.remove(m)
        self._done.append(
            MemberScan(name=m.entry.name, size=m.entry.uncompressed_size, stop=stop, libraries=libs, inflated=len(m.buf), read=m.read, error=error)
        )
        if libs is not None and libs.torch_libs and self._evidence is None:
            self._evidence = Evidence(member=m.entry.name, library=libs.torch_libs[0])
            for other in list(self._active):
                self._active.remove(other)
                assert self._pending is not None
                self._pending.insert(0, other.entry)
        m.buf = bytearray()


def scan_wheel(read: Callable[[int, int], bytes], file_size: int, **options: int) -> WheelScan:
    """Classify a wheel through ``read(start, end)`` (end exclusive), e.g. HTTP range requests.

    ``options`` are ``WheelScanner``'s (``cap``, ``first_chunk``, ``max_chunk``, ``parallel``,
    ``tail_bytes``). Raises ``ZipError`` when the wheel is not a readable zip.
    """
    scanner = WheelScanner(file_size, **options)
    while ranges := scanner.next_ranges():
        for start, end in ranges:
            data = read(start, end)
            if not data:
                raise ZipError(f"read({start}, {end}) returned no bytes")
            scanner.feed(start, data)
    return scanner.result()


__all__ = [
    "CONCLUSIVE",
    "DEFAULT_CAP",
    "Evidence",
    "MemberScan",
    "WheelScan",
    "WheelScanner",
    "is_shared_object",
    "scan_wheel",
]
