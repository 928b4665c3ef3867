"""Which libraries an ELF shared object needs and which symbols it imports: pure functions over
bytes. ``read_structure`` reads them as the loader does (``PT_DYNAMIC`` and the tables it points
to, wherever they lie, asking for the regions it needs); ``dynamic_symbols`` reads
``.dynsym``/``.dynstr`` from the first bytes (see its docstring); what follows is about the needed
libraries from the first bytes.

A compiled wheel says nothing about the torch it was built for in its metadata; its ``.so``
members do, through their dynamic section's ``DT_NEEDED`` entries (``libtorch_cpu.so``,
``libc10.so`` -> bound to one torch's C++ ABI; ``libcudart.so.12`` -> bound to CUDA 12).

Two ways to find those names, and the result says which one answered:

- ``dynamic``: ELF header -> program headers -> ``PT_DYNAMIC``'s file range -> its ``DT_NEEDED``
  and ``DT_STRTAB`` entries, the string table's virtual address translated to a file offset
  through the ``PT_LOAD`` segments. Exact, but in a large object ``.dynamic`` sits after the code
  and read-only data (hundreds of MB into a kernel library), beyond the bytes we care to inflate.
- ``scan``: the dynamic string table (``.dynstr``) itself sits near the start of the file, in the
  first loadable segment, so the NUL-delimited ``lib*.so[.N]`` strings among the bytes we have are
  the needed libraries (plus, possibly, the object's own soname): *candidates*, never ``complete``.
  ``table_ended`` says the run of strings holding them ended inside the bytes (``.dynstr`` is
  over), so no needed name can follow.

Garbage (not ELF, an impossible header, a dynamic section pointing outside the file) raises
``ElfError``. No I/O here.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

ELF_MAGIC = b"\x7fELF"
PT_LOAD = 1
PT_DYNAMIC = 2
PF_X = 0x1
DT_NULL = 0
DT_NEEDED = 1
DT_STRTAB = 5
DT_STRSZ = 10
DT_SONAME = 14
PN_XNUM = 0xFFFF  # the real program header count is elsewhere (section header 0): not supported

# Bytes of the ELF identification + header; enough to read the program header table's position.
IDENT_SIZE = 16
MAX_NAME = 255  # longest library name the scan accepts
MAX_PHNUM = 4096  # more program headers than any real object has: garbage

# Libraries of torch's C++ ABI: a .so needing one of these is built for one torch.
_TORCH_LIB = re.compile(r"^lib(?:torch|c10)(?:_[A-Za-z0-9]+)*\.so(?:\.[0-9]+)*$")
# CUDA toolkit libraries whose soname major is the CUDA major (libcufft, libcurand, libcusolver
# number themselves on their own and are CUDA-bound without telling the major).
_CUDA_MAJOR_LIB = re.compile(r"^lib(?:cudart|cublas|cublasLt|nvrtc|nvrtc-builtins|nvJitLink|cupti)\.so\.([0-9]+)(?:\.[0-9]+)*$")
_CUDA_LIB = re.compile(
    r"^lib(?:cuda|cudart|cublas|cublasLt|nvrtc|nvrtc-builtins|nvJitLink|cupti|cufft|cufftw|curand|cusolver|cusolverMg"
    r"|cusparse|cusparseLt|cudnn[A-Za-z0-9_]*|nccl|nvshmem[A-Za-z0-9_]*|cufile|npp[a-z]*|nvToolsExt)\.so(?:\.[0-9]+)*$"
)
# A library name in a string table: NUL before, NUL after (the lookahead lets neighbours share it).
SONAME_RE = re.compile(rb"\x00(lib[A-Za-z0-9_.+\-]{0,%d}?\.so(?:\.[0-9]+)*)(?=\x00)" % MAX_NAME)
_NOT_IN_STRINGS = re.compile(rb"[\x01-\x1f]")

Method = Literal["dynamic", "scan"]


class ElfError(ValueError):
    """The bytes are not a usable ELF object (bad magic, impossible header, dynamic section
    pointing outside the file). The message names what is wrong."""


class ElfTruncated(ElfError):
    """The bytes end before the ELF header or program header table does: give more of the file."""


@dataclass(frozen=True, slots=True)
class Segment:
    type: int
    flags: int
    offset: int  # in the file
    vaddr: int
    filesz: int
    memsz: int = 0

    @property
    def end(self) -> int:
        return self.offset + self.filesz


@dataclass(frozen=True, slots=True)
class ElfLayout:
    """What the ELF header and program headers say; readable from the first few hundred bytes."""

    bits: int  # 32 or 64
    big_endian: bool
    segments: tuple[Segment, ...]
    headers_end: int  # first byte after the program header table
    shoff: int = 0  # the section header table (at the end of the file: read only when all of it is in)
    shentsize: int = 0
    shnum: int = 0

    @property
    def loads(self) -> tuple[Segment, ...]:
        return tuple(s for s in self.segments if s.type == PT_LOAD)

    @property
    def dynamic(self) -> Segment | None:
        return next((s for s in self.segments if s.type == PT_DYNAMIC), None)

    @property
    def scan_bound(self) -> int | None:
        """End of the first loadable segment when it is not executable, else ``None``.

        Linkers put ``.dynsym`` and ``.dynstr`` first, before any code; when code is kept out of
        the first segment (GNU ld's default on x86-64), the string table ends inside it, so a scan
        that reached this offset has seen every needed name.
        """
        loads = self.loads
        if not loads or loads[0].flags & PF_X:
            return None
        return loads[0].end

    def file_offset(self, vaddr: int) -> int | None:
        """The file offset of a virtual address, through the ``PT_LOAD`` segment holding it."""
        for seg in self.loads:
            if seg.vaddr <= vaddr < seg.vaddr + seg.filesz:
                return seg.offset + (vaddr - seg.vaddr)
        return None


@dataclass(frozen=True, slots=True)
class ElfLibraries:
    """The libraries an object needs (``dynamic``) or probably needs (``scan`` candidates)."""

    needed: tuple[str, ...]
    method: Method
    complete: bool  # True: every DT_NEEDED entry was read; False: candidates from a partial scan
    soname: str | None = None
    # scan only: the string table holding the first name ended within the bytes scanned, so every
    # needed name is among ``needed`` (see ``string_table_end``)
    table_ended: bool = False

    @property
    def torch_libs(self) -> tuple[str, ...]:
        return torch_libs(self.needed)

    @property
    def cuda_libs(self) -> tuple[str, ...]:
        return cuda_libs(self.needed)

    @property
    def cuda_majors(self) -> tuple[int, ...]:
        return cuda_majors(self.needed)


def torch_libs(names: Iterable[str]) -> tuple[str, ...]:
    """The names among ``names`` that are torch's C++ libraries (``libtorch*.so``, ``libc10*.so``)."""
    return tuple(n for n in names if _TORCH_LIB.match(n))


def cuda_libs(names: Iterable[str]) -> tuple[str, ...]:
    """The names among ``names`` that are CUDA libraries (driver, toolkit, cuDNN, NCCL, ...)."""
    return tuple(n for n in names if _CUDA_LIB.match(n))


def cuda_majors(names: Iterable[str]) -> tuple[int, ...]:
    """CUDA majors told by toolkit sonames: ``libcudart.so.12`` -> 12. Sorted, distinct."""
    return tuple(sorted({int(m.group(1)) for n in names if (m := _CUDA_MAJOR_LIB.match(n))}))


def read_layout(data: bytes | bytearray) -> ElfLayout:
    """The ELF header and program headers at the start of ``data``.

    Raises ``ElfError`` for bytes that are not ELF or an impossible header, and its subclass
    ``ElfTruncated`` when ``data`` ends before the program header table (give more bytes).
    """
    bits, big = _identification(data)
    end = ">" if big else "<"
    header = struct.Struct(end + ("16sHHIIIIIHHHHHH" if bits == 32 else "16sHHIQQQIHHHHHH"))
    if len(data) < header.size:
        raise ElfTruncated(f"truncated ELF: {len(data)} bytes, the header is {header.size}")
    fields = header.unpack_from(data, 0)
    phoff, phentsize, phnum = fields[5], fields[9], fields[10]
    phdr = struct.Struct(end + ("8I" if bits == 32 else "IIQQQQQQ"))
    headers_end = _program_headers_end(len(data), bits, header.size, phdr.size, phoff, phentsize, phnum)
    segments = tuple(_segment(phdr.unpack_from(data, phoff + i * phentsize), bits) for i in range(phnum))
    return ElfLayout(
        bits=bits,
        big_endian=big,
        segments=segments,
        headers_end=headers_end,
        shoff=fields[6],
        shentsize=fields[11],
        shnum=fields[12],
    )


def _identification(data: bytes | bytearray) -> tuple[int, bool]:
    """(32 or 64 bits, big-endian) from the ELF identification."""
    if bytes(data[:4]) != ELF_MAGIC[: len(data)]:
        raise ElfError("not an ELF file: bad magic")
    if len(data) < IDENT_SIZE:
        raise ElfTruncated(f"truncated ELF: {len(data)} bytes, the identification alone is {IDENT_SIZE}")
    klass, encoding = data[4], data[5]
    if klass not in (1, 2):
        raise ElfError(f"bad ELF class {klass} (1: 32-bit, 2: 64-bit)")
    if encoding not in (1, 2):
        raise ElfError(f"bad ELF data encoding {encoding} (1: little-endian, 2: big-endian)")
    return (32 if klass == 1 else 64), encoding == 2


def _program_headers_end(size: int, bits: int, header_size: int, entry_size: int, phoff: int, phentsize: int, phnum: int) -> int:
    """Where the program header table ends, once it is known to be possible and inside the bytes."""
    if phnum == PN_XNUM or phnum > MAX_PHNUM:
        raise ElfError(f"unsupported program header count {phnum}")
    if phnum and phentsize < entry_size:
        raise ElfError(f"program header entries of {phentsize} bytes, {entry_size} expected for {bits}-bit ELF")
    if phnum and phoff < header_size:
        raise ElfError(f"program headers at offset {phoff} overlap the ELF header")
    headers_end = phoff + phnum * phentsize
    if size < headers_end:
        raise ElfTruncated(f"truncated ELF: program headers end at {headers_end}, {size} bytes given")
    return headers_end


def _segment(f: tuple[int, ...], bits: int) -> Segment:
    if bits == 32:  # type, offset, vaddr, paddr, filesz, memsz, flags, align
        return Segment(type=f[0], flags=f[6], offset=f[1], vaddr=f[2], filesz=f[4], memsz=f[5])
    return Segment(type=f[0], flags=f[1], offset=f[2], vaddr=f[3], filesz=f[5], memsz=f[6])  # type, flags, offset, vaddr, paddr, filesz, memsz


def needed_libraries(data: bytes | bytearray, *, file_size: int | None = None) -> ElfLibraries:
    """The ``DT_NEEDED`` names of the ELF object whose first bytes are ``data``.

    ``file_size`` is the object's whole size when known; ``data`` holding all of it means a
    missing or broken dynamic section is an error (or, with no ``PT_DYNAMIC``, a static object
    that needs nothing) rather than a reason to scan. When the dynamic section or its string
    table lies beyond ``data``, the answer comes from ``scan_sonames`` and is not ``complete``.
    """
    whole = file_size is not None and len(data) >= file_size
    layout = read_layout(data)
    dyn = layout.dynamic
    if dyn is None:
        if whole:
            return ElfLibraries(needed=(), method="dynamic", complete=True)
        return _scanned(data)
    if dyn.end > len(data):
        if whole:
            raise ElfError(f"dynamic section ({dyn.filesz} bytes at {dyn.offset}) runs past the end of the file ({len(data)} bytes)")
        return _scanned(data)
    found = _read_dynamic(data, layout, dyn, whole)
    return found if found is not None else _scanned(data)


def _scanned(data: bytes | bytearray) -> ElfLibraries:
    found = find_sonames(data)
    ended = bool(found) and string_table_end(data, found[0][0]) is not None
    return ElfLibraries(needed=tuple(dict.fromkeys(n for _, n in found)), method="scan", complete=False, table_ended=ended)


def _read_dynamic(data: bytes | bytearray, layout: ElfLayout, dyn: Segment, whole: bool) -> ElfLibraries | None:
    """Parse ``.dynamic``; ``None`` when its string table lies beyond ``data`` (scan instead)."""
    entries = _dynamic_entries(data, layout, dyn)
    needed = [value for tag, value in entries if tag == DT_NEEDED]
    tags = dict(entries)  # the last entry of a tag wins
    strtab, strsz, soname = tags.get(DT_STRTAB), tags.get(DT_STRSZ), tags.get(DT_SONAME)
    if strtab is None or strsz is None:
        if not needed and soname is None:
            return ElfLibraries(needed=(), method="dynamic", complete=True)
        raise ElfError("dynamic section has DT_NEEDED entries but no DT_STRTAB/DT_STRSZ")
    table = _string_table(data, layout, strtab, strsz, whole)
    if table is None:
        return None
    names = tuple(_string(table, off) for off in needed)
    return ElfLibraries(needed=names, method="dynamic", complete=True, soname=_string(table, soname) if soname is not None else None)


def _string_table(data: bytes | bytearray, layout: ElfLayout, strtab: int, strsz: int, whole: bool) -> bytes | None:
    """The bytes of the string table at address ``strtab``; None when they lie beyond ``data``."""
    start = _address_offset(layout, strtab, "DT_STRTAB")
    if start + strsz > len(data):
        if whole:
            raise ElfError(f"string table ({strsz} bytes at {start}) runs past the end of the file")
        return None
    return bytes(data[start : start + strsz])


def _dynamic_entries(data: bytes | bytearray, layout: ElfLayout, dyn: Segment) -> list[tuple[int, int]]:
    """``(tag, value)`` of each ``.dynamic`` entry up to ``DT_NULL`` (the segment lies inside ``data``)."""
    entry = struct.Struct(("<" if not layout.big_endian else ">") + ("iI" if layout.bits == 32 else "qQ"))
    out = []
    for pos in range(dyn.offset, dyn.end - entry.size + 1, entry.size):
        tag, value = entry.unpack_from(data, pos)
        if tag == DT_NULL:
            break
        out.append((tag, value))
    return out


def _string(table: bytes, offset: int) -> str:
    if not 0 <= offset < len(table):
        raise ElfError(f"string offset {offset} outside the {len(table)}-byte string table")
    end = table.find(b"\x00", offset)
    if end < 0:
        raise ElfError(f"string at offset {offset} is not NUL-terminated")
    return table[offset:end].decode("utf-8", errors="replace")


def find_sonames(data: bytes | bytearray, start: int = 0) -> list[tuple[int, str]]:
    """``(offset, name)`` of each NUL-delimited ``lib*.so[.N...]`` string in ``data[start:]``.

    A string must have its terminating NUL inside ``data``: one cut off at the end is not
    reported (scan again from a little before the end once more bytes are in).
    """
    return [(m.start(1), m.group(1).decode("ascii")) for m in SONAME_RE.finditer(data, max(0, start))]


def scan_sonames(data: bytes | bytearray, start: int = 0) -> tuple[str, ...]:
    """Distinct names of ``find_sonames``, in order of appearance."""
    return tuple(dict.fromkeys(name for _, name in find_sonames(data, start)))


def string_table_end(data: bytes | bytearray, pos: int) -> int | None:
    """Where the run of NUL-terminated strings holding ``pos`` ends: the first byte at or after
    ``pos`` that no symbol or library name contains (a control byte, 0x01-0x1f), or ``None``
    when ``data`` ends first.

    ``.dynstr`` is such a run, and what follows it (``.gnu.version``'s 16-bit indexes,
    ``.rela.dyn``'s relocation types) has control bytes within its first entries; so once the
    run holding the first library name has ended, every needed name has been seen.
    """
    m = _NOT_IN_STRINGS.search(data, pos)
    return m.start() if m else None


# -- the dynamic symbol table ----------------------------------------------------------------

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
    ``sections`` (section headers, whole file), ``scan`` (by validation, right after the program
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

    def plausible(self, name: int, info: int, shndx: int, value: int, size: int) -> bool:
        """Whether an entry can be a real dynamic symbol (not the null entry)."""
        bind, kind = info >> 4, info & 0xF
        if bind not in _BINDS or kind not in _TYPES or size >= 1 << 40:
            return False
        if name == 0 and kind != STT_SECTION:
            return False
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
        pos = p + self.size
        while pos + self.size <= len(data):
            if not self.plausible(*self.fields(data, pos)):
                return n, False
            n += 1
            pos += self.size
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


def _address_offset(layout: ElfLayout, address: int, what: str) -> int:
    """The file offset of ``address``, which the ``.dynamic`` entry ``what`` gives."""
    at = layout.file_offset(address)
    if at is None:
        raise ElfError(f"{what} address {address:#x} is in no loadable segment")
    return at


def _count_by_hash(data: bytes | bytearray, layout: ElfLayout, tags: dict[int, int], syms: _Symbols, most: int) -> int | None:
    """The symbol count a hash table ``.dynamic`` points to tells (``.gnu.hash`` first); None when neither does."""
    for tag, what, read in ((DT_GNU_HASH, "DT_GNU_HASH", syms.gnu_hash), (DT_HASH, "DT_HASH", syms.sysv_hash)):
        found = read(data, _address_offset(layout, tags[tag], what), most) if tag in tags else None
        if found is not None:
            return found[0]
    return None


def _table_from_sections(data: bytes | bytearray, layout: ElfLayout, syms: _Symbols) -> _Table | None:
    """``.dynsym`` and its string table from the section headers (the whole file is in ``data``)."""
    e = ">" if layout.big_endian else "<"
    shdr = struct.Struct(e + ("IIQQQQIIQQ" if layout.bits == 64 else "10I"))
    if not layout.shnum or layout.shentsize < shdr.size or layout.shoff + layout.shnum * layout.shentsize > len(data):
        return None
    headers = [shdr.unpack_from(data, layout.shoff + i * layout.shentsize) for i in range(layout.shnum)]
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
    return [syms.fields(data, p + i * syms.size)[0] for i in range(1, last)]


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
    """The first offset in ``[start, stop)`` where a string table holding ``names`` can begin."""
    sample = sorted(set(names[:NAME_SAMPLE]) | {max(names)})
    least = min(len(sample), 4)
    at = data.find(b"\x00", start, stop)
    while at >= 0:
        if _strings_fit(data, at, sample, least=least) and _strings_fit(data, at, names):
            return at
        at = data.find(b"\x00", at + 1, stop)
    return None


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
    for i in range(1, readable):
        name, info, shndx, _value, _size = syms.fields(data, t.symtab + i * syms.size)
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


def _wanted(info: int, shndx: int, imported: dict[str, None], exported: dict[str, None] | None) -> dict[str, None] | None:
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


# -- by structure: the regions the loader reads, wherever they are ------------------------------

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
    """What ``read_structure`` read: the needed libraries (always complete) and, when asked, the
    dynamic symbols (complete); ``regions``: the file ranges it used."""

    libraries: ElfLibraries
    symbols: DynamicSymbols | None
    regions: tuple[tuple[int, int], ...] = ()


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

    def get(offset: int, n: int, what: str) -> bytes | None:
        if offset + n > size:
            raise ElfError(f"{what} ({n} bytes at {offset}) runs past the end of the {size}-byte object")
        return fetch(offset, n)

    raw = get(dyn.offset, dyn.filesz, "the dynamic section")
    if raw is None:
        return Need(dyn.offset, dyn.filesz)
    regions = [(dyn.offset, dyn.end)]
    entries = _entries_of(raw, layout)
    if not entries and dyn.filesz:
        raise ElfError(f"the dynamic section ({dyn.filesz} bytes at {dyn.offset}) is empty: zeros where the loader reads its entries")
    tags: dict[int, int] = {}
    for tag, value in entries:
        tags.setdefault(tag, value)  # the first entry of a tag wins, as for the loader
    needed = [v for t, v in entries if t == DT_NEEDED]
    if DT_STRTAB not in tags or DT_STRSZ not in tags:
        if needed or DT_SYMTAB in tags:
            raise ElfError("dynamic section has DT_NEEDED or DT_SYMTAB entries but no DT_STRTAB/DT_STRSZ")
        libs = ElfLibraries(needed=(), method="dynamic", complete=True)
        return Structure(libs, DynamicSymbols(imports=(), complete=True, method="dynamic", count=0), tuple(regions))
    str_at, strsz = _address_offset(layout, tags[DT_STRTAB], "DT_STRTAB"), tags[DT_STRSZ]
    if strsz > MAX_TABLE:
        raise ElfError(f"DT_STRSZ {strsz} is over the {MAX_TABLE}-byte bound")
    table = get(str_at, strsz, "the string table")
    if table is None:
        return Need(str_at, strsz)
    regions.append((str_at, str_at + strsz))
    soname = tags.get(DT_SONAME)
    libs = ElfLibraries(
        needed=tuple(_string(table, o) for o in needed), method="dynamic", complete=True, soname=_string(table, soname) if soname is not None else None
    )
    if not (symbols(libs) if callable(symbols) else symbols):
        return Structure(libs, None, tuple(regions))
    if DT_SYMTAB not in tags:
        return Structure(libs, DynamicSymbols(imports=(), complete=True, method="dynamic", count=0), tuple(regions))
    syms = _Symbols(layout)
    if tags.get(DT_SYMENT, syms.size) != syms.size:
        raise ElfError(f"DT_SYMENT {tags[DT_SYMENT]} is not the {syms.size}-byte symbol entry of a {layout.bits}-bit object")
    sym_at = _address_offset(layout, tags[DT_SYMTAB], "DT_SYMTAB")
    count = _structure_count(layout, tags, syms, get, regions, size)
    if isinstance(count, Need):
        return count
    entries_bytes = get(sym_at, count * syms.size, "the dynamic symbol table")
    if entries_bytes is None:
        return Need(sym_at, count * syms.size)
    regions.append((sym_at, sym_at + count * syms.size))
    imported: dict[str, None] = {}
    exported: dict[str, None] | None = {} if exports else None
    for i in range(1, count):
        name, info, shndx, _value, _size = syms.fields(entries_bytes, i * syms.size)
        wanted = _wanted(info, shndx, imported, exported) if name else None
        if wanted is not None:
            wanted.setdefault(_string(table, name), None)
    found = DynamicSymbols(
        imports=tuple(imported),
        exports=tuple(exported or ()),
        complete=True,
        method="dynamic",
        count=count,
        table=sym_at,
        strings=str_at,
        strings_end=str_at + strsz,
    )
    return Structure(libs, found, tuple(regions))


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


def _structure_count(
    layout: ElfLayout, tags: dict[int, int], syms: _Symbols, get: Callable[[int, int, str], bytes | None], regions: list[tuple[int, int]], size: int
) -> int | Need:
    """The symbol count the hash table says (``.gnu.hash`` first, then ``.hash``)."""
    if DT_GNU_HASH in tags:
        at = _address_offset(layout, tags[DT_GNU_HASH], "DT_GNU_HASH")
        head = get(at, 16, "the .gnu.hash header")
        if head is None:
            return Need(at, 16)
        nbuckets, symoffset, bloom, _shift = struct.unpack(syms.u32.format[0] + "4I", head)
        if not (0 < nbuckets <= 1 << 24 and bloom <= 1 << 24):
            raise ElfError(f"the .gnu.hash header at {at} is broken ({nbuckets} buckets, {bloom} bloom words)")
        buckets_at = at + 16 + bloom * syms.word
        raw = get(buckets_at, 4 * nbuckets, "the .gnu.hash buckets")
        if raw is None:
            return Need(buckets_at, 4 * nbuckets)
        top = max(struct.unpack(syms.u32.format[0] + f"{nbuckets}I", raw))
        chain_at = buckets_at + 4 * nbuckets
        if top == 0:
            regions.append((at, chain_at))
            return int(symoffset)
        if top < symoffset:
            raise ElfError(f"a .gnu.hash bucket ({top}) is below its first hashed symbol ({symoffset})")
        pos = chain_at + 4 * (top - symoffset)
        while True:
            step = min(CHAIN_STEP, size - pos) // 4 * 4
            piece = get(pos, step, "the .gnu.hash chains") if step else None
            if not piece:
                if not step:
                    raise ElfError(f"the .gnu.hash chains at {chain_at} run past the end of the object")
                return Need(pos, step)
            for i in range(len(piece) // 4):
                if syms.u32.unpack_from(piece, 4 * i)[0] & 1:
                    end = pos + 4 * i + 4
                    regions.append((at, end))
                    return int(symoffset + (end - chain_at) // 4)
            pos += len(piece)
    if DT_HASH in tags:
        at = _address_offset(layout, tags[DT_HASH], "DT_HASH")
        head = get(at, 8, "the .hash header")
        if head is None:
            return Need(at, 8)
        regions.append((at, at + 8))
        return int(syms.u32.unpack_from(head, 4)[0])
    raise ElfError("cannot tell the size of the dynamic symbol table (no DT_GNU_HASH or DT_HASH)")


__all__ = [
    "DynamicSymbols",
    "ElfError",
    "ElfLayout",
    "ElfLibraries",
    "ElfTruncated",
    "HEAD_BYTES",
    "Need",
    "Segment",
    "Structure",
    "cuda_libs",
    "cuda_majors",
    "dynamic_symbols",
    "find_sonames",
    "needed_libraries",
    "read_layout",
    "read_structure",
    "scan_sonames",
    "table_offsets",
    "string_table_end",
    "torch_libs",
]
