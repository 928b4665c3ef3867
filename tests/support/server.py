"""A real HTTP server on 127.0.0.1 for tests: serves a directory tree, with scripted faults.

Fair to every client, so benchmarks can time through it: a listen backlog of 1024, HTTP/1.1
keep-alive, ``TCP_NODELAY`` on every accepted socket, and a plain answer written in one write.

- GET/HEAD of files, ``Range: bytes=a-b`` and ``bytes=-n`` (206), ETag + Last-Modified, 304 on
  ``If-None-Match`` / ``If-Modified-Since``.
- A directory path ending in "/" serves its ``index.html`` (or ``index.json`` when the client
  accepts ``application/vnd.pypi.simple.v1+json`` and that file exists).
- ``server.script(path, [Fault, ...])``: the next requests for ``path`` get these faults in order.
- ``server.latency`` adds a delay to every response; ``server.log`` records (method, path, headers).
- ``server.bytes_sent`` counts body bytes served (read once the answers in flight are sent);
  ``server.rate`` caps them (bytes/s, all connections).
- ``server.auth = (user, password)``: every request without that Basic authorization gets 401.
- ``server.ignore_ranges = True``: answer every ``Range`` request with the whole file (200).
- ``server.seek_ranges = True``: a ``Range`` request for a file of more than 1 MiB reads only that
  range from disk (ETag from size and mtime): large sparse wheels stay cheap to serve.
- ``Fault(reset_after=n)`` / ``Fault(stall_after=n, delay=s)``: a reset / a stall after n body bytes.
- ``Fault(chunked=True)``: no Content-Length; ``Fault(trickle=s)`` / ``Fault(trickle_headers=s)``: the
  body / the headers one byte every s seconds (until the client hangs up).
"""

from __future__ import annotations

import base64
import email.utils
import hashlib
import http.server
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

JSON_TYPE = "application/vnd.pypi.simple.v1+json"


@dataclass
class Fault:
    status: int = 200
    body: bytes | None = None  # None: serve the real file
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before answering
    truncate_to: int | None = None  # send only this many body bytes but announce the full length
    reset: bool = False  # close the connection without an answer
    ignore_range: bool = False
    reset_after: int | None = None  # send this many body bytes, then reset the connection (RST)
    stall_after: int | None = None  # send this many body bytes, then stall ``delay`` seconds (not before answering)
    chunked: bool = False  # no Content-Length: the body goes out in 1 KiB chunks (Transfer-Encoding: chunked)
    trickle: float | None = None  # send the body ``trickle_size`` bytes (default one) every ``trickle`` seconds
    trickle_size: int = 1
    trickle_headers: float | None = None  # send the status line and headers one byte every ``trickle_headers`` seconds


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    disable_nagle_algorithm = True  # TCP_NODELAY on every accepted socket: no 40 ms delayed-ACK stalls
    server: _Server

    def log_message(self, fmt: str, *args: object) -> None:  # quiet
        pass

    def do_HEAD(self) -> None:
        self._serve(head=True)

    def do_GET(self) -> None:
        self._serve(head=False)

    def _serve(self, head: bool) -> None:
        owner = self.server.owner
        path = unquote(urlsplit(self.path).path)
        with owner.lock:
            owner.log.append((self.command, self.path, dict(self.headers)))
            fault = owner.faults.get(path, []).pop(0) if owner.faults.get(path) else None
        delay = owner.latency + (fault.delay if fault and fault.stall_after is None else 0.0)
        if delay:
            time.sleep(delay)
        if owner.auth is not None:
            token = base64.b64encode(f"{owner.auth[0]}:{owner.auth[1]}".encode()).decode()
            if self.headers.get("Authorization") != f"Basic {token}":
                self._send(401, b"unauthorized", {"Content-Type": "text/plain", "WWW-Authenticate": 'Basic realm="test"'}, head, None)
                return
        if fault and fault.reset:
            self.close_connection = True
            try:
                self.connection.shutdown(2)
            except OSError:
                pass
            return
        if fault and fault.body is not None or fault and fault.status != 200:
            body = fault.body if fault.body is not None else b""
            self._send(fault.status, body, {"Content-Type": "text/html", **fault.headers}, head, fault)
            return
        target = self._resolve(path)
        if target is None:
            self._send(404, b"<html><body>404 Not Found</body></html>", {"Content-Type": "text/html"}, head, None)
            return
        if owner.seek_ranges and fault is None and self._serve_range_from_disk(target, head):
            return
        data = target.read_bytes()
        ctype = JSON_TYPE if target.suffix == ".json" else ("text/html" if target.suffix == ".html" else "application/octet-stream")
        if target.name.endswith(".metadata"):
            ctype = "application/octet-stream"
        etag = '"' + hashlib.sha256(data).hexdigest()[:32] + '"'
        mtime = email.utils.formatdate(target.stat().st_mtime, usegmt=True)
        headers = {"Content-Type": ctype, "ETag": etag, "Last-Modified": mtime, "Accept-Ranges": "bytes"}
        if fault:
            headers.update(fault.headers)
        if self.headers.get("If-None-Match") == etag or (self.headers.get("If-Modified-Since") == mtime and "If-None-Match" not in self.headers):
            self._send(304, b"", headers, True, None)
            return
        rng = self.headers.get("Range")
        if rng and not (fault and fault.ignore_range) and not owner.ignore_ranges and rng.startswith("bytes="):
            start_s, _, end_s = rng[6:].partition("-")
            size = len(data)
            if start_s == "":
                start, end = max(0, size - int(end_s)), size - 1
            else:
                start = int(start_s)
                end = min(int(end_s), size - 1) if end_s else size - 1
            if start >= size:
                self._send(416, b"", {"Content-Range": f"bytes */{size}"}, head, None)
                return
            headers["Content-Range"] = f"bytes {start}-{end}/{size}"
            self._send(206, data[start : end + 1], headers, head, fault)
            return
        self._send(200, data, headers, head, fault)

    def _serve_range_from_disk(self, target: Path, head: bool) -> bool:
        """A ``bytes=a-b`` / ``bytes=-n`` request for a file over 1 MiB, read with a seek; False
        when this request is not one (served the usual way)."""
        rng = self.headers.get("Range") or ""
        stat = target.stat()
        size = stat.st_size
        if size <= 2**20 or not rng.startswith("bytes=") or "," in rng or "If-None-Match" in self.headers:
            return False
        start_s, _, end_s = rng[6:].partition("-")
        if start_s == "":
            start, end = max(0, size - int(end_s)), size - 1
        else:
            start, end = int(start_s), min(int(end_s), size - 1) if end_s else size - 1
        if start >= size:
            self._send(416, b"", {"Content-Range": f"bytes */{size}"}, head, None)
            return True
        with open(target, "rb") as fh:
            fh.seek(start)
            data = fh.read(end - start + 1)
        headers = {
            "Content-Type": "application/octet-stream",
            "ETag": f'"{size:x}-{stat.st_mtime_ns:x}"',
            "Last-Modified": email.utils.formatdate(stat.st_mtime, usegmt=True),
            "Accept-Ranges": "bytes",
            "Content-Range": f"bytes {start}-{end}/{size}",
        }
        self._send(206, data, headers, head, None)
        return True

    def _resolve(self, path: str) -> Path | None:
        root = self.server.owner.real_root
        full = (root / path.lstrip("/")).resolve()
        if root not in full.parents and full != root:
            return None
        if path.endswith("/") or full.is_dir():
            if JSON_TYPE in self.headers.get("Accept", "") and (full / "index.json").is_file():
                return full / "index.json"
            return full / "index.html" if (full / "index.html").is_file() else None
        return full if full.is_file() else None

    def _send(self, status: int, body: bytes, headers: dict[str, str], head: bool, fault: Fault | None) -> None:
        owner = self.server.owner
        with owner.lock:
            owner.sending += 1
        try:
            self._send_answer(status, body, headers, head, fault)
        finally:
            with owner.lock:
                owner.sending -= 1

    def _send_answer(self, status: int, body: bytes, headers: dict[str, str], head: bool, fault: Fault | None) -> None:
        if fault and fault.trickle_headers is not None:
            self._trickle_headers(status, body, headers, fault.trickle_headers)
            return
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        if fault and fault.chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(len(body)))
        if head or (fault is None and not self.server.owner.rate):
            self._send_at_once(b"" if head else body)
            return
        self.end_headers()
        if fault and (fault.chunked or fault.trickle is not None):
            self._send_slowly(body, fault)
            return
        if fault and fault.truncate_to is not None:
            body = body[: fault.truncate_to]
            self.close_connection = True
        try:
            if fault and fault.stall_after is not None:
                self.wfile.write(body[: fault.stall_after])
                time.sleep(fault.delay)
                body = body[fault.stall_after :]
            if fault and fault.reset_after is not None:
                self.wfile.write(body[: fault.reset_after])
                self.close_connection = True
                # SO_LINGER 0: close() sends RST instead of FIN, so the client sees a reset mid-body
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.connection.close()
                return
            if self.server.owner.rate:
                self._paced(body)
            else:
                self.wfile.write(body)
        except OSError:
            return
        with self.server.owner.lock:
            self.server.owner.sent += len(body)

    def _send_at_once(self, body: bytes) -> None:
        """The status line, headers and body in one write (one send for what fits a segment)."""
        self._headers_buffer.append(b"\r\n")
        raw = b"".join(self._headers_buffer) + body
        self._headers_buffer = []
        try:
            self.wfile.write(raw)
        except OSError:
            return
        with self.server.owner.lock:
            self.server.owner.sent += len(body)

    def _trickle_headers(self, status: int, body: bytes, headers: dict[str, str], every: float) -> None:
        lines = [f"HTTP/1.1 {status} {self.responses.get(status, ('',))[0]}"] + [f"{k}: {v}" for k, v in headers.items()]
        raw = ("\r\n".join([*lines, f"Content-Length: {len(body)}"]) + "\r\n\r\n").encode() + body
        self.close_connection = True
        try:
            for i in range(len(raw)):
                self.wfile.write(raw[i : i + 1])
                self.wfile.flush()
                time.sleep(every)
        except OSError:
            return

    def _send_slowly(self, body: bytes, fault: Fault) -> None:
        """Chunked (1 KiB pieces) and/or trickled (one byte every ``fault.trickle`` seconds)."""
        step = fault.trickle_size if fault.trickle is not None else 1024
        try:
            for i in range(0, len(body), step):
                piece = body[i : i + step]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece) if fault.chunked else piece)
                self.wfile.flush()
                if fault.trickle is not None:
                    time.sleep(fault.trickle)
            if fault.chunked:
                self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True

    def _paced(self, body: bytes) -> None:
        """Send ``body`` within the server's bandwidth cap (all connections together)."""
        owner = self.server.owner
        view = memoryview(body)
        for start in range(0, len(body), 1 << 20):
            chunk = view[start : start + (1 << 20)]
            with owner.lock:
                now = time.monotonic()
                begin = max(now, owner.next_free)
                wake = owner.next_free = begin + len(chunk) / owner.rate
            if wake > now:
                time.sleep(wake - now)
            self.wfile.write(chunk)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # listen backlog; the default 5 drops bursts of connects (a 1-3 s SYN retry each)
    owner: IndexServer

    def handle_error(self, request: object, client_address: object) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):  # a client hanging up is normal
            super().handle_error(request, client_address)


class IndexServer:
    """``with IndexServer(root) as srv: srv.url`` -> ``http://127.0.0.1:PORT/``."""

    def __init__(self, root: Path, latency: float = 0.0) -> None:
        self.root = Path(root)
        self.real_root = self.root.resolve()  # once: each request's path is resolved below it
        self.latency = latency
        self.faults: dict[str, list[Fault]] = {}
        self.log: list[tuple[str, str, dict[str, str]]] = []
        self.sent = 0  # body bytes written so far
        self.sending = 0  # answers being written right now
        self.rate: float | None = None  # bytes per second for all bodies together (None: no cap)
        self.next_free = 0.0
        self.auth: tuple[str, str] | None = None
        self.ignore_ranges = False
        self.seek_ranges = False
        self.lock = threading.Lock()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/"

    @property
    def bytes_sent(self) -> int:
        """Body bytes served, once the answers being written are done (the client may have read a
        body before the server thread got to count it)."""
        deadline = time.monotonic() + 2.0
        while self.sending and time.monotonic() < deadline:
            time.sleep(0.005)
        with self.lock:
            return self.sent

    def script(self, path: str, faults: list[Fault]) -> None:
        with self.lock:
            self.faults.setdefault(path, []).extend(faults)

    def requests_for(self, path: str) -> list[tuple[str, str, dict[str, str]]]:
        return [entry for entry in self.log if urlsplit(entry[1]).path == path]

    def start(self) -> IndexServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> IndexServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def closed_port() -> int:
    """A loopback port nothing listens on (bound for a moment, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
