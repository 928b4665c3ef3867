"""Real and hand-written ELF shared objects, and tiny wheels holding them, for tests and benchmarks.

``compile_so`` builds a real shared object with the C compiler, linked against stub libraries
that carry torch's and CUDA's sonames (``stub_libraries``); ``pad`` bytes of random data go into
``.rodata`` (through ``.incbin``), which pushes ``.dynamic`` that far past the start, as in a
kernel library of hundreds of MB. ``synthetic_elf`` writes a minimal object byte by byte for the
layouts no compiler here makes (32-bit, big-endian).
"""

from __future__ import annotations

import io
import os
import random
import re
import shutil
import struct
import subprocess
import zipfile
import zlib
from pathlib import Path

CC = shutil.which("cc") or shutil.which("gcc")

TORCH_LIBS = ("libtorch_cpu.so", "libc10.so")
CUDART = "libcudart.so.12"
STUBS = {"libtorch_cpu.so": "stub_torch_cpu", "libc10.so": "c10_stub", CUDART: "cudart_stub"}


def _cc(args: list[str], cwd: Path) -> None:
    assert CC is not None
    proc = subprocess.run([CC, *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"cc {' '.join(args)} failed:\n{proc.stderr}")


def stub_libraries(directory: Path) -> Path:
    """``libtorch_cpu.so``, ``libc10.so`` and ``libcudart.so.12`` stubs (one function each) in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    for soname, func in STUBS.items():
        src = directory / f"{func}.c"
        src.write_text(f"int {func}(void) {{ return 1; }}\n")
        _cc(["-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", soname, src.name], directory)
    return directory


def compile_so(
    directory: Path,
    name: str,
    libs: Path,
    *,
    links: tuple[str, ...] = (),
    pad: int = 0,
    flags: tuple[str, ...] = (),
    seed: int = 0,
    symbols: int = 0,
) -> bytes:
    """A shared object that calls into each stub in ``links`` (sonames of ``STUBS``); its bytes.

    ``symbols`` exported functions with long C++-like names fill the dynamic string table as a
    kernel library's imports and exports do (GNU ld puts the needed names after them).
    """
    calls = [STUBS[s] for s in links]
    lines = [f"int {f}(void);" for f in calls]
    rng = random.Random(seed)
    lines += [f"int _ZN2at6native{rng.getrandbits(64):016x}_kernel_{i}_{rng.getrandbits(32):08x}Ev(void) {{ return {i}; }}" for i in range(symbols)]
    lines.append("int entry(void) { return 0" + "".join(f" + {f}()" for f in calls) + "; }")
    if pad:
        blob = directory / f"{name}.pad"
        blob.write_bytes(_random(pad, seed))
        lines.append(f'__asm__(".section .rodata\\n.globl padding_{seed}\\npadding_{seed}:\\n.incbin \\"{blob}\\"\\n.previous");')
    src = directory / f"{name}.c"
    src.write_text("\n".join(lines) + "\n")
    link = [f"-l:{s}" for s in links]
    _cc(["-shared", "-fPIC", "-o", name, src.name, "-L", str(libs), "-Wl,--no-as-needed", *link, *flags], directory)
    return (directory / name).read_bytes()


def _random(n: int, seed: int) -> bytes:
    """Incompressible bytes, reproducible per seed (os.urandom would make wheels differ per run)."""
    return random.Random(seed).randbytes(n)


def wheel_bytes(members: dict[str, bytes], *, method: int = zipfile.ZIP_DEFLATED, requires: tuple[str, ...] = ()) -> bytes:
    """A zip holding ``members`` plus a dist-info (``requires``: its Requires-Dist), compressed with ``method``."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=method) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        lines = "".join(f"Requires-Dist: {r}\n" for r in requires)
        zf.writestr("demo-1.0.dist-info/METADATA", f"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n{lines}\n")
        zf.writestr("demo-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp312-cp312-linux_x86_64\n")
    return buf.getvalue()


class CountingReader:
    """``read(start, end)`` over bytes in memory, counting calls and bytes."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.calls = 0
        self.bytes = 0

    def __call__(self, start: int, end: int) -> bytes:
        self.calls += 1
        out = self.data[start:end]
        self.bytes += len(out)
        return out


def synthetic_elf(
    *,
    bits: int,
    big: bool,
    needed: tuple[str, ...],
    soname: str | None = None,
    gap: int = 0,
    lead: int = 0,
    vaddr: int = 0x10000,
    imports: tuple[str, ...] = (),
    exports: tuple[str, ...] = (),
    order: str = "gnu",
) -> bytes:
    """A minimal ELF object: header, PT_LOAD (all of it, at ``vaddr``) and PT_DYNAMIC, ``lead`` bytes
    of binary filler, then (with ``imports``/``exports``) a dynamic symbol table laid out as GNU ld
    does (``order="gnu"``: .gnu.hash, .dynsym, .dynstr) or lld (``"lld"``: .dynsym, .gnu.version,
    .gnu.hash, .dynstr), the string table (symbol names, then library names), ``gap`` zero bytes,
    then the dynamic section at the very end."""
    e = ">" if big else "<"
    ehdr = struct.Struct(e + ("16sHHIIIIIHHHHHH" if bits == 32 else "16sHHIQQQIHHHHHH"))
    phdr = struct.Struct(e + ("8I" if bits == 32 else "IIQQQQQQ"))
    dyn = struct.Struct(e + ("iI" if bits == 32 else "qQ"))
    word = 8 if bits == 64 else 4
    strtab = bytearray(b"\x00")

    def add(name: str) -> int:
        strtab.extend(name.encode() + b"\x00")
        return len(strtab) - len(name) - 1

    sym_names = [add(n) for n in (*imports, *exports)]
    offsets = [add(name) for name in (*needed, *((soname,) if soname else ()))]
    start = ehdr.size + 2 * phdr.size + lead
    symbols = bool(imports or exports)
    block = bytearray()  # from `start`: the hash table and symbol table (before the strings)
    symtab_at = hash_at = 0
    if symbols:
        count = 1 + len(imports) + len(exports)
        table = _dynsym(e, bits, imports, exports, sym_names, vaddr + start)
        gnu_hash = _gnu_hash(e, bits, 1 + len(imports), len(exports))
        if order == "gnu":
            pad = -start % word
            hash_at = start + pad
            block += bytes(pad) + gnu_hash
            block += bytes(-(start + len(block)) % word)
            symtab_at = start + len(block)
            block += table
        else:
            pad = -start % word
            symtab_at = start + pad
            block += bytes(pad) + table + struct.pack(e + f"{count}H", *([0] + [1] * (count - 1)))
            block += bytes(-(start + len(block)) % word)
            hash_at = start + len(block)
            block += gnu_hash
    str_off = start + len(block)
    dyn_off = str_off + len(strtab) + gap
    dyn_off += -dyn_off % word
    entries = [(1, o) for o in offsets[: len(needed)]]
    if soname:
        entries.append((14, offsets[-1]))
    entries += [(5, vaddr + str_off), (10, len(strtab))]
    if symbols:
        entries += [(6, vaddr + symtab_at), (11, 24 if bits == 64 else 16), (0x6FFFFEF5, vaddr + hash_at)]
    entries.append((0, 0))
    dynamic = b"".join(dyn.pack(t, v) for t, v in entries)
    total = dyn_off + len(dynamic)
    ident = b"\x7fELF" + bytes([1 if bits == 32 else 2, 2 if big else 1, 1]) + bytes(9)
    header = ehdr.pack(ident, 3, 62, 1, 0, ehdr.size, 0, 0, ehdr.size, phdr.size, 2, 0, 0, 0)

    def ph(kind: int, flags: int, off: int, size: int) -> bytes:
        if bits == 32:
            return phdr.pack(kind, off, vaddr + off, vaddr + off, size, size, flags, 0x1000)
        return phdr.pack(kind, flags, off, vaddr + off, vaddr + off, size, size, 0x1000)

    phdrs = ph(1, 4, 0, total) + ph(2, 6, dyn_off, len(dynamic))
    body = header + phdrs + b"\x01" * lead + bytes(block) + bytes(strtab)
    return body + bytes(dyn_off - len(body)) + dynamic


def _dynsym(e: str, bits: int, imports: tuple[str, ...], exports: tuple[str, ...], names: list[int], code: int) -> bytes:
    """The null symbol, then undefined GLOBAL FUNC imports, then defined GLOBAL FUNC exports."""
    sym = struct.Struct(e + ("IBBHQQ" if bits == 64 else "IIIBBH"))
    out = bytes(sym.size)
    for i, name in enumerate(names):
        defined = i >= len(imports)
        info, shndx, value, size = 0x12, (5 if defined else 0), (code + 16 * i if defined else 0), (16 if defined else 0)
        out += sym.pack(name, info, 0, shndx, value, size) if bits == 64 else sym.pack(name, value, size, info, 0, shndx)
    return out


def _gnu_hash(e: str, bits: int, symoffset: int, hashed: int) -> bytes:
    """A one-bucket ``.gnu.hash`` over ``hashed`` symbols from ``symoffset`` (the chain ends at the last)."""
    bloom = b"\xff" * (8 if bits == 64 else 4)
    chain = [2 * i for i in range(hashed)]
    if chain:
        chain[-1] |= 1
    return struct.pack(e + "4I", 1, symoffset, 1, 6) + bloom + struct.pack(e + "I", symoffset if hashed else 0) + struct.pack(e + f"{hashed}I", *chain)


def have_cc() -> bool:
    return CC is not None and os.name == "posix"


CXX = shutil.which("c++") or shutil.which("g++")

# A stub torch for the ABI scan: C++ symbols of c10::/at:: (mangled by the compiler), functions of
# the stable C shim (extern "C" aoti_torch_*/torch_*), a THP binding; and a CUDA runtime per major.
TORCH_CXX_SOURCE = """
#include <string>
namespace c10 { namespace detail {
void torchCheckFail(const char*, const char*, unsigned, const std::string&) {}
void torchCheckFail(const char*, const char*, unsigned, const char*) {}
} struct Error { virtual ~Error(); }; Error::~Error() {} }
namespace at { struct Tensor { long numel() const; }; long Tensor::numel() const { return 0; } }
extern "C" int aoti_torch_get_device_index(void*, int* out) { *out = 0; return 0; }
extern "C" int aoti_torch_empty_strided(long, const long*, const long*, int, int, int, void**) { return 0; }
extern "C" int torch_call_dispatcher(const char*, const char*, void*) { return 0; }
void* THPVariable_Wrap(const at::Tensor&) { return nullptr; }
"""
# What an extension may call: each name is a statement using one part of the stub torch.
TORCH_CALLS = {
    "cxx_check": 'c10::detail::torchCheckFail("f", "file", 1, std::string("m"));',
    "cxx_numel": "at::Tensor t; (void)t.numel();",
    "cxx_typeinfo": "try { throw 1; } catch (c10::Error& e) { }",
    "shim_device": "int d; aoti_torch_get_device_index(nullptr, &d);",
    "shim_empty": "void* out; aoti_torch_empty_strided(0, nullptr, nullptr, 0, 0, 0, &out);",
    "shim_dispatch": 'torch_call_dispatcher("aten::mm", "", nullptr);',
    "python": "at::Tensor t; (void)THPVariable_Wrap(t);",
    "cudart": "(void)cudaGetDeviceCount(nullptr);",
}
_DECLARATIONS = """
#include <string>
namespace c10 { namespace detail {
void torchCheckFail(const char*, const char*, unsigned, const std::string&);
void torchCheckFail(const char*, const char*, unsigned, const char*);
} struct Error { virtual ~Error(); }; }
namespace at { struct Tensor { long numel() const; }; }
extern "C" int aoti_torch_get_device_index(void*, int*);
extern "C" int aoti_torch_empty_strided(long, const long*, const long*, int, int, int, void**);
extern "C" int torch_call_dispatcher(const char*, const char*, void*);
extern "C" int cudaGetDeviceCount(int*);
void* THPVariable_Wrap(const at::Tensor&);
"""


def _cxx(args: list[str], cwd: Path) -> None:
    assert CXX is not None
    proc = subprocess.run([CXX, *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"c++ {' '.join(args)} failed:\n{proc.stderr}")


def torch_stubs(directory: Path) -> Path:
    """``libc10.so`` + ``libtorch_cpu.so`` (one C++ stub torch under both names), ``libcudart.so.12``
    and ``libcudart.so.13`` in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "torch_stub.cpp").write_text(TORCH_CXX_SOURCE)
    for soname in ("libc10.so", "libtorch_cpu.so"):
        _cxx(["-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", soname, "torch_stub.cpp"], directory)
    (directory / "cudart.c").write_text("int cudaGetDeviceCount(int* n) { if (n) *n = 0; return 0; }\n")
    for major in (12, 13):
        _cc(["-shared", "-fPIC", f"-Wl,-soname,libcudart.so.{major}", "-o", f"libcudart.so.{major}", "cudart.c"], directory)
    return directory


def compile_extension(
    directory: Path,
    name: str,
    libs: Path,
    *,
    calls: tuple[str, ...],
    links: tuple[str, ...] = ("libtorch_cpu.so", "libc10.so"),
    linker: str | None = None,
    pad: int = 0,
    seed: int = 0,
) -> bytes:
    """A C++ extension making ``calls`` (keys of ``TORCH_CALLS``), linked against ``links`` from
    ``libs`` (``torch_stubs``), with ``linker`` (``lld``, ``gold``; None: the default); its bytes."""
    body = "\n".join("{ " + TORCH_CALLS[c] + " }" for c in calls)
    entry = re.sub(r"\W", "_", name.split(".")[0])
    lines = [_DECLARATIONS, f'extern "C" int PyInit_{entry}() {{ {body} return 0; }}']
    if pad:
        blob = directory / f"{name}.pad"
        blob.write_bytes(_random(pad, seed))
        lines.append(f'__asm__(".section .rodata\\n.globl padding_{seed}\\npadding_{seed}:\\n.incbin \\"{blob}\\"\\n.previous");')
    src = directory / f"{name}.cpp"
    src.write_text("\n".join(lines) + "\n")
    flags = [f"-fuse-ld={linker}"] if linker else []
    _cxx(["-shared", "-fPIC", *flags, "-o", name, src.name, "-L", str(libs), "-Wl,--no-as-needed", *[f"-l:{s}" for s in links]], directory)
    return (directory / name).read_bytes()


def have_cxx() -> bool:
    return CXX is not None and os.name == "posix"


def have_lld() -> bool:
    return shutil.which("ld.lld") is not None and have_cxx()


def hand_made_zip(members: list[tuple[str, int, bytes, int]]) -> bytes:
    """A zip of deflated members given as (name, local header offset or -1 for "next", data, size)."""
    out = bytearray()
    central = bytearray()
    for name, offset, data, size in members:
        nb = name.encode()
        if offset < 0:
            offset = len(out)
            out += struct.pack("<4s2B4HL2L2H", b"PK\x03\x04", 20, 0, 0, 8, 0, 0, 0, len(data), size, len(nb), 0) + nb + data
        central += struct.pack("<4s4B4HL2L5H2L", b"PK\x01\x02", 20, 3, 20, 0, 0, 8, 0, 0, 0, len(data), size, len(nb), 0, 0, 0, 0, 0, offset) + nb
    n = len(members)
    return bytes(out + central + struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, n & 0xFFFF, n & 0xFFFF, len(central), len(out), 0))


def endless_elf(size: int) -> bytes:
    """An ELF header whose first segment holds code (no bound) and whose dynamic section lies at the
    end of ``size`` bytes of zeros, deflated: each member costs its whole cap to give up on."""
    head = bytearray(synthetic_elf(bits=64, big=False, needed=())[: 64 + 2 * 56])
    head[64 + 4 : 64 + 8] = b"\x05\x00\x00\x00"
    struct.pack_into("<Q", head, 64 + 32, size)  # the load segment is all of it
    struct.pack_into("<QQQ", head, 64 + 56 + 8, size - 64, size - 64, size - 64)
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    return comp.compress(bytes(head) + bytes(size - len(head))) + comp.flush()


def hostile_wheels() -> dict[str, bytes]:
    """Zip bombs of ``.so`` members: 4,000 sharing one deflate stream (overlapping entries); 4,000
    and 500 distinct members each inflating to 8 MB with nothing to find."""
    stream = endless_elf(8 * 2**20)
    return {
        "4000 members sharing one deflate stream": hand_made_zip(
            [("p/lib0.so", -1, stream, 8 * 2**20)] + [(f"p/lib{i}.so", 0, b"", 8 * 2**20) for i in range(1, 4000)]
        ),
        "4000 members, each 8 MB of nothing to find": hand_made_zip([(f"p/lib{i}.so", -1, stream, 8 * 2**20) for i in range(4000)]),
        "500 members, each 8 MB of nothing to find": hand_made_zip([(f"p/lib{i}.so", -1, stream, 8 * 2**20) for i in range(500)]),
    }


_PHDR64 = struct.Struct("<IIQQQQQQ")
_SHDR64 = struct.Struct("<IIQQQQIIQQ")


def _headers64(out: bytes | bytearray) -> tuple[int, list[list[int]], list[list[int]]]:
    """(where the program headers are, the program headers, the section headers) of a 64-bit
    little-endian object, each header a list of its fields."""
    f = struct.unpack_from("<16sHHIQQQIHHHHHH", out, 0)
    phoff, shoff, phnum, shnum = f[5], f[6], f[10], f[12]
    phdrs = [list(_PHDR64.unpack_from(out, phoff + i * _PHDR64.size)) for i in range(phnum)]
    return phoff, phdrs, [list(_SHDR64.unpack_from(out, shoff + i * _SHDR64.size)) for i in range(shnum)]


def move_dynamic(
    data: bytes, *, pad: int = 0, split: bool = False, strip_sections: bool = True, seed: int = 0, zeros: bool = False, filler: bytes | None = None
) -> bytes:
    """A 64-bit little-endian object rewritten as patchelf leaves torch's ``libtorch_cpu.so``:
    ``.gnu.hash``, ``.dynsym``, ``.dynstr`` and ``.dynamic`` copied into a new ``PT_LOAD`` after
    ``pad`` bytes (random, or ``zeros``) past the end of the file, the originals zeroed (a reader
    of the first bytes finds no table), ``PT_DYNAMIC`` and the ``.dynamic`` addresses pointed at
    the copies (``filler``: those bytes as the pad); ``split``: the symbol table, the string table and ``.dynamic`` in segments of their
    own and one more empty one (8 ``PT_LOAD``s, the string table in the 6th, as in
    ``torchvision/image_stable.so``'s 9); ``strip_sections``: no section headers."""
    out = bytearray(data)
    phdr = _PHDR64
    phoff, phdrs, sections = _headers64(out)
    by_type = {s[1]: s for s in sections}
    dynsym = by_type[11]
    tables = {"gnu_hash": by_type[0x6FFFFFF6], "dynsym": dynsym, "dynstr": sections[dynsym[6]], "dynamic": by_type[6]}
    top = max(p[3] + p[6] for p in phdrs if p[0] == 1)
    body = bytearray(filler if filler is not None else _random(pad, seed) if not zeros else bytes(pad))
    placed: dict[str, tuple[int, int]] = {}  # name -> (file offset, vaddr)
    segments: list[tuple[int, int, int]] = []  # (offset, vaddr, size)
    cursor = len(out) + len(body)
    vbase = -(-top // 0x1000) * 0x1000 + 0x100000
    for name, s in tables.items():
        if not segments or (split and name != "dynsym"):
            cursor = -(-cursor // 0x1000) * 0x1000
            segments.append((cursor, vbase + cursor, 0))
        body += bytes(cursor - len(out) - len(body))
        placed[name] = (cursor, vbase + cursor)
        body += out[s[4] : s[4] + s[5]]
        cursor += s[5]
        seg = segments[-1]
        segments[-1] = (seg[0], seg[1], cursor - seg[0])
    if split:
        segments.append((cursor, vbase + cursor, 0))
    for s in tables.values():
        out[s[4] : s[4] + s[5]] = bytes(s[5])
    out += body
    dyn_at, dyn_size = placed["dynamic"][0], tables["dynamic"][5]
    moved = {5: "dynstr", 6: "dynsym", 0x6FFFFEF5: "gnu_hash"}
    for pos in range(dyn_at, dyn_at + dyn_size, 16):
        tag, _ = struct.unpack_from("<qQ", out, pos)
        if tag in moved:
            struct.pack_into("<qQ", out, pos, tag, placed[moved[tag]][1])
    spare = [i for i, p in enumerate(phdrs) if p[0] not in (1, 2)]
    if len(spare) < len(segments):
        raise ValueError(f"{len(spare)} program headers to reuse, {len(segments)} segments to add")
    for i, (off, vaddr, size) in zip(spare, segments, strict=False):
        phdrs[i] = [1, 4 | 2, off, vaddr, vaddr, size, size, 0x1000]
    for p in phdrs:
        if p[0] == 2:
            p[2:7] = [dyn_at, placed["dynamic"][1], placed["dynamic"][1], dyn_size, dyn_size]
    for i, p in enumerate(phdrs):
        phdr.pack_into(out, phoff + i * phdr.size, *p)
    if strip_sections:
        struct.pack_into("<Q", out, 40, 0)
        struct.pack_into("<HHH", out, 58, 0, 0, 0)
    return bytes(out)


def patchelf_layout(data: bytes, *, before: int, gap: int, seed: int = 0, stale_dynamic: bool = False, headers_at: int | None = None) -> bytes:
    """A 64-bit little-endian object laid out as patchelf leaves a released ``libtorch_cpu.so``:
    ``.dynamic`` in a segment ``before`` bytes past the file's end, then ``gap`` bytes (what lies
    between it and the new last segment: 91 MB in torch 2.15.0's), then a last ``PT_LOAD`` that
    begins with the section header table (updated) and holds ``.gnu.hash``, ``.dynsym`` and
    ``.dynstr``. The originals are zeroed. ``stale_dynamic``: the ``.dynamic`` section header
    left where the section was (section headers that disagree with the program headers).
    ``headers_at``: the program header table moved too, ``headers_at`` bytes after ``.dynamic``,
    at the start of a ``PT_LOAD`` of its own that the ``gap`` bytes fill (as in torch 2.15.0's
    aarch64 builds: 419 MB into the 514 MB ``libtorch_cuda.so``); the original table zeroed."""
    out = bytearray(data)
    phdr, shdr = _PHDR64, _SHDR64
    phoff, phdrs, sections = _headers64(out)
    shnum = len(sections)
    index = {s[1]: i for i, s in enumerate(sections)}
    dynsym = index[11]
    moved = {"dynamic": index[6], "gnu_hash": index[0x6FFFFFF6], "dynsym": dynsym, "dynstr": sections[dynsym][6]}
    originals = {name: bytes(out[sections[i][4] : sections[i][4] + sections[i][5]]) for name, i in moved.items()}
    vbase = -(-max(p[3] + p[6] for p in phdrs if p[0] == 1) // 0x1000) * 0x1000 + 0x100000
    for i in moved.values():
        out[sections[i][4] : sections[i][4] + sections[i][5]] = bytes(sections[i][5])

    def page(n: int) -> int:
        return -(-n // 0x1000) * 0x1000

    body = bytearray(_random(before, seed))
    placed: dict[str, int] = {}
    dyn_at = page(len(out) + len(body))
    body += bytes(dyn_at - len(out) - len(body)) + originals["dynamic"]
    moved_phdrs = None
    if headers_at is not None:
        body += _random(headers_at, seed + 2)
        moved_phdrs = page(len(out) + len(body))
        body += bytes(moved_phdrs - len(out) - len(body)) + bytes(len(phdrs) * phdr.size)
    body += _random(gap, seed + 1)
    last = page(len(out) + len(body))
    body += bytes(last - len(out) - len(body)) + bytes(shnum * shdr.size)
    placed["dynamic"] = dyn_at
    for name in ("gnu_hash", "dynsym", "dynstr"):
        at = -(-(len(out) + len(body)) // 8) * 8
        body += bytes(at - len(out) - len(body)) + originals[name]
        placed[name] = at
    out += body
    for name, i in moved.items():
        if not (stale_dynamic and name == "dynamic"):
            sections[i][3], sections[i][4] = vbase + placed[name], placed[name]
    for i, s in enumerate(sections):
        shdr.pack_into(out, last + i * shdr.size, *s)
    struct.pack_into("<Q", out, 40, last)  # e_shoff
    tags = {5: "dynstr", 6: "dynsym", 0x6FFFFEF5: "gnu_hash"}
    for pos in range(dyn_at, dyn_at + len(originals["dynamic"]), 16):
        tag, _ = struct.unpack_from("<qQ", out, pos)
        if tag in tags:
            struct.pack_into("<qQ", out, pos, tag, vbase + placed[tags[tag]])
    spare = [i for i, p in enumerate(phdrs) if p[0] not in (1, 2)]
    size_dyn, size_last = len(originals["dynamic"]), len(out) - last
    added = [(dyn_at, size_dyn), (last, size_last)] + ([(moved_phdrs, last - moved_phdrs)] if moved_phdrs is not None else [])
    if len(spare) < len(added):
        raise ValueError(f"{len(spare)} program headers to reuse, {len(added)} segments to add")
    for i, (off, size) in zip(spare, added, strict=False):
        phdrs[i] = [1, 4 | 2, off, vbase + off, vbase + off, size, size, 0x1000]
    for p in phdrs:
        if p[0] == 2:
            p[2:7] = [dyn_at, vbase + dyn_at, vbase + dyn_at, size_dyn, size_dyn]
    if moved_phdrs is not None:
        out[phoff : phoff + len(phdrs) * phdr.size] = bytes(len(phdrs) * phdr.size)
        phoff = moved_phdrs
        struct.pack_into("<Q", out, 32, phoff)  # e_phoff
    for i, p in enumerate(phdrs):
        phdr.pack_into(out, phoff + i * phdr.size, *p)
    return bytes(out)
