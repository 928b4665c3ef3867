#!/usr/bin/env python3
"""Refresh the scan records the tool ships (``indexes/records/<sha256>.json``, ``net/scan/records.py``).

For each compiled wheel of today's serving stack (``verify_today.py``'s rows: the SGLang and vLLM
closures' native wheels and the torch family's PyPI releases, for ``TARGET``; a row that names no
version: its newest release pip finds today), the wheel the target would take is found on its
index, its ``.so`` members are read by range requests from their starts (the scanner of
``resolve``; a few hundred KB to a few MB of each wheel) and its record is written under the sha256
the index page gives. A wheel nothing ties to torch, whose range scan judged a member by the library
names in its first bytes (``read = names``: a guess), is downloaded whole instead, verified against
that sha256 and size, and every member read from its start to its dynamic section as install's
confirmation reads it (``env/confirm.local_abi``). A scan that does not finish, a wheel whose page
gives no sha256, or one whose whole file cannot be had, is said and not written: no record is a guess.

    .venv/bin/python indexes/scan_records.py [--pypi URL] [--with FRAMEWORK ...] [NAME==VERSION ...]
    .venv/bin/python indexes/scan_records.py --index DIR   # DIR/index.json: DIR's records in one file (to host them)
    .venv/bin/python indexes/scan_records.py --guesses [--out DIR]   # DIR's records that are guesses, read again whole

``--guesses``: every record in ``--out`` read as unverified (a "cuda" or "none" of scan schema 4,
written before guesses were marked) is replaced by the reading of its wheel's whole file: the file
its record names (file name and sha256) found on PyPI, downloaded, verified, read from its start.

Then, for each ``--with`` framework (default: ``FRAMEWORKS``), a cold ``resolve`` of it for the
same target with no records (``--scan-records none``) in a fresh cache, and every finished scan
of that cache keyed by a sha256 (``net.scan.records.cached_records``: the closure's native wheels and
the candidates judged on the way) is written too, named by the plan's file name where it has one;
the plan's wheels whose verdict is a guess from names are read whole first, as above.
A record already there (the same sha256: the same bytes) is kept as it is, unless ``--rewrite`` (a
scan's member order and, for a wheel it stops reading at its budget, its byte counts differ from
run to run).

``--torch NAME==VERSION`` (repeatable; e.g. ``torch==2.15.0``): the exports records of that torch's
Linux wheels on PyPI (every CPython, x86_64 and aarch64): each wheel's libraries' exports read in
full by range (``net/scan/exports.WheelExports``, as ``resolve`` reads a kept torch's), and its
record written as ``<sha256>.exports.json`` holding the answer for the C++ torch imports of the
records in ``--out`` only (``answers-for``, and of those the ``missing``): what a verdict on those
wheels needs, a few KB per build instead of ~0.7 MB of every name (``records.exports_document``).
Run it after the scan records: a wheel whose imports are not all in that set reads the exports.

PyPI's URL comes from uv/pip configuration (or --pypi). Offline, it says so and exits 0.
``verify_today.py`` checks the same wheels' verdicts against their symbols; run both.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from types import MappingProxyType
from typing import Any

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "indexes"))

from verify_today import ROWS, TARGET, pip_versions  # noqa: E402

from resolve_gpu_stack.cli import common  # noqa: E402
from resolve_gpu_stack.cli import settings as S  # noqa: E402
from resolve_gpu_stack.cli.assemble import NetworkOptions, Session  # noqa: E402
from resolve_gpu_stack.cli.cmd_inspect import _best_wheel  # noqa: E402
from resolve_gpu_stack.cli.options import SourceOptions  # noqa: E402
from resolve_gpu_stack.cli.userconfig import discover_pypi_url  # noqa: E402
from resolve_gpu_stack.data.definitions import Definitions, RouteContext  # noqa: E402
from resolve_gpu_stack.env.confirm import local_abi  # noqa: E402
from resolve_gpu_stack.errors import ResolveGpuStackError  # noqa: E402
from resolve_gpu_stack.model import IndexFile  # noqa: E402
from resolve_gpu_stack.model.abi import READ_NAMES  # noqa: E402
from resolve_gpu_stack.net.download import fetch_verified  # noqa: E402
from resolve_gpu_stack.net.scan.classify import RangeClassifier, ScanRecord  # noqa: E402
from resolve_gpu_stack.net.scan.records import (  # noqa: E402
    EXPORTS_SUFFIX,
    INDEX_NAME,
    NO_RECORDS,
    exports_record_name,
    exports_text,
    folder_index,
    parse_record,
    publishable,
    record_name,
    record_text,
)
from resolve_gpu_stack.net.settings import FetchSettings, TransportSettings  # noqa: E402

OUT = REPO / "indexes" / "records"
FRAMEWORKS = ("sglang", "vllm==0.33.0")  # today's closures (issue 53's live runs); vllm 0.34.0 needs a FlashInfer no index serves


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pypi", help="PyPI's simple URL (default: from uv/pip configuration)")
    ap.add_argument("--python", default="3.12", help="the declared target's Python (default 3.12)")
    ap.add_argument("--out", type=Path, default=OUT, help="where the records go (default indexes/records/)")
    ap.add_argument("--with", dest="frameworks", action="append", metavar="FRAMEWORK", help=f"default: {', '.join(FRAMEWORKS)}")
    ap.add_argument("wheels", nargs="*", metavar="NAME==VERSION", help="default: verify_today.py's rows")
    ap.add_argument(
        "--index",
        type=Path,
        metavar="DIR",
        help="only write DIR/index.json (schema scan-records/v1): DIR's records in one file, read by a node with one request",
    )
    ap.add_argument("--rewrite", action="store_true", help="write a record again where one of that sha256 is there (default: kept as it is)")
    ap.add_argument(
        "--guesses",
        action="store_true",
        help="only replace --out's records that are guesses (read as unverified) by the reading of their wheels' whole files",
    )
    ap.add_argument("--torch", action="append", metavar="NAME==VERSION", help="write the exports records of this torch's Linux wheels instead")
    ap.add_argument("--cache-dir", type=Path, help="the cache (wheels downloaded whole stay there; default: a temporary folder)")
    args = ap.parse_args(argv)
    if args.index is not None:
        text, count = folder_index(args.index)
        (args.index / INDEX_NAME).write_text(text)
        print(f"{count} records in {args.index / INDEX_NAME}")
        return 0
    try:
        pypi = args.pypi or discover_pypi_url(os.environ)
    except ResolveGpuStackError as exc:
        print(f"skipped: {exc}")
        return 0
    wanted = args.wheels or [f"{r.name}=={r.version or _newest(r.name, pypi, args.python)}" for r in ROWS]
    wanted = [w for w in wanted if not w.endswith("==")]  # a row pip finds no release of: said there
    typed = S.TypedSettings(MappingProxyType(S.parse({"python": args.python, "platform": TARGET[1], "installed": (TARGET[3],)})))
    target, installed_requires = common.target_of(typed, os.environ)
    written = 0
    with tempfile.TemporaryDirectory() as temporary:
        cache = args.cache_dir or Path(temporary)
        network = NetworkOptions(
            cache_dir=cache, fetch=FetchSettings(transport=TransportSettings(timeout=60.0)), scan_records=NO_RECORDS
        )  # nothing answered by a record: every wheel read
        with Session(network) as session:
            defs = common.definitions(SourceOptions(indexes=(f"pypi={pypi}",)), os.environ)
            parts = session.resolve_parts(defs)
            classifier = parts.classifier
            assert isinstance(classifier, RangeClassifier)
            kept = parts.kept_torch(target, installed_requires.get("torch", ()))  # PyPI's torch: its family is PyPI's (routing.toml)
            if args.guesses:
                return _guesses(args.out, session, defs, parts, kept)
            if args.torch:
                return _torch_exports(args.torch, args.out, parts, kept)
            for text in wanted:
                try:
                    file = _best_wheel(text, parts, target, kept)
                    record = classifier.scan(file)
                    if record.abi.read == READ_NAMES and file.sha256:  # a guess from the names in its first bytes: read it whole
                        record = _whole(file, session, defs)
                except ResolveGpuStackError as exc:
                    if not written and text == wanted[0]:
                        print(f"skipped (offline?): {text}: {exc}")
                        return 0
                    print(f"not recorded  {text}: {exc}")
                    continue
                if not file.sha256 or not publishable(record):
                    print(f"not recorded  {file.filename}: {'no sha256 on its page' if not file.sha256 else _unpublishable(record)}")
                    continue
                if (args.out / record_name(file.sha256)).exists() and not args.rewrite:
                    print(f"kept          {file.filename}: its record is there")
                    continue
                args.out.mkdir(parents=True, exist_ok=True)
                (args.out / record_name(file.sha256)).write_text(record_text(file.sha256, file.filename, file.size or record.file_size, record))
                written += 1
                print(f"recorded      {file.filename}: {record.abi.kind}, {record.bytes_read} of {record.file_size} bytes in {record.reads} requests")
    for framework in args.frameworks or FRAMEWORKS:
        written += _framework(framework, args, pypi)
    print(f"{written} records in {args.out}")
    return 0


def _unpublishable(record: ScanRecord) -> str:
    """Why ``record`` is not written (``publishable`` does not hold)."""
    if record.abi.read == READ_NAMES:
        return f"a guess from the library names in its first bytes, not read whole ({record.abi.why})"
    return record.abi.why


def _whole(file: IndexFile, session: Session, defs: Definitions) -> ScanRecord:
    """``file`` downloaded whole, verified against its page's sha256 and size, and every member
    read from its start to its dynamic section (install's confirmation's reading: ``local_abi``)."""
    fetched = fetch_verified(
        file.url, sha256=file.sha256, size=file.size, cache=session.wheel_cache(), fetcher=session.download_fetcher(defs), filename=file.filename
    )
    abi, _ = local_abi(fetched.path, defs)
    return ScanRecord(abi=abi, bytes_read=fetched.size, reads=1, file_size=fetched.size)


def _snapshot_project(sha256: str) -> str | None:
    """The project whose page in a bundled snapshot (``indexes/snapshots/*/pages/INDEX/PROJECT/``)
    lists a file of ``sha256`` (a record exported from a scan cache names no file)."""
    for page in sorted((REPO / "indexes" / "snapshots").glob("*/pages/*/*/index.json")):
        if sha256 in page.read_text(errors="replace"):
            return page.parent.name
    return None


def _guesses(out: Path, session: Session, defs: Definitions, parts: Any, kept: Any) -> int:
    """``--guesses``: each record in ``out`` read as unverified replaced by its wheel's whole reading
    (the file of its name and sha256 on its index); one that cannot be is said and left as it is."""
    replaced = left = 0
    for path in sorted(out.glob("*.json")):
        sha256 = path.name.removesuffix(".json")
        old, _ = parse_record(sha256, path.read_bytes())
        if old is None or old.abi.read != READ_NAMES:
            continue
        filename = str(json.loads(path.read_text()).get("filename") or "")
        try:
            name = parse_wheel_filename(filename)[0] if filename else _snapshot_project(sha256)
            if name is None:
                raise ResolveGpuStackError("the record names no file, and no bundled snapshot's page lists its sha256")
            offers, _ = parts.finder.offers(name, RouteContext.of_kept(kept))
            file = next((o.file for o in offers if (o.file.sha256 or "").lower() == sha256 and filename in ("", o.file.filename)), None)
            if file is None:
                raise ResolveGpuStackError(f"no file {filename or name} of sha256 {sha256} on its index")
            record = _whole(file, session, defs)
        except (ResolveGpuStackError, InvalidWheelFilename) as exc:
            print(f"not recorded  {filename or path.name}: {exc}")
            left += 1
            continue
        filename = file.filename
        if not publishable(record):
            print(f"not recorded  {filename}: {_unpublishable(record)}")
            left += 1
            continue
        path.write_text(record_text(sha256, filename, file.size or record.file_size, record))
        replaced += 1
        print(f"recorded      {filename}: {record.abi.kind}, read whole ({record.file_size} bytes)")
    print(f"{replaced} guesses replaced by whole readings, {left} left as they are, in {out}")
    return 0


def universe(out: Path) -> frozenset[str]:
    """The C++ torch imports of the scan records in ``out`` (what a verdict on those wheels asks a torch)."""
    names: set[str] = set()
    for path in sorted(out.glob("*.json")):
        sha256 = path.name.removesuffix(".json")
        record = parse_record(sha256, path.read_bytes())[0] if not path.name.endswith(EXPORTS_SUFFIX) else None
        if record is not None:
            names |= {s for m in record.abi.members if m.links_torch for s in m.cxx}
    return frozenset(names)


def _torch_exports(pins: list[str], out: Path, parts: Any, kept: Any) -> int:
    """``--torch``: the exports records of each pin's Linux wheels (see the module docstring)."""
    import hashlib

    from packaging.version import Version

    from resolve_gpu_stack.net.scan.exports import encode_exports

    names = universe(out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"{len(names)} C++ torch imports in the records of {out}")
    for pin in pins:
        project, version = pin.split("==", 1)
        offers = parts.finder.kept_release(project, Version(version), RouteContext.of_kept(kept))  # PyPI's page (routing.toml's kept routes)
        files = [
            o.file
            for o in offers
            if str(o.file.version) == version and o.file.filename.endswith(("_x86_64.whl", "_aarch64.whl")) and "manylinux" in o.file.filename
        ]
        by_content: dict[str, list[str]] = {}
        for file in sorted(files, key=lambda f: f.filename):
            found = parts.exports(Version(version), file)
            if found.symbols is None or not file.sha256:
                print(f"not recorded  {file.filename}: {found.source if found.symbols is None else 'no sha256 on its page'}")
                continue
            by_content.setdefault(hashlib.sha256(encode_exports(found.symbols)).hexdigest()[:12], []).append(file.filename)
            text = exports_text(file.sha256, file.filename, file.size or 0, found.symbols, universe=names)
            (out / exports_record_name(file.sha256)).write_text(text)
            missing = len(names - found.symbols)
            print(f"recorded      {file.filename}: {len(found.symbols)} exports; of {len(names)} names, {missing} missing ({len(text)} bytes)")
        for digest, same in by_content.items():
            print(f"exports {digest}: {len(same)} wheels: {', '.join(same)}")
    return 0


def _newest(name: str, pypi: str, python: str) -> str:
    """The newest release pip finds of ``name`` today ('' when none: said)."""
    try:
        versions = pip_versions(name, [pypi], python)
    except RuntimeError as exc:
        versions = []
        print(f"not recorded  {name}: {exc}")
    if not versions:
        print(f"not recorded  {name}: pip finds no release")
    return versions[0] if versions else ""


def _framework(framework: str, args: argparse.Namespace, pypi: str) -> int:
    """The records of a cold resolve of ``framework`` for the target (see the module docstring)."""
    import contextlib
    import io
    import json

    from resolve_gpu_stack.cli.app import main as cli
    from resolve_gpu_stack.net.scan.records import cached_records

    with tempfile.TemporaryDirectory() as cache:
        argv = ["resolve", "--python", args.python, *TARGET[:4], "--torch", "installed", "--no-cubin", "--no-jit-cache", "--with", framework]
        argv += ["--index", f"pypi={pypi}", "--cache-dir", cache, "--scan-records", NO_RECORDS, "--format", "json", "-q"]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli(argv)
        if code != 0:
            print(f"not recorded  --with {framework}: exit {code}: {err.getvalue().strip()[:300]}")
            return 0
        plan = json.loads(out.getvalue())["packages"]
        names = {p["sha256"]: p["url"].split("#", 1)[0].rsplit("/", 1)[-1] for p in plan if p.get("sha256") and p.get("url")}
        records = cached_records(Path(cache))
    guesses = [p for p in plan if isinstance(p.get("abi"), dict) and p["abi"].get("read") == READ_NAMES and p.get("sha256") and p.get("url")]
    whole = _read_whole(guesses, args, pypi)  # the plan's guesses from names, read from their whole files
    records += whole
    args.out.mkdir(parents=True, exist_ok=True)
    new = [(sha, record) for sha, record in records if args.rewrite or not (args.out / record_name(sha)).exists()]
    for sha, record in new:
        (args.out / record_name(sha)).write_text(record_text(sha, names.get(sha), record.file_size, record))
    print(
        f"recorded      --with {framework}: {len(new)} new of {len(records)} scans ({sum(sha in names for sha, _ in records)} of the plan's wheels;"
        f" {len(whole)} of its {len(guesses)} guesses from names read whole)"
    )
    return len(new)


def _read_whole(rows: list[dict[str, Any]], args: argparse.Namespace, pypi: str) -> list[tuple[str, ScanRecord]]:
    """The whole readings of the plan rows ``rows`` (each downloaded, verified against the plan's
    sha256 and size, read from its start); one that cannot be had is said and left out."""
    from dataclasses import replace

    from resolve_gpu_stack.cli.cmd_inspect import _file_at

    out: list[tuple[str, ScanRecord]] = []
    with tempfile.TemporaryDirectory() as temporary:
        network = NetworkOptions(cache_dir=args.cache_dir or Path(temporary), fetch=FetchSettings(transport=TransportSettings(timeout=60.0)))
        with Session(network) as session:
            defs = common.definitions(SourceOptions(indexes=(f"pypi={pypi}",)), os.environ)
            for row in rows:
                try:
                    file = replace(_file_at(str(row["url"])), sha256=str(row["sha256"]), size=row.get("size"))
                    record = _whole(file, session, defs)
                except ResolveGpuStackError as exc:
                    print(f"not recorded  {row.get('name')} {row.get('version')}: {exc}")
                    continue
                if not publishable(record):
                    print(f"not recorded  {file.filename}: {_unpublishable(record)}")
                    continue
                out.append((str(row["sha256"]).lower(), record))
    return out


if __name__ == "__main__":
    sys.exit(main())
