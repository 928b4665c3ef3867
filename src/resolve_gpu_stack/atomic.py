"""Ground floor: a file written whole or not at all. One way for every file this package writes in
one piece (cache entries, snapshot records, the wheel cache's records, lock files, a wheelhouse's
pages): the bytes go to a temporary file beside the target, which is renamed over it, so a reader
(another process sharing a cache, a tool reading a lock) sees the old file or the new one, never a
part, and a failed write leaves the old file as it was and no temporary file behind.

The temporary file is ``.<name>.<8 digits>.tmp`` in the target's folder, made with ``O_EXCL``
(never one another process has, never through a link planted at its name): what ``stale_temp``
recognises, so a sweep (``sweep_stale``) can remove what a killed writer left without touching
anything else. ``exclusive_temp`` hands out such a file for a writer that fills it itself (a wheel
copied and hashed into the wheel cache, a hard link into a wheelhouse).

Plain ``os`` calls, not ``tempfile`` and a file object: a cold resolve writes a hundred cache
entries from the crawl's threads, and each system call saved is one hand-over of the interpreter
fewer. An I/O module on the ground floor: the pure floors never import it (``tests/test_layers.py``).
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import time
from collections.abc import Callable
from pathlib import Path

_TEMP = re.compile(r"^\.(?P<name>.+)\.[0-9]{8}\.tmp$")


def atomic_write(path: Path, data: bytes | str, *, sync: bool = False, mode: int | None = None, make_parents: bool = False) -> Path:
    """Write ``data`` (str: UTF-8) to ``path`` through a temporary file beside it and a rename.

    ``sync``: the file and then its folder are synced before and after the rename (a lock file,
    which nothing checks again when it is read); without it (a cache entry, whose digest is checked
    on every read) a crash can only lose the write. ``mode``: the file's permissions (default: the
    replaced file's, else 0o644). ``make_parents``: create the folder (0o700) when
    the first try finds it missing. Raises ``OSError``; nothing is left behind then.
    """
    tmp = write_temp(path, data, sync=sync, mode=mode, make_parents=make_parents)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if sync:
        sync_folder(path.parent)
    return path


def write_temp(path: Path, data: bytes | str, *, sync: bool = False, mode: int | None = None, make_parents: bool = False) -> str:
    """The temporary file beside ``path`` holding ``data`` (synced with ``sync``), for the caller to
    rename over ``path`` (``atomic_write``; several at once: ``lock.files.write_texts``)."""
    body = data.encode("utf-8") if isinstance(data, str) else data
    if mode is None:
        mode = _mode_of(path)
    try:
        fd, tmp = exclusive_temp(path, mode)
    except FileNotFoundError:
        if not make_parents:
            raise
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = exclusive_temp(path, mode)
    try:
        try:
            view = memoryview(body)
            while view:
                view = view[os.write(fd, view) :]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp


def stale_temp(name: str, of: str | None = None) -> bool:
    """Whether ``name`` is a temporary file ``atomic_write`` makes (of the file ``of``, when given)."""
    m = _TEMP.match(name)
    return m is not None and (of is None or m["name"] == of)


def sync_folder(folder: Path) -> None:
    """Best effort: the folder's entries (a rename) on disk."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _mode_of(path: Path) -> int:
    try:
        return os.stat(path).st_mode & 0o777
    except OSError:
        return 0o644


def exclusive_temp(path: Path, mode: int = 0o600) -> tuple[int, str]:
    """A new temporary file beside ``path`` (whose folder must exist), open for writing, and its
    name: ``.<name>.<8 digits>.tmp``, created with ``O_EXCL`` (never a file or link already there)
    and given ``mode``. The caller writes and closes it, then renames it over ``path`` or removes it."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    while True:
        tmp = f"{path.parent}/.{path.name}.{random.randrange(10**8):08d}.tmp"
        try:
            fd = os.open(tmp, flags, 0o600)
        except FileExistsError:
            continue
        if mode != 0o600:
            os.fchmod(fd, mode)
        return fd, tmp


def sweep_stale(
    folder: Path,
    match: Callable[[str], bool],
    older_than: float,
    now: float | None = None,
    *,
    tree: bool = False,
    on_error: Callable[[Path, OSError], object] | None = None,
) -> list[tuple[Path, int]]:
    """Remove the regular files in ``folder`` whose name ``match``es and whose mtime is more than
    ``older_than`` seconds before ``now``: the temporary files killed writers left (a writer still
    running renames its file within seconds, so its file is never one). ``tree``: in every folder
    below too, and then no folder is entered through a symbolic link, ``folder`` included (a lone
    ``folder`` may be one: the folder a lock file is in). Links among the entries are neither
    followed nor removed. Never raises: a file that cannot be removed is left (``on_error`` is told,
    unless another sweep removed it first). Returns what was removed, with each file's size."""
    now = time.time() if now is None else now
    removed: list[tuple[Path, int]] = []
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | (os.O_NOFOLLOW if tree else 0))
    except OSError:
        return removed
    try:
        _sweep_in(fd, Path(folder), match, older_than, now, tree=tree, on_error=on_error, removed=removed)
    except OSError:
        pass
    finally:
        os.close(fd)
    return removed


def _sweep_in(
    fd: int,
    folder: Path,
    match: Callable[[str], bool],
    older_than: float,
    now: float,
    *,
    tree: bool,
    on_error: Callable[[Path, OSError], object] | None,
    removed: list[tuple[Path, int]],
) -> None:
    """``sweep_stale`` of the folder open as ``fd``: what it removes is added to ``removed``."""
    for entry in list(os.scandir(fd)):
        path = folder / entry.name
        kind = _kind(entry, tree=tree)
        if kind == "folder":
            removed += sweep_stale(path, match, older_than, now, tree=True, on_error=on_error)
            continue
        if kind != "file" or not match(entry.name):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if now - st.st_mtime > older_than and _unlinked(fd, entry.name, path, on_error):
            removed.append((path, st.st_size))


def _kind(entry: os.DirEntry[str], *, tree: bool) -> str | None:
    """``folder`` (one to sweep, with ``tree``), ``file`` (a regular file, not a link), ``other``,
    or None when the entry cannot be read."""
    try:
        if tree and entry.is_dir(follow_symlinks=False):
            return "folder"
        return "file" if entry.is_file(follow_symlinks=False) else "other"
    except OSError:
        return None


def _unlinked(fd: int, name: str, path: Path, on_error: Callable[[Path, OSError], object] | None) -> bool:
    """Whether the file ``name`` of the folder open as ``fd`` was removed here (not by another
    sweep first; one that cannot be removed is told to ``on_error``)."""
    try:
        os.unlink(name, dir_fd=fd)
    except FileNotFoundError:
        return False
    except OSError as exc:
        if on_error is not None:
            on_error(path, exc)
        return False
    return True


__all__ = ["atomic_write", "exclusive_temp", "stale_temp", "sweep_stale", "sync_folder", "write_temp"]
