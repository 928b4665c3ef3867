"""Profile one CLI run of the benchmark's story-1 world (a tool for finding where time goes).

    python bench/probe.py resolve [--profile out.prof] [--importtime] [--log] [--repeat N] [--world large|small|wide]
    python bench/probe.py lock    [--profile out.prof] [--log]

Builds the world under a temporary directory, serves it at 0 ms, runs the same command as
run.py's cold (``resolve``) or scale (``lock``, 6 targets) figure on an empty cache, and prints
the wall time and request count of each run; ``--profile`` runs the CLI in-process under
cProfile instead of as a child, ``--log`` prints the server's request log, ``--importtime``
prints the child's ``-X importtime`` lines for our modules.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from benchworld import WORLDS, build_named  # noqa: E402
from run import SCALE_TARGETS, TARGET, cli_command, lock_config, resolve_words  # noqa: E402
from support.server import IndexServer  # noqa: E402


def command(kind: str, srv: IndexServer, story, tmp: Path, n: int) -> tuple[list[str], Path | None]:
    indexes = {"pytorch": srv.url + "whl/", "flashinfer": srv.url + "fi/", "pypi": srv.url + "simple/"}
    cache = tmp / f"cache-{n}"
    if kind == "resolve":
        return resolve_words(story, indexes, cache), None
    work = tmp / f"lock-{n}"
    work.mkdir()
    targets = SCALE_TARGETS if kind == "lock" else [TARGET]
    (work / "gpu-stack.toml").write_text(lock_config(targets, story, indexes))
    return ["lock", "--config", str(work / "gpu-stack.toml"), "--cache-dir", str(cache), "-q"], work


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=("resolve", "lock", "lock1"))
    ap.add_argument("--profile", type=Path)
    ap.add_argument("--importtime", action="store_true")
    ap.add_argument("--log", action="store_true")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--world", choices=WORLDS, default="large")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="rgs-probe-"))
    try:
        story = build_named(args.world, tmp / "www")
        with IndexServer(tmp / "www") as srv:
            story.world.write(srv.url)
            for n in range(args.repeat):
                argv, cwd = command(args.kind, srv, story, tmp, n)
                n0 = len(srv.log)
                t = time.perf_counter()
                if args.profile:
                    import cProfile
                    import os

                    from resolve_gpu_stack.cli import main as cli_main

                    old = os.getcwd()
                    os.chdir(cwd or tmp)
                    try:
                        cProfile.runctx("cli_main(argv)", globals(), {"cli_main": cli_main, "argv": argv}, str(args.profile))
                    finally:
                        os.chdir(old)
                else:
                    exe = cli_command()
                    extra = ["-X", "importtime"] if args.importtime else []
                    cmd = [sys.executable, *extra, "-m", "resolve_gpu_stack", *argv] if extra else [*exe, *argv]
                    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
                    if proc.returncode:
                        raise SystemExit(proc.stderr[-3000:])
                    if args.importtime:
                        print("\n".join(line for line in proc.stderr.splitlines() if "resolve_gpu" in line))
                wall = time.perf_counter() - t
                log = srv.log[n0:]
                print(f"{args.kind} #{n + 1}: {wall:.3f} s, {len(log)} requests")
                if args.log:
                    for method, path, headers in log:
                        print(method, path, headers.get("Range") or headers.get("range") or "")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
