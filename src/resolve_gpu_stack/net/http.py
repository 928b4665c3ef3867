"""The HTTP edge: index pages and wheel METADATA over httpx, with retries, a cache and a policy.

``HttpFetcher`` implements ``finder.Fetcher``. One shared ``httpx.Client`` (connection reuse), a
thread pool for concurrency, redirects followed by hand so the policy (``urlpolicy``) applies
to every hop:

- plain ``http://`` only for loopback hosts and ``allow_insecure_hosts``; never https -> http;
- credentials (``user:token@`` in a base URL, or netrc) go only to the host they belong to, and
  every URL that reaches a message, a log line or the cache has them stripped;
- 404/410 is an answer; 429/5xx, resets, timeouts and short bodies are retried with backoff;
  anything else is a ``CrawlError`` naming the URL.

Bodies are streamed and capped (``max_page_bytes``, ``max_metadata_bytes``); nothing is
buffered without a bound except a whole wheel, which goes to a temporary file.
"""

from __future__ import annotations

import hashlib
import logging
import random
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar
from urllib.parse import urljoin, urlsplit

import httpx

from ..errors import CrawlError, IntegrityError
from ..index import zipmeta
from ..index.parse import MAX_METADATA_BYTES
from ..model import IndexFile, IndexPage, PageResponse
from ..urls import redact_url
from .cache import HttpCache
from .urlpolicy import (
    CREDENTIALS_HINT,
    Credentials,
    check_redirect,
    check_url_allowed,
    is_loopback,
    page_content_type,
    parse_retry_after,
    strip_userinfo,
)

if TYPE_CHECKING:
    from ..data.definitions import IndexDefinition

log = logging.getLogger(__name__)
T = TypeVar("T")

JSON_ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
HTML_ACCEPT = "text/html"
REDIRECTS = frozenset({301, 302, 303, 307, 308})
MAX_REDIRECTS = 10
DRAIN_BYTES = 64 * 1024  # an unread body up to this size is read to keep its connection
MAX_CENTRAL_DIRECTORY = 64 * 2**20


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("resolve-gpu-stack")
    except Exception:  # noqa: BLE001 - not installed as a distribution
        return "0"


@dataclass
class FetchStats:
    """Counters for a run; safe to update from worker threads."""

    requests: int = 0  # HTTP requests sent (every redirect hop and retry counts)
    bytes_received: int = 0  # body bytes off the wire
    cache_hits: int = 0  # pages answered 304 + METADATA served from the cache
    retries: int = 0
    full_downloads: int = 0  # wheels downloaded whole because the server ignored Range
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **counts: int) -> None:
        with self._lock:
            for name, n in counts.items():
                setattr(self, name, getattr(self, name) + n)


# -- retries ---------------------------------------------------------------------------------
class _Retryable(Exception):
    """A failure worth another attempt: 429/5xx, a reset, a timeout, a short body."""

    def __init__(self, cause: str, *, wait: float | None = None, status: bool = False) -> None:
        super().__init__(cause)
        self.cause = cause
        self.wait = wait
        self.status = status

    def final(self, attempts: int) -> str:
        if attempts == 1:
            return self.cause
        return f"{self.cause} after {attempts} attempts" if self.status else f"{self.cause} (tried {attempts} times)"


def _transport_cause(exc: httpx.TransportError, timeout: float) -> str:
    if isinstance(exc, httpx.ConnectTimeout):
        return f"connect timed out after {timeout:g} s"
    if isinstance(exc, httpx.TimeoutException):
        return f"timed out after {timeout:g} s"
    text = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.ConnectError):
        return "connection refused" if "refused" in text.lower() else f"cannot connect ({text})"
    return f"connection reset ({text})"


@dataclass(frozen=True, slots=True)
class _Span:
    start: int
    data: bytes
    total: int  # size of the whole file
    source: str = ""  # the URL that answered (after redirects): later ranges go straight there

    def slice(self, start: int, end: int) -> bytes | None:
        if self.start <= start and end <= self.start + len(self.data):
            return self.data[start - self.start : end - self.start]
        return None


@dataclass(frozen=True, slots=True)
class _Whole:
    metadata: bytes  # read from a whole download: the server ignored Range


class HttpFetcher:
    """Fetches index pages and wheel METADATA over HTTP(S). See the module docstring."""

    concurrent_calls = True  # safe to call from several threads at once (see finder.Fetcher)

    def __init__(
        self,
        *,
        cache: HttpCache | None,
        timeout: float = 30.0,
        retries: int = 4,
        concurrency: int = 32,  # uv uses 50; 16 made a 50-page round four waves at WAN latency
        allow_insecure_hosts: Sequence[str] = (),
        netrc_path: Path | None = None,
        progress: Callable[[str], None] | None = None,
        max_page_bytes: int = 64 * 2**20,
        max_metadata_bytes: int = MAX_METADATA_BYTES,
        user_agent: str = f"resolve-gpu-stack/{_version()}",
        backoff_base: float = 0.2,
        max_backoff: float = 10.0,
        max_retry_after: float = 60.0,
        trust_env: bool = True,
    ) -> None:
        self.cache = cache
        self.result_store = cache  # finder.Fetcher: the resolver keeps its plans in the cache
        self.timeout = timeout
        self.retries = max(0, retries)
        self.concurrency = max(1, concurrency)
        self.allow_insecure_hosts = tuple(allow_insecure_hosts)
        self.progress = progress
        self.max_page_bytes = max_page_bytes
        self.max_metadata_bytes = max_metadata_bytes
        self.backoff_base = backoff_base
        self.max_backoff = max_backoff
        self.max_retry_after = max_retry_after
        self.stats = FetchStats()
        self.credentials = Credentials(netrc_path)
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout),
            limits=httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency),
            headers={"User-Agent": user_agent},
            follow_redirects=False,
            trust_env=trust_env,
        )
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    # -- Fetcher protocol ---------------------------------------------------------------------
    def fetch_pages(self, urls: Sequence[str], *, index: IndexDefinition) -> dict[str, PageResponse]:
        todo = list(dict.fromkeys(urls))
        if len(todo) > 1:
            self._say(f"fetching {len(todo)} pages from {index.name}")
        return self._run_all({u: (lambda u=u: self._fetch_page(u, index)) for u in todo})

    def fetch_metadata(self, files: Sequence[IndexFile]) -> dict[str, bytes]:
        todo = list({f.url: f for f in files}.values())
        if len(todo) > 1:
            self._say(f"reading the metadata of {len(todo)} wheels")
        return self._run_all({f.url: (lambda f=f: self._fetch_metadata(f)) for f in todo})

    def close(self) -> None:
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        self._client.close()

    def __enter__(self) -> HttpFetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- pages --------------------------------------------------------------------------------
    def _fetch_page(self, url: str, index: IndexDefinition) -> PageResponse:
        check_url_allowed(url, self.allow_insecure_hosts)
        self.credentials.remember(index.url)
        self.credentials.remember(url)
        variant = "json" if index.dialect == "json-or-html" else "html"
        cached = self.cache.get_page(url, variant=variant) if self.cache else None
        headers = {"Accept": JSON_ACCEPT if variant == "json" else HTML_ACCEPT}
        if cached and cached.etag:
            headers["If-None-Match"] = cached.etag
        if cached and cached.last_modified:
            headers["If-Modified-Since"] = cached.last_modified

        def attempt() -> PageResponse:
            resp, final = self._open(url, headers)
            try:
                if resp.status_code == 304 and cached is not None:
                    self.stats.add(cache_hits=1)
                    page = IndexPage(url=cached.url, content=cached.content, content_type=cached.content_type)
                    return PageResponse(url=url, page=page, from_cache=True)
                if resp.status_code in (404, 410):
                    if cached is not None and self.cache:
                        self.cache.drop_page(url, variant=variant)
                    return PageResponse(url=url, page=None)
                self._check_status(resp, url, ok=(200, 203))
                body = self._read_body(resp, url, self.max_page_bytes, "index page")
            finally:
                self._finish(resp)
            try:
                ctype = page_content_type(resp.headers.get("content-type"), body)
            except ValueError as exc:
                raise CrawlError(redact_url(url), str(exc)) from None
            etag, modified = resp.headers.get("etag"), resp.headers.get("last-modified")
            if self.cache and (etag or modified):
                self.cache.put_page(
                    url, body, variant=variant, final_url=final, content_type=ctype, etag=etag, last_modified=modified
                )
            return PageResponse(url=url, page=IndexPage(url=final, content=body, content_type=ctype))

        return self._retrying(url, attempt)

    # -- metadata -----------------------------------------------------------------------------
    def _fetch_metadata(self, file: IndexFile) -> bytes:
        url = file.url.split("#", 1)[0]
        check_url_allowed(url, self.allow_insecure_hosts)
        digest = file.metadata_sha256 if file.has_metadata else None
        if self.cache:
            hit = self.cache.get_metadata(url, metadata_sha256=digest, sha256=file.sha256)
            if hit is not None:
                self.stats.add(cache_hits=1)
                return hit
        data = self._fetch_sidecar(url + ".metadata", digest) if file.has_metadata else None
        if data is None:
            data = self._range_metadata(url, file)
        if self.cache:
            self.cache.put_metadata(url, data, metadata_sha256=digest, sha256=file.sha256)
        return data

    def _fetch_sidecar(self, url: str, digest: str | None) -> bytes | None:
        """PEP 658 ``<wheel>.metadata``, digest-checked; None when the server has none (404/410)."""

        def attempt() -> bytes | None:
            resp, _ = self._open(url, {})
            try:
                if resp.status_code in (404, 410):
                    log.info("%s: no metadata sidecar (%d); reading the wheel instead", redact_url(url), resp.status_code)
                    return None
                self._check_status(resp, url, ok=(200, 203))
                return self._read_body(resp, url, self.max_metadata_bytes, "METADATA")
            finally:
                self._finish(resp)

        data = self._retrying(url, attempt)
        if data is not None and digest and hashlib.sha256(data).hexdigest() != digest.lower():
            raise IntegrityError(
                redact_url(url),
                f"sha256 {hashlib.sha256(data).hexdigest()} does not match {digest} promised by the index page",
                hint="the index or a proxy served stale or altered metadata; nothing was cached",
            )
        return data

    def _range_metadata(self, url: str, file: IndexFile) -> bytes:
        """METADATA from the tail, central directory and member of the remote zip."""
        tail = self._range(url, f"bytes=-{zipmeta.TAIL_BYTES}", None, file)
        if isinstance(tail, _Whole):
            return tail.metadata
        try:
            eocd = zipmeta.find_eocd(tail.data, tail.total)
            if eocd.cd_size > MAX_CENTRAL_DIRECTORY:
                raise zipmeta.ZipError(f"central directory of {eocd.cd_size} bytes is over the {MAX_CENTRAL_DIRECTORY}-byte cap")
            spans = [tail]
            cd_end = eocd.cd_offset + eocd.cd_size
            cd = tail.slice(eocd.cd_offset, cd_end)
            if cd is None:
                got = self._need(url, tail.source, eocd.cd_offset, tail.start, file)
                if isinstance(got, _Whole):
                    return got.metadata
                spans.append(_Span(start=got.start, data=got.data + tail.data, total=tail.total, source=tail.source))
                cd = spans[-1].slice(eocd.cd_offset, cd_end) or b""
            entry = zipmeta.metadata_member(zipmeta.parse_central_directory(cd, eocd))
            zipmeta.check_member_size(entry, self.max_metadata_bytes)
            start, end = zipmeta.member_span(entry, tail.total)
            for _ in range(2):
                blob = next((b for s in spans if (b := s.slice(start, end)) is not None), None)
                if blob is None:
                    got = self._need(url, tail.source, start, end, file)
                    if isinstance(got, _Whole):
                        return got.metadata
                    spans.append(got)
                    blob = got.data
                try:
                    return zipmeta.inflate_member(blob, entry, max_size=self.max_metadata_bytes)
                except zipmeta.NeedMoreBytes as more:
                    end = min(start + more.needed, tail.total)
            raise zipmeta.ZipError(f"{entry.name}: local header larger than expected")
        except zipmeta.MemberTooLarge as exc:
            raise IntegrityError(redact_url(url), f"refusing METADATA: {exc}") from None
        except zipmeta.ZipError as exc:
            raise CrawlError(redact_url(url), f"cannot read METADATA from the wheel: {exc}") from None

    def _need(self, url: str, source: str, start: int, end: int, file: IndexFile) -> _Span | _Whole:
        return self._range(url, f"bytes={start}-{end - 1}", start, file, via=source)

    def _range(self, url: str, spec: str, start: int | None, file: IndexFile, *, via: str = "") -> _Span | _Whole:
        """One range request (``start`` None: a suffix range). A 200 means the whole file came."""

        def attempt() -> _Span | _Whole:
            resp, final = self._open(via or url, {"Range": spec, "Accept-Encoding": "identity"})
            try:
                if resp.status_code == 200:
                    return _Whole(self._metadata_from_whole(resp, url, file))
                if resp.status_code in (404, 410):
                    raise CrawlError(redact_url(url), f"{resp.status_code} {resp.reason_phrase}: the index lists this wheel but the server does not have it")
                self._check_status(resp, url, ok=(206,))
                span = self._content_range(resp, url, spec, start)
                want = span[1] - span[0] + 1
                data = self._read_body(resp, url, want, "range")
            finally:
                self._finish(resp)
            if len(data) != want:
                raise CrawlError(redact_url(url), f"range {spec} answered {len(data)} bytes, Content-Range says {want}")
            return _Span(start=span[0], data=data, total=span[2], source=final)

        return self._retrying(url, attempt)

    @staticmethod
    def _content_range(resp: httpx.Response, url: str, spec: str, start: int | None) -> tuple[int, int, int]:
        value = resp.headers.get("content-range", "")
        try:
            unit, _, rest = value.partition(" ")
            span, _, total = rest.partition("/")
            first, _, last = span.partition("-")
            a, b, n = int(first), int(last), int(total)
        except ValueError:
            raise CrawlError(redact_url(url), f"206 answer to {spec} with a bad Content-Range {value!r}") from None
        if unit != "bytes" or not 0 <= a <= b < n or (start is not None and a != start) or (start is None and b != n - 1):
            raise CrawlError(redact_url(url), f"206 answer to {spec} with Content-Range {value!r}")
        return a, b, n

    def _metadata_from_whole(self, resp: httpx.Response, url: str, file: IndexFile) -> bytes:
        """The server ignored Range: stream the wheel to a temporary file and read METADATA there."""
        size = resp.headers.get("content-length")
        label = f"{int(size) / 2**20:.1f} MB" if size and size.isdigit() else "unknown size"
        self._say(f"server ignored Range for {file.filename}; downloading the whole wheel ({label})")
        digest = hashlib.sha256()
        with tempfile.TemporaryFile(prefix="resolve-gpu-stack-") as tmp:
            n = self._stream_to(resp, url, tmp, digest)
            if file.size is not None and n != file.size:
                raise IntegrityError(redact_url(url), f"downloaded {n} bytes, the index page says {file.size}")
            if file.sha256 and digest.hexdigest() != file.sha256.lower():
                raise IntegrityError(redact_url(url), f"sha256 {digest.hexdigest()} does not match {file.sha256} from the index page")
            tmp.seek(0)
            try:
                data = zipmeta.read_metadata_from_zip(tmp, max_size=self.max_metadata_bytes)
            except zipmeta.MemberTooLarge as exc:
                raise IntegrityError(redact_url(url), f"refusing METADATA: {exc}") from None
            except zipmeta.ZipError as exc:
                raise CrawlError(redact_url(url), f"cannot read METADATA from the wheel: {exc}") from None
        self.stats.add(full_downloads=1)
        message = f"server ignored Range; downloaded the whole wheel ({n / 2**20:.1f} MB) to read its metadata: {redact_url(url)}"
        log.warning("%s", message)
        self._say(message)
        return data

    # -- downloads (public hook for download.py) ---------------------------------------------
    def open_stream(self, url: str, *, start: int = 0, if_range: str | None = None) -> StreamAnswer:
        """GET ``url`` (a whole file) by this fetcher's policy, streamed; close the answer when done.

        ``start > 0`` asks for ``Range: bytes=<start>-`` (with ``If-Range`` when a validator is
        given). The answer says where its body starts: 206 from ``start``, 200 from zero (the
        server ignored the range or the file changed), 416 when ``start`` is past the end. Run it
        inside ``retrying``: 429/5xx, resets, timeouts and short bodies are retried there.
        """
        url = url.split("#", 1)[0]
        headers = {"Accept-Encoding": "identity"}
        if start > 0:
            headers["Range"] = f"bytes={start}-"
            if if_range:
                headers["If-Range"] = if_range
        resp, _ = self._open(url, headers)
        try:
            status = resp.status_code
            if status in (404, 410):
                raise CrawlError(redact_url(url), f"{status} {resp.reason_phrase}: the index lists this file but the server does not have it")
            total: int | None = None
            offset = 0
            if status == 416 and start > 0:
                _, _, size = resp.headers.get("content-range", "").partition("/")
                total = int(size) if size.strip().isdigit() else None
                offset = start
            else:
                self._check_status(resp, url, ok=(200, 206) if start > 0 else (200,))
                if status == 206:
                    offset, _, total = self._content_range(resp, url, f"bytes={start}-", start)
                else:
                    declared = resp.headers.get("content-length", "")
                    identity = resp.headers.get("content-encoding", "identity").lower() in ("", "identity")
                    total = int(declared) if declared.isdigit() and identity else None
        except BaseException:
            self._finish(resp)
            raise
        return StreamAnswer(self, resp, url, status=status, offset=offset, total=total)

    def retrying(self, url: str, attempt: Callable[[], T]) -> T:
        """Run ``attempt`` with this fetcher's retries and backoff (see ``open_stream``)."""
        return self._retrying(url, attempt)

    # -- HTTP core ----------------------------------------------------------------------------
    def _open(self, url: str, headers: dict[str, str]) -> tuple[httpx.Response, str]:
        """GET ``url`` following redirects by policy; the open streamed response and final URL.

        The final URL has no credentials. Authorization goes to each hop's own origin only.
        """
        current = url
        seen = [strip_userinfo(url)]
        for _ in range(MAX_REDIRECTS + 1):
            check_url_allowed(current, self.allow_insecure_hosts)
            hop_headers = dict(headers)
            auth = self.credentials.header_for(current)
            if auth:
                hop_headers["Authorization"] = auth
            target = strip_userinfo(current).split("#", 1)[0]
            try:
                request = self._client.build_request("GET", target, headers=hop_headers)
            except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
                raise CrawlError(redact_url(current), f"invalid URL: {exc}") from None
            self.stats.add(requests=1)
            try:
                resp = self._client.send(request, stream=True)
            except httpx.UnsupportedProtocol as exc:
                raise CrawlError(redact_url(current), f"invalid URL: {exc}") from None
            except httpx.TransportError as exc:
                raise _Retryable(_transport_cause(exc, self.timeout)) from None
            log.debug("GET %s -> %d", target, resp.status_code)
            location = resp.headers.get("location")
            if resp.status_code not in REDIRECTS or not location:
                return resp, target
            self._finish(resp)
            nxt = strip_userinfo(urljoin(target, location.strip()))
            check_redirect(target, nxt)
            if nxt in seen:
                chain = " -> ".join(redact_url(u) for u in [*seen, nxt])
                raise CrawlError(redact_url(url), f"redirect loop: {chain}")
            seen.append(nxt)
            current = nxt
        raise CrawlError(redact_url(url), f"more than {MAX_REDIRECTS} redirects (last: {redact_url(current)})")

    def _check_status(self, resp: httpx.Response, url: str, *, ok: tuple[int, ...]) -> None:
        status = resp.status_code
        if status in ok:
            return
        what = f"{status} {resp.reason_phrase}".strip()
        if status == 429 or status >= 500:
            wait = parse_retry_after(resp.headers.get("retry-after"))
            raise _Retryable(what, wait=None if wait is None else min(wait, self.max_retry_after), status=True)
        if status in (401, 403):
            host = urlsplit(url).hostname or "?"
            sent = self.credentials.header_for(url) is not None
            hint = f"the credentials sent to {host} were refused" if sent else CREDENTIALS_HINT
            raise CrawlError(redact_url(url), what, hint=hint)
        raise CrawlError(redact_url(url), f"unexpected answer {what}")

    def _read_body(self, resp: httpx.Response, url: str, cap: int, what: str) -> bytes:
        """The whole (decoded) body, at most ``cap`` bytes; a short body is retryable."""
        declared = resp.headers.get("content-length")
        expected = int(declared) if declared and declared.isdigit() else None
        identity = resp.headers.get("content-encoding", "identity").lower() in ("", "identity")
        if identity and expected is not None and expected > cap:
            raise CrawlError(redact_url(url), f"{what} is {expected} bytes, over the {cap}-byte cap")
        chunks: list[bytes] = []
        got = 0
        try:
            for chunk in resp.iter_bytes():
                got += len(chunk)
                if got > cap:
                    raise CrawlError(redact_url(url), f"{what} is over the {cap}-byte cap; stopped reading")
                chunks.append(chunk)
        except httpx.DecodingError as exc:
            raise CrawlError(redact_url(url), f"cannot decode the {what}: {exc}") from None
        except httpx.TransportError as exc:
            self._raise_short(resp, expected, exc)
        self._raise_short(resp, expected, None)
        return b"".join(chunks)

    def _stream_to(self, resp: httpx.Response, url: str, out: IO[bytes], digest: Any) -> int:
        declared = resp.headers.get("content-length")
        expected = int(declared) if declared and declared.isdigit() else None
        n = 0
        try:
            for chunk in resp.iter_bytes():
                out.write(chunk)
                digest.update(chunk)
                n += len(chunk)
        except httpx.TransportError as exc:
            self._raise_short(resp, expected, exc)
        self._raise_short(resp, expected, None)
        return n

    def _raise_short(self, resp: httpx.Response, expected: int | None, exc: httpx.TransportError | None) -> None:
        raw = resp.num_bytes_downloaded
        if expected is not None and raw < expected:
            raise _Retryable(f"body truncated: {raw} of {expected} bytes")
        if exc is not None:
            raise _Retryable(_transport_cause(exc, self.timeout))

    def _finish(self, resp: httpx.Response) -> None:
        if not resp.is_stream_consumed and not resp.is_closed:
            # An unread body, however empty (a 304, a 404 page), costs the connection: read a
            # small one so the connection goes back to the pool for the next request.
            declared = resp.headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) <= DRAIN_BYTES:
                try:
                    for _ in resp.iter_raw():
                        pass
                except httpx.HTTPError:
                    pass
        resp.close()
        self.stats.add(bytes_received=resp.num_bytes_downloaded)

    def _retrying(self, url: str, attempt: Callable[[], T]) -> T:
        attempts = self.retries + 1
        for n in range(1, attempts + 1):
            try:
                return attempt()
            except _Retryable as exc:
                if n == attempts:
                    raise CrawlError(redact_url(url), exc.final(attempts)) from None
                delay = exc.wait if exc.wait is not None else self._backoff(n)
                self.stats.add(retries=1)
                log.debug("%s: %s; retry %d of %d in %.2f s", redact_url(url), exc.cause, n, self.retries, delay)
                time.sleep(delay)
        raise AssertionError("unreachable")

    def _backoff(self, attempt: int) -> float:
        return min(self.max_backoff, self.backoff_base * 2 ** (attempt - 1)) * random.uniform(0.5, 1.5)

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
        except BaseException:
            for future in futures:
                future.cancel()
            raise
        return {key: out[key] for key in jobs}

    def _say(self, message: str) -> None:
        log.info("%s", message)
        if self.progress is not None:
            self.progress(message)


class StreamAnswer:
    """An open streamed answer from ``HttpFetcher.open_stream``: read ``chunks()``, then close.

    ``status`` 200 / 206 / 416; ``offset`` is where the body starts in the file; ``total`` the
    file's size when the server says; ``validator`` the ETag (or Last-Modified) for ``If-Range``.
    """

    def __init__(self, fetcher: HttpFetcher, resp: httpx.Response, url: str, *, status: int, offset: int, total: int | None) -> None:
        self._fetcher = fetcher
        self._resp = resp
        self.url = url
        self.status = status
        self.offset = offset
        self.total = total
        etag = resp.headers.get("etag")
        strong = etag if etag and not etag.startswith("W/") else None  # If-Range needs a strong validator
        self.validator: str | None = strong or resp.headers.get("last-modified")

    def chunks(self) -> Iterable[bytes]:
        """The body; a reset, a timeout or a body shorter than announced is retryable."""
        declared = self._resp.headers.get("content-length")
        expected = int(declared) if declared and declared.isdigit() else None
        try:
            yield from self._resp.iter_bytes()
        except httpx.TransportError as exc:
            self._fetcher._raise_short(self._resp, expected, exc)
        except httpx.DecodingError as exc:
            raise CrawlError(redact_url(self.url), f"cannot decode the download: {exc}") from None
        self._fetcher._raise_short(self._resp, expected, None)

    def close(self) -> None:
        self._fetcher._finish(self._resp)

    def __enter__(self) -> StreamAnswer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = [
    "Credentials",
    "FetchStats",
    "HttpFetcher",
    "StreamAnswer",
    "check_redirect",
    "check_url_allowed",
    "is_loopback",
    "page_content_type",
    "parse_retry_after",
    "strip_userinfo",
]
