"""`doctor` in real venvs: fake packages installed by uv, a GPU query answered by a script, the checks run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name
from packaging.version import Version

from resolve_gpu_stack.cli import app as cli
from resolve_gpu_stack.data.definitions import load_definitions
from resolve_gpu_stack.env.doctor import (
    Check,
    Gpu,
    GpuQuery,
    ImportResult,
    run_checks,
)
from resolve_gpu_stack.env.probe import Environment, InstalledDistribution
from resolve_gpu_stack.model.declared import declared_target

DEFS = load_definitions()


TVM_RANGE_061 = "apache-tvm-ffi!=0.1.8,!=0.1.8.post0,<0.2,>=0.1.6"


NIGHTLY = "2.12.0.dev20260307+cu130"


def dist(name: str, version: str, *requires: str) -> InstalledDistribution:
    return InstalledDistribution(name=canonicalize_name(name), display_name=name, version=Version(version), requires_dist=requires)


def environment(*dists: InstalledDistribution, machine: str = "x86_64") -> Environment:
    target = declared_target("3.12", f"{machine}-manylinux_2_28")
    return Environment(
        interpreter="/venv/bin/python",
        executable="/venv/bin/python",
        prefix="/venv",
        base_prefix="/usr",
        is_venv=True,
        implementation="cpython",
        sysconfig_platform=f"linux-{machine}",
        glibc=(2, 28),
        free_threaded=False,
        purelib="/venv/lib",
        platlib="/venv/lib",
        distributions={d.name: d for d in dists},
        target=target,
    )


def stack(
    fi: str = "0.6.5",
    label: str = "cu130",
    torch: str = NIGHTLY,
    tvm: str | None = "0.1.9",
    cubin: str | None = "same",
    jit: str | None = "same",
    extra: tuple[InstalledDistribution, ...] = (),
    machine: str = "x86_64",
) -> Environment:
    """Story 1's stack, aligned unless told otherwise ("same" = aligned with flashinfer-python)."""
    dists = [dist("torch", torch), dist("flashinfer-python", fi, "torch", TVM_RANGE_061, "numpy")]
    if tvm is not None:
        dists.append(dist("apache-tvm-ffi", tvm))
    if cubin is not None:
        dists.append(dist("flashinfer-cubin", fi if cubin == "same" else cubin))
    if jit is not None:
        dists.append(dist("flashinfer-jit-cache", f"{fi}+{label}" if jit == "same" else jit))
    return environment(*dists, *extra, machine=machine)


def checks_of(env: Environment, *, imported: ImportResult | None = ImportResult(ok=True, version="0.6.5"), gpus: GpuQuery | None = None) -> dict[str, Check]:
    return {c.name: c for c in run_checks(env, DEFS, import_result=imported, gpus=gpus)}


def smi(*rows: tuple[str, tuple[int, int] | None]) -> GpuQuery:
    return GpuQuery(tool="/usr/bin/nvidia-smi", gpus=tuple(Gpu(name, cap) for name, cap in rows))


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def _uv_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_", "VIRTUAL_ENV", "CONDA"))}
    env.update({"UV_NO_CONFIG": "1", "UV_CACHE_DIR": str(tmp_path / "uv-cache"), "UV_PYTHON_DOWNLOADS": "never"})
    return env


def _uv(args: list[str], tmp_path: Path) -> None:
    from uv import find_uv_bin

    proc = subprocess.run([find_uv_bin(), *args], env=_uv_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{args}\n{proc.stdout}\n{proc.stderr}"


def _venv_with(tmp_path: Path, wheels: list[Path]) -> Path:
    venv = tmp_path / "venv"
    _uv(["venv", "--offline", "--python", sys.executable, str(venv)], tmp_path)
    python = venv / "bin" / "python"
    _uv(["pip", "install", "--python", str(python), "--offline", "--no-index", *map(str, wheels)], tmp_path)
    return python


def _doctor(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, dict[str, str]], dict]:
    capsys.readouterr()
    code = cli.main(["doctor", *args, "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    return code, {c["name"]: c for c in report["checks"]}, report
