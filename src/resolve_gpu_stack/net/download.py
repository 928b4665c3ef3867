"""Verified wheel downloads into the wheel cache (``wheelcache.py``; I/O edge: HTTP and disk).

A download streams into ``partial/``; after an interruption the next attempt (a retry, or a later
call) continues with ``Range: bytes=<have>-``, and restarts from zero when the server answers 200.
The whole file is then checked (size, sha256 when known) and renamed into ``sha256/``; on any
mismatch it is deleted and ``IntegrityError`` names the URL, the expected and the actual digest.
Nothing unverified is ever left in ``sha256/`` or handed on. A wheel already in the cache is
reused without any request, re-hashed unless its stat is the one recorded
when it was last hashed (``WheelCache.lookup``). Keys and files never hold credentials.

A sha256 learnt from a download (no index hash) is recorded only for an intact file that is the
wheel its name says (``wheelcache.check_learned``: its METADATA names that project and version,
and every member passes its CRC check), of the listed size or, unlisted, at most
``MAX_UNLISTED_BYTES``. A learnt entry found in the cache whose record does not say it was checked
so (one written by an older version) is checked the same way before it is reused; one that fails
is dropped with its ``urls/`` record and downloaded again.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO, Protocol, TypeVar

from ..atomic import exclusive_temp
from ..errors import CrawlError, IntegrityError, LockFileError, WheelNotCached, WriteError
from ..model import Action, LockedPackage, LockPlan
from ..urls import redact_url, without_fragment
from .wheelcache import WHEEL_MODE, FetchedWheel, WheelCache, check_learned, copy_hashed, file_sha256, unlink, wheel_filename

log = logging.getLogger(__name__)
T = TypeVar("T")

# progress(filename, bytes so far, total bytes or None)
DownloadProgress = Callable[[str, int, "int | None"], None]

DEFAULT_WORKERS = 8  # wheels fetched at once (uv: 50); the big ones dominate, the small ones overlap them
# A download whose sha256 we learn (no index lists one) and whose size no index lists either stops
# at this many bytes: an endless body is never written to disk, let alone pinned.
MAX_UNLISTED_BYTES = 4 * 2**30


class _Streamed:
    """The sha256 of a download computed while it is written (no second read of a GB wheel).

    Valid only while every byte of the file from 0 went through it: an answer that starts
    anywhere else (a resumed range) drops it, and the file is hashed from disk instead.
    """

    def __init__(self) -> None:
        self.digest: hashlib._Hash | None = None
        self.size = 0

    def start(self, offset: int) -> None:
        if offset == 0:
            self.digest, self.size = hashlib.sha256(), 0
        elif self.digest is not None and offset != self.size:
            self.digest = None

    def update(self, chunk: bytes) -> None:
        if self.digest is not None:
            self.digest.update(chunk)
            self.size += len(chunk)

    def result(self) -> tuple[str, int] | None:
        return (self.digest.hexdigest(), self.size) if self.digest is not None else None


class StreamedFile(Protocol):
    """An open answer for a whole file (``stream.StreamAnswer``): read ``chunks()``, then close.

    ``status`` 200 / 206 / 416; ``offset`` where the body starts in the file; ``total`` the file's
    size when the server says; ``validator`` what to send back as ``If-Range``.
    """

    status: int
    offset: int
    total: int | None
    validator: str | None

    def chunks(self) -> Iterable[bytes]: ...

    def __enter__(self) -> StreamedFile: ...

    def __exit__(self, *exc: object) -> None: ...


class Downloader(Protocol):
    """What a download needs from the network (``http.HttpFetcher`` is one).

    ``open_stream`` GETs a whole file, from ``start`` with ``Range`` (and ``If-Range``) when
    ``start > 0``; ``retrying`` runs an attempt with retries and backoff, turning the last
    retryable failure into a ``CrawlError``.
    """

    def open_stream(self, url: str, *, start: int = 0, if_range: str | None = None) -> StreamedFile: ...

    def retrying(self, url: str, attempt: Callable[[], T]) -> T: ...


def _check_digest(sha256: str | None, url: str) -> str | None:
    if sha256 is None:
        return None
    digest = sha256.strip().lower()
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise LockFileError(f"{redact_url(url)}: {sha256!r} is not a sha256 hex digest")
    return digest


# -- the download --------------------------------------------------------------------------------


def fetch_wheel(
    url: str,
    *,
    sha256: str | None,
    size: int | None,
    cache: WheelCache,
    fetcher: Downloader | None,
    filename: str | None = None,
    progress: DownloadProgress | None = None,
    offline: bool = False,
) -> Path:
    """The verified wheel at ``url`` as a file in the cache (downloaded only when needed).

    ``offline`` (or ``fetcher=None``) never sends a request: a wheel not in the cache is an error.
    """
    return fetch_verified(url, sha256=sha256, size=size, cache=cache, fetcher=fetcher, filename=filename, progress=progress, offline=offline).path


def fetch_verified(
    url: str,
    *,
    sha256: str | None,
    size: int | None,
    cache: WheelCache,
    fetcher: Downloader | None,
    filename: str | None = None,
    progress: DownloadProgress | None = None,
    offline: bool = False,
) -> FetchedWheel:
    """Like ``fetch_wheel``, with the digest and size of what was verified."""
    url = without_fragment(url)
    name = wheel_filename(url, filename)
    expected = _check_digest(sha256, url)
    learned = cache.learned(url) if expected is None else None
    known = expected or (learned.sha256 if learned is not None else None)
    if known is not None:
        hit = cache.lookup(known, name, size)
        if hit is not None and learned is not None and not _learned_hit_is_good(hit, url, name, cache, intact=learned.intact):
            hit = None
        if hit is not None:
            log.debug("wheel cache hit for %s", redact_url(url))
            if progress is not None:
                progress(name, hit.size, hit.size)
            return hit
    if offline or fetcher is None:
        raise WheelNotCached(
            redact_url(url),
            "not in the wheel cache, and downloads are off (--snapshot)",
            hint="add --live-fallback to download what the wheel cache lacks (once: the cache keeps it), or drop --snapshot",
        )
    cap = MAX_UNLISTED_BYTES if expected is None and size is None else None
    try:
        with cache.locked(url):
            streamed = _Streamed()
            resumed = _download(url, name, size=size, cap=cap, cache=cache, fetcher=fetcher, progress=progress, streamed=streamed)
            return _verify_and_store(url, name, expected=expected, size=size, cache=cache, resumed=resumed, streamed=streamed.result())
    except OSError as exc:
        if exc.errno not in _STORE_FAULTS:
            raise
        raise WriteError(
            f"{name}: cannot store it in the wheel cache {cache.root}: {exc.strerror or exc}",
            hint="free space there, or point --cache-dir (or XDG_CACHE_HOME) at a folder with room; what was downloaded of it is resumed next time",
        ) from None


_STORE_FAULTS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG, errno.EACCES})  # the cache folder, not the network


def _learned_hit_is_good(hit: FetchedWheel, url: str, name: str, cache: WheelCache, *, intact: bool) -> bool:
    """Whether a cached file whose digest was learnt may be reused: its record says it was checked
    whole (``intact``: its bytes are those, ``lookup`` re-verified the sha256), or it passes the
    check now (then the record says so). False drops it, with its record."""
    if intact:
        return True
    try:
        check_learned(hit.path, name, redact_url(url))
    except IntegrityError as exc:
        log.warning("wheel cache entry %s for %s is not the wheel its name says (%s); deleting it", hit.path, redact_url(url), exc.cause)
        unlink(hit.path)
        cache.forget(url)
        return False
    cache.remember(url, hit.sha256, hit.size)
    return True


def _download(
    url: str,
    name: str,
    *,
    size: int | None,
    cap: int | None,
    cache: WheelCache,
    fetcher: Downloader,
    progress: DownloadProgress | None,
    streamed: _Streamed | None = None,
) -> bool:
    """Fill ``partial/`` with the whole file; True when some of it came from a resumed range.
    ``streamed`` hashes the bytes as they are written (see ``_Streamed``)."""
    part = cache.partial_path(url)
    part.parent.mkdir(parents=True, exist_ok=True)
    resumed = False
    streamed = streamed or _Streamed()

    def attempt() -> None:
        nonlocal resumed
        restarted = False
        while True:
            have = part.stat().st_size if part.exists() else 0
            if size is not None and have > size:
                cache.drop_partial(url)
                have = 0
            validator = cache.read_validator(url) if have else None
            with fetcher.open_stream(url, start=have, if_range=validator) as answer:
                if answer.status == 416:
                    streamed.start(-1)  # the file on disk was not hashed here
                    if answer.total == have and have > 0:
                        resumed = True
                        return  # the partial file already holds the whole file
                    if restarted:
                        raise CrawlError(redact_url(url), f"416 for bytes={have}- twice; the server will not serve this file")
                    cache.drop_partial(url)
                    restarted = True
                    continue
                if answer.offset == 0 and have:
                    log.info("%s: the server sent the whole file (no range); starting again from zero", redact_url(url))
                resumed = resumed or answer.offset > 0
                if answer.offset == 0:
                    cache.write_validator(url, answer.validator)
                streamed.start(answer.offset)
                got = _write_body(answer, part, url, size=size, cap=cap, name=name, progress=progress, streamed=streamed)
                total = answer.total
            if total is None or got >= total:
                return
            if got == answer.offset:  # a 206 with an empty body: no progress, give up
                raise CrawlError(redact_url(url), f"the server sent no bytes after byte {got} of {total}")
            # a shorter range than asked for: ask for the rest

    try:
        fetcher.retrying(url, attempt)
    except IntegrityError:
        cache.drop_partial(url)
        raise
    return resumed


def _write_body(
    answer: StreamedFile,
    part: Path,
    url: str,
    *,
    size: int | None,
    cap: int | None,
    name: str,
    progress: DownloadProgress | None,
    streamed: _Streamed | None = None,
) -> int:
    """Write the answer's body into ``part`` from its offset; returns the file's size after.

    More than ``size`` (listed) or ``cap`` (unlisted) bytes is an ``IntegrityError``; ``part`` is deleted.
    """
    total = answer.total if answer.total is not None else size
    if size is not None and answer.total is not None and answer.total != size:
        raise IntegrityError(redact_url(url), f"the server says the file is {answer.total} bytes, the index says {size}")
    if cap is not None and answer.total is not None and answer.total > cap:
        raise IntegrityError(
            redact_url(url), f"the server says the file is {answer.total} bytes, over the {cap}-byte cap for a file no index lists a size or hash for"
        )
    with _open_partial(part, create=answer.offset == 0) as fh:
        fh.seek(answer.offset)
        fh.truncate()
        done = answer.offset
        if progress is not None:
            progress(name, done, total)
        for chunk in answer.chunks():
            fh.write(chunk)
            if streamed is not None:
                streamed.update(chunk)
            done += len(chunk)
            if size is not None and done > size:
                fh.close()
                unlink(part)
                raise IntegrityError(redact_url(url), f"the server sent more than the {size} bytes the index promised; stopped")
            if cap is not None and done > cap:
                fh.close()
                unlink(part)
                raise IntegrityError(redact_url(url), f"the server sent more than {cap} bytes for a file no index lists a size or hash for; stopped")
            if progress is not None:
                progress(name, done, total)
    return done


def _open_partial(part: Path, *, create: bool) -> BinaryIO:
    """The partial download for writing, never through a link planted at its (predictable) name;
    created when starting from zero, else it must be there (a resumed range goes on from its end)."""
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_CREAT if create else 0)
    return os.fdopen(os.open(part, flags, 0o600), "r+b")


def _verify_and_store(
    url: str, name: str, *, expected: str | None, size: int | None, cache: WheelCache, resumed: bool, streamed: tuple[str, int] | None = None
) -> FetchedWheel:
    part = cache.partial_path(url)
    actual, n = streamed if streamed is not None and not resumed else file_sha256(part)
    shown = redact_url(url)
    if size is not None and n != size:
        cache.drop_partial(url)
        raise IntegrityError(shown, f"size {n} bytes does not match {size} bytes promised by the index (sha256 {actual}); deleted the download")
    if expected is not None and actual != expected:
        cache.drop_partial(url)
        raise IntegrityError(
            shown,
            f"sha256 mismatch: expected {expected}, got {actual}; deleted the download",
            hint="the index, a mirror or a proxy served other bytes than the index page promised; nothing was installed",
        )
    if expected is None:
        try:
            check_learned(part, name, shown)
        except IntegrityError as exc:
            cache.drop_partial(url)
            raise IntegrityError(
                shown,
                f"{exc.cause}; deleted the download, no sha256 was recorded",
                hint="the server (or a proxy in front of it) sent something else than the wheel; run again once it serves the wheel",
            ) from None
    final = cache.path_for(actual, name)
    final.parent.mkdir(parents=True, exist_ok=True)
    _make_public(part)
    os.replace(part, final)
    cache.mark_verified(final, actual)
    cache.drop_partial(url)
    if expected is None:
        cache.remember(url, actual, n)
    log.debug("downloaded %s (%d bytes, sha256 %s)", shown, n, actual)
    return FetchedWheel(path=final, sha256=actual, size=n)


def _make_public(part: Path) -> None:
    """The verified partial download (created 0o600) made ``WHEEL_MODE``, never through a link."""
    fd = os.open(part, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.fchmod(fd, WHEEL_MODE)
    finally:
        os.close(fd)


def store_local(path: Path, *, sha256: str, size: int | None, cache: WheelCache, filename: str | None = None) -> FetchedWheel:
    """A wheel already on disk (a ``path`` entry of a lock, a wheelhouse on a shared filesystem)
    put into the cache after checking its size and sha256; a cache hit is reused as it is.

    The file is copied (never hard-linked: the cache, and a wheelhouse made from it, must not
    share its bytes with a file someone else may change) into a temporary file created
    exclusively (``WHEEL_MODE``), hashed while it is copied, and renamed into ``sha256/`` once
    verified.
    """
    name = filename or path.name
    expected = _check_digest(sha256, str(path))
    assert expected is not None
    hit = cache.lookup(expected, name, size)
    if hit is not None:
        return hit
    if not path.is_file():
        raise LockFileError(f"{path}: no such wheel file", hint="copy the whole wheelhouse directory, lock files and files/ together")
    final = cache.path_for(expected, name)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, name_tmp = exclusive_temp(final, WHEEL_MODE)
    tmp = Path(name_tmp)
    try:
        actual, n = copy_hashed(path, os.fdopen(fd, "wb"))
    except BaseException:
        unlink(tmp)
        raise
    if actual != expected or (size is not None and n != size):
        unlink(tmp)
        raise IntegrityError(
            str(path),
            f"sha256 {actual} ({n} bytes) does not match the lock's {expected}" + (f" ({size} bytes)" if size is not None else ""),
            hint="the local file is not the one the lock was made with; nothing was installed",
        )
    os.replace(tmp, final)
    cache.mark_verified(final, actual)
    return FetchedWheel(path=final, sha256=actual, size=n)


# -- plans ---------------------------------------------------------------------------------------


def files_to_fetch(plan: LockPlan) -> list[LockedPackage]:
    """Packages of the plan that have a file to install (every action but keep)."""
    out = []
    for pkg in plan.packages:
        if pkg.action is Action.KEEP:
            continue
        if not pkg.url:
            raise LockFileError(f"{pkg.name} {pkg.version} ({pkg.action.value}) has no wheel URL in the plan")
        out.append(pkg)
    return out


def fetch_packages(
    packages: Sequence[LockedPackage],
    *,
    cache: WheelCache,
    fetcher: Downloader | None,
    progress: DownloadProgress | None = None,
    offline: bool = False,
    workers: int = DEFAULT_WORKERS,
) -> dict[str, FetchedWheel]:
    """Fetch and verify the wheels of these packages (a few at a time), by package name."""

    def one(pkg: LockedPackage) -> FetchedWheel:
        return fetch_verified(
            pkg.url or "", sha256=pkg.sha256, size=pkg.size, cache=cache, fetcher=fetcher, filename=pkg.filename, progress=progress, offline=offline
        )

    if len(packages) <= 1 or workers <= 1:
        return {pkg.name: one(pkg) for pkg in packages}
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="resolve-gpu-stack-download")
    futures = {pkg.name: pool.submit(one, pkg) for pkg in packages}
    try:
        done: dict[str, FetchedWheel] = {name: future.result() for name, future in futures.items()}
    except KeyboardInterrupt:
        # Ctrl-C: do not wait for a worker stuck in a stalled read (the read timeout may be many
        # seconds away); the process is ending, and a part already downloaded resumes next time.
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return done


def fill_hashes(
    plan: LockPlan,
    *,
    cache: WheelCache,
    fetcher: Downloader | None,
    progress: DownloadProgress | None = None,
    offline: bool = False,
) -> LockPlan:
    """The plan with a sha256 and size for every package to install whose index gave no hash.

    Each such wheel is downloaded once into the wheel cache and hashed; kept packages are never
    downloaded. Packages that already have a sha256 are left alone (and not downloaded).
    """
    missing = [pkg for pkg in files_to_fetch(plan) if not pkg.sha256]
    if not missing:
        return plan
    with cache.in_use():
        fetched = fetch_packages(missing, cache=cache, fetcher=fetcher, progress=progress, offline=offline)
    packages = tuple(
        dataclasses.replace(pkg, sha256=fetched[pkg.name].sha256, size=fetched[pkg.name].size) if pkg.name in fetched and not pkg.sha256 else pkg
        for pkg in plan.packages
    )
    return dataclasses.replace(plan, packages=packages)


__all__ = [
    "DownloadProgress",
    "Downloader",
    "MAX_UNLISTED_BYTES",
    "StreamedFile",
    "FetchedWheel",
    "WheelCache",
    "fetch_packages",
    "fetch_verified",
    "check_learned",
    "fetch_wheel",
    "file_sha256",
    "files_to_fetch",
    "fill_hashes",
    "store_local",
    "wheel_filename",
]
