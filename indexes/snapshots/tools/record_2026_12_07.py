#!/usr/bin/env python3
"""Record the snapshot ``2026-12-07`` (today's world, six days after the December one) from PyPI.

The stories are the README's: PyPI's torch 2.15.0 kept (declared: ``--installed torch==2.15.0
--torch installed``), then SGLang or vLLM on it, **without** ``--no-cubin --no-jit-cache``: since
issue 50 a plan is made without FlashInfer's own index when its host cannot be read (one warning
naming the host and what was left out), and flashinfer.ai could not be reached from here.

- ``sglang``: ``--with sglang`` plans (sglang 0.5.23 on 2.15.0, flashinfer-python from PyPI).
- ``vllm-newest``: ``--with vllm`` stops by design: vllm 0.34.0 pins ``flashinfer-python==0.7.3``,
  which no index serves; the error names the pin and the ways out. Its stderr is kept in
  ``plans/vllm-newest.txt`` (URLs cut to their path), the pages it read in the snapshot.
- ``vllm``: ``--with vllm==0.33.0``, the way out the error names, plans.

Each story is resolved live by ``resolve-gpu-stack snapshot --exclude-newer 2026-12-07``, which
records every page and METADATA file it reads (cut to the files uploaded on or before that day that
serve the recorded target), the scans of the native wheels (each read from its wheel: ``--scan-records
none``) and the exports of PyPI's torch wheel
(keyed by its sha256). The plan the live run printed is written to ``plans/STORY.json``, PyPI's
file URLs cut to their path and the reason FlashInfer's host could not be read cut (live: the name
did not resolve; replayed: the snapshot has no page of it), so that
``tests/e2e/test_snapshot_2026_12_07.py`` can check that a replay prints the same plan, byte for byte.

    .venv/bin/python indexes/snapshots/tools/record_2026_12_07.py [--output DIR]

PyPI's URL comes from uv's / pip's configuration (never written here). Exit 1 when a story does
not end as recorded above.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parents[3]
SNAPSHOT = REPO / "indexes" / "snapshots" / "2026-12-07"
DAY = "2026-12-07"
# the day is part of the target: a replay asks for the world as recorded, and its plan (inputs digest
# included) is the live one byte for byte
TARGET = ("--python", "3.12", "--platform", "x86_64-manylinux_2_34", "--installed", "torch==2.15.0", "--torch", "installed", "--exclude-newer", DAY)
# story -> (its flags, the exit status it is recorded with)
STORIES: dict[str, tuple[tuple[str, ...], int]] = {
    "sglang": (("--with", "sglang"), 0),
    "vllm-newest": (("--with", "vllm"), 1),
    "vllm": (("--with", "vllm==0.33.0"), 0),
}
_HOST_DOWN = re.compile(r"(host \S+ cannot be read) \((?:[^()]|\([^()]*\))*\)")
_URL = re.compile(r"\bhttps?://[^/\s]+(/[^\s,;)]*)?")


def story_argv(story: str) -> list[str]:
    """The resolver flags of ``story`` (the README's story block, without ``--snapshot``)."""
    return [*TARGET, *STORIES[story][0]]


def _cut(text: str) -> str:
    return _HOST_DOWN.sub(r"\1 (...)", text)


def relative_plan(text: str) -> str:
    """A plan's JSON with each PyPI file URL cut to its path and the reason an unreadable host
    could not be read cut: what a live run and a replay of its snapshot print alike."""
    plan: dict[str, Any] = json.loads(text)
    for row in plan.get("packages", []):
        if row.get("index") in ("pypi", "installed") and row.get("url"):
            row["url"] = urlsplit(row["url"]).path
    plan["notes"] = [_cut(n) for n in plan.get("notes", [])]
    return json.dumps(plan, indent=2) + "\n"


def relative_error(text: str) -> str:
    """A failed story's stderr with every URL cut to its path and an unreadable host's reason cut."""
    return _URL.sub(lambda m: m.group(1) or "/", _cut(text))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--output", type=Path, default=SNAPSHOT, help=f"the snapshot to write (default {SNAPSHOT.relative_to(REPO)}; replaced)")
    args = ap.parse_args(argv)
    out: Path = args.output
    work = out.with_name(out.name + ".recording")  # the snapshot is replaced only once every story is recorded
    shutil.rmtree(work, ignore_errors=True)
    tool = Path(sys.executable).with_name("resolve-gpu-stack")
    with tempfile.TemporaryDirectory() as cache:  # a cold cache: a plan reused from it would read no page
        for i, (story, (_, expected)) in enumerate(STORIES.items()):
            extend = ["--snapshot", str(work)] if i else []
            cmd = [
                str(tool),
                "snapshot",
                *extend,
                "--output",
                str(work),
                *story_argv(story),
                "--cache-dir",
                cache,
                "--scan-records",
                "none",
                "--format",
                "json",
            ]
            print("+", " ".join(cmd[1:]), file=sys.stderr)
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode != expected:
                print(done.stderr, file=sys.stderr)
                return 1
            (work / "plans").mkdir(parents=True, exist_ok=True)
            if expected == 0:
                (work / "plans" / f"{story}.json").write_text(relative_plan(done.stdout))
            else:
                (work / "plans" / f"{story}.txt").write_text(relative_error(done.stderr))
    if (out / "README.md").exists():
        shutil.copy2(out / "README.md", work / "README.md")
    shutil.rmtree(out, ignore_errors=True)
    work.rename(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
