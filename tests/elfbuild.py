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
import shutil
import struct
import subprocess
import zipfile
from pathlib import Path

CC = shutil.which("cc") or shutil.which("gcc")

TORCH_LIBS = ("libtorch_cpu.so", "libc10.so")
CUDART = "libcudart.so.12"
STUBS = {"libtorch_cpu.so": "torch_cpu_stub", "libc10.so": "c10_stub", CUDART: "cudart_stub"}


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
    directory: Path, name: str, libs: Path, *, links: tuple[str, ...] = (), pad: int = 0, flags: tuple[str, ...] = (), seed: int = 0,
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
        lines.append(
            f'__asm__(".section .rodata\\n.globl padding_{seed}\\npadding_{seed}:\\n.incbin \\"{blob}\\"\\n.previous");'
        )
    src = directory / f"{name}.c"
    src.write_text("\n".join(lines) + "\n")
    link = [f"-l:{s}" for s in links]
    _cc(["-shared", "-fPIC", "-o", name, src.name, "-L", str(libs), "-Wl,--no-as-needed", *link, *flags], directory)
    return (directory / name).read_bytes()


def _random(n: int, seed: int) -> bytes:
    """Incompressible bytes, reproducible per seed (os.urandom would make wheels differ per run)."""
    return random.Random(seed).randbytes(n)


def wheel_bytes(members: dict[str, bytes], *, method: int = zipfile.ZIP_DEFLATED) -> bytes:
    """A zip holding ``members`` plus a dist-info, compressed with ``method``."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=method) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        zf.writestr("demo-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n\n")
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
    *, bits: int, big: bool, needed: tuple[str, ...], soname: str | None = None, gap: int = 0, lead: int = 0, vaddr: int = 0x10000,
    imports: tuple[str, ...] = (), exports: tuple[str, ...] = (), order: str = "gnu",
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
