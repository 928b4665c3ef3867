"""Live speed on today's PyPI (issue 29 item 5): ``--with sglang`` (or vllm) on PyPI's torch 2.15.0,
side by side with ``uv pip compile`` of the same framework with torch overridden to 2.15.0.

    python bench/live.py [--framework sglang|vllm|'vllm==0.33.0'] [--runs N] [--no-bytecode] [--baseline REV]

Each round runs, alternated, in fresh cache folders:

- ``ours cold``: ``resolve-gpu-stack resolve --python 3.12 --platform x86_64-manylinux_2_34
  --installed torch==2.15.0 --torch installed --with FRAMEWORK --no-cubin --no-jit-cache`` with an
  empty cache: every page and METADATA file; each compiled wheel's scan and torch 2.15.0's exports
  (what a version-locked companion is checked against) answered by the records the tool ships where
  it has them, else read by range;
- ``ours cold, no records``: the cold run with ``--scan-records none``: no scan or exports record from
  anywhere, not even the ones the tool ships (every compiled wheel and torch's exports read by range);
- ``ours cold, exports known``: an empty cache but for the exports of that torch build, as the run
  without records read them (a second project or venv on the same machine);
- ``ours warm``: the same command again on the cold run's cache;
- ``uv cold`` / ``uv warm``: ``uv pip compile --python-version 3.12 --python-platform
  x86_64-manylinux_2_34 --override (torch==2.15.0)`` of the framework, ``--no-cache`` / on a warmed
  cache (``UV_PYTHON_DOWNLOADS=never``: uv would otherwise try to fetch an interpreter first).

- ``ours cold, no bytecode`` (``--no-bytecode``): the cold run from a copy of the package laid out
  as an install without bytecode runs under ``PYTHONDONTWRITEBYTECODE=1`` (``run.BareInstall``; its
  first run, which compiles what the console script keeps, is not counted);
- ``baseline cold`` (``--baseline REV``): the cold run of another tree (a git revision or a src
  folder), by its console-script function, in the same rounds.

Medians, the ratios ours / uv of the medians and of each round (a round's ours and uv ran within
seconds of each other), and the network's range: uv's cold runs, slowest / fastest. PyPI's URL
comes from uv's / pip's configuration. The network's own variance is in every figure: read them as
a range, not a point. Writes bench/results/live.json.
Skips (exit 0) when PyPI cannot be reached; exit 1 when a run fails.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(HERE))

from run import remove_checkouts  # noqa: E402

from resolve_gpu_stack.cli.userconfig import discover_pypi_url  # noqa: E402
from resolve_gpu_stack.errors import ResolveGpuStackError  # noqa: E402

BIN = Path(sys.executable).parent
TARGET = ["--python", "3.12", "--platform", "x86_64-manylinux_2_34", "--installed", "torch==2.15.0", "--torch", "installed", "--no-cubin", "--no-jit-cache"]


def timed(cmd: list[str], env: dict[str, str], stdin: str | None = None) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=env, check=False)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stderr[-2000:]}")
    return took, done.stdout


def ours(framework: str, pypi: str, cache: Path, env: dict[str, str], exe: list[str] | None = None, extra: tuple[str, ...] = ()) -> tuple[float, int]:
    cmd = [
        *(exe or [str(BIN / "resolve-gpu-stack")]),
        "resolve",
        *TARGET,
        "--with",
        framework,
        "--index",
        f"pypi={pypi}",
        "--cache-dir",
        str(cache),
        "--format",
        "json",
        "-q",
        *extra,
    ]
    took, out = timed(cmd, env)
    return took, len(json.loads(out)["packages"])


def uv(framework: str, pypi: str, cache: Path | None, overrides: Path, env: dict[str, str]) -> tuple[float, int]:
    cmd = [str(BIN / "uv"), "pip", "compile", "-", "--python-version", "3.12", "--python-platform", "x86_64-manylinux_2_34", "--override", str(overrides)]
    cmd += ["--index-url", pypi, *(["--cache-dir", str(cache)] if cache else ["--no-cache"]), "--quiet"]
    took, out = timed(cmd, {**env, "UV_PYTHON_DOWNLOADS": "never"}, stdin=f"{framework}\n")
    return took, sum(1 for line in out.splitlines() if line and not line.startswith((" ", "#")))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--framework", default="sglang", help="a requirement: sglang, vllm, or one release such as vllm==0.33.0 (default sglang)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-bytecode", action="store_true", help="also the cold run from an install without bytecode under PYTHONDONTWRITEBYTECODE=1")
    ap.add_argument("--baseline", metavar="REV", help="also the cold run of REV's tree (a git revision or a src folder), in the same rounds")
    args = ap.parse_args(argv)
    env = dict(os.environ)
    try:
        pypi = discover_pypi_url(env)
        project = re.split(r"[<>=!~ ;\[]", args.framework, maxsplit=1)[0]
        with urllib.request.urlopen(pypi.rstrip("/") + f"/{project}/", timeout=10):
            pass
    except (ResolveGpuStackError, OSError) as exc:
        print(f"skipped: PyPI cannot be reached ({exc})")
        return 0
    names = ["ours cold", "ours cold, no records", "ours cold, exports known", "ours warm", "uv cold", "uv warm"]
    names += ["ours cold, no bytecode"] * args.no_bytecode + ["baseline cold"] * bool(args.baseline)
    figures: dict[str, list[float]] = {k: [] for k in names}
    sizes: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        extra: dict[str, tuple[list[str], dict[str, str]]] = {}  # figure -> (command, environment)
        if args.no_bytecode:
            from run import BareInstall

            bare = BareInstall(work / "install-bare", compiled=False)
            extra["ours cold, no bytecode"] = (bare.command(), {**bare.env(), "PYTHONDONTWRITEBYTECODE": "1"})
            extra["ours cold, no bytecode"][1].pop("PYTHONPYCACHEPREFIX", None)
        if args.baseline:
            from ab import source_dir
            from run import tree_command

            extra["baseline cold"] = (tree_command(source_dir(args.baseline, work)), env)
        for name, (exe, extra_env) in extra.items():  # compiles what each keeps; not counted
            ours(args.framework, pypi, work / f"first-{len(name)}", extra_env, exe)
        overrides = work / "overrides.txt"
        overrides.write_text("torch==2.15.0\n")
        uv_cache = work / "uv-warm"
        uv(args.framework, pypi, uv_cache, overrides, env)  # warms uv's cache for its warm figure
        for i in range(args.runs):
            cold = work / f"cold{i}"
            took, sizes["ours"] = ours(args.framework, pypi, cold, env)
            figures["ours cold"].append(took)
            figures["uv cold"].append(uv(args.framework, pypi, None, overrides, env)[0])
            figures["ours warm"].append(ours(args.framework, pypi, cold, env)[0])
            figures["ours cold, no records"].append(ours(args.framework, pypi, work / f"bare{i}", env, extra=("--scan-records", "none"))[0])
            took, sizes["uv"] = uv(args.framework, pypi, uv_cache, overrides, env)
            figures["uv warm"].append(took)
            known = work / f"known{i}"
            known.mkdir()
            read = work / f"bare{i}" / "exports-v1"  # the run without records read them (the shipped exports records answer the cold run)
            if read.is_dir():  # (a closure with no version-locked wheel reads no exports)
                shutil.copytree(read, known / "exports-v1")
            figures["ours cold, exports known"].append(ours(args.framework, pypi, known, env)[0])
            shutil.rmtree(known)
            for name, (exe, extra_env) in extra.items():
                figures[name].append(ours(args.framework, pypi, work / f"{name.split()[0]}-{len(name)}-{i}", extra_env, exe)[0])
            print(f"round {i + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in figures.items()), flush=True)
        remove_checkouts(work)  # --baseline's checkout
    med = {k: statistics.median(v) for k, v in figures.items()}
    ratios = {
        **{name.removesuffix(" cold").replace("ours cold, ", "cold, "): med[name] / med["uv cold"] for name in extra},
        "cold": med["ours cold"] / med["uv cold"],
        "cold, no records": med["ours cold, no records"] / med["uv cold"],
        "cold, exports known": med["ours cold, exports known"] / med["uv cold"],
        "warm": med["ours warm"] / med["uv warm"],
        "warm vs uv cold": med["ours warm"] / med["uv cold"],
    }
    print(f"{args.framework}: {sizes.get('ours')} packages (ours), {sizes.get('uv')} (uv, torch's own dependencies included)")
    for k, v in med.items():
        print(f"  {k:26} median {v:6.2f} s  (runs: {', '.join(f'{x:.2f}' for x in figures[k])})")
    for k, r in ratios.items():
        print(f"  ratio {k:20} {r:.2f}x")
    rounds = [o / u for o, u in zip(figures["ours cold"], figures["uv cold"], strict=True)]
    uv_cold = figures["uv cold"]
    print(
        f"  each round's cold ratio: {', '.join(f'{r:.2f}x' for r in rounds)}; the network's range: uv cold {min(uv_cold):.2f}-{max(uv_cold):.2f} s ({max(uv_cold) / min(uv_cold):.2f}x)"
    )
    out = HERE / "results" / "live.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(
        json.dumps({"framework": args.framework, "runs": figures, "medians": med, "ratios": ratios, "round_ratios": rounds, "packages": sizes}, indent=1) + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
