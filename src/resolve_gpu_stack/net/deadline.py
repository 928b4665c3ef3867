"""An overall deadline per request, enforced at the socket; ``*.localhost`` kept local.

A per-read timeout alone lets a server that trickles a byte a second (headers or body) hold a
request for ever. Here every socket connect, read and write of a request waits at most until the
request's deadline, counted in two phases:

- the answer's status and headers (every redirect hop's, and any ``1xx`` interim answers before
  them): ``REQUEST_DEADLINE_FACTOR`` times the per-read timeout from the first byte sent, with no
  credit for bytes received (an endless stream of ``100 Continue`` lines earns nothing);
- the body, from the moment its headers are read (``Deadline.body_phase``): the same number of
  seconds again, plus one second per ``MIN_TRANSFER_RATE`` body bytes received (a large wheel on a
  slow but steady link still completes).

A read past the deadline fails as a timeout, which ``transport.Transport`` reports as "no complete
answer within N s".

The deadline is passed, never found: ``Transport.open`` makes one per request and hands it to
``client.Client.send``, which gives it to the connection serving the request (connects, the proxy
tunnel and TLS use ``clamp``-ed timeouts; each connected socket, TLS included, is wrapped in a
``DeadlineSocket`` that reads its connection's current deadline), and to the ``Response`` whose
body is read under it; proxied requests keep the deadline too. ``connect_host`` sends
``*.localhost`` names to 127.0.0.1 instead of asking DNS.
"""

from __future__ import annotations

import io
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

REQUEST_DEADLINE_FACTOR = 4  # the deadline is this many times --timeout (30 s: 120 s)
MIN_TRANSFER_RATE = 16 * 1024  # bytes per second: each such many bytes received earn a second more


@dataclass
class Deadline:
    """When the current request must be done by: its headers ``seconds`` after it began; its body
    ``seconds`` after the body began, plus transfer credit for the body's bytes."""

    seconds: float
    min_rate: float = MIN_TRANSFER_RATE
    began: float = field(default_factory=time.monotonic)
    received: int = 0  # bytes received in the body phase
    body_began: float | None = None  # None while the status and headers are awaited

    def left(self) -> float:
        if self.body_began is None:
            return self.began + self.seconds - time.monotonic()
        return self.body_began + self.seconds + self.received / self.min_rate - time.monotonic()

    def headers_phase(self) -> None:
        """A request (a redirect hop) is sent: its answer's headers count against the request's start."""
        self.body_began = None

    def body_phase(self) -> None:
        """The headers are read: the body gets its own ``seconds``, and credit for its bytes."""
        self.body_began = time.monotonic()
        self.received = 0

    @property
    def expired(self) -> bool:
        return self.left() <= 0

    def describe(self) -> str:
        return f"no complete answer within {self.seconds:g} s"


def clamp(timeout: float, deadline: Deadline | None) -> float:
    """``timeout``, shortened to what is left of ``deadline`` (a request's; None: no deadline);
    ``TimeoutError`` naming the deadline when none is left."""
    if deadline is None:
        return timeout
    left = deadline.left()
    if left <= 0:
        raise TimeoutError(deadline.describe())
    return min(timeout, left)


def connect_host(host: str) -> str:
    """Where to connect for ``host``: ``*.localhost`` is loopback (RFC 6761), never a DNS question."""
    name = host.lower().rstrip(".")
    return "127.0.0.1" if name.endswith(".localhost") else host


class _Addresses:
    """Each (host, port)'s addresses, asked of DNS once per process (one command): a pool opening
    32 connections at once would otherwise ask 32 times at once, and a resolver that drops part of
    such a burst answers the rest after its 5 s retry (measured here: 32 parallel lookups of one
    name, every one 5.0 s; one lookup, milliseconds). A failed lookup is not kept."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._per_name: dict[tuple[str, int], threading.Lock] = {}
        self._known: dict[tuple[str, int], list[Any]] = {}

    def of(self, host: str, port: int) -> list[Any]:
        key = (host, port)
        with self._lock:
            lock = self._per_name.setdefault(key, threading.Lock())
        with lock:  # the others wait for the one lookup in flight
            known = self._known.get(key)
            if known is None:
                known = self._known[key] = socket.getaddrinfo(lookup_name(host), port, type=socket.SOCK_STREAM)
        return known


def lookup_name(host: str) -> str | bytes:
    """``host`` as ``getaddrinfo`` is given it: an ASCII name whose labels the IDNA codec takes as
    they are (each 1-63 characters, the last possibly empty) as its ASCII bytes, which are the bytes
    the codec gives; anything else as text, for the codec. A text makes CPython load the IDNA codec
    (``encodings.idna``, ``stringprep``, ``unicodedata``: ~1.3 ms) on the first connection's thread
    even for ``127.0.0.1``; a TLS handshake loads it anyway (``server_hostname``), plain HTTP need not."""
    if not host.isascii():
        return host
    *labels, last = host.split(".")
    if len(last) >= 64 or not all(0 < len(label) < 64 for label in labels):
        return host  # the codec's error, as before
    return host.encode("ascii")


ADDRESSES = _Addresses()


def open_tcp(host: str, port: int, timeout: float) -> socket.socket:
    """A TCP connection to ``host`` (``connect_host``) at ``port``, trying each of its addresses in
    turn as ``socket.create_connection`` does, the addresses looked up once (``_Addresses``)."""
    error: OSError | None = None
    for family, kind, proto, _, address in ADDRESSES.of(connect_host(host), port):
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            sock.connect(address)
            return sock
        except OSError as exc:
            sock.close()
            error = exc
    raise error or OSError(f"{host}: no address to connect to")


class _Reader(io.RawIOBase):
    """The read side of a ``DeadlineSocket`` for ``http.client`` (what ``socket.makefile`` gives)."""

    def __init__(self, owner: DeadlineSocket) -> None:
        self._owner = owner

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        return self._owner.recv_into(buffer)

    def close(self) -> None:
        if not self.closed:
            super().close()
            self._owner.reader_closed()


class DeadlineSocket:
    """A connected socket (plain or TLS) whose every read and write waits at most ``timeout`` and
    at most until the deadline of the request it serves (``deadline``, set by its connection for
    each request), and whose reads earn that deadline its transfer credit."""

    def __init__(self, sock: socket.socket | Any, timeout: float, deadline: Deadline | None = None) -> None:  # a socket, or what reads and writes like one
        self.sock = sock
        self.timeout = timeout
        self.deadline = deadline
        self._readers = 0  # open makefile()s: as with a socket's own, the socket closes after the last
        self._closing = False
        self._waits: float | None = None  # the timeout the socket was last given

    def _wait_at_most(self) -> None:
        """Give the socket the wait of its next operation: ``timeout``, less when the request's
        deadline is nearer. The socket is told only when that changes: ``settimeout`` is a system
        call that lets go of the GIL (a wake-up of another thread), and a body read is thousands of
        reads (one a TLS record) at the same ``timeout`` until its deadline draws near."""
        wait = clamp(self.timeout, self.deadline)
        if wait != self._waits:
            self.sock.settimeout(wait)
            self._waits = wait

    def recv_into(self, buffer: memoryview) -> int:
        self._wait_at_most()
        n = self.sock.recv_into(buffer)
        if self.deadline is not None:
            self.deadline.received += n
        return n

    def sendall(self, data: bytes) -> None:
        self._wait_at_most()
        self.sock.sendall(data)

    def makefile(self, mode: str = "rb", buffering: int | None = None) -> io.BufferedReader:
        self._readers += 1
        return io.BufferedReader(_Reader(self), 64 * 1024)

    def fileno(self) -> int:
        return self.sock.fileno()

    def reader_closed(self) -> None:
        self._readers -= 1
        if self._closing and self._readers <= 0:
            self.sock.close()

    def close(self) -> None:
        """Close the socket, or, while an answer is still being read from it (``http.client``
        hands an HTTP/1.0 or ``Connection: close`` answer to its response and closes the
        connection at once), once that answer is closed."""
        self._closing = True
        if self._readers <= 0:
            self.sock.close()


__all__ = ["MIN_TRANSFER_RATE", "REQUEST_DEADLINE_FACTOR", "Deadline", "DeadlineSocket", "clamp", "connect_host"]
