"""Ctrl-C during a stalled read (issue 13 item 17): the CLI runs in a pseudo-terminal against a
loopback index that accepts connections and never answers; a ^C typed on the terminal must end it
within a second, with exit status 130 and no lock or temporary file left behind."""

from __future__ import annotations

import os
import pty
import select
import signal
import socket
import sys
import threading
import time
from pathlib import Path

import pytest
from support.terminal import foreground

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="a POSIX pseudo-terminal")

TOOL = Path(sys.executable).with_name("resolve-gpu-stack")


class Silent:
    """A listening socket that accepts every connection and never says a word."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.accepted = threading.Event()
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)
            self.accepted.set()

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


def _read_all(fd: int, until: float) -> bytes:
    out = b""
    while time.monotonic() < until:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    return out


def test_ctrl_c_during_a_stalled_read_acts_within_a_second(tmp_path: Path) -> None:
    server = Silent()
    work = tmp_path / "work"
    work.mkdir()
    argv = [
        str(TOOL),
        "lock",
        "--python",
        "3.12",
        "--platform",
        "x86_64-manylinux_2_28",
        "--installed",
        "torch==2.12.0.dev20260307+cu130",
        "--index",
        f"pytorch={server.url}whl/",
        "--index",
        f"flashinfer={server.url}fi/",
        "--index",
        f"pypi={server.url}simple/",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--timeout",
        "20",
        "-o",
        str(work / "pylock.gpu.toml"),
        "-o",
        str(work / "gpu.txt"),
    ]
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_proxy", "_PROXY"))}
    pid, fd = pty.fork()
    if pid == 0:  # the child: the CLI, with the pty as its controlling terminal
        os.chdir(work)
        foreground()  # a shell's background job inherits SIGINT ignored
        os.execve(argv[0], argv, env)
    try:
        assert server.accepted.wait(30), "the CLI never connected"
        time.sleep(0.5)  # well inside the stalled read
        os.write(fd, b"\x03")  # ^C on the terminal: SIGINT to the foreground process group
        sent = time.monotonic()
        output = b""
        status = None
        while time.monotonic() - sent < 5:
            output += _read_all(fd, time.monotonic() + 0.05)
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
        elapsed = time.monotonic() - sent
        if status is None or not done:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail(f"still running {elapsed:.1f} s after ^C; output: {output!r}")
        assert elapsed < 1.0, f"took {elapsed:.2f} s to act on ^C"
        assert os.waitstatus_to_exitcode(status) == 130, output
        assert b"interrupted" in output
        assert sorted(p.name for p in work.iterdir()) == []  # no lock, no temporary or partial file
    finally:
        server.close()
        os.close(fd)


def test_ctrl_c_during_stalled_wheel_downloads_acts_within_a_second(tmp_path: Path) -> None:
    """The same for `install --lock`: several wheels downloading at once from a server that never
    answers (the download pool must not wait for its stalled workers)."""
    from packaging.version import Version

    from resolve_gpu_stack.lock.files import write_lock
    from resolve_gpu_stack.model import Action, Coupling, LockedPackage, LockPlan, TargetSummary

    server = Silent()
    work = tmp_path / "work"
    work.mkdir()
    wheels = tuple(
        LockedPackage(
            name=name,
            version=Version("1.0"),
            action=Action.INSTALL,
            index="pypi",
            coupling=Coupling.AGNOSTIC,
            url=f"{server.url}files/{name}-1.0-py3-none-any.whl",
            filename=f"{name}-1.0-py3-none-any.whl",
            sha256="0" * 64,
            size=100_000,
        )
        for name in ("alpha", "beta", "gamma")
    )
    plan = LockPlan(
        target=TargetSummary(python=f"{sys.version_info[0]}.{sys.version_info[1]}", platform="x86_64-manylinux_2_28", cuda=None),
        packages=wheels,
        indexes={"pypi": f"{server.url}simple/"},
    )
    lock = write_lock(plan, tmp_path / "pylock.x.toml", command="resolve-gpu-stack lock -o pylock.x.toml")
    argv = [str(TOOL), "install", "--lock", str(lock), "--force-target", "--python", sys.executable, "--cache-dir", str(tmp_path / "cache"), "--timeout", "20"]
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_proxy", "_PROXY"))}
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(work)
        foreground()
        os.execve(argv[0], argv, env)
    try:
        assert server.accepted.wait(30), "the CLI never connected"
        time.sleep(0.5)
        os.write(fd, b"\x03")
        sent = time.monotonic()
        output = b""
        status = None
        done = 0
        while time.monotonic() - sent < 5:
            output += _read_all(fd, time.monotonic() + 0.05)
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
        elapsed = time.monotonic() - sent
        if not done:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail(f"still running {elapsed:.1f} s after ^C; output: {output!r}")
        assert elapsed < 1.0, f"took {elapsed:.2f} s to act on ^C"
        assert os.waitstatus_to_exitcode(status) == 130, output
        assert b"interrupted" in output
        assert list(work.iterdir()) == []
    finally:
        server.close()
        os.close(fd)
