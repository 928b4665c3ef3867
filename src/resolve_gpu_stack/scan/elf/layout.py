"""The ELF header, the program headers and the needed libraries (``DT_NEEDED``), read from the first bytes: by the dynamic section, or by scanning the string table (see the package's docstring)."""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable
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

# Library-name patterns (the next three), compiled where first used (re's cache): a resolve imports
# the scan and may scan nothing.
# Libraries of torch's C++ ABI: a .so needing one of these is built for one torch.
_TORCH_LIB = r"^lib(?:torch|c10)(?:_[A-Za-z0-9]+)*\.so(?:\.[0-9]+)*$"
# CUDA toolkit libraries whose soname major is the CUDA major (libcufft, libcurand, libcusolver
# number themselves on their own and are CUDA-bound without telling the major).
_CUDA_MAJOR_LIB = r"^lib(?:cudart|cublas|cublasLt|nvrtc|nvrtc-builtins|nvJitLink|cupti)\.so\.([0-9]+)(?:\.[0-9]+)*$"
_CUDA_LIB = (
    r"^lib(?:cuda|cudart|cublas|cublasLt|nvrtc|nvrtc-builtins|nvJitLink|cupti|cufft|cufftw|curand|cusolver|cusolverMg"
    r"|cusparse|cusparseLt|cudnn[A-Za-z0-9_]*|nccl|nvshmem[A-Za-z0-9_]*|cufile|npp[a-z]*|nvToolsExt)\.so(?:\.[0-9]+)*$"
)
# A library name in a string table: NUL before, NUL after (the lookahead lets neighbours share it).
SONAME_RE = re.compile(rb"\x00(lib[A-Za-z0-9_.+\-]{0,%d}?\.so(?:\.[0-9]+)*)(?=\x00)" % MAX_NAME)
_NOT_IN_STRINGS = re.compile(rb"[\x01-\x1f]")

Method = Literal["dynamic", "scan"]
_PHDR_FORMAT = {32: "8I", 64: "IIQQQQQQ"}  # a program header's fields
_PHDR_SIZE = {bits: struct.calcsize("<" + f) for bits, f in _PHDR_FORMAT.items()}


class ElfError(ValueError):
    """The bytes are not a usable ELF object (bad magic, impossible header, dynamic section
    pointing outside the file). The message names what is wrong."""


class ElfTruncated(ElfError):
    """The bytes end before the ELF header or program header table does: give more of the file."""


@dataclass(frozen=True, slots=True)
class Segment:
    """A program header: where a segment lies in the file and in memory."""

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
    return tuple(n for n in names if re.match(_TORCH_LIB, n))


def cuda_libs(names: Iterable[str]) -> tuple[str, ...]:
    """The names among ``names`` that are CUDA libraries (driver, toolkit, cuDNN, NCCL, ...)."""
    return tuple(n for n in names if re.match(_CUDA_LIB, n))


def cuda_majors(names: Iterable[str]) -> tuple[int, ...]:
    """CUDA majors told by toolkit sonames: ``libcudart.so.12`` -> 12. Sorted, distinct."""
    return tuple(sorted({int(m.group(1)) for n in names if (m := re.match(_CUDA_MAJOR_LIB, n))}))


def read_layout(data: bytes | bytearray, *, table: bytes | bytearray | None = None) -> ElfLayout:
    """The ELF header at the start of ``data`` and its program headers: in ``data`` too, or in
    ``table`` (the program header table's own bytes, read where ``program_header_table`` says:
    patchelf may move the table near the end of the file, as in the aarch64 builds of torch).

    Raises ``ElfError`` for bytes that are not ELF or an impossible header, and its subclass
    ``ElfTruncated`` when ``data`` (or ``table``) ends before the program header table (give more bytes).
    """
    bits, big, fields, header_size = _header(data)
    end = ">" if big else "<"
    phoff, phentsize, phnum = fields[5], fields[9], fields[10]
    phdr = struct.Struct(end + _PHDR_FORMAT[bits])
    given = len(data) if table is None else phoff + len(table)
    headers_end = _program_headers_end(given, bits, header_size, phdr.size, phoff, phentsize, phnum)
    source, base = (data, phoff) if table is None else (table, 0)
    segments = tuple(_segment(phdr.unpack_from(source, base + i * phentsize), bits) for i in range(phnum))
    return ElfLayout(
        bits=bits,
        big_endian=big,
        segments=segments,
        headers_end=headers_end,
        shoff=fields[6],
        shentsize=fields[11],
        shnum=fields[12],
    )


def program_header_table(data: bytes | bytearray) -> tuple[int, int]:
    """``(offset, size)`` of the program header table the ELF header at the start of ``data``
    points to (``ElfError``: an impossible one; ``ElfTruncated``: ``data`` ends before the header)."""
    bits, _big, fields, header_size = _header(data)
    phoff, phentsize, phnum = fields[5], fields[9], fields[10]
    headers_end = _program_headers_bound(bits, header_size, _PHDR_SIZE[bits], phoff, phentsize, phnum)
    return phoff, headers_end - phoff


def section_header_table(data: bytes | bytearray) -> tuple[int, int]:
    """``(offset, size)`` of the section header table the ELF header at the start of ``data``
    points to (``(0, 0)``: none); ``ElfTruncated`` when ``data`` ends before the header."""
    _bits, _big, fields, _size = _header(data)
    return (fields[6], fields[11] * fields[12]) if fields[12] else (0, 0)


def _header(data: bytes | bytearray) -> tuple[int, bool, tuple[int, ...], int]:
    """(bits, big-endian, the ELF header's fields, its size) of the ELF header at the start of ``data``."""
    bits, big = _identification(data)
    header = struct.Struct((">" if big else "<") + ("16sHHIIIIIHHHHHH" if bits == 32 else "16sHHIQQQIHHHHHH"))
    if len(data) < header.size:
        raise ElfTruncated(f"truncated ELF: {len(data)} bytes, the header is {header.size}")
    return bits, big, header.unpack_from(data, 0), header.size


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
    headers_end = _program_headers_bound(bits, header_size, entry_size, phoff, phentsize, phnum)
    if size < headers_end:
        raise ElfTruncated(f"truncated ELF: program headers end at {headers_end}, {size} bytes given")
    return headers_end


def _program_headers_bound(bits: int, header_size: int, entry_size: int, phoff: int, phentsize: int, phnum: int) -> int:
    """Where the program header table ends, once it is known to be possible."""
    if phnum == PN_XNUM or phnum > MAX_PHNUM:
        raise ElfError(f"unsupported program header count {phnum}")
    if phnum and phentsize < entry_size:
        raise ElfError(f"program header entries of {phentsize} bytes, {entry_size} expected for {bits}-bit ELF")
    if phnum and phoff < header_size:
        raise ElfError(f"program headers at offset {phoff} overlap the ELF header")
    return int(phoff + phnum * phentsize)


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


def _address_offset(layout: ElfLayout, address: int, what: str) -> int:
    """The file offset of ``address``, which the ``.dynamic`` entry ``what`` gives."""
    at = layout.file_offset(address)
    if at is None:
        raise ElfError(f"{what} address {address:#x} is in no loadable segment")
    return at
