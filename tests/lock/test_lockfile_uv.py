"""The written files against the real installers: uv installs a pylock, pip and uv honour the constraints.

Tiny real wheels served from a loopback server; fresh virtual environments; no cache, no config.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest
from support.uv_world import PY, UV, clean_env, demo_plan, installed, ok, run, uv_venv

from resolve_gpu_stack.lock.files import write_lock

pytestmark = pytest.mark.slow


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
