"""Issue 22, items 1 to 3: `install --lock` installs exactly what the lock promises, on any node.

Through the command line only, with real uv into real venvs (a stand-in torch wheel installed
first) on a loopback world. A lock fits a node by its wheels' tags, its Python and what the node
has installed, not by a platform string; the lock's own promises (torch never lowered, wheels
only, markers as PEP 751 evaluates them) are checked by the same rules `check` applies, before uv
runs. Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import hashlib
import io
import json
import platform
import subprocess
import sys
import tarfile
from dataclasses import replace
from pathlib import Path
from urllib.parse import quote

import pytest
import tomli_w
from packaging.version import Version
from support.doors import index_flags, run_cli
from support.install_world import NIGHTLY, OLDER, UV, build_world, dist_info_bytes, installed, make_venv, needs_linux, torch_wheel
from support.server import IndexServer

from resolve_gpu_stack.data.toml import parse_toml
from resolve_gpu_stack.lock.files import read_lock, write_lock
from resolve_gpu_stack.lock.pylock import plan_from_lock
from resolve_gpu_stack.model import Action

MINOR = f"{sys.version_info.major}.{sys.version_info.minor}"
OLD_GLIBC = f"{platform.machine()}-manylinux_2_28"  # older than this host's glibc (needs_linux: >= 2.28)

pytestmark = [pytest.mark.slow, needs_linux]


@pytest.fixture(autouse=True)
def outside_any_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`check FILE` judges only the file (no config of this repository around it)."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def served(tmp_path: Path, uv_env):
    world = build_world(tmp_path / "www")
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        yield world, srv


def _declared_lock(capsys, srv: IndexServer, tmp_path: Path, name: str = "x") -> Path:
    """A lock for a declared target: this Python, manylinux_2_28, the nightly torch installed."""
    lock = tmp_path / "locks" / f"pylock.{name}.toml"
    rc, _, err = run_cli(
        capsys,
        "lock",
        "--python",
        MINOR,
        "--platform",
        OLD_GLIBC,
        "--installed",
        f"torch=={NIGHTLY}",
        *index_flags(srv.url),
        "--cache-dir",
        str(tmp_path / "cache"),
        "-o",
        str(lock),
    )
    assert rc == 0, err
    return lock


def _node(world, path: Path, uv_env: dict[str, str], torch: str = NIGHTLY) -> str:
    """A node as a real one is: the nightly torch installed with the exact pins it brought (the
    packages a lock for ``--installed torch==...`` keeps with it)."""
    python = make_venv(path, uv_env, torch_wheel(world, torch))
    files = world.root / "files"
    pins = [
        *(world.root / "whl" / "nightly").glob("triton-*.whl"),
        *files.glob("cuda_toolkit-*.whl"),  # and what its extras pin (torch asks for cudart and nvrtc)
        *(w for w in files.glob("nvidia_cuda_*.whl") if w.name.endswith("x86_64.whl")),
    ]
    subprocess.run([UV, "pip", "install", "-q", "--python", python, "--no-deps", "--offline", *map(str, pins)], check=True, env=uv_env)
    return python


def _install_lock(capsys, lock: Path, python: str, tmp_path: Path, *flags: str) -> tuple[int, str, str]:
    return run_cli(
        capsys, "install", "--lock", str(lock), "--python", python, "--uv", UV, "--cache-dir", str(tmp_path / "node-cache"), "--format", "json", *flags
    )


# -- 1. compatibility, not equality ----------------------------------------------------------------


def test_a_manylinux_2_28_lock_installs_on_this_newer_glibc_host_without_force_target(served, tmp_path, uv_env, capsys):
    world, srv = served
    lock = _declared_lock(capsys, srv, tmp_path)
    assert f'"{OLD_GLIBC}"' in lock.read_text()  # the lock's platform string is not this host's (glibc newer than 2.28)
    node = _node(world, tmp_path / "node", uv_env)
    torch_before = dist_info_bytes(node, "torch")
    rc, out, err = _install_lock(capsys, lock, node, tmp_path)
    assert rc == 0, err
    rows = {r["name"]: r for r in json.loads(out)["packages"]}
    got = installed(node)
    assert rows["torch"]["action"] == "keep" and got["torch"] == NIGHTLY and dist_info_bytes(node, "torch") == torch_before
    assert (got["flashinfer-python"], got["flashinfer-cubin"], got["flashinfer-jit-cache"]) == ("0.6.5", "0.6.5", "0.6.5+cu130")
    assert all(got[n] == r["version"] for n, r in rows.items())


def test_force_target_never_passes_a_torch_change(served, tmp_path, uv_env, capsys):
    """A lock made for the nightly torch, a node with another torch: refused, --force-target or not,
    and the node's torch stays byte-identical (before: --force-target installed the rest around it)."""
    world, srv = served
    lock = _declared_lock(capsys, srv, tmp_path)
    node = _node(world, tmp_path / "node", uv_env, OLDER)
    before, torch_before = installed(node), dist_info_bytes(node, "torch")
    for flags in ((), ("--force-target",)):
        rc, out, err = _install_lock(capsys, lock, node, tmp_path, *flags)
        assert rc == 2 and out == "", err
        assert f"the lock keeps the installed torch {NIGHTLY}; here torch is {OLDER}" in err and "no flag installs" in err
        assert "Traceback" not in err
    assert installed(node) == before and dist_info_bytes(node, "torch") == torch_before


# -- 2. the lock's own promises before anything is touched -------------------------------------------


def test_an_edited_torch_downgrade_lock_is_refused_with_torch_byte_identical(served, tmp_path, uv_env, capsys):
    """The lock of a node edited into a consistent torch downgrade (its inputs digest still
    matching): `check` fails it, and `install --lock` refuses it before uv runs (before: exit 0 and
    the installed torch replaced by the older nightly)."""
    world, srv = served
    node = make_venv(tmp_path / "node", uv_env, torch_wheel(world, NIGHTLY))
    lock = tmp_path / "pylock.node.toml"
    rc, _, err = run_cli(capsys, "lock", "--python", node, *index_flags(srv.url), "--cache-dir", str(tmp_path / "cache"), "-o", str(lock))
    assert rc == 0, err
    plan = plan_from_lock(read_lock(lock))
    older = torch_wheel(world, OLDER)
    torch = replace(
        plan.torch,
        version=Version(OLDER),
        action=Action.DOWNGRADE,
        installed_version=Version(NIGHTLY),
        index="pytorch",
        url=f"{srv.url}whl/nightly/cu130/{quote(older.name)}",
        filename=older.name,
        size=older.stat().st_size,
        sha256=hashlib.sha256(older.read_bytes()).hexdigest(),
    )
    (tmp_path / "edited").mkdir()
    edited = write_lock(
        replace(plan, packages=tuple(torch if p.name == "torch" else p for p in plan.packages)),
        tmp_path / "edited" / "pylock.node.toml",
        command="resolve-gpu-stack lock -o pylock.node.toml",
    )
    rc, _, err = run_cli(capsys, "check", str(edited))
    assert rc == 1 and f"{OLDER} is lower than the installed {NIGHTLY}" in err and "inputs do not allow a downgrade" in err
    before, torch_before = installed(node), dist_info_bytes(node, "torch")
    seen = len(srv.log)
    rc, out, err = _install_lock(capsys, edited, node, tmp_path)
    assert rc == 1 and out == "" and "refused before anything was installed" in err and "inputs do not allow a downgrade" in err
    assert installed(node) == before and dist_info_bytes(node, "torch") == torch_before
    assert srv.log[seen:] == []  # uv never ran: not even its dry run asked for a wheel


# -- 3. only wheels, evaluated as uv would ------------------------------------------------------------


def _sdist(root: Path, marker: Path) -> Path:
    """numpy 2.2.0 as an sdist whose in-tree build backend (no build requirements: it builds
    offline) writes ``marker`` the moment it is imported: proof that a build ran its code."""
    backend = (
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('the build backend ran')\n"
        "def get_requires_for_build_wheel(config_settings=None):\n    return []\n"
        "def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):\n    raise RuntimeError('no wheel here')\n"
    )
    files = {
        "pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n[project]\nname = "numpy"\nversion = "2.2.0"\n',
        "backend.py": backend,
        "PKG-INFO": "Metadata-Version: 2.1\nName: numpy\nVersion: 2.2.0\n",
    }
    path = root / "files" / "numpy-2.2.0.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"numpy-2.2.0/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _edited(lock: Path, out: Path, edit) -> Path:
    """``lock`` with its numpy [[packages]] entry changed by ``edit`` (the inputs digest untouched)."""
    doc = parse_toml(lock.read_text(), str(lock))
    edit(next(p for p in doc["packages"] if p["name"] == "numpy"))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(tomli_w.dumps(doc))
    return out


def test_a_lock_with_an_sdist_is_refused_and_nothing_is_built(served, tmp_path, uv_env, capsys):
    """numpy's wheel swapped for one no node can use, plus an sdist: uv would build the sdist (its
    backend runs). `check` and `install --lock` refuse the lock; nothing is built or installed."""
    world, srv = served
    marker = tmp_path / "BUILT"
    sdist = _sdist(world.root, marker)
    lock = _declared_lock(capsys, srv, tmp_path)

    def with_sdist(entry: dict) -> None:
        entry["wheels"][0]["name"] = "numpy-2.2.0-cp311-cp311-win_amd64.whl"
        entry["wheels"][0]["url"] = f"{srv.url}files/numpy-2.2.0-cp311-cp311-win_amd64.whl"
        entry["sdist"] = {
            "name": sdist.name,
            "url": f"{srv.url}files/{sdist.name}",
            "size": sdist.stat().st_size,
            "hashes": {"sha256": hashlib.sha256(sdist.read_bytes()).hexdigest()},
        }

    edited = _edited(lock, tmp_path / "edited" / "pylock.x.toml", with_sdist)
    rc, _, err = run_cli(capsys, "check", str(edited))
    assert rc == 1 and "installs from an sdist" in err and "wheels only" in err
    node = _node(world, tmp_path / "node", uv_env)
    before = installed(node)
    rc, out, err = _install_lock(capsys, edited, node, tmp_path)
    assert rc == 1 and out == "" and "installs from an sdist" in err and "Traceback" not in err
    assert not marker.exists() and installed(node) == before
    assert not [p for m, p, _ in srv.log if p.endswith(".tar.gz")]


@pytest.mark.parametrize("source", ["vcs", "directory", "archive"])
def test_a_lock_with_another_source_is_refused_by_check(served, tmp_path, capsys, source):
    _, srv = served
    lock = _declared_lock(capsys, srv, tmp_path)
    table = {
        "vcs": {"type": "git", "url": "https://git.example/numpy.git", "commit-id": "0" * 40},
        "directory": {"path": "numpy-src"},
        "archive": {"url": "https://files.example/numpy.tar.gz", "hashes": {"sha256": "0" * 64}},
    }[source]

    def with_source(entry: dict) -> None:
        del entry["wheels"]
        entry[source] = table

    edited = _edited(lock, tmp_path / "edited" / "pylock.x.toml", with_source)
    rc, _, err = run_cli(capsys, "check", str(edited))
    assert rc == 1 and "resolve-gpu-stack installs wheels only" in err and "Traceback" not in err


def test_a_marker_that_excludes_the_target_is_refused_by_check_and_install_lock(served, tmp_path, uv_env, capsys):
    """An entry whose marker is false for the target is skipped, as uv skips it: a package the
    lock's plan installs that uv would skip fails `check` and is refused by `install --lock` before
    anything is installed (before: `check` said ok, and 8 packages were installed first). A marker
    that holds changes nothing."""
    world, srv = served
    lock = _declared_lock(capsys, srv, tmp_path)
    holds = _edited(lock, tmp_path / "holds" / "pylock.x.toml", lambda e: e.update(marker="sys_platform == 'linux' and python_version >= '3'"))
    rc, _, err = run_cli(capsys, "check", str(holds))
    assert rc == 0, err
    excludes = _edited(lock, tmp_path / "excludes" / "pylock.x.toml", lambda e: e.update(marker="sys_platform == 'win32'"))
    rc, _, err = run_cli(capsys, "check", str(excludes))
    assert rc == 1 and 'numpy: its [[packages]] marker (sys_platform == "win32") excludes' in err and "uv would skip it" in err
    node = _node(world, tmp_path / "node", uv_env)
    before = installed(node)
    rc, out, err = _install_lock(capsys, excludes, node, tmp_path)
    assert rc == 1 and out == "" and "uv would skip it" in err
    assert installed(node) == before
    rc, out, err = _install_lock(capsys, holds, node, tmp_path)
    assert rc == 0, err
    assert installed(node)["numpy"] == "2.2.0"


# -- 7. a relative --cache-dir -----------------------------------------------------------------------


def test_install_with_a_relative_cache_dir_hands_uv_links_that_resolve(served, tmp_path, uv_env, capsys, monkeypatch):
    """The nightly triton has no hash on its index: install downloads it into the wheel cache and
    hands uv a folder of links to the cache's files. With `--cache-dir rel/cache` those links
    dangled (uv failed); the flag is made absolute where it is read."""
    world, srv = served
    node = make_venv(tmp_path / "node", uv_env, torch_wheel(world, NIGHTLY))
    monkeypatch.chdir(tmp_path)
    rc, out, err = run_cli(capsys, "install", "--python", node, *index_flags(srv.url), "--uv", UV, "--cache-dir", "rel/cache", "--format", "json")
    assert rc == 0, err
    assert installed(node)["triton"] == "3.7.0+git9c288bc5" and [p for p in (tmp_path / "rel" / "cache" / "wheels" / "sha256").rglob("triton-*.whl")]
