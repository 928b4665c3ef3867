"""A lock made from a recorded snapshot installs with real uv (issue 13, item 2).

A snapshot keeps PyPI file URLs relative; replaying it, they are joined to the PyPI of the user's
configuration (here `PIP_INDEX_URL`, a loopback server standing in for PyPI), so the lock's wheel
URLs are URLs that install, not the snapshot's placeholder host.
"""

from __future__ import annotations

import platform
import sys
from pathlib import Path

import pytest
from support.doors import run_cli
from support.install_world import NIGHTLY, UV, build_world, installed, make_venv, needs_linux
from support.server import IndexServer

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

pytestmark = [pytest.mark.slow, needs_linux]

TARGET = [
    "--python",
    f"{sys.version_info.major}.{sys.version_info.minor}",
    "--platform",
    f"{platform.machine()}-manylinux_2_28",
    "--installed",
    f"torch=={NIGHTLY}",
]


def test_a_lock_from_a_snapshot_installs_from_the_users_pypi(tmp_path: Path, capsys, monkeypatch, uv_env) -> None:
    import subprocess

    world = build_world(tmp_path / "www")
    snapshot = tmp_path / "snapshot"
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        torch_indexes = ["--index", f"pytorch={srv.url}whl/", "--index", f"flashinfer={srv.url}fi/"]
        rc, _, err = run_cli(
            capsys,
            "snapshot",
            *TARGET,
            *torch_indexes,
            "--index",
            f"pypi={srv.url}simple/",
            "--cache-dir",
            str(tmp_path / "c1"),
            "--output",
            str(snapshot),
            "--format",
            "json",
        )
        assert rc == 0, err
        # Replay: the PyPI base comes from the user's configuration, not from the recording.
        monkeypatch.setenv("PIP_INDEX_URL", f"{srv.url}simple/")
        lock = tmp_path / "pylock.x.toml"
        rc, _, err = run_cli(capsys, "lock", *TARGET, *torch_indexes, "--snapshot", str(snapshot), "--cache-dir", str(tmp_path / "c2"), "-o", str(lock))
        assert rc == 0, err
        doc = tomllib.loads(lock.read_text())
        pypi = [p for p in doc["packages"] if p.get("index") == f"{srv.url}simple/"]
        assert pypi and all(p["wheels"][0]["url"].startswith(srv.url) for p in pypi)
        assert "snapshot.invalid" not in lock.read_text()
        python = make_venv(tmp_path / "venv", uv_env)
        proc = subprocess.run([UV, "pip", "install", "--python", python, "-r", str(lock)], env=uv_env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
    have = installed(python)
    for p in pypi:
        assert have.get(p["name"]) == p["version"], (p["name"], have.get(p["name"]))
    assert "flashinfer-python" in have and "torch" not in have  # the kept torch is not installed by the lock
