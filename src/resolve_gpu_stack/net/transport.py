"""The HTTP transport: one connection pool (``client/``), every request and redirect hop under ``urlpolicy``.

``Transport`` is what the page reader, the METADATA reader and wheel streaming share:

- ``open``: a streamed GET, redirects followed by hand so the policy applies to every hop (plain
  ``http://`` only for loopback hosts and ``allow_insecure_hosts``; never https -> http), and
  credentials (``user:token@`` in a URL seen before, or netrc) sent to their own origin only;
- ``check_status``: 429/5xx are retryable (``Retry-After`` honoured, capped), 401/403 say what to
  do about credentials, anything else unexpected is a ``CrawlError`` naming the URL (``raise_if_gone``:
  a 404/410 for a file an index lists);
- ``read_body`` / ``iter_body`` / ``stream_to``: bodies streamed, capped where buffered (a body
  of declared length, not encoded, in one read into a buffer of that size), and a reset, a
  timeout or a body shorter than announced is retryable;
- a deadline per request (``deadline.py``: ``REQUEST_DEADLINE_FACTOR`` x ``timeout`` for the
  headers from the first byte sent, 1xx interim answers included; as much again for the body, plus
  credit for its bytes): a server that trickles its answer ends in "no complete answer within N
  s", not retried;
- a setting at fault (``client.ConfigurationError``: a proxy URL that is not http(s), a trust
  store that cannot be loaded, a certificate that does not verify) is a ``CrawlError`` at once,
  never retried, its hint saying what to change;
- ``finish``: release a response (a small unread body is drained to keep its connection);
- ``retrying``: run an attempt with retries and exponential backoff (``backoff``), each retry on a
  fresh connection (the pooled one may be what broke); ``check_status`` closes the connection of
  any answer it refuses;
- ``stats``: counters for the run.

Every URL that reaches a message or a log line has its credentials redacted.
"""

from __future__ import annotations

import logging
import random
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Protocol, TypeVar
from urllib.parse import urljoin, urlsplit

from ..errors import CrawlError, IntegrityError, printable
from ..urls import bare_url, redact_url, strip_userinfo
from . import deadline as deadlines
from .client import Client, ConfigurationError, DecodingError, HostNotFound, InvalidURL, Response, TransportError
from .client import ConnectError as _ConnectError
from .client import ConnectTimeout as _ConnectTimeout
from .client import Timeout as _Timeout
from .settings import TransportSettings
from .urlpolicy import CREDENTIALS_HINT, Credentials, check_redirect, check_url_allowed, origin_prefix, parse_retry_after

log = logging.getLogger(__name__)
T = TypeVar("T")

REDIRECTS = frozenset({301, 302, 303, 307, 308})
MAX_REDIRECTS = 10
DRAIN_BYTES = 64 * 1024  # an unread body up to this size is read to keep its connection
LONG_WAIT = 5.0  # seconds: a retry that waits this long is said, even after the first of its URL


@dataclass
class FetchStats:
    """Counters for a run; safe to update from worker threads."""

    requests: int = 0  # HTTP requests sent (every redirect hop and retry counts)
    bytes_received: int = 0  # body bytes off the wire
    cache_hits: int = 0  # pages answered 304 + METADATA served from the cache
    retries: int = 0
    full_downloads: int = 0  # wheels downloaded whole because the server ignored Range
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, *, requests: int = 0, bytes_received: int = 0, cache_hits: int = 0, retries: int = 0, full_downloads: int = 0) -> None:
        with self._lock:
            self.requests += requests
            self.bytes_received += bytes_received
            self.cache_hits += cache_hits
            self.retries += retries
            self.full_downloads += full_downloads


class Digest(Protocol):
    """What ``stream_to`` feeds every chunk to (a ``hashlib`` object)."""

    def update(self, data: bytes, /) -> None: ...


# -- retries ---------------------------------------------------------------------------------
class Retryable(Exception):
    """A failure worth another attempt: 429/5xx, a reset, a timeout, a short body.

    Raised inside an attempt run by ``Transport.retrying``, which turns the last one into a
    ``CrawlError``; it never leaves ``retrying``.
    """

    def __init__(self, cause: str, *, wait: float | None = None, status: bool = False, unanswered: bool = False) -> None:
        super().__init__(cause)
        self.cause = cause
        self.wait = wait
        self.status = status
        self.unanswered = unanswered  # the host gave no answer at all (refused, timed out, reset before one): offline, or nothing listening

    def final(self, attempts: int) -> str:
        if attempts == 1:
            return self.cause
        return f"{self.cause} after {attempts} attempts" if self.status else f"{self.cause} (tried {attempts} times)"


def raise_if_gone(resp: Response, url: str, what: str) -> None:
    """A 404 or 410 for a file an index page lists (a ``what``: "wheel", "sdist", "file") is a ``CrawlError``."""
    if resp.status_code in (404, 410):
        raise CrawlError(redact_url(url), f"{resp.status_code} {resp.reason_phrase}: the index lists this {what} but the server does not have it")


NO_NETWORK_HINT = (
    "no network here? replay a recorded snapshot with --snapshot DIR (a checkout has one, recorded for Python 3.12 targets: "
    "indexes/snapshots/2026-03-07); else check the index URL (--index NAME=URL, your uv/pip configuration) and your DNS or proxy"
)
NO_NETWORK_FILE_HINT = (
    "downloading a file needs its host: a snapshot holds pages and METADATA, never wheels (the wheel cache reuses a wheel "
    "downloaded once); check the URL's host, your uv/pip configuration and your DNS or proxy"
)


def no_network_hint(url: str) -> str:
    """What to do when ``url``'s host does not resolve: a page can be replayed from a snapshot, a
    file (a wheel, an sdist) cannot."""
    path = urlsplit(url).path.lower()
    return NO_NETWORK_FILE_HINT if path.endswith((".whl", ".tar.gz", ".zip")) else NO_NETWORK_HINT


def _transport_cause(exc: TransportError, timeout: float) -> str:
    if isinstance(exc, _ConnectTimeout):
        return f"connect timed out after {timeout:g} s"
    if isinstance(exc, _Timeout):
        return f"timed out after {timeout:g} s"
    text = str(exc) or type(exc).__name__
    if isinstance(exc, _ConnectError):
        if text.startswith("cannot reach the proxy") or text.startswith("the proxy"):
            return text  # the proxy is named, not the origin
        return "connection refused" if "refused" in text.lower() else f"cannot connect ({text})"
    return f"connection reset ({text})"


def declared_length(resp: Response) -> int | None:
    """The Content-Length header as a number, or None."""
    declared = resp.headers.get("content-length")
    return int(declared) if declared and declared.isdigit() else None


def is_identity(resp: Response) -> bool:
    """True when the body is served as is (no Content-Encoding): Content-Length is its size."""
    return resp.headers.get("content-encoding", "identity").lower() in ("", "identity")


def content_range(resp: Response, url: str, spec: str, start: int | None) -> tuple[int, int, int]:
    """(first, last, total) of a 206 answer to ``spec``, checked against what was asked.

    ``start`` is the first byte asked for, or None for a suffix range (which must reach the end).
    """
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


class _Attempt(threading.local):
    fresh: bool = False


class Transport:
    """GETs by policy over one shared ``client.Client``. Safe to use from several threads."""

    def __init__(self, settings: TransportSettings | None = None) -> None:
        settings = settings or TransportSettings()
        self.settings = settings
        self.timeout = settings.timeout
        self.deadline = deadlines.REQUEST_DEADLINE_FACTOR * settings.timeout  # seconds per request, redirects and body included
        self.retries = max(0, settings.retries)
        self.allow_insecure_hosts = settings.allow_insecure_hosts
        self.backoff_base = settings.backoff_base
        self.max_backoff = settings.max_backoff
        self.max_retry_after = settings.max_retry_after
        self.stats = FetchStats()
        self.credentials = Credentials(settings.netrc_path)
        self.on_retry: Callable[[str], None] | None = None  # told each retry, as it is scheduled
        self._attempt = _Attempt()  # per thread: a retry goes out on a fresh connection
        self._allowed: set[str] = set()  # ``origin_prefix`` of every URL ``check_allowed`` let through: the verdict is the origin's
        self._client = Client(
            timeout=settings.timeout,
            max_connections=settings.max_connections,
            user_agent=settings.user_agent,
            trust_env=settings.trust_env,
            system_certs=settings.system_certs,
        )

    @property
    def tls_context(self) -> ssl.SSLContext:
        """The verifying TLS context every https connection uses (its trust store loaded at the first handshake)."""
        return self._client.tls

    def close(self) -> None:
        self._client.close()

    def check_allowed(self, url: str) -> None:
        """Raise ``CrawlError`` for a URL this transport would never fetch (see ``urlpolicy``).
        Asked twice for every page and once for every other request: decided once per origin."""
        key = origin_prefix(url)
        if key is not None and key in self._allowed:
            return
        check_url_allowed(url, self.allow_insecure_hosts)
        if key is not None:
            self._allowed.add(key)

    # -- requests -------------------------------------------------------------------------------
    def open(self, url: str, headers: dict[str, str]) -> tuple[Response, str]:
        """GET ``url`` following redirects by policy; the open streamed response and final URL.

        The final URL has no credentials. Authorization goes to each hop's own origin only. A
        connection failure is ``Retryable``; release the response with ``finish``.
        """
        current = url
        seen = [strip_userinfo(url)]
        deadline = deadlines.Deadline(seconds=self.deadline, min_rate=self.settings.min_transfer_rate)  # this request's, every hop and the body included
        for _ in range(MAX_REDIRECTS + 1):
            self.check_allowed(current)
            hop_headers = dict(headers)
            auth = self.credentials.header_for(current)
            if auth:
                hop_headers["Authorization"] = auth
            target = bare_url(current)
            try:
                prepared = self._client.check(target)  # an invalid URL is not a request sent
                self.stats.add(requests=1)
                resp = self._client.send(prepared, hop_headers, fresh=self._attempt.fresh, deadline=deadline)
            except InvalidURL as exc:
                raise CrawlError(redact_url(current), f"invalid URL: {exc}") from None
            except HostNotFound as exc:  # DNS: said once, not retried
                raise CrawlError(redact_url(current), str(exc), hint=no_network_hint(current), unreachable=True) from None
            except ConfigurationError as exc:  # a setting at fault (proxy URL, trust store, certificate): never retried
                raise CrawlError(redact_url(current), str(exc), hint=exc.hint) from None
            except TransportError as exc:
                self._raise_past_deadline(current, exc, deadline)
                raise Retryable(_transport_cause(exc, self.timeout), unanswered=True) from None
            log.debug("GET %s -> %d", target, resp.status_code)
            location = resp.headers.get("location")
            if resp.status_code not in REDIRECTS or not location:
                return resp, target
            self.finish(resp)
            nxt = strip_userinfo(urljoin(target, location.strip()))
            check_redirect(target, nxt, first=seen[0])
            if nxt in seen:
                chain = " -> ".join(redact_url(u) for u in [*seen, nxt])
                raise CrawlError(redact_url(url), f"redirect loop: {chain}")
            seen.append(nxt)
            current = nxt
        raise CrawlError(redact_url(url), f"more than {MAX_REDIRECTS} redirects (last: {redact_url(current)})")

    def check_status(self, resp: Response, url: str, *, ok: tuple[int, ...]) -> None:
        """Return when the status is in ``ok``; else ``Retryable`` (429/5xx) or ``CrawlError``."""
        status = resp.status_code
        if status in ok:
            return
        resp.close(reuse=False)  # a connection that gave an answer not asked for is never reused
        what = f"{status} {printable(resp.reason_phrase)}".strip()
        if status == 429 or status >= 500:
            wait = parse_retry_after(resp.headers.get("retry-after"))
            raise Retryable(what, wait=None if wait is None else min(wait, self.max_retry_after), status=True)
        if status in (401, 403):
            host = urlsplit(url).hostname or "?"
            sent = self.credentials.header_for(url) is not None
            hint = f"the credentials sent to {host} were refused" if sent else CREDENTIALS_HINT
            raise CrawlError(redact_url(url), what, hint=hint)
        raise CrawlError(redact_url(url), f"unexpected answer {what}")

    # -- bodies ---------------------------------------------------------------------------------
    def iter_body(self, resp: Response, url: str, what: str) -> Iterator[bytes]:
        """The (decoded) body in chunks; a reset, a timeout or a short body is ``Retryable``."""
        expected = declared_length(resp)
        try:
            yield from resp.iter_bytes()
        except DecodingError as exc:
            raise CrawlError(redact_url(url), f"cannot decode the {what}: {exc}") from None
        except TransportError as exc:
            self._raise_past_deadline(url, exc, resp.deadline)
            self._raise_short(resp, expected, exc)
        self._raise_short(resp, expected, None)

    def read_body(self, resp: Response, url: str, cap: int, what: str) -> bytes:
        """The whole (decoded) body, at most ``cap`` bytes; a short body is retryable."""
        expected = declared_length(resp)
        if is_identity(resp) and expected is not None and expected > cap:
            raise CrawlError(redact_url(url), f"{what} is {expected} bytes, over the {cap}-byte cap")
        size = resp.sized if is_identity(resp) else None
        if size is not None and size <= cap:  # one read into one buffer of the declared size
            try:
                data = resp.read_sized()
            except TransportError as exc:
                self._raise_past_deadline(url, exc, resp.deadline)
                self._raise_short(resp, expected, exc)
                raise
            self._raise_short(resp, expected, None)
            return data
        chunks: list[bytes] = []
        got = 0
        for chunk in self.iter_body(resp, url, what):
            got += len(chunk)
            if got > cap:
                raise CrawlError(redact_url(url), f"{what} is over the {cap}-byte cap; stopped reading")
            chunks.append(chunk)
        return b"".join(chunks)

    def stream_to(
        self, resp: Response, url: str, out: IO[bytes], digest: Digest, what: str = "download", *, limit: int | None = None, over_limit: str = ""
    ) -> int:
        """Write the body to ``out`` (and ``digest``); the number of bytes written. A body longer
        than ``limit`` bytes is an ``IntegrityError`` saying ``over_limit`` (the chunk that passes
        the limit is not written)."""
        n = 0
        for chunk in self.iter_body(resp, url, what):
            n += len(chunk)
            if limit is not None and n > limit:
                raise IntegrityError(redact_url(url), over_limit)
            out.write(chunk)
            digest.update(chunk)
        return n

    def _raise_past_deadline(self, url: str, exc: TransportError, deadline: deadlines.Deadline | None) -> None:
        """A timeout because the request's ``deadline`` passed is final: a ``CrawlError`` naming it."""
        if isinstance(exc, _Timeout) and deadline is not None and deadline.expired:
            raise CrawlError(
                redact_url(url),
                f"{deadline.describe()} (the deadline per request: {deadlines.REQUEST_DEADLINE_FACTOR} x --timeout {self.timeout:g} s)",
                hint="the server answers too slowly or trickles its answer; try again later or raise --timeout",
            ) from None

    def _raise_short(self, resp: Response, expected: int | None, exc: TransportError | None) -> None:
        raw = resp.num_bytes_downloaded
        if expected is not None and raw < expected:
            raise Retryable(f"body truncated: {raw} of {expected} bytes")
        if exc is not None:
            raise Retryable(_transport_cause(exc, self.timeout))

    def finish(self, resp: Response) -> None:
        """Release ``resp`` and count its bytes; a small unread body is drained first."""
        if not resp.is_stream_consumed and not resp.is_closed:
            # An unread body, however empty (a 304, a 404 page), costs the connection: read a
            # small one so the connection goes back to the pool for the next request.
            declared = resp.headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) <= DRAIN_BYTES:
                try:
                    for _ in resp.iter_raw():
                        pass
                except TransportError:
                    pass
        resp.close()
        self.stats.add(bytes_received=resp.num_bytes_downloaded)

    # -- retries --------------------------------------------------------------------------------
    def retrying(self, url: str, attempt: Callable[[], T]) -> T:
        """Run ``attempt`` until it returns, retrying ``Retryable`` failures with backoff.

        The last failure becomes a ``CrawlError`` naming ``url`` (redacted) and the cause.
        """
        attempts = self.retries + 1
        outer = self._attempt.fresh
        for n in range(1, attempts + 1):
            self._attempt.fresh = outer or n > 1  # a retry never takes a pooled connection (it may be what broke)
            try:
                return attempt()
            except Retryable as exc:
                if n == attempts:
                    # a host that never answered is offline as much as one whose name does not resolve: the same way out
                    hint = no_network_hint(url) if exc.unanswered else None
                    raise CrawlError(redact_url(url), exc.final(attempts), hint=hint, unreachable=True) from None
                delay = exc.wait if exc.wait is not None else self.backoff(n)
                self.stats.add(retries=1)
                log.debug("%s: %s; retry %d of %d in %.2f s", redact_url(url), exc.cause, n, self.retries, delay)
                if self.on_retry is not None and (n == 1 or delay >= LONG_WAIT):  # one line per URL; a long wait is not silent either
                    self.on_retry(f"retrying {redact_url(url)} in {delay:.1f} s ({exc.cause}), attempt {n + 1} of {attempts}")
                time.sleep(delay)
            finally:
                self._attempt.fresh = outer
        raise AssertionError("unreachable")

    def backoff(self, attempt: int) -> float:
        """Seconds to wait before retry ``attempt`` (1, 2, ...): exponential, capped, jittered."""
        return min(self.max_backoff, self.backoff_base * 2.0 ** (attempt - 1)) * random.uniform(0.5, 1.5)


__all__ = ["Digest", "FetchStats", "Retryable", "Transport", "content_range", "declared_length", "is_identity", "raise_if_gone"]
