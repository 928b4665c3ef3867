"""Why uv took twice as long in the worlds before issue 53 as in a PyPI-shaped one: each cause alone.

    python bench/reconcile.py [--world wide] [--repeat 5] [--latencies 50,0]

Builds one world twice, in the shape it had before issue 53 (no PEP 658 sidecar for any PyPI
wheel) and PyPI-shaped (``benchworld.PypiShapedWorld``), serves each with ``tests/support/server.py`` and
runs, in turns on empty caches: ours on each world, and ``uv pip compile`` on each world with each
of ``run.py``'s uv configurations (``extra-index``: ``--extra-index-url`` with uv's default
first-index strategy, as before issue 53; ``explicit``: uv's PyTorch guide). Prints, per latency,
each cell's median wall, the ratio ours / uv, and the requests the server saw by kind: pages
found, pages not found (404), ``.metadata`` sidecars, HEADs, ranges, whole wheels.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from urllib.parse import unquote, urlsplit

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from benchworld import WORLDS, Story, build_named  # noqa: E402
from run import UV_CONFIGS, _find_uv, _load, cli_command, compile_with_uv, resolve_words, run_measured, uv_command  # noqa: E402
from support.server import JSON_TYPE, IndexServer  # noqa: E402

KINDS = ("page", "404", "metadata", "HEAD", "range", "wheel")


def kinds(root: Path, log: list[tuple[str, str, dict[str, str]]]) -> dict[str, int]:
    """The requests of ``log`` by kind (a page is found when the world has its file)."""
    out = dict.fromkeys(KINDS, 0)
    for method, raw, headers in log:
        path = unquote(urlsplit(raw).path)
        if method == "HEAD":
            out["HEAD"] += 1
        elif path.endswith("/"):
            folder = root / path.lstrip("/")
            found = (folder / "index.html").is_file() or (JSON_TYPE in headers.get("Accept", "") and (folder / "index.json").is_file())
            out["page" if found else "404"] += 1
        elif path.endswith(".metadata"):
            out["metadata"] += 1
        elif "Range" in headers or "range" in headers:
            out["range"] += 1
        else:
            out["wheel"] += 1
    return out


def ours(srv: IndexServer, story: Story, cache: Path) -> tuple[float, dict[str, str]]:
    indexes = {"pytorch": srv.url + "whl/", "flashinfer": srv.url + "fi/", "pypi": srv.url + "simple/"}
    proc = run_measured([*cli_command(), *resolve_words(story, indexes, cache)])
    if proc.rc:
        raise SystemExit(f"resolve failed ({proc.rc}): {proc.err[-2000:]}")
    return proc.wall, {p["name"]: p["version"] for p in json.loads(proc.out)["packages"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--world", choices=WORLDS, default="wide")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--latencies", default="50,0", help="milliseconds before each answer (default 50,0)")
    args = ap.parse_args(argv)
    latencies = [float(x) / 1000 for x in args.latencies.split(",") if x.strip()]
    tmp = Path(tempfile.mkdtemp(prefix="rgs-reconcile-"))
    exe = _find_uv()
    failures: list[str] = []
    try:
        shapes = {"old": False, "pypi": True}
        stories = {shape: build_named(args.world, tmp / f"www-{shape}", pypi_sidecars=sidecars) for shape, sidecars in shapes.items()}
        servers = {shape: IndexServer(tmp / f"www-{shape}").start() for shape in shapes}
        for shape, srv in servers.items():
            stories[shape].world.write(srv.url)
        cells = [(shape, "ours") for shape in shapes] + [(shape, config) for shape in shapes for config in UV_CONFIGS]
        n = 0
        for latency in latencies:
            load = [_load()]
            walls: dict[tuple[str, str], list[float]] = {cell: [] for cell in cells}
            seen: dict[tuple[str, str], dict[str, int]] = {}
            for _ in range(args.repeat):
                plans: dict[tuple[str, str], dict[str, str]] = {}
                for shape, side in cells:
                    srv, story = servers[shape], stories[shape]
                    srv.latency = latency
                    start, n = len(srv.log), n + 1
                    if side == "ours":
                        wall, plan = ours(srv, story, tmp / f"cache-{n}")
                    else:
                        work = tmp / f"uv-{n}"
                        work.mkdir()
                        (work / "requirements.in").write_text(story.uv_requirements())
                        got = compile_with_uv(uv_command(exe, srv.url, work, config=side), srv, tmp / f"uvcache-{n}", work)
                        wall, plan = got["wall"], got["packages"]
                    walls[(shape, side)].append(wall)
                    seen[(shape, side)] = kinds(tmp / f"www-{shape}", srv.log[start:])
                    plans[(shape, side)] = plan
                if len({json.dumps(p, sort_keys=True) for p in plans.values()}) != 1:
                    failures.append(f"at {latency * 1000:.0f} ms the closures differ between the cells")
            load.append(_load())
            print(f"{args.world} world at {latency * 1000:.0f} ms, medians of {args.repeat} in turns (load average {load[0]:.1f} -> {load[1]:.1f}):")
            print(f"  {'world':6} {'client':18} {'wall':>7} {'ours/uv':>8} {'req':>5}  " + " ".join(f"{k:>8}" for k in KINDS))
            for shape, side in cells:
                wall = statistics.median(walls[(shape, side)])
                ratio = "" if side == "ours" else f"{statistics.median(walls[(shape, 'ours')]) / wall:7.2f}x"
                counts = seen[(shape, side)]
                client = "ours" if side == "ours" else f"uv {side}"
                print(f"  {shape:6} {client:18} {wall:6.3f}s {ratio:>8} {sum(counts.values()):5}  " + " ".join(f"{counts[k]:8}" for k in KINDS))
        for srv in servers.values():
            srv.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for f in failures:
        print(f"FAILED: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
