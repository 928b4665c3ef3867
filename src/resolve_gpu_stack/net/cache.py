"""On-disk HTTP cache: index pages (revalidated with ETag / Last-Modified) and wheel METADATA.

Layout under the root (``default_cache_dir()``)::

    pages-v1/<aa>/<sha256(key)>       one entry per page and Accept variant
    metadata-v1/<aa>/<sha256(key)>    one entry per wheel (METADATA bytes)
    results-v1/<aa>/<sha256(key)>     one entry per resolver input digest (see resolver/reuse.py),
                                      per code identity (``code_identity``)
    scans-v1/<aa>/<sha256(key)>       one entry per native wheel's scan (see classify.py): its
                                      key is the wheel's sha256 (its URL and size without one)
    exports-v1/<aa>/<sha256(key)>     one entry per torch wheel: its libraries' exports (exports.py)

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
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..atomic import atomic_write, stale_temp
from ..urls import bare_url

log = logging.getLogger(__name__)

APP_NAME = "resolve-gpu-stack"
PAGES = "pages-v1"
METADATA = "metadata-v1"
RESULTS = "results-v1"
SCANS = "scans-v1"
EXPORTS = "exports-v1"


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
        self._code: str | None = None  # code_identity(), worked out on the first result asked for
        sweep_stale(self.root)  # killed runs' temp files, week-old partial downloads

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
        """A computed result stored under ``key`` (the caller's digest of its inputs) by this very
        code (``code_identity``: results of an upgrade or an edited checkout are never returned), or None."""
        found = self._read(RESULTS, self._result_key(key))
        return None if found is None else found[1]

    def put_result(self, key: str, content: bytes) -> None:
        self._write(RESULTS, self._result_key(key), {}, content)

    def _result_key(self, key: str) -> str:
        if self._code is None:
            self._code = code_identity()
        return f"{self._code} {key}"

    # -- scans ---------------------------------------------------------------------------
    def get_scan(self, key: str) -> bytes | None:
        """A wheel's stored scan (``classify.scan_key``), or None. A wheel is immutable: no revalidation."""
        found = self._read(SCANS, key)
        return None if found is None else found[1]

    def put_scan(self, key: str, content: bytes) -> None:
        self._write(SCANS, key, {}, content)

    def get_exports(self, key: str) -> bytes | None:
        """A torch wheel's stored exports (``exports.encode_exports``), or None."""
        found = self._read(EXPORTS, key)
        return None if found is None else found[1]

    def put_exports(self, key: str, content: bytes) -> None:
        self._write(EXPORTS, key, {}, content)

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
            # no fsync: an entry is checked on every read (its size and sha256), so one torn by a
            # crash is a miss; the entry's folder is made when the first try finds it missing
            atomic_write(path, data, mode=0o600, make_parents=True)
        except OSError as exc:  # a full or read-only cache must not fail the run
            log.warning("cannot write cache entry %s: %s", path, exc.strerror or exc)


def code_identity() -> str:
    """This package's version and the size and mtime of each of its modules, digested: what a
    stored result was computed by."""
    here = Path(__file__).resolve().parents[1]
    parts = []
    for path in sorted(here.rglob("*.py")):
        st = path.stat()
        parts.append(f"{path.relative_to(here)}:{st.st_size}:{st.st_mtime_ns}")
    try:
        from importlib.metadata import version

        parts.append(version("resolve-gpu-stack"))
    except Exception:  # noqa: BLE001 - not installed as a distribution
        pass
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


# -- keeping the cache directory tidy (the `cache` command, and a sweep at start) -------------------
#
# The cache directory holds this module's entries (pages, metadata, results) and the wheel cache
# under ``wheels/`` (its layout: net/download.py). Only names this tool writes are ever removed:
# ``.<name>.<8 digits>.tmp`` (``atomic_write``), ``.tmp-*`` and ``*.<pid>.tmp`` (earlier versions') and
# ``wheels/partial/*``. A temp file is stale once it is older than ``TEMP_MAX_AGE_S`` by mtime: a
# writer still running renames it within seconds, so other processes sharing the cache are safe.

WHEELS = "wheels"
TEMP_MAX_AGE_S = 10 * 60
PARTIAL_MAX_AGE_S = 7 * 24 * 3600  # an unfinished download nobody resumed for a week
CACHE_SCHEMA = "resolve-gpu-stack/cache/v1"
_KINDS = (("pages", (PAGES,)), ("metadata", (METADATA,)), ("results", (RESULTS,)), ("scans", (SCANS,)), ("exports", (EXPORTS,)), ("wheels", (WHEELS, "sha256")), ("partial downloads", (WHEELS, "partial")), ("wheel records", (WHEELS, "urls")))


@dataclass(frozen=True, slots=True)
class Usage:
    """How many files of one kind, and their bytes."""

    kind: str
    files: int = 0
    bytes: int = 0

    def add(self, size: int) -> Usage:
        return Usage(self.kind, self.files + 1, self.bytes + size)


def is_temp_name(name: str) -> bool:
    """A temporary file this tool writes (and renames into place when it finishes): ``atomic_write``'s,
    or one an earlier version wrote (``.tmp-*``, ``*.<pid>.tmp``)."""
    if name.startswith(".tmp-") or stale_temp(name):
        return True
    stem, dot, ext = name.rpartition(".")
    return ext == "tmp" and bool(dot) and stem.rpartition(".")[2].isdigit()


def _files(directory: Path, wanted: Callable[[str], bool] = lambda name: True) -> list[tuple[Path, os.stat_result]]:
    """Every regular file below ``directory`` whose name is ``wanted`` (only those are stat'ed;
    symlinks are neither followed nor counted)."""
    out: list[tuple[Path, os.stat_result]] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return out
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                out += _files(Path(entry.path), wanted)
            elif wanted(entry.name) and entry.is_file(follow_symlinks=False):
                out.append((Path(entry.path), entry.stat(follow_symlinks=False)))
        except OSError:
            continue
    return out


def cache_usage(root: Path) -> tuple[Usage, ...]:
    """Files and bytes per kind; temp files (finished or abandoned writes) are their own kind."""
    out = []
    temp = Usage("temp files")
    for kind, parts in _KINDS:
        usage = Usage(kind)
        for path, st in _files(Path(root).joinpath(*parts)):
            if is_temp_name(path.name):
                temp = temp.add(st.st_size)
            else:
                usage = usage.add(st.st_size)
        out.append(usage)
    return (*out, temp)


def _remove(path: Path, st: os.stat_result, usage: Usage) -> Usage:
    try:
        path.unlink()
    except FileNotFoundError:
        return usage
    except OSError as exc:
        log.warning("cannot remove %s: %s", path, exc.strerror or exc)
        return usage
    return usage.add(st.st_size)


def sweep_temp_files(root: Path, *, older_than_s: float = TEMP_MAX_AGE_S, now: float | None = None) -> Usage:
    """Remove this tool's temp files older than ``older_than_s`` (by mtime) anywhere in the cache."""
    now = time.time() if now is None else now
    removed = Usage("temp files")
    for _, parts in _KINDS:
        for path, st in _files(Path(root).joinpath(*parts), is_temp_name):
            if now - st.st_mtime > older_than_s:
                removed = _remove(path, st, removed)
    return removed


def expire_partials(root: Path, *, older_than_s: float = PARTIAL_MAX_AGE_S, now: float | None = None) -> Usage:
    """Remove unfinished downloads (and their validators) untouched for ``older_than_s``: a nightly
    never fetched again would stay forever. One being written is fresh by mtime."""
    now = time.time() if now is None else now
    removed = Usage("partial downloads")
    for path, st in _files(Path(root) / WHEELS / "partial"):
        if now - st.st_mtime > older_than_s and not is_temp_name(path.name):
            removed = _remove(path, st, removed)
    return removed


def sweep_stale(root: Path, *, now: float | None = None) -> None:
    """At start: stale temp files and expired partial downloads go. Cheap (one directory scan;
    only temp-named files and partial downloads are stat'ed) and never fails the run."""
    try:
        sweep_temp_files(root, now=now)
        expire_partials(root, now=now)
    except OSError as exc:  # pragma: no cover - _files and _remove already absorb them
        log.warning("cannot sweep the cache %s: %s", root, exc)


def prune(root: Path, *, older_than_days: float, now: float | None = None) -> tuple[Usage, ...]:
    """Remove what can be fetched or computed again and was not used for ``older_than_days``:
    temp files (older than ``TEMP_MAX_AGE_S``, whatever the days), partial downloads and stored
    results by mtime, wheels by last access (atime, else mtime). Pages, METADATA and scans stay
    (small; pages are revalidated anyway, METADATA and scans are keyed by immutable digests)."""
    now = time.time() if now is None else now
    age = older_than_days * 86400
    results = Usage("results")
    for path, st in _files(Path(root) / RESULTS):
        if not is_temp_name(path.name) and now - st.st_mtime > age:
            results = _remove(path, st, results)
    wheels = Usage("wheels")
    for path, st in _files(Path(root) / WHEELS / "sha256"):
        if not is_temp_name(path.name) and now - max(st.st_atime, st.st_mtime) > age:
            wheels = _remove(path, st, wheels)
    _drop_empty_dirs(Path(root))
    return (sweep_temp_files(root, now=now), expire_partials(root, older_than_s=age, now=now), results, wheels)


def clean(root: Path) -> tuple[Usage, ...]:
    """Remove every entry of every kind (only this tool's folders; the directory itself stays)."""
    removed = []
    for kind, parts in _KINDS:
        usage = Usage(kind)
        for path, st in _files(Path(root).joinpath(*parts)):
            usage = _remove(path, st, usage)
        removed.append(usage)
    _drop_empty_dirs(Path(root))
    return tuple(removed)


def _drop_empty_dirs(root: Path) -> None:
    for top in (PAGES, METADATA, RESULTS, SCANS, WHEELS):
        for dirpath, _, _ in sorted(os.walk(root / top), key=lambda w: -len(w[0])):
            try:
                os.rmdir(dirpath)  # only succeeds when empty
            except OSError:
                pass


__all__ = ["CACHE_SCHEMA", "CachedPage", "HttpCache", "Usage", "cache_url", "code_identity", "cache_usage", "clean", "default_cache_dir", "expire_partials", "prune", "sweep_stale", "sweep_temp_files"]
