"""`export uv` of a plan that builds (issue 49): a package built from a git commit against the
kept torch is written as uv's own build settings, ``[tool.uv.sources]`` (the git URL and the locked
commit), ``[tool.uv.extra-build-dependencies]`` (torch, ``match-runtime = true``) and
``[tool.uv.extra-build-variables]`` (the arch list), so that real ``uv lock`` and ``uv sync`` of the
exported project build it from that commit against the kept torch: its extension imports and calls
into the kept torch's libtorch, and torch is not reinstalled. Offline: every index is a loopback
server, uv has no config of its own, git reads a local repository.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from support.build_world import ADD_OFFSET, NIGHTLY, build_world, extension_repo, git, have_cxx, run_in
from support.doors import index_flags, run_cli
from support.install_world import _glibc_ok, dist_info_bytes
from support.server import IndexServer
from support.uv_world import uv, uv_env

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

UV = str(Path(sys.executable).with_name("uv"))
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not (have_cxx() and _glibc_ok() and Path(UV).exists()), reason="needs Linux, g++ and uv")]

PROJECT = """\
[project]
name = "demo"
version = "0.1.0"
requires-python = ">=3.10"
dependencies = []
"""


def project_env(tmp_path: Path, srv: IndexServer) -> dict[str, str]:
    """``uv_env`` with the project's own [tool.uv] settings read (UV_NO_CONFIG would drop the build
    settings: no-build-isolation-package, extra-build-dependencies, extra-build-variables), and no
    user or system configuration (an empty XDG_CONFIG_HOME)."""
    env = {k: v for k, v in uv_env(tmp_path, srv).items() if k != "UV_NO_CONFIG"}
    (tmp_path / "xdg").mkdir(exist_ok=True)
    return {**env, "XDG_CONFIG_HOME": str(tmp_path / "xdg")}


def test_export_uv_of_a_git_build_makes_uv_build_it_from_that_commit_against_the_kept_torch(tmp_path, capsys):
    src = extension_repo(tmp_path / "src")
    commit = git(src.repo, "rev-parse", "v1.0^{commit}")
    world = build_world(tmp_path)
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        env = project_env(tmp_path, srv)
        project = tmp_path / "project"
        project.mkdir()
        (project / "pyproject.toml").write_text(PROJECT)
        uv(["venv", "-q", "--python", sys.executable, str(project / ".venv")], env, project)
        python = str(project / ".venv" / "bin" / "python")
        uv(["pip", "install", "-q", "--python", python, "--index", f"{srv.url}whl/nightly/cu130/", f"torch=={NIGHTLY}"], env, project)
        torch_before = dist_info_bytes(python, "torch")

        flags = ["--python", python, *index_flags(srv.url), "--flashinfer", "none", "--cache-dir", str(tmp_path / "cache")]
        rc, _, err = run_cli(capsys, "export", "uv", *flags, "--build", src.reference(), "--gpu", "sm90", "--project", str(project))
        assert rc == 0, err
        doc = tomllib.loads((project / "pyproject.toml").read_text())
        tool = doc["tool"]["uv"]
        assert tool["sources"][src.name] == {"git": f"file://{src.repo}", "rev": commit, "subdirectory": src.subdirectory}
        assert tool["extra-build-dependencies"][src.name] == [{"requirement": "torch", "match-runtime": True}]
        assert tool["extra-build-variables"][src.name] == {"TORCH_CUDA_ARCH_LIST": "9.0"}
        assert src.name in doc["dependency-groups"]["gpu-stack"]

        uv(["lock"], env, project)
        locked = {p["name"]: p for p in tomllib.loads((project / "uv.lock").read_text())["package"]}
        assert locked[src.name]["version"] == src.version and commit in locked[src.name]["source"]["git"]
        synced = uv(["sync", "-v"], env, project)
        # built in uv's build environment with the kept torch (match-runtime), never the PyPI torch
        # of another ABI that the sdist's own `requires = ["torch"]` would otherwise get
        assert f"torch=={NIGHTLY}" in synced.stderr and "torch==2.5.0" not in synced.stderr, synced.stderr[-3000:]
        assert run_in(python, f"import {src.module}; print({src.module}.add(2, 3))") == str(5 + ADD_OFFSET)
        assert dist_info_bytes(python, "torch") == torch_before
        rc, out, err = run_cli(capsys, "check", str(project / "uv.lock"))
        assert rc == 0, out + err

        # a local tree: a path source; the previous export's git source replaced, nothing of it left
        tree = f"{src.name} @ file://{src.tree}"
        rc, _, err = run_cli(capsys, "export", "uv", *flags, "--build", tree, "--gpu", "sm90", "--gpu", "sm120", "--project", str(project))
        assert rc == 0, err
        tool = tomllib.loads((project / "pyproject.toml").read_text())["tool"]["uv"]
        assert tool["sources"][src.name] == {"path": str(src.tree)}
        assert tool["extra-build-variables"][src.name] == {"TORCH_CUDA_ARCH_LIST": "9.0;12.0"}
        assert "no-build-isolation-package" not in tool
        uv(["lock"], env, project)
        locked = {p["name"]: p for p in tomllib.loads((project / "uv.lock").read_text())["package"]}
        assert locked[src.name]["source"] == {"directory": str(src.tree)}
