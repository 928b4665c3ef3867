"""Two trees, the same cold (or warm) resolve, run in turns: which one is faster, on a noisy machine.

    python bench/ab.py A B [--runs 25] [--latency MS] [--warm] [--world large|small|wide] [--nginx]

A and B are git revisions of this repository (each checked out with ``git worktree`` under a
temporary directory) or paths to a ``src`` directory. Both run under this interpreter, so with the
same httpx, packaging and resolvelib, each from its own tree (``sys.path``) and its own
``indexes/``, byte-compiled once before the first measured run. One world of ``run.py`` (story 1
on large pages, the default; on small pages; or the 215-package closure) is served once; the runs alternate A, B, A, B, ..., each a fresh CLI process on an empty cache
(``--warm``: on a cache its tree filled first), so a slow minute of the machine costs both sides.
The server is ``tests/support/server.py`` (backlog 1024, HTTP/1.1 keep-alive, ``TCP_NODELAY``), or with
``--nginx`` (0 ms only) nginx serving the same world (``fairserver.py``).

On the project's 2-core VM one run of a cold resolve varies by +-10% from minute to minute: two
``run.py`` runs can disagree by more than a change is worth. 25 pairs in turns show a 5% change.
Prints the median and minimum wall time and CPU (user + system) of each side and B / A.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests"))

from benchworld import WORLDS, Story, build_named  # noqa: E402
from fairserver import NginxServer  # noqa: E402
from run import PROC_ENV, PY, TREE_ENTRY, Proc, remove_work, resolve_words, run_measured, source_dir  # noqa: E402
from support.server import IndexServer  # noqa: E402


def command(src: Path, base: str, story: Story, cache: Path) -> list[str]:
    indexes = {"pytorch": base + "whl/", "flashinfer": base + "fi/", "pypi": base + "simple/"}
    return [
        PY,
        "-c",
        TREE_ENTRY.format(src=str(src)),  # as the console script starts: __main__.run where the tree has it
        *resolve_words(story, indexes, cache),
    ]


def measure(src: Path, base: str, story: Story, cache: Path, *, warm: bool) -> Proc:
    if not warm:
        shutil.rmtree(cache, ignore_errors=True)
    proc = run_measured(command(src, base, story, cache))
    if proc.rc != 0:
        raise SystemExit(f"{src}: exit {proc.rc}\n{proc.err[-2000:]}")
    return proc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a", help="a git revision or a src directory")
    ap.add_argument("b", help="a git revision or a src directory")
    ap.add_argument("--runs", type=int, default=25, help="measured runs of each side (default 25)")
    ap.add_argument("--latency", type=float, default=0.0, help="milliseconds the server waits before each answer (default 0)")
    ap.add_argument("--warm", action="store_true", help="measure on a cache each side filled first")
    ap.add_argument("--world", choices=WORLDS, default="large", help="story 1 on large pages (default), on small pages, or the 215-package closure")
    ap.add_argument("--nginx", action="store_true", help="serve the world with nginx (0 ms only) instead of tests/support/server.py")
    args = ap.parse_args(argv)
    if args.nginx and args.latency:
        ap.error("--nginx serves without added latency")
    tmp = Path(tempfile.mkdtemp(prefix="rgs-ab-"))
    PROC_ENV["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")  # bytecode written once, outside the trees
    sides = {"A": source_dir(args.a, tmp), "B": source_dir(args.b, tmp)}
    try:
        story = build_named(args.world, tmp / "www")
        server = NginxServer(tmp / "www", tmp / "nginx") if args.nginx else IndexServer(tmp / "www", latency=args.latency / 1000)
        with server as srv:
            story.world.write(srv.url)
            for name, src in sides.items():  # compiles each tree; fills the cache --warm measures on
                measure(src, srv.url, story, tmp / f"cache-{name}", warm=False)
            runs: dict[str, list[Proc]] = {name: [] for name in sides}
            for _ in range(args.runs):
                for name, src in sides.items():
                    runs[name].append(measure(src, srv.url, story, tmp / f"cache-{name}", warm=args.warm))
        kind = "warm" if args.warm else "cold"
        served = "nginx" if args.nginx else "tests/support/server.py"
        print(f"{kind} resolve, {args.world} world, at {args.latency:g} ms ({served}), {args.runs} runs each, in turns")
        for name, src in sides.items():
            spec = args.a if name == "A" else args.b
            walls, cpus = [p.wall for p in runs[name]], [p.cpu for p in runs[name]]
            print(
                f"  {name} {spec}: wall median {statistics.median(walls) * 1000:.0f} ms (min {min(walls) * 1000:.0f}), "
                f"CPU median {statistics.median(cpus) * 1000:.0f} ms  [{src}]"
            )
        ratio = statistics.median(p.wall for p in runs["B"]) / statistics.median(p.wall for p in runs["A"])
        print(f"  B / A: {ratio:.3f} (wall medians)")
    finally:
        remove_work(tmp)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
