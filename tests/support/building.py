"""What the ``--build`` tests share: this machine as a declared platform, the console script, the
common flags of a build world, and the check that a build left no process behind."""

from __future__ import annotations

import platform
import sys
import time
from pathlib import Path

import pytest

from support.build_world import have_cxx
from support.doors import index_flags
from support.install_world import _glibc_ok
from support.server import IndexServer

UV = str(Path(sys.executable).with_name("uv"))


HERE = f"{platform.machine()}-manylinux_{'_'.join(platform.libc_ver()[1].split('.')[:2])}"  # this machine, as a declared platform


TOOL = Path(sys.executable).with_name("resolve-gpu-stack")


def common(srv: IndexServer, cache: Path) -> list[str]:
    return [*index_flags(srv.url), "--flashinfer", "none", "--cache-dir", str(cache)]


def _build_processes_gone(scratch: Path, name: str, within: float = 10.0) -> list[str]:
    """The processes of a build still running (their command lines) once ``within`` seconds have
    passed: a process being reaped can stay in /proc a moment under load, so this waits for them
    to go (and returns at once when none is there)."""
    end = time.monotonic() + within
    while True:
        left = [c for p in Path("/proc").glob("[0-9]*") if (c := _cmdline(p)) and (str(scratch) in c or name in c)]
        if not left or time.monotonic() > end:
            return left
        time.sleep(0.1)


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


UV = str(Path(sys.executable).with_name("uv"))


needs_builds = pytest.mark.skipif(not (have_cxx() and _glibc_ok() and Path(UV).exists()), reason="needs Linux, g++ and uv")
