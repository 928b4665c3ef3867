"""The program: ``python -m resolve_gpu_stack`` and the ``resolve-gpu-stack`` console script (``run``).

Before anything else is imported, ``keep_bytecode`` makes sure the program is not compiled from
source on every run. An install without bytecode (``uv pip install`` / ``uv tool install`` without
``--compile-bytecode``) where ``PYTHONDONTWRITEBYTECODE=1`` is set (as many container images set
it) would otherwise compile this package and its dependencies at every start: ~1 MB of source,
~0.2 s. There the compiled modules are kept under ``$XDG_CACHE_HOME/resolve-gpu-stack/bytecode``
(``~/.cache/...``), never beside the sources, exactly as ``PYTHONPYCACHEPREFIX`` would keep them;
the first run writes them. A ``PYTHONPYCACHEPREFIX`` of the user's own, an install that compiled
its bytecode, or writing allowed: nothing changes.

The folder is the user's alone, because Python runs what it finds there (a ``.pyc``'s source hash
says nothing about its code, and the folder also holds the standard library's bytecode, ``ssl``
included): it is used only when it and every folder above it up to the cache root
(``$XDG_CACHE_HOME``) are owned by the user and writable by no one else. The folders the program
makes are made 0700 whatever the umask. Anything else (another owner, a group- or world-writable
folder, a file in the way): the program runs from source, with no bytecode kept; ``-v`` says why.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Mapping, Sequence

BYTECODE_FOLDER = "bytecode"


def private_folder(base: str, parts: Sequence[str]) -> str | None:
    """Make ``base/parts...`` (each folder made 0700) and check that it and every folder on the
    way, ``base`` included, is a real folder owned by this user and writable by no one else; why
    not, or None when it is the user's alone."""
    path = base
    for part in ("", *parts):
        path = os.path.join(path, part) if part else path
        why = _made_private(path, follow=path == base)
        if why is not None:
            return why
    return None


def _made_private(path: str, *, follow: bool) -> str | None:
    """Make the folder ``path`` (0700) unless it is there; why it is not the user's alone, or
    None. ``follow``: it may be a link (the cache root; nothing below it)."""
    try:
        os.mkdir(path, 0o700)
        os.chmod(path, 0o700)  # mkdir's mode is cut by the umask; never widened by it either
    except FileExistsError:
        pass
    except OSError as exc:
        return f"cannot make {path} ({exc.strerror or exc})"
    try:
        info = os.stat(path) if follow else os.lstat(path)
    except OSError as exc:
        return f"cannot read {path} ({exc.strerror or exc})"
    uid = os.geteuid()
    if not stat.S_ISDIR(info.st_mode):
        return f"{path} is not a folder"
    if info.st_uid != uid:
        return f"{path} belongs to uid {info.st_uid}, not to this user (uid {uid})"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path} is writable by others (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def bytecode_folder(environ: Mapping[str, str]) -> tuple[str, str | None]:
    """The program's bytecode folder (made, 0700) and why it may not be used (None: it is the
    user's alone). ``doctor`` keeps the target's bytecode there too, where the target writes none."""
    # the default cache folder, as net.cache.default_cache_dir finds it (that module is not loaded yet)
    xdg = environ.get("XDG_CACHE_HOME", "")
    base = xdg if os.path.isabs(xdg) else os.path.join(environ.get("HOME") or os.path.expanduser("~"), ".cache")
    return os.path.join(base, "resolve-gpu-stack", BYTECODE_FOLDER), private_folder(base, ("resolve-gpu-stack", BYTECODE_FOLDER))


def keep_bytecode(environ: Mapping[str, str], argv: Sequence[str] = ()) -> str | None:
    """Point ``sys.pycache_prefix`` at the program's bytecode folder when no bytecode would be
    read or written otherwise and the folder is the user's alone (see the module docstring); the
    folder, or None when left alone. With ``-v``/``--verbose`` in ``argv``, a folder not used says why
    on stderr."""
    tag = sys.implementation.cache_tag
    if not sys.dont_write_bytecode or sys.pycache_prefix is not None or tag is None:
        return None
    here = os.path.dirname(os.path.abspath(__file__))
    if os.path.exists(os.path.join(here, "cli", "__pycache__", f"app.{tag}.pyc")):
        return None  # the installer compiled the package
    folder, why = bytecode_folder(environ)
    if why is not None:
        if "-v" in argv or "--verbose" in argv:
            print(f"resolve-gpu-stack: not keeping bytecode in {folder}: {why}", file=sys.stderr)
        return None
    sys.pycache_prefix = folder
    sys.dont_write_bytecode = False  # into that folder only: a folder the user cannot write is skipped quietly
    return folder


def run() -> int:
    """The console script."""
    keep_bytecode(os.environ, sys.argv[1:])
    from .cli import run as cli_run

    return cli_run()


if __name__ == "__main__":
    raise SystemExit(run())
