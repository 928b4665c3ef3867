"""docs/guides/building.md's examples run (issue 49, item 7), each on a loopback world, the page's own
command lines read from it (only the URLs, the indexes and the cache swapped for the world's):

- the serving story in its git form: ``--with sglang --build 'sgl-kernel @ git+URL@v0.5.9#subdirectory=sgl-kernel'``
  plans sglang on the kept nightly with sgl-kernel built from that tag's commit (a local repository of
  that shape; the real build, install, lock and ship of a git build are tests/e2e/test_build_sources.py's);
- the GPU-less CI host: the dry run of a setup.py tree whose version setup.py computes says what the
  build needs, the archs read from the kept torch without a GPU.
"""

from __future__ import annotations

import json
import platform
import re
import shlex

import pytest
from support.build_world import NIGHTLY, build_world, extension_repo, git, have_cxx, setup_py_repo, torch_wheel
from support.building import common
from support.doors import run_cli
from support.framework_world import build_framework_world
from support.install_world import _glibc_ok, make_venv
from support.paths import REPO
from support.server import IndexServer

from resolve_gpu_stack.cli.app import main

GUIDE = REPO / "docs" / "guides" / "building.md"
UPSTREAM = "https://github.com/sgl-project/sglang"


def guide_commands() -> list[list[str]]:
    """The ``resolve-gpu-stack`` command lines of the guide's ``sh`` blocks, as words (continuations joined)."""
    out = []
    for block in re.findall(r"```sh\n(.*?)```", GUIDE.read_text(encoding="utf-8"), flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line.split(" | ", 1)[0], comments=True)
            if words and words[0] == "resolve-gpu-stack":
                out.append(words[1:])
    return out


def _swap(words: list[str], old: str, new: str) -> list[str]:
    return [w.replace(old, new) for w in words]


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the serving world's compiled wheels are x86_64")
def test_the_sgl_kernel_story_in_its_git_form_plans_sgl_kernel_built_from_the_tag(tmp_path, capsys):
    [plan_line] = [w for w in guide_commands() if w and w[0] == "--python" and any(f"git+{UPSTREAM}" in x for x in w)]
    src = extension_repo(tmp_path / "src", "sgl-kernel", "0.3.21", subdirectory="sgl-kernel", tag="v0.5.9")
    commit = git(src.repo, "rev-parse", "v0.5.9^{commit}")
    world = build_framework_world(tmp_path / "fw")
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        argv = [*_swap(plan_line, UPSTREAM, f"file://{src.repo}"), *_index_flags(srv.url), "--cache-dir", str(tmp_path / "cache"), "--format", "json"]
        rc, out, err = run_cli(capsys, *argv)
    assert rc == 0, err
    plan = json.loads(out)
    got = {p["name"]: p for p in plan["packages"]}
    kernel = got["sgl-kernel"]
    assert kernel["action"] == "build" and kernel["version"] == "0.3.21"
    assert kernel["sdist"]["origin"]["commit"] == commit and kernel["sdist"]["origin"]["subdirectory"] == "sgl-kernel"
    assert got["sglang"]["version"] == "0.5.9" and got["torch"]["action"] == "keep" and got["torch"]["version"] == NIGHTLY


def _index_flags(url: str) -> list[str]:
    return ["--index", f"pytorch={url}whl/", "--index", f"flashinfer={url}fi/", "--index", f"pypi={url}simple/"]


@pytest.mark.slow
@pytest.mark.skipif(not (have_cxx() and _glibc_ok()), reason="needs Linux, g++ and uv")
def test_the_gpu_less_ci_hosts_dry_run_of_a_setup_py_tree_says_the_archs_read_from_the_kept_torch(tmp_path, uv_env, capsys, monkeypatch):
    [dry_run] = [w for w in guide_commands() if w[0] == "install" and "--dry-run" in w and any("my-ext @ file://" in x for x in w)]
    src = setup_py_repo(tmp_path / "src", "my-ext")
    world = build_world(tmp_path)
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        venv = make_venv(tmp_path / "venv", uv_env, torch_wheel(world))
        argv = [*_swap(_swap(dry_run, "file:///src/my-ext", f"file://{src.repo}"), ".venv/bin/python", venv), *common(srv, tmp_path / "cache")]
        capsys.readouterr()
        rc = main(argv)
        _, err = capsys.readouterr()
    assert rc == 0, err
    assert "my-ext 2.1.post42: a build needs" in err  # the version setup.py computes, asked through PEP 517
    assert f"TORCH_CUDA_ARCH_LIST 9.0;12.0, the archs torch {NIGHTLY} was built for (read from torch._C._cuda_getArchFlags()" in err
    assert not list((tmp_path / "cache" / "wheels" / "builds").glob("*.json"))  # a dry run builds nothing
