"""Instructions, not seconds: a cold resolve of one world counted by callgrind, ours and uv's.

    python bench/instructions.py [--world wide|small|large]
    python bench/instructions.py --trees A B [--world ...]   # two trees' resolves instead (ab.py's A and B)

On a shared machine wall and CPU time move with the load; the instructions a run executes move by
about 1%. Serves the world (``tests/support/server.py``, 0 ms), runs ``valgrind --tool=callgrind`` on our
CLI resolve and on ``uv pip compile`` (the answer given), each on an empty cache, and prints the
instructions each executed (all threads; for uv, without the interpreter it starts to query) and
the ratio.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from ab import command, source_dir  # noqa: E402
from benchworld import WORLDS, build_named  # noqa: E402
from run import PROC_ENV, _find_uv, cli_command, remove_work, resolve_words, uv_command  # noqa: E402
from support.server import IndexServer  # noqa: E402


def counted(cmd: list[str], env: dict[str, str], cwd: Path | None = None) -> int:
    """Instructions ``cmd`` executed under callgrind (its "Collected" line)."""
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd], env=env, cwd=cwd, capture_output=True, text=True, timeout=1800
    )
    found = re.findall(r"Collected : (\d+)", done.stderr)
    if done.returncode or not found:
        raise SystemExit(f"{cmd[0]} failed under callgrind ({done.returncode}): {done.stderr[-2000:]}")
    return int(found[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--world", choices=WORLDS, default="wide")
    ap.add_argument("--trees", nargs=2, metavar=("A", "B"), help="count our resolve from two trees (revisions or src directories) instead of ours and uv's")
    args = ap.parse_args(argv)
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed")
    tmp = Path(tempfile.mkdtemp(prefix="rgs-instr-"))
    try:
        story = build_named(args.world, tmp / "www")
        env = dict(os.environ, **PROC_ENV, PYTHONPYCACHEPREFIX=str(tmp / "pycache"))
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # as run.py's children: the warm-up's bytecode is read, not every module compiled again
        with IndexServer(tmp / "www") as srv:
            story.world.write(srv.url)
            if args.trees:
                counts = []
                for i, spec in enumerate(args.trees):
                    src = source_dir(spec, tmp)
                    subprocess.run(command(src, srv.url, story, tmp / f"warmup-{i}"), env=env, capture_output=True, check=True)
                    counts.append(counted(command(src, srv.url, story, tmp / f"cache-{i}"), env))
                print(f"{args.world} world, cold, 0 ms: A {counts[0] / 1e9:.3f} G instructions, B {counts[1] / 1e9:.3f} G: B / A {counts[1] / counts[0]:.3f}")
                return 0
            indexes = {"pytorch": srv.url + "whl/", "flashinfer": srv.url + "fi/", "pypi": srv.url + "simple/"}
            ours_cmd = [*cli_command(), *resolve_words(story, indexes, tmp / "cache-warmup")]
            subprocess.run(ours_cmd, env=env, capture_output=True, check=True)  # compiles the bytecode once
            ours = counted([*cli_command(), *resolve_words(story, indexes, tmp / "cache-ours")], env)
            work = tmp / "uv"
            work.mkdir()
            (work / "requirements.in").write_text(story.uv_requirements())
            uv_env = dict(env, UV_CACHE_DIR=str(tmp / "cache-uv"), UV_PYTHON_DOWNLOADS="never", UV_NO_CONFIG="1", NO_COLOR="1")
            uv = counted(uv_command(_find_uv(), srv.url, work), uv_env, cwd=work)
        print(f"{args.world} world, cold, 0 ms: ours {ours / 1e9:.2f} G instructions, uv {uv / 1e9:.2f} G: {ours / uv:.2f}x")
    finally:
        remove_work(tmp)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
