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


# torch 2.15.0's aarch64 build for CPython 3.12: the defined dynamic symbols of its nine torch
# libraries together, as `nm -D --defined-only` lists them on the extracted files (its
# libtorch_cuda.so has its program headers 419 MB into the library, libtorch_cpu.so 199 MB)
AARCH64_WHEEL, AARCH64_EXPORTS = "torch-2.15.0-cp312-cp312-manylinux_2_28_aarch64.whl", 74253


def test_the_aarch64_torch_wheels_exports_are_read_by_range() -> None:
    """The real aarch64 torch wheel of the configured PyPI, its exports read by range requests
    (its libraries' ends entered mid-stream): every one of them, as binutils counts them."""
    import urllib.request

    from packaging.version import Version

    from resolve_gpu_stack.cli.userconfig import discover_pypi_url
    from resolve_gpu_stack.errors import ResolveGpuStackError
    from resolve_gpu_stack.model import IndexFile
    from resolve_gpu_stack.net.scan.exports import WheelExports
    from resolve_gpu_stack.net.transport import Transport

    try:
        page = discover_pypi_url(dict(os.environ)).rstrip("/") + "/torch/"
        request = urllib.request.Request(page, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            row = next((f for f in json.load(answer)["files"] if f["filename"] == AARCH64_WHEEL), None)
    except (ResolveGpuStackError, OSError, ValueError) as exc:
        pytest.skip(f"PyPI cannot be reached: {exc}")
    if row is None:
        pytest.skip(f"{AARCH64_WHEEL} is not on the configured PyPI")
    file = IndexFile(filename=AARCH64_WHEEL, url=row["url"], name="torch", version=Version("2.15.0"), sha256=row["hashes"].get("sha256"), size=row["size"])
    transport = Transport()
    try:
        found = WheelExports(transport, None)("2.15.0", file)
    finally:
        transport.close()
    assert found.symbols is not None and len(found.symbols) == AARCH64_EXPORTS, found.source
    assert transport.stats.bytes_received < file.size // 4, found.source  # the libraries' ends, not the 484 MB wheel
