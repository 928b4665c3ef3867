"""The published pre-commit hook, end to end, with the real pre-commit framework and real commits.

A temporary project (config, locks, and a snapshot recorded from a loopback world) uses this
repository as a hook repository by the locks guide's route as written: its ``sh`` block (``URL=``, a
``.pre-commit-config.yaml`` whose ``rev:`` is the commit ``git ls-remote "$URL" HEAD`` prints, then
``pre-commit run --all-files``) is run verbatim by bash with only ``URL=`` pointed at a git copy of
this working tree that has no tags (tags do not travel with main); its ``repo: local`` snippet is run
verbatim too, with the installed tool. pre-commit clones the copy at that commit and ``pip install``s
it into its own virtualenv. That install runs with no index at all (``PIP_NO_INDEX``): its wheels
come from a wheelhouse repacked from this test's own environment, and every proxy variable points at
a closed port, so any attempt to reach the network fails.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import tomllib
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from support.lock_project import build_lock_world, config_text, record_snapshot, serve_world
from support.paths import REPO
from support.server import closed_port
from support.wheels import record_hash

import resolve_gpu_stack

pytestmark = pytest.mark.slow

VENV_BIN = Path(sys.executable).parent
PRE_COMMIT = VENV_BIN / "pre-commit"
TOOL = VENV_BIN / "resolve-gpu-stack"
PYLOCK = "constraints/pylock.x86_64-py312.toml"
REGENERATE = "resolve-gpu-stack lock --target x86_64-py312"


# -- an offline wheelhouse from the installed distributions ---------------------------------------


def repack(dist: importlib.metadata.Distribution, out: Path) -> Path:
    """Rebuild the wheel an installed distribution came from (its RECORD lists every file)."""
    info = next(f for f in dist.files if f.name == "WHEEL" and f.parent.name.endswith(".dist-info"))
    dist_info = info.parent.name
    tag = next(line.split(":", 1)[1].strip() for line in dist.read_text("WHEEL").splitlines() if line.startswith("Tag:"))
    stem = dist_info[: -len(".dist-info")]
    data_dir = f"{stem}.data"
    path = out / f"{stem}-{tag}.whl"
    record: list[str] = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for file in dist.files:
            name = file.as_posix()
            if (
                "__pycache__" in name
                or name.endswith(".pyc")
                or file.parent.name == dist_info
                and file.name in ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json")
            ):
                continue
            if name.startswith("../"):  # console scripts and binaries installed into bin/
                if not re.match(r"^(\.\./)+bin/", name):
                    continue
                arcname = f"{data_dir}/scripts/{file.name}"
            else:
                arcname = name
            data = Path(dist.locate_file(file)).read_bytes()
            zf.writestr(zipfile.ZipInfo(arcname, date_time=(2026, 1, 1, 0, 0, 0)), data)
            record.append(f"{arcname},{record_hash(data)},{len(data)}")
        record.append(f"{dist_info}/RECORD,,")
        zf.writestr(f"{dist_info}/RECORD", "\n".join(record) + "\n")
    return path


def closure(requirements: list[str]) -> list[importlib.metadata.Distribution]:
    """The installed distributions a set of requirements pulls in (markers for this interpreter)."""
    env = default_environment()
    seen: dict[str, importlib.metadata.Distribution] = {}
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({**env, "extra": ""}):
            continue
        name = canonicalize_name(req.name)
        if name in seen:
            continue
        seen[name] = dist = importlib.metadata.distribution(name)
        todo += [Requirement(r) for r in dist.requires or []]
    return list(seen.values())


def build_wheelhouse(out: Path) -> None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())
    wanted = list(meta["project"]["dependencies"]) + list(meta["build-system"]["requires"])
    out.mkdir(parents=True)
    for dist in closure(wanted):
        repack(dist, out)


# -- helpers ----------------------------------------------------------------------------------------


def git(cwd: Path, *args: str, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=check)


def guide_snippets() -> tuple[str, str]:
    """The locks guide's two pre-commit blocks, as a user pastes them: (the ``repo: local`` yaml, the
    ``sh`` block that writes the remote hook's config with a commit as ``rev:`` and runs it)."""
    guide = (REPO / "docs" / "guides" / "locks-and-pre-commit.md").read_text()
    section = guide[guide.index("## pre-commit") :]
    [local] = re.findall(r"```yaml\n(.*?)```", section, flags=re.S)
    [remote] = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    return local, remote


def run_remote_block(project: Path, hook_repo: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """The guide's remote block, run by bash in ``project`` as pasted, its ``URL=`` set to ``hook_repo``
    (github is not reachable here)."""
    _, remote = guide_snippets()
    block, n = re.subn(r"(?m)^URL=\S+$", f"URL={hook_repo}", remote)
    assert n == 1, remote
    return subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=project, env=env, capture_output=True, text=True)


def make_hook_repo(dest: Path, env: dict[str, str]) -> str:
    """A git copy of this working tree at one commit, with no tags (what a fork or a mirror of main
    is: tags do not travel with a branch); returns its commit."""
    for rel in ("pyproject.toml", "README.md", "docs/guides/locks-and-pre-commit.md", ".pre-commit-hooks.yaml", ".ci/release"):
        if (REPO / rel).exists():
            dest.joinpath(rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, dest / rel)
    shutil.copytree(REPO / "src", dest / "src", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    # what the wheel force-includes (the indexes' data, the shipped scan records), as pyproject says
    forced = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    for rel in forced:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if (REPO / rel).is_dir() else shutil.copy2)(REPO / rel, dest / rel)
    git(dest, "init", "-q", "-b", "main", env=env)
    git(dest, "add", "-A", env=env)
    git(dest, "commit", "-q", "-m", "hook repo", env=env)
    assert git(dest, "tag", "--list", env=env).stdout == ""
    return git(dest, "rev-parse", "HEAD", env=env).stdout.strip()


def commit(project: Path, env: dict[str, str], message: str, *paths: str) -> tuple[int, str]:
    git(project, "add", *(paths or ("-A",)), env=env)
    done = git(project, "commit", "-m", message, env=env, check=False)
    return done.returncode, done.stdout + done.stderr


def relock(project: Path, env: dict[str, str], *targets: str) -> None:
    args = [str(TOOL), "lock"] + [w for t in targets for w in ("--target", t)]
    done = subprocess.run(args, cwd=project, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def locked_project(tmp_path: Path, env: dict[str, str], pre_commit_config: str | None = None) -> Path:
    """The user's project: config, a snapshot of the world and locks made from it offline, a git
    repository (its files added) with ``pre_commit_config``, when given, installed as its hooks."""
    project = tmp_path / "project"
    project.mkdir()
    world = build_lock_world(tmp_path / "www")
    with serve_world(world) as (_, urls):
        (project / "pyproject.toml").write_text(config_text(urls))
        record_snapshot(project, project / "snapshot")
    (project / "pyproject.toml").write_text(config_text(urls, snapshot="snapshot"))  # the servers are gone now
    relock(project, env)
    git(project, "init", "-q", "-b", "main", env=env)
    git(project, "add", "-A", env=env)
    if pre_commit_config is not None:
        (project / ".pre-commit-config.yaml").write_text(pre_commit_config)
        done = subprocess.run([str(PRE_COMMIT), "install"], cwd=project, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
    return project


def offline_env(tmp_path: Path) -> dict[str, str]:
    """pre-commit and git with a home of their own, pip with no index (a wheelhouse of this test's
    environment) and every proxy a closed port: nothing reaches the network."""
    dead = f"http://127.0.0.1:{closed_port()}"
    (tmp_path / "home").mkdir()
    build_wheelhouse(tmp_path / "wheelhouse")
    return {
        **os.environ,
        "HOME": str(tmp_path / "home"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"),
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "GIT_CONFIG_NOSYSTEM": "1",
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(tmp_path / "wheelhouse"),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "VIRTUALENV_NO_PERIODIC_UPDATE": "1",
        "HTTP_PROXY": dead,
        "HTTPS_PROXY": dead,
        "ALL_PROXY": dead,
        "http_proxy": dead,
        "https_proxy": dead,
        "all_proxy": dead,
        "NO_PROXY": "",
        "no_proxy": "",
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    }


# -- the test ---------------------------------------------------------------------------------------


@pytest.mark.skipif(not PRE_COMMIT.exists(), reason="pre-commit is not installed in this environment")
def test_the_remote_route_with_a_commit_as_rev_on_a_copy_with_no_tags(tmp_path):
    """The guide's remote block as written, `URL=` a tagless copy: it writes `rev:` as that copy's
    commit and `pre-commit run --all-files` passes on honest locks, fails on a hand-edited one;
    `pre-commit autoupdate` moves the commit on."""
    env = offline_env(tmp_path)
    hook_repo = tmp_path / "hook-repo"
    sha = make_hook_repo(hook_repo, env)
    project = locked_project(tmp_path, env)
    done = run_remote_block(project, hook_repo, env)
    assert done.returncode == 0, done.stdout + done.stderr  # the block's last line: pre-commit run --all-files
    assert re.search(r"resolve-gpu-stack check.*Passed", done.stdout), done.stdout
    config = (project / ".pre-commit-config.yaml").read_text()
    assert f"  - repo: {hook_repo}\n    rev: {sha}\n" in config  # a commit, no tag: what the copy has

    lock = project / PYLOCK
    good = lock.read_text()
    lock.write_text(good.replace('name = "flashinfer-cubin"\nversion = "0.6.5"', 'name = "flashinfer-cubin"\nversion = "0.6.4"', 1))
    done = subprocess.run([str(PRE_COMMIT), "run", "--all-files"], cwd=project, env=env, capture_output=True, text=True)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Failed" in done.stdout and "'0.6.4'" in done.stdout and "(flashinfer-cubin)" in done.stdout, done.stdout
    lock.write_text(good)
    done = subprocess.run([str(PRE_COMMIT), "run", "--all-files"], cwd=project, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr

    # a new commit on the hook repository: `pre-commit autoupdate` writes it (no tag: the commit)
    (hook_repo / "NEWS").write_text("a new commit\n")
    git(hook_repo, "add", "NEWS", env=env)
    git(hook_repo, "commit", "-q", "-m", "news", env=env)
    newer = git(hook_repo, "rev-parse", "HEAD", env=env).stdout.strip()
    done = subprocess.run([str(PRE_COMMIT), "autoupdate"], cwd=project, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"rev: {newer}" in (project / ".pre-commit-config.yaml").read_text()


@pytest.mark.skipif(not PRE_COMMIT.exists(), reason="pre-commit is not installed in this environment")
def test_precommit_hook_on_real_commits(tmp_path):
    env = offline_env(tmp_path)
    make_hook_repo(tmp_path / "hook-repo", env)
    project = locked_project(tmp_path, env)
    done = run_remote_block(project, tmp_path / "hook-repo", env)  # the guide's route writes the config
    assert done.returncode == 0, done.stdout + done.stderr
    done = subprocess.run([str(PRE_COMMIT), "install"], cwd=project, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr

    # 1. a fresh, consistent lock: the commit goes through (the first run installs the hook repo)
    started = time.monotonic()
    rc, out = commit(project, env, "lock the GPU stack")
    install_s = time.monotonic() - started
    assert rc == 0, out
    assert re.search(r"resolve-gpu-stack check.*Passed", out), out
    print(f"hook environment installed offline and first commit checked in {install_s:.1f}s")

    # 2. the config changes, the locks do not: refused, with the command that fixes it
    config = project / "pyproject.toml"
    config.write_text(config.read_text().replace('cuda = "cu130"', 'cuda = "cu130"\nwith = ["numpy"]'))
    rc, out = commit(project, env, "add numpy", "pyproject.toml")
    assert rc == 1, out
    assert "stale" in out and REGENERATE in out
    assert "resolve-gpu-stack lock --target aarch64-py312" in out

    # ... and running it makes the commit pass
    relock(project, env)
    rc, out = commit(project, env, "add numpy, relocked")
    assert rc == 0, out

    # 3. a hand-edited cubin version: refused, naming the package
    lock = project / PYLOCK
    good = lock.read_text()
    lock.write_text(
        good.replace('name = "flashinfer-cubin"\nversion = "0.6.5"', 'name = "flashinfer-cubin"\nversion = "0.6.4"', 2).replace(
            "flashinfer_cubin-0.6.5-", "flashinfer_cubin-0.6.4-"
        )
    )
    rc, out = commit(project, env, "cubin 0.6.4", PYLOCK)
    assert rc == 1, out
    assert "flashinfer-cubin:" in out and "0.6.4" in out
    git(project, "checkout", "HEAD", "--", PYLOCK, env=env)

    # 4. a hand-edited hash (still 64 hex digits): refused, naming the package
    start = good.index('name = "numpy"')
    digest = re.search(r'sha256 = "([0-9a-f]{64})"', good[start:]).group(1)
    lock.write_text(good.replace(digest, ("0" if digest[0] != "0" else "1") + digest[1:]))
    rc, out = commit(project, env, "forged hash", PYLOCK)
    assert rc == 1, out
    assert "numpy: sha256" in out and "differs" in out

    # 5. fixed (relocked), and a real change on top: passes again
    relock(project, env, "x86_64-py312")
    assert lock.read_text() == good
    config.write_text(config.read_text().replace('torch = "installed"', 'torch = "installed"\ncubin = false'))
    relock(project, env, "aarch64-py312")
    rc, out = commit(project, env, "aarch64 without cubin")
    assert rc == 0, out
    assert re.search(r"resolve-gpu-stack check.*Passed", out), out
    assert git(project, "status", "--porcelain", env=env).stdout.strip() == ""


@pytest.mark.skipif(not PRE_COMMIT.exists(), reason="pre-commit is not installed in this environment")
def test_the_local_snippet_works_as_pasted(tmp_path):
    """The guide's `repo: local` form, verbatim: pre-commit runs the installed resolve-gpu-stack."""
    env = {
        **os.environ,
        "HOME": str(tmp_path / "home"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"),
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "GIT_CONFIG_NOSYSTEM": "1",
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    (tmp_path / "home").mkdir()
    local, _ = guide_snippets()
    project = locked_project(tmp_path, env, local)
    rc, out = commit(project, env, "lock the GPU stack")
    assert rc == 0, out
    assert re.search(r"resolve-gpu-stack check.*Passed", out), out
    config = project / "pyproject.toml"
    config.write_text(config.read_text().replace('cuda = "cu130"', 'cuda = "cu130"\nwith = ["numpy"]'))
    rc, out = commit(project, env, "add numpy", "pyproject.toml")
    assert rc == 1 and "stale" in out and REGENERATE in out, out


def test_the_release_process_tags_head_and_refuses_a_dirty_tree_or_a_moved_tag(tmp_path):
    """`.ci/release` makes the `v<version>` tag (the guide's pre-commit route does not need it)."""
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(tmp_path),
    }
    repo = tmp_path / "repo"
    sha = make_hook_repo(repo, env)
    release = ["bash", ".ci/release"]
    (repo / "README.md").write_text("changed\n")
    done = subprocess.run(release, cwd=repo, env=env, capture_output=True, text=True)
    assert done.returncode == 1 and "the working tree has changes" in done.stderr
    git(repo, "checkout", "--", "README.md", env=env)
    done = subprocess.run(release, cwd=repo, env=env, capture_output=True, text=True)
    tag = f"v{resolve_gpu_stack.__version__}"
    assert done.returncode == 0 and f"tagged HEAD as {tag}" in done.stdout, done.stderr
    assert git(repo, "rev-parse", f"{tag}^{{commit}}", env=env).stdout.strip() == sha
    git(repo, "commit", "-q", "--allow-empty", "-m", "later", env=env)
    done = subprocess.run(release, cwd=repo, env=env, capture_output=True, text=True)
    assert done.returncode == 1 and f"{tag} already tags another commit ({sha})" in done.stderr
