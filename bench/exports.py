"""Live: the kept torch's exports read from its wheel on PyPI, with no cache, two ways in turns:
each large library read from its end first (entered in the middle of its deflate stream,
``scan/elfstream.py``), and from its start only (``elfstream.SEEK_MIN`` raised past every
library). The bytes, the seconds and the symbols of each read; the symbols must agree.

    python bench/exports.py [--version 2.15.0] [--runs 3] [--wheel cp312-cp312-manylinux_2_28_aarch64]

PyPI's URL comes from uv's / pip's configuration. Skips (exit 0) when PyPI cannot be reached.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

from packaging.version import Version  # noqa: E402

from resolve_gpu_stack.cli.userconfig import discover_pypi_url  # noqa: E402
from resolve_gpu_stack.errors import ResolveGpuStackError  # noqa: E402
from resolve_gpu_stack.model import IndexFile  # noqa: E402
from resolve_gpu_stack.net.scan.exports import WheelExports  # noqa: E402
from resolve_gpu_stack.net.transport import Transport  # noqa: E402
from resolve_gpu_stack.scan import elfstream  # noqa: E402

WHEEL = "cp312-cp312-manylinux_2_28_x86_64"


def torch_wheel(pypi: str, version: str, tag: str = WHEEL) -> IndexFile:
    """The wheel of torch ``version`` with ``tag`` (cp312 x86_64 by default) on PyPI's JSON simple page."""
    request = urllib.request.Request(pypi.rstrip("/") + "/torch/", headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        files = json.load(answer)["files"]
    row = next(f for f in files if f["filename"] == f"torch-{version}-{tag}.whl")
    return IndexFile(filename=row["filename"], url=row["url"], name="torch", version=Version(version), sha256=row["hashes"].get("sha256"), size=row["size"])


SEEK_MIN = elfstream.SEEK_MIN


def read(file: IndexFile, *, from_end: bool) -> tuple[float, int, int, int]:
    """(seconds, body bytes received, requests, symbols) of one read with a fresh transport and
    no cache."""
    elfstream.SEEK_MIN = SEEK_MIN if from_end else 2**62
    transport = Transport()
    started = time.perf_counter()
    found = WheelExports(transport, None)(str(file.version), file)
    took = time.perf_counter() - started
    if found.symbols is None:
        raise SystemExit(f"not read: {found.source}")
    return took, transport.stats.bytes_received, transport.stats.requests, len(found.symbols)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", default="2.15.0")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--wheel", default=WHEEL, help=f"the wheel's tags (default {WHEEL}; its aarch64 build: cp312-cp312-manylinux_2_28_aarch64)")
    args = ap.parse_args(argv)
    try:
        file = torch_wheel(discover_pypi_url(dict(os.environ)), args.version, args.wheel)
    except (ResolveGpuStackError, OSError) as exc:
        print(f"skipped: PyPI cannot be reached ({exc})")
        return 0
    figures: dict[str, list[tuple[float, int, int, int]]] = {"from its end": [], "from its start": []}
    for _ in range(args.runs):
        for way in figures:
            took, received, requests, symbols = read(file, from_end=way == "from its end")
            figures[way].append((took, received, requests, symbols))
            print(f"{way}: {took:.2f} s, {received:,} bytes in {requests} requests, {symbols:,} symbols", flush=True)
    print(f"{file.filename} ({file.size:,} bytes), medians of {args.runs}:")
    for way, runs in figures.items():
        print(f"  {way:15} {statistics.median(r[0] for r in runs):5.2f} s  {statistics.median(r[1] for r in runs):>13,} bytes")
    seen = {r[3] for runs in figures.values() for r in runs}
    if len(seen) != 1:
        print(f"the two ways disagree: {sorted(seen)} symbols")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
