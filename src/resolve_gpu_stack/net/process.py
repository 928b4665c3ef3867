"""Every process the program starts (I/O edge: the one module that imports ``subprocess``;
``tests/net/test_trust_process.py`` fails any other ``subprocess``, ``os.system``, ``os.exec*``,
``os.spawn*``, ``os.popen``, ``os.posix_spawn*`` or ``asyncio.create_subprocess*`` in ``src/``).

The rules it keeps:

- A value from outside (a lock, a URL, a config file, a source tree, the command line) reaches a
  program as data, never as an option: after ``--``, after ``-c CODE`` (Python hands the rest to
  the script as ``sys.argv``), as the value of the option that takes it (``--python PATH``), or
  an absolute path of our own making (a wheel in the cache, a temporary folder).
- git (``git``) gets a repository URL, a revision and a subdirectory only once they have passed
  ``model.source.git_source_problem`` (schemes ``https``, ``http``, ``ssh``, ``git``, ``file``;
  no ``ext::``/``fd::``/``helper::address`` forms, no scp-like ``host:path``, no leading ``-``;
  revisions and subdirectories by their grammar), and runs with a fixed configuration and a clean
  environment (``git_environment``, ``GIT_CONFIG``): no system or global config file, no hooks,
  no fsmonitor, no attributes file, only the allowed protocols, never a prompt. Nothing a cloned
  tree carries can name a program for git to run: filters, textconv and merge drivers are config,
  and the only config is ours (a tree's ``.gitattributes`` can name a filter, never define one).

What git keeps of the user's environment (``GIT_KEPT``): the search path and locale basics, the
home folder (ssh reads its keys and ``~/.ssh/config`` from it; curl its ``.netrc``), the proxy
variables curl reads, the ssh agent's socket, the user's own ssh command (``GIT_SSH_COMMAND``,
``GIT_SSH``, ``GIT_SSH_VARIANT``: a deploy key in CI) and trust store (``GIT_SSL_CAINFO``,
``GIT_SSL_CAPATH``, ``SSL_CERT_FILE``, ``SSL_CERT_DIR``). Those are the user's own settings, not a
lock's. Every other ``GIT_*`` is dropped: ``GIT_DIR``, ``GIT_INDEX_FILE`` and ``GIT_WORK_TREE``
(set while pre-commit runs a hook) would point git at the user's repository, and
``GIT_CONFIG_PARAMETERS``/``GIT_CONFIG_COUNT`` or ``GIT_ALLOW_PROTOCOL`` would undo the rules
above. A git credential helper in the user's global config is not read either: a private
repository is reached with ssh (its agent or ``GIT_SSH_COMMAND``) or a ``.netrc``.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from subprocess import DEVNULL, PIPE, STDOUT, CompletedProcess, Popen, SubprocessError, TimeoutExpired
from typing import IO, Literal, overload

from ..errors import BuildError
from ..model.source import git_source_problem

GIT_TIMEOUT = 600.0
GIT_PROTOCOLS = ("https", "http", "ssh", "git", "file")
# the one configuration git runs with (``-c`` pairs, before any subcommand; they reach the
# processes git starts, ``upload-pack`` of a file:// repository included, and win over that
# repository's own config)
GIT_CONFIG: tuple[tuple[str, str], ...] = (
    ("protocol.allow", "never"),
    *((f"protocol.{p}.allow", "always") for p in GIT_PROTOCOLS),
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.attributesFile", "/dev/null"),
    ("core.askPass", "/bin/false"),
    ("credential.helper", ""),
    ("init.templateDir", ""),
    ("submodule.recurse", "false"),
    ("advice.detachedHead", "false"),
)
GIT_KEPT = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "TMPDIR",
        "SSH_AUTH_SOCK",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_SSH_VARIANT",
        "GIT_SSL_CAINFO",
        "GIT_SSL_CAPATH",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "http_proxy",
        "https_proxy",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "all_proxy",
        "ALL_PROXY",
        "no_proxy",
        "NO_PROXY",
    }
)


def git_environment(env: Mapping[str, str] | None) -> dict[str, str]:
    """git's environment from ``env`` (None: this process's): only ``GIT_KEPT``, then no system
    or global config file, only the allowed protocols, never a prompt (ssh in batch mode unless
    the user names their own ssh command), messages in English."""
    base = os.environ if env is None else env
    kept = {k: v for k, v in base.items() if k in GIT_KEPT}
    if "GIT_SSH_COMMAND" not in kept and "GIT_SSH" not in kept:
        kept["GIT_SSH_COMMAND"] = "ssh -o BatchMode=yes"  # ssh asks on the terminal, not stdin: never a host-key or password prompt
    return {
        **kept,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_ALLOW_PROTOCOL": ":".join(GIT_PROTOCOLS),
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "/bin/false",
        "SSH_ASKPASS": "/bin/false",
        "GIT_PROTOCOL_FROM_USER": "0",
        "LC_ALL": "C",
    }


def git_argv(args: Sequence[str]) -> list[str]:
    """``git -c KEY=VALUE ... ARGS``: git with the one configuration (``GIT_CONFIG``)."""
    return ["git", *(w for key, value in GIT_CONFIG for w in ("-c", f"{key}={value}")), *args]


def checked_git_source(url: str, rev: str | None = None, subdirectory: str | None = None) -> None:
    """Refuse (``BuildError``, naming the value) a repository URL, revision or subdirectory that
    ``model.source.git_source_problem`` refuses: checked again here, whatever checked it before."""
    problem = git_source_problem(url, rev, subdirectory)
    if problem is not None:
        raise BuildError(problem, hint="a git source is git+https://, git+ssh://, git+git:// or git+file:// URL, a tag, branch or commit, a relative folder")


@overload
def git(args: Sequence[str], env: Mapping[str, str] | None, what: str, cwd: Path | None = None, *, text: Literal[True] = True) -> str: ...
@overload
def git(args: Sequence[str], env: Mapping[str, str] | None, what: str, cwd: Path | None = None, *, text: Literal[False]) -> bytes: ...
def git(args: Sequence[str], env: Mapping[str, str] | None, what: str, cwd: Path | None = None, *, text: bool = True) -> str | bytes:
    """git's output, with the rules above; a failure is a ``BuildError`` naming ``what``. The
    caller puts every value from outside after ``--`` (or ``--end-of-options``), checked by
    ``checked_git_source`` first."""
    try:
        proc = subprocess.run(git_argv(args), cwd=cwd, env=git_environment(env), capture_output=True, timeout=GIT_TIMEOUT, stdin=DEVNULL, check=False)
    except FileNotFoundError:
        raise BuildError(f"{what}: git is not installed", hint="install git, or build from a local tree: --build 'NAME @ file:///path'") from None
    except TimeoutExpired:
        raise BuildError(f"{what}: git did not finish in {GIT_TIMEOUT:.0f} s") from None
    if proc.returncode != 0:
        said = proc.stderr.decode("utf-8", "replace").strip()[-400:]
        raise BuildError(f"{what}: git {args[0]} failed: {said}")
    return proc.stdout.decode("utf-8", "replace") if text else proc.stdout


@overload
def run(
    argv: Sequence[str],
    *,
    text: Literal[True],
    input: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    timeout: float | None = None,
    check: bool = False,
) -> CompletedProcess[str]: ...
@overload
def run(
    argv: Sequence[str],
    *,
    text: Literal[False] = False,
    input: bytes | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    timeout: float | None = None,
    check: bool = False,
) -> CompletedProcess[bytes]: ...
def run(
    argv: Sequence[str],
    *,
    text: bool = False,
    input: str | bytes | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    timeout: float | None = None,
    check: bool = False,
) -> CompletedProcess[str] | CompletedProcess[bytes]:
    """Run ``argv`` to its end, its output captured, its stdin ``input`` (else nothing)."""
    return subprocess.run(
        list(argv),
        input=input,
        stdin=None if input is not None else DEVNULL,
        capture_output=True,
        text=text,
        env=None if env is None else dict(env),
        cwd=cwd,
        timeout=timeout,
        check=check,
    )


_Stream = int | IO[bytes] | IO[str] | None


@overload
def start(
    argv: Sequence[str],
    *,
    text: Literal[True],
    stdin: _Stream = DEVNULL,
    stdout: _Stream = None,
    stderr: _Stream = None,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    pass_fds: Sequence[int] = (),
    new_session: bool = False,
    preexec_fn: Callable[[], object] | None = None,
) -> Popen[str]: ...
@overload
def start(
    argv: Sequence[str],
    *,
    text: Literal[False] = False,
    stdin: _Stream = DEVNULL,
    stdout: _Stream = None,
    stderr: _Stream = None,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    pass_fds: Sequence[int] = (),
    new_session: bool = False,
    preexec_fn: Callable[[], object] | None = None,
) -> Popen[bytes]: ...
def start(
    argv: Sequence[str],
    *,
    text: bool = False,
    stdin: _Stream = DEVNULL,
    stdout: _Stream = None,
    stderr: _Stream = None,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    pass_fds: Sequence[int] = (),
    new_session: bool = False,
    preexec_fn: Callable[[], object] | None = None,
) -> Popen[str] | Popen[bytes]:
    """Start ``argv`` (its file descriptors closed but ``pass_fds``; ``new_session``: a process
    group of its own)."""
    return subprocess.Popen(
        list(argv),
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        text=text,
        env=None if env is None else dict(env),
        cwd=cwd,
        pass_fds=tuple(pass_fds),
        close_fds=True,
        start_new_session=new_session,
        preexec_fn=preexec_fn,  # noqa: PLW1509 -- the callers' is async-signal-safe (one prctl)
    )


__all__ = [
    "DEVNULL",
    "GIT_CONFIG",
    "GIT_KEPT",
    "GIT_PROTOCOLS",
    "GIT_TIMEOUT",
    "PIPE",
    "STDOUT",
    "CompletedProcess",
    "Popen",
    "SubprocessError",
    "TimeoutExpired",
    "checked_git_source",
    "git",
    "git_argv",
    "git_environment",
    "run",
    "start",
]
