"""A cache folder that cannot be written, and SIGTERM during a write (issue 48, item 5): the real
console script at every door, against a loopback index with a real venv and real uv.

- A read-only cache folder, or a full one: one clear line, then the command goes on without
  caching (a temporary folder of its own, removed at its end); never a traceback.
- A cache folder that fills up during the run: the page cache says one line and writes nothing
  more; a wheel that cannot be stored is exit 4 with a hint; never a traceback.
- SIGTERM while ``lock -o`` writes: the signal unwinds the program, the temporary file beside the
  lock is removed by then (not by the next write), exit 143, the old lock as it was.

Read-only and full folders are real: a tmpfs mounted read-only or of a few KiB where this runs as
root (which ignores permissions), else a folder without write permission (full: skipped).
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.doors import index_flags
from support.install_world import NIGHTLY, UV, _glibc_ok, build_world, installed, make_venv, torch_wheel
from support.server import IndexServer

TOOL = Path(sys.executable).with_name("resolve-gpu-stack")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not _glibc_ok() or not Path(UV).exists(), reason="needs Linux with glibc >= 2.28 and uv")]


def _mount(folder: Path, options: str) -> bool:
    if os.geteuid() != 0:
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True, check=False).returncode == 0


@contextlib.contextmanager
def read_only(folder: Path) -> Iterator[Path]:
    """``folder`` (made empty here) that cannot be written: a read-only tmpfs, else mode 0555."""
    folder.mkdir(parents=True)
    mounted = _mount(folder, "ro,size=64k")
    if not mounted:
        if os.geteuid() == 0:
            pytest.skip("root without mount: a folder's permissions would not stop a write")
        folder.chmod(0o555)
    try:
        yield folder
    finally:
        if mounted:
            subprocess.run(["umount", str(folder)], check=False)
        else:
            folder.chmod(stat.S_IRWXU)


@contextlib.contextmanager
def full(folder: Path, *, room: int = 0) -> Iterator[Path]:
    """``folder`` on a small tmpfs with ``room`` bytes left (0: full from the start)."""
    folder.mkdir(parents=True)
    if not _mount(folder, f"size={64 * 1024 + room}"):
        pytest.skip("needs root and tmpfs mounts to make a full folder")
    try:
        filler = folder / "filler"
        with filler.open("wb") as fh:
            with contextlib.suppress(OSError):
                fh.write(bytes(64 * 1024))
        if room == 0:
            with contextlib.suppress(OSError), (folder / "filler2").open("wb") as fh:
                while fh.write(bytes(4096)):
                    fh.flush()
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=False)


def cli(*argv: str, cwd: Path) -> tuple[int, str, str]:
    proc = subprocess.run([str(TOOL), *argv], cwd=cwd, capture_output=True, text=True, timeout=300, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def doors(tmp: Path, srv: IndexServer, python: str, cache: Path, lock: Path, torch_file: Path) -> dict[str, tuple[list[str], Path]]:
    """Every door that caches something (and ``check``), with the folder it runs in: each exits 0 as with a good cache."""
    flags = [*index_flags(srv.url), "--cache-dir", str(cache)]
    project = tmp / "project"  # export uv edits its pyproject.toml; a config lock reads its gpu-stack.toml
    project.mkdir(exist_ok=True)
    (project / "pyproject.toml").write_text('[project]\nname = "app"\nversion = "0.1"\n')
    configured = tmp / "configured"
    configured.mkdir(exist_ok=True)
    (configured / "gpu-stack.toml").write_text(
        f'indexes = {{ pytorch = "{srv.url}whl/", flashinfer = "{srv.url}fi/", pypi = "{srv.url}simple/" }}\n\n'
        f'[[target]]\nname = "node"\npython = "{sys.version_info.major}.{sys.version_info.minor}"\nplatform = "{platform.machine()}-manylinux_2_28"\n'
        f'installed = ["torch=={NIGHTLY}"]\noutput = ["pylock.node.toml"]\n'
    )
    return {
        "resolve": (["resolve", "--python", python, *flags], tmp),
        "candidates": (["candidates", "flashinfer-python", "--python", python, *flags], tmp),
        "inspect": (["inspect", str(torch_file), "--cache-dir", str(cache)], tmp),
        "lock -o": (["lock", "--python", python, *flags, "-o", str(tmp / "out" / "pylock.node.toml")], tmp),
        "config lock": (["lock", "--cache-dir", str(cache)], configured),
        "check": (["check", str(lock), "--cache-dir", str(cache)], tmp),
        "export uv": (["export", "uv", "--python", python, *flags], project),
        "snapshot": (["snapshot", "--python", python, *flags, "--output", str(tmp / "snap")], tmp),
        "install --dry-run": (["install", "--python", python, *flags, "--dry-run"], tmp),
        "install": (["install", "--python", python, *flags], tmp),
        "install --lock": (["install", "--lock", str(lock), "--python", python, "--cache-dir", str(cache), "--dry-run"], tmp),
        "wheelhouse": (["wheelhouse", str(lock), "-o", str(tmp / "house"), "--cache-dir", str(cache)], tmp),
    }


@pytest.fixture
def served(tmp_path: Path, uv_env: dict[str, str]) -> Iterator[tuple[IndexServer, str, Path, Path]]:
    """The install world served, a venv with the kept torch, a lock made for it with a good cache."""
    world = build_world(tmp_path / "www")
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        torch = torch_wheel(world, NIGHTLY)
        python = make_venv(tmp_path / "venv", uv_env, torch)
        lock = tmp_path / "locks" / "pylock.node.toml"
        rc, _, err = cli("lock", "--python", python, *index_flags(srv.url), "--cache-dir", str(tmp_path / "good-cache"), "-o", str(lock), cwd=tmp_path)
        assert rc == 0, err
        yield srv, python, lock, torch


def _said_once(err: str, cache: Path, *, said: bool) -> None:
    """One line about the cache folder (none from ``check``, which needs none); never a traceback."""
    lines = [line for line in err.splitlines() if str(cache) in line]
    assert len(lines) == int(said) and all("cannot be written" in line and "caches nothing" in line for line in lines), err
    assert "Traceback" not in err and "cannot write cache entry" not in err, err
    for line in lines:  # the temporary folder it used instead is gone
        [used] = re.findall(r"it uses (\S+), removed at its end", line)
        assert not Path(used).exists(), line


@pytest.mark.parametrize("fault", ["read-only", "full"])
def test_an_unwritable_cache_folder_is_one_line_at_every_door_and_the_command_goes_on(served, tmp_path: Path, fault: str) -> None:
    srv, python, lock, torch = served
    cache = tmp_path / "cache"
    with read_only(cache) if fault == "read-only" else full(cache):
        for door, (argv, cwd) in doors(tmp_path, srv, python, cache, lock, torch).items():
            rc, out, err = cli(*argv, cwd=cwd)
            assert rc == 0, (door, err)
            _said_once(err, cache, said=door != "check")
        assert sorted(p.name for p in cache.iterdir()) in ([], ["filler", "filler2"])  # nothing written into it
    assert installed(python)["flashinfer-python"] == "0.6.5"  # the real install went on
    assert (tmp_path / "out" / "pylock.node.toml").is_file() and (tmp_path / "house").is_dir()
    assert (tmp_path / "configured" / "pylock.node.toml").is_file() and (tmp_path / "snap").is_dir()
    assert "tool.uv" in (tmp_path / "project" / "pyproject.toml").read_text()


def test_a_cache_folder_that_fills_up_during_the_run_is_one_line_or_exit_4_never_a_traceback(served, tmp_path: Path) -> None:
    """Room for the probe and a few pages, not for the wheels: the page cache says one line and
    stops writing; a wheel download that cannot be stored is exit 4 naming the file, with a hint."""
    srv, python, _, _ = served
    stopped = 0
    for room in (8 * 1024, 24 * 1024, 48 * 1024):
        folder = tmp_path / f"cache-{room}"
        with full(folder, room=room):
            rc, out, err = cli("install", "--python", python, *index_flags(srv.url), "--cache-dir", str(folder), cwd=tmp_path)
            assert "Traceback" not in err and err.count("cannot write cache entry") <= 1, err
            assert rc in (0, 4), err
            if rc == 4:
                assert "cannot store it in the wheel cache" in err and "No space left on device" in err and "--cache-dir" in err, err
                assert "flashinfer-python" not in installed(python)
                stopped += 1
    assert stopped, "no run filled its cache folder: the case was not tried"


def test_a_full_output_folder_is_exit_4_never_a_traceback(served, tmp_path: Path) -> None:
    """``snapshot --output`` and ``wheelhouse -o`` into a folder with no room left: exit 4 naming
    the fault, with a hint; never a traceback."""
    srv, python, lock, _ = served
    out = tmp_path / "full"
    with full(out):
        for door, argv in {
            "snapshot": ["snapshot", "--python", python, *index_flags(srv.url), "--cache-dir", str(tmp_path / "good-cache"), "--output", str(out / "snap")],
            "wheelhouse": ["wheelhouse", str(lock), "-o", str(out / "house"), "--cache-dir", str(tmp_path / "good-cache")],
        }.items():
            rc, _, err = cli(*argv, cwd=tmp_path)
            assert rc == 4, (door, err)
            assert "No space left on device" in err and "hint:" in err and "Traceback" not in err, (door, err)


def test_sigterm_during_a_lock_write_removes_its_temporary_file(served, tmp_path: Path) -> None:
    """``lock -o PATH`` stopped by SIGTERM once its temporary file is beside PATH (the rename
    waits: PATH is a FIFO whose old contents the commit reads first): exit 143, no
    ``.pylock.*.tmp`` left beside it at once, nothing renamed over PATH."""
    srv, python, _, _ = served
    out = tmp_path / "out"
    out.mkdir()
    target = out / "pylock.node.toml"
    os.mkfifo(target)
    proc = subprocess.Popen(
        [str(TOOL), "lock", "--python", python, *index_flags(srv.url), "--cache-dir", str(tmp_path / "good-cache"), "-o", str(target)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not list(out.glob(".pylock.node.toml.*.tmp")):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the lock was never staged"
            time.sleep(0.02)
        time.sleep(0.2)  # the writer is past staging, blocked reading the old file (the FIFO)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, err
    assert "Traceback" not in err and "terminated" in err, err
    assert sorted(p.name for p in out.iterdir()) == ["pylock.node.toml"] and stat.S_ISFIFO(target.lstat().st_mode)
