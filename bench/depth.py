"""The depth of a cold resolve's critical path, in round trips, against the world's floor.

    python bench/depth.py [--world wide] [--repeat 3] [--latencies 400] [--sides ours,uv]
                          [--uv-config explicit|extra-index] [--old-world] [--src REV_OR_SRC]

Serves one world of ``run.py`` (``tests/support/server.py``, the time of every request kept) at each
latency and runs ours and ``uv pip compile`` (the answer given, uv configured as ``run.py``
configures it) in turns on empty caches.

**From the server's log** (every latency): the server answers a request ``L`` seconds after it
arrives, so a request that arrives less than ``L`` after another cannot have been sent in answer to
it. A request's round trip is 1 + the highest round trip of the requests answered before it
arrived; the last one's is the critical path. Each request is put to the package it asks for (its
page on any index, its ``.metadata``, its wheel), and each package to its level of the closure's
graph (the shortest chain of requirements from the answer's pins, markers evaluated for the
target, extras followed, read from the chosen releases' METADATA): per level, the round trip by
which both sides had asked for everything of that level, against the floor of two a level (a
page, then a METADATA). A round trip counted here is an upper bound: CPU between two requests
longer than ``L`` counts as one; at 400 ms it seldom does.

**From the wall** (two latencies): between two latencies where the CPU already hides behind the
waits, the wall grows by one latency step per round trip: depth = (wall at L2 - wall at L1) /
(L2 - L1), medians.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from benchworld import WORLDS, Story, build_named  # noqa: E402
from run import TARGET, UV_CONFIGS, _find_uv, cli_command, compile_with_uv, remove_work, resolve_words, run_measured, tree_command, uv_command  # noqa: E402
from support.server import IndexServer  # noqa: E402

ENVIRONMENT = {
    "python_version": TARGET[0],
    "python_full_version": f"{TARGET[0]}.0",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
}


class TimedLog(list[Any]):
    """``IndexServer.log`` that keeps when each request arrived (``time.monotonic``)."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []

    def append(self, item: Any) -> None:
        self.times.append(time.monotonic())
        super().append(item)


def ours(srv: IndexServer, story: Story, cache: Path, src: Path | None = None) -> tuple[float, dict[str, str]]:
    import json

    indexes = {"pytorch": srv.url + "whl/", "flashinfer": srv.url + "fi/", "pypi": srv.url + "simple/"}
    proc = run_measured([*(tree_command(src) if src else cli_command()), *resolve_words(story, indexes, cache)])
    if proc.rc:
        raise SystemExit(f"resolve failed ({proc.rc}): {proc.err[-2000:]}")
    return proc.wall, {p["name"]: p["version"] for p in json.loads(proc.out)["packages"]}


def uv(srv: IndexServer, story: Story, cache: Path, work: Path, exe: str, config: str) -> tuple[float, dict[str, str]]:
    work.mkdir(parents=True, exist_ok=True)
    (work / "requirements.in").write_text(story.uv_requirements())
    out = compile_with_uv(uv_command(exe, srv.url, work, config=config), srv, cache, work)
    return float(out["wall"]), out["packages"]


def graph_levels(story: Story, plan: dict[str, str]) -> dict[str, int]:
    """Each package of ``plan`` -> its level (1: the answer's pins), the shortest chain of
    requirements of the chosen releases, markers evaluated for the target, extras followed."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    plan = {canonicalize_name(n): v for n, v in plan.items()}
    metadata: dict[str, list[str]] = {}
    for entries in story.world.pages.values():
        for e in entries:
            lines = e.wheel.metadata.decode("utf-8", "replace").splitlines()
            head = {k: v.strip() for k, _, v in (line.partition(":") for line in lines) if k in ("Name", "Version")}
            name = canonicalize_name(head.get("Name", ""))
            if plan.get(name) == head.get("Version"):
                metadata[name] = [line.split(":", 1)[1].strip() for line in lines if line.startswith("Requires-Dist:")]
    level = {canonicalize_name(n): 1 for n in story.pins}
    todo: list[tuple[str, frozenset[str]]] = [(n, frozenset()) for n in level]
    while todo:
        nxt: list[tuple[str, frozenset[str]]] = []
        for name, extras in todo:
            for text in metadata.get(name, ()):
                req = Requirement(text)
                child = canonicalize_name(req.name)
                if req.marker is not None and not any(req.marker.evaluate({**ENVIRONMENT, "extra": x}) for x in (extras or {""})):
                    continue
                if child in plan and child not in level:
                    level[child] = level[name] + 1
                    nxt.append((child, frozenset(req.extras)))
                elif child in plan and level[child] == level[name] + 1 and req.extras:
                    nxt.append((child, frozenset(req.extras)))
        todo = nxt
    return level


def request_name(path: str) -> str:
    """The package a request is for: a page's last folder, a file's distribution name."""
    from urllib.parse import unquote, urlsplit

    from packaging.utils import canonicalize_name

    path = unquote(urlsplit(path).path)
    if path.endswith("/"):
        return canonicalize_name(path.rstrip("/").rsplit("/", 1)[-1])
    return canonicalize_name(path.rsplit("/", 1)[-1].split("-", 1)[0])


def round_trips(times: list[float], latency: float) -> list[int]:
    """Each request's round trip: 1 + the highest of those answered before it arrived."""
    order = sorted(range(len(times)), key=times.__getitem__)
    trips = [0] * len(times)
    done, best = 0, 0
    for i in order:
        while done < len(order) and times[order[done]] + latency <= times[i]:
            best = max(best, trips[order[done]])
            done += 1
        trips[i] = best + 1
    return trips


def per_level(log: TimedLog, start: int, latency: float, level: dict[str, int]) -> tuple[int, dict[int, int], int, dict[int, int]]:
    """The critical path's round trips, the round trip by which each level was asked for (every
    request; and without range requests: pages, ``.metadata`` files and HEADs), and the requests
    of this run."""
    entries, times = log[start:], log.times[start:]
    trips = round_trips(times, latency)
    by_level: dict[int, int] = {}
    unranged: dict[int, int] = {}
    for (_, path, headers), trip in zip(entries, trips, strict=True):
        lv = level.get(request_name(path))
        if lv is not None:
            by_level[lv] = max(by_level.get(lv, 0), trip)
            if "Range" not in headers and "range" not in headers:
                unranged[lv] = max(unranged.get(lv, 0), trip)
    return max(trips, default=0), by_level, len(entries), unranged


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--world", choices=WORLDS, default="wide")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--latencies", default="400", help="one latency in ms (the log's count), or two (and the wall's slope between them); default 400")
    ap.add_argument("--sides", default="ours,uv", help="ours, uv or both (default)")
    ap.add_argument("--uv-config", choices=UV_CONFIGS, default="explicit", help="how uv is given the indexes (run.py's --uv-config)")
    ap.add_argument("--old-world", action="store_true", help="the world as it was before issue 53 (no PEP 658 sidecar on PyPI's wheels)")
    ap.add_argument("--src", help="run ours from this tree (a git revision or a src folder) instead of this checkout's console script")
    args = ap.parse_args(argv)
    latencies = [float(x) / 1000 for x in args.latencies.split(",") if x.strip()]
    sides = [s.strip() for s in args.sides.split(",") if s.strip() in ("ours", "uv")]
    tmp = Path(tempfile.mkdtemp(prefix="rgs-depth-"))
    exe = _find_uv()
    src: Path | None = None
    if args.src:
        from ab import source_dir

        src = source_dir(args.src, tmp)
    try:
        story = build_named(args.world, tmp / "www", pypi_sidecars=not args.old_world)
        walls: dict[tuple[str, float], list[float]] = {}
        counts: dict[tuple[str, float], list[tuple[int, dict[int, int], int, dict[int, int]]]] = {}
        levels: dict[str, int] = {}
        with IndexServer(tmp / "www") as srv:
            srv.log = TimedLog()
            story.world.write(srv.url)
            for latency in latencies:
                srv.latency = latency
                for i in range(args.repeat):
                    for side in sides:
                        cache, start = tmp / f"cache-{side}-{latency}-{i}", len(srv.log)
                        if side == "ours":
                            wall, plan = ours(srv, story, cache, src)
                        else:
                            wall, plan = uv(srv, story, cache, tmp / f"uv-{latency}-{i}", exe, args.uv_config)
                        levels = levels or graph_levels(story, plan)
                        walls.setdefault((side, latency), []).append(wall)
                        assert isinstance(srv.log, TimedLog)
                        counts.setdefault((side, latency), []).append(per_level(srv.log, start, latency, levels))
        depth = max(levels.values())
        shape = "before issue 53 (no PyPI sidecars)" if args.old_world else "PyPI-shaped"
        print(
            f"{args.world} world ({shape}), uv {args.uv_config}: {len(levels)} packages in {depth} levels; floor {2 * depth} round trips (a page, then a METADATA, a level)"
        )
        for latency in latencies:
            print(f"  at {latency * 1000:.0f} ms, from the server's log (medians of {args.repeat}):")
            print(
                "    level  packages  floor  " + "  ".join(f"{side:>5}" for side in sides) + "  " + "  ".join(f"{side + ' w/o ranges':>16}" for side in sides)
            )
            for lv in range(1, depth + 1):
                row = [statistics.median(c[1].get(lv, 0) for c in counts[(side, latency)]) for side in sides]
                row += [statistics.median(c[3].get(lv, 0) for c in counts[(side, latency)]) for side in sides]
                cells = [f"{x:5.0f}" for x in row[: len(sides)]] + [f"{x:16.0f}" for x in row[len(sides) :]]
                print(f"    {lv:5}  {sum(1 for v in levels.values() if v == lv):8}  {2 * lv:5}  " + "  ".join(cells))
            for side in sides:
                runs = counts[(side, latency)]
                total = statistics.median(c[0] for c in runs)
                print(
                    f"    {side}: critical path {total:.0f} round trips ({total / depth:.2f} a level, floor 2), "
                    f"{statistics.median(c[2] for c in runs):.0f} requests, wall {statistics.median(walls[(side, latency)]):.3f} s"
                )
        if len(latencies) >= 2:
            low, high = latencies[0], latencies[-1]
            for side in sides:
                a, b = statistics.median(walls[(side, low)]), statistics.median(walls[(side, high)])
                print(
                    f"  {side}, from the wall: {a:.3f} s at {low * 1000:.0f} ms, {b:.3f} s at {high * 1000:.0f} ms: depth {(b - a) / (high - low):.1f} round trips"
                )
    finally:
        remove_work(tmp)  # --src's checkout
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
