"""One wheel's ABI scan alone, live: the range reads a cold resolve makes for it (no cache, no scan
record, in this process), with what they cost: bytes, requests, wall and CPU seconds, the verdict.
For a scan that ends a resolve's timeline (issue 53: tilelang 0.1.12), to tell its own cost from
what it waits for beside the others.

    .venv/bin/python bench/scanone.py URL [--size BYTES] [--repeat N] [--json FILE]

URL is the wheel's address on the index (its page's link); BYTES its size (the page's; without
it the first read learns it). Offline, it says so and exits 0 (a figure needs the network).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from packaging.utils import parse_wheel_filename

from resolve_gpu_stack.data.definitions import load_definitions
from resolve_gpu_stack.errors import CrawlError
from resolve_gpu_stack.model import IndexFile
from resolve_gpu_stack.net.scan.classify import RangeClassifier
from resolve_gpu_stack.net.settings import TransportSettings
from resolve_gpu_stack.net.transport import Transport


def _file(url: str, size: int | None) -> IndexFile:
    filename = Path(urlsplit(url).path).name
    name, version, _, tags = parse_wheel_filename(filename)
    return IndexFile(filename=filename, url=url, name=name, version=version, tags=frozenset(tags), size=size)


def scan_once(url: str, size: int | None) -> dict[str, object]:
    """A fresh transport and classifier: one cold scan of the wheel at ``url``."""
    rules = load_definitions().abi
    transport = Transport(TransportSettings(timeout=60))
    classifier = RangeClassifier(transport, None, rules)
    cpu, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    record, _ = classifier.read(_file(url, size))
    seconds, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF)
    transport.close()
    return {
        "verdict": record.abi.kind,
        "why": record.abi.why,
        "bytes_read": record.bytes_read,
        "requests": record.reads,
        "file_size": record.file_size,
        "seconds": round(seconds, 3),
        "cpu_user": round(after.ru_utime - cpu.ru_utime, 3),
        "cpu_system": round(after.ru_stime - cpu.ru_stime, 3),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("url")
    ap.add_argument("--size", type=int, metavar="BYTES")
    ap.add_argument("--repeat", type=int, default=1, metavar="N")
    ap.add_argument("--json", type=Path, metavar="FILE", help="write the runs here too")
    args = ap.parse_args(argv)
    runs = []
    for _ in range(max(1, args.repeat)):
        try:
            run = scan_once(args.url, args.size)
        except CrawlError as exc:
            print(f"offline or the index unreachable ({exc.message}): no figures", file=sys.stderr)
            return 0
        runs.append(run)
        print(
            f"{run['verdict']}: {run['bytes_read']:,} of {run['file_size']:,} bytes in {run['requests']} requests, "
            f"{run['seconds']} s wall, {run['cpu_user']} s user + {run['cpu_system']} s system"
        )
    if args.json is not None:
        args.json.write_text(json.dumps({"url": args.url, "runs": runs}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
