"""Re-scan every native wheel a snapshot has a scan of, with this version's scanner, and rewrite the
manifest's ``scans`` (nothing else): for snapshots recorded before the scans held the wheels'
imports (schema 1), or after the scanner changed.

Each scan is keyed by its wheel's sha256; the wheel is found on the snapshot's recorded pages by that
digest and read live by range requests from the index that owns it: PyPI's files under the PyPI URL
of your uv/pip configuration (or --pypi URL), the others under the snapshot's recorded base. Only
the wheels' first bytes are read (bytes read over wheel bytes are printed). A wheel that cannot be
read keeps its scan as ``unknown``, with why.

    .venv/bin/python indexes/snapshots/tools/rescan.py indexes/snapshots/2026-03-07 [--pypi URL]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from resolve_gpu_stack.cli.userconfig import discover_pypi_url
from resolve_gpu_stack.data.definitions import load_definitions
from resolve_gpu_stack.index.parse import parse_page
from resolve_gpu_stack.model import IndexFile, IndexPage
from resolve_gpu_stack.net.cache import HttpCache
from resolve_gpu_stack.net.scan.classify import SCAN_SCHEMA, scan_key
from resolve_gpu_stack.net.http import HttpFetcher
from resolve_gpu_stack.net.settings import FetchSettings, TransportSettings
from resolve_gpu_stack.net.snapshot import Manifest
from resolve_gpu_stack.net.scan import readers


def recorded_files(root: Path, manifest: Manifest, bases: dict[str, str]) -> dict[str, IndexFile]:
    """Every wheel the snapshot's pages list, by scan key."""
    out: dict[str, IndexFile] = {}
    for key, entry in manifest.data["pages"].items():
        if entry.get("status") != 200:
            continue
        index, _, rel = key.partition(":")
        base = bases.get(index)
        if base is None:
            continue
        url = base + rel
        page = IndexPage(url=url, content=(root / entry["file"]).read_bytes(), content_type=entry.get("content_type", "text/html"))
        for f in parse_page(page, index=index).files:
            if f.is_wheel:
                out[scan_key(f)] = f
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("snapshot", type=Path)
    ap.add_argument("--pypi", metavar="URL", help="the PyPI simple base the snapshot's PyPI files are read from (default: uv/pip configuration)")
    ap.add_argument("--cache-dir", type=Path, help="a cache for the scans (default: none, every wheel is read)")
    args = ap.parse_args(argv)
    root: Path = args.snapshot
    manifest = Manifest.load(root)
    recorded = dict(manifest.data.get("indexes", {}))
    bases = {name: base for name, base in recorded.items() if base}
    bases["pypi"] = args.pypi or discover_pypi_url(os.environ)
    files = recorded_files(root, manifest, bases)
    defs = load_definitions()
    scans = manifest.data.setdefault("scans", {})
    read = total = 0
    with HttpFetcher(FetchSettings(transport=TransportSettings(timeout=60)), cache=HttpCache(args.cache_dir) if args.cache_dir else None) as fetcher:
        classify = readers.range_classifier(fetcher.scan_access(), defs.abi)
        for key in sorted(scans):
            old = scans[key]
            file = files.get(key)
            if file is None:
                print(f"{key[:20]}: no recorded page lists this wheel; left as it was", file=sys.stderr)
                continue
            record = classify.scan(file)
            scans[key] = record.to_dict()
            read += record.bytes_read
            total += record.file_size
            was = old.get("kind") if old.get("schema") != SCAN_SCHEMA else old.get("kind")
            print(f"{file.filename}: {was} -> {record.abi.kind} ({record.bytes_read} of {record.file_size} bytes): {record.abi.why[:140]}", file=sys.stderr)
    manifest.save()
    share = f"{100 * read / total:.2f}%" if total else "-"
    print(json.dumps({"wheels": len(scans), "bytes_read": read, "wheel_bytes": total, "share": share}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
