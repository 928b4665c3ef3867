"""What a wheel's scan found (``MemberScan`` per shared object, ``WheelScan`` for the wheel, judged with ``AbiRules``), why a member's scan stopped, and the limits a scan keeps."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Literal

from ...data.rules import AbiRules
from ...model.abi import CUDA, NONE, READ_NAMES, READ_START, TORCH, UNKNOWN, MemberAbi, WheelAbi
from ..abi import demangle, entity_identifier, member_abi
from ..elf import DynamicSymbols, ElfLibraries

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
READ_ON: frozenset[str] = frozenset({"cap", "error", "strtab-end", "segment-end"})  # stops a structural read may do better

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
MERGE_GAP = 64 * 2**10  # ranges of one round at most this far apart are read as one (``scanner._merged``)
MERGE_MOST = 8 * 2**20  # ... while the span read stays at most this large
READ_THROUGH = 2 * 2**20  # a streamed range is read on to a wanted byte at most this far ahead (a new request costs more)
SMALL_MEMBER = 2  # a member at most this many first chunks long is read whole at once

_SHARED_OBJECT = re.compile(r"\.so(?:\.[0-9]+)*$")
METADATA_MEMBER = re.compile(r"^[^/]+\.dist-info/METADATA$")
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


def may_be_scanned(raw_name: bytes) -> bool:
    """``parse_central_directory``'s ``names`` for a scan: every entry that may be a shared object
    or the METADATA (their names' ASCII parts are the same bytes in UTF-8 and cp437)."""
    return b".so" in raw_name or raw_name.endswith(b"/METADATA")


def is_shared_object(name: str) -> bool:
    """A zip member named like a shared object: ``*.so``, ``*.so.12``, ``*.so.1.2.3``."""
    return not name.endswith("/") and bool(_SHARED_OBJECT.search(name.rsplit("/", 1)[-1]))


@dataclass(frozen=True, slots=True)
class MemberScan:
    """What the scan read of one member and why it stopped."""

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
    """The member and the torch library that made a wheel's verdict."""

    member: str
    library: str


@dataclass(frozen=True, slots=True)
class WheelScan:
    """A wheel's scan: its kind, the members considered and what reading them cost."""

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
        bad = self._undecided_member(symbols=symbols)
        if bad is None:
            return f"not every shared object was scanned: {self.limited or self.stopped or 'the scan stopped early'}"
        return _undecided(bad)

    def _undecided_member(self, *, symbols: bool) -> MemberScan | None:
        """The first member whose scan did not tell (``symbols``: or whose symbols are missing)."""
        bad = next((m for m in self.members if not m.conclusive and m.stop != "limit"), None)
        if bad is None and symbols:
            bad = next((m for m in self.members if _symbols_missing(m)), None)
        return bad

    def abi(self, rules: AbiRules) -> WheelAbi:
        """What the shared objects import, judged by ``rules`` (``model/abi.py``): ``TORCH`` (some
        member links torch: every such member with its imports), ``CUDA``, ``NONE``, or ``UNKNOWN``
        when a member's libraries, or a torch-linked member's symbols, could not be read (or the
        wheel's limits stopped the scan). A wheel nothing ties to torch judged by the names in its
        members' first bytes (``judged_by_names``) is ``CUDA`` or ``NONE`` read ``names``: unverified."""
        majors = self.cuda_majors
        torch_members = [m for m in self.members if m.links_torch]
        described = tuple(_member_abi(m, rules) for m in torch_members if m.symbols_complete)
        if (not self.decided and not self.judged_by_names) or len(described) < len(torch_members):
            return WheelAbi(kind=UNKNOWN, why=self._unknown_reason(symbols=True), members=described, cuda_majors=majors)
        if described:
            linked = WheelAbi(kind=TORCH, why="", members=described, cuda_majors=majors)
            return replace(linked, why=_torch_why(linked, len(self.members), rules))
        return self._abi_without_torch()

    def _abi_without_torch(self) -> WheelAbi:
        """``abi`` of a decided wheel none of whose members links torch: ``CUDA`` or ``NONE``."""
        majors = self.cuda_majors
        if not self.members:
            return WheelAbi(kind=NONE, why="no shared objects in the wheel")
        read = READ_START if self.decided else READ_NAMES  # judged by the names in first bytes (``judged_by_names``): unverified
        if not self.needs_cuda:
            return WheelAbi(kind=NONE, why=self._plain_reason(), read=read)
        # each member that needs CUDA, with its majors: twins per CUDA major (rules.abi) are told apart by them
        cuda = tuple(MemberAbi(name=m.name, cuda_majors=m.libraries.cuda_majors) for m in self.members if m.libraries and m.libraries.cuda_libs)
        return WheelAbi(kind=CUDA, why=self._plain_reason(), members=cuda, cuda_majors=majors, read=read)

    @property
    def decided(self) -> bool:
        """Whether every member's libraries are known (and the wheel's limits did not stop the scan)."""
        return not self.limited and not self.stopped and all(m.conclusive for m in self.members)

    @property
    def needs_cuda(self) -> bool:
        return any(m.libraries and m.libraries.cuda_libs for m in self.members)


def kind_of(scan: WheelScan) -> Kind:
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
    examples = next((m.shim_examples for m in stable if m.shim_examples), ())  # the first member with any (a member may link torch and import none)
    return [f"{len(stable)} import only the C shim ({shim} function(s)" + (f", e.g. {', '.join(examples)})" if examples else ")")]
