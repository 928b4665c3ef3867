"""A hostile relay on 127.0.0.1, in front of a real server (``server.IndexServer``): it passes each
request on and bends the answer the way the adversarial probe did (issue 32).

Modes (``HostileRelay.mode``, switchable while it runs; ``only`` limits a mode to request paths
containing that text):

- ``""``: a faithful relay (HTTP/1.1 keep-alive towards the client);
- ``info1n``: every answer preceded by interim answers: ``102 Processing``, ``103 Early Hints``
  (with headers), ``100 Continue``;
- ``info103``: every answer preceded by one ``103 Early Hints`` with ``Link`` headers;
- ``info100_flood``: an endless fast stream of ``100 Continue`` lines instead of the answer;
- ``ka_rst``: a request that arrives on a connection already used is answered with a reset
  (a fresh connection is served);
- ``esc``: the answer replaced by a ``418`` whose reason phrase and body carry terminal escape
  sequences (a fake green "ok", a window title), NUL and 0xff bytes;
- ``unexpected``: the answer replaced by ``418`` with a kept-alive empty body.

``connections`` counts the client connections accepted; ``requests`` lists (connection number,
request line) in order.
"""

from __future__ import annotations

import socket
import struct
import threading
from contextlib import suppress

ESC_REASON = b"\x1b[32mok\x1b[0m\x1b]0;pwned\x07\x00\xff"
ESC_BODY = b"\x1b[2J\x1b[1;1Hall good\r\n\x00\xff"


def _read_head(conn: socket.socket, buf: bytearray) -> bytes | None:
    while b"\r\n\r\n" not in buf:
        data = conn.recv(65536)
        if not data:
            return None
        buf += data
    head, _, rest = bytes(buf).partition(b"\r\n\r\n")
    buf[:] = rest
    return head


def _reset(conn: socket.socket) -> None:
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


class HostileRelay:
    def __init__(self, upstream: str, mode: str = "", only: str = "") -> None:
        host_port = upstream.split("://", 1)[1].split("/", 1)[0]
        host, _, port = host_port.rpartition(":")
        self.upstream = (host, int(port))
        self.mode = mode
        self.only = only
        self.connections = 0
        self.requests: list[tuple[int, str]] = []
        self._lock = threading.Lock()
        self._sock = socket.create_server(("127.0.0.1", 0), backlog=1024)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/"
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def __enter__(self) -> HostileRelay:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._sock.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
                number = self.connections
            threading.Thread(target=self._serve, args=(conn, number), daemon=True).start()

    def _serve(self, conn: socket.socket, number: int) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = bytearray()
        served = 0
        with suppress(OSError):
            while True:
                head = _read_head(conn, buf)
                if head is None:
                    break
                line = head.split(b"\r\n", 1)[0].decode("latin-1")
                with self._lock:
                    self.requests.append((number, line))
                mode = self.mode if (not self.only or self.only in line) else ""
                if mode == "ka_rst" and served:
                    _reset(conn)
                    return
                served += 1
                if mode == "info100_flood":
                    while not self._stop.is_set():
                        conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n" * 64)
                    return
                if mode == "esc":
                    conn.sendall(b"HTTP/1.1 418 " + ESC_REASON + b"\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n" % len(ESC_BODY) + ESC_BODY)
                    continue
                if mode == "unexpected":
                    conn.sendall(b"HTTP/1.1 418 I'm a teapot\r\nContent-Length: 0\r\n\r\n")
                    continue
                answer = self._relay(head)
                if mode == "info1n":
                    conn.sendall(b"HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n")
                elif mode == "info103":
                    conn.sendall(b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\nLink: </b.js>; rel=preload\r\n\r\n")
                conn.sendall(answer)
        conn.close()

    def _relay(self, head: bytes) -> bytes:
        """The upstream server's whole answer to ``head`` (its ``Connection: close`` dropped)."""
        lines = [h for h in head.split(b"\r\n") if not h.lower().startswith(b"connection:")]
        with socket.create_connection(self.upstream) as up:
            up.sendall(b"\r\n".join([*lines, b"Connection: close", b"", b""]))
            data = bytearray()
            while chunk := up.recv(65536):
                data += chunk
        top, sep, body = bytes(data).partition(b"\r\n\r\n")
        kept = [h for h in top.split(b"\r\n") if not h.lower().startswith(b"connection:")]
        return b"\r\n".join(kept) + sep + body


class TlsProxy:
    """An ``https://`` forward proxy on 127.0.0.1 (TLS to the proxy, with ``context``): CONNECT
    tunnels piped both ways, and absolute-form plain-http requests relayed (one a connection).
    ``seen`` records each request line with its Proxy-Authorization."""

    def __init__(self, context: object) -> None:
        import ssl

        assert isinstance(context, ssl.SSLContext)
        self.context = context
        self.seen: list[tuple[str, str | None]] = []
        self._sock = socket.create_server(("127.0.0.1", 0), backlog=1024)
        self.url = f"https://127.0.0.1:{self._sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def __enter__(self) -> TlsProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self._sock.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        with suppress(OSError):
            conn = self.context.wrap_socket(raw, server_side=True)  # type: ignore[attr-defined]
            buf = bytearray()
            head = _read_head(conn, buf)
            if head is None:
                return
            line, *fields = head.decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip() for k, _, v in (f.partition(":") for f in fields)}
            self.seen.append((line, headers.get("proxy-authorization")))
            method, target, _ = line.split(" ", 2)
            if method == "CONNECT":
                host, _, port = target.rpartition(":")
                upstream = socket.create_connection((host, int(port)))
                conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                if buf:
                    upstream.sendall(bytes(buf))
                done = threading.Event()

                def pump(src: socket.socket, dst: socket.socket) -> None:
                    with suppress(OSError):
                        while data := src.recv(65536):
                            dst.sendall(data)
                    done.set()

                threading.Thread(target=pump, args=(upstream, conn), daemon=True).start()
                pump(conn, upstream)
                done.wait(5)
                upstream.close()
                conn.close()
                return
            after = target.partition("://")[2]
            hostport, _, path = after.partition("/")
            host, _, port = hostport.rpartition(":")
            kept = [f for f in fields if not f.lower().startswith(("proxy-", "connection"))]
            with socket.create_connection((host, int(port))) as up:
                up.sendall("\r\n".join([f"{method} /{path} HTTP/1.1", *kept, "Connection: close", "", ""]).encode("latin-1"))
                while data := up.recv(65536):
                    conn.sendall(data)
            conn.close()
