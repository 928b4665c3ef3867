"""The depth of a cold resolve's critical path, in round trips, against the world's floor.

    python bench/depth.py [--world wide] [--repeat 3] [--latencies 400,800] [--sides ours,uv]

Serves one world of ``run.py`` (``tests/server.py``) at each latency and runs ours and
``uv pip compile`` (the answer given) in turns on empty caches. Between two latencies where the
CPU is already hidden behind the waits, the wall grows by one latency step per round trip on the
critical path: depth = (wall at L2 - wall at L1) / (L2 - L1), medians. The floor is two round trips
a level of the closure (its page, then the chosen wheel's METADATA): 14 for the 215-package
closure (7 levels), counted from the world itself (``levels``).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from benchworld import WORLDS, Story, build_named  # noqa: E402
from run import _find_uv, cli_command, compile_with_uv, resolve_words, run_measured, uv_command  # noqa: E402
from server import IndexServer  # noqa: E402


def ours(srv: IndexServer, story: Story, cache: Path) -> float:
    indexes = {"pytorch": srv.url + "whl/", "flashinfer": srv.url + "fi/", "pypi": srv.url + "simple/"}
    proc = run_measured([*cli_command(), *resolve_words(story, indexes, cache)])
    if proc.rc:
        raise SystemExit(f"resolve failed ({proc.rc}): {proc.err[-2000:]}")
    return proc.wall


def uv(srv: IndexServer, story: Story, cache: Path, work: Path, exe: str) -> float:
    work.mkdir(parents=True, exist_ok=True)
    (work / "requirements.in").write_text(story.uv_requirements())
    return float(compile_with_uv(uv_command(exe, srv.url, work), srv, cache, work)["wall"])


def levels(story: Story) -> int:
    """The closure's depth in levels: the longest chain of requirements from the pins (markers
    evaluated here, no extras), read from the world's METADATA files."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    requires: dict[str, set[str]] = {}
    for entries in story.world.pages.values():
        for e in entries:
            lines = e.wheel.metadata.decode("utf-8", "replace").splitlines()
            name = canonicalize_name(next(line.split(":", 1)[1].strip() for line in lines if line.startswith("Name:")))
            for line in lines:
                if line.startswith("Requires-Dist:"):
                    req = Requirement(line.split(":", 1)[1].strip())
                    if req.marker is None or req.marker.evaluate({"extra": ""}):
                        requires.setdefault(name, set()).add(canonicalize_name(req.name))
    memo: dict[str, int] = {}

    def depth(name: str, path: frozenset[str]) -> int:
        if name not in memo:
            memo[name] = 1 + max((depth(d, path | {name}) for d in requires.get(name, ()) if d not in path), default=0)
        return memo[name]

    return max(depth(canonicalize_name(n), frozenset()) for n in story.pins)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--world", choices=WORLDS, default="wide")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--latencies", default="400,800", help="two latencies in ms (default 400,800: high enough to hide our CPU on a loaded 2-core machine)")
    ap.add_argument("--sides", default="ours,uv", help="ours, uv or both (default)")
    args = ap.parse_args(argv)
    low, high = (float(x) / 1000 for x in args.latencies.split(","))
    sides = [s.strip() for s in args.sides.split(",") if s.strip() in ("ours", "uv")]
    tmp = Path(tempfile.mkdtemp(prefix="rgs-depth-"))
    exe = _find_uv()
    try:
        story = build_named(args.world, tmp / "www")
        floor = 2 * levels(story)
        walls: dict[tuple[str, float], list[float]] = {}
        with IndexServer(tmp / "www") as srv:
            story.world.write(srv.url)
            for latency in (low, high):
                srv.latency = latency
                for i in range(args.repeat):
                    for side in sides:
                        cache = tmp / f"cache-{side}-{latency}-{i}"
                        wall = ours(srv, story, cache) if side == "ours" else uv(srv, story, cache, tmp / f"uv-{latency}-{i}", exe)
                        walls.setdefault((side, latency), []).append(wall)
        print(f"{args.world} world: floor {floor} round trips ({floor // 2} levels, a page and a METADATA read each)")
        for side in sides:
            a, b = statistics.median(walls[(side, low)]), statistics.median(walls[(side, high)])
            print(f"  {side}: {a:.3f} s at {low * 1000:.0f} ms, {b:.3f} s at {high * 1000:.0f} ms: depth {(b - a) / (high - low):.1f} round trips")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
