"""One member being read from its first bytes: where its next read lies, and what its bytes so far tell (its libraries, its dynamic symbols), as an ``Outcome`` the scanner finishes it with."""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import elf
from ..elf import DynamicSymbols, ElfError, ElfLayout, ElfLibraries, ElfTruncated
from ..elfstream import ElfStream
from ..inflate import Inflater, raw_inflater
from ..zipmeta import DEFLATED, LOCAL_EXTRA_SLACK, LOCAL_HEADER_SIZE, STORED, ZipEntry, ZipError, local_data_start
from .result import MIN_CHUNK, NAMES_MARGIN, SMALL_MEMBER, STRINGS_RATIO, Stop


@dataclass(eq=False)
class Member:
    """One member being read: mutable, the scanner's own."""

    entry: ZipEntry
    chunk: int
    next_offset: int = 0  # absolute file offset of the next byte wanted
    data_start: int | None = None  # absolute offset of the compressed data, once the local header is in
    inflater: Inflater | None = None
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
    aimed: bool = False  # its symbol table was looked for to aim its reads (``_aim``)
    stream: ElfStream | None = None  # reading by structure (``elfstream``), once the first bytes did not tell

    @property
    def data_end(self) -> int | None:
        return None if self.data_start is None else self.data_start + self.entry.compressed_size

    @property
    def own_name(self) -> str:
        return self.entry.name.rsplit("/", 1)[-1]


@dataclass(frozen=True, slots=True)
class Outcome:
    """Why a member's reading ends (its ``MemberScan.stop``), with the error when there is one."""

    stop: Stop
    error: str | None = None


def member_range(m: Member, *, cap: int, max_chunk: int, file_size: int, reach: int | None = None) -> tuple[int, int]:
    """The ``(start, end)`` range (end exclusive) ``m`` reads next; ``reach``: the compressed bytes
    a deflated member read by its structure asks for at once (``ElfStream.wanted``)."""
    if m.stream is not None:
        assert m.data_start is not None
        span = m.stream.wanted(reach)
        assert span is not None  # a finished stream finishes its member
        m.next_offset = m.data_start + span[0]
        return m.next_offset, min(m.data_start + span[1], file_size)
    end = _header_read_end(m) if m.data_start is None else _data_read_end(m, cap=cap, max_chunk=max_chunk)
    return m.next_offset, min(end, file_size)


def _header_read_end(m: Member) -> int:
    """Where the first read of ``m`` ends: its local header and a first chunk (all of a small member)."""
    header = m.entry.header_offset + LOCAL_HEADER_SIZE + len(m.entry.name.encode("utf-8")) + m.entry.extra_length + LOCAL_EXTRA_SLACK
    small = m.entry.compressed_size <= SMALL_MEMBER * m.chunk  # all of it in one read: no second round trip
    return header + (m.entry.compressed_size if small else min(m.chunk, m.entry.compressed_size))


def _data_read_end(m: Member, *, cap: int, max_chunk: int) -> int:
    """Where the next read of the data of ``m`` ends: a chunk, or what its symbol table says is left."""
    assert m.data_end is not None
    want = m.chunk
    if m.target > len(m.buf) and m.read and m.buf:  # what its symbol table says is left, at the ratio so far
        ratio = m.read / len(m.buf)
        if m.inflater is not None:
            ratio = min(ratio, STRINGS_RATIO)  # the names left compress better than the tables read
        want = min(max_chunk, max(MIN_CHUNK, int((m.target - len(m.buf)) * ratio) + MIN_CHUNK))
    room = cap - len(m.buf)  # deflate never needs much more input than it gives output
    return min(m.next_offset + min(want, room + room // 1000 + 64), m.data_end)


def open_member(m: Member, header: bytes) -> None:
    """Its local ``header`` read: where the data of ``m`` starts, and its inflater. ``ZipError``
    for a member that cannot be read by ranges."""
    data_start = local_data_start(header)
    if data_start is None:
        raise ZipError(f"no local file header for {m.entry.name} at offset {m.entry.header_offset}")
    if m.entry.encrypted:
        raise ZipError(f"{m.entry.name} is encrypted")
    if m.entry.method not in (STORED, DEFLATED):
        raise ZipError(f"{m.entry.name}: compression method {m.entry.method} is not supported for range reads")
    m.data_start = m.entry.header_offset + data_start
    m.inflater = raw_inflater() if m.entry.method == DEFLATED else None


def evaluate(m: Member, cap: int) -> Outcome | None:
    """Whether reading ``m`` ends here (what it needs is known, or the ``cap`` is reached): the
    outcome; None when it reads on."""
    whole = len(m.buf) >= m.entry.uncompressed_size
    short = _cut_short(m, whole, cap)
    if short is not None:
        return short
    try:
        outcome = _what_it_tells(m, whole, cap)
    except ElfTruncated as exc:
        return Outcome("error", str(exc)) if whole or len(m.buf) >= cap else None
    except ElfError as exc:
        return Outcome("error", str(exc))
    if outcome is None and len(m.buf) >= cap:
        return Outcome("cap")
    return outcome


def _cut_short(m: Member, whole: bool, cap: int) -> Outcome | None:
    """An error when the member's data ended before the member (and before the ``cap``)."""
    ended = (m.inflater is not None and m.inflater.eof) or m.next_offset >= (m.data_end or 0)
    if ended and not whole and len(m.buf) < cap:
        return Outcome("error", f"member data ends after {len(m.buf)} of its {m.entry.uncompressed_size} bytes")
    return None


def _what_it_tells(m: Member, whole: bool, cap: int) -> Outcome | None:
    """The member's layout, libraries and symbols as far as its bytes so far tell them."""
    if m.layout is None:
        m.layout = elf.read_layout(m.buf)
    if m.libraries is None:
        _libraries(m, whole)
    return _symbols(m, whole, cap)


def _libraries(m: Member, whole: bool) -> None:
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
    _scan_names(m)


def _scan_names(m: Member) -> None:
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
    known_by = _known_by_names(scanned, m.layout.scan_bound, len(m.buf))
    if known_by is not None:
        m.libraries, m.known_by = scanned, known_by


def _known_by_names(scanned: ElfLibraries, bound: int | None, inflated: int) -> Stop | None:
    """Whether the names scanned tell the libraries, and how: a torch library among them, the
    string table holding them ended, or the first loadable segment (``bound``) read; None: read on."""
    if scanned.torch_libs:
        return "torch"
    if scanned.table_ended:
        return "strtab-end"
    if bound is not None and inflated >= bound:
        return "segment-end"
    return None


def _symbols(m: Member, whole: bool, cap: int) -> Outcome | None:
    """A torch-linked member reads on until its dynamic symbol table is complete; the others
    stop once their libraries are known. Either way the table tells how much more to read."""
    assert m.layout is not None
    links_torch = m.libraries is not None and bool(m.libraries.torch_libs)
    if m.libraries is not None and not links_torch:
        return Outcome(m.known_by or "end")
    if not links_torch:  # the libraries are not known yet: the table only says how far to read
        _aim(m)
        return None
    syms = elf.dynamic_symbols(m.buf, file_size=len(m.buf) if whole else None)
    m.symbols = syms
    m.target = syms.needed_bytes or 0
    return _symbols_outcome(syms, cap)


def _aim(m: Member) -> None:
    """How far to read a member whose libraries are not known yet: as far as its symbol table's
    names and the library names after them (``target``), when the table can be read. A table its
    first bytes did not show is not looked for again: each search goes over every byte inflated
    so far, on every read (libgfortran's six searches in numpy's and scipy's wheels, 2-6 ms each;
    a scan's Python spent ~15% in them), and its reads grow by doubling instead."""
    if m.aimed and not m.target:
        return
    m.aimed = True
    try:
        syms = elf.dynamic_symbols(m.buf)
    except ElfError:
        return
    m.target = max(syms.needed_bytes or 0, syms.strings_end + NAMES_MARGIN)


def _symbols_outcome(syms: DynamicSymbols, cap: int) -> Outcome | None:
    """Whether a torch-linked member's symbols end its reading: read whole, not to be bounded, or past the ``cap``."""
    if syms.complete:
        return Outcome("symbols")
    if syms.needed_bytes is None:
        return Outcome("error", "its dynamic symbol table could not be bounded from its first bytes")
    if syms.needed_bytes > cap:
        return Outcome("cap", f"its dynamic symbol table ends past the first {cap} bytes ({syms.needed_bytes} needed)")
    return None
