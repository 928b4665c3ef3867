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
  ``keepalive_expiry`` or the server closed it; a connection whose answer was not read to its end,
  or whose answer the caller refused (``Response.close(reuse=False)``), is closed, never reused; a
  reused connection that breaks before its answer's status line is tried once more on a fresh one
  (``send(fresh=True)`` never takes one from the pool);
- ``1xx`` interim answers (``100 Continue``, ``102 Processing``, ``103 Early Hints``) skipped, never
  taken for the answer, within the request's deadline (``deadline.py``: the headers phase earns no
  credit, so an endless stream of them ends);
- proxies from the environment with ``trust_env`` (``http_proxy``, ``https_proxy``, ``all_proxy``,
  ``no_proxy`` in either case, lower case first: ``EnvironmentProxies``, ``no_proxy`` read as curl
  reads it); plain http through the proxy, https through a ``CONNECT`` tunnel, credentials in the
  proxy URL sent as ``Proxy-Authorization``; the proxy is ``http://`` or ``https://`` (TLS to the
  proxy; an https origin then runs TLS inside it: ``_TunnelledTLS``), any other (``socks5``) is a
  ``ConfigurationError`` naming it; a proxy that cannot be reached, refuses the tunnel or fails its
  certificate check is named in the error;
- TLS with the trust store loaded at the first handshake (``tls.LazyTrustContext``), the host name
  checked; a certificate that does not verify, or a trust store setting that cannot be read, is a
  ``ConfigurationError``, never worth a retry;
- every connect, read and write kept to this thread's deadline (``deadline.DeadlineSocket``);
- bodies decoded (``Content-Encoding`` gzip, deflate; others passed as sent) in steps of at most
  ``DECODE_STEP`` bytes, so a compressed bomb is stopped by the reader's cap, not by memory.

Failures are ``TransportError`` (``ConnectError``, ``ConnectTimeout``, ``Timeout``, ``ReadError``,
``ConfigurationError``), ``DecodingError`` and ``InvalidURL``.
"""

from __future__ import annotations

import email.parser
import http.client
import ipaddress
import os
import re
import select
import socket
import ssl
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple, Protocol, TypeVar, overload
from urllib.parse import quote, unquote, urlsplit

from ..errors import printable
from ..urls import redact_url
from . import deadline as deadlines
from .tls import TrustSettingError, trust_context, trust_hint
from .urlpolicy import basic_authorization

T = TypeVar("T")
DEFAULT_PORTS = {"http": 80, "https": 443}
CHUNK = 64 * 1024  # bytes asked of the socket per read of a body
DECODE_STEP = 1 << 20  # at most this many decoded bytes from one inflate step
_MAX_LINE = 65536  # the longest status line read (http.client's own limit)
_MAX_HEADERS = 100  # the most header lines of one answer (http.client's own limit)
# a header line as servers send it: a field name, a colon, a value without CR or LF, the line's end
_PLAIN_HEADER = re.compile(r"([\x21-\x39\x3b-\x7e]+):([^\r\n]*)\r?\n")
# what may stand unescaped in a request target (RFC 3986 pchar, "/" and "?"; "%" keeps escapes as they are)
_PATH_SAFE = "/%:@!$&'()*+,;=~"
_QUERY_SAFE = _PATH_SAFE + "?"


# -- failures --------------------------------------------------------------------------------
class TransportError(Exception):
    """A request failed on the wire: connect, TLS, a reset, a timeout, a broken answer."""


class ConnectError(TransportError):
    """No connection (refused, no such host, TLS refused, a proxy that said no)."""


class HostNotFound(ConnectError):
    """The host name does not resolve (DNS): no retry helps within a run."""


class Timeout(TransportError):
    """A read or write took longer than the timeout, or the request's deadline passed."""


class ConnectTimeout(Timeout, ConnectError):
    """Connecting (TCP, TLS, a proxy tunnel) took longer than the timeout."""


class ConfigurationError(ConnectError):
    """A setting is at fault (the proxy URL, the trust store, a certificate that does not verify):
    another attempt would fail the same way. ``hint`` says what to change."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


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


_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class _Bypass:
    """A ``no_proxy`` entry, read as curl reads it: a name matches itself and its subdomains (a
    leading ``.`` or ``*.`` changes nothing: ``.example.com`` matches ``example.com`` too); an
    address or a CIDR range (``127.0.0.0/8``, ``::1``) matches the addresses in it, and an address
    is never matched as a name (``.0.0.1`` does not match 127.0.0.1). Beyond curl: a ``:port``
    (as requests reads it) and a ``scheme://`` (as httpx did) narrow an entry."""

    scheme: str  # "" for any
    name: str  # lower case, no leading dot; "" for an address entry
    network: _Network | None
    port: int | None

    def matches(self, scheme: str, host: str, port: int) -> bool:
        if (self.scheme and self.scheme != scheme) or (self.port is not None and self.port != port):
            return False
        address = _address(host)
        if self.network is not None:
            return address is not None and address.version == self.network.version and address in self.network
        return address is None and (host == self.name or host.endswith("." + self.name))


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


def _network(text: str) -> _Network | None:
    try:
        return ipaddress.ip_network(text.strip("[]"), strict=False)
    except ValueError:
        return None


def _bypass(entry: str) -> _Bypass | None:
    scheme, _, rest = entry.rpartition("://")
    scheme = "" if scheme in ("", "all") else scheme.lower()
    rest = rest.strip().rstrip("/")
    port: int | None = None
    network = _network(rest)
    if network is None:
        hostport = rest
        if hostport.startswith("["):  # an IPv6 literal with a port, maybe a range
            inner, _, tail = hostport[1:].partition("]")
            hostport, port = inner, (int(tail[1:]) if tail.startswith(":") and tail[1:].isdigit() else None)
        elif hostport.count(":") == 1:
            hostport, _, p = hostport.partition(":")
            port = int(p) if p.isdigit() else None
        network = _network(hostport)
        rest = hostport
    if network is not None:
        return _Bypass(scheme, "", network, port)
    name = rest.lower().lstrip("*").lstrip(".").rstrip(".")
    return _Bypass(scheme, name, None, port) if name else None


class EnvironmentProxies:
    """Which proxy a URL goes through, from the environment's variables: ``no_proxy`` ``*`` turns
    every proxy off; other entries as ``_Bypass`` reads them (curl's reading)."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        found = environment_proxies(environ)
        self.by_scheme = {s: (v if "://" in v else f"http://{v}") for s in ("http", "https", "all") if (v := found.get(s))}
        entries = [e.strip() for e in found.get("no", "").split(",")]
        if "*" in entries:
            self.by_scheme = {}
        self.bypass = [b for e in entries if e and (b := _bypass(e)) is not None]

    def __bool__(self) -> bool:
        return bool(self.by_scheme)

    def for_url(self, scheme: str, host: str, port: int) -> str | None:
        """The proxy URL for a request to ``scheme://host:port``, or None to go direct."""
        host = host.lower().rstrip(".")
        if not self.by_scheme or any(b.matches(scheme, host, port) for b in self.bypass):
            return None
        return self.by_scheme.get(scheme) or self.by_scheme.get("all")


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


def parse_headers(fp: _Readable) -> http.client.HTTPMessage:
    """``http.client.parse_headers``, the same limits (``LineTooLong``, more than 100 lines) and
    the same message, without ``email``'s feed parser where every line is a plain ``Name: value``
    line (what servers send: ~15 us against ~140 us an answer). Any other line (a folded value, a
    stray CR, a line that is no header, an answer cut short) and the whole block goes to
    ``email``'s parser, as ``http.client`` would hand it."""
    lines = []
    while True:
        line = fp.readline(_MAX_LINE + 1)
        if len(line) > _MAX_LINE:
            raise http.client.LineTooLong("header line")
        lines.append(line)
        if len(lines) > _MAX_HEADERS:
            raise http.client.HTTPException(f"got more than {_MAX_HEADERS} headers")
        if line in (b"\r\n", b"\n", b""):
            break
    text = b"".join(lines).decode("iso-8859-1")
    msg = http.client.HTTPMessage()
    if lines[-1]:  # ended by a blank line, not by the end of the stream
        match = _PLAIN_HEADER.fullmatch
        fields = []
        for raw in lines[:-1]:
            found = match(raw.decode("iso-8859-1"))
            if found is None:
                break
            fields.append((found[1], found[2].lstrip(" \t")))
        else:
            for name, value in fields:
                msg.set_raw(name, value)  # as email's compat32 policy stores a parsed header
            return msg
    return email.parser.Parser(_class=http.client.HTTPMessage).parsestr(text)


class _Readable(Protocol):
    def readline(self, limit: int = -1, /) -> bytes: ...


class _FinalResponse(http.client.HTTPResponse):
    """``http.client``'s answer, with every ``1xx`` interim answer skipped (``http.client`` skips
    ``100 Continue`` only: a ``102`` or ``103`` would be taken for the answer, and the real one read
    as the answer to the next request). ``101`` (a protocol switch no request asked for) is final,
    and refused as unexpected by the caller. The skipping reads under the request's deadline.
    Headers are read by ``parse_headers`` (``begin`` is ``http.client``'s, with that one call
    changed)."""

    def begin(self) -> None:
        """``http.client.HTTPResponse.begin`` (Python 3.10-3.13) reading the headers with
        ``parse_headers``."""
        if self.headers is not None:
            return
        while True:
            version, status, reason = self._read_status()
            if status != http.client.CONTINUE:
                break
            parse_headers(self.fp)  # a 100's headers, skipped
        self.code = self.status = status
        self.reason = reason.strip()
        if version in ("HTTP/1.0", "HTTP/0.9"):
            self.version = 10
        elif version.startswith("HTTP/1."):
            self.version = 11
        else:
            raise http.client.UnknownProtocol(version)
        self.headers = self.msg = parse_headers(self.fp)
        transfer = self.headers.get("transfer-encoding")
        self.chunked = bool(transfer and transfer.lower() == "chunked")
        if self.chunked:
            self.chunk_left = None
        self.will_close = self._check_close()
        self.length = None
        length = self.headers.get("content-length")
        if length and not self.chunked:
            try:
                self.length = int(length)
            except ValueError:
                self.length = None
            else:
                if self.length < 0:  # a negative length is no length
                    self.length = None
        if status in (http.client.NO_CONTENT, http.client.NOT_MODIFIED) or 100 <= status < 200 or self._method == "HEAD":
            self.length = 0
        if not self.will_close and not self.chunked and self.length is None:
            self.will_close = True

    def _read_status(self) -> tuple[str, int, str]:
        """The status line ``begin()`` reads (as ``http.client`` reads it), interim ones passed over."""
        while True:
            line = str(self.fp.readline(_MAX_LINE + 1), "iso-8859-1")
            if len(line) > _MAX_LINE:
                raise http.client.LineTooLong("status line")
            if not line:
                raise http.client.RemoteDisconnected("Remote end closed connection without response")
            version, _, rest = line.strip().partition(" ")
            code, _, reason = rest.strip().partition(" ")
            if not version.startswith("HTTP/") or not (code.isdigit() and len(code) == 3 and code.isascii()) or code[0] == "0":
                raise http.client.BadStatusLine(line)
            status = int(code)
            if status >= 200 or status in (100, 101):
                return version, status, reason.strip()  # a 100 is passed over by begin() itself
            parse_headers(self.fp)  # an interim answer's headers (limits as for any)


class _Connection(http.client.HTTPConnection):
    """One kept-alive connection of the pool: TCP (direct, or to a proxy, tunnelled for https),
    TLS where the route is https, every socket operation under the request's deadline."""

    def __init__(self, route: _Route, timeout: float, tls: ssl.SSLContext) -> None:
        super().__init__(route.host, route.port, timeout=timeout)
        self.read_timeout = timeout
        self.route = route
        self.tls = tls
        self.idle_since = 0.0

    response_class = _FinalResponse

    def connect(self) -> None:
        route = self.route
        proxy = urlsplit(route.proxy) if route.proxy else None
        named = f"the proxy {redact_url(route.proxy or '')}"
        if proxy is not None and proxy.scheme not in ("http", "https"):
            raise ConfigurationError(
                f"{named} is a {proxy.scheme or 'schemeless'} proxy: only http:// and https:// proxies are supported",
                hint="set http_proxy / https_proxy / all_proxy to an http:// or https:// proxy URL, or list the host in no_proxy",
            )
        default_port = DEFAULT_PORTS[proxy.scheme] if proxy is not None else route.port
        host, port = (proxy.hostname or "", proxy.port or default_port) if proxy is not None else (route.host, route.port)
        try:
            sock = socket.create_connection((deadlines.connect_host(host), port), deadlines.clamp(self.read_timeout))
        except TimeoutError as exc:
            raise ConnectTimeout(_via(proxy, named, str(exc) or "connect timed out")) from None
        except socket.gaierror as exc:
            raise HostNotFound(_via(proxy, named, f"cannot resolve {host} ({exc.strerror or exc})")) from None
        except OSError as exc:
            raise ConnectError(_via(proxy, named, str(exc) or type(exc).__name__)) from None
        wire: _Wire = sock
        checking = named  # whose certificate a failing handshake was checking
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if proxy is not None and proxy.scheme == "https":  # TLS to the proxy itself
                sock.settimeout(deadlines.clamp(self.read_timeout))
                wire = sock = self.tls.wrap_socket(sock, server_hostname=host)
            checking = route.host
            if proxy is not None and route.scheme == "https":
                _tunnel(sock, route, proxy_authorization(route.proxy or ""), self.read_timeout, named)
            if route.scheme == "https":
                sock.settimeout(deadlines.clamp(self.read_timeout))
                if isinstance(sock, ssl.SSLSocket):  # TLS inside the proxy's TLS
                    wire = _TunnelledTLS(sock, self.tls, route.host)
                else:
                    wire = self.tls.wrap_socket(sock, server_hostname=route.host)
        except BaseException as exc:
            sock.close()
            if isinstance(exc, TrustSettingError):
                raise ConfigurationError(str(exc), hint=exc.hint) from None
            if isinstance(exc, ssl.SSLCertVerificationError):
                raise ConfigurationError(
                    f"TLS: certificate verify failed for {checking} ({exc.verify_message or exc.reason or exc})",
                    hint=trust_hint(self.tls),
                ) from None
            if isinstance(exc, TimeoutError):
                raise ConnectTimeout(str(exc) or "TLS handshake timed out") from None
            if isinstance(exc, OSError):  # another ssl.SSLError (the handshake broke off, ...) included
                raise ConnectError(str(exc) or type(exc).__name__) from None
            raise
        self.sock = deadlines.DeadlineSocket(wire, self.read_timeout)


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

    def __init__(self, outer: ssl.SSLSocket, context: ssl.SSLContext, server_hostname: str) -> None:
        self.outer = outer
        self._in, self._out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = context.wrap_bio(self._in, self._out, server_hostname=server_hostname)
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
            data = self._run(lambda: self.tls.read(len(buffer)))
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


def proxy_authorization(proxy: str) -> str | None:
    """Basic credentials for the ``user:password@`` of a proxy URL, or None."""
    parts = urlsplit(proxy)
    if parts.username is None:
        return None
    return basic_authorization(unquote(parts.username), unquote(parts.password or ""))


def _tunnel(sock: socket.socket, route: _Route, authorization: str | None, timeout: float, named: str) -> None:
    """``CONNECT host:port`` through a proxy; returns once it said 2xx (its answer read whole)."""
    lines = [f"CONNECT {route.netloc} HTTP/1.1", f"Host: {route.netloc}"] + ([f"Proxy-Authorization: {authorization}"] if authorization else [])
    sock.settimeout(deadlines.clamp(timeout))
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    answer = b""
    while b"\r\n\r\n" not in answer:
        sock.settimeout(deadlines.clamp(timeout))
        data = sock.recv(4096)
        if not data or len(answer) > 65536:
            raise ConnectError(f"{named} closed the tunnel before answering CONNECT")
        answer += data
    status = printable(answer.split(b"\r\n", 1)[0].decode("latin-1", "replace"))
    code = status.split(" ", 2)[1] if status.count(" ") >= 1 else ""
    if not code.startswith("2"):
        raise ConnectError(f"{named} refused the tunnel to {route.netloc}: {status}")


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

    def close(self, *, reuse: bool = True) -> None:
        """Release the connection: back to the pool when the answer was read to its end (and
        ``reuse``), else closed."""
        if self.is_closed:
            return
        self.is_closed = True
        raw = self._raw
        complete = self.is_stream_consumed or (not raw.chunked and raw.length == 0)
        self._release(reuse and complete)


class Client:
    """GETs over a pool of kept-alive connections (see the module docstring). Thread-safe."""

    def __init__(
        self,
        *,
        timeout: float,
        max_connections: int,
        user_agent: str,
        trust_env: bool = True,
        system_certs: bool = False,
        keepalive_expiry: float = 5.0,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.timeout = timeout
        self.keepalive_expiry = keepalive_expiry
        self.tls = trust_context(trust_env=trust_env, system=system_certs)  # certificates loaded at the first https handshake
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

    def send(self, url: str | Prepared, headers: Mapping[str, str], *, fresh: bool = False) -> Response:
        """GET ``url`` (no credentials in it; redirects are not followed; or what ``check`` made of
        it): the answer, streamed. ``fresh``: on a new connection, never one from the pool (a
        retry). A pooled connection that breaks before the status line is replaced by a fresh one
        once (the server closed it as the request went out)."""
        route, target = url if isinstance(url, Prepared) else self._route(url)
        try:
            wait = deadlines.clamp(self.timeout)
        except TimeoutError as exc:  # the request's deadline passed before it was sent (a long redirect chain)
            raise Timeout(str(exc)) from None
        if not self._slots.acquire(timeout=wait):
            raise Timeout("no connection free in the pool")
        conn: _Connection | None = None
        merged = dict(self.default_headers)
        if headers:
            given = {name.lower() for name in headers}
            merged = {k: v for k, v in merged.items() if k.lower() not in given}
            merged.update(headers)
        if route.proxy and route.scheme == "http":
            auth = proxy_authorization(route.proxy)
            if auth:
                merged["Proxy-Authorization"] = auth
        deadline = deadlines.current()
        if deadline is not None:
            deadline.headers_phase()
        try:
            conn = None if fresh else self._checkout(route)
            reused = conn is not None
            conn = conn or _Connection(route, self.timeout, self.tls)
            try:
                conn.request("GET", route.request_target(target), headers=merged)
                raw = conn.getresponse()
            except (ConnectionError, http.client.BadStatusLine):  # RemoteDisconnected is both
                if not reused:
                    raise
                conn.close()  # a pooled connection broke before its answer: once more, on a new one
                conn = _Connection(route, self.timeout, self.tls)
                conn.request("GET", route.request_target(target), headers=merged)
                raw = conn.getresponse()
            if deadline is not None:
                deadline.body_phase()
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

    def _checkout(self, route: _Route) -> _Connection | None:
        """The most recently used idle connection of ``route`` that can still be used, or None
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
        return found

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
    "ConfigurationError",
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
