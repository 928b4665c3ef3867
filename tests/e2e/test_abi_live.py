"""Live: today's real wheels from the configured index (pip's own configuration), inspected, and
compared with ``readelf -d`` on every member's needed libraries. Skipped offline, or without
readelf."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from resolve_gpu_stack.cli.app import main

pytestmark = pytest.mark.live

WHEELS = {"torchcodec==0.17.0": 15, "torchvision==0.29.2": 2}  # requirement -> members linking torch (readelf)


def _download(requirement: str, folder: Path) -> Path:
    target = ["--python-version", "3.12", "--platform", "manylinux_2_28_x86_64", "--only-binary=:all:", "--no-deps"]
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--retries", "1", "--timeout", "20", *target, requirement, "-d", str(folder)],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PIP_CONFIG_FILE": os.devnull},  # a user's pip, not this machine's caps (torchvision<=0.29.1)
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"cannot download {requirement}: {exc}")
    found = sorted(folder.glob("*.whl"))
    if proc.returncode != 0 or not found:
        pytest.skip(f"cannot download {requirement}: {proc.stderr.strip()[-200:]}")
    return found[0]


def _readelf_needed(path: Path) -> list[str]:
    out = subprocess.run(["readelf", "-dW", str(path)], capture_output=True, text=True, check=True).stdout
    return [line.split("[", 1)[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]


@pytest.mark.parametrize("requirement", sorted(WHEELS))
def test_inspect_agrees_with_readelf_on_every_member(requirement: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if shutil.which("readelf") is None:
        pytest.skip("no readelf")
    wheel = _download(requirement, tmp_path / "dl")
    assert main(["inspect", str(wheel), "--python", "3.12", "--installed", "torch==2.15.0", "--format", "json"]) in (0, 1)
    report = json.loads(capsys.readouterr().out)
    members = {m["name"]: m for m in report["members"]}
    with zipfile.ZipFile(wheel) as zf:
        for name, got in members.items():
            truth = _readelf_needed(Path(zf.extract(name, tmp_path / "x")))
            # a member read by its dynamic section gives them all; one whose first bytes named torch,
            # the lib*.so names of its string table (ld-linux-x86-64.so.2 is not one)
            assert got["needed"] in (truth, [n for n in truth if n.startswith("lib")]), name
    assert sum(1 for m in members.values() if m["torch_libraries"]) == WHEELS[requirement]
