"""One kept-alive connection of the pool: where it goes (``Route``), TCP direct or through a proxy (a ``CONNECT`` tunnel for https, TLS inside the proxy's TLS for an https proxy), TLS checked, ``1xx`` interim answers skipped, every socket operation under the request's deadline."""

from __future__ import annotations

import http.client
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple, Protocol, TypeVar
from urllib.parse import SplitResult, urlsplit

from ...errors import printable
from ...urls import redact_url
from .. import deadline as deadlines
from ..tls import TrustSettingError, trust_hint
from .errors import ConfigurationError, ConnectError, ConnectTimeout, HostNotFound
from .headers import MAX_LINE, parse_headers
from .proxies import proxy_authorization

T = TypeVar("T")
DEFAULT_PORTS = {"http": 80, "https": 443}
CHUNK = 64 * 1024  # bytes asked of the socket per read of a body


@dataclass(frozen=True)
class Route:
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

    route: Route
    target: str


class _FinalResponse(http.client.HTTPResponse):
    """``http.client``'s answer, with every ``1xx`` interim answer skipped (``http.client`` skips
    ``100 Continue`` only: a ``102`` or ``103`` would be taken for the answer, and the real one read
    as the answer to the next request). ``101`` (a protocol switch no request asked for) is final,
    and refused as unexpected by the caller. The skipping reads under the request's deadline.
    Headers are read by ``headers.parse_headers`` (``begin`` is ``http.client``'s, with that one
    call changed)."""

    def begin(self) -> None:
        """``http.client.HTTPResponse.begin`` (Python 3.10-3.13) reading the headers with ``parse_headers``."""
        if self.headers is not None:
            return
        while True:
            version, status, reason = self._read_status()
            if status != http.client.CONTINUE:
                break
            parse_headers(self.fp)  # a 100's headers, skipped
        self.code = self.status = status
        self.reason = reason.strip()
        self.version = _http_version(version)
        self.headers = self.msg = parse_headers(self.fp)
        transfer = self.headers.get("transfer-encoding")
        self.chunked = bool(transfer and transfer.lower() == "chunked")
        if self.chunked:
            self.chunk_left = None
        self.will_close = self._check_close()
        self.length = _length(self.headers.get("content-length"), self.chunked)
        if status in (http.client.NO_CONTENT, http.client.NOT_MODIFIED) or 100 <= status < 200 or self._method == "HEAD":
            self.length = 0
        if not self.will_close and not self.chunked and self.length is None:
            self.will_close = True

    def _read_status(self) -> tuple[str, int, str]:
        """The status line ``begin()`` reads (as ``http.client`` reads it), interim ones passed over."""
        while True:
            version, status, reason = _status_line(str(self.fp.readline(MAX_LINE + 1), "iso-8859-1"))
            if status >= 200 or status in (100, 101):
                return version, status, reason.strip()  # a 100 is passed over by begin() itself
            parse_headers(self.fp)  # an interim answer's headers (limits as for any)


def _http_version(version: str) -> int:
    """``http.client``'s number for a status line's version (10 or 11); another is refused."""
    if version in ("HTTP/1.0", "HTTP/0.9"):
        return 10
    if version.startswith("HTTP/1."):
        return 11
    raise http.client.UnknownProtocol(version)


def _length(value: str | None, chunked: bool) -> int | None:
    """A body's length from its Content-Length, as ``http.client`` takes it (none when chunked, not
    a number, or negative)."""
    if not value or chunked:
        return None
    try:
        length = int(value)
    except ValueError:
        return None
    return length if length >= 0 else None


def _status_line(line: str) -> tuple[str, int, str]:
    """(version, status, reason) of a status line, as ``http.client`` reads it (its errors raised)."""
    if len(line) > MAX_LINE:
        raise http.client.LineTooLong("status line")
    if not line:
        raise http.client.RemoteDisconnected("Remote end closed connection without response")
    version, _, rest = line.strip().partition(" ")
    code, _, reason = rest.strip().partition(" ")
    if not version.startswith("HTTP/") or not (code.isdigit() and len(code) == 3 and code.isascii()) or code[0] == "0":
        raise http.client.BadStatusLine(line)
    return version, int(code), reason


class Connection(http.client.HTTPConnection):
    """One kept-alive connection of the pool: TCP (direct, or to a proxy, tunnelled for https),
    TLS where the route is https, every socket operation under the request's deadline."""

    def __init__(self, route: Route, timeout: float, tls: ssl.SSLContext, resume: ssl.SSLSession | None = None) -> None:
        super().__init__(route.host, route.port, timeout=timeout)
        self.read_timeout = timeout
        self.route = route
        self.tls = tls
        self.resume = resume  # a TLS session of an earlier connection of this route, offered to the origin (``tls_session``)
        self.idle_since = 0.0
        self.deadline: deadlines.Deadline | None = None  # the request's being served (``serve``)
        self.session_taken = False  # whether the pool took this connection's TLS session (``Client._keep_session``)

    def serve(self, deadline: deadlines.Deadline | None) -> None:
        """From now on, serve the request whose deadline is ``deadline`` (None: idle in the pool)."""
        self.deadline = deadline
        if isinstance(self.sock, deadlines.DeadlineSocket):
            self.sock.deadline = deadline

    response_class = _FinalResponse

    def _origin_tls(self) -> ssl.SSLSocket | ssl.SSLObject | None:
        """The TLS to the origin (not to an ``https://`` proxy): None for plain http."""
        wire = self.sock.sock if isinstance(self.sock, deadlines.DeadlineSocket) else None
        if self.route.scheme != "https" or wire is None:
            return None
        return wire.tls if isinstance(wire, _TunnelledTLS) else wire if isinstance(wire, ssl.SSLSocket) else None

    def tls_session(self) -> ssl.SSLSession | None:
        """This connection's TLS session to the origin, when the server gave a ticket to resume it
        with (TLS 1.3 sends it after the handshake: ask once an answer was read); else None."""
        tls = self._origin_tls()
        session = tls.session if tls is not None else None
        return session if session is not None and session.has_ticket else None

    @property
    def resumed(self) -> bool:
        """Whether the TLS to the origin resumed an earlier connection's session (no certificate sent)."""
        tls = self._origin_tls()
        return tls is not None and bool(tls.session_reused)

    def connect(self) -> None:
        route = self.route
        proxy = _proxy_of(route)
        named = f"the proxy {redact_url(route.proxy or '')}"
        host, port = (proxy.hostname or "", proxy.port or DEFAULT_PORTS[proxy.scheme]) if proxy is not None else (route.host, route.port)
        sock = _open_tcp(host, port, self.read_timeout, proxy, named, self.deadline)
        checking = named  # whose certificate a failing handshake was checking
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if proxy is not None and proxy.scheme == "https":  # TLS to the proxy itself
                sock.settimeout(deadlines.clamp(self.read_timeout, self.deadline))
                sock = self.tls.wrap_socket(sock, server_hostname=host)
            checking = route.host
            wire = self._to_origin(sock, proxy, named)
        except BaseException as exc:
            sock.close()
            raise _handshake_failure(exc, checking, self.tls) from None
        self.sock = deadlines.DeadlineSocket(wire, self.read_timeout, self.deadline)

    def _to_origin(self, sock: socket.socket, proxy: SplitResult | None, named: str) -> _Wire:
        """What requests go through, from a socket connected (to the origin, or to the proxy):
        through the proxy's tunnel for https, TLS to the origin for https (inside the proxy's TLS
        when the proxy is https)."""
        route = self.route
        if proxy is not None and route.scheme == "https":
            _tunnel(sock, route, proxy_authorization(route.proxy or ""), self.read_timeout, named, self.deadline)
        if route.scheme != "https":
            return sock
        sock.settimeout(deadlines.clamp(self.read_timeout, self.deadline))
        if isinstance(sock, ssl.SSLSocket):  # TLS inside the proxy's TLS
            return _TunnelledTLS(sock, self.tls, route.host, self.resume)
        return self.tls.wrap_socket(sock, server_hostname=route.host, session=self.resume)


def _proxy_of(route: Route) -> SplitResult | None:
    """The route's proxy URL, split; a ``ConfigurationError`` for one that is not http(s)."""
    proxy = urlsplit(route.proxy) if route.proxy else None
    if proxy is not None and proxy.scheme not in ("http", "https"):
        raise ConfigurationError(
            f"the proxy {redact_url(route.proxy or '')} is a {proxy.scheme or 'schemeless'} proxy: only http:// and https:// proxies are supported",
            hint="set http_proxy / https_proxy / all_proxy to an http:// or https:// proxy URL, or list the host in no_proxy",
        )
    return proxy


def _open_tcp(host: str, port: int, timeout: float, proxy: SplitResult | None, named: str, deadline: deadlines.Deadline | None) -> socket.socket:
    """A TCP connection to ``host:port`` (the origin, or the proxy ``named``) within ``deadline``."""
    try:
        return deadlines.open_tcp(host, port, deadlines.clamp(timeout, deadline))
    except TimeoutError as exc:
        raise ConnectTimeout(_via(proxy, named, str(exc) or "connect timed out")) from None
    except socket.gaierror as exc:
        raise HostNotFound(_via(proxy, named, f"cannot resolve {host} ({exc.strerror or exc})")) from None
    except OSError as exc:
        raise ConnectError(_via(proxy, named, str(exc) or type(exc).__name__)) from None


def _handshake_failure(exc: BaseException, checking: str, tls: ssl.SSLContext) -> BaseException:
    """What a failure between the TCP connect and a usable connection (TLS, the tunnel) is raised
    as: a setting at fault (the trust store, a certificate that does not verify) is a
    ``ConfigurationError``; a timeout ``ConnectTimeout``; another socket or TLS error
    ``ConnectError``; anything else as it is."""
    if isinstance(exc, TrustSettingError):
        return ConfigurationError(str(exc), hint=exc.hint)
    if isinstance(exc, ssl.SSLCertVerificationError):
        return ConfigurationError(
            f"TLS: certificate verify failed for {checking} ({exc.verify_message or exc.reason or exc})",
            hint=trust_hint(tls),
        )
    if isinstance(exc, TimeoutError):
        return ConnectTimeout(str(exc) or "TLS handshake timed out")
    if isinstance(exc, OSError):  # another ssl.SSLError (the handshake broke off, ...) included
        return ConnectError(str(exc) or type(exc).__name__)
    return exc


class _Wire(Protocol):
    """What ``deadline.DeadlineSocket`` reads and writes through: a socket, or TLS in a tunnel."""

    def settimeout(self, value: float | None, /) -> None: ...

    def recv_into(self, buffer: memoryview, /) -> int: ...

    def sendall(self, data: bytes, /) -> None: ...

    def fileno(self) -> int: ...

    def close(self) -> None: ...


class _TunnelledTLS:
    """TLS to the origin carried inside the TLS connection to an ``https://`` proxy (a CONNECT
    tunnel): ``ssl.SSLObject`` over memory buffers, its records sent through the outer socket."""

    def __init__(self, outer: ssl.SSLSocket, context: ssl.SSLContext, server_hostname: str, session: ssl.SSLSession | None = None) -> None:
        self.outer = outer
        self._in, self._out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = context.wrap_bio(self._in, self._out, server_hostname=server_hostname, session=session)
        self._run(self.tls.do_handshake)

    def _run(self, step: Callable[[], T]) -> T:
        while True:
            try:
                result = step()
            except ssl.SSLWantReadError:
                self._flush()
                data = self.outer.recv(CHUNK)
                if data:
                    self._in.write(data)
                else:
                    self._in.write_eof()
                continue
            self._flush()
            return result

    def _flush(self) -> None:
        data = self._out.read()
        if data:
            self.outer.sendall(data)

    def settimeout(self, value: float | None) -> None:
        self.outer.settimeout(value)

    def recv_into(self, buffer: memoryview) -> int:
        try:
            data = self._run(lambda: self.tls.read(min(len(buffer), CHUNK)))  # a record is at most 16 KB: never a buffer of the caller's size
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            return 0
        buffer[: len(data)] = data
        return len(data)

    def sendall(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            sent = self._run(partial(self.tls.write, view))
            view = view[sent:]

    def fileno(self) -> int:
        return self.outer.fileno()

    def close(self) -> None:
        self.outer.close()


def _via(proxy: object, named: str, cause: str) -> str:
    """A connect failure's text, naming the proxy when the connection was to one."""
    return cause if proxy is None else f"cannot reach {named}: {cause}"


def _tunnel(sock: socket.socket, route: Route, authorization: str | None, timeout: float, named: str, deadline: deadlines.Deadline | None) -> None:
    """``CONNECT host:port`` through a proxy; returns once it said 2xx (its answer read whole)."""
    lines = [f"CONNECT {route.netloc} HTTP/1.1", f"Host: {route.netloc}"] + ([f"Proxy-Authorization: {authorization}"] if authorization else [])
    sock.settimeout(deadlines.clamp(timeout, deadline))
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    answer = b""
    while b"\r\n\r\n" not in answer:
        sock.settimeout(deadlines.clamp(timeout, deadline))
        data = sock.recv(4096)
        if not data or len(answer) > 65536:
            raise ConnectError(f"{named} closed the tunnel before answering CONNECT")
        answer += data
    status = printable(answer.split(b"\r\n", 1)[0].decode("latin-1", "replace"))
    code = status.split(" ", 2)[1] if status.count(" ") >= 1 else ""
    if not code.startswith("2"):
        raise ConnectError(f"{named} refused the tunnel to {route.netloc}: {status}")
