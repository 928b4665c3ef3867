"""The on-disk wheel cache: content-addressed wheels, resumable partials, learnt digests.

Layout under the wheel cache root (default ``<cache dir>/wheels/``)::

    sha256/<aa>/<digest>/<filename>   verified wheels, by content (the file keeps its wheel name)
    partial/<key>.part                bytes of an unfinished download; <key> = sha256 of the URL
    partial/<key>.json                its validator (ETag / Last-Modified), sent back as If-Range
    locks/<key>.lock                  one process at a time per URL (fcntl.flock)
    in-use.lock                       held (shared) by every command using the cache's files; prune
                                      and clean touch wheels only when they hold it exclusively
    urls/<key>.json                   sha256 + size learnt by downloading a wheel whose index gave
                                      no hash (PyTorch nightlies), so a later run finds it again;
                                      ``checked``: how the file was checked before (``INTACT``)
    verified/<aa>/<digest>/<filename>.json
                                      the stat of sha256/<aa>/<digest>/<filename> (size, mtime, ctime, inode) when it was last
                                      hashed: a lookup whose stat still matches skips re-hashing a
                                      GB wheel (any write, touch, link or replace changes the ctime)

``check_learned`` says whether a file is the wheel its name says (before its sha256 is learnt, and
again before a learnt entry is reused). Keys and files never hold credentials.

A verified file in ``sha256/`` is ``WHEEL_MODE`` (0o644, whatever the umask; as wheels were before
partial downloads were made 0o600): a wheelhouse hard-links it into its ``files/`` (one inode, one
mode) for a web server running as another user to serve. A partial download is created 0o600 and
made ``WHEEL_MODE`` once verified, before it is renamed into ``sha256/`` and before its stamp is
taken (a chmod changes the ctime). The cache folder's permissions are what keeps a private
index's wheels private.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO
from urllib.parse import unquote, urlsplit

from packaging.utils import NormalizedName
from packaging.version import Version

from ..atomic import atomic_write
from ..errors import CrawlError, IntegrityError
from ..index.parse import MAX_METADATA_BYTES, parse_filename, parse_metadata
from ..scan import zipmeta
from ..urls import bare_url, redact_url
from .cache import wheels_in_use

log = logging.getLogger(__name__)
CHUNK = 1 << 20
WHEEL_MODE = 0o644  # a verified wheel's permissions (see the module docstring)
INTACT = "metadata+crc"  # a learnt digest's record: the file was checked this way before it was recorded


@dataclass(frozen=True, slots=True)
class FetchedWheel:
    path: Path  # inside the wheel cache, verified
    sha256: str
    size: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Learned:
    """A digest learnt by downloading a wheel whose index gave no hash (``urls/<key>.json``)."""

    sha256: str
    size: int
    intact: bool  # learnt from a file checked whole (``INTACT``); older versions' records were not


class WheelCache:
    """The on-disk wheel cache (see the module docstring for its layout)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    @classmethod
    def under(cls, cache_dir: Path) -> WheelCache:
        """The wheel cache inside the tool's cache directory: ``<cache_dir>/wheels``."""
        return cls(Path(cache_dir) / "wheels")

    # -- paths ----------------------------------------------------------------------------------
    def path_for(self, sha256: str, filename: str) -> Path:
        digest = sha256.lower()
        return self.root / "sha256" / digest[:2] / digest / filename

    @staticmethod
    def url_key(url: str) -> str:
        return hashlib.sha256(bare_url(url).encode()).hexdigest()

    def partial_path(self, url: str) -> Path:
        return self.root / "partial" / (self.url_key(url) + ".part")

    def _partial_meta(self, url: str) -> Path:
        return self.root / "partial" / (self.url_key(url) + ".json")

    def _url_record(self, url: str) -> Path:
        return self.root / "urls" / (self.url_key(url) + ".json")

    # -- lookups --------------------------------------------------------------------------------
    def lookup(self, sha256: str, filename: str, size: int | None = None) -> FetchedWheel | None:
        """The cached wheel with this digest, re-verified; a damaged entry is deleted (a miss).

        The file is hashed again unless its stat is the one recorded when it was last hashed
        (``mark_verified``): then it has not been written to since.
        """
        path = self.path_for(sha256, filename)
        digest = sha256.lower()
        try:
            st = path.stat()
        except OSError:
            return None
        if not path.is_file():
            return None
        if size is not None and st.st_size != size:
            log.warning("wheel cache entry %s is damaged (%d bytes, %d expected); deleting it", path, st.st_size, size)
            unlink(path)
            unlink(_stamp_path(path))
            return None
        if _read_stamp(path) == _stamp(digest, st):
            return FetchedWheel(path=path, sha256=digest, size=st.st_size)
        actual, n = file_sha256(path)
        if actual != digest or (size is not None and n != size):
            log.warning("wheel cache entry %s is damaged (sha256 %s, %d bytes); deleting it", path, actual, n)
            unlink(path)
            unlink(_stamp_path(path))
            return None
        self.mark_verified(path, actual)
        return FetchedWheel(path=path, sha256=actual, size=n)

    def mark_verified(self, path: Path, sha256: str) -> None:
        """Record that ``path`` (a file in ``sha256/``) has just been hashed to ``sha256``."""
        try:
            _write_json(_stamp_path(path), _stamp(sha256.lower(), path.stat()))
        except OSError as exc:  # a read-only cache still works: it hashes every time
            log.debug("cannot record the verification of %s: %s", path, exc)

    def learned(self, url: str) -> Learned | None:
        """The digest recorded for a URL downloaded before without an index hash (one reading of
        its record), or None."""
        try:
            data = json.loads(self._url_record(url).read_text())
            return Learned(sha256=str(data["sha256"]), size=int(data["size"]), intact=data.get("checked") == INTACT)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def known_digest(self, url: str) -> tuple[str, int] | None:
        """(sha256, size) recorded for a URL downloaded before without an index hash."""
        found = self.learned(url)
        return None if found is None else (found.sha256, found.size)

    def remember(self, url: str, sha256: str, size: int) -> None:
        """Record the digest learnt for ``url``: only ever for a file ``check_learned`` passed whole
        (METADATA and every member's CRC), which the record says (``Learned.intact``)."""
        record = {"url": bare_url(url), "sha256": sha256, "size": size, "checked": INTACT}
        _write_json(self._url_record(url), record)

    def forget(self, url: str) -> None:
        """Drop the learnt digest of ``url`` (its file failed a check)."""
        unlink(self._url_record(url))

    # -- partial downloads ----------------------------------------------------------------------
    def read_validator(self, url: str) -> str | None:
        try:
            value = json.loads(self._partial_meta(url).read_text()).get("validator")
        except (OSError, ValueError, AttributeError):
            return None
        return value if isinstance(value, str) else None

    def write_validator(self, url: str, validator: str | None) -> None:
        if validator:
            _write_json(self._partial_meta(url), {"url": bare_url(url), "validator": validator})
        else:
            unlink(self._partial_meta(url))

    def drop_partial(self, url: str) -> None:
        unlink(self.partial_path(url))
        unlink(self._partial_meta(url))

    @contextmanager
    def in_use(self) -> Iterator[None]:
        """Held (shared) by whoever uses files of this cache: ``cache prune`` and ``clean`` leave
        its wheels and partial downloads alone meanwhile (``cache.wheels_in_use``)."""
        with wheels_in_use(self.root):
            yield

    @contextmanager
    def locked(self, url: str) -> Iterator[None]:
        """An exclusive lock on one URL's partial file, across processes (where fcntl exists)."""
        lock_path = self.root / "locks" / (self.url_key(url) + ".lock")
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            import fcntl  # platform: POSIX only
        except ImportError:  # pragma: no cover - not POSIX
            yield
            return
        with open(lock_path, "a+b") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


# -- helpers -----------------------------------------------------------------------------------


def file_sha256(path: Path) -> tuple[str, int]:
    digest = hashlib.sha256()
    n = 0
    with open(path, "rb") as fh:
        while block := fh.read(CHUNK):
            digest.update(block)
            n += len(block)
    return digest.hexdigest(), n


def copy_hashed(source: Path, out: BinaryIO) -> tuple[str, int]:
    """Copy ``source`` into ``out`` (closed afterwards); the sha256 and size of what was copied."""
    digest = hashlib.sha256()
    n = 0
    with out, open(source, "rb") as fh:
        while block := fh.read(CHUNK):
            out.write(block)
            digest.update(block)
            n += len(block)
    return digest.hexdigest(), n


def wheel_filename(url: str, filename: str | None = None) -> str:
    """The file name to keep in the cache: ``filename`` or the URL's last path segment."""
    name = filename or unquote(urlsplit(url).path.rsplit("/", 1)[-1])
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\x00" in name:
        raise CrawlError(redact_url(url), f"no usable file name in the URL ({name!r})")
    return name


def unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def _stamp_path(path: Path) -> Path:
    """``verified/<aa>/<digest>/<filename>.json`` for ``sha256/<aa>/<digest>/<filename>``."""
    return path.parents[3] / "verified" / path.parent.parent.name / path.parent.name / (path.name + ".json")


def _stamp(sha256: str, st: os.stat_result) -> dict[str, object]:
    """What must not have changed since a file was hashed (the ctime changes with any write,
    ``touch``, hard link or rename of the file, and cannot be set back by its owner)."""
    return {"sha256": sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns, "ino": st.st_ino, "dev": st.st_dev}


def _read_stamp(path: Path) -> dict[str, object] | None:
    try:
        data = json.loads(_stamp_path(path).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write_json(path: Path, data: Mapping[str, object]) -> None:
    """Through a temporary file created exclusively (never one planted, never through a link)."""
    atomic_write(path, json.dumps(data), make_parents=True)


def check_learned(path: Path, name: str, shown: str) -> None:
    """``IntegrityError`` unless the wheel ``path`` is intact and what ``name`` says (before
    learning its sha256, and before reusing a learnt entry no such check is recorded for):
    ``wheel_metadata``, and every member must pass its CRC check (a valid zip with the right
    METADATA and one corrupt member is not pinned). Files that are not wheels by name are not
    checked."""
    want_name, want_version, is_wheel = _parse_name(name, shown)
    if is_wheel:
        _checked_metadata(path, want_name, want_version, shown, crcs=True)


def wheel_metadata(path: Path, name: str, shown: str) -> bytes:
    """The METADATA bytes of the wheel ``path``, whose file name is ``name``: ``IntegrityError``
    unless it is a zip whose one ``*.dist-info/METADATA`` (under the size cap) names the project
    and version of the file name."""
    want_name, want_version, is_wheel = _parse_name(name, shown)
    if not is_wheel:
        raise IntegrityError(shown, f"{name} is not a wheel file name")
    return _checked_metadata(path, want_name, want_version, shown, crcs=False)


def _parse_name(name: str, shown: str) -> tuple[NormalizedName, Version, bool]:
    """(project, version, is a wheel) from a file name; ``IntegrityError`` when it does not parse."""
    try:
        want_name, want_version, _, is_wheel = parse_filename(name)
    except ValueError as exc:
        raise IntegrityError(shown, str(exc)) from None
    return want_name, want_version, is_wheel


def _checked_metadata(path: Path, want_name: NormalizedName, want_version: Version, shown: str, *, crcs: bool) -> bytes:
    """The METADATA of the wheel ``path``, which must name ``want_name`` ``want_version``; with
    ``crcs`` every member's CRC is checked too (after the METADATA, on the same open file)."""
    try:
        with open(path, "rb") as fh:
            raw = zipmeta.read_metadata_from_zip(fh, max_size=MAX_METADATA_BYTES)
            meta = parse_metadata(raw, source=shown)
            same = (meta.name, meta.version) == (want_name, want_version)
            if same and crcs:
                zipmeta.check_crcs(fh)
    except zipmeta.ZipError as exc:
        raise IntegrityError(shown, f"not an intact wheel ({exc})") from None
    except CrawlError as exc:
        raise IntegrityError(shown, f"not a usable wheel ({exc.cause})") from None
    except OSError as exc:
        raise IntegrityError(shown, f"cannot read the download ({exc})") from None
    if not same:
        raise IntegrityError(shown, f"the wheel's METADATA says {meta.name} {meta.version}, its file name {want_name} {want_version}")
    return raw


__all__ = ["WHEEL_MODE", "FetchedWheel", "Learned", "WheelCache", "check_learned", "copy_hashed", "file_sha256", "unlink", "wheel_filename", "wheel_metadata"]
