"""The HTTP client under the transport (``net/client.py``, http.client): proxies from the
environment (plain http relayed, https through a CONNECT tunnel, credentials from the proxy URL,
``no_proxy``), bodies decoded (gzip, deflate, both), and its pool (kept-alive connections reused,
an unread answer's connection never, an idle one past its expiry or closed by the server never,
at most ``max_connections`` in flight). Real sockets on 127.0.0.1 throughout."""

from __future__ import annotations

import base64
import gzip
import select
import socket
import socketserver
import ssl
import threading
import time
import zlib
from pathlib import Path

import pytest
from support.server import Fault, IndexServer

from resolve_gpu_stack.net import deadline
from resolve_gpu_stack.net.client import Client, ConnectError, DecodingError, EnvironmentProxies, Timeout, environment_proxies
from resolve_gpu_stack.net.settings import TransportSettings
from resolve_gpu_stack.net.transport import Transport
from resolve_gpu_stack.scan import inflate

BODY = b"<html><body>" + b"<a href='x-1.0.tar.gz'>x-1.0.tar.gz</a><br>\n" * 200 + b"</body></html>\n"


def read(client: Client, url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    resp = client.send(url, headers or {})
    try:
        return resp.status_code, b"".join(resp.iter_bytes())
    finally:
        resp.close()


@pytest.fixture
def srv(tmp_path: Path):
    (tmp_path / "page.html").write_bytes(BODY)
    (tmp_path / "big.bin").write_bytes(bytes(range(256)) * 4096)
    with IndexServer(tmp_path) as s:
        yield s


@pytest.fixture
def connects(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    made: list[tuple[str, int]] = []
    real = deadline.open_tcp

    def counting(host: str, port: int, timeout: float) -> socket.socket:
        made.append((host, port))
        return real(host, port, timeout)

    monkeypatch.setattr(deadline, "open_tcp", counting)
    return made


# -- proxies: which ----------------------------------------------------------------------------------
def test_proxy_variables_lower_case_first_and_not_in_a_cgi_script() -> None:
    assert environment_proxies({"HTTP_PROXY": "http://upper:1", "http_proxy": "http://lower:2", "HTTPS_PROXY": "http://s:3"}) == {
        "http": "http://lower:2",
        "https": "http://s:3",
    }
    assert environment_proxies({"HTTPS_PROXY": "http://s:3", "https_proxy": ""}) == {}  # an empty lower-case one turns it off
    assert environment_proxies({"HTTP_PROXY": "http://p:1", "REQUEST_METHOD": "GET"}) == {}


def test_no_proxy_names_addresses_and_star() -> None:
    env = {
        "http_proxy": "proxy.example:3128",
        "all_proxy": "http://all.example:8080",
        "no_proxy": "example.com, .internal.example,10.1.2.3,localhost,https://secure.example",
    }
    proxies = EnvironmentProxies(env)
    assert proxies.for_url("http", "pypi.example", 80) == "http://proxy.example:3128"  # a bare host:port is http://
    assert proxies.for_url("https", "pypi.example", 443) == "http://all.example:8080"  # no https_proxy: all_proxy
    assert proxies.for_url("http", "example.com", 80) is None and proxies.for_url("http", "www.example.com", 80) is None
    assert proxies.for_url("http", "wwwexample.com", 80) == "http://proxy.example:3128"
    # as curl (and requests, through urllib) read it: a leading dot is ignored, the domain itself matches too
    assert proxies.for_url("http", "a.internal.example", 80) is None and proxies.for_url("http", "internal.example", 80) is None
    assert proxies.for_url("http", "10.1.2.3", 80) is None and proxies.for_url("http", "localhost", 8000) is None
    assert proxies.for_url("https", "secure.example", 443) is None and proxies.for_url("http", "secure.example", 80) == "http://proxy.example:3128"
    assert not EnvironmentProxies({**env, "no_proxy": "a.example,*"})  # "*": no proxy at all
    assert not EnvironmentProxies({})


# -- proxies: through one ----------------------------------------------------------------------------
class ForwardProxy(socketserver.ThreadingTCPServer):
    """A forward proxy on 127.0.0.1: relays absolute-form requests (one a connection) and pipes
    CONNECT tunnels; records each request line with its Proxy-Authorization. ``refuse``: answer
    every CONNECT with that status line instead."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        self.seen: list[tuple[str, str | None]] = []
        self.refuse: str | None = None
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def __enter__(self) -> ForwardProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()


class _ProxyHandler(socketserver.BaseRequestHandler):
    server: ForwardProxy

    def handle(self) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            data = self.request.recv(4096)
            if not data:
                return
            head += data
        head, _, rest = head.partition(b"\r\n\r\n")
        line, *fields = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (f.partition(":") for f in fields)}
        self.server.seen.append((line, headers.get("proxy-authorization")))
        method, target, _ = line.split(" ", 2)
        if method == "CONNECT":
            if self.server.refuse:
                self.request.sendall(f"HTTP/1.1 {self.server.refuse}\r\nContent-Length: 0\r\n\r\n".encode())
                return
            host, _, port = target.rpartition(":")
            upstream = socket.create_connection((host, int(port)))
            self.request.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            self._pipe(upstream)
            return
        scheme, _, after = target.partition("://")
        hostport, _, path = after.partition("/")
        host, _, port = hostport.rpartition(":")
        upstream = socket.create_connection((host, int(port)))
        kept = [f for f in fields if not f.lower().startswith(("proxy-", "connection"))]
        upstream.sendall("\r\n".join([f"{method} /{path} HTTP/1.1", *kept, "Connection: close", "", ""]).encode("latin-1") + rest)
        while data := upstream.recv(65536):
            self.request.sendall(data)
        upstream.close()

    def _pipe(self, upstream: socket.socket) -> None:
        ends = [self.request, upstream]
        while True:
            readable, _, _ = select.select(ends, [], [], 5)
            if not readable:
                return
            for end in readable:
                data = end.recv(65536)
                if not data:
                    upstream.close()
                    return
                (upstream if end is self.request else self.request).sendall(data)


def test_plain_http_goes_through_the_proxy_with_its_credentials(srv: IndexServer) -> None:
    with ForwardProxy() as proxy:
        url = proxy.url.replace("http://", "http://alice:p%40ss@")
        client = Client(timeout=5, max_connections=4, user_agent="t", environ={"http_proxy": url})
        try:
            assert read(client, srv.url + "page.html") == (200, BODY)
        finally:
            client.close()
        assert proxy.seen == [(f"GET {srv.url}page.html HTTP/1.1", "Basic " + base64.b64encode(b"alice:p@ss").decode())]
        assert [path for _, path, _ in srv.log] == ["/page.html"]


def test_no_proxy_goes_direct(srv: IndexServer) -> None:
    with ForwardProxy() as proxy:
        client = Client(timeout=5, max_connections=4, user_agent="t", environ={"http_proxy": proxy.url, "no_proxy": "127.0.0.1"})
        try:
            assert read(client, srv.url + "page.html") == (200, BODY)
        finally:
            client.close()
        assert proxy.seen == []


def test_https_goes_through_a_connect_tunnel_and_verifies_the_origin(tmp_path: Path, cert, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(cert[0]))
    (tmp_path / "page.html").write_bytes(BODY)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*cert)
    with IndexServer(tmp_path) as tls, ForwardProxy() as proxy:
        tls._httpd.socket = context.wrap_socket(tls._httpd.socket, server_side=True)
        url = tls.url.replace("http://", "https://") + "page.html"
        client = Client(timeout=5, max_connections=4, user_agent="t", environ={"https_proxy": proxy.url})
        try:
            assert read(client, url) == (200, BODY)
            assert read(client, url) == (200, BODY)  # the tunnelled connection is kept
        finally:
            client.close()
        port = url.split(":")[2].split("/")[0]
        assert proxy.seen == [(f"CONNECT 127.0.0.1:{port} HTTP/1.1", None)]
        proxy.refuse = "407 Proxy Authentication Required"
        client = Client(timeout=5, max_connections=4, user_agent="t", environ={"https_proxy": proxy.url})
        try:
            with pytest.raises(ConnectError, match="407 Proxy Authentication Required"):
                client.send(url, {})
        finally:
            client.close()


def test_the_transport_honours_proxies_from_the_environment_only_with_trust_env(srv: IndexServer, monkeypatch: pytest.MonkeyPatch) -> None:
    with ForwardProxy() as proxy:
        monkeypatch.setenv("http_proxy", proxy.url)
        monkeypatch.delenv("no_proxy", raising=False)
        monkeypatch.delenv("NO_PROXY", raising=False)
        for trust_env, through in ((True, 1), (False, 1)):  # the second request went direct
            transport = Transport(TransportSettings(retries=0, trust_env=trust_env))
            try:
                resp, _ = transport.open(srv.url + "page.html", {})
                assert transport.read_body(resp, srv.url, 2**20, "page") == BODY
                transport.finish(resp)
            finally:
                transport.close()
            assert len(proxy.seen) == through


# -- bodies --------------------------------------------------------------------------------------------
def _raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


@pytest.mark.parametrize(
    ("encoding", "encode"),
    [
        ("gzip", gzip.compress),
        ("deflate", zlib.compress),  # zlib-wrapped, as the RFC says
        ("deflate", _raw_deflate),  # raw, as some servers send it
        ("deflate, gzip", lambda d: gzip.compress(zlib.compress(d))),  # applied in the order listed
        ("br", lambda d: d),  # a coding we do not decode: passed as sent
    ],
)
@pytest.mark.parametrize("backend", ["isal", "zlib"])
def test_bodies_are_decoded(srv: IndexServer, encoding: str, encode, backend: str, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """By either inflater (ISA-L's where the wheel is installed, zlib's otherwise)."""
    if backend == "isal" and inflate._isal is None:
        pytest.skip("isal is not installed")
    monkeypatch.setattr(inflate, "BACKEND", backend)
    sent = encode(BODY)
    srv.script("/page.html", [Fault(body=sent, headers={"Content-Encoding": encoding})])
    client = Client(timeout=5, max_connections=4, user_agent="t", environ={})
    try:
        resp = client.send(srv.url + "page.html", {})
        assert b"".join(resp.iter_bytes()) == (BODY if encoding != "br" else sent)
        assert resp.num_bytes_downloaded == len(sent)  # bytes as sent
        resp.close()
    finally:
        client.close()


@pytest.mark.parametrize("backend", ["isal", "zlib"])
def test_a_body_that_is_not_what_its_encoding_says_is_a_decoding_error(srv: IndexServer, backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if backend == "isal" and inflate._isal is None:
        pytest.skip("isal is not installed")
    monkeypatch.setattr(inflate, "BACKEND", backend)
    srv.script("/page.html", [Fault(body=gzip.compress(BODY)[:12] + b"not deflate data" * 64, headers={"Content-Encoding": "gzip"})])
    client = Client(timeout=5, max_connections=4, user_agent="t", environ={})
    try:
        resp = client.send(srv.url + "page.html", {})
        with pytest.raises(DecodingError):
            b"".join(resp.iter_bytes())
        resp.close()
    finally:
        client.close()


def test_accept_encoding_and_user_agent_are_sent_and_can_be_replaced(srv: IndexServer) -> None:
    client = Client(timeout=5, max_connections=4, user_agent="rgs-test/1", environ={})
    try:
        read(client, srv.url + "page.html")
        read(client, srv.url + "page.html", {"accept-encoding": "identity"})
    finally:
        client.close()
    first, second = (h for _, _, h in srv.log)
    assert first["Accept-Encoding"] == "gzip, deflate" and first["User-Agent"] == "rgs-test/1"
    assert [v for k, v in second.items() if k.lower() == "accept-encoding"] == ["identity"]


# -- the pool -------------------------------------------------------------------------------------------
def test_connections_are_kept_and_an_unread_answer_costs_its_connection(srv: IndexServer, connects: list) -> None:
    client = Client(timeout=5, max_connections=4, user_agent="t", environ={})
    try:
        for _ in range(3):
            assert read(client, srv.url + "page.html")[0] == 200
        assert len(connects) == 1
        resp = client.send(srv.url + "big.bin", {})  # 1 MiB, not read
        resp.close()
        assert read(client, srv.url + "page.html")[0] == 200
        assert len(connects) == 2
    finally:
        client.close()


def test_a_burst_of_connections_to_one_host_asks_dns_once(srv: IndexServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """16 requests at once open up to 16 connections: the host's addresses are looked up once (a
    resolver dropping part of a burst of lookups answers the rest after its 5 s retry)."""
    asked: list[str] = []
    real = socket.getaddrinfo

    def counting(host, *args, **kw):  # type: ignore[no-untyped-def]
        asked.append(host.decode("ascii") if isinstance(host, bytes) else host)  # an ASCII name is asked as bytes (no IDNA codec)
        return real(host, *args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", counting)
    url = srv.url.replace("127.0.0.1", "localhost") + "page.html"
    client = Client(timeout=5, max_connections=16, user_agent="t", environ={})
    try:
        threads = [threading.Thread(target=read, args=(client, url)) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert read(client, url)[0] == 200
    finally:
        client.close()
    assert asked.count("localhost") == 1, asked


def test_an_idle_connection_past_its_expiry_is_not_reused(srv: IndexServer, connects: list) -> None:
    client = Client(timeout=5, max_connections=4, user_agent="t", keepalive_expiry=0.05, environ={})
    try:
        read(client, srv.url + "page.html")
        time.sleep(0.1)
        read(client, srv.url + "page.html")
    finally:
        client.close()
    assert len(connects) == 2


def test_a_connection_the_server_closed_while_idle_is_not_reused(connects: list) -> None:
    """A server that keeps the connection open after its answer, then closes it: the next request
    opens a new one instead of failing on the dead one."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        for _ in range(2):
            conn, _ = listener.accept()
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            time.sleep(0.05)
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    client = Client(timeout=5, max_connections=4, user_agent="t", environ={})
    try:
        assert read(client, f"http://127.0.0.1:{port}/a") == (200, b"ok")
        time.sleep(0.2)
        assert read(client, f"http://127.0.0.1:{port}/b") == (200, b"ok")
    finally:
        client.close()
        listener.close()
    assert len(connects) == 2


def test_an_http_1_0_server_that_closes_after_each_answer(tmp_path: Path, connects: list) -> None:
    """http.server's own handler answers in HTTP/1.0 and closes: the body is read whole, the
    connection is not kept."""
    import http.server
    from functools import partial

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    (tmp_path / "page.html").write_bytes(BODY)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(tmp_path)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = Client(timeout=5, max_connections=4, user_agent="t", environ={})
    try:
        for _ in range(3):
            assert read(client, f"http://127.0.0.1:{server.server_address[1]}/page.html") == (200, BODY)
    finally:
        client.close()
        server.shutdown()
        server.server_close()
    assert len(connects) == 3


def test_at_most_max_connections_in_flight(srv: IndexServer) -> None:
    client = Client(timeout=0.3, max_connections=1, user_agent="t", environ={})
    try:
        held = client.send(srv.url + "page.html", {})
        began = time.monotonic()
        with pytest.raises(Timeout, match="no connection free"):
            client.send(srv.url + "page.html", {})
        assert 0.25 < time.monotonic() - began < 2
        got: list[int] = []
        waiter = threading.Thread(target=lambda: got.append(read(client, srv.url + "page.html")[0]))
        waiter.start()
        time.sleep(0.1)
        assert got == []  # waits for the slot
        held.close()
        waiter.join(5)
        assert got == [200]
    finally:
        client.close()


def test_a_request_whose_deadline_passed_before_it_was_sent_is_a_timeout(srv: IndexServer) -> None:
    """(After a long chain of redirects, say): a ``Timeout`` naming the deadline, never a bare
    TimeoutError the transport would not know."""
    client = Client(timeout=5, max_connections=4, user_agent="t", environ={})
    try:
        passed = deadline.Deadline(seconds=0.01)
        time.sleep(0.05)
        with pytest.raises(Timeout, match="no complete answer within"):
            client.send(srv.url + "page.html", {}, deadline=passed)
        client.send(srv.url + "page.html", {}, deadline=deadline.Deadline(seconds=60)).close()  # the next request has its own
    finally:
        client.close()


# -- headers: what http.client would make of them, without email's feed parser where it can ------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_LINE_ENDS = st.sampled_from([b"\r\n", b"\n", b"\r", b""])
_HEADER_LINES = st.lists(
    st.one_of(
        st.tuples(
            st.sampled_from([b"Content-Length", b"ETag", b"X-A", b"from", b"Connection"]),
            st.sampled_from([b": ", b":", b":\t", b" : "]),
            st.one_of(st.binary(max_size=12), st.sampled_from([b"a\x85b", b"a\x0cb\x0b", b"\x1c\x1d", b"a\x00", b"\xe9t\xe9"])),
            _LINE_ENDS,
        ).map(b"".join),
        st.sampled_from([b" folded\r\n", b"\tfolded\r\n", b"From me\r\n", b": no name\r\n", b"no colon\r\n", b"X-Y: a\rb\r\n"]),
    ),
    max_size=8,
)


@settings(max_examples=400, deadline=None)
@given(_HEADER_LINES, st.sampled_from([b"\r\n", b"\n", b""]))
def test_headers_are_read_as_http_client_reads_them(lines: list[bytes], end: bytes) -> None:
    import email.parser
    import http.client
    import io

    from resolve_gpu_stack.net.client import parse_headers

    block = b"".join(lines) + end + b"body bytes that follow"
    ours, theirs = io.BytesIO(block), io.BytesIO(block)
    got = parse_headers(ours)
    want = email.parser.Parser(_class=http.client.HTTPMessage).parsestr(b"".join(http.client._read_headers(theirs)).decode("iso-8859-1"))
    assert got.items() == want.items() and got.get_all("x-a") == want.get_all("x-a") and got.get_unixfrom() == want.get_unixfrom()
    assert ours.tell() == theirs.tell()  # the body starts where it would


def test_header_limits_are_http_clients() -> None:
    import http.client
    import io

    from resolve_gpu_stack.net.client import parse_headers

    with pytest.raises(http.client.LineTooLong):
        parse_headers(io.BytesIO(b"X: " + b"a" * 70000 + b"\r\n\r\n"))
    with pytest.raises(http.client.HTTPException, match="more than 100 headers"):
        parse_headers(io.BytesIO(b"X: a\r\n" * 101 + b"\r\n"))
    plain = parse_headers(io.BytesIO(b'Content-Length: 12\r\nETag:  "a b" \r\nX-Dup: 1\r\nx-dup: 2\r\n\r\n'))
    assert plain.items() == [("Content-Length", "12"), ("ETag", '"a b" '), ("X-Dup", "1"), ("x-dup", "2")]
    assert plain.get_all("X-DUP") == ["1", "2"] and plain["etag"] == '"a b" '
