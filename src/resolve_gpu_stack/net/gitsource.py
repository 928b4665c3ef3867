"""A source tree's git and its archive (I/O: git through ``net/process.py``, disk), below ``lock/`` (``check``
asks whether a locked commit or tree is still what its source names) and ``env/sources.py``.

The archive is deterministic (sorted members, fixed times and owners, gzip without a time): its
sha256 is a digest of the tree's files, so a patch gives another archive (another build) and the
same files the same bytes. Version-control folders and build outputs are left out (``_SKIPPED``).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import re
import tarfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from ..errors import BuildError
from ..model import SourceOrigin
from .process import checked_git_source, git

MTIME = 1767225600  # every member's time: 2026-01-01 (the archive depends on the files only)
_SKIPPED = frozenset({".git", ".hg", ".svn", "__pycache__", ".venv", "build", "dist", ".eggs", ".tox", ".nox", ".mypy_cache", ".pytest_cache"})
_COMMIT = re.compile(r"[0-9a-f]{40}")


def resolve_commit(origin: SourceOrigin, env: Mapping[str, str] | None = None) -> str:
    """The commit ``origin.rev`` names in its repository now (``git ls-remote``; a 40-hex rev is itself)."""
    rev = origin.rev or "HEAD"
    if _COMMIT.fullmatch(rev):
        return rev
    checked_git_source(origin.url, rev, origin.subdirectory)
    out = git(["ls-remote", "--", origin.url, rev, f"{rev}^{{}}"], env, f"{origin.url}@{rev}")  # the second: an annotated tag peeled
    refs: dict[str, str] = {}
    for line in out.splitlines():
        sha, _, ref = line.partition("\t")
        refs.setdefault(ref.strip(), sha.strip())
    # as git itself resolves a name: a tag (an annotated one: the commit it points at), then a branch
    for ref in (f"refs/tags/{rev}^{{}}", f"refs/tags/{rev}", f"refs/heads/{rev}", rev):
        if ref in refs:
            return refs[ref]
    raise BuildError(f"{origin.url} has no revision {rev!r}", hint="name a tag, a branch or a full commit that the repository has")


def _files(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIPPED and not d.endswith(".egg-info"))
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if path.is_file() and not path.is_symlink():
                yield path


def tree_archive(root: Path, top: str) -> bytes:
    """A deterministic ``.tar.gz`` of ``root``'s files under ``top/``: the same files, the same bytes."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in _files(root):
            data = path.read_bytes()
            info = tarfile.TarInfo(f"{top}/{path.relative_to(root).as_posix()}")
            info.size, info.mtime, info.uid, info.gid, info.uname, info.gname = len(data), MTIME, 0, 0, "", ""
            info.mode = 0o755 if os.access(path, os.X_OK) else 0o644
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, filename="") as gz:
        gz.write(buf.getvalue())
    return out.getvalue()


def tree_digest(origin: SourceOrigin, filename: str) -> str:
    """The sha256 of a local tree's archive as it is now (``check``: has the tree changed?)."""
    return hashlib.sha256(tree_archive(Path(origin.url), filename.removesuffix(".tar.gz"))).hexdigest()


__all__ = ["resolve_commit", "tree_archive", "tree_digest"]
