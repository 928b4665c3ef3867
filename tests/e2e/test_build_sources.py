"""``--build 'NAME @ URL'`` end to end (issue 30, "done when"): a package no index has, built from a
git commit of a local repository (real git) and from a patched local tree, against the kept torch.

``install --build 'NAME @ git+file://REPO@TAG#subdirectory=DIR'`` fetches the tag's commit, reads
the metadata from the tree, builds against the venv's own torch, installs, imports; a second run
builds nothing; ``lock`` records the URL, the commit and the folder (never the moving tag alone);
``check`` passes, then names the lock once the tag has moved; a patched local tree
(``NAME @ file:///path``) is another build; ``wheelhouse`` + ``install --lock`` put it on a node
without a compiler.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.build_world import ADD_OFFSET, NIGHTLY, PYTHON, build_world, extension_repo, git, run_in, scm_repo, setup_py_repo, torch_wheel
from support.building import HERE, common, needs_builds
from support.doors import index_flags, run_cli
from support.install_world import dist_info_bytes, make_venv
from support.server import IndexServer

from resolve_gpu_stack.data.toml import load_toml
from resolve_gpu_stack.errors import LockFileError
from resolve_gpu_stack.model import SourceDist, SourceOrigin
from resolve_gpu_stack.model.codec import _sdist, sdist_to_dict
from resolve_gpu_stack.model.source import parse_build_spec


def _records(cache: Path) -> list[Path]:
    return sorted((cache / "wheels" / "builds").glob("*.json"))


def _no_compiler(tmp: Path) -> str:
    """PATH without a compiler, with git (a source build needs git to fetch, never to rebuild),
    each git command it runs logged to ``git.log``."""
    empty = tmp / "bin-git-only"
    empty.mkdir(exist_ok=True)
    git_wrapper = empty / "git"
    # the subcommand: the first word after the fixed ``-c KEY=VALUE`` pairs (net/process.py's GIT_CONFIG)
    subcommand = 'skip=; for a in "$@"; do if [ -n "$skip" ]; then skip=; continue; fi; if [ "$a" = -c ]; then skip=1; continue; fi; echo "$a"; break; done'
    git_wrapper.write_text(f'#!/bin/sh\n{subcommand} >> {tmp / "git.log"}\nexec /usr/bin/git "$@"\n')
    git_wrapper.chmod(0o755)
    return str(empty)


@pytest.mark.slow
@needs_builds
def test_a_git_commit_and_a_patched_tree_build_lock_and_ship(tmp_path, uv_env, capsys, monkeypatch):
    src = extension_repo(tmp_path / "src")
    world = build_world(tmp_path)  # no sdist of src-kernel anywhere
    commit = git(src.repo, "rev-parse", "v1.0^{commit}")
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        cache = tmp_path / "cache"
        venv = make_venv(tmp_path / "a", uv_env, torch_wheel(world))
        torch_before = dist_info_bytes(venv, "torch")

        # install: fetched with git at the tag's commit, built against the venv's torch, imported
        argv = ["install", "--python", venv, "--build", src.reference(), *common(srv, cache), "--format", "json"]
        rc, out, err = run_cli(capsys, *argv)
        assert rc == 0, err
        row = {p["name"]: p for p in json.loads(out)["packages"]}[src.name]
        assert row["action"] == "build" and row["after"] == src.version
        assert run_in(venv, f"import {src.module}; print({src.module}.add(2, 3))") == str(5 + ADD_OFFSET)
        assert dist_info_bytes(venv, "torch") == torch_before
        records = _records(cache)
        assert len(records) == 1

        # a second run builds nothing (no compiler on PATH; git fetches the tree again)
        monkeypatch.setenv("PATH", _no_compiler(tmp_path))
        rc, out, err = run_cli(capsys, *argv)
        assert rc == 0, err
        assert _records(cache) == records
        assert (tmp_path / "git.log").read_text().split() == ["ls-remote"]  # the commit asked; nothing cloned
        monkeypatch.setenv("PATH", uv_env["PATH"])

        # lock for the declared target records the URL, the commit and the folder
        lock = tmp_path / "locks" / "pylock.node.toml"
        declared = ["--python", PYTHON, "--platform", HERE, "--installed", f"torch=={NIGHTLY}"]
        rc, _, err = run_cli(capsys, "lock", *declared, "--build", src.reference(), *common(srv, cache), "-o", str(lock))
        assert rc == 0, err
        doc = load_toml(lock, error=LockFileError)
        built = next(p for p in doc["tool"]["resolve-gpu-stack"]["packages"] if p["name"] == src.name)
        origin = built["sdist"]["origin"]
        assert origin == {"kind": "git", "url": f"file://{src.repo}", "rev": "v1.0", "commit": commit, "subdirectory": "kernel"}
        assert built["sdist"]["url"] == f"git+file://{src.repo}@{commit}#subdirectory=kernel"
        assert f"git+file://{src.repo}@{commit}#subdirectory=kernel" in built["built"]["command"]
        monkeypatch.chdir(tmp_path)
        rc, out, err = run_cli(capsys, "check", str(lock))
        assert rc == 0, out + err

        # wheelhouse ships the built wheel; install --lock on a node: no compiler, no git, nothing built
        house = tmp_path / "house"
        rc, _, err = run_cli(capsys, "wheelhouse", str(lock), "-o", str(house), "--cache-dir", str(cache))
        assert rc == 0, err
        venv_b = make_venv(tmp_path / "b", uv_env, torch_wheel(world))
        empty = tmp_path / "nothing"
        empty.mkdir()
        monkeypatch.setenv("PATH", str(empty))
        rc, out, err = run_cli(
            capsys, "install", "--lock", str(house / lock.name), "--python", venv_b, "--cache-dir", str(tmp_path / "node"), "--format", "json"
        )
        monkeypatch.setenv("PATH", uv_env["PATH"])
        assert rc == 0, err
        assert run_in(venv_b, f"import {src.module}; print({src.module}.add(40, 2))") == str(42 + ADD_OFFSET)

        # the tag moves to a new commit: check names the lock, whose commit is no longer what it names
        (src.tree / "NEWS").write_text("a new commit\n")
        git(src.repo, "add", "-A")
        git(src.repo, "commit", "-q", "-m", "second")
        git(src.repo, "tag", "-f", "v1.0")
        rc, out, err = run_cli(capsys, "check", str(lock))
        assert rc == 1
        assert "v1.0" in out + err and commit[:12] in out + err
        assert f"lock it again with --build '{src.reference()}'" in out + err  # the tag asked for, not the old commit

        # a patched local tree is another build (its files' digest is the build's input)
        tree = f"{src.name} @ file://{src.tree}"
        argv = ["install", "--python", venv, "--build", tree, *common(srv, cache), "--format", "json"]
        rc, _, err = run_cli(capsys, *argv)
        assert rc == 0, err
        after_first_tree = _records(cache)
        rc, _, err = run_cli(capsys, *argv)
        assert rc == 0, err
        assert _records(cache) == after_first_tree  # the same files: nothing built
        cpp = src.tree / src.module / "_C.cpp"
        cpp.write_text(cpp.read_text().replace("c10::stand_in_add(a, b)", "c10::stand_in_add(a, b) + 1"))
        rc, _, err = run_cli(capsys, *argv)
        assert rc == 0, err
        assert len(_records(cache)) == len(after_first_tree) + 1
        assert run_in(venv, f"import {src.module}; print({src.module}.add(2, 3))") == str(5 + ADD_OFFSET + 1)
        # a lock of the tree records it; check names it once the tree changes again
        lock2 = tmp_path / "locks" / "pylock.tree.toml"
        rc, _, err = run_cli(capsys, "lock", *declared, "--build", tree, *common(srv, cache), "-o", str(lock2))
        assert rc == 0, err
        rc, out, err = run_cli(capsys, "check", str(lock2))
        assert rc == 0, out + err
        (src.tree / "patch.txt").write_text("another patch\n")
        rc, out, err = run_cli(capsys, "check", str(lock2))
        assert rc == 1 and "changed since it was locked" in out + err
    assert os.environ["PATH"] == uv_env["PATH"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("src-kernel @ svn+file:///x", "is git+URL or file:///path"),
        ("src-kernel==1.0 @ git+file:///x", "not a PEP 508 direct reference"),
        ("src-kernel @ git+file:///x#subdirectory=../up", "must be a relative folder"),
        ("src-kernel @ git+https://user:secret@host/x.git", "credentials"),
    ],
)
def test_a_bad_build_source_is_a_clear_usage_error(value, message, tmp_path, capsys):
    rc, _, err = run_cli(capsys, "resolve", "--python", "3.12", "--build", value, *index_flags("http://127.0.0.1:9/"))
    assert rc == 2 and message in err and "secret" not in err


@needs_builds
def test_a_missing_revision_names_the_repository(tmp_path, uv_env, capsys):
    src = extension_repo(tmp_path / "src")
    world = build_world(tmp_path)
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        rc, _, err = run_cli(
            capsys, "lock", "--python", PYTHON, "--build", src.reference("v9.9"), *common(srv, tmp_path / "cache"), "-o", str(tmp_path / "pylock.x.toml")
        )
    assert rc != 0 and "has no revision 'v9.9'" in err


def test_build_values_parse_into_the_source_they_name():
    assert parse_build_spec("SGL_Kernel").name == "sgl-kernel" and parse_build_spec("sgl-kernel").source is None
    git = parse_build_spec("sgl-kernel @ git+https://example.org/sglang.git@v0.5.9#subdirectory=sgl-kernel").source
    assert git == SourceOrigin(kind="git", url="https://example.org/sglang.git", rev="v0.5.9", subdirectory="sgl-kernel")
    assert git.reference == "git+https://example.org/sglang.git@v0.5.9#subdirectory=sgl-kernel"
    bare = parse_build_spec("x @ git+file:///src/repo").source
    assert bare is not None and bare.rev is None and bare.url == "file:///src/repo"
    tree = parse_build_spec("x @ file:///src/sglang/sgl-kernel").source
    assert tree == SourceOrigin(kind="directory", url="/src/sglang/sgl-kernel") and tree.reference == "file:///src/sglang/sgl-kernel"


def test_a_source_round_trips_through_the_lock_codec():
    origin = SourceOrigin(kind="git", url="file:///r", rev="v1", commit="a" * 40, subdirectory="k")
    sdist = SourceDist(url=origin.reference, filename="k-1.0.tar.gz", sha256="b" * 64, size=10, origin=origin)
    assert _sdist(sdist_to_dict(sdist), "x") == sdist
    assert sdist_to_dict(sdist)["url"] == f"git+file:///r@{'a' * 40}#subdirectory=k"


@pytest.mark.slow
@needs_builds
def test_the_config_key_build_takes_a_source_the_same(tmp_path, uv_env, capsys, monkeypatch):
    src = extension_repo(tmp_path / "src")
    world = build_world(tmp_path)
    commit = git(src.repo, "rev-parse", "v1.0^{commit}")
    project = tmp_path / "project"
    project.mkdir()
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        (project / "gpu-stack.toml").write_text(
            f'indexes = {{ pytorch = "{srv.url}whl/", flashinfer = "{srv.url}fi/", pypi = "{srv.url}simple/" }}\n\n'
            "[defaults]\n"
            f'python = "{PYTHON}"\nplatform = "{HERE}"\nflashinfer = "none"\nbuild = ["{src.reference()}"]\n\n'
            "[[target]]\n"
            f'name = "node"\ninstalled = ["torch=={NIGHTLY}"]\noutput = ["pylock.node.toml"]\n'
        )
        monkeypatch.chdir(project)
        rc, _, err = run_cli(capsys, "lock", "--cache-dir", str(tmp_path / "cache"))
        assert rc == 0, err
    doc = load_toml(project / "pylock.node.toml", error=LockFileError)
    built = next(p for p in doc["tool"]["resolve-gpu-stack"]["packages"] if p["name"] == src.name)
    assert built["action"] == "build" and built["sdist"]["origin"]["commit"] == commit


def test_a_revision_resolves_to_its_commit_as_git_does(tmp_path):
    from resolve_gpu_stack.errors import BuildError
    from resolve_gpu_stack.net.gitsource import resolve_commit

    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "commit", "-q", "--allow-empty", "-m", "one")
    git(repo, "tag", "-a", "-m", "annotated", "v1")  # a tag object: its commit is what counts
    git(repo, "tag", "light")
    head = git(repo, "rev-parse", "HEAD")

    def commit(rev):
        return resolve_commit(SourceOrigin(kind="git", url=f"file://{repo}", rev=rev), dict(os.environ))

    assert commit("v1") == commit("light") == commit("main") == commit(None) == head
    assert commit("a" * 40) == "a" * 40
    with pytest.raises(BuildError, match="has no revision 'v2'"):
        commit("v2")


def _metadata_records(cache: Path) -> list[Path]:
    return sorted((cache / "wheels" / "builds" / "metadata").glob("*.json"))


@pytest.mark.slow
@needs_builds
def test_a_setup_py_tree_with_a_computed_version_builds_from_git_and_a_folder_locks_and_builds_once(tmp_path, uv_env, capsys, monkeypatch):
    """Issue 49, "done when": a setup.py tree whose version is computed in setup.py (no static
    metadata anywhere) is read through PEP 517 in a build environment with the kept torch, once
    per tree; ``git+file://REPO@TAG`` and ``file:///TREE`` build, install, lock with provenance,
    and a second run builds nothing."""
    src = setup_py_repo(tmp_path / "src")
    world = build_world(tmp_path)
    commit = git(src.repo, "rev-parse", "v2.1^{commit}")
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        cache = tmp_path / "cache"
        venv = make_venv(tmp_path / "a", uv_env, torch_wheel(world))
        torch_before = dist_info_bytes(venv, "torch")

        argv = ["install", "--python", venv, "--build", src.reference(), *common(srv, cache), "--format", "json"]
        rc, out, err = run_cli(capsys, *argv)
        assert rc == 0, err
        assert "its metadata is dynamic: asking its build backend" in err
        row = {p["name"]: p for p in json.loads(out)["packages"]}[src.name]
        assert row["action"] == "build" and row["after"] == "2.1.post42"
        assert run_in(venv, f"import {src.module}; print({src.module}.add(2, 3))") == str(5 + ADD_OFFSET)
        assert run_in(venv, f"import importlib.metadata as m; print(m.version('{src.name}'))") == "2.1.post42"
        assert dist_info_bytes(venv, "torch") == torch_before
        records, metadata = _records(cache), _metadata_records(cache)
        assert len(records) == 1 and len(metadata) == 1

        # the same tree as a folder: its own tree (the git archive also keeps what a git-history version needs),
        # asked and built once; a second run asks nothing and builds nothing
        tree = ["install", "--python", venv, "--build", f"{src.name} @ file://{src.repo}", *common(srv, cache)]
        rc, _, err = run_cli(capsys, *tree)
        assert rc == 0, err
        records, metadata = _records(cache), _metadata_records(cache)
        rc, _, err = run_cli(capsys, *tree)
        assert rc == 0, err
        assert "its metadata is dynamic" not in err and _records(cache) == records and _metadata_records(cache) == metadata

        # lock for the declared target: the kept torch's wheel answers the metadata; provenance recorded
        lock = tmp_path / "locks" / "pylock.node.toml"
        declared = ["--python", PYTHON, "--platform", HERE, "--installed", f"torch=={NIGHTLY}"]
        rc, _, err = run_cli(capsys, "lock", *declared, "--build", src.reference(), *common(srv, cache), "-o", str(lock))
        assert rc == 0, err
        doc = load_toml(lock, error=LockFileError)
        built = next(p for p in doc["tool"]["resolve-gpu-stack"]["packages"] if p["name"] == src.name)
        assert built["version"] == "2.1.post42" and built["sdist"]["origin"]["commit"] == commit
        assert built["sdist"]["filename"] == f"{src.module}-2.1.post42.tar.gz"
        monkeypatch.chdir(tmp_path)
        rc, out, err = run_cli(capsys, "check", str(lock))
        assert rc == 0, out + err

        # a second lock builds nothing and asks nothing: no compiler on PATH, git asked for the tag's commit only
        locked = _records(cache)
        monkeypatch.setenv("PATH", _no_compiler(tmp_path))
        rc, _, err = run_cli(capsys, "lock", *declared, "--build", src.reference(), *common(srv, cache), "-o", str(lock))
        monkeypatch.setenv("PATH", uv_env["PATH"])
        assert rc == 0, err
        assert _records(cache) == locked and "its metadata is dynamic" not in err
        assert (tmp_path / "git.log").read_text().split() == ["ls-remote"]

        # a change to what setup.py computes the version from is another tree: asked again, another version
        (src.repo / src.module / "VERSION.txt").write_text("2.2\n")
        rc, out, err = run_cli(capsys, "install", "--python", venv, "--build", f"{src.name} @ file://{src.repo}", *common(srv, cache), "--format", "json")
        assert rc == 0, err
        assert {p["name"]: p for p in json.loads(out)["packages"]}[src.name]["after"] == "2.2.post42"
        assert len(_metadata_records(cache)) == len(metadata) + 1  # the new tree's, asked once


@needs_builds
def test_a_dynamic_tree_with_no_kept_torch_is_a_clear_error(tmp_path, uv_env, capsys):
    src = setup_py_repo(tmp_path / "src")
    world = build_world(tmp_path)
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        rc, out, err = run_cli(capsys, "resolve", "--python", PYTHON, "--build", f"{src.name} @ file://{src.repo}", *common(srv, tmp_path / "cache"))
    assert rc != 0 and out == "" and "its metadata is dynamic" in err and "--installed torch==VERSION" in err and "Traceback" not in err


@needs_builds
def test_a_version_read_from_git_history_as_setuptools_scm_does_is_the_revisions(tmp_path, uv_env, capsys):
    """A setup.py that reads its version from git history (setuptools-scm's way in an archive:
    .git_archival.txt, which the repository does not have) gets the tag's version at the tag and
    the distance past it on the branch: the archive keeps what the version needs."""
    src = scm_repo(tmp_path / "src")
    world = build_world(tmp_path)
    declared = ["--python", PYTHON, "--platform", HERE, "--installed", f"torch=={NIGHTLY}"]
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        versions = {}
        for rev in ("v3.0", "main"):
            rc, out, err = run_cli(
                capsys, "resolve", *declared, "--build", f"{src.name} @ git+file://{src.repo}@{rev}", *common(srv, tmp_path / "cache"), "--format", "json"
            )
            assert rc == 0, err
            versions[rev] = {p["name"]: p["version"] for p in json.loads(out)["packages"]}[src.name]
    assert versions == {"v3.0": "3.0", "main": "3.0.post1"}
