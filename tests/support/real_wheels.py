"""The five real wheels of ../shared/reference/abi.md, kept as their facts and the heads of their members
(tests/support/data/abi), read back as sparse wheels."""

from __future__ import annotations

import bisect
import json
import struct
import tarfile
from dataclasses import dataclass
from functools import cache

from support.paths import DATA

ABI_DATA = DATA / "abi"


WHEELS = ["xformers-0.0.35", "vllm_gguf_plugin-0.0.5", "torch_c_dlpack_ext-0.1.5", "torch_memory_saver-0.0.9", "sgl_kernel-0.3.21"]


@dataclass(frozen=True)
class Fixture:
    facts: dict
    heads: dict[str, bytes]

    @property
    def members(self) -> list[dict]:
        return self.facts["members"]


@cache
def fixture(name: str) -> Fixture:
    facts = json.loads((ABI_DATA / name / "facts.json").read_text())
    with tarfile.open(ABI_DATA / name / "heads.tar.xz") as tar:
        heads = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    return Fixture(facts, heads)


class SparseWheel:
    """A stored zip of the members at their real sizes: each member's first bytes, zeros after."""

    def __init__(self, fx: Fixture) -> None:
        self.pieces: list[tuple[int, bytes]] = []
        central = bytearray()
        pos = 0
        for m in fx.members:
            name = m["name"].encode()
            head = fx.heads[m["name"]]
            local = struct.pack("<4s2B4HL2L2H", b"PK\x03\x04", 20, 0, 0, 0, 0, 0, 0, m["size"], m["size"], len(name), 0) + name
            self.pieces += [(pos, local), (pos + len(local), head)]
            central += (
                struct.pack(
                    "<4s4B4HL2L5H2L",
                    b"PK\x01\x02",
                    20,
                    3,
                    20,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    m["size"],
                    m["size"],
                    len(name),
                    0,
                    0,
                    0,
                    0,
                    0,
                    pos,
                )
                + name
            )
            pos += len(local) + m["size"]
        end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(fx.members), len(fx.members), len(central), pos, 0)
        self.pieces.append((pos, bytes(central) + end))
        self.size = pos + len(central) + len(end)
        self.starts = [p for p, _ in self.pieces]
        self.bytes = 0

    def read(self, start: int, end: int) -> bytes:
        out = bytearray(end - start)
        i = max(0, bisect.bisect_right(self.starts, start) - 1)
        while i < len(self.pieces) and self.pieces[i][0] < end:
            at, blob = self.pieces[i]
            lo, hi = max(start, at), min(end, at + len(blob))
            if lo < hi:
                out[lo - start : hi - start] = blob[lo - at : hi - at]
            i += 1
        self.bytes += len(out)
        return bytes(out)
