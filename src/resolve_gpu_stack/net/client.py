"""HTTP/1.1 GETs over the standard library's ``http.client``: what ``transport.Transport`` sends
its requests with (it follows redirects, retries and applies the URL policy itself).

Chosen by measurement (``bench/httpclients.py``, figures in bench/README.md): on this workload
(many small GETs on kept-alive connections) a request costs ~120 us of CPU through
``http.client`` against ~230 us through urllib3 and ~400 us through httpx, and importing it ~28 ms
(with ``ssl``) against ~68 and ~63 ms. What httpx did for us is here, kept as it was:

- ``Client.send(url, headers)``: one GET, its answer streamed (``Response``: status, headers,
  ``iter_raw`` as sent, ``iter_bytes`` decoded, ``num_bytes_downloaded``);
- a pool of kept-alive connections per origin: at most ``max_connections`` requests in flight (a
  request waits for a slot up to its timeout); an idle connection is reused unless it is older than
  ``keepalive_expiry`` or the server closed it; a connection whose answer was not read to its end
  is closed, never reused;
- proxies from the environment with ``trust_env`` (``http_proxy``, ``https_proxy``, ``all_proxy``,
  ``no_proxy`` in either case, lower case first, as httpx read them: ``EnvironmentProxies``);
  plain http through the proxy, https through a ``CONNECT`` tunnel, credentials in the proxy URL
  sent as ``Proxy-Authorization``;
- TLS with the trust store loaded at the first handshake (``tls.LazyTrustContext``), the host name
  checked;
- every connect, read and write kept to this thread's deadline (``deadline.DeadlineSocket``);
- bodies decoded (``Content-Encoding`` gzip, deflate; others passed as sent) in steps of at most
  ``DECODE_STEP`` bytes, so a compressed bomb is stopped by the reader's cap, not by memory.

Failures are ``TransportError`` (``ConnectError``, ``ConnectTimeout``, ``Timeout``, ``ReadError``),
``DecodingError`` and ``InvalidURL``.
"""

from __future__ import annotations

import http.client
import os
import re
import select
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import NamedTuple, Protocol, overload
from urllib.parse import quote, unquote, urlsplit

from . import deadline as deadlines
from .tls import LazyTrustContext
from .urlpolicy import basic_authorization

DEFAULT_PORTS = {"http": 80, "https": 443}
CHUNK = 64 * 1024  # bytes asked of the socket per read of a body
DECODE_STEP = 1 << 20  # at most this many decoded bytes from one inflate step
# what may stand unescaped in a request target (RFC 3986 pchar, "/" and "?"; "%" keeps escapes as they are)
_PATH_SAFE = "/%:@!$&'()*+,;=~"
_QUERY_SAFE = _PATH_SAFE + "?"


# -- failures --------------------------------------------------------------------------------
class TransportError(Exception):
    """A request failed on the wire: connect, TLS, a reset, a timeout, a broken answer."""


class ConnectError(TransportError):
    """No connection (refused, no such host, TLS refused, a proxy that said no)."""


class Timeout(TransportError):
    """A read or write took longer than the timeout, or the request's deadline passed."""


class ConnectTimeout(Timeout, ConnectError):
    """Connecting (TCP, TLS, a proxy tunnel) took longer than the timeout."""


class ReadError(TransportError):
    """The connection broke or the answer was not HTTP (a reset, a truncated chunk, a bad status line)."""


class DecodingError(Exception):
    """A body whose ``Content-Encoding`` could not be decoded."""


class InvalidURL(ValueError):
    """A URL no request can be made for (scheme, host, port)."""


# -- proxies from the environment --------------------------------------------------------------
def environment_proxies(environ: Mapping[str, str]) -> dict[str, str]:
    """``urllib.request.getproxies_environment``: ``<scheme>_proxy`` variables in any case, the
    lower-case one winning; ``HTTP_PROXY`` ignored in a CGI script (``REQUEST_METHOD`` set)."""
    proxies: dict[str, str] = {}
    for name, value in environ.items():
        if value and name.lower().endswith("_proxy"):
            proxies[name.lower()[:-6]] = value
    if "REQUEST_METHOD" in environ:
        proxies.pop("http", None)
    for name, value in environ.items():
        if name.endswith("_proxy"):  # lower case only: these win
            if value:
                proxies[name[:-6].lower()] = value
            else:
                proxies.pop(name[:-6].lower(), None)
    return proxies


@dataclass(frozen=True)
class _Bypass:
    """A ``no_proxy`` entry, matched as httpx matches its mount patterns."""

    scheme: str  # "" for any
    host: re.Pattern[str]
    port: int | None

    def matches(self, scheme: str, host: str, port: int) -> bool:
        return (not self.scheme or self.scheme == scheme) and self.host.match(host) is not None and (self.port is None or self.port == port)


def _bypass(entry: str) -> _Bypass:
    scheme, _, rest = entry.rpartition("://")
    if scheme == "all":
        scheme = ""
    hostport = rest.split("/", 1)[0]
    port: int | None = None
    if hostport.startswith("["):  # an IPv6 literal, maybe with a port
        host, _, tail = hostport[1:].partition("]")
        port = int(tail[1:]) if tail.startswith(":") and tail[1:].isdigit() else None
    elif hostport.count(":") == 1:
        host, _, p = hostport.partition(":")
        port = int(p) if p.isdigit() else None
    else:
        host = hostport
    host = host.lower()
    if host.startswith("*."):  # subdomains only
        pattern = f"^.+\\.{re.escape(host[2:])}$"
    elif host.startswith("*"):  # the domain and its subdomains
        pattern = f"^(.+\\.)?{re.escape(host[1:])}$"
    else:
        pattern = f"^{re.escape(host)}$"
    return _Bypass(scheme, re.compile(pattern), port)


class EnvironmentProxies:
    """Which proxy a URL goes through, from the environment's variables (httpx's reading of them:
    ``no_proxy`` ``*`` turns every proxy off; a name matches itself and its subdomains, a name
    starting with ``.`` its subdomains only, an address or ``localhost`` itself)."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        found = environment_proxies(environ)
        self.by_scheme = {s: (v if "://" in v else f"http://{v}") for s in ("http", "https", "all") if (v := found.get(s))}
        entries = [e.strip() for e in found.get("no", "").split(",")]
        if "*" in entries:
            self.by_scheme = {}
        self.bypass = [_bypass(e if "://" in e or e.lower() == "localhost" or _is_address(e) else f"all://*{e}") for e in entries if e]

    def __bool__(self) -> bool:
        return bool(self.by_scheme)

    def for_url(self, scheme: str, host: str, port: int) -> str | None:
        """The proxy URL for a request to ``scheme://host:port``, or None to go direct."""
        if not self.by_scheme or any(b.matches(scheme, host, port) for b in self.bypass):
            return None
        return self.by_scheme.get(scheme) or self.by_scheme.get("all")


def _is_address(text: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(text.split("/", 1)[0].strip("[]"))
    except ValueError:
        return False
    return True


# -- connections -------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Route:
    """Where a connection goes: the origin asked for, and the proxy on the way (or None)."""

    scheme: str
    host: str
    port: int
    proxy: str | None

    @property
    def netloc(self) -> str:
        """``host:port``, an IPv6 host in brackets."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def request_target(self, path_and_query: str) -> str:
        """What the request line names: the path, or the whole URL for plain http through a proxy."""
        if self.proxy and self.scheme == "http":
            return f"http://{self.netloc}{path_and_query}"
        return path_and_query


class Prepared(NamedTuple):
    """A URL a request can be made for (``Client.check``): its route, and the quoted path and query."""

    route: _Route
    target: str


class _Connection(http.client.HTTPConnection):
    """One kept-alive connection of the pool: TCP (direct, or to a proxy, tunnelled for https),
    TLS where the route is https, every socket operation under the request's deadline."""

    def __init__(self, route: _Route, timeout: float, tls: LazyTrustContext) -> None:
        super().__init__(route.host, route.port, timeout=timeout)
        self.read_timeout = timeout
        self.route = route
        self.tls = tls
        self.idle_since = 0.0

    def connect(self) -> None:
        route = self.route
        proxy = urlsplit(route.proxy) if route.proxy else None
        if proxy is not None and proxy.scheme != "http":
            raise ConnectError(f"a {proxy.scheme} proxy is not supported (the proxy URL must be http://)")
        host, port = (proxy.hostname or "", proxy.port or 80) if proxy is not None else (route.host, route.port)
        try:
            sock = socket.create_connection((deadlines.connect_host(host), port), deadlines.clamp(self.read_timeout))
        except TimeoutError as exc:
            raise ConnectTimeout(str(exc) or "connect timed out") from None
        except OSError as exc:
            raise ConnectError(str(exc) or type(exc).__name__) from None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if proxy is not None and route.scheme == "https":
                _tunnel(sock, route, proxy_authorization(route.proxy or ""), self.read_timeout)
            if route.scheme == "https":
                sock.settimeout(deadlines.clamp(self.read_timeout))
                sock = self.tls.wrap_socket(sock, server_hostname=route.host)
        except BaseException as exc:
            sock.close()
            if isinstance(exc, TimeoutError):
                raise ConnectTimeout(str(exc) or "TLS handshake timed out") from None
            if isinstance(exc, OSError):  # ssl.SSLError (a certificate not trusted, ...) included
                raise ConnectError(str(exc) or type(exc).__name__) from None
            raise
        self.sock = deadlines.DeadlineSocket(sock, self.read_timeout)


def proxy_authorization(proxy: str) -> str | None:
    """Basic credentials for the ``user:password@`` of a proxy URL, or None."""
    parts = urlsplit(proxy)
    if parts.username is None:
        return None
    return basic_authorization(unquote(parts.username), unquote(parts.password or ""))


def _tunnel(sock: socket.socket, route: _Route, authorization: str | None, timeout: float) -> None:
    """``CONNECT host:port`` through a proxy; returns once it said 2xx (its answer read whole)."""
    lines = [f"CONNECT {route.netloc} HTTP/1.1", f"Host: {route.netloc}"] + ([f"Proxy-Authorization: {authorization}"] if authorization else [])
    sock.settimeout(deadlines.clamp(timeout))
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    answer = b""
    while b"\r\n\r\n" not in answer:
        sock.settimeout(deadlines.clamp(timeout))
        data = sock.recv(4096)
        if not data or len(answer) > 65536:
            raise ConnectError("the proxy closed the tunnel before answering CONNECT")
        answer += data
    status = answer.split(b"\r\n", 1)[0].decode("latin-1", "replace")
    code = status.split(" ", 2)[1] if status.count(" ") >= 1 else ""
    if not code.startswith("2"):
        raise ConnectError(f"the proxy refused the tunnel: {status}")


# -- answers -------------------------------------------------------------------------------------
class Headers:
    """An answer's headers by name, in any case (repeated ones joined with ", ")."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self._values: dict[str, str] = {}
        for name, value in pairs:
            key = name.lower()
            self._values[key] = f"{self._values[key]}, {value}" if key in self._values else value

    @overload
    def get(self, name: str) -> str | None: ...

    @overload
    def get(self, name: str, default: str) -> str: ...

    def get(self, name: str, default: str | None = None) -> str | None:
        return self._values.get(name.lower(), default)

    def __contains__(self, name: str) -> bool:
        return name.lower() in self._values


class _Inflater(Protocol):
    """What a decoder of a ``Content-Encoding`` offers (a ``zlib`` decompressor's API)."""

    @property
    def unconsumed_tail(self) -> bytes: ...

    def decompress(self, data: bytes, max_length: int = ..., /) -> bytes: ...

    def flush(self, length: int = ..., /) -> bytes: ...


class _Deflate:
    """``deflate`` as servers send it: zlib-wrapped, or raw (tried when the first bytes are not zlib's)."""

    def __init__(self) -> None:
        self.inflater = zlib.decompressobj()
        self.first = True

    def decompress(self, data: bytes, max_length: int = 0, /) -> bytes:
        first, self.first = self.first, False
        try:
            return self.inflater.decompress(data, max_length)
        except zlib.error:
            if not first:
                raise
            self.inflater = zlib.decompressobj(-zlib.MAX_WBITS)
            return self.inflater.decompress(data, max_length)

    @property
    def unconsumed_tail(self) -> bytes:
        return self.inflater.unconsumed_tail

    def flush(self, length: int = zlib.DEF_BUF_SIZE, /) -> bytes:
        return self.inflater.flush(length)


def _decoders(encoding: str | None) -> list[_Inflater]:
    """The decoders of a ``Content-Encoding``, in the order to apply them (the last coding first)."""
    out: list[_Inflater] = []
    for value in reversed((encoding or "").split(",")):
        coding = value.strip().lower()
        if coding in ("gzip", "x-gzip"):
            out.append(zlib.decompressobj(zlib.MAX_WBITS | 16))
        elif coding == "deflate":
            out.append(_Deflate())
    return out


def _decode(decoders: list[_Inflater], data: bytes) -> Iterator[bytes]:
    if not decoders:
        if data:
            yield data
        return
    first, rest = decoders[0], decoders[1:]
    out = first.decompress(data, DECODE_STEP)
    yield from _decode(rest, out)
    while first.unconsumed_tail:
        yield from _decode(rest, first.decompress(first.unconsumed_tail, DECODE_STEP))


def _flush(decoders: list[_Inflater]) -> Iterator[bytes]:
    for i, d in enumerate(decoders):
        yield from _decode(decoders[i + 1 :], d.flush())


class Response:
    """An open streamed answer: read ``iter_bytes`` (or ``iter_raw``), then ``close`` it."""

    def __init__(self, raw: http.client.HTTPResponse, release: Callable[[bool], None]) -> None:
        self.status_code = raw.status
        self.reason_phrase = raw.reason
        self.headers = Headers(raw.getheaders())
        self.num_bytes_downloaded = 0  # body bytes as sent (before Content-Encoding is undone)
        # the status line and headers as received: "HTTP/1.1 206 Partial Content\r\n", "Name: value\r\n" each, "\r\n"
        self.header_bytes = len(f"HTTP/1.1 {raw.status} {raw.reason}\r\n") + sum(len(k) + len(v) + 4 for k, v in raw.getheaders()) + 2
        self.is_stream_consumed = False
        self.is_closed = False
        self._raw = raw
        self._release = release

    def iter_raw(self) -> Iterator[bytes]:
        """The body as sent, in chunks."""
        try:
            while True:
                data = self._raw.read1(CHUNK)
                if not data:
                    break
                self.num_bytes_downloaded += len(data)
                yield data
        except TransportError:
            raise
        except TimeoutError as exc:
            raise Timeout(str(exc) or "timed out") from None
        except (OSError, http.client.HTTPException, ValueError) as exc:
            raise ReadError(str(exc) or type(exc).__name__) from None
        self.is_stream_consumed = True

    def iter_bytes(self) -> Iterator[bytes]:
        """The body with its ``Content-Encoding`` undone (gzip, deflate), in chunks."""
        decoders = _decoders(self.headers.get("content-encoding"))
        if not decoders:
            yield from self.iter_raw()
            return
        try:
            for data in self.iter_raw():
                yield from _decode(decoders, data)
            yield from _flush(decoders)
        except zlib.error as exc:
            raise DecodingError(str(exc)) from None

    def close(self) -> None:
        """Release the connection: back to the pool when the answer was read to its end, else closed."""
        if self.is_closed:
            return
        self.is_closed = True
        raw = self._raw
        complete = self.is_stream_consumed or (not raw.chunked and raw.length == 0)
        self._release(complete)


class Client:
    """GETs over a pool of kept-alive connections (see the module docstring). Thread-safe."""

    def __init__(
        self,
        *,
        timeout: float,
        max_connections: int,
        user_agent: str,
        trust_env: bool = True,
        keepalive_expiry: float = 5.0,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.timeout = timeout
        self.keepalive_expiry = keepalive_expiry
        self.tls = LazyTrustContext(trust_env=trust_env)  # certificates loaded at the first https handshake
        self.proxies = EnvironmentProxies(os.environ if environ is None else environ) if trust_env else None
        self.default_headers = {"User-Agent": user_agent, "Accept": "*/*", "Accept-Encoding": "gzip, deflate"}
        self.max_connections = max(1, max_connections)
        self._slots = threading.BoundedSemaphore(self.max_connections)
        self._idle: list[_Connection] = []  # oldest first
        self._lock = threading.Lock()
        self._closed = False

    def check(self, url: str) -> Prepared:
        """``url`` prepared for ``send``; ``InvalidURL`` for a URL no request can be made for
        (scheme, host, port)."""
        return self._route(url)

    def send(self, url: str | Prepared, headers: Mapping[str, str]) -> Response:
        """GET ``url`` (no credentials in it; redirects are not followed; or what ``check`` made of
        it): the answer, streamed."""
        route, target = url if isinstance(url, Prepared) else self._route(url)
        try:
            wait = deadlines.clamp(self.timeout)
        except TimeoutError as exc:  # the request's deadline passed before it was sent (a long redirect chain)
            raise Timeout(str(exc)) from None
        if not self._slots.acquire(timeout=wait):
            raise Timeout("no connection free in the pool")
        conn: _Connection | None = None
        try:
            conn = self._checkout(route)
            merged = dict(self.default_headers)
            if headers:
                given = {name.lower() for name in headers}
                merged = {k: v for k, v in merged.items() if k.lower() not in given}
                merged.update(headers)
            if route.proxy and route.scheme == "http":
                auth = proxy_authorization(route.proxy)
                if auth:
                    merged["Proxy-Authorization"] = auth
            conn.request("GET", route.request_target(target), headers=merged)
            raw = conn.getresponse()
        except BaseException as exc:
            if conn is not None:
                conn.close()
            self._slots.release()
            if isinstance(exc, TransportError) or not isinstance(exc, Exception):
                raise
            if isinstance(exc, TimeoutError):
                raise Timeout(str(exc) or "timed out") from None
            if isinstance(exc, (OSError, http.client.HTTPException)):
                raise ReadError(str(exc) or type(exc).__name__) from None
            if isinstance(exc, (ValueError, UnicodeError)):  # a header or target http.client refuses
                raise InvalidURL(str(exc)) from None
            raise
        answered = conn

        def release(complete: bool) -> None:
            try:
                raw.close()
            finally:
                self._checkin(answered, complete and not raw.will_close and answered.sock is not None)
                self._slots.release()

        return Response(raw, release)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    # -- the pool -------------------------------------------------------------------------------
    def _route(self, url: str) -> Prepared:
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise InvalidURL(str(exc)) from None
        scheme = parts.scheme.lower()
        if scheme not in DEFAULT_PORTS:
            raise InvalidURL(f"unsupported scheme {scheme or 'none'!r}")
        host = (parts.hostname or "").lower()
        if not host:
            raise InvalidURL("no host")
        port = port or DEFAULT_PORTS[scheme]
        target = quote(parts.path or "/", safe=_PATH_SAFE) + (f"?{quote(parts.query, safe=_QUERY_SAFE)}" if parts.query else "")
        proxy = self.proxies.for_url(scheme, host, port) if self.proxies else None
        return Prepared(_Route(scheme, host, port, proxy), target)

    def _checkout(self, route: _Route) -> _Connection:
        """The most recently used idle connection of ``route`` that can still be used, or a new one
        (idle connections past ``keepalive_expiry`` are closed on the way)."""
        now = time.monotonic()
        found: _Connection | None = None
        with self._lock:
            stale = [c for c in self._idle if now - c.idle_since > self.keepalive_expiry]
            keep = [c for c in self._idle if now - c.idle_since <= self.keepalive_expiry]
            for i in range(len(keep) - 1, -1, -1):
                if keep[i].route == route:
                    found = keep.pop(i)
                    break
            self._idle = keep
        for conn in stale:
            conn.close()
        if found is not None and _closed_by_peer(found):
            found.close()
            found = None
        return found or _Connection(route, self.timeout, self.tls)

    def _checkin(self, conn: _Connection, reusable: bool) -> None:
        """Keep ``conn`` for the next request to its route, or close it; at most as many idle
        connections are kept as may be in use (the oldest goes)."""
        if not reusable:
            conn.close()
            return
        conn.idle_since = time.monotonic()
        dropped: list[_Connection] = []
        with self._lock:
            if self._closed:
                dropped.append(conn)
            else:
                self._idle.append(conn)
                while len(self._idle) > self.max_connections:
                    dropped.append(self._idle.pop(0))
        for old in dropped:
            old.close()


def _closed_by_peer(conn: _Connection) -> bool:
    """True when an idle connection's socket is readable: the server closed it (or sent what no
    request asked for); reusing it would fail."""
    sock = conn.sock
    if sock is None:
        return True
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


__all__ = [
    "Client",
    "ConnectError",
    "ConnectTimeout",
    "DecodingError",
    "EnvironmentProxies",
    "Headers",
    "InvalidURL",
    "Prepared",
    "ReadError",
    "Response",
    "Timeout",
    "TransportError",
    "environment_proxies",
    "proxy_authorization",
]
