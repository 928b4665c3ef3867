#!/usr/bin/env python3
"""Record the December snapshot ``2026-12-01`` (today's world) from today's PyPI, with the tool.

The story is the one most users start from: ``pip install torch`` (PyPI's torch 2.15.0: no
``+cuNNN`` label, its METADATA pins ``cuda-toolkit[...]==13.2.2``, i.e. cu132), then SGLang or vLLM
on it. Each story below is resolved live by ``resolve-gpu-stack snapshot`` for a declared target
(``--installed torch==2.15.0 --torch installed``), which records every PyPI page and METADATA file
it reads (cut to files uploaded on or before 2026-12-01), the range-read scans of the native wheels
and the exports of PyPI's torch wheel (read once: its symbol table sits at about 443 MB of
``libtorch_cpu.so``). The plan the live run printed is written to ``plans/STORY.json`` beside them,
with PyPI's file URLs cut to their path (the snapshot keeps them relative: PyPI's URL is the user's
configuration), so that ``tests/e2e/test_snapshot_today.py`` can check that replaying the snapshot
offline prints the same plan, byte for byte.

Everything recorded is real: with a kept PyPI torch nothing is read from the PyTorch index (the
family follows its torch to PyPI: routing.toml), and FlashInfer's own index, which could not be
reached from here, is left out: the stories plan flashinfer-python only (``--no-cubin
--no-jit-cache``; cubin left PyPI after 0.6.13, jit-cache was never there); FlashInfer's legacy
per-torch page is absent (an optional page: a note says so).

    .venv/bin/python indexes/snapshots/tools/record_2026_12_01.py [--output DIR]

PyPI's URL comes from uv's / pip's configuration (never written here). Exit 1 when a story does
not resolve.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parents[3]
SNAPSHOT = REPO / "indexes" / "snapshots" / "2026-12-01"
DAY = "2026-12-01"
# sglang 0.5.23's wheels are manylinux_2_34 only; PyPI's torch 2.15.0 is declared as installed.
TARGET = ("--python", "3.12", "--platform", "x86_64-manylinux_2_34", "--installed", "torch==2.15.0", "--torch", "installed")
STORIES = {
    "sglang": ("--with", "sglang", "--no-cubin", "--no-jit-cache"),
    "vllm": ("--with", "vllm", "--no-cubin", "--no-jit-cache"),
}


def story_argv(story: str) -> list[str]:
    """The resolver flags of ``story`` (the README's story block, without ``--snapshot``)."""
    return [*TARGET, *STORIES[story]]


def relative_plan(text: str) -> str:
    """A plan's JSON with each PyPI file URL cut to its path (``/packages/...``): what a live run
    and a replay of its snapshot print alike (a replay resolves the recorded relative URLs against
    whichever PyPI URL it is given)."""
    plan: dict[str, Any] = json.loads(text)
    for row in plan.get("packages", []):
        if row.get("index") in ("pypi", "installed") and row.get("url"):  # installed: the kept torch, by its own wheel on PyPI
            row["url"] = urlsplit(row["url"]).path
    return json.dumps(plan, indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--output", type=Path, default=SNAPSHOT, help=f"the snapshot to write (default {SNAPSHOT.relative_to(REPO)}; replaced)")
    args = ap.parse_args(argv)
    out: Path = args.output
    work = out.with_name(out.name + ".recording")  # the snapshot is replaced only once every story is recorded
    shutil.rmtree(work, ignore_errors=True)
    tool = Path(sys.executable).with_name("resolve-gpu-stack")
    with tempfile.TemporaryDirectory() as cache:  # a cold cache: a plan reused from it would read no page
        for i, story in enumerate(STORIES):
            extend = ["--snapshot", str(work)] if i else []
            cmd = [str(tool), "snapshot", *extend, "--output", str(work), "--exclude-newer", DAY, *story_argv(story), "--cache-dir", cache, "--format", "json"]
            print("+", " ".join(cmd[1:]), file=sys.stderr)
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                print(done.stderr, file=sys.stderr)
                return 1
            (work / "plans").mkdir(parents=True, exist_ok=True)
            (work / "plans" / f"{story}.json").write_text(relative_plan(done.stdout))
    if (out / "README.md").exists():
        shutil.copy2(out / "README.md", work / "README.md")
    shutil.rmtree(out, ignore_errors=True)
    work.rename(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
