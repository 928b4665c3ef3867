"""The HTTP edge: index pages and wheel METADATA over HTTP, with retries, a cache and a policy.

``HttpFetcher`` implements ``finder.Fetcher`` as a composition:

- ``transport.Transport``: one shared ``client.Client`` (connection reuse), redirects followed by
  hand under ``urlpolicy`` (plain ``http://`` only for loopback hosts and
  ``allow_insecure_hosts``; never https -> http), credentials per origin, retries with backoff
  (404/410 is an answer; 429/5xx, resets, timeouts and short bodies are retried; anything else
  is a ``CrawlError`` naming the URL), capped body reads;
- ``pages.PageReader``: index pages, revalidated against the cache;
- ``metadata.MetadataReader``: METADATA from the cache, a sidecar, range reads or the whole wheel;
- ``stream.open_stream``: whole files for ``download.py`` (``open_stream`` and ``retrying``);
- a thread pool, so pages and METADATA files are fetched concurrently.

Made from one ``settings.FetchSettings`` (its transport's settings, the caps, the scan budget).
Bodies are streamed and capped (``max_page_bytes``, ``max_metadata_bytes``); nothing is
buffered without a bound except a whole wheel, which goes to a temporary file. Every URL that
reaches a message, a log line or the cache has its credentials stripped.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from functools import partial
from typing import TYPE_CHECKING, TypeVar

from ..model import IndexFile, PageResponse
from .cache import HttpCache
from .metadata import MetadataReader, TailMemo
from .pages import PageReader
from .scan.access import RangeAccess, ScanAccess
from .settings import FetchSettings
from .stream import StreamAnswer, open_stream
from .transport import FetchStats, Transport
from .urlpolicy import Credentials

if TYPE_CHECKING:
    from ..data.definitions import IndexDefinition
    from .scan.classify import ScanRecord
    from .scan.exports import ExportsRecord
    from .scan.rangeproc import RangeProcess

log = logging.getLogger(__name__)
T = TypeVar("T")


# Set by the program's SIGINT handler: from then on ``close`` does not wait for a worker stuck in a
# stalled read (the process is ending; the read timeout may be many seconds away).
INTERRUPTED = threading.Event()


class HttpFetcher:
    """Fetches index pages and wheel METADATA over HTTP(S). See the module docstring."""

    concurrent_calls = True  # safe to call from several threads at once (see finder.Fetcher)

    def __init__(
        self,
        settings: FetchSettings | None = None,
        *,
        cache: HttpCache | None,
        progress: Callable[[str], None] | None = None,
        on_retry: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings = settings or FetchSettings()
        self.cache = cache
        self.concurrency = settings.connections
        self.scan_records: Callable[[str], ScanRecord | None] | None = None  # scan records by sha256 (``net/scan/records.py``), set by the session
        self.exports_records: Callable[[str], ExportsRecord | None] | None = None  # torch wheels' exports records by sha256, set with them
        self.progress = progress
        self.transport = Transport(settings.transport)
        self._beside: RangeProcess | None = None
        self.transport.on_retry = on_retry  # told each retry, as it is scheduled
        self._pages = PageReader(self.transport, cache, max_bytes=settings.max_page_bytes)
        self.tails = TailMemo()  # zip tails of native wheels read for METADATA: the classifier starts from them
        self._metadata = MetadataReader(self.transport, cache, max_bytes=settings.max_metadata_bytes, say=self._say, tails=self.tails)
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self._abandoned = False

    @property
    def stats(self) -> FetchStats:
        return self.transport.stats

    @property
    def credentials(self) -> Credentials:
        return self.transport.credentials

    # -- Fetcher protocol ---------------------------------------------------------------------
    def fetch_pages(self, urls: Sequence[str], *, index: IndexDefinition) -> dict[str, PageResponse]:
        return self.fetch_page_round([(urls, index)])

    def fetch_page_round(self, batches: Sequence[tuple[Sequence[str], IndexDefinition]]) -> dict[str, PageResponse]:
        jobs: dict[str, Callable[[], PageResponse]] = {u: partial(self._pages.fetch, u, index) for urls, index in batches for u in urls}
        if len(jobs) > 1:
            self._say(f"fetching {len(jobs)} pages from {', '.join(dict.fromkeys(index.name for _, index in batches))}")
        return self._run_all(jobs)

    def fetch_metadata(self, files: Sequence[IndexFile]) -> dict[str, bytes]:
        todo = list({f.url: f for f in files}.values())
        if len(todo) > 1:
            self._say(f"reading the metadata of {len(todo)} wheels")
        return self._run_all({f.url: partial(self._metadata.fetch, f) for f in todo})

    # -- what a scan reads through (net/scan/readers.py makes the classifier and exports reader) -------
    def scan_access(self) -> ScanAccess:
        """Range reads through this fetcher: its transport, cache and connections, the zip tails its
        METADATA reads left, its scan budget, its second process and the scan records set on it."""
        ranges = RangeAccess(
            transport=self.transport,
            cache=self.cache,
            tails=self.tails,
            connections=self.concurrency,
            scan_budget=self.settings.scan_budget,
            say=self.progress,
            beside=self.range_process,
            records=self.scan_records,
            exports_records=self.exports_records,
        )
        return ScanAccess(ranges=ranges)

    @property
    def range_process(self) -> RangeProcess | None:
        """The second process scans and exports reads run in (one per fetcher, made for the first
        ``scan_access`` and started by its first job; ``net/scan/rangeproc.py``); None when this
        fetcher was made without one."""
        if not self.settings.range_process:
            return None
        # the second process's parent side (rules.abi, net.process): a scan's only: +6.5 ms of CPU before a resolve's first request
        from .scan.rangeproc import ChildSettings, RangeProcess, lowest_log_level

        with self._pool_lock:
            if self._beside is None:
                self._beside = RangeProcess(
                    ChildSettings(fetch=self.settings, log_level=lowest_log_level()),
                    credentials=self.transport.credentials,
                    stats=self.transport.stats,
                    say=self.progress,
                    on_retry=self.transport.on_retry,
                )
            return self._beside

    def close(self) -> None:
        with self._pool_lock:
            pool, self._pool = self._pool, None
            beside, self._beside = self._beside, None
        if beside is not None:
            beside.close()
        if self._abandoned or INTERRUPTED.is_set():  # Ctrl-C: leave workers in their reads (the process is ending)
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
            return
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        self.transport.close()
        if self.cache is not None:
            self.cache.close()  # every entry this command read is on disk for the next one

    def __enter__(self) -> HttpFetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- downloads (download.Downloader) ------------------------------------------------------
    def open_stream(self, url: str, *, start: int = 0, if_range: str | None = None) -> StreamAnswer:
        """A whole file streamed by this fetcher's policy (see ``stream.open_stream``); run it inside
        ``retrying``: 429/5xx, resets, timeouts and short bodies are retried there."""
        return open_stream(self.transport, url, start=start, if_range=if_range)

    def retrying(self, url: str, attempt: Callable[[], T]) -> T:
        """Run ``attempt`` with this fetcher's retries and backoff (see ``open_stream``)."""
        return self.transport.retrying(url, attempt)

    # -- plumbing -----------------------------------------------------------------------------
    def _run_all(self, jobs: dict[str, Callable[[], T]]) -> dict[str, T]:
        if len(jobs) <= 1:
            return {key: job() for key, job in jobs.items()}
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="resolve-gpu-stack-http")
            pool = self._pool
        futures = {pool.submit(job): key for key, job in jobs.items()}
        out: dict[str, T] = {}
        try:
            for future in as_completed(futures):
                out[futures[future]] = future.result()
        except BaseException as exc:
            for future in futures:
                future.cancel()
            if isinstance(exc, KeyboardInterrupt):
                self._abandoned = True  # Ctrl-C: close() must not wait for a worker stuck in a read
            raise
        return {key: out[key] for key in jobs}

    def _say(self, message: str) -> None:
        log.info("%s", message)
        if self.progress is not None:
            self.progress(message)


__all__ = ["INTERRUPTED", "FetchStats", "HttpFetcher", "StreamAnswer"]
