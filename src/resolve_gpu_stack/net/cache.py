"""On-disk HTTP cache: index pages (revalidated with ETag / Last-Modified) and wheel METADATA.

Layout under the root (``default_cache_dir()``)::

    pages-v1/<aa>/<sha256(key)>       one entry per page and Accept variant
    metadata-v1/<aa>/<sha256(key)>    one entry per wheel (METADATA bytes)
    results-v1/<aa>/<sha256(key)>     one entry per resolver input digest (see resultcache.py)
    scans-v1/<aa>/<sha256(key)>       one entry per native wheel's scan (see classify.py): its
                                      key is the wheel's sha256 (its URL and size without one)

``<aa>`` is the first two hex digits of the file name. Every entry is one file: a single line of
JSON (the header), a newline, then the body as served. The header holds the key, the body's
sha256 and size, and for pages the final URL, content-type, ETag and Last-Modified. Nothing
else from the response is stored (no Authorization, no Set-Cookie, no other header).

Keys never carry credentials: a page key is ``<variant> <URL without user:password@ and
#fragment>``; a metadata key is that URL plus the digests the index promised (the METADATA
digest and the wheel's sha256, when known), so a re-published wheel gets a new entry.

Pages are always revalidated before use (``If-None-Match`` / ``If-Modified-Since``), so
``no-cache`` / ``must-revalidate`` hold; ``no-store`` is not honoured (index pages are listings,
and a page without ETag or Last-Modified is not stored at all). METADATA is served without
asking (a wheel is immutable). A body that no longer matches its sha256 is
deleted and treated as a miss. Writes go to a temporary file in the entry's directory and are
renamed into place (``os.replace``), so several processes may share one cache: a reader sees a
whole old entry or a whole new one, never a part.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..urls import bare_url

log = logging.getLogger(__name__)

APP_NAME = "resolve-gpu-stack"
PAGES = "pages-v1"
METADATA = "metadata-v1"
RESULTS = "results-v1"
SCANS = "scans-v1"


def default_cache_dir(env: Mapping[str, str]) -> Path:
    """``$XDG_CACHE_HOME/resolve-gpu-stack``, else ``~/.cache/resolve-gpu-stack``.

    A relative ``XDG_CACHE_HOME`` is ignored, as the XDG spec requires.
    """
    xdg = env.get("XDG_CACHE_HOME", "")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / APP_NAME
    home = env.get("HOME") or str(Path.home())
    return Path(home) / ".cache" / APP_NAME


cache_url = bare_url  # the URL as a cache key: no ``user:password@``, no fragment (see urls.py)


@dataclass(frozen=True, slots=True, kw_only=True)
class CachedPage:
    url: str  # the final URL the body came from (after redirects), without credentials
    content: bytes
    content_type: str
    etag: str | None = None
    last_modified: str | None = None


class HttpCache:
    """A directory of cache entries; safe to share between threads and processes."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    # -- pages ---------------------------------------------------------------------------
    def get_page(self, url: str, *, variant: str = "html") -> CachedPage | None:
        found = self._read(PAGES, f"{variant} {cache_url(url)}")
        if found is None:
            return None
        header, body = found
        return CachedPage(
            url=header.get("url") or cache_url(url),
            content=body,
            content_type=header.get("content_type") or "text/html",
            etag=header.get("etag"),
            last_modified=header.get("last_modified"),
        )

    def put_page(
        self,
        url: str,
        content: bytes,
        *,
        variant: str = "html",
        final_url: str | None = None,
        content_type: str,
        etag: str | None,
        last_modified: str | None,
    ) -> None:
        header = {
            "url": cache_url(final_url or url),
            "content_type": content_type,
            "etag": etag,
            "last_modified": last_modified,
        }
        self._write(PAGES, f"{variant} {cache_url(url)}", header, content)

    def drop_page(self, url: str, *, variant: str = "html") -> None:
        self._path(PAGES, f"{variant} {cache_url(url)}").unlink(missing_ok=True)

    # -- metadata ------------------------------------------------------------------------
    @staticmethod
    def metadata_key(url: str, *, metadata_sha256: str | None = None, sha256: str | None = None) -> str:
        return f"{cache_url(url)} metadata-sha256={metadata_sha256 or ''} sha256={sha256 or ''}"

    def get_metadata(self, url: str, *, metadata_sha256: str | None = None, sha256: str | None = None) -> bytes | None:
        found = self._read(METADATA, self.metadata_key(url, metadata_sha256=metadata_sha256, sha256=sha256))
        return None if found is None else found[1]

    def put_metadata(self, url: str, content: bytes, *, metadata_sha256: str | None = None, sha256: str | None = None) -> None:
        self._write(METADATA, self.metadata_key(url, metadata_sha256=metadata_sha256, sha256=sha256), {}, content)

    # -- results -------------------------------------------------------------------------
    def get_result(self, key: str) -> bytes | None:
        """A computed result stored under ``key`` (the caller's digest of its inputs), or None."""
        found = self._read(RESULTS, key)
        return None if found is None else found[1]

    def put_result(self, key: str, content: bytes) -> None:
        self._write(RESULTS, key, {}, content)

    # -- scans ---------------------------------------------------------------------------
    def get_scan(self, key: str) -> bytes | None:
        """A wheel's stored scan (``classify.scan_key``), or None. A wheel is immutable: no revalidation."""
        found = self._read(SCANS, key)
        return None if found is None else found[1]

    def put_scan(self, key: str, content: bytes) -> None:
        self._write(SCANS, key, {}, content)

    # -- entries -------------------------------------------------------------------------
    def _path(self, kind: str, key: str) -> Path:
        digest = hashlib.sha256(key.encode("utf-8")).hexdigest()
        return self.root / kind / digest[:2] / digest

    def _read(self, kind: str, key: str) -> tuple[dict, bytes] | None:
        path = self._path(kind, key)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("cache entry %s unreadable (%s); ignoring it", path, exc.strerror)
            return None
        head, sep, body = raw.partition(b"\n")
        try:
            header = json.loads(head) if sep else None
        except ValueError:
            header = None
        if (
            not isinstance(header, dict)
            or header.get("key") != key
            or header.get("size") != len(body)
            or header.get("sha256") != hashlib.sha256(body).hexdigest()
        ):
            log.warning("cache entry %s is corrupt (body does not match its sha256); discarding it", path)
            path.unlink(missing_ok=True)
            return None
        return header, body

    def _write(self, kind: str, key: str, header: dict, body: bytes) -> None:
        path = self._path(kind, key)
        record = {**header, "key": key, "sha256": hashlib.sha256(body).hexdigest(), "size": len(body)}
        data = json.dumps(record, separators=(",", ":"), sort_keys=True).encode("utf-8") + b"\n" + body
        try:
            atomic_write(path, data)
        except OSError as exc:  # a full or read-only cache must not fail the run
            log.warning("cannot write cache entry %s: %s", path, exc.strerror or exc)


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory and a rename.

    No ``fsync``: a cache entry is checked on every read (its size and sha256, see
    ``HttpCache.get_*``), so one torn by a crash is a miss, and ``os.replace`` keeps readers
    atomic. (Lock files, which nothing re-checks, are synced: ``lock/files.py``.) The entry's
    directory is made only when the first try finds it missing, not before every write.
    """
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


__all__ = ["CachedPage", "HttpCache", "atomic_write", "cache_url", "default_cache_dir"]
