"""Scan records (issue 53 item 2): the cold resolve of the SGLang closure (``frameworks.py``'s
world: the bundled snapshot's pages on loopback, a sparse wheel for each recorded scan) with and
without scan records, in turns.

    python bench/records.py [--repeat 5] [--latencies 50,0] [--world frameworks|wide|large]

``--world wide`` / ``large``: ``run.py``'s PyPI-shaped worlds instead (every PyPI wheel with its
PEP 658 sidecar, so every range request is a scan; their native wheels hold no ``.so``: a scan
there is the zip's tail and directory).

*Without*: ``--scan-records none`` (no record from anywhere: every native wheel read by range).
*With*: the records of a first cold run's scan cache (``net.scan.records.cached_records``) served as
static files beside the world, ``--scan-records URL/records/``, one request per compiled wheel;
*indexed*: the same folder with its ``index.json`` (``records.folder_index``), one request in all.
Each run has a fresh cache. Printed per latency: wall (median), range requests, requests to the
records folder, requests and bytes served, scans read by range.
Writes bench/results/records.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent / "src"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--latencies", default="50,0", help="ms per response, comma-separated (default 50,0)")
    ap.add_argument("--world", default="frameworks", choices=("frameworks", "wide", "large"))
    args = ap.parse_args()
    import frameworks
    import run
    from support.server import IndexServer

    from resolve_gpu_stack.net.scan.records import INDEX_NAME, cached_records, folder_index, record_name, record_text

    results: dict = {"repeat": args.repeat, "machine": run._machine()}
    with tempfile.TemporaryDirectory(prefix="rgs-bench-records-") as tmpdir:
        tmp = Path(tmpdir)
        run.PROC_ENV["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
        root = tmp / "www"
        if args.world == "frameworks":
            results["world"] = frameworks.build_world(root)
            resolve = frameworks.ours
        else:
            from benchworld import build_named

            story = build_named(args.world, root)
            results["world"] = args.world

            def resolve(srv, cache: Path, work: Path, extra: tuple[str, ...] = ()) -> dict:  # type: ignore[no-untyped-def]
                indexes = {"pytorch": srv.url + "whl/", "flashinfer": srv.url + "fi/", "pypi": srv.url + "simple/"}
                n0, b0 = len(srv.log), srv.bytes_sent
                proc = run.run_measured([*run.cli_command(), *run.resolve_words(story, indexes, cache), *extra])
                if proc.rc != 0:
                    raise RuntimeError(proc.err[-3000:])
                log = srv.log[n0:]
                return {
                    "wall": proc.wall,
                    "cpu": proc.cpu,
                    "requests": len(log),
                    "bytes": srv.bytes_sent - b0,
                    "range_requests": sum(1 for _, p, h in log if p.endswith(".whl") and "Range" in h),
                    "records_requests": sum(1 for _, p, _ in log if p.startswith("/records")),
                    "classify_files": 0,
                    "plan": json.loads(proc.out),
                }

        with IndexServer(root) as srv:
            srv.seek_ranges = True
            if args.world != "frameworks":
                story.world.write(srv.url)
            first = Path(tempfile.mkdtemp(dir=tmp))
            resolve(srv, first, tmp, ("--scan-records", "none"))  # the run whose scans become the records
            records = cached_records(first)
            for folder in ("records", "records-indexed"):
                (root / folder).mkdir()
                for sha, record in records:
                    (root / folder / record_name(sha)).write_text(record_text(sha, None, record.file_size, record))
            (root / "records-indexed" / INDEX_NAME).write_text(folder_index(root / "records-indexed")[0])
            results["records"] = len(records)
            say(f"{len(records)} records from a cold run's scan cache")
            for ms in (int(x) for x in args.latencies.split(",")):
                srv.latency = ms / 1000
                runs: dict[str, list[dict]] = {"without": [], "with": [], "indexed": []}
                kinds = (
                    ("without", ("--scan-records", "none")),
                    ("with", ("--scan-records", f"{srv.url}records/")),
                    ("indexed", ("--scan-records", f"{srv.url}records-indexed/")),
                )
                for i in range(args.repeat):
                    for kind, extra in kinds:
                        o = resolve(srv, Path(tempfile.mkdtemp(dir=tmp)), tmp, extra)
                        plan = {p["name"]: p["version"] for p in o.pop("plan")["packages"]}
                        o["closure"] = len(plan)
                        runs[kind].append(o)
                        say(
                            f"{ms} ms #{i + 1} {kind:7}: {o['wall']:.2f} s, {o['range_requests']} range requests, {o['records_requests']} to the records, {o['requests']} requests, "
                            f"{o['bytes']:,} B served"
                        )
                fig = {
                    k: {
                        m: statistics.median(r[m] for r in v)
                        for m in ("wall", "cpu", "requests", "range_requests", "records_requests", "bytes", "classify_files")
                    }
                    for k, v in runs.items()
                }
                fig["with_over_without_wall"] = fig["with"]["wall"] / fig["without"]["wall"]
                fig["indexed_over_without_wall"] = fig["indexed"]["wall"] / fig["without"]["wall"]
                results[f"cold_{ms}ms"] = fig
                say(
                    f"{ms} ms (median of {args.repeat}): without {fig['without']['wall']:.2f} s / {fig['without']['range_requests']:.0f} range requests; "
                    f"with {fig['with']['wall']:.2f} s / {fig['with']['range_requests']:.0f} range requests / {fig['with']['records_requests']:.0f} to the records ({fig['with_over_without_wall']:.2f}x); "
                    f"indexed {fig['indexed']['wall']:.2f} s / {fig['indexed']['range_requests']:.0f} range requests / {fig['indexed']['records_requests']:.0f} to the records ({fig['indexed_over_without_wall']:.2f}x)"
                )
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    (out / f"records-{args.world}.json").write_text(json.dumps(results, indent=2))
    return 0


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
