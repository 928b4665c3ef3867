"""The dynamic symbol table (``.dynsym`` + ``.dynstr``) from an object's first bytes: found through ``.dynamic``, the section headers, or by validation right after the program headers (``dynamic_symbols``)."""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal, TypeVar

from .layout import (
    DT_STRSZ,
    DT_STRTAB,
    ElfError,
    ElfLayout,
    ElfTruncated,
    Segment,
    _address_offset,
    _dynamic_entries,
    read_layout,
)

PT_INTERP = 3
PT_NOTE = 4
PT_GNU_PROPERTY = 0x6474E553
DT_HASH = 4
DT_SYMTAB = 6
DT_SYMENT = 11
DT_GNU_HASH = 0x6FFFFEF5
SHT_DYNSYM = 11
SHN_UNDEF = 0
SHN_LORESERVE = 0xFF00
SHN_ABS = 0xFFF1
SHN_COMMON = 0xFFF2
SHN_XINDEX = 0xFFFF
STB_GLOBAL = 1
STB_WEAK = 2
STB_GNU_UNIQUE = 10
STT_SECTION = 3
STT_FILE = 4
STT_TLS = 6
_BINDS = frozenset({0, STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE})
_TYPES = frozenset({0, 1, 2, STT_SECTION, STT_FILE, 5, STT_TLS, 10})  # NOTYPE OBJECT FUNC SECTION FILE COMMON TLS GNU_IFUNC
_NAMED_BINDS = frozenset({STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE})

MAX_SYMBOL_NAME = 64 * 2**10  # longest symbol name read (mangled C++ names run to a few KB)
SEARCH_LIMIT = 64 * 2**20  # .dynsym is searched for in the first bytes only (in the first loadable segment)
MAX_CANDIDATES = 4096  # zero runs tried as .dynsym's null entry before giving up
NAME_SAMPLE = 16  # names checked first when a string table position is tried
PROBES = 4  # of them, tested for every position of the window at once (``_find_strings``)

SymbolMethod = Literal["dynamic", "sections", "scan", "static"]


@dataclass(frozen=True, slots=True)
class DynamicSymbols:
    """An object's dynamic symbols (``.dynsym`` + ``.dynstr``), from its first bytes.

    ``imports``: undefined, named GLOBAL/WEAK symbols (what the object needs from its libraries),
    distinct, in table order. ``exports``: defined, named GLOBAL/WEAK/UNIQUE symbols, only when asked.
    ``complete``: every entry of the table and every name were read. When not, ``needed_bytes`` is
    how many leading bytes at least finish it (the table's position is known), or ``None`` when
    more bytes would not tell (the table could not be bounded: a layout this reader does not know).
    ``method``: how the table was found: ``dynamic`` (DT_SYMTAB/DT_STRTAB of ``.dynamic``),
    ``sections`` (section headers: of the whole file, or checked against the program headers,
    ``elf.structure.read_by_sections``), ``scan`` (by validation, right after the program
    headers and notes), ``static`` (no dynamic segment: nothing imported).
    """

    imports: tuple[str, ...]
    exports: tuple[str, ...] = ()
    complete: bool = False
    needed_bytes: int | None = None
    method: SymbolMethod = "scan"
    count: int | None = None  # entries of .dynsym, the null entry included, when known
    table: int | None = None  # file offset of .dynsym
    strings: int | None = None  # file offset of .dynstr
    # .dynstr reaches at least this far: past the furthest name start seen (an estimate while the
    # table is cut: its strings taken to follow it, as GNU ld writes them)
    strings_end: int = 0


@dataclass(frozen=True, slots=True)
class _Table:
    """Where a dynamic symbol table and its strings lie, and how it was found."""

    symtab: int  # file offsets
    strtab: int | None
    count: int | None
    strsz: int | None
    method: SymbolMethod


class _Symbols:
    """Decoding of symbol entries for one object's class and byte order."""

    def __init__(self, layout: ElfLayout) -> None:
        e = ">" if layout.big_endian else "<"
        self.bits = layout.bits
        self.entry = struct.Struct(e + ("IBBHQQ" if layout.bits == 64 else "IIIBBH"))
        self.row = struct.Struct(e + ("IBxH16x" if layout.bits == 64 else "I8xBxH"))  # (name, info, shndx) alone
        self.size = self.entry.size
        self.word = 8 if layout.bits == 64 else 4
        self.u32 = struct.Struct(e + "I")
        self.zero = bytes(self.size)
        loads = layout.loads
        self.lo = min((s.vaddr for s in loads), default=0)
        self.hi = max((s.vaddr + max(s.memsz, s.filesz) for s in loads), default=0)
        self.shnum = layout.shnum

    def fields(self, data: bytes | bytearray | memoryview, pos: int) -> tuple[int, int, int, int, int]:
        """(name, info, shndx, value, size) of the entry at ``pos``."""
        f = self.entry.unpack_from(data, pos)
        if self.bits == 64:  # name, info, other, shndx, value, size
            return f[0], f[1], f[3], f[4], f[5]
        return f[0], f[3], f[5], f[1], f[2]  # name, value, size, info, other, shndx

    def rows(self, data: bytes | bytearray, pos: int, count: int) -> Iterator[tuple[int, int, int]]:
        """(name, info, shndx) of the ``count`` entries from ``pos`` (all in ``data``), unpacked in one pass."""
        return self.row.iter_unpack(memoryview(data)[pos : pos + count * self.size])

    def plausible(self, name: int, info: int, shndx: int, value: int, size: int) -> bool:
        """Whether an entry can be a real dynamic symbol (not the null entry)."""
        bind, kind = info >> 4, info & 0xF
        if bind not in _BINDS or kind not in _TYPES or size >= 1 << 40:
            return False
        if name == 0 and kind != STT_SECTION:
            return False
        return self._placed(shndx, kind, value)

    def _placed(self, shndx: int, kind: int, value: int) -> bool:
        """Whether an entry's section index and value fit the object (its segments, its sections)."""
        if shndx == SHN_UNDEF:
            return value == 0 or self.lo <= value <= self.hi
        if shndx >= SHN_LORESERVE:
            return shndx in (SHN_ABS, SHN_COMMON, SHN_XINDEX)
        if self.shnum and shndx >= self.shnum:
            return False
        return value < 1 << 32 if kind == STT_TLS else self.lo <= value <= self.hi

    def run(self, data: bytes | bytearray, p: int) -> tuple[int, bool]:
        """(entries from ``p`` that look like a symbol table, the null entry included; whether the
        bytes ended before an implausible entry did)."""
        n = 1
        view = memoryview(data)[p + self.size :]
        view = view[: len(view) - len(view) % self.size]
        wide = self.bits == 64
        for f in self.entry.iter_unpack(view):
            if not (self.plausible(f[0], f[1], f[3], f[4], f[5]) if wide else self.plausible(f[0], f[3], f[5], f[1], f[2])):
                return n, False
            n += 1
        return n, True

    def align(self, pos: int) -> int:
        return -(-pos // self.word) * self.word

    def gnu_hash(self, data: bytes | bytearray, pos: int, most: int) -> tuple[int, int] | None:
        """(symbol count, end offset) told by a ``.gnu.hash`` table at ``pos``; None when the bytes
        there are not one (or it is cut)."""
        header = self._gnu_header(data, pos, most)
        if header is None:
            return None
        nbuckets, symoffset, bloom = header
        buckets_at = pos + 16 + bloom * self.word
        chain_at = buckets_at + 4 * nbuckets
        if chain_at > len(data):
            return None
        buckets = struct.unpack_from(self.u32.format[0] + f"{nbuckets}I", data, buckets_at)
        if any(0 < b < symoffset or b > most for b in buckets):
            return None
        top = max(buckets)
        if top == 0:
            return symoffset, chain_at
        at = chain_at + 4 * (top - symoffset)
        limit = min(len(data), chain_at + 4 * (most + 1 - symoffset))
        while at + 4 <= limit:
            if self.u32.unpack_from(data, at)[0] & 1:
                count = symoffset + (at - chain_at) // 4 + 1
                return count, at + 4
            at += 4
        return None

    def _gnu_header(self, data: bytes | bytearray, pos: int, most: int) -> tuple[int, int, int] | None:
        """(buckets, first hashed symbol, bloom words) of a ``.gnu.hash`` header at ``pos`` that can be one."""
        if pos + 16 > len(data):
            return None
        nbuckets, symoffset, bloom, shift = (self.u32.unpack_from(data, pos + 4 * i)[0] for i in range(4))
        if not (0 < nbuckets <= 1 << 22 and 0 < symoffset <= most and 0 < bloom <= 1 << 22) or bloom & (bloom - 1) or shift >= 8 * self.word:
            return None
        return nbuckets, symoffset, bloom

    def sysv_hash(self, data: bytes | bytearray, pos: int, most: int) -> tuple[int, int] | None:
        """(symbol count, end offset) told by a SysV ``.hash`` table at ``pos``; None when not one."""
        if pos + 8 > len(data):
            return None
        nbucket, nchain = self.u32.unpack_from(data, pos)[0], self.u32.unpack_from(data, pos + 4)[0]
        if not (0 < nbucket <= 1 << 22 and 1 < nchain <= most):
            return None
        end = pos + 8 + 4 * (nbucket + nchain)
        if end > len(data):
            return None
        values = struct.unpack_from(self.u32.format[0] + f"{nbucket + nchain}I", data, pos + 8)
        if any(v >= nchain for v in values) or values[nbucket] != 0:  # chain[0]: the null symbol ends every chain
            return None
        return nchain, end


def dynamic_symbols(data: bytes | bytearray, *, file_size: int | None = None, exports: bool = False) -> DynamicSymbols:
    """The dynamic symbols of the ELF object whose first bytes are ``data``.

    ``.dynamic`` (often tens of MB into a kernel library) is used when it lies inside ``data``;
    the section headers when ``data`` is the whole file (``file_size``); otherwise the table is
    found by validation: ``.dynsym`` (a null entry, then plausible entries) right after the program
    headers and notes, its string table (a NUL, and every name a printable string, most of them
    after a NUL: GNU ld merges suffixes), bounded by ``.gnu.hash``/``.hash`` (GNU ld puts them
    before ``.dynsym``, lld after it) or by ``.dynstr`` following it directly (GNU ld, gold).

    Raises ``ElfTruncated`` when more bytes are needed before anything is known, ``ElfError``
    for bytes that are not a usable object (or, for the whole file, no readable table).
    """
    whole = file_size is not None and len(data) >= file_size
    layout = read_layout(data)
    dyn = layout.dynamic
    if dyn is None:
        return DynamicSymbols(imports=(), complete=True, method="static", count=0)
    syms = _Symbols(layout)
    table = _table_from_dynamic(data, layout, dyn, whole, syms)
    if whole and (table is None or table.count is None):  # the section headers tell the size .dynamic did not
        table = _table_from_sections(data, layout, syms) or table
    if table is None:
        table = _table_by_scan(data, layout, syms)
    return _read_table(data, table, syms, exports=exports, whole=whole)


def _table_from_dynamic(data: bytes | bytearray, layout: ElfLayout, dyn: Segment, whole: bool, syms: _Symbols) -> _Table | None:
    if dyn.end > len(data):
        if whole:
            raise ElfError(f"dynamic section ({dyn.filesz} bytes at {dyn.offset}) runs past the end of the file ({len(data)} bytes)")
        return None
    tags = dict(reversed(_dynamic_entries(data, layout, dyn)))  # the first entry of a tag wins
    if DT_SYMTAB not in tags:
        return _Table(symtab=0, strtab=None, count=0, strsz=0, method="dynamic")
    if tags.get(DT_SYMENT, syms.size) != syms.size:
        raise ElfError(f"DT_SYMENT {tags[DT_SYMENT]} is not the {syms.size}-byte symbol entry of a {layout.bits}-bit object")
    symtab = _address_offset(layout, tags[DT_SYMTAB], "DT_SYMTAB")
    if DT_STRTAB not in tags:
        raise ElfError("dynamic section has DT_SYMTAB but no DT_STRTAB")
    strtab = _address_offset(layout, tags[DT_STRTAB], "DT_STRTAB")
    most = max(1, (len(data) - symtab) // syms.size) if whole else SEARCH_LIMIT // syms.size
    count = _count_by_hash(data, layout, tags, syms, most)
    if count is None:
        count = _count_by_strings(data, symtab, strtab, syms)
    return _Table(symtab=symtab, strtab=strtab, count=count, strsz=tags.get(DT_STRSZ), method="dynamic")


def _count_by_strings(data: bytes | bytearray, symtab: int, strtab: int, syms: _Symbols) -> int | None:
    """The symbol count when ``.dynstr`` follows ``.dynsym`` directly (the plausible entries fill the gap exactly)."""
    gap = strtab - symtab
    if gap <= 0 or gap % syms.size or gap > len(data):
        return None
    n, _ = syms.run(data, symtab)
    return n if n * syms.size == gap else None


def _count_by_hash(data: bytes | bytearray, layout: ElfLayout, tags: dict[int, int], syms: _Symbols, most: int) -> int | None:
    """The symbol count a hash table ``.dynamic`` points to tells (``.gnu.hash`` first); None when neither does."""
    for tag, what, read in ((DT_GNU_HASH, "DT_GNU_HASH", syms.gnu_hash), (DT_HASH, "DT_HASH", syms.sysv_hash)):
        found = read(data, _address_offset(layout, tags[tag], what), most) if tag in tags else None
        if found is not None:
            return found[0]
    return None


def _table_from_sections(data: bytes | bytearray, layout: ElfLayout, syms: _Symbols) -> _Table | None:
    """``.dynsym`` and its string table from the section headers (the whole file is in ``data``)."""
    headers = _section_headers(data, layout)
    for h in headers:  # name, type, flags, addr, offset, size, link, info, addralign, entsize
        if h[1] != SHT_DYNSYM:
            continue
        if h[9] != syms.size or h[6] >= len(headers):
            raise ElfError(f"the .dynsym section header is broken (entry size {h[9]}, string table section {h[6]})")
        strings = headers[h[6]]
        if h[4] + h[5] > len(data) or strings[4] + strings[5] > len(data):
            raise ElfError("the .dynsym section or its string table runs past the end of the file")
        return _Table(symtab=h[4], strtab=strings[4], count=h[5] // h[9], strsz=strings[5], method="sections")
    return None


def _section_headers(data: bytes | bytearray, layout: ElfLayout, at: int | None = None) -> list[tuple[int, ...]]:
    """The section headers (name, type, flags, addr, offset, size, link, info, addralign, entsize
    each); none when the object has none, or they are not all in ``data``. ``at``: where the table
    is in ``data`` (``data`` is the whole file from its start by default)."""
    e = ">" if layout.big_endian else "<"
    shdr = struct.Struct(e + ("IIQQQQIIQQ" if layout.bits == 64 else "10I"))
    start = layout.shoff if at is None else at
    if not layout.shnum or layout.shentsize < shdr.size or start + layout.shnum * layout.shentsize > len(data):
        return []
    return [shdr.unpack_from(data, start + i * layout.shentsize) for i in range(layout.shnum)]


def _table_by_scan(data: bytes | bytearray, layout: ElfLayout, syms: _Symbols) -> _Table:
    """Find ``.dynsym`` and ``.dynstr`` by validation (see ``dynamic_symbols``)."""
    first = next((s for s in layout.loads if s.offset == 0), None)
    limit = min(SEARCH_LIMIT, first.end if first else SEARCH_LIMIT)
    start = max([layout.headers_end] + [s.end for s in layout.segments if s.type in (PT_INTERP, PT_NOTE, PT_GNU_PROPERTY) and s.end <= limit])
    found = _after_hash_tables(data, syms.align(start), syms, limit) or _at_a_null_entry(data, syms.align(layout.headers_end), syms, limit)
    if found is not None:
        return found
    if len(data) >= limit:
        raise ElfError(f"no dynamic symbol table found in the first {limit} bytes")
    raise ElfTruncated(f"no dynamic symbol table in the first {len(data)} bytes yet")


def _at_a_null_entry(data: bytes | bytearray, pos: int, syms: _Symbols, limit: int) -> _Table | None:
    """The first run of zeros from ``pos`` whose end may be ``.dynsym``'s null entry and is
    (``_try_candidate``); None when none is before ``limit`` or the end of the bytes (or after
    ``MAX_CANDIDATES`` tries)."""
    tried = 0
    while tried < MAX_CANDIDATES:
        q = data.find(syms.zero, pos, limit)
        if q < 0:
            return None
        z = _first_nonzero(data, q, min(limit, len(data)))
        if z is None:
            return None  # zeros up to the end of what we have: more bytes tell
        base = z - z % syms.word
        for p in range(base - syms.size, max(q, base - 2 * syms.size + syms.word) - 1, -syms.word):
            tried += 1
            table = _try_candidate(data, p, syms) if p >= q and not p % syms.word else None
            if table is not None:
                return table
        pos = syms.align(z + 1)
    return None


_NONZERO = re.compile(rb"[^\x00]")


def _first_nonzero(data: bytes | bytearray, start: int, stop: int) -> int | None:
    """The first byte in ``[start, stop)`` that is not NUL; a long run of NULs is skipped in C."""
    near = _NONZERO.search(data, start, min(stop, start + 4096))
    if near is not None:
        return near.start()
    if start + 4096 >= stop:
        return None
    rest = bytes(data[start + 4096 : stop])
    skipped = len(rest) - len(rest.lstrip(b"\x00"))
    return None if skipped == len(rest) else start + 4096 + skipped


def _after_hash_tables(data: bytes | bytearray, pos: int, syms: _Symbols, limit: int) -> _Table | None:
    """GNU ld's order: ``.hash`` and/or ``.gnu.hash`` right after the notes, ``.dynsym`` after them
    (the hash table tells its count), ``.dynstr`` right after ``.dynsym``."""
    most = limit // syms.size
    count = None
    for _ in range(2):
        found = syms.gnu_hash(data, pos, most) or syms.sysv_hash(data, pos, most)
        if found is None:
            break
        count, pos = found[0], syms.align(found[1])
    if count is None or data[pos : pos + syms.size] != syms.zero:
        return None
    if pos + 2 * syms.size <= len(data) and not syms.plausible(*syms.fields(data, pos + syms.size)):
        return None
    end = pos + count * syms.size
    if end > len(data):
        return _Table(symtab=pos, strtab=None, count=count, strsz=None, method="scan")
    names = _names(data, pos, count, syms)
    if _strings_fit(data, end, names):
        return _Table(symtab=pos, strtab=end, count=count, strsz=None, method="scan")
    return None


def _names(data: bytes | bytearray, p: int, count: int, syms: _Symbols) -> list[int]:
    """The name offsets of the entries after the null one that are in ``data``."""
    last = min(count, (len(data) - p) // syms.size)
    return [name for name, _, _ in syms.rows(data, p + syms.size, max(0, last - 1))]


def _try_candidate(data: bytes | bytearray, p: int, syms: _Symbols) -> _Table | None:
    """A ``.dynsym`` whose null entry is at ``p``, with its strings and bound; None when the bytes
    there are not one. Raises ``ElfTruncated`` when the table may run on past ``data``."""
    if p + 2 * syms.size > len(data):
        raise ElfTruncated(f"the bytes end at {len(data)}, inside what may be the dynamic symbol table")
    if not syms.plausible(*syms.fields(data, p + syms.size)):
        return None
    run, cut = syms.run(data, p)
    if cut:
        raise ElfTruncated(f"the dynamic symbol table at {p} runs on past the {len(data)} bytes given")
    names = [n for n in _names(data, p, run, syms) if n]
    if not names:
        return None
    end = p + run * syms.size
    window = min(len(data), end + 16 * run + 64 * 2**10)
    strings = _find_strings(data, end, window, names)
    if strings is None:
        if window == len(data):
            raise ElfTruncated(f"no string table for the dynamic symbols at {p} in the first {len(data)} bytes yet")
        return None
    if strings == end:  # .dynstr right after .dynsym (GNU ld, gold)
        return _Table(symtab=p, strtab=strings, count=run, strsz=None, method="scan")
    return _Table(symtab=p, strtab=strings, count=_count_by_lld_hash(data, p, run, strings, syms), strsz=None, method="scan")


def _count_by_lld_hash(data: bytes | bytearray, p: int, run: int, strings: int, syms: _Symbols) -> int | None:
    """lld's order: ``.gnu.version(_r)``, ``.gnu.hash``, ``.hash``, then ``.dynstr``. The run of
    the table at ``p`` may have taken ``.gnu.version``'s 2-byte entries (a sixth of the table at
    most) for symbols: the count of a hash table between it and its strings bounds it."""
    most = (strings - p) // syms.size
    for at in range(syms.align(p + max(2, run - run // 6 - 8) * syms.size), strings - 8, 4):
        found = (syms.gnu_hash(data, at, most) if at % syms.word == 0 else None) or syms.sysv_hash(data, at, most)
        if found is not None and found[0] >= 2 and p + found[0] * syms.size <= at and found[1] <= strings:
            return found[0]
    return None


def _find_strings(data: bytes | bytearray, start: int, stop: int, names: list[int]) -> int | None:
    """The first offset in ``[start, stop)`` where a string table holding ``names`` can begin.

    A position is tried only where a NUL is followed, at a few names' offsets on, by bytes a name
    can start with: tested for the whole window at once (byte maps, ANDed as integers), so the
    Python loop runs over those positions alone (lld puts ``.gnu.version`` first: mostly NULs)."""
    sample = sorted(set(names[:NAME_SAMPLE]) | {max(names)})
    least = min(len(sample), 4)
    stop = min(stop, len(data))
    if stop <= start:
        return None
    width = stop - start
    maybe = int.from_bytes(data[start:stop].translate(_NUL), "little")
    for probe in [n for n in sample if n][:PROBES]:  # each a name's first byte: what _strings_fit asks of it
        ahead = data[start + probe : stop + probe].translate(_NAME_START)
        maybe &= int.from_bytes(ahead + b"\x01" * (width - len(ahead)), "little")  # past the end: not known yet, not refused
    tried = maybe.to_bytes(width, "little")
    at = tried.find(1)
    while at >= 0:
        if _strings_fit(data, start + at, sample, least=least) and _strings_fit(data, start + at, names):
            return start + at
        at = tried.find(1, at + 1)
    return None


_NUL = bytes([c == 0 for c in range(256)])  # 1 for a NUL byte, else 0
_NAME_START = bytes([0x21 <= c != 0x7F for c in range(256)])  # 1 for a byte a name may start with (as _strings_fit)


def _strings_fit(data: bytes | bytearray, at: int, names: list[int], *, least: int = 0) -> bool:
    """Whether a string table at ``at`` gives every name in ``names`` that starts inside ``data`` a
    printable first character, most of them (GNU ld merges suffixes) right after a NUL; at least
    ``least`` of them must start inside ``data``."""
    if at >= len(data) or data[at] != 0:
        return False
    checked = after_nul = 0
    size = len(data)
    for name in names:
        if name == 0:
            continue
        pos = at + name
        if pos >= size:
            continue
        c = data[pos]
        if c < 0x21 or c == 0x7F:
            return False
        checked += 1
        after_nul += data[pos - 1] == 0
    return checked >= least and (checked == 0 or 2 * after_nul > checked)


def _read_table(data: bytes | bytearray, t: _Table, syms: _Symbols, *, exports: bool, whole: bool) -> DynamicSymbols:
    if t.count == 0:
        return DynamicSymbols(imports=(), complete=True, method=t.method, count=0, table=t.symtab, strings=t.strtab)
    table_end, readable = _extent(data, t, syms, whole=whole)
    names = _read_names(data, t, syms, readable, table_end, exports=exports, whole=whole)
    complete = t.count is not None and table_end <= len(data) and not names.furthest and t.strtab is not None
    needed = max(table_end, names.furthest, len(data) + 1) if not complete and t.count is not None else None
    return DynamicSymbols(
        imports=tuple(names.imported),
        exports=tuple(names.exported or ()),
        complete=complete,
        needed_bytes=needed,
        method=t.method,
        count=t.count,
        table=t.symtab,
        strings=t.strtab,
        strings_end=names.reach,
    )


@dataclass(slots=True)
class _Names:
    """The names read from a symbol table: imported, exported (None: not asked for), the start of
    the furthest name cut off by the end of the bytes, the end of the furthest name read."""

    imported: dict[str, None]
    exported: dict[str, None] | None
    furthest: int = 0
    reach: int = 0


def _read_names(data: bytes | bytearray, t: _Table, syms: _Symbols, readable: int, table_end: int, *, exports: bool, whole: bool) -> _Names:
    imported: dict[str, None] = {}
    exported: dict[str, None] | None = {} if exports else None
    furthest = reach = 0
    names_at = table_end if t.strtab is None else t.strtab  # with no string table found yet (the table is cut), GNU ld's: right after the table
    for i, (name, info, shndx) in enumerate(syms.rows(data, t.symtab + syms.size, max(0, readable - 1)), 1):
        if not name:
            continue
        reach = max(reach, names_at + name + 1)
        wanted = _wanted(info, shndx, imported, exported)
        if wanted is None:
            continue
        if t.strtab is None:
            furthest = max(furthest, table_end)
            continue
        text, end = _symbol_name(data, t, i, name, whole=whole)
        if text is None:
            furthest = max(furthest, end)
            continue
        wanted.setdefault(text, None)
        reach = max(reach, end + 1)
    return _Names(imported=imported, exported=exported, furthest=furthest, reach=reach)


def _extent(data: bytes | bytearray, t: _Table, syms: _Symbols, *, whole: bool) -> tuple[int, int]:
    """(where the table ends by its count, how many of its entries ``data`` holds); a table not
    bounded is read as far as it looks like one (never called complete). The whole file must
    hold a bounded table."""
    size = len(data)
    table_end = t.symtab + (t.count or 0) * syms.size
    if whole and t.count is None:
        raise ElfError("cannot tell the size of the dynamic symbol table (no usable DT_HASH/DT_GNU_HASH, no section headers)")
    if whole and table_end > size:
        raise ElfError(f"the dynamic symbol table at {t.symtab} runs past the end of the file ({size} bytes)")
    if t.count is None:
        return table_end, syms.run(data, t.symtab)[0] if t.symtab + syms.size <= size else 0
    return table_end, t.count if table_end <= size else max(0, (size - t.symtab) // syms.size)


_Kept = TypeVar("_Kept", dict[str, None], list[int])  # names kept, or the offsets of names to read


def _wanted(info: int, shndx: int, imported: _Kept, exported: _Kept | None) -> _Kept | None:
    """Where a named symbol goes: ``imported`` when undefined, ``exported`` (when asked) when
    defined and not a section or file symbol; None for a local one or one not asked for."""
    if info >> 4 not in _NAMED_BINDS:
        return None
    if shndx == SHN_UNDEF:
        return imported
    return exported if exported is not None and info & 0xF not in (STT_SECTION, STT_FILE) else None


def _symbol_name(data: bytes | bytearray, t: _Table, i: int, name: int, *, whole: bool) -> tuple[str | None, int]:
    """(symbol ``i``'s name, where its NUL is) or, cut off by the end of the bytes, (None, how
    many bytes at least hold it)."""
    assert t.strtab is not None
    if t.strsz is not None and name >= t.strsz:
        raise ElfError(f"symbol {i}'s name offset {name} is outside the {t.strsz}-byte string table")
    size = len(data)
    pos = t.strtab + name
    end = data.find(b"\x00", pos, min(size, pos + MAX_SYMBOL_NAME + 1)) if pos < size else -1
    if end >= 0:
        return bytes(data[pos:end]).decode("utf-8", errors="replace"), end
    if pos + MAX_SYMBOL_NAME < size:
        raise ElfError(f"symbol {i}'s name at {pos} is longer than {MAX_SYMBOL_NAME} bytes")
    if whole:
        raise ElfError(f"symbol {i}'s name at {pos} runs past the end of the file")
    return None, pos + 2
