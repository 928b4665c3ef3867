"""Ground floor: the program's private bytecode folder (``~/.cache/resolve-gpu-stack/bytecode``).

``__main__.keep_bytecode`` points ``sys.pycache_prefix`` there before anything else of the package
is imported, so this module is plain ``os`` calls and nothing of the package; ``doctor`` keeps the
bytecode of the environment it checks there too (``cli/cmd_doctor.py``). A folder is used only when
it and every folder on the way is a real folder of this user's that no one else may write.
"""

from __future__ import annotations

import os
import stat
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
