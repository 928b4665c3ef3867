"""By structure: the regions the loader reads (``PT_DYNAMIC`` and the tables it points to), wherever they lie in the file, asked for as ``Need`` s until ``read_structure`` has the needed libraries and, when asked, the dynamic symbols."""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .layout import (
    DT_NEEDED,
    DT_NULL,
    DT_SONAME,
    DT_STRSZ,
    DT_STRTAB,
    ElfError,
    ElfLayout,
    ElfLibraries,
    Segment,
    _address_offset,
    _string,
    program_header_table,
    read_layout,
)
from .symbols import (
    DT_GNU_HASH,
    DT_HASH,
    DT_SYMENT,
    DT_SYMTAB,
    SHT_DYNSYM,
    DynamicSymbols,
    SymbolMethod,
    _section_headers,
    _Symbols,
    _wanted,
)

HEAD_BYTES = 4096  # the ELF header and program headers of every real object fit here
CHAIN_STEP = 4096  # bytes of .gnu.hash chains asked for at a time


@dataclass(frozen=True, slots=True)
class Need:
    """Bytes ``[offset, offset + size)`` of the object that the reader must have to go on."""

    offset: int
    size: int

    @property
    def end(self) -> int:
        return self.offset + self.size


@dataclass(frozen=True, slots=True)
class Structure:
    """What ``read_structure`` read: the needed libraries (always complete; ``read_by_sections``
    reads none and says so, ``complete=False``) and, when asked, the dynamic symbols (complete);
    ``regions``: the file ranges it used."""

    libraries: ElfLibraries
    symbols: DynamicSymbols | None
    regions: tuple[tuple[int, int], ...] = ()


def layout_from(fetch: Callable[[int, int], bytes | None], size: int) -> ElfLayout | Need:
    """The ELF header and program headers of an object of ``size`` bytes, wherever the program
    headers lie: in its first ``HEAD_BYTES`` as linkers put them, or anywhere else (patchelf moves
    them into the segment it adds near the end, as in the aarch64 builds of torch: 419 MB into
    ``libtorch_cuda.so``). ``fetch`` as ``read_structure``'s: the ``Need`` to fetch first when
    the bytes are not at hand. Raises ``ElfError`` for a table past the object's end."""
    head = fetch(0, min(size, HEAD_BYTES))
    if head is None:
        return Need(0, min(size, HEAD_BYTES))
    offset, length = program_header_table(head)
    if offset + length <= len(head):
        return read_layout(head)
    if offset + length > size:
        raise ElfError(f"the program headers ({length} bytes at {offset}) run past the end of the {size}-byte object")
    table = fetch(offset, length)
    return Need(offset, length) if table is None else read_layout(head, table=table)


def read_structure(
    layout: ElfLayout,
    fetch: Callable[[int, int], bytes | None],
    size: int,
    *,
    symbols: bool | Callable[[ElfLibraries], bool] = True,
    exports: bool = False,
) -> Structure | Need:
    """The needed libraries and dynamic symbols of an object, read as the loader reads them:
    ``PT_DYNAMIC`` from the program headers, then the string table, the hash table (its symbol
    count) and the symbol table its entries point to, each virtual address mapped to a file
    offset through the ``PT_LOAD`` segments. ``fetch(offset, size)`` gives those bytes of the file,
    or None when they are not at hand: the answer is then the ``Need`` to fetch first (call again
    with it at hand); ``size``: the object's size (a region past it is an error). ``symbols``: whether to read the symbol table (a callable decides from the
    libraries). Raises ``ElfError`` when the structure is broken (addresses outside every
    segment, no way to bound the table)."""
    dyn = layout.dynamic
    if dyn is None:
        empty = DynamicSymbols(imports=(), complete=True, method="static", count=0)
        return Structure(ElfLibraries(needed=(), method="dynamic", complete=True), empty)
    reader = _Reader(layout, fetch, size)
    raw = reader.region(dyn.offset, dyn.filesz, "the dynamic section")
    if isinstance(raw, Need):
        return raw
    tags, needed = _dynamic_tags(raw, layout, dyn)
    if _no_strings(tags, needed):
        return reader.structure(ElfLibraries(needed=(), method="dynamic", complete=True), _NO_SYMBOLS)
    strings = _read_strings(reader, tags)
    if isinstance(strings, Need):
        return strings
    libs = _libraries(strings, needed, tags.get(DT_SONAME))
    if not (symbols(libs) if callable(symbols) else symbols):
        return reader.structure(libs, None)
    found = _read_symbols(reader, tags, strings, exports=exports) if DT_SYMTAB in tags else _NO_SYMBOLS
    return found if isinstance(found, Need) else reader.structure(libs, found)


def _no_strings(tags: dict[int, int], needed: list[int]) -> bool:
    """Whether the dynamic section has no string table (then it may name no library and no
    symbol table: ``ElfError``)."""
    if DT_STRTAB in tags and DT_STRSZ in tags:
        return False
    if needed or DT_SYMTAB in tags:
        raise ElfError("dynamic section has DT_NEEDED or DT_SYMTAB entries but no DT_STRTAB/DT_STRSZ")
    return True


def _dynamic_tags(raw: bytes, layout: ElfLayout, dyn: Segment) -> tuple[dict[int, int], list[int]]:
    """The entries of the dynamic section ``raw`` (read from ``dyn``): each tag's value (the first
    entry of a tag wins, as for the loader), and the string offsets of its ``DT_NEEDED`` entries."""
    entries = _entries_of(raw, layout)
    if not entries and dyn.filesz:
        raise ElfError(f"the dynamic section ({dyn.filesz} bytes at {dyn.offset}) is empty: zeros where the loader reads its entries")
    tags: dict[int, int] = {}
    for tag, value in entries:
        tags.setdefault(tag, value)
    return tags, [v for t, v in entries if t == DT_NEEDED]


def _libraries(strings: _Strings, needed: list[int], soname: int | None) -> ElfLibraries:
    """The needed libraries (and the soname) named at those offsets of the string table."""
    return ElfLibraries(
        needed=tuple(_string(strings.table, o) for o in needed),
        method="dynamic",
        complete=True,
        soname=_string(strings.table, soname) if soname is not None else None,
    )


_NO_SYMBOLS = DynamicSymbols(imports=(), complete=True, method="dynamic", count=0)


class _Reader:
    """The object as ``read_structure`` reads it: regions asked of ``fetch`` within its ``size``,
    and the ranges it used (``regions``, in the order they were read)."""

    def __init__(self, layout: ElfLayout, fetch: Callable[[int, int], bytes | None], size: int) -> None:
        self.layout = layout
        self._fetch = fetch
        self.size = size
        self.regions: list[tuple[int, int]] = []

    def get(self, offset: int, n: int, what: str) -> bytes | None:
        """Bytes ``[offset, offset + n)``, None when not at hand; an ``ElfError`` past the object's end."""
        if offset + n > self.size:
            raise ElfError(f"{what} ({n} bytes at {offset}) runs past the end of the {self.size}-byte object")
        return self._fetch(offset, n)

    def region(self, offset: int, n: int, what: str) -> bytes | Need:
        """``get``, the range recorded as used; the ``Need`` to fetch when not at hand."""
        data = self.get(offset, n, what)
        if data is None:
            return Need(offset, n)
        self.regions.append((offset, offset + n))
        return data

    def structure(self, libraries: ElfLibraries, symbols: DynamicSymbols | None) -> Structure:
        return Structure(libraries, symbols, tuple(self.regions))


@dataclass(frozen=True, slots=True)
class _Strings:
    """The dynamic string table: its file offset, size and bytes."""

    at: int
    size: int
    table: bytes


def _read_strings(reader: _Reader, tags: dict[int, int]) -> _Strings | Need:
    """The string table ``DT_STRTAB``/``DT_STRSZ`` point to."""
    at, size = _address_offset(reader.layout, tags[DT_STRTAB], "DT_STRTAB"), tags[DT_STRSZ]
    if size > MAX_TABLE:
        raise ElfError(f"DT_STRSZ {size} is over the {MAX_TABLE}-byte bound")
    table = reader.region(at, size, "the string table")
    return table if isinstance(table, Need) else _Strings(at, size, table)


def _read_symbols(reader: _Reader, tags: dict[int, int], strings: _Strings, *, exports: bool) -> DynamicSymbols | Need:
    """The dynamic symbol table ``DT_SYMTAB`` points to, as long as its hash table says."""
    layout = reader.layout
    syms = _Symbols(layout)
    if tags.get(DT_SYMENT, syms.size) != syms.size:
        raise ElfError(f"DT_SYMENT {tags[DT_SYMENT]} is not the {syms.size}-byte symbol entry of a {layout.bits}-bit object")
    sym_at = _address_offset(layout, tags[DT_SYMTAB], "DT_SYMTAB")
    count = _structure_count(reader, tags, syms)
    if isinstance(count, Need):
        return count
    entries_bytes = reader.region(sym_at, count * syms.size, "the dynamic symbol table")
    if isinstance(entries_bytes, Need):
        return entries_bytes
    return _named(syms, entries_bytes, count, sym_at, strings, exports=exports, method="dynamic")


def _named(syms: _Symbols, entries: bytes, count: int, at: int, strings: _Strings, *, exports: bool, method: SymbolMethod) -> DynamicSymbols:
    """The symbols of the ``count`` entries ``entries`` (the table at ``at``), named from ``strings``.

    What ``_wanted`` keeps, by the offsets of their names first (a torch library's 76,000 entries
    in a loop that names nothing), then each distinct offset named once: from the table decoded
    once when it is ASCII (mangled names are), else name by name as ``_string`` does. A table an
    offset is outside of, or not ending in NUL, is named entry by entry, failing where
    ``_string`` fails."""
    imported: list[int] = []
    exported: list[int] = []
    for name, info, shndx in syms.rows(entries, syms.size, max(0, count - 1)):
        wanted = _wanted(info, shndx, imported, exported if exports else None) if name else None
        if wanted is not None:
            wanted.append(name)
    table = strings.table
    if max(imported, default=0) >= len(table) or max(exported, default=0) >= len(table) or ((imported or exported) and table[-1:] != b"\0"):
        return _named_one_by_one(syms, entries, count, at, strings, exports=exports, method=method)
    name_of = _names_of(table)
    return _complete(map(name_of, dict.fromkeys(imported)), map(name_of, dict.fromkeys(exported)), count, at, strings, method)


def _names_of(table: bytes) -> Callable[[int], str]:
    """The name at an offset of ``table`` (inside it, the table ending in NUL), as ``_string``
    gives it."""
    if table.isascii():
        text = table.decode("ascii")
        return lambda offset: text[offset : text.index("\0", offset)]
    return lambda offset: _string(table, offset)


def _named_one_by_one(syms: _Symbols, entries: bytes, count: int, at: int, strings: _Strings, *, exports: bool, method: SymbolMethod) -> DynamicSymbols:
    """``_named`` entry by entry (each name read, or failed, as ``_string`` does)."""
    imported: dict[str, None] = {}
    exported: dict[str, None] | None = {} if exports else None
    for name, info, shndx in syms.rows(entries, syms.size, max(0, count - 1)):
        wanted = _wanted(info, shndx, imported, exported) if name else None
        if wanted is not None:
            wanted.setdefault(_string(strings.table, name), None)
    return _complete(imported, exported or (), count, at, strings, method)


def _complete(imports: Iterable[str], exports: Iterable[str], count: int, at: int, strings: _Strings, method: SymbolMethod) -> DynamicSymbols:
    """The whole table's symbols: ``imports`` and ``exports`` named (each once, in order) from
    ``strings``, of the ``count`` entries at ``at``."""
    return DynamicSymbols(
        imports=tuple(dict.fromkeys(imports)),
        exports=tuple(dict.fromkeys(exports)),
        complete=True,
        method=method,
        count=count,
        table=at,
        strings=strings.at,
        strings_end=strings.at + strings.size,
    )


SHT_STRTAB, SHT_DYNAMIC = 3, 6


def sections_at_end(layout: ElfLayout, size: int) -> bool:
    """Whether ``layout``'s section header table lies in the second half of the object, inside a
    loadable segment: where patchelf writes it, at the start of the segment it adds for the tables
    it moves (torch's own libraries: ``read_by_sections``)."""
    end = layout.shoff + layout.shnum * layout.shentsize
    return bool(layout.shnum) and size // 2 <= layout.shoff and end <= size and any(s.offset <= layout.shoff and end <= s.end for s in layout.loads)


def read_by_sections(layout: ElfLayout, fetch: Callable[[int, int], bytes | None], size: int, *, exports: bool = False) -> Structure | Need | None:
    """The dynamic symbols of an object whose section headers lie beside its moved tables
    (``sections_at_end``), through its ``.dynsym`` section header, checked against the program
    headers: the ``.dynamic`` section is where ``PT_DYNAMIC`` is, as long, and the symbol and
    string tables' addresses map to their offsets through the loadable segments holding them. What
    the loader reads is then where the section headers say. None when they are elsewhere, or
    disagree (``read_structure`` reads the object then); a ``Need`` as ``read_structure``'s. The
    needed libraries are not read (``complete=False``): for a library's exports only."""
    dyn = layout.dynamic
    if dyn is None or not sections_at_end(layout, size):
        return None
    reader = _Reader(layout, fetch, size)
    raw = reader.region(layout.shoff, layout.shnum * layout.shentsize, "the section headers")
    if isinstance(raw, Need):
        return raw
    syms = _Symbols(layout)
    tables = _agreeing_tables(_section_headers(raw, layout, at=0), layout, dyn, size, syms)
    if tables is None:
        return None
    table, linked = tables
    strings = reader.region(linked[4], linked[5], "the string table")
    if isinstance(strings, Need):
        return strings
    entries = reader.region(table[4], table[5], "the dynamic symbol table")
    if isinstance(entries, Need):
        return entries
    found = _named(syms, entries, table[5] // syms.size, table[4], _Strings(linked[4], linked[5], strings), exports=exports, method="sections")
    return reader.structure(ElfLibraries(needed=(), method="dynamic", complete=False), found)


def _agreeing_tables(
    headers: list[tuple[int, ...]], layout: ElfLayout, dyn: Segment, size: int, syms: _Symbols
) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """The ``.dynsym`` section header and its string table's (each: name, type, flags, addr,
    offset, size, link, info, addralign, entsize), when the headers agree with the program headers
    (see ``read_by_sections``); None when they do not."""
    pair = _symbol_sections(headers, syms)
    if pair is None or [(h[4], h[5]) for h in headers if h[1] == SHT_DYNAMIC] != [(dyn.offset, dyn.filesz)]:
        return None
    return pair if all(_mapped(h, layout, size) for h in pair) else None


def _symbol_sections(headers: list[tuple[int, ...]], syms: _Symbols) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """The ``.dynsym`` section header, of whole entries, and the string table's it links to."""
    table = next((h for h in headers if h[1] == SHT_DYNSYM), None)
    if table is None or table[6] >= len(headers) or table[9] != syms.size or not table[5] or table[5] % syms.size:
        return None
    linked = headers[table[6]]
    return (table, linked) if linked[1] == SHT_STRTAB else None


def _mapped(header: tuple[int, ...], layout: ElfLayout, size: int) -> bool:
    """Whether a section header's address maps to its offset through a loadable segment, and the
    section lies inside the object."""
    return layout.file_offset(header[3]) == header[4] and header[4] + header[5] <= size and header[5] <= MAX_TABLE


MAX_TABLE = 1 << 31  # a string or symbol table larger than this is garbage


def table_offsets(layout: ElfLayout, dynamic: bytes) -> tuple[int, ...]:
    """The file offsets of the tables a ``.dynamic`` (given as its bytes) points to: string,
    symbol and hash tables, in file order (addresses in no loadable segment left out)."""
    tags = (DT_STRTAB, DT_SYMTAB, DT_GNU_HASH, DT_HASH)
    found = {layout.file_offset(v) for t, v in _entries_of(dynamic, layout) if t in tags}
    return tuple(sorted(o for o in found if o is not None))


def _entries_of(raw: bytes, layout: ElfLayout) -> list[tuple[int, int]]:
    """``(tag, value)`` of each entry of a ``.dynamic`` given as its own bytes, up to ``DT_NULL``."""
    entry = struct.Struct((">" if layout.big_endian else "<") + ("iI" if layout.bits == 32 else "qQ"))
    out = []
    for pos in range(0, len(raw) - entry.size + 1, entry.size):
        tag, value = entry.unpack_from(raw, pos)
        if tag == DT_NULL:
            break
        out.append((tag, value))
    return out


def _structure_count(reader: _Reader, tags: dict[int, int], syms: _Symbols) -> int | Need:
    """The symbol count the hash table says (``.gnu.hash`` first, then ``.hash``)."""
    if DT_GNU_HASH in tags:
        return _gnu_hash_count(reader, _address_offset(reader.layout, tags[DT_GNU_HASH], "DT_GNU_HASH"), syms)
    if DT_HASH in tags:
        at = _address_offset(reader.layout, tags[DT_HASH], "DT_HASH")
        head = reader.get(at, 8, "the .hash header")
        if head is None:
            return Need(at, 8)
        reader.regions.append((at, at + 8))
        return int(syms.u32.unpack_from(head, 4)[0])
    raise ElfError("cannot tell the size of the dynamic symbol table (no DT_GNU_HASH or DT_HASH)")


def _gnu_hash_count(reader: _Reader, at: int, syms: _Symbols) -> int | Need:
    """The symbol count of a ``.gnu.hash`` at ``at``: past the end of the chain of its highest bucket."""
    head = reader.get(at, 16, "the .gnu.hash header")
    if head is None:
        return Need(at, 16)
    nbuckets, symoffset, bloom, _shift = struct.unpack(syms.u32.format[0] + "4I", head)
    if not (0 < nbuckets <= 1 << 24 and bloom <= 1 << 24):
        raise ElfError(f"the .gnu.hash header at {at} is broken ({nbuckets} buckets, {bloom} bloom words)")
    buckets_at = at + 16 + bloom * syms.word
    raw = reader.get(buckets_at, 4 * nbuckets, "the .gnu.hash buckets")
    if raw is None:
        return Need(buckets_at, 4 * nbuckets)
    top = max(struct.unpack(syms.u32.format[0] + f"{nbuckets}I", raw))
    chain_at = buckets_at + 4 * nbuckets
    if top == 0:
        reader.regions.append((at, chain_at))
        return int(symoffset)
    if top < symoffset:
        raise ElfError(f"a .gnu.hash bucket ({top}) is below its first hashed symbol ({symoffset})")
    end = _chain_end(reader, chain_at, chain_at + 4 * (top - symoffset), syms)
    if isinstance(end, Need):
        return end
    reader.regions.append((at, end))
    return int(symoffset + (end - chain_at) // 4)


def _chain_end(reader: _Reader, chain_at: int, pos: int, syms: _Symbols) -> int | Need:
    """Where the ``.gnu.hash`` chain that goes on at ``pos`` ends (past its entry with the low bit set)."""
    while True:
        step = min(CHAIN_STEP, reader.size - pos) // 4 * 4
        piece = reader.get(pos, step, "the .gnu.hash chains") if step else None
        if not piece:
            if not step:
                raise ElfError(f"the .gnu.hash chains at {chain_at} run past the end of the object")
            return Need(pos, step)
        for i in range(len(piece) // 4):
            if syms.u32.unpack_from(piece, 4 * i)[0] & 1:
                return pos + 4 * i + 4
        pos += len(piece)
