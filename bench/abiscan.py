"""What the ABI scan costs live: every native wheel of the SGLang and vLLM closures of the bundled
snapshot (the wheels its manifest has scans of), scanned again from PyPI by range requests with no
cache, as a first ``resolve --with sglang`` on a new machine would. Prints, per kind, how many
wheels and how many of them the scan could not judge (unknown), the bytes read over the wheels'
bytes (over all of them, and over those the two plans install), the requests and the time.

    .venv/bin/python bench/abiscan.py [--pypi URL] [--json FILE]

PyPI's URL comes from uv/pip configuration (or --pypi); nothing is written to the snapshot. Offline,
it says so and exits 0 (a figure needs the network).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

from resolve_gpu_stack.cli.app import main as cli
from resolve_gpu_stack.cli.userconfig import discover_pypi_url
from resolve_gpu_stack.data.definitions import load_definitions
from resolve_gpu_stack.errors import CrawlError
from resolve_gpu_stack.net.http import HttpFetcher
from resolve_gpu_stack.net.scan import readers
from resolve_gpu_stack.net.settings import FetchSettings, TransportSettings
from resolve_gpu_stack.net.snapshot import Manifest

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / "indexes" / "snapshots" / "2026-03-07"
TARGET = ["--python", "3.12", "--platform", "x86_64-manylinux_2_28", "--installed", "torch==2.12.0.dev20260307+cu130"]
PLANS = {
    "sglang": ["--with", "sglang", "--override", "cuda-python>=13"],
    "vllm": ["--with", "vllm", "--flashinfer", "0.6.5"],
}


def _rescan_tool():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("rescan", ROOT / "indexes" / "snapshots" / "tools" / "rescan.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def planned_keys() -> set[str]:
    """The scan keys of the native wheels the two plans install (planned anyway, flagged)."""
    keys: set[str] = set()
    for words in PLANS.values():
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            code = cli(["resolve", "--snapshot", str(SNAPSHOT), *TARGET, *words, "--abi-mismatch", "warn", "--format", "json"])
        if code != 0:
            raise SystemExit(f"resolving {' '.join(words)} on the snapshot failed ({code})")
        keys |= {f"sha256={p['sha256']}" for p in json.loads(out.getvalue())["packages"] if p.get("sha256")}
    return keys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pypi", metavar="URL")
    ap.add_argument("--json", type=Path, metavar="FILE", help="write the figures here too")
    args = ap.parse_args(argv)
    manifest = Manifest.load(SNAPSHOT)
    bases = {name: base for name, base in manifest.data.get("indexes", {}).items() if base}
    bases["pypi"] = args.pypi or discover_pypi_url(os.environ)
    files = _rescan_tool().recorded_files(SNAPSHOT, manifest, bases)
    keys = sorted(k for k in manifest.data.get("scans", {}) if k in files)
    planned = planned_keys()
    defs = load_definitions()
    kinds: Counter[str] = Counter()
    unknown: list[str] = []
    read = size = reads = planned_read = planned_size = 0
    started = time.perf_counter()
    with HttpFetcher(FetchSettings(transport=TransportSettings(timeout=60)), cache=None) as fetcher:
        classify = readers.range_classifier(fetcher.scan_access(), defs.abi)
        try:
            records = [(key, classify.scan(files[key])) for key in keys]
        except CrawlError as exc:
            print(f"offline or PyPI unreachable ({exc.message}): no figures", file=sys.stderr)
            return 0
    seconds = time.perf_counter() - started
    for key, record in records:
        kinds[record.abi.kind] += 1
        read += record.bytes_read
        size += record.file_size
        reads += record.reads
        if record.abi.kind == "unknown":
            f = files[key]
            covered = " (the data covers it: a plan never scans it)" if defs.coupling_rule(f.name, f.version) is not None else ""
            unknown.append(f"{f.filename}: {record.abi.why}{covered}")
        if key in planned:
            planned_read += record.bytes_read
            planned_size += record.file_size
    figures = {
        "wheels": len(records),
        "kinds": dict(kinds),
        "unknown": unknown,
        "bytes_read": read,
        "wheel_bytes": size,
        "share": round(100 * read / size, 3) if size else None,
        "requests": reads,
        "seconds": round(seconds, 1),
        "planned_wheels": len([k for k, _ in records if k in planned]),
        "planned_bytes_read": planned_read,
        "planned_wheel_bytes": planned_size,
        "planned_share": round(100 * planned_read / planned_size, 3) if planned_size else None,
    }
    print(f"{len(records)} native wheels of the SGLang and vLLM closures scanned live in {seconds:.1f} s ({reads} range requests)")
    print(f"  kinds: {', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))}")
    print(f"  bytes read: {read:,} of {size:,} ({figures['share']}%)")
    print(f"  the {figures['planned_wheels']} the two plans install: {planned_read:,} of {planned_size:,} ({figures['planned_share']}%)")
    for line in unknown:
        print(f"  unknown: {line}")
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
