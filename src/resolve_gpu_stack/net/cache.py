"""On-disk HTTP cache: index pages (revalidated with ETag / Last-Modified) and wheel METADATA.

Layout under the root (``default_cache_dir()``)::

    pages-v1/<sha256(key)>       one entry per page and Accept variant
    metadata-v1/<sha256(key)>    one entry per wheel (METADATA bytes)
    results-v1/<sha256(key)>     one entry per resolver input digest (see resolver/reuse.py),
                                 per code identity (``code_identity``)
    scans-v1/<sha256(key)>       one entry per native wheel's scan (see classify.py): its key is
                                 the wheel's sha256 (its URL and size without one)
    exports-v1/<sha256(key)>     one entry per torch wheel: its libraries' exports (exports.py)

Entries lie flat in their kind's folder: a cold resolve writes ~450 entries, and a folder per
first two hex digits (``<kind>/<aa>/<sha256(key)>``, where versions before this one wrote them)
made ~320 folders more, a new inode each (the costliest part of a write on a busy disk; any
file system in use indexes a large folder's names). An entry an earlier version wrote under
``<aa>/`` is still read, and dropped with its page. Every entry is one file: a single line of
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

``write_behind`` (the command's cache, ``cli/assemble.py``): an entry is handed to one writer
thread and kept in memory until it is on disk, so the thread that fetched it goes on at once (a
cold resolve writes ~450 entries; each is a new file, often a new folder, and on a busy disk a
new inode costs more than the parse of what it holds). This process reads its own entries from
memory until they are written; other processes see them once written. ``close`` (``flush``)
waits for every entry handed over, in the order they were handed over: the fetcher closes the
cache when the command ends, so a later run finds everything this one read. A process killed
first loses only entries not yet written (a miss next time; the stored plan, handed over last,
never outlives the entries it was computed from).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from .. import __version__
from ..atomic import atomic_write, stale_temp
from ..atomic import sweep_stale as sweep_temps_in
from ..errors import UsageError
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


def cache_write_problem(root: Path) -> str | None:
    """Why the cache folder ``root`` cannot be written now (a read-only folder or file system, a
    full disk, no permission), or None: the folder made if missing, a small file written there and
    removed. A command asks once, before it caches anything."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=".tmp-probe-", dir=root)
        try:
            os.write(fd, bytes(4096))
        finally:
            os.close(fd)
            os.unlink(name)
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


cache_url = bare_url  # the URL as a cache key: no ``user:password@``, no fragment (see urls.py)


@dataclass(frozen=True, slots=True, kw_only=True)
class CachedPage:
    """A page as the cache holds it: where its body came from, the body and its validators."""

    url: str  # the final URL the body came from (after redirects), without credentials
    content: bytes
    content_type: str
    etag: str | None = None
    last_modified: str | None = None


class HttpCache:
    """A directory of cache entries; safe to share between threads and processes."""

    def __init__(self, root: Path, *, write_behind: bool = False) -> None:
        self.root = Path(root)
        self._root = str(self.root)
        self._code: str | None = None  # code_identity(), worked out on the first result asked for
        self._behind = _WriteBehind() if write_behind else None
        self._write_lock = threading.Lock()
        self._unwritable = False  # a write failed (a full or read-only folder): nothing more is tried
        sweep_stale(self.root)  # killed runs' temp files, week-old partial downloads

    def flush(self) -> None:
        """Wait until every entry handed to the writer thread is on disk (``write_behind``)."""
        if self._behind is not None:
            self._behind.flush()

    def close(self) -> None:
        """``flush``; the writer thread ends (a later write starts another)."""
        if self._behind is not None:
            self._behind.close()

    # -- pages ---------------------------------------------------------------------------
    def get_page(self, url: str, *, variant: str = "html") -> CachedPage | None:
        found = self._read(PAGES, f"{variant} {cache_url(url)}")
        if found is None:
            return None
        header, body = found
        return CachedPage(
            url=_text(header, "url") or cache_url(url),
            content=body,
            content_type=_text(header, "content_type") or "text/html",
            etag=_text(header, "etag"),
            last_modified=_text(header, "last_modified"),
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
        header: dict[str, object] = {
            "url": cache_url(final_url or url),
            "content_type": content_type,
            "etag": etag,
            "last_modified": last_modified,
        }
        self._write(PAGES, f"{variant} {cache_url(url)}", header, content)

    def drop_page(self, url: str, *, variant: str = "html") -> None:
        key = f"{variant} {cache_url(url)}"
        if self._behind is not None:
            self._behind.put((PAGES, key), partial(self._unlink, PAGES, key), None)
            return
        self._unlink(PAGES, key)

    def _unlink(self, kind: str, key: str) -> None:
        for path in (self._path(kind, key), self._fanned_path(kind, key)):
            try:
                path.unlink(missing_ok=True)
            except OSError as exc:
                log.warning("cannot remove cache entry %s: %s", path, exc.strerror or exc)

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
        return self.root / kind / hashlib.sha256(key.encode("utf-8")).hexdigest()

    def _fanned_path(self, kind: str, key: str) -> Path:
        """Where versions before the flat layout kept the entry: ``<kind>/<aa>/<sha256(key)>``."""
        digest = hashlib.sha256(key.encode("utf-8")).hexdigest()
        return self.root / kind / digest[:2] / digest

    def _raw(self, kind: str, key: str) -> tuple[str, bytes] | None:
        """(the file, its bytes) of an entry on disk, flat or where an earlier version kept it; None
        when there is none or it cannot be read (said in the log)."""
        digest = hashlib.sha256(key.encode("utf-8")).hexdigest()
        name = f"{self._root}/{kind}/{digest}"  # a string: a cold resolve misses ~450 times, twice each
        try:
            try:
                with open(name, "rb") as f:
                    return name, f.read()
            except FileNotFoundError:
                name = f"{self._root}/{kind}/{digest[:2]}/{digest}"  # an earlier version's entry
                with open(name, "rb") as f:
                    return name, f.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("cache entry %s unreadable (%s); ignoring it", name, exc.strerror)
            return None

    def _read(self, kind: str, key: str) -> tuple[Mapping[str, object], bytes] | None:
        if self._behind is not None:
            held, pending = self._behind.pending((kind, key))
            if held:
                return pending  # handed to the writer, not on disk yet (None: a drop)
        found = self._raw(kind, key)
        if found is None:
            return None
        name, raw = found
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
            log.warning("cache entry %s is corrupt (body does not match its sha256); discarding it", name)
            Path(name).unlink(missing_ok=True)
            return None
        return header, body

    def _write(self, kind: str, key: str, header: Mapping[str, object], body: bytes) -> None:
        if self._behind is not None:
            self._behind.put((kind, key), partial(self._write_now, kind, key, header, body), (header, body))
            return
        self._write_now(kind, key, header, body)

    def _write_now(self, kind: str, key: str, header: Mapping[str, object], body: bytes) -> None:
        if self._unwritable:
            return
        path = self._path(kind, key)
        record = {**header, "key": key, "sha256": hashlib.sha256(body).hexdigest(), "size": len(body)}
        data = json.dumps(record, separators=(",", ":"), sort_keys=True).encode("utf-8") + b"\n" + body
        try:
            # no fsync: an entry is checked on every read (its size and sha256), so one torn by a
            # crash is a miss; the entry's folder is made when the first try finds it missing
            atomic_write(path, data, mode=0o600, make_parents=True)
        except OSError as exc:  # a full or read-only cache must not fail the run: said once, then nothing more is written
            with self._write_lock:
                said, self._unwritable = self._unwritable, True
            if not said:
                log.warning("cannot write cache entry %s: %s; this run caches nothing more", path, exc.strerror or exc)


_Entry = tuple[Mapping[str, object], bytes] | None  # what a read of a handed-over entry returns (None: dropped)


class _WriteBehind:
    """One writer thread and the entries handed to it: each is readable (``pending``) from the
    moment it is handed over until it is on disk, and written in the order handed over. The thread
    is started at the first entry and ends at ``close``, once nothing is left."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._jobs: list[tuple[tuple[str, str], Callable[[], None]]] = []
        self._pending: dict[tuple[str, str], tuple[int, _Entry]] = {}  # entry -> (its newest job's number, what it reads as)
        self._handed = 0  # jobs handed over so far
        self._done = 0  # jobs finished (written, or failed with a warning), in the order handed over
        self._thread: threading.Thread | None = None
        self._stop = False

    def pending(self, entry: tuple[str, str]) -> tuple[bool, _Entry]:
        """Whether ``entry`` is handed over and not yet on disk, and what it reads as then."""
        with self._lock:
            found = self._pending.get(entry)
        return (False, None) if found is None else (True, found[1])

    def put(self, entry: tuple[str, str], job: Callable[[], None], reads_as: _Entry) -> None:
        with self._lock:
            self._handed += 1
            self._pending[entry] = (self._handed, reads_as)
            self._jobs.append((entry, job))
            if self._thread is None:
                self._start()
            self._lock.notify_all()

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="cache-writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._jobs:
                    if self._stop:
                        return
                    self._lock.wait()
                jobs, self._jobs = self._jobs, []
            for entry, job in jobs:
                try:
                    job()  # a write or an unlink: each logs its own OSError and never raises one
                except Exception:  # a bug in one entry must not stop the others
                    log.exception("cache writer: an entry failed")
                with self._lock:
                    self._done += 1
                    newest = self._pending.get(entry)
                    if newest is not None and newest[0] <= self._done:
                        del self._pending[entry]  # no newer job for the entry is waiting
            with self._lock:
                self._lock.notify_all()

    def flush(self) -> None:
        with self._lock:
            target = self._handed
            while self._done < target and self._thread is not None and self._thread.is_alive():
                self._lock.wait()

    def close(self) -> None:
        with self._lock:
            thread = self._thread
            self._stop = True
            self._lock.notify_all()
        if thread is not None:
            thread.join()  # it ends once every job handed over is done
        with self._lock:
            self._stop = False
            self._thread = None
            if self._jobs:  # handed over while it was ending
                self._start()


def code_identity() -> str:
    """This package's version and the size and mtime of each of its modules, digested: what a
    stored result was computed by."""
    here = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    parts = [f"{'/'.join(names)}:{st.st_size}:{st.st_mtime_ns}" for names, st in sorted(_python_files(here, ()))]
    parts.append(__version__)
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _python_files(folder: str, names: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], os.stat_result]]:
    """Every ``*.py`` under ``folder`` (as ``Path.rglob`` finds them: not below a linked folder),
    named by its parts below the top, with its ``stat``; ``os.scandir``: a start asks before its
    first request, and ``rglob`` over ~190 modules cost ~2.5 ms of it."""
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.name.endswith(".py"):
                yield (*names, entry.name), entry.stat()
            if entry.is_dir(follow_symlinks=False):
                yield from _python_files(entry.path, (*names, entry.name))


# -- keeping the cache directory tidy (the `cache` command, and a sweep at start) -------------------
#
# The cache directory holds this module's entries (pages, metadata, results) and the wheel cache
# under ``wheels/`` (its layout: net/wheelcache.py). Only names this tool writes are ever removed:
# ``.<name>.<8 digits>.tmp`` (``atomic_write``), ``.tmp-*`` and ``*.<pid>.tmp`` (earlier versions') and
# ``wheels/partial/*``. A temp file is stale once it is older than ``TEMP_MAX_AGE_S`` by mtime: a
# writer still running renames it within seconds, so other processes sharing the cache are safe.
#
# Nothing here follows a symbolic link: every folder from the cache directory down to a kind's
# folder is ``lstat``-ed first, and a kind folder that is (or lies under) a link is refused
# (``CacheLayoutError``) by the ``cache`` command and skipped by the sweep at start; below a kind
# folder, links are neither followed nor removed. A command that uses files of the wheel cache
# (``install``, ``install --lock``, ``wheelhouse``, a download) holds a shared lock on
# ``wheels/in-use.lock`` while it does (``wheels_in_use``); ``prune`` and ``clean`` remove wheel
# files only when they get that lock exclusively, and otherwise leave them (``Usage.in_use``).

WHEELS = "wheels"
IN_USE = "in-use.lock"
TEMP_MAX_AGE_S = 10 * 60
PARTIAL_MAX_AGE_S = 7 * 24 * 3600  # an unfinished download nobody resumed for a week
CACHE_SCHEMA = "resolve-gpu-stack/cache/v1"
_KINDS = (
    ("pages", (PAGES,)),
    ("metadata", (METADATA,)),
    ("results", (RESULTS,)),
    ("scans", (SCANS,)),
    ("exports", (EXPORTS,)),
    ("wheels", (WHEELS, "sha256")),
    ("partial downloads", (WHEELS, "partial")),
    ("wheel records", (WHEELS, "urls")),
    ("wheel checks", (WHEELS, "verified")),
    ("download locks", (WHEELS, "locks")),
    ("builds", (WHEELS, "builds")),
)  # --build: a record per build (its inputs; its wheel is in sha256/) and its log
_ENTRY_TOPS = (PAGES, METADATA, RESULTS, SCANS, EXPORTS)  # this module's folders: never the wheel cache's
_TOPS = (*_ENTRY_TOPS, WHEELS)


class CacheLayoutError(UsageError):
    """A folder of the cache is a symbolic link: the cache commands never follow one."""


@dataclass(frozen=True, slots=True)
class Usage:
    """How many files of one kind, and their bytes; ``in_use``: a running command held the wheel
    cache, so prune or clean left this kind alone."""

    kind: str
    files: int = 0
    bytes: int = 0
    in_use: bool = False

    def add(self, size: int) -> Usage:
        return Usage(self.kind, self.files + 1, self.bytes + size, self.in_use)


def is_temp_name(name: str) -> bool:
    """A temporary file this tool writes (and renames into place when it finishes): ``atomic_write``'s,
    or one an earlier version wrote (``.tmp-*``, ``*.<pid>.tmp``)."""
    if name.startswith(".tmp-") or stale_temp(name):
        return True
    stem, dot, ext = name.rpartition(".")
    return ext == "tmp" and bool(dot) and stem.rpartition(".")[2].isdigit()


def kind_folder(root: Path, parts: tuple[str, ...]) -> Path:
    """``root/<parts>``, each folder below ``root`` ``lstat``-ed: ``CacheLayoutError`` when one is a
    symbolic link (``root`` itself, the user's ``--cache-dir``, may be one)."""
    path = Path(root)
    for part in parts:
        path = path / part
        try:
            if stat.S_ISLNK(os.lstat(path).st_mode):
                raise CacheLayoutError(
                    f"{path} is a symbolic link; the cache commands never follow one (it would count or delete what it points at)",
                    hint="remove the link (the cache makes a real folder again), or pass --cache-dir DIR",
                )
        except FileNotFoundError:
            break
    return Path(root).joinpath(*parts)


def check_layout(root: Path) -> None:
    """``CacheLayoutError`` when any kind's folder is, or lies under, a symbolic link."""
    for _, parts in _KINDS:
        kind_folder(root, parts)


def _files(directory: Path) -> list[tuple[Path, os.stat_result]]:
    """Every regular file below ``directory`` (symlinks are neither followed nor counted).
    ``directory`` itself must not be a link (``kind_folder``); it is opened with ``O_NOFOLLOW``
    all the same."""
    out: list[tuple[Path, os.stat_result]] = []
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return out
    try:
        for entry in os.scandir(fd):
            path = Path(directory) / entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    out += _files(path)
                elif entry.is_file(follow_symlinks=False):
                    out.append((path, entry.stat(follow_symlinks=False)))
            except OSError:
                continue
    except OSError:
        pass
    finally:
        os.close(fd)
    return out


def _kind_files(root: Path, parts: tuple[str, ...]) -> list[tuple[Path, os.stat_result]]:
    return _files(kind_folder(root, parts))


def cache_usage(root: Path) -> tuple[Usage, ...]:
    """Files and bytes per kind; temp files (finished or abandoned writes) are their own kind."""
    check_layout(root)
    out = []
    temp = Usage("temp files")
    for kind, parts in _KINDS:
        usage = Usage(kind)
        for path, st in _kind_files(root, parts):
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
        _cannot_remove(path, exc)
        return usage
    return usage.add(st.st_size)


def _cannot_remove(path: Path, exc: OSError) -> None:
    log.warning("cannot remove %s: %s", path, exc.strerror or exc)


@contextlib.contextmanager
def wheels_in_use(wheels: Path, *, exclusive: bool = False) -> Iterator[bool]:
    """Hold the wheel cache at ``wheels`` (``<cache>/wheels``): shared by a command that uses its
    files (waits while a prune holds it), exclusive for prune and clean (never waits: yields False
    when a running command holds it). Yields True when held; where there is no ``fcntl`` (or the
    folder cannot hold the lock file) it yields True without a lock."""
    try:
        import fcntl  # platform: POSIX only
    except ImportError:  # pragma: no cover - not POSIX
        yield True
        return
    if exclusive and not Path(wheels).is_dir():
        yield True  # no wheel cache yet: nothing to protect, and nothing is made
        return
    try:
        Path(wheels).mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(Path(wheels) / IN_USE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        log.debug("cannot open the wheel cache's in-use lock in %s: %s", wheels, exc)
        yield True
        return
    try:
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX | fcntl.LOCK_NB) if exclusive else fcntl.LOCK_SH)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # releases the lock


def sweep_temp_files(root: Path, *, older_than_s: float = TEMP_MAX_AGE_S, now: float | None = None) -> Usage:
    """Remove this tool's temp files older than ``older_than_s`` (by mtime) anywhere in the cache
    (below each kind folder, never through a link: ``atomic.sweep_stale``)."""
    removed = Usage("temp files")
    for _, parts in _KINDS:
        for _path, size in sweep_temps_in(kind_folder(root, parts), is_temp_name, older_than_s, now, tree=True, on_error=_cannot_remove):
            removed = removed.add(size)
    return removed


def _text(header: Mapping[str, object], key: str) -> str | None:
    """A header's string value (``None`` when absent, or not a string in a hand-edited entry)."""
    value = header.get(key)
    return value if isinstance(value, str) else None


def expire_partials(root: Path, *, older_than_s: float = PARTIAL_MAX_AGE_S, now: float | None = None) -> Usage:
    """Remove unfinished downloads (and their validators) untouched for ``older_than_s``: a nightly
    never fetched again would stay forever. One being written is fresh by mtime."""
    now = time.time() if now is None else now
    removed = Usage("partial downloads")
    for path, st in _kind_files(root, (WHEELS, "partial")):
        if now - st.st_mtime > older_than_s and not is_temp_name(path.name):
            removed = _remove(path, st, removed)
    return removed


def sweep_stale(root: Path, *, now: float | None = None) -> None:
    """At start: stale temp files and expired partial downloads go. Cheap (one directory scan;
    only temp-named files and partial downloads are stat'ed) and never fails the run (a kind
    folder that is a link is left alone, with a warning)."""
    try:
        sweep_temp_files(root, now=now)
        expire_partials(root, now=now)
    except CacheLayoutError as exc:
        log.warning("not sweeping the cache: %s", exc.message)
    except OSError as exc:  # pragma: no cover - _files and _remove already absorb them
        log.warning("cannot sweep the cache %s: %s", root, exc)


def prune(root: Path, *, older_than_days: float, now: float | None = None) -> tuple[Usage, ...]:
    """Remove what can be fetched or computed again and was not used for ``older_than_days``:
    temp files (older than ``TEMP_MAX_AGE_S``, whatever the days), partial downloads and stored
    results by mtime, wheels by last access (atime, else mtime). Pages, METADATA and scans stay
    (small; pages are revalidated anyway, METADATA and scans are keyed by immutable digests).
    Wheels and partial downloads stay while a running command uses the wheel cache."""
    check_layout(root)
    now = time.time() if now is None else now
    age = older_than_days * 86400
    results = Usage("results")
    for path, st in _kind_files(root, (RESULTS,)):
        if not is_temp_name(path.name) and now - st.st_mtime > age:
            results = _remove(path, st, results)
    with wheels_in_use(Path(root) / WHEELS, exclusive=True) as free:
        if not free:
            _drop_empty_dirs(Path(root), _ENTRY_TOPS)
            return (sweep_temp_files(root, now=now), Usage("partial downloads", in_use=True), results, Usage("wheels", in_use=True))
        wheels = Usage("wheels")
        for path, st in _kind_files(root, (WHEELS, "sha256")):
            if not is_temp_name(path.name) and now - max(st.st_atime, st.st_mtime) > age:
                wheels = _remove(path, st, wheels)
        partials = expire_partials(root, older_than_s=age, now=now)
        _drop_empty_dirs(Path(root))
    return (sweep_temp_files(root, now=now), partials, results, wheels)


def clean(root: Path) -> tuple[Usage, ...]:
    """Remove every entry of every kind (only this tool's folders; the directory itself stays);
    the wheel cache's kinds only when no running command uses it."""
    check_layout(root)
    removed = []
    with wheels_in_use(Path(root) / WHEELS, exclusive=True) as free:
        for kind, parts in _KINDS:
            if parts[0] == WHEELS and not free:
                removed.append(Usage(kind, in_use=True))
                continue
            usage = Usage(kind)
            for path, st in _kind_files(root, parts):
                usage = _remove(path, st, usage)
            removed.append(usage)
        _drop_empty_dirs(Path(root), _TOPS if free else _ENTRY_TOPS)
    return tuple(removed)


def _drop_empty_dirs(root: Path, tops: tuple[str, ...] = _TOPS) -> None:
    """Empty folders below ``tops`` (never through a link; the wheel cache's only while held)."""
    for top in tops:
        if os.path.islink(root / top):
            continue
        for dirpath, _, _ in sorted(os.walk(root / top), key=lambda w: -len(w[0])):
            try:
                os.rmdir(dirpath)  # only succeeds when empty
            except OSError:
                pass


__all__ = [
    "CACHE_SCHEMA",
    "CacheLayoutError",
    "CachedPage",
    "HttpCache",
    "Usage",
    "atomic_write",
    "cache_url",
    "cache_usage",
    "code_identity",
    "check_layout",
    "clean",
    "default_cache_dir",
    "expire_partials",
    "is_temp_name",
    "kind_folder",
    "prune",
    "sweep_stale",
    "sweep_temp_files",
    "wheels_in_use",
]
