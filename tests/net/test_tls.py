"""The TLS context: certificates loaded at the first https handshake (once), never when the client is made."""

from __future__ import annotations

import random
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.server import IndexServer

from resolve_gpu_stack.errors import CrawlError
from resolve_gpu_stack.net import deadline
from resolve_gpu_stack.net.client import Client, ConfigurationError
from resolve_gpu_stack.net.settings import TransportSettings
from resolve_gpu_stack.net.tls import LazyTrustContext
from resolve_gpu_stack.net.transport import Transport


class CountingContext(LazyTrustContext):
    def __init__(self, *, trust_env: bool = True) -> None:
        super().__init__(trust_env=trust_env)
        self.loads: list[tuple[str | None, str | None]] = []

    def load_verify_locations(self, cafile=None, capath=None, cadata=None) -> None:  # type: ignore[override]
        self.loads.append((None if cafile is None else str(cafile), None if capath is None else str(capath)))
        super().load_verify_locations(cafile, capath, cadata)


def _tls_server(root: Path, cert: tuple[Path, Path]) -> tuple[IndexServer, str]:
    (root / "page.html").write_text("<html></html>")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*cert)
    srv = IndexServer(root)
    srv._httpd.socket = context.wrap_socket(srv._httpd.socket, server_side=True)
    return srv, srv.url.replace("http://", "https://") + "page.html"


def _pool_context(transport: Transport) -> ssl.SSLContext:
    return transport.tls_context


def _get(transport: Transport, url: str) -> int:
    resp, _ = transport.open(url, {})
    try:
        return resp.status_code
    finally:
        transport.finish(resp)


def test_making_a_transport_loads_no_certificates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    transport = Transport()
    try:
        context = _pool_context(transport)
        assert isinstance(context, LazyTrustContext) and not context.loaded
        assert context.cert_store_stats()["x509_ca"] == 0
        assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    finally:
        transport.close()


def test_first_https_request_loads_ssl_cert_file_and_verifies(tmp_path: Path, cert, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(cert[0]))
    srv, url = _tls_server(tmp_path, cert)
    with srv:
        transport = Transport(TransportSettings(retries=0))
        try:
            context = _pool_context(transport)
            assert not context.loaded
            assert _get(transport, url) == 200
            assert context.loaded and context.cert_store_stats()["x509_ca"] == 1  # the file's one certificate
        finally:
            transport.close()


def test_without_trust_env_the_cert_file_is_not_trusted(tmp_path: Path, cert, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(cert[0]))
    srv, url = _tls_server(tmp_path, cert)
    with srv:
        transport = Transport(TransportSettings(retries=0, trust_env=False))
        try:
            with pytest.raises(CrawlError, match="CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
                transport.retrying(url, lambda: _get(transport, url))
            assert _pool_context(transport).cert_store_stats()["x509_ca"] > 1  # certifi's bundle instead
        finally:
            transport.close()


def test_trust_store_is_loaded_once_from_many_threads(cert, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(cert[0]))
    context = CountingContext()
    threads = [threading.Thread(target=context.load_trust) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert context.loads == [(str(cert[0]), None)]


def test_ssl_cert_dir_is_honoured_when_no_cert_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path))
    context = CountingContext()
    context.load_trust()
    assert context.loads == [(None, str(tmp_path))]
    ignored = CountingContext(trust_env=False)
    ignored.load_trust()
    assert ignored.loads and ignored.loads[0][1] is None  # certifi's file, not the directory


# -- TLS sessions resumed (issue 53 item 3) ------------------------------------------------------


def _body(client: Client, url: str, *, fresh: bool = False) -> bytes:
    resp = client.send(url, {}, fresh=fresh)
    try:
        return b"".join(resp.iter_bytes())
    finally:
        resp.close()


@pytest.fixture
def two_tls_servers(tmp_path: Path, cert, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[ssl.SSLContext, str, str]]:
    """Two servers on two ports sharing one TLS context (its ticket keys: either would resume the
    other's session if it were offered), the client trusting their certificate (127.0.0.1 only)."""
    monkeypatch.setenv("SSL_CERT_FILE", str(cert[0]))
    (tmp_path / "page.html").write_bytes(b"<a>ok</a>")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*cert)
    with IndexServer(tmp_path) as one, IndexServer(tmp_path) as two:
        for srv in (one, two):
            srv._httpd.socket = context.wrap_socket(srv._httpd.socket, server_side=True)
        yield context, one.url.replace("http://", "https://") + "page.html", two.url.replace("http://", "https://") + "page.html"


def test_a_new_connection_to_the_same_origin_resumes_its_tls_session(two_tls_servers) -> None:
    """The first connection's session (its TLS 1.3 ticket) is offered by the next connection to the
    same host and port, from the same client (its trust settings); never to another port, never
    by another client."""
    context, one, two = two_tls_servers
    client = Client(timeout=5, max_connections=4, user_agent="t")
    try:
        assert _body(client, one) == b"<a>ok</a>"
        assert context.session_stats()["hits"] == 0
        assert _body(client, one, fresh=True) == b"<a>ok</a>"  # a second connection: resumed
        assert context.session_stats()["hits"] == 1
        assert _body(client, two) == b"<a>ok</a>"  # another port: a full handshake, its certificate checked
        assert context.session_stats()["hits"] == 1
        assert _body(client, two, fresh=True) == b"<a>ok</a>"  # then its own session
        assert context.session_stats()["hits"] == 2
    finally:
        client.close()
    other = Client(timeout=5, max_connections=4, user_agent="t")  # another client: its own trust context, no session
    try:
        assert _body(other, one) == b"<a>ok</a>"
        assert context.session_stats()["hits"] == 2
    finally:
        other.close()


def test_a_session_is_never_offered_to_another_host_name(two_tls_servers) -> None:
    """The same server and port under another name (``*.localhost`` is 127.0.0.1): a session of
    127.0.0.1 would resume there without any certificate (OpenSSL offers it and the server takes
    it), so it is not offered, and the certificate, made for 127.0.0.1 only, fails for that name."""
    context, one, _ = two_tls_servers
    other_name = one.replace("127.0.0.1", "another.localhost")
    client = Client(timeout=5, max_connections=4, user_agent="t")
    try:
        assert _body(client, one) == b"<a>ok</a>"
        assert _body(client, one, fresh=True) == b"<a>ok</a>"
        assert context.session_stats()["hits"] == 1  # the session is there to offer
        with pytest.raises(ConfigurationError, match="certificate verify failed for another.localhost"):
            _body(client, other_name)
        assert context.session_stats()["hits"] == 1
    finally:
        client.close()


def test_a_large_body_over_tls_is_the_same_read_whole_or_in_chunks(tmp_path: Path, cert, monkeypatch: pytest.MonkeyPatch) -> None:
    """``read_body`` reads a body of declared length into one buffer (record by record, straight
    from the socket); ``iter_body`` in chunks: the same bytes, and the connection kept after each."""
    monkeypatch.setenv("SSL_CERT_FILE", str(cert[0]))
    srv, url = _tls_server(tmp_path, cert)
    body = random.Random(53).randbytes(3 * 2**20 + 12345)
    (tmp_path / "big.bin").write_bytes(body)
    big = url.replace("page.html", "big.bin")
    opened: list[str] = []
    real = deadline.open_tcp
    monkeypatch.setattr(deadline, "open_tcp", lambda host, port, timeout: opened.append(host) or real(host, port, timeout))
    with srv:
        transport = Transport(TransportSettings(retries=0))
        try:
            for _ in range(2):
                resp, _ = transport.open(big, {})
                try:
                    assert transport.read_body(resp, big, len(body), "file") == body
                finally:
                    transport.finish(resp)
                resp, _ = transport.open(big, {})
                try:
                    assert b"".join(transport.iter_body(resp, big, "file")) == body
                finally:
                    transport.finish(resp)
            assert transport.stats.bytes_received == 4 * len(body)
        finally:
            transport.close()
    assert len(opened) == 1  # every answer read to its end: one connection for the four
