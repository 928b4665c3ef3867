"""The real installers against written files: a clean uv/pip environment, a venv, a plan of demo wheels
served on 127.0.0.1 (the ``repo`` fixture), and uv run with a loopback PyPI as its default index."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version
from uv import find_uv_bin

from resolve_gpu_stack.model import Action, Coupling, LockedPackage, LockPlan, TargetSummary
from resolve_gpu_stack.model.inputs import inputs_digest
from support.server import IndexServer
from support.wheels import BuiltWheel, build_wheel

UV = find_uv_bin()


PY = f"{sys.version_info.major}.{sys.version_info.minor}"


def _platform() -> str:
    if sys.platform.startswith("linux"):
        return f"{platform.machine()}-manylinux_2_28"
    if sys.platform == "darwin":
        return f"{platform.machine()}-macosx_11_0"
    pytest.skip("the lock's environment marker is only written for Linux and macOS targets")


def clean_env(tmp_path: Path) -> dict[str, str]:
    """No user/global uv or pip configuration, no cache, no proxies: only what the test sets."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(("UV_", "PIP_", "VIRTUAL_ENV", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "CONDA"))}
    env.update(
        {
            "UV_NO_CACHE": "1",
            "UV_CACHE_DIR": str(tmp_path / "uv-cache"),
            "UV_NO_CONFIG": "1",
            "UV_PYTHON_DOWNLOADS": "never",
            "NO_PROXY": "127.0.0.1,localhost",
            "PIP_CONFIG_FILE": os.devnull,
            "PIP_CONSTRAINT": "",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_INPUT": "1",
        }
    )
    return env


def run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)


def ok(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, f"{proc.args}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


def uv_venv(path: Path, env: dict[str, str]) -> Path:
    ok(run([UV, "venv", "--python", sys.executable, str(path)], env, path.parent))
    return path / "bin" / "python"


def installed(python: Path, env: dict[str, str]) -> dict[str, str]:
    proc = ok(run([UV, "pip", "list", "--python", str(python), "--format", "json"], env, python.parent))
    return {row["name"]: row["version"] for row in json.loads(proc.stdout)}


@pytest.fixture
def repo(tmp_path: Path):
    """demo-a 1.0 (needs demo-b>=2.0) and 1.1, demo-b 2.0 and 3.0, demo-c 1.0, served on 127.0.0.1."""
    www = tmp_path / "www"
    files = www / "files"
    built = {
        ("demo-a", "1.0"): build_wheel(files, "demo-a", "1.0", requires=["demo-b>=2.0"]),
        ("demo-a", "1.1"): build_wheel(files, "demo-a", "1.1", requires=["demo-b>=2.0"]),
        ("demo-b", "2.0"): build_wheel(files, "demo-b", "2.0"),
        ("demo-b", "3.0"): build_wheel(files, "demo-b", "3.0"),
        ("demo-c", "1.0"): build_wheel(files, "demo-c", "1.0"),
    }
    with IndexServer(www) as srv:
        yield srv, files, built


def locked(wheel: BuiltWheel, srv: IndexServer, name: str, version: str, action: Action) -> LockedPackage:
    return LockedPackage(
        name=name,
        version=Version(version),
        action=action,
        index="local",
        coupling=Coupling.AGNOSTIC,
        reason="test",
        url=f"{srv.url}files/{wheel.filename}",
        filename=wheel.filename,
        sha256=wheel.sha256,
        size=wheel.size,
        upload_time="2026-03-07T12:00:00Z",
    )


def demo_plan(srv: IndexServer, built: dict, *, python: str = PY) -> LockPlan:
    inputs = {"request": ["demo-a"]}
    return LockPlan(
        target=TargetSummary(python=python, platform=_platform(), cuda=None),
        packages=(
            locked(built["demo-a", "1.0"], srv, "demo-a", "1.0", Action.INSTALL),
            locked(built["demo-b", "2.0"], srv, "demo-b", "2.0", Action.INSTALL),
            # Kept: already installed; listed at its version and hash, so uv finds it satisfied (see test_lockfile_uv_kept.py).
            locked(built["demo-c", "1.0"], srv, "demo-c", "1.0", Action.KEEP),
            LockedPackage(name="torch", version=Version("2.12.0.dev20260307+cu130"), action=Action.KEEP, index="installed", coupling=Coupling.TORCH),
        ),
        inputs=inputs,
        inputs_digest=inputs_digest(inputs),
        indexes={"local": srv.url + "simple/"},
    )


def uv(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([UV, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"uv {' '.join(args)}\n{done.stdout}\n{done.stderr}"
    return done


def uv_env(tmp_path: Path, srv: IndexServer) -> dict[str, str]:
    """No uv configuration but the test's: PyPI is the loopback world's (uv's default index)."""
    return {**clean_env(tmp_path), "UV_DEFAULT_INDEX": f"{srv.url}simple/"}
