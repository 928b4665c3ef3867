"""What a run imports (issue 23 item 1): ``-X importtime`` of one CLI run, summed per package.

    python bench/imports.py [--world small|large|wide] [--runs 5] [--command resolve|check|help] [--src DIR]

``resolve``: a cold resolve of one of run.py's worlds (served on loopback at 0 ms, an empty cache);
``check``: ``resolve-gpu-stack check`` of this repository's locks (offline); ``help``: ``--help``.
Each run is a fresh process with its bytecode under a temporary pycache prefix (compiled by a
first, unmeasured run), as an installed package has it. Prints the medians over the runs of the
self time per top-level package (ours, httpx and its parts, packaging, the standard library...),
how many of our modules load, and which of the modules a plain resolve should not need did load
(the ABI scanner, snapshots, GPU data, the install and lock floors). ``-X importtime`` itself
adds ~20-30% to what it measures: compare runs of this script with each other, not with wall
times elsewhere. ``--src DIR``: another tree's ``src`` (a checkout of an older commit), first on
``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests"))

from benchworld import WORLDS, build_named  # noqa: E402
from probe import command  # noqa: E402
from support.server import IndexServer  # noqa: E402

PY = sys.executable
HTTP = ("httpx", "httpcore", "h11", "anyio", "sniffio", "idna", "certifi", "urllib3")
# modules a plain resolve (no native wheel, no --snapshot, no GPU flag) should not load
NOT_FOR_A_PLAIN_RESOLVE = {
    "the ABI scanner": ("scan.elf", "scan.wheelscan", "scan.demangle", "scan.abi", "net.scan.exports", "env.exports"),
    "snapshots": ("net.snapshot",),
    "GPU data": ("data.gpus", "model.gpu", "env.gpu"),
    "rich tables (JSON here)": ("cli.tables",),
    "the build machinery": ("env.build", "cli.buildenv"),
    "the install and lock floors": ("env.install", "env.lockinstall", "env.wheelhouse", "env.build", "lock.pylock", "lock.check", "lock.uvproject"),
    "other commands": (
        "cli.cmd_install",
        "cli.cmd_lock",
        "cli.cmd_check",
        "cli.cmd_doctor",
        "cli.cmd_snapshot",
        "cli.cmd_wheelhouse",
        "cli.cmd_export",
        "cli.cmd_cache",
        "cli.cmd_inspect",
        "cli.cmd_candidates",
    ),
}


def parse_importtime(text: str) -> list[tuple[str, int]]:
    """(module, self microseconds) of each ``import time:`` line."""
    out = []
    for line in text.splitlines():
        if line.startswith("import time:") and "|" in line and "self [us]" not in line:
            self_us, _, name = line[len("import time:") :].split("|")
            out.append((name.strip(), int(self_us)))
    return out


def group(module: str) -> str:
    top = module.split(".")[0]
    if top == "resolve_gpu_stack":
        return "resolve_gpu_stack (ours)"
    if top in HTTP:
        return f"{top} (HTTP client)"
    if top in ("packaging", "resolvelib", "rich", "tomli_w", "tomlkit", "markdown_it", "pygments"):
        return top
    return "standard library and the rest"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--world", choices=WORLDS, default="small")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--command", choices=("resolve", "check", "help"), default="resolve")
    ap.add_argument("--list", action="store_true", help="print our modules that loaded")
    ap.add_argument("--src", type=Path, help="a src directory to measure instead of the installed package")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="rgs-imports-"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    if args.src is not None:
        env["PYTHONPATH"] = str(args.src.resolve())
    runs: list[list[tuple[str, int]]] = []
    story = build_named(args.world, tmp / "www") if args.command == "resolve" else None
    with IndexServer(tmp / "www") as srv:
        if story is not None:
            story.world.write(srv.url)
        for n in range(args.runs + 1):
            if args.command == "resolve":
                argv, cwd = command("resolve", srv, story, tmp, n)
            else:
                argv, cwd = (["check"] if args.command == "check" else ["--help"]), ROOT
            proc = subprocess.run([PY, "-X", "importtime", "-m", "resolve_gpu_stack", *argv], capture_output=True, text=True, env=env, cwd=cwd)
            if proc.returncode:
                raise SystemExit(proc.stderr[-3000:])
            if n:  # the first run compiles
                runs.append(parse_importtime(proc.stderr))
    totals = [Counter() for _ in runs]
    for total, run in zip(totals, runs):
        for module, us in run:
            total[group(module)] += us
    ours = [m for m, _ in runs[-1] if m.startswith("resolve_gpu_stack")]
    what = f"{args.command}" + (f" ({args.world} world)" if args.command == "resolve" else "")
    print(f"-X importtime of `{what}`, medians of {len(runs)} runs: {len(runs[-1])} modules, {len(ours)} of ours")
    for name in sorted({g for t in totals for g in t}, key=lambda g: -statistics.median(t[g] for t in totals)):
        print(f"  {statistics.median(t[name] for t in totals) / 1000:7.1f} ms  {name}")
    print(f"  {statistics.median(sum(t.values()) for t in totals) / 1000:7.1f} ms  all imports")
    loaded = {m.removeprefix("resolve_gpu_stack.") for m in ours}
    for what, modules in NOT_FOR_A_PLAIN_RESOLVE.items():
        hit = sorted(loaded & set(modules))
        print(f"  {what}: {'loaded: ' + ', '.join(hit) if hit else 'not loaded'}")
    if args.list:
        print("\n".join(ours))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
