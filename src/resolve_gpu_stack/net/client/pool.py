"""``Client``: GETs over a pool of kept-alive connections per origin (see the package's docstring). Thread-safe."""

from __future__ import annotations

import http.client
import os
import select
import ssl
import threading
import time
from collections.abc import Mapping
from urllib.parse import quote, urlsplit

from .. import deadline as deadlines
from ..tls import trust_context
from .connection import DEFAULT_PORTS, Connection, Prepared, Route
from .errors import InvalidURL, ReadError, Timeout, TransportError
from .proxies import EnvironmentProxies, proxy_authorization
from .response import Response

# what may stand unescaped in a request target (RFC 3986 pchar, "/" and "?"; "%" keeps escapes as they are)
_PATH_SAFE = "/%:@!$&'()*+,;=~"
_QUERY_SAFE = _PATH_SAFE + "?"


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
        self._idle: list[Connection] = []  # oldest first
        # each https route's latest TLS session with a ticket: a new connection of the same route (the
        # same host, port and proxy; this client's one trust context) resumes it, skipping the
        # certificate's transfer and check (which that session's handshake made for this host name)
        self._sessions: dict[Route, ssl.SSLSession] = {}
        self._lock = threading.Lock()
        self._closed = False

    def check(self, url: str) -> Prepared:
        """``url`` prepared for ``send``; ``InvalidURL`` for a URL no request can be made for
        (scheme, host, port)."""
        return self._route(url)

    def send(self, url: str | Prepared, headers: Mapping[str, str], *, fresh: bool = False, deadline: deadlines.Deadline | None = None) -> Response:
        """GET ``url`` (no credentials in it; redirects are not followed; or what ``check`` made of
        it): the answer, streamed. ``fresh``: on a new connection, never one from the pool (a
        retry). ``deadline``: the request's (``deadline.py``): every socket operation of this hop
        and of its body's reads waits at most until it. A pooled connection that breaks before
        the status line is replaced by a fresh one once (the server closed it as the request went out)."""
        route, target = url if isinstance(url, Prepared) else self._route(url)
        self._take_slot(deadline)
        merged = self._headers(route, headers)
        if deadline is not None:
            deadline.headers_phase()
        conn: Connection | None = None
        try:
            conn = None if fresh else self._checkout(route)
            conn, raw = self._exchange(conn, route, route.request_target(target), merged, deadline)
            if deadline is not None:
                deadline.body_phase()
        except BaseException as exc:
            if conn is not None:
                conn.close()
            self._slots.release()
            if isinstance(exc, TransportError) or not isinstance(exc, Exception):
                raise
            raise _send_failure(exc) from None
        answered = conn

        def release(complete: bool) -> None:
            try:
                raw.close()
                if complete:
                    self._keep_session(answered)
            finally:
                self._checkin(answered, complete and not raw.will_close and answered.sock is not None)
                self._slots.release()

        return Response(raw, release, deadline)

    def _take_slot(self, deadline: deadlines.Deadline | None) -> None:
        """One of the pool's ``max_connections`` slots, waited for within the request's ``deadline``."""
        try:
            wait = deadlines.clamp(self.timeout, deadline)
        except TimeoutError as exc:  # the request's deadline passed before it was sent (a long redirect chain)
            raise Timeout(str(exc)) from None
        if not self._slots.acquire(timeout=wait):
            raise Timeout("no connection free in the pool")

    def _headers(self, route: Route, headers: Mapping[str, str]) -> dict[str, str]:
        """The request's headers: the client's defaults, those given in their place (in any
        case), and the proxy's credentials for plain http through a proxy."""
        merged = dict(self.default_headers)
        if headers:
            given = {name.lower() for name in headers}
            merged = {k: v for k, v in merged.items() if k.lower() not in given}
            merged.update(headers)
        if route.proxy and route.scheme == "http":
            auth = proxy_authorization(route.proxy)
            if auth:
                merged["Proxy-Authorization"] = auth
        return merged

    def _exchange(
        self, pooled: Connection | None, route: Route, target: str, headers: dict[str, str], deadline: deadlines.Deadline | None
    ) -> tuple[Connection, http.client.HTTPResponse]:
        """The request sent and its answer's status line and headers read under ``deadline``, on
        ``pooled`` or a new connection; a pooled one that breaks before its answer is replaced by a
        new one, once. A new connection that fails is closed here."""
        if pooled is not None:
            pooled.serve(deadline)
            try:
                return pooled, _ask(pooled, target, headers)
            except (ConnectionError, http.client.BadStatusLine):  # RemoteDisconnected is both
                pooled.close()  # a pooled connection broke before its answer: once more, on a new one
        with self._lock:
            resume = self._sessions.get(route) if route.scheme == "https" else None
        conn = Connection(route, self.timeout, self.tls, resume)
        conn.serve(deadline)
        try:
            return conn, _ask(conn, target, headers)
        except BaseException:
            conn.close()
            raise

    def _keep_session(self, conn: Connection) -> None:
        """Keep ``conn``'s TLS session for its route's next new connection (asked once per
        connection, after its first complete answer: a TLS 1.3 ticket comes after the handshake)."""
        if conn.session_taken or conn.route.scheme != "https":
            return
        conn.session_taken = True
        session = conn.tls_session()
        if session is not None:
            with self._lock:
                self._sessions[conn.route] = session

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._sessions.clear()
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
        return Prepared(Route(scheme, host, port, proxy), target)

    def _checkout(self, route: Route) -> Connection | None:
        """The most recently used idle connection of ``route`` that can still be used, or None
        (idle connections past ``keepalive_expiry`` are closed on the way)."""
        now = time.monotonic()
        found: Connection | None = None
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

    def _checkin(self, conn: Connection, reusable: bool) -> None:
        """Keep ``conn`` for the next request to its route, or close it; at most as many idle
        connections are kept as may be in use (the oldest goes)."""
        conn.serve(None)  # idle: no request's deadline
        if not reusable:
            conn.close()
            return
        conn.idle_since = time.monotonic()
        dropped: list[Connection] = []
        with self._lock:
            if self._closed:
                dropped.append(conn)
            else:
                self._idle.append(conn)
                while len(self._idle) > self.max_connections:
                    dropped.append(self._idle.pop(0))
        for old in dropped:
            old.close()


def _closed_by_peer(conn: Connection) -> bool:
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


def _ask(conn: Connection, target: str, headers: dict[str, str]) -> http.client.HTTPResponse:
    """GET ``target`` on ``conn``: its answer, once its status line and headers are read."""
    conn.request("GET", target, headers=headers)
    return conn.getresponse()


def _send_failure(exc: Exception) -> Exception:
    """What a failure sending a request or reading its answer's head is raised as."""
    if isinstance(exc, TimeoutError):
        return Timeout(str(exc) or "timed out")
    if isinstance(exc, (OSError, http.client.HTTPException)):
        return ReadError(str(exc) or type(exc).__name__)
    if isinstance(exc, (ValueError, UnicodeError)):  # a header or target http.client refuses
        return InvalidURL(str(exc))
    return exc
