"""Running a build: a subprocess logged to a file under its deadline, stopped (SIGTERM, then
SIGKILL) with its process group when the tool is stopped, and a janitor process that stops the
builds and removes their temporary folder when the tool dies."""

from __future__ import annotations

import contextlib
import ctypes
import os
import shlex
import signal
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Protocol

from ..errors import BuildError
from ..net import process


class BuildProgress(Protocol):
    """progress(line): one line of build progress (the CLI shows it in place on a terminal);
    ``final``: a build's closing line (done or failed, after its elapsed time)."""

    def __call__(self, line: str, *, final: bool = False) -> None: ...


def open_log(log: Path, mode: str) -> IO[bytes]:
    """A build log opened for writing (``"wb"``/``"ab"``), readable by its owner only (0600: a build's
    output may hold what its environment held)."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if mode.startswith("a") else os.O_TRUNC)
    fd = os.open(log, flags, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, mode)


# The janitor: a process of its own session that outlives the tool. It reads the process groups of
# the builds from a pipe; when the pipe closes without "done" (the tool died, even by SIGKILL), it
# stops those groups (SIGTERM, SIGKILL after 5 s) and removes the build's temporary folder.
_JANITOR = r"""
import os, shutil, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
tmp, groups, done, buf = sys.argv[1], set(), False, b""
while True:
    chunk = os.read(0, 4096)
    if not chunk:
        break
    buf += chunk
    *lines, buf = buf.split(b"\n")
    for line in lines:
        if line == b"done":
            done = True
        elif line.startswith(b"-"):
            groups.discard(int(line[1:]))
        elif line:
            groups.add(int(line))
if not done:
    def alive(g):
        try:
            os.killpg(g, 0)
            return True
        except OSError:
            return False
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for g in groups:
            try:
                os.killpg(g, sig)
            except OSError:
                pass
        end = time.monotonic() + 5
        while any(alive(g) for g in groups) and time.monotonic() < end:
            time.sleep(0.05)
    shutil.rmtree(tmp, ignore_errors=True)
"""


class Janitor:
    """Keeps a build's processes and temporary folder from outliving the tool (see ``_JANITOR``)."""

    def __init__(self, tmp: Path) -> None:
        read, self._write = os.pipe()
        try:
            self._proc = process.start(
                [sys.executable, "-I", "-c", _JANITOR, str(tmp)],
                stdin=read,
                stdout=process.DEVNULL,
                stderr=process.DEVNULL,
                new_session=True,
            )
        finally:
            os.close(read)

    def watch(self, group: int) -> None:
        os.write(self._write, f"{group}\n".encode())

    def forget(self, group: int) -> None:
        os.write(self._write, f"-{group}\n".encode())

    def __enter__(self) -> Janitor:
        return self

    def __exit__(self, *exc: object) -> None:
        """Our own exit (done or failed: the builds are stopped and the folder goes with the ``with``)."""
        try:
            os.write(self._write, b"done\n")
        finally:
            os.close(self._write)
        self._proc.wait(timeout=10)


class BuildStopped(BaseException):
    """SIGTERM reached the tool during a build (``timeout``, a CI cancel, systemd)."""


@contextlib.contextmanager
def sigterm_stops_builds() -> Iterator[None]:
    """While builds run, SIGTERM unwinds the tool as Ctrl-C does: each build's process group is
    stopped and its temporary folder removed; then the tool exits (``BuildError``)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise BuildStopped()

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    except BuildStopped:
        raise BuildError("stopped by SIGTERM: the build was stopped and nothing was stored", hint="run again to build") from None
    finally:
        signal.signal(signal.SIGTERM, previous)


def _die_with_parent() -> None:
    """In the build's first process (before exec): SIGKILL when the tool dies (Linux)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def run_logged(
    cmd: Sequence[str],
    *,
    env: Mapping[str, str],
    log: Path,
    label: str,
    progress: BuildProgress | None,
    append: bool = False,
    every: float = 1.0,
    deadline: float | None = None,
    janitor: Janitor | None = None,
) -> None:
    """Run ``cmd`` with its output (stdout and stderr) in ``log`` (0600), stdin closed, in a
    process group of its own that dies with the tool (``janitor``; a parent-death signal);
    ``progress`` gets ``<label>: <elapsed> | <last line>`` about every ``every`` seconds, and a
    closing line (``final``). Ctrl-C, SIGTERM (``sigterm_stops_builds``), ``deadline`` seconds
    passed, or any error stop the whole process group; a non-zero exit is a ``BuildError`` naming
    the log."""
    start = time.monotonic()
    last = [""]
    with open_log(log, "ab" if append else "wb") as fh:
        fh.write(f"$ {shlex.join(cmd)}\n".encode())
        fh.flush()
        proc = process.start(
            list(cmd),
            stdin=process.DEVNULL,
            stdout=process.PIPE,
            stderr=process.STDOUT,
            env=dict(env),
            new_session=True,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,  # noqa: PLW1509 -- async-signal-safe: one prctl
        )
        if janitor is not None:
            janitor.watch(proc.pid)

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                fh.write(line)
                text = line.decode("utf-8", "replace").strip()
                if text:
                    last[0] = text

        reader = threading.Thread(target=pump, name="resolve-gpu-stack-build-log", daemon=True)
        reader.start()
        try:
            while True:
                try:
                    code = proc.wait(timeout=every)
                    break
                except process.TimeoutExpired:
                    if deadline is not None and time.monotonic() - start > deadline:
                        stop_process(proc)
                        raise BuildError(
                            f"{label} ran past its deadline of {_elapsed(deadline)} and was stopped; nothing was stored; the build log: {log}",
                            hint="give it longer with --build-timeout SECONDS (or fewer GPU archs, more memory for more MAX_JOBS)",
                        ) from None
                    if progress is not None:
                        progress(f"{label}: {_elapsed(time.monotonic() - start)} | {last[0][-120:]}")
        except BaseException:
            stop_process(proc)
            raise
        finally:
            if janitor is not None and proc.returncode is not None:
                janitor.forget(proc.pid)
        reader.join(timeout=5)
    if progress is not None:
        progress(f"{label}: {'done' if code == 0 else 'failed'} after {_elapsed(time.monotonic() - start)}", final=True)
    if code != 0:
        tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-15:])
        raise BuildError(f"{label} failed (exit {code}); the build log: {log}", hint=f"its last lines:\n{tail}")


def stop_process(proc: process.Popen[bytes]) -> None:
    """The process and everything it started: SIGTERM to its group, SIGKILL after 5 s."""
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=wait)
            return
        except process.TimeoutExpired:
            continue


def _elapsed(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{seconds:.1f}s"
