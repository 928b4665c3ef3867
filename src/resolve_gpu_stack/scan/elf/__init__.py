"""Which libraries an ELF shared object needs and which symbols it imports: pure functions over
bytes. ``read_structure`` reads them as the loader does (``PT_DYNAMIC`` and the tables it points
to, wherever they lie, asking for the regions it needs); ``dynamic_symbols`` reads
``.dynsym``/``.dynstr`` from the first bytes (``symbols.py``); the needed libraries from the first
bytes are ``layout.py``'s, read as follows.

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

from .layout import (
    DT_NEEDED,
    DT_NULL,
    DT_SONAME,
    DT_STRSZ,
    DT_STRTAB,
    ELF_MAGIC,
    IDENT_SIZE,
    MAX_NAME,
    MAX_PHNUM,
    PF_X,
    PN_XNUM,
    PT_DYNAMIC,
    PT_LOAD,
    SONAME_RE,
    ElfError,
    ElfLayout,
    ElfLibraries,
    ElfTruncated,
    Method,
    Segment,
    cuda_libs,
    cuda_majors,
    find_sonames,
    needed_libraries,
    program_header_table,
    read_layout,
    scan_sonames,
    section_header_table,
    string_table_end,
    torch_libs,
)
from .structure import CHAIN_STEP, HEAD_BYTES, MAX_TABLE, Need, Structure, layout_from, read_by_sections, read_structure, sections_at_end, table_offsets
from .symbols import (
    DT_GNU_HASH,
    DT_HASH,
    DT_SYMENT,
    DT_SYMTAB,
    MAX_CANDIDATES,
    MAX_SYMBOL_NAME,
    NAME_SAMPLE,
    PT_GNU_PROPERTY,
    PT_INTERP,
    PT_NOTE,
    SEARCH_LIMIT,
    SHN_ABS,
    SHN_COMMON,
    SHN_LORESERVE,
    SHN_UNDEF,
    SHN_XINDEX,
    SHT_DYNSYM,
    STB_GLOBAL,
    STB_GNU_UNIQUE,
    STB_WEAK,
    STT_FILE,
    STT_SECTION,
    STT_TLS,
    DynamicSymbols,
    SymbolMethod,
    dynamic_symbols,
)

__all__ = [
    "CHAIN_STEP",
    "DT_GNU_HASH",
    "DT_HASH",
    "DT_NEEDED",
    "DT_NULL",
    "DT_SONAME",
    "DT_STRSZ",
    "DT_STRTAB",
    "DT_SYMENT",
    "DT_SYMTAB",
    "DynamicSymbols",
    "ELF_MAGIC",
    "ElfError",
    "ElfLayout",
    "ElfLibraries",
    "ElfTruncated",
    "HEAD_BYTES",
    "IDENT_SIZE",
    "MAX_CANDIDATES",
    "MAX_NAME",
    "MAX_PHNUM",
    "MAX_SYMBOL_NAME",
    "MAX_TABLE",
    "Method",
    "NAME_SAMPLE",
    "Need",
    "PF_X",
    "PN_XNUM",
    "PT_DYNAMIC",
    "PT_GNU_PROPERTY",
    "PT_INTERP",
    "PT_LOAD",
    "PT_NOTE",
    "SEARCH_LIMIT",
    "SHN_ABS",
    "SHN_COMMON",
    "SHN_LORESERVE",
    "SHN_UNDEF",
    "SHN_XINDEX",
    "SHT_DYNSYM",
    "SONAME_RE",
    "STB_GLOBAL",
    "STB_GNU_UNIQUE",
    "STB_WEAK",
    "STT_FILE",
    "STT_SECTION",
    "STT_TLS",
    "Segment",
    "Structure",
    "SymbolMethod",
    "cuda_libs",
    "cuda_majors",
    "dynamic_symbols",
    "find_sonames",
    "layout_from",
    "needed_libraries",
    "program_header_table",
    "read_by_sections",
    "read_layout",
    "read_structure",
    "scan_sonames",
    "section_header_table",
    "sections_at_end",
    "string_table_end",
    "table_offsets",
    "torch_libs",
]
