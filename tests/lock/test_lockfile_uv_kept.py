"""Kept packages listed in the pylock at their installed version and hash: the real uv installs
the rest and leaves them untouched, with ``uv pip install -r`` and ``uv pip sync`` alike (issue
13, item 3). Tiny real wheels on a loopback server; fresh virtual environments; no uv config."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import pytest
from support.uv_world import UV, clean_env, demo_plan, installed, ok, run, uv_venv
from support.uv_world import repo as repo

from resolve_gpu_stack.lock.files import read_lock, write_lock
from resolve_gpu_stack.lock.pylock import plan_from_lock
from resolve_gpu_stack.model import Action

pytestmark = pytest.mark.slow


def _dist_info(python: Path, name: str) -> dict[str, str]:
    """Every file of ``name``'s dist-info folder, by name -> sha256 (byte identity)."""
    site = next((python.parent.parent / "lib").glob("python*/site-packages"))
    folder = next(site.glob(f"{name.replace('-', '_')}-*.dist-info"))
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("command", ["install", "sync"])
def test_uv_leaves_a_listed_kept_package_untouched(tmp_path: Path, repo, command: str) -> None:
    srv, files, built = repo
    env = clean_env(tmp_path)
    python = uv_venv(tmp_path / "venv", env)
    # demo-c 1.0 installed the way torch is: from an index (here find-links), before any lock
    ok(run([UV, "pip", "install", "--python", str(python), "--no-index", "--find-links", str(files), "demo-c==1.0"], env, tmp_path))
    before = _dist_info(python, "demo-c")
    plan = demo_plan(srv, built)
    plan = replace(plan, packages=tuple(p for p in plan.packages if p.name != "torch"))  # this venv has no torch
    lock = write_lock(plan, tmp_path / "pylock.demo.toml", command="resolve-gpu-stack lock")
    text = lock.read_text()
    assert 'name = "demo-c"' in text.split("[tool.resolve-gpu-stack]")[0]  # listed in [[packages]], with its hash
    back = plan_from_lock(read_lock(lock)).package("demo-c")
    assert back is not None and back.action is Action.KEEP and back.sha256 == built["demo-c", "1.0"].sha256

    argv = [UV, "pip", "sync", str(lock)] if command == "sync" else [UV, "pip", "install", "-r", str(lock)]
    proc = ok(run([*argv[:3], "--python", str(python), *argv[3:]], env, tmp_path))

    have = installed(python, env)
    assert {k: have.get(k) for k in ("demo-a", "demo-b", "demo-c")} == {"demo-a": "1.0", "demo-b": "2.0", "demo-c": "1.0"}
    assert "- demo-c" not in proc.stderr and "+ demo-c" not in proc.stderr  # neither uninstalled nor reinstalled
    assert _dist_info(python, "demo-c") == before
    assert not srv.requests_for(f"/files/{built['demo-c', '1.0'].filename}")


def test_uv_sync_uninstalls_a_kept_package_the_lock_cannot_list(tmp_path: Path, repo) -> None:
    """The control, and why ``kept-unlisted`` warns: without an entry, ``uv pip sync`` removes it."""
    srv, files, built = repo
    env = clean_env(tmp_path)
    python = uv_venv(tmp_path / "venv", env)
    ok(run([UV, "pip", "install", "--python", str(python), "--no-index", "--find-links", str(files), "demo-c==1.0"], env, tmp_path))
    plan = demo_plan(srv, built)
    plan = replace(plan, packages=tuple(replace(p, sha256=None) if p.name == "demo-c" else p for p in plan.packages if p.name != "torch"))
    lock = write_lock(plan, tmp_path / "pylock.demo.toml", command="resolve-gpu-stack lock")
    assert '[tool.resolve-gpu-stack.kept-unlisted]\npackages = [\n    "demo-c",\n]' in lock.read_text()
    ok(run([UV, "pip", "sync", "--python", str(python), str(lock)], env, tmp_path))
    assert "demo-c" not in installed(python, env)
