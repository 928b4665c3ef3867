"""Lock files on disk: which format a file name asks for, reading one, and writing one atomically.

``write_lock`` renders with ``pylock`` or ``constraints`` by the file name (``lock_format``) and
replaces the file atomically; ``read_lock`` reads either format back.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from ..atomic import sweep_stale, sync_folder, write_temp
from ..data.toml import read_text, refuse_long_numbers
from ..errors import LockFileError, UsageError, WriteError
from ..index.variants import NOT_LOCKABLE, variant_refusal
from ..model import LockPlan
from .constraints import read_constraints, render_constraints
from .locked import LockedFile
from .pylock import LOCK_NAME_RE, read_pylock, render_pylock

_PYLOCK_FILE_RE = re.compile(r"^pylock(?:\.(?P<name>[^.]*))?\.toml$")
STALE_TEMP_S = 10 * 60  # a temp file this old is no running writer's: it renames within seconds


def lock_format(path: Path) -> tuple[str, str | None]:
    """``("pylock", name)`` or ``("constraints", None)`` from the file name, else ``UsageError``."""
    m = _PYLOCK_FILE_RE.match(path.name)
    if m and (m.group("name") is None or LOCK_NAME_RE.match(m.group("name"))):
        return "pylock", m.group("name")
    if path.name.endswith(".txt") and len(path.name) > len(".txt") and not path.name.startswith("pylock."):
        return "constraints", None
    raise UsageError(
        f"{path}: not a lock file name; accepted: pylock.toml or pylock.<name>.toml (PEP 751, <name> "
        "non-empty and without dots), or *.txt for a constraints file",
        hint="for example pylock.gpu.toml or constraints.txt",
    )


def read_lock(path: Path) -> LockedFile:
    """Parse a pylock (``*.toml``) or constraints (anything else) file; ``LockFileError`` when malformed."""
    text = read_text(path, error=LockFileError)
    if path.name.endswith(".toml"):
        return read_pylock(path, text)  # parse_toml bounds its numbers
    refuse_long_numbers(text, str(path), error=LockFileError)
    return read_constraints(path, text)


def render_lock(plan: LockPlan, path: Path, *, command: str) -> str:
    """The text of ``path`` for the plan, in the format its file name asks for. A plan holding a
    variant wheel (``--wheel-variants``) makes no lock: no installer a lock is for can install one."""
    kind, name = lock_format(path)
    refusal = variant_refusal(((p.name, p.filename) for p in plan.packages), doing=f"write {path.name}", because=NOT_LOCKABLE, error=LockFileError)
    if refusal is not None:
        raise refusal
    return render_pylock(plan, name=name, command=command) if kind == "pylock" else render_constraints(plan, command=command)


def write_lock(plan: LockPlan, path: Path, *, command: str) -> Path:
    """Render the plan in the format the file name asks for and write it atomically."""
    return write_texts([(path, render_lock(plan, path, command=command))])[0]


def write_locks(plan: LockPlan, paths: Sequence[Path], *, command: str) -> list[Path]:
    """Write the plan to every path, or to none: all are rendered first, then staged as temp files
    beside their targets, then renamed into place. On a failure the temps are removed and every old
    file is as it was (``WriteError``, exit 4)."""
    texts = [(path, render_lock(plan, path, command=command)) for path in paths]
    for path, _ in texts:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _write_error(path, exc) from exc
    return write_texts(texts)


def write_texts(items: Sequence[tuple[Path, str]]) -> list[Path]:
    """Write each (path, text), all or none (see ``write_locks``)."""
    return _write_all([(path, text.encode("utf-8")) for path, text in items])


def _write_all(items: Sequence[tuple[Path, bytes]]) -> list[Path]:
    staged: list[tuple[Path, str]] = []
    try:
        for path, data in items:
            staged.append((path, _stage(path, data)))
        _commit(staged)
    except BaseException:
        for _, tmp in staged:
            _unlink(tmp)
        raise
    for directory in dict.fromkeys(path.parent for path, _ in staged):
        sync_folder(directory)
    return [path for path, _ in staged]


def _write_error(path: Path, exc: OSError) -> WriteError:
    return WriteError(
        f"cannot write {path}: {exc.strerror or exc}", hint="nothing was written; make the folder writable (or pick another output path) and run it again"
    )


def _stage(path: Path, data: bytes) -> str:
    """A synced temp file beside ``path`` holding ``data`` (with the old file's mode: ``write_temp``)."""
    try:
        sweep_stale_temps(path)  # what a killed write of this file left
        return write_temp(path, data, sync=True)
    except OSError as exc:
        raise _write_error(path, exc) from exc


def _commit(staged: Sequence[tuple[Path, str]]) -> None:
    """Rename every temp over its target; if one rename fails, put back the files already replaced."""
    old: list[tuple[Path, bytes | None]] = []
    for path, _ in staged:
        try:
            old.append((path, path.read_bytes()))
        except FileNotFoundError:
            old.append((path, None))
        except OSError as exc:
            raise _write_error(path, exc) from exc
    done: list[int] = []
    try:
        for i, (path, tmp) in enumerate(staged):
            try:
                os.replace(tmp, path)
            except OSError as exc:
                raise _write_error(path, exc) from exc
            done.append(i)
    except BaseException:
        for i in done:
            _restore(*old[i])
        raise


def _restore(path: Path, data: bytes | None) -> None:
    """Best effort: ``path`` back to ``data`` (removed when it did not exist)."""
    try:
        if data is None:
            path.unlink()
        else:
            _write_all([(path, data)])
    except (OSError, WriteError):
        pass


def _unlink(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except OSError:
        pass


def sweep_stale_temps(path: Path, *, older_than_s: float = STALE_TEMP_S, now: float | None = None) -> list[Path]:
    """Remove the temp files a killed write of ``path`` left beside it (``atomic.write_temp``'s
    ``.<name>.<8 characters>.tmp``, older than ``older_than_s`` by mtime); nothing else,
    and never a writer's that is still running. Returns what was removed."""
    pattern = re.compile(rf"^\.{re.escape(path.name)}\.[A-Za-z0-9_]{{8}}\.tmp$")
    return [p for p, _ in sweep_stale(path.parent, lambda name: pattern.match(name) is not None, older_than_s, now)]


__all__ = ["lock_format", "read_lock", "render_lock", "sweep_stale_temps", "write_lock", "write_locks", "write_texts"]
