"""The TLS context: certificates loaded at the first https handshake (once), never when the client is made."""

from __future__ import annotations

import ssl
import threading
from pathlib import Path

import pytest
from support.server import IndexServer

from resolve_gpu_stack.errors import CrawlError
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
