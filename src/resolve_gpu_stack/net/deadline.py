"""An overall deadline per request, enforced at the socket under httpx; ``*.localhost`` kept local.

httpx's timeout bounds each read, so a server that trickles a byte a second (headers or body)
never trips it. Here every socket read, write and connect of a request waits at most until the
request's deadline: ``REQUEST_DEADLINE_FACTOR`` times the per-read timeout, plus one second per
``MIN_TRANSFER_RATE`` bytes received (a large wheel on a slow but steady link still completes). A
read past the deadline fails as a timeout, which ``transport.Transport`` reports as "no complete
answer within N s".

The deadline is per thread: ``Transport.open`` starts one, and the body is read in the same
thread. ``DeadlineTransport`` is the httpx transport whose connection pool uses this backend
(httpx has no hook for a network backend); its TLS context loads the trust store at the first
https handshake (``tls.py``), not when the client is made. The same backend connects ``*.localhost`` names to
127.0.0.1 instead of asking DNS.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import httpcore
import httpx

from .tls import LazyTrustContext

REQUEST_DEADLINE_FACTOR = 4  # the deadline is this many times --timeout (30 s: 120 s)
MIN_TRANSFER_RATE = 16 * 1024  # bytes per second: each such many bytes received earn a second more

class _Local(threading.local):
    deadline: Deadline | None = None


_local = _Local()


@dataclass
class Deadline:
    """When the current request must be done by: ``seconds`` after it began, plus transfer credit."""

    seconds: float
    min_rate: float = MIN_TRANSFER_RATE
    began: float = field(default_factory=time.monotonic)
    received: int = 0

    def left(self) -> float:
        return self.began + self.seconds + self.received / self.min_rate - time.monotonic()

    @property
    def expired(self) -> bool:
        return self.left() <= 0

    def describe(self) -> str:
        return f"no complete answer within {self.seconds:g} s"


def start(seconds: float, min_rate: float | None = None) -> Deadline:
    """Begin a request's deadline in this thread (replacing the last one)."""
    deadline = Deadline(seconds=seconds, min_rate=MIN_TRANSFER_RATE if min_rate is None else min_rate)
    _local.deadline = deadline
    return deadline


def current() -> Deadline | None:
    """This thread's deadline, or None when no request set one."""
    return _local.deadline


def _clamp(timeout: float | None, exc: type[Exception]) -> float | None:
    deadline = current()
    if deadline is None:
        return timeout
    left = deadline.left()
    if left <= 0:
        raise exc(deadline.describe())
    return left if timeout is None else min(timeout, left)


def connect_host(host: str) -> str:
    """Where to connect for ``host``: ``*.localhost`` is loopback (RFC 6761), never a DNS question."""
    name = host.lower().rstrip(".")
    return "127.0.0.1" if name.endswith(".localhost") else host


class _Stream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data = self._inner.read(max_bytes, _clamp(timeout, httpcore.ReadTimeout))
        deadline = current()
        if deadline is not None:
            deadline.received += len(data)
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _clamp(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None) -> httpcore.NetworkStream:
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, _clamp(timeout, httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class DeadlineBackend(httpcore.NetworkBackend):
    """A network backend whose streams keep to this thread's deadline (see the module docstring)."""

    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self.inner = inner

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        stream = self.inner.connect_tcp(connect_host(host), port, _clamp(timeout, httpcore.ConnectTimeout), local_address, socket_options)
        return _Stream(stream)

    def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        return _Stream(self.inner.connect_unix_socket(path, _clamp(timeout, httpcore.ConnectTimeout), socket_options))

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)


# httpcore's exceptions as httpx's (most specific first: the first class in an exception's MRO wins).
_EXCEPTIONS: dict[type[Exception], type[httpx.TransportError]] = {
    httpcore.ConnectTimeout: httpx.ConnectTimeout,
    httpcore.ReadTimeout: httpx.ReadTimeout,
    httpcore.WriteTimeout: httpx.WriteTimeout,
    httpcore.PoolTimeout: httpx.PoolTimeout,
    httpcore.TimeoutException: httpx.TimeoutException,
    httpcore.ConnectError: httpx.ConnectError,
    httpcore.ReadError: httpx.ReadError,
    httpcore.WriteError: httpx.WriteError,
    httpcore.NetworkError: httpx.NetworkError,
    httpcore.ProxyError: httpx.ProxyError,
    httpcore.UnsupportedProtocol: httpx.UnsupportedProtocol,
    httpcore.LocalProtocolError: httpx.LocalProtocolError,
    httpcore.RemoteProtocolError: httpx.RemoteProtocolError,
    httpcore.ProtocolError: httpx.ProtocolError,
}


@contextmanager
def _as_httpx() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        mapped = next((_EXCEPTIONS[c] for c in type(exc).__mro__ if c in _EXCEPTIONS), None)
        if mapped is None:
            raise
        raise mapped(str(exc)) from exc


class _PoolBody(Protocol):
    """What a connection pool answers a body with (httpcore's pool byte stream)."""

    def __iter__(self) -> Iterator[bytes]: ...

    def close(self) -> None: ...


class _Body(httpx.SyncByteStream):
    def __init__(self, inner: _PoolBody) -> None:
        self._inner = inner

    def __iter__(self) -> Iterator[bytes]:
        with _as_httpx():
            yield from self._inner

    def close(self) -> None:
        with _as_httpx():
            self._inner.close()


class DeadlineTransport(httpx.BaseTransport):
    """httpx's HTTP/1.1 transport over an ``httpcore.ConnectionPool`` whose connections keep this
    thread's deadline (``DeadlineBackend``). Built from public parts only; proxies from the
    environment are still httpx's own transports (without a deadline)."""

    def __init__(self, *, max_connections: int, trust_env: bool = True, keepalive_expiry: float = 5.0) -> None:
        self._pool = httpcore.ConnectionPool(
            ssl_context=LazyTrustContext(trust_env=trust_env),  # certificates loaded at the first https handshake
            max_connections=max_connections,
            max_keepalive_connections=max_connections,
            keepalive_expiry=keepalive_expiry,
            network_backend=DeadlineBackend(httpcore.SyncBackend()),
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        req = httpcore.Request(
            method=request.method,
            url=httpcore.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _as_httpx():
            resp = self._pool.handle_request(req)
        body = cast(_PoolBody, resp.stream)  # a sync pool always answers with a closable iterable
        return httpx.Response(status_code=resp.status, headers=resp.headers, stream=_Body(body), extensions=resp.extensions)

    def close(self) -> None:
        with _as_httpx():
            self._pool.close()


__all__ = ["MIN_TRANSFER_RATE", "REQUEST_DEADLINE_FACTOR", "Deadline", "DeadlineBackend", "DeadlineTransport", "connect_host", "current", "start"]
