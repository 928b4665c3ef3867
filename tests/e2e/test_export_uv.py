"""`export uv` end to end with the real uv: a plan written into a fresh uv project, then `uv lock`
and `uv sync` on loopback indexes reproduce it (issue 24).

The project's venv holds the kept nightly torch, installed from the PyTorch index the way a user
installs one; uv never leaves 127.0.0.1 (every index is a loopback server, no uv config, a private
cache). The wheels are the tests' stand-ins, built for the interpreter running the tests.
"""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path

import pytest
from support.doors import index_flags, run_cli
from support.framework_world import build_framework_world
from support.install_world import NIGHTLY, PY, build_world, dist_info_bytes, installed, needs_linux
from support.server import IndexServer
from support.stack_world import build_story_world
from support.uv_world import uv, uv_env

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

pytestmark = [pytest.mark.slow, needs_linux]

PROJECT = """\
# a fresh uv project (as `uv init` writes it), with the user's own comments
[project]
name = "demo"
version = "0.1.0"
requires-python = ">=3.10"
dependencies = [
    "flashinfer-python",  # the kernels we serve with
]

[tool.ruff]
line-length = 100  # keep: not ours
"""


def project_with_kept_torch(tmp_path: Path, srv: IndexServer, env: dict[str, str], text: str = PROJECT) -> tuple[Path, str]:
    """A uv project whose venv has the nightly torch, installed from the PyTorch index (with its
    own pins), as a user installs a nightly before adding the rest."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(text)
    uv(["venv", "-q", "--python", sys.executable, str(project / ".venv")], env, project)
    python = str(project / ".venv" / "bin" / "python")
    uv(["pip", "install", "-q", "--python", python, "--index", f"{srv.url}whl/nightly/cu130/", f"torch=={NIGHTLY}"], env, project)
    return project, python


def uv_lock_packages(project: Path) -> dict[str, dict]:
    return {p["name"]: p for p in tomllib.loads((project / "uv.lock").read_text())["package"]}


def sync_lines(out: str) -> dict[str, list[str]]:
    """`uv sync` output: '+ name==version' / '- name==version' lines by sign."""
    lines = [line.strip() for line in out.splitlines()]
    return {sign: [line[2:] for line in lines if line.startswith(f"{sign} ")] for sign in "+-"}


def exported_plan(capsys, *flags: str) -> dict:
    rc, out, err = run_cli(capsys, "resolve", *flags, "--format", "json")
    assert rc == 0, err
    return json.loads(out)


def test_export_uv_then_uv_lock_and_sync_reproduce_the_plan_and_keep_torch(tmp_path, capsys):
    world = build_world(tmp_path / "www")
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        env = uv_env(tmp_path, srv)
        project, python = project_with_kept_torch(tmp_path, srv, env)
        torch_before = dist_info_bytes(python, "torch")
        flags = ["--python", python, *index_flags(srv.url), "--cache-dir", str(tmp_path / "cache")]
        plan = exported_plan(capsys, *flags)

        rc, _, err = run_cli(capsys, "export", "uv", *flags, "--project", str(project))
        assert rc == 0, err
        written = (project / "pyproject.toml").read_text()
        assert written.startswith(PROJECT.split("[tool.ruff]")[0])  # the user's text, comments and all
        assert "line-length = 100  # keep: not ours" in written
        rc, out, err = run_cli(capsys, "export", "uv", *flags, "--project", str(project))  # a second export
        assert rc == 0, err
        assert (project / "pyproject.toml").read_text() == written and "unchanged" in err

        uv(["lock"], env, project)
        locked = uv_lock_packages(project)
        for p in plan["packages"]:
            assert locked[p["name"]]["version"] == p["version"], p["name"]
        assert locked["torch"]["source"] == {"registry": f"{srv.url}whl/nightly/cu130/"}
        assert locked["flashinfer-jit-cache"]["version"] == "0.6.5+cu130"
        assert locked["flashinfer-jit-cache"]["source"] == {"registry": f"{srv.url}fi/cu130/"}

        dry = sync_lines(uv(["sync", "--dry-run"], env, project).stderr)
        planned = {f"{p['name']}=={p['version']}" for p in plan["packages"] if p["action"] != "keep"}
        assert set(dry["+"]) == planned and not dry["-"]
        assert not any(line.startswith("torch==") for line in dry["+"])  # the kept nightly is not reinstalled

        uv(["sync"], env, project)
        assert dist_info_bytes(python, "torch") == torch_before
        have = installed(python)
        assert {p["name"]: have.get(p["name"]) for p in plan["packages"]} == {p["name"]: p["version"] for p in plan["packages"]}

        rc, _, err = run_cli(capsys, "check", str(project / "uv.lock"))
        assert rc == 0, err
        lock = project / "uv.lock"
        lock.write_text(lock.read_text().replace('name = "numpy"\nversion = "2.2.0"', 'name = "numpy"\nversion = "2.1.0"', 1))
        rc, _, err = run_cli(capsys, "check", str(lock))
        assert rc == 1
        assert "numpy: uv.lock has 2.1.0, the exported plan pins 2.2.0" in err


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the serving world's compiled wheels are x86_64")
def test_export_uv_of_sglang_on_the_kept_torch(tmp_path, capsys):
    world = build_framework_world(tmp_path, py=PY)
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        env = uv_env(tmp_path, srv)
        project, python = project_with_kept_torch(tmp_path, srv, env, PROJECT.replace('"flashinfer-python",  # the kernels we serve with', '"sglang"'))
        torch_before = dist_info_bytes(python, "torch")
        flags = ["--python", python, "--with", "sglang", "--without", "sgl-kernel", *index_flags(srv.url), "--cache-dir", str(tmp_path / "cache")]
        plan = exported_plan(capsys, *flags)
        assert {o["replaced_by"] for o in plan["overrides"]} >= {f"torch=={NIGHTLY}", "torchaudio==2.11.0.dev20260307+cu130"}

        rc, _, err = run_cli(capsys, "export", "uv", *flags, "--project", str(project))
        assert rc == 0, err
        uv_tool = tomllib.loads((project / "pyproject.toml").read_text())["tool"]["uv"]
        assert f"torch=={NIGHTLY}" in uv_tool["override-dependencies"]  # sglang pins torch==2.9.1
        assert "sgl-kernel ; sys_platform == 'never'" in uv_tool["override-dependencies"]  # --without

        uv(["lock"], env, project)
        locked = uv_lock_packages(project)
        for p in plan["packages"]:
            assert locked[p["name"]]["version"] == p["version"], p["name"]
        assert "sgl-kernel" not in locked
        assert locked["torchaudio"]["source"] == {"registry": f"{srv.url}whl/nightly/cu130/"}  # the build for the kept torch
        assert locked["flashinfer-jit-cache"]["source"] == {"registry": f"{srv.url}fi/cu130/"}
        assert locked["sglang"]["version"] == "0.5.9" and locked["flashinfer-python"]["version"] == "0.6.3"  # sglang's pin

        dry = sync_lines(uv(["sync", "--dry-run"], env, project).stderr)
        assert "sglang==0.5.9" in dry["+"] and "flashinfer-jit-cache==0.6.3+cu130" in dry["+"]
        assert not any(line.startswith("torch==") for line in dry["+"] + dry["-"])
        assert dist_info_bytes(python, "torch") == torch_before
        rc, _, err = run_cli(capsys, "check", str(project / "uv.lock"))
        assert rc == 0, err


def test_two_targets_whose_nightlies_differ_share_one_uv_lock(tmp_path, capsys):
    """x86_64 keeps the 0307 nightly, aarch64 the 0306 one (no aarch64 build on 0307): one
    project, one universal uv.lock with each platform's torch, `check` passing; a torch edited in
    one fork is caught for that target."""
    world = build_story_world(tmp_path / "www", py=PY, hostile=True)
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        env = uv_env(tmp_path, srv)
        project = tmp_path / "project"
        project.mkdir()
        minor = f"{sys.version_info.major}.{sys.version_info.minor}"
        (project / "pyproject.toml").write_text(
            PROJECT
            + f"""
[tool.resolve-gpu-stack]
indexes = {{ pytorch = "{srv.url}whl/", flashinfer = "{srv.url}fi/", pypi = "{srv.url}simple/" }}

[tool.resolve-gpu-stack.defaults]
python = "{minor}"

[[tool.resolve-gpu-stack.target]]
name = "x86"
platform = "x86_64-manylinux_2_28"
installed = ["torch==2.12.0.dev20260307+cu130"]
output = "pylock.x86.toml"

[[tool.resolve-gpu-stack.target]]
name = "arm"
platform = "aarch64-manylinux_2_28"
installed = ["torch==2.12.0.dev20260306+cu130"]
output = "pylock.arm.toml"
"""
        )
        rc, _, err = run_cli(capsys, "export", "uv", "--config", str(project / "pyproject.toml"), "--cache-dir", str(tmp_path / "cache"))
        assert rc == 0, err
        uv_tool = tomllib.loads((project / "pyproject.toml").read_text())["tool"]["uv"]
        assert len(uv_tool["environments"]) == 2
        torch_pins = [c for c in uv_tool["constraint-dependencies"] if c.startswith("torch==")]
        assert sorted(torch_pins) == [
            f"torch==2.12.0.dev20260306+cu130 ; platform_machine == 'aarch64' and sys_platform == 'linux' and python_version == '{minor}'",
            f"torch==2.12.0.dev20260307+cu130 ; platform_machine == 'x86_64' and sys_platform == 'linux' and python_version == '{minor}'",
        ]
        uv(["lock"], env, project)
        versions = sorted(p["version"] for p in tomllib.loads((project / "uv.lock").read_text())["package"] if p["name"] == "torch")
        assert versions == ["2.12.0.dev20260306+cu130", "2.12.0.dev20260307+cu130"]
        rc, _, err = run_cli(capsys, "check", str(project / "uv.lock"))
        assert rc == 0, err
        lock = project / "uv.lock"
        text = lock.read_text()
        assert 'name = "torch"\nversion = "2.12.0.dev20260306+cu130"' in text
        lock.write_text(text.replace('name = "torch"\nversion = "2.12.0.dev20260306+cu130"', 'name = "torch"\nversion = "2.12.0.dev20260305+cu130"'))
        rc, _, err = run_cli(capsys, "check", str(lock))
        assert rc == 1
        assert "torch: target 'arm': uv.lock has 2.12.0.dev20260305+cu130, but the plan keeps the installed 2.12.0.dev20260306+cu130" in err
        assert "target 'x86'" not in err
