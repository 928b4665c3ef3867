"""The written files against the real installers: uv installs a pylock, pip and uv honour the constraints.

Tiny real wheels served from a loopback server; fresh virtual environments; no cache, no config.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from packaging.version import Version
from server import IndexServer
from uv import find_uv_bin
from wheels import BuiltWheel, build_wheel

from resolve_gpu_stack.lock.files import write_lock
from resolve_gpu_stack.model import Action, Coupling, LockedPackage, LockPlan, TargetSummary
from resolve_gpu_stack.model.inputs import inputs_digest

pytestmark = pytest.mark.slow

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


def test_uv_installs_the_pylock_and_leaves_kept_packages_alone(tmp_path: Path, repo) -> None:
    srv, _files, built = repo
    env = clean_env(tmp_path)
    python = uv_venv(tmp_path / "venv", env)
    ok(run([UV, "pip", "install", "--python", str(python), str(built["demo-c", "1.0"].path)], env, tmp_path))
    lock = write_lock(demo_plan(srv, built), tmp_path / "pylock.demo.toml", command="resolve-gpu-stack lock")

    proc = ok(run([UV, "pip", "install", "--python", str(python), "-r", str(lock)], env, tmp_path))

    have = installed(python, env)
    assert {k: have.get(k) for k in ("demo-a", "demo-b", "demo-c")} == {"demo-a": "1.0", "demo-b": "2.0", "demo-c": "1.0"}
    assert "torch" not in have
    assert "+ demo-c" not in proc.stderr
    assert not srv.requests_for(f"/files/{built['demo-c', '1.0'].filename}")
    assert srv.requests_for(f"/files/{built['demo-a', '1.0'].filename}")


@pytest.mark.parametrize("tamper", ["sha256", "size"])
def test_uv_refuses_a_pylock_whose_wheel_does_not_match(tmp_path: Path, repo, tamper: str) -> None:
    srv, _files, built = repo
    env = clean_env(tmp_path)
    python = uv_venv(tmp_path / "venv", env)
    plan = demo_plan(srv, built)
    bad = "0" * 64 if tamper == "sha256" else None
    plan = replace(
        plan,
        packages=tuple(
            replace(p, **({"sha256": bad} if tamper == "sha256" else {"size": (p.size or 0) + 1})) if p.name == "demo-b" else p for p in plan.packages
        ),
    )
    lock = write_lock(plan, tmp_path / "pylock.toml", command="resolve-gpu-stack lock")

    proc = run([UV, "pip", "install", "--python", str(python), "-r", str(lock)], env, tmp_path)

    assert proc.returncode != 0, proc.stderr
    assert f"{'Hash' if tamper == 'sha256' else 'Size'} mismatch for `demo-b==2.0`" in proc.stderr
    assert "demo-b" not in installed(python, env)


@pytest.mark.parametrize("other", ["python", "machine"])
def test_uv_refuses_a_pylock_for_another_target(tmp_path: Path, repo, other: str) -> None:
    srv, _files, built = repo
    env = clean_env(tmp_path)
    python = uv_venv(tmp_path / "venv", env)
    plan = demo_plan(srv, built)
    if other == "python":
        plan = replace(plan, target=replace(plan.target, python="3.9" if PY != "3.9" else "3.10"))
    else:
        plan = replace(plan, target=replace(plan.target, platform="riscv64-" + plan.target.platform.split("-", 1)[1]))
    lock = write_lock(plan, tmp_path / "pylock.toml", command="x")

    proc = run([UV, "pip", "install", "--python", str(python), "-r", str(lock)], env, tmp_path)

    assert proc.returncode != 0
    assert ("incompatible" if other == "python" else "not supported by the lockfile") in proc.stderr
    assert "demo-a" not in installed(python, env)


def test_pip_and_uv_honour_the_constraints_file(tmp_path: Path, repo) -> None:
    srv, files, built = repo
    env = clean_env(tmp_path)
    constraints = write_lock(demo_plan(srv, built), tmp_path / "constraints.txt", command="resolve-gpu-stack lock")
    assert "torch==2.12.0.dev20260307+cu130" in constraints.read_text()
    find = ["--no-index", "--find-links", str(files)]

    # Control: without the constraints, the newest versions win.
    uv_python = uv_venv(tmp_path / "uv-venv", env)
    dry = ok(run([UV, "pip", "install", "--python", str(uv_python), "--dry-run", *find, "demo-a"], env, tmp_path))
    assert "demo-a==1.1" in dry.stderr and "demo-b==3.0" in dry.stderr

    ok(run([UV, "pip", "install", "--python", str(uv_python), *find, "-c", str(constraints), "demo-a"], env, tmp_path))
    assert {k: v for k, v in installed(uv_python, env).items() if k.startswith("demo")} == {"demo-a": "1.0", "demo-b": "2.0"}

    ok(run([sys.executable, "-m", "venv", str(tmp_path / "pip-venv")], env, tmp_path))
    pip_python = tmp_path / "pip-venv" / "bin" / "python"
    ok(run([str(pip_python), "-m", "pip", "install", "-q", *find, "-c", str(constraints), "demo-a"], env, tmp_path))
    have = installed(pip_python, env)
    assert {k: v for k, v in have.items() if k.startswith("demo")} == {"demo-a": "1.0", "demo-b": "2.0"}
