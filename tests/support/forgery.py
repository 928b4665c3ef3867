"""A forged compiled wheel (issue 48): its ``.so`` truly imports ``c10::stand_in_missing()``, which
the kept torch does not export, and its deflate data hides a second, self-consistent chain of
blocks that a reader entering the stream near its end takes for the real one.

The member is ``head + pad + tables + .dynamic`` (``elfbuild.move_dynamic``: patchelf's layout,
the tables moved behind ``pad`` bytes). Its deflate stream, written here block by block:

- the real chain: stored blocks for the head and the pad; then ``H``, a fixed-Huffman block that
  copies the tables from ``d`` bytes back; then ``.dynamic`` in a final stored block;
- the fake chain, inside the pad's stored payloads: 35 stored blocks (each header just before a
  real one, whose header it swallows as payload), then a fixed-Huffman block ``FB`` holding the
  tables with ``c10::stand_in_missing()`` renamed (``_ZN3zzz...``, no torch namespace) and then
  ``N`` zeros, then an empty stored block that brings it to a byte boundary, where ``H`` begins.

``H`` is shared: in the real chain the ``d`` bytes back are a raw copy of the real tables (the end
of the last fake stored payload, ``N`` bytes before ``H``); in the fake chain they are ``FB``'s
renamed tables (``N`` zeros before ``H``). Both chains inflate to the member's end, and every byte
of the fake one's output comes from the fake chain itself: windows of 0x00 and of 0xFF agree.

``forged_member(lib)`` gives ``(inflated bytes, raw deflate data)``; ``forged_wheel`` a real wheel.
"""

from __future__ import annotations

import random
import shutil
import struct
import subprocess
import zlib
from dataclasses import dataclass
from pathlib import Path

from support.wheels import metadata_text, record_hash

MISSING = b"_ZN3c1016stand_in_missingEv"  # c10::stand_in_missing()
RENAMED = b"_ZN3zzz16stand_in_missingEv"  # the same length, in no torch namespace
PAD = 6 * 2**20
FAKE_BLOCKS = 35
FAKE_LEN = 64_000  # each fake stored block's payload

SOURCE = r"""
#include <string>
namespace c10 { void stand_in_missing(); namespace detail { void torchCheckFail(const char*, const char*, unsigned int, const std::string&); } }
extern "C" int entry(void) { c10::detail::torchCheckFail("a", "b", 1, std::string("c")); c10::stand_in_missing(); return 0; }
"""


class _Bits:
    """A deflate bit stream: fields least significant bit first, Huffman codes most significant first."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.acc = 0
        self.n = 0

    def bits(self, value: int, count: int) -> None:
        self.acc |= value << self.n
        self.n += count
        while self.n >= 8:
            self.out.append(self.acc & 0xFF)
            self.acc >>= 8
            self.n -= 8

    def code(self, code: int, length: int) -> None:
        self.bits(int(f"{code:0{length}b}"[::-1], 2), length)

    def align(self) -> None:
        if self.n:
            self.bits(0, 8 - self.n)

    def raw(self, data: bytes) -> None:
        assert self.n == 0
        self.out += data

    def stored(self, payload: bytes, *, final: bool = False) -> None:
        self.bits(1 if final else 0, 3)
        self.align()
        self.raw(struct.pack("<HH", len(payload), len(payload) ^ 0xFFFF) + payload)

    def fixed_symbol(self, sym: int) -> None:
        if sym < 144:
            self.code(0x30 + sym, 8)
        elif sym < 256:
            self.code(0x190 + sym - 144, 9)
        elif sym < 280:
            self.code(sym - 256, 7)
        else:
            self.code(0xC0 + sym - 280, 8)

    def copy(self, length: int, distance: int) -> None:
        """One back-reference of fixed codes."""
        code, base, extra = next((c, b, e) for c, b, e in reversed(_LENGTHS) if length >= b)
        self.fixed_symbol(code)
        self.bits(length - base, extra)
        dcode, dbase, dextra = next((c, b, e) for c, b, e in reversed(_DISTANCES) if distance >= b)
        self.code(dcode, 5)
        self.bits(distance - dbase, dextra)

    def copies(self, length: int, distance: int) -> None:
        while length:
            take = min(258, length) if length - min(258, length) == 0 or length - 258 >= 3 else length - 3
            self.copy(take, distance)
            length -= take


def _table(bases: list[int], extras: list[int], first: int) -> list[tuple[int, int, int]]:
    return [(first + i, b, e) for i, (b, e) in enumerate(zip(bases, extras, strict=True))]


_LENGTHS = _table(
    [3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227],
    [0] * 8 + [1] * 4 + [2] * 4 + [3] * 4 + [4] * 4 + [5] * 4,
    257,
) + [(285, 258, 0)]
_DISTANCES = _table(
    [1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577],
    [0, 0, 0, 0] + [n for k in range(1, 14) for n in (k, k)],
    0,
)


def _fixed_block(literals: bytes, zeros: int) -> bytes:
    """``literals`` then ``zeros`` zero bytes (a literal, then copies at distance 1) in a fixed-Huffman
    block, then an empty stored block: bytes that start and end on byte boundaries."""
    out = _Bits()
    out.bits(0b010, 3)  # not final, fixed codes
    for b in literals:
        out.fixed_symbol(b)
    if zeros:
        out.fixed_symbol(0)
        left = zeros - 1
        while left and left < 3:
            out.fixed_symbol(0)
            left -= 1
        if left:
            out.copies(left, 1)
    out.fixed_symbol(256)
    out.stored(b"")
    return bytes(out.out)


def _fake_tail(renamed: bytes) -> tuple[bytes, int]:
    """``FB`` and the empty stored block after it, holding ``renamed`` and as many zeros as the
    two take bytes (``N``): (their bytes, N)."""
    n = len(renamed)
    for _ in range(64):
        block = _fixed_block(renamed, n)
        if len(block) == n:
            return block, n
        n = len(block)
    for n in range(len(renamed) // 2, 2 * len(renamed) + 64):  # (the sizes oscillated: search)
        block = _fixed_block(renamed, n)
        if len(block) == n:
            return block, n
    raise AssertionError("no fixed point for the fake block's length")


@dataclass(frozen=True)
class Forged:
    data: bytes  # the member, as a full inflation gives it (the truth)
    deflated: bytes  # its raw deflate stream: the real chain and the hidden one
    fake_entry: int  # offset in ``deflated`` of the first fake stored block's LEN field
    tables: tuple[int, int]  # where the tables lie in ``data``


def forged_member(lib: bytes, *, pad: int = PAD, seed: int = 48, fake_blocks: int = FAKE_BLOCKS, fakes_per_real: int = 1) -> Forged:
    """``lib`` (an object importing ``MISSING``) laid out behind ``pad`` bytes, and its forged
    deflate stream (see the module docstring). ``fakes_per_real``: fake stored headers inside each
    real stored block (2: a reader searching a tail for block starts meets two fake ones, an entry
    and a second that agrees with it, before any real one; the fake payloads are then short enough
    for two to fit in one real block)."""
    from support.elfbuild import move_dynamic

    rng = random.Random(seed)
    probe = move_dynamic(lib, filler=bytes(pad))
    head = probe[: len(lib)]
    phoff, phnum = struct.unpack_from("<Q", probe, 32)[0], struct.unpack_from("<H", probe, 56)[0]
    dyn = next(struct.unpack_from("<IIQ", probe, phoff + i * 56)[2] for i in range(phnum) if struct.unpack_from("<I", probe, phoff + i * 56)[0] == 2)
    tables, dynamic = probe[len(lib) + pad : dyn], probe[dyn:]
    assert tables.count(MISSING) == 1 and len(dynamic) < 65_000, "the object does not import the name once"
    renamed = tables.replace(MISSING, RENAMED)
    fb, n = _fake_tail(renamed)
    distance = len(tables) + n
    assert distance <= 32 * 2**10, "the tables are too large to copy back"

    # the fake chain's bytes, with the real stored headers in them: [F_j][R_j][filler]... [R_last][filler][tables][FB]
    zone = bytearray()
    real_lengths: list[int] = []
    fake_at = -1
    last_len = FAKE_LEN // 2  # the last fake block is short: the real block around it holds FB too
    for j in range(fake_blocks):
        length = (last_len if j == fake_blocks - 1 else FAKE_LEN) // fakes_per_real
        fake_header = b"\x00" + struct.pack("<HH", length, length ^ 0xFFFF)
        if j == 0:
            fake_at = len(zone) + 1
        zone += fake_header
        real_lengths.append(0)  # placeholder: the real header R_j goes here
        payload_filler = length - 5 - (len(tables) if j == fake_blocks - 1 else 0)
        zone += b"\x00" * 5 + rng.randbytes(payload_filler) + (tables if j == fake_blocks - 1 else b"")
    zone += fb
    # real headers: R_j sits at fake header j's end; real block j runs to R_{j+1} (the last one to H)
    starts = _fake_header_ends(zone, fake_blocks)[::fakes_per_real]
    bounds = [*starts, len(zone)]
    for j, at in enumerate(starts):
        length = bounds[j + 1] - (at + 5)
        assert length <= 65_535
        zone[at : at + 5] = b"\x00" + struct.pack("<HH", length, length ^ 0xFFFF)
    chain_payload = sum(bounds[j + 1] - (bounds[j] + 5) for j in range(len(starts)))
    before = rng.randbytes(pad - chain_payload - starts[0])  # the pad's start: real payload up to R_1 ends with F_1
    before_and_f1 = before + bytes(zone[: starts[0]])
    real_pad = before_and_f1 + b"".join(bytes(zone[bounds[j] + 5 : bounds[j + 1]]) for j in range(len(starts)))
    assert len(real_pad) == pad
    data = head + real_pad + tables + dynamic

    out = _Bits()
    for i in range(0, len(head), 65_535):
        out.stored(head[i : i + 65_535])
    prefix = before_and_f1
    for i in range(0, len(prefix), 65_535):
        out.stored(prefix[i : i + 65_535])
    zone_at = len(out.out)
    out.raw(bytes(zone[starts[0] :]))  # R_1 onward: the real headers and payloads, as they are
    out.bits(0b010, 3)  # H: not final, fixed codes, the tables copied from ``distance`` back
    out.copies(len(tables), distance)
    out.fixed_symbol(256)
    out.stored(dynamic, final=True)
    out.align()
    deflated = bytes(out.out)
    fake_entry = zone_at - starts[0] + fake_at
    return Forged(data=data, deflated=deflated, fake_entry=fake_entry, tables=(len(head) + pad, dyn))


def _fake_header_ends(zone: bytearray, count: int) -> list[int]:
    """Where each fake stored header ends in ``zone`` (each real header goes there)."""
    ends, at = [], 0
    for _ in range(count):
        length = struct.unpack_from("<H", zone, at + 1)[0]
        ends.append(at + 5)
        at += 5 + length
    return ends


def readelf_symbols(path: Path) -> tuple[list[str], list[str]] | None:
    """(imports, exports) of the shared object at ``path`` as GNU readelf reads them through
    ``PT_DYNAMIC`` (``--use-dynamic --symbols``: no section headers needed), version suffixes cut; None
    where readelf is not installed. An ELF reader independent of ours."""
    readelf = shutil.which("readelf")
    if readelf is None:
        return None
    # (readelf prints nothing for a path after "--": an absolute path cannot be read as an option)
    proc = subprocess.run([readelf, "-W", "--use-dynamic", "--symbols", str(path.resolve())], capture_output=True, text=True, check=False)
    imports, exports = [], []
    for line in proc.stdout.splitlines():
        fields = line.split()
        if len(fields) < 8 or not fields[0].rstrip(":").isdigit():
            continue
        name = fields[7].split("@", 1)[0]
        if not name:
            continue
        (imports if fields[6] == "UND" else exports).append(name)
    return imports, exports


def compile_forged(folder: Path) -> bytes:
    """The object that truly imports ``c10::stand_in_missing()`` (``folder``: compile_objects' own,
    holding the torch stubs it links)."""
    from support.abi_world import _compile

    return _compile(folder, "forged.so", SOURCE, links=("libtorch_cpu.so", "libc10.so"))


def zip_with(members: list[tuple[str, bytes, bytes | None]]) -> bytes:
    """A zip of ``(name, data, raw deflate data or None)``: deflated members, their data as given
    (None: zlib's), with true CRCs and sizes."""
    out, central = bytearray(), bytearray()
    for name, data, given in members:
        if given is None:
            c = zlib.compressobj(6, zlib.DEFLATED, -15)
            given = c.compress(data) + c.flush()
        nb, crc, offset = name.encode(), zlib.crc32(data), len(out)
        out += struct.pack("<4s2B4HL2L2H", b"PK\x03\x04", 20, 0, 0, 8, 0, 0, crc, len(given), len(data), len(nb), 0) + nb + given
        central += (
            struct.pack("<4s4B4HL2L5H2L", b"PK\x01\x02", 20, 3, 20, 0, 0, 8, 0, 0, crc, len(given), len(data), len(nb), 0, 0, 0, 0, 0o100644 << 16, offset) + nb
        )
    n = len(members)
    return bytes(out + central + struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, n, n, len(central), len(out), 0))


def forged_wheel(
    directory: Path,
    lib: bytes,
    *,
    name: str = "evilkern",
    version: str = "1.0",
    tag: str = "cp310-abi3-manylinux_2_28_x86_64",
    requires: tuple[str, ...] = ("torch",),
    fakes_per_real: int = 1,
) -> tuple[Path, Forged]:
    """A real wheel (METADATA with ``requires``, WHEEL, RECORD) whose ``<name>/_C.so`` is
    ``forged_member(lib, fakes_per_real=...)``. Its METADATA requires torch: the scan reads its member by structure."""
    forged = forged_member(lib, fake_blocks=FAKE_BLOCKS * fakes_per_real, fakes_per_real=fakes_per_real)  # the same length of hidden chain
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    files: list[tuple[str, bytes, bytes | None]] = [
        (f"{dist}/__init__.py", b"", None),
        (f"{dist}/_C.so", forged.data, forged.deflated),
        (f"{info}/METADATA", metadata_text(name, version, requires), None),
        (f"{info}/WHEEL", f"Wheel-Version: 1.0\nGenerator: forgery\nRoot-Is-Purelib: false\nTag: {tag}\n".encode(), None),
    ]
    record = "".join(f"{p},{record_hash(d)},{len(d)}\n" for p, d, _ in files) + f"{info}/RECORD,,\n"
    files.append((f"{info}/RECORD", record.encode(), None))
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{dist}-{version}-{tag}.whl"
    path.write_bytes(zip_with(files))
    return path, forged


__all__ = ["MISSING", "RENAMED", "Forged", "compile_forged", "forged_member", "forged_wheel", "readelf_symbols", "zip_with"]


def low_entropy(n: int, seed: int) -> bytes:
    """Random bytes of 16 values: Huffman-coded in dynamic blocks, few matches."""
    return random.Random(seed).randbytes(n).translate(bytes(b"abcdefghijklmnop"[i % 16] for i in range(256)))
