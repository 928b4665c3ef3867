"""The HTTP client held to a conformance suite (issue 32 item 2): the hostile modes of the
adversarial probe through the real ``lock -o`` (``hostile.HostileRelay`` in front of the story
world), the client's rules one by one against the standard library's server, and the same reads
against nginx where it is installed. Everything on 127.0.0.1."""

from __future__ import annotations

import os
import re
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support.doors import index_flags, run_cli
from support.faults import LISTING, TARGET, StoryRun
from support.hostile import ESC_REASON, HostileRelay, TlsProxy
from support.server import IndexServer, closed_port
from support.stack_world import build_story_world

from resolve_gpu_stack.errors import CrawlError, printable
from resolve_gpu_stack.net import deadline as deadlines
from resolve_gpu_stack.net.client import EnvironmentProxies
from resolve_gpu_stack.net.settings import TransportSettings
from resolve_gpu_stack.net.tls import LazyTrustContext
from resolve_gpu_stack.net.transport import Transport

PAGE = "/whl/nightly/cu130/torch/"


@contextmanager
def relayed_story(tmp_path: Path) -> Iterator[tuple[StoryRun, HostileRelay]]:
    """The story world served behind a hostile relay; its pages name the relay."""
    world = build_story_world(tmp_path / "www", hostile=False)
    with IndexServer(world.root) as srv, HostileRelay(srv.url) as relay:
        world.write(relay.url)
        yield StoryRun(root=tmp_path, world=world, srv=srv, timeout=5.0), relay


def lock(run: StoryRun, relay: HostileRelay, capsys, *extra: str) -> tuple[int, str, str]:
    for path in (run.lock_path, run.constraints_path):
        path.unlink(missing_ok=True)
    shutil.rmtree(run.cache, ignore_errors=True)
    return run_cli(capsys, *run.argv("lock", *extra, base=relay.url))


# -- the probe's modes through `lock -o` ---------------------------------------------------------------
@pytest.mark.parametrize("mode", ["info1n", "info103", "ka_rst"])
def test_interim_answers_and_resets_of_reused_connections_leave_the_lock_as_a_clean_run_makes_it(tmp_path: Path, capsys, mode: str) -> None:
    with relayed_story(tmp_path) as (run, relay):
        rc, _, err = lock(run, relay, capsys)
        assert rc == 0, err
        clean = run.outputs()
        relay.mode = mode
        rc, _, err = lock(run, relay, capsys)
        assert rc == 0, err
        assert run.outputs() == clean  # a 1xx is never the answer; a reset reused connection is tried on a fresh one
        assert run.cache_problems() == []
        if mode == "ka_rst":
            assert "retrying" not in err  # the fresh connection is made at once, not after a backoff


def test_an_endless_stream_of_100_continue_ends_at_the_deadline(tmp_path: Path, capsys) -> None:
    with relayed_story(tmp_path) as (run, relay):
        relay.mode, relay.only, run.timeout = "info100_flood", PAGE, 0.5
        began = time.monotonic()
        rc, out, err = lock(run, relay, capsys)
        took = time.monotonic() - began
    assert rc == 3, err
    assert "no complete answer within 2 s" in err and PAGE in err
    assert "retrying" not in err and took < 15  # 4 x --timeout for the headers, not retried


def test_a_reason_phrase_with_escape_sequences_is_shown_escaped(tmp_path: Path, capsys) -> None:
    with relayed_story(tmp_path) as (run, relay):
        relay.mode, relay.only = "esc", PAGE
        rc, out, err = lock(run, relay, capsys)
        assert rc == 3
        for raw in ("\x1b", "\x07", "\x00", "\x9b"):
            assert raw not in err and raw not in out
        assert "418 \\x1b[32mok\\x1b[0m\\x1b]0;pwned\\x07\\x00" in err
        for command in ("resolve", "candidates"):
            target = LISTING if command == "candidates" else TARGET  # candidates lists builds: no --upgrade-package
            argv = [command, *(["torch"] if command == "candidates" else []), *target, *index_flags(relay.url), "--cache-dir", str(run.cache)]
            for fmt in ("json", "table"):
                rc, out, err = run_cli(capsys, *argv, "--format", fmt)
                assert rc == 3, (command, fmt, err)
                assert not any(c in out + err for c in ("\x1b", "\x07", "\x00")), (command, fmt)
                assert "418 \\x1b[32mok" in err, (command, fmt, err)


def test_printable_makes_every_control_visible_and_is_idempotent() -> None:
    text = ESC_REASON.decode("latin-1") + "\u202e\u0085\r\nend\t"
    once = printable(text)
    assert once.isprintable() and printable(once) == once
    assert printable("a\nb\tc", lines=True) == "a\nb\tc" and printable("a\nb") == "a\\x0ab"
    assert str(CrawlError("http://x/\x1b[2J", "404 \x1b]0;t\x07")) == "http://x/\\x1b[2J: 404 \\x1b]0;t\\x07"


# -- connections -----------------------------------------------------------------------------------
def get(transport: Transport, url: str, ok: tuple[int, ...] = (200,)) -> bytes:
    def attempt() -> bytes:
        resp, final = transport.open(url, {})
        try:
            transport.check_status(resp, final, ok=ok)
            return transport.read_body(resp, final, 1 << 24, "page")
        finally:
            transport.finish(resp)

    return transport.retrying(url, attempt)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[IndexServer, HostileRelay]]:
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "a.html").write_bytes(b"<a>a</a>")
    (tmp_path / "www" / "b.html").write_bytes(b"<a>b</a>")
    with IndexServer(tmp_path / "www") as srv, HostileRelay(srv.url) as relay:
        yield srv, relay


def test_a_connection_is_never_reused_after_an_unexpected_status(world: tuple[IndexServer, HostileRelay]) -> None:
    _, relay = world
    transport = Transport(TransportSettings(timeout=5, retries=0, trust_env=False))
    try:
        assert get(transport, relay.url + "a.html") == b"<a>a</a>"
        assert get(transport, relay.url + "b.html") == b"<a>b</a>"
        assert [n for n, _ in relay.requests] == [1, 1]  # kept alive
        relay.mode = "unexpected"
        with pytest.raises(CrawlError, match="unexpected answer 418"):
            get(transport, relay.url + "a.html")
        relay.mode = ""
        assert get(transport, relay.url + "b.html") == b"<a>b</a>"
        assert [n for n, _ in relay.requests] == [1, 1, 1, 2]  # the connection that said 418 was closed
    finally:
        transport.close()


def test_a_102_is_never_the_answer_and_the_connection_stays_in_step(world: tuple[IndexServer, HostileRelay]) -> None:
    _, relay = world
    relay.mode = "info1n"
    transport = Transport(TransportSettings(timeout=5, retries=0, trust_env=False))
    try:
        for _ in range(3):
            assert get(transport, relay.url + "a.html") == b"<a>a</a>"
            assert get(transport, relay.url + "b.html") == b"<a>b</a>"
        assert {n for n, _ in relay.requests} == {1}
    finally:
        transport.close()


def test_a_retry_goes_out_on_a_fresh_connection(world: tuple[IndexServer, HostileRelay]) -> None:
    _, relay = world
    transport = Transport(TransportSettings(timeout=5, retries=4, trust_env=False, backoff_base=0.01))
    try:
        assert get(transport, relay.url + "a.html") == b"<a>a</a>"
        relay.mode = "ka_rst"
        for _ in range(3):
            assert get(transport, relay.url + "b.html") == b"<a>b</a>"
        assert transport.stats.retries == 0  # the reset reused connection was replaced at once, not retried later
    finally:
        transport.close()


def test_the_headers_and_the_body_have_their_own_deadline() -> None:
    deadline = deadlines.Deadline(seconds=1.0, min_rate=1000)
    deadline.received += 10**9  # bytes before the headers end (an endless 1xx stream) earn nothing
    assert deadline.left() <= 1.0
    deadline.body_phase()
    assert 0.9 < deadline.left() <= 1.0  # the body starts its own clock
    deadline.received += 2000
    assert 2.9 < deadline.left() <= 3.0  # and earns credit for its bytes
    deadline.headers_phase()  # a redirect's next hop: counted from the request's start again
    assert deadline.left() <= 1.0


# -- NO_PROXY as curl reads it ---------------------------------------------------------------------------
P = "http://proxy.example:3128"


@pytest.mark.parametrize(
    ("no_proxy", "host", "direct"),
    [
        ("example.com", "example.com", True),
        ("example.com", "www.example.com", True),
        ("example.com", "wwwexample.com", False),
        (".example.com", "example.com", True),  # a leading dot changes nothing (curl, and urllib for requests)
        ("*.example.com", "a.b.example.com", True),
        ("127.0.0.0/8", "127.0.0.1", True),  # CIDR
        ("127.0.0.0/8", "127.9.9.9", True),
        ("127.0.0.0/8", "128.0.0.1", False),
        ("10.1.2.3", "10.1.2.3", True),
        ("10.1.2.3", "10.1.2.30", False),
        (".0.0.1", "127.0.0.1", False),  # an address is never matched as a domain suffix
        ("0.0.1", "127.0.0.1", False),
        ("::1", "::1", True),
        ("[::1]", "::1", True),
        ("fd00::/8", "fd12::5", True),
        ("fd00::/8", "10.0.0.1", False),
        ("localhost", "localhost", True),
        ("localhost", "127.0.0.1", False),  # names are not resolved
        ("example.com.", "example.com", True),
        ("EXAMPLE.com", "www.Example.COM", True),
    ],
)
def test_no_proxy_hosts_domains_addresses_and_cidrs(no_proxy: str, host: str, direct: bool) -> None:
    proxies = EnvironmentProxies({"http_proxy": P, "no_proxy": f" {no_proxy} , unrelated.example"})
    assert (proxies.for_url("http", host, 80) is None) is direct


def test_no_proxy_ports_and_star() -> None:
    proxies = EnvironmentProxies({"http_proxy": P, "NO_PROXY": "example.com:8080,[::1]:81"})
    assert proxies.for_url("http", "example.com", 8080) is None and proxies.for_url("http", "example.com", 80) == P
    assert proxies.for_url("http", "::1", 81) is None and proxies.for_url("http", "::1", 80) == P
    assert not EnvironmentProxies({"http_proxy": P, "no_proxy": "*"})


# -- proxies and TLS: a setting at fault is named, and never retried --------------------------------------
@pytest.mark.parametrize("scheme", ["socks5", "socks5h", "ftp"])
def test_a_proxy_that_is_not_http_or_https_is_refused_once_naming_it(monkeypatch: pytest.MonkeyPatch, scheme: str) -> None:
    proxy = f"{scheme}://user:secret@127.0.0.1:{closed_port()}"
    monkeypatch.setenv("https_proxy", proxy)
    transport = Transport(TransportSettings(timeout=5, retries=4))
    try:
        with pytest.raises(CrawlError) as caught:
            get(transport, "https://files.example/x")
    finally:
        transport.close()
    assert f"the proxy {scheme}://" in str(caught.value) and "127.0.0.1" in str(caught.value) and "secret" not in str(caught.value)
    assert "only http:// and https:// proxies" in str(caught.value) and caught.value.hint and "no_proxy" in caught.value.hint
    assert transport.stats.retries == 0


def test_an_https_proxy_carries_https_in_a_tunnel_and_plain_http(tls_server: str, tmp_path: Path, cert, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(cert[0]))  # the proxy's certificate and the origin's
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*cert)
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "p.html").write_bytes(b"<a>plain</a>")
    with TlsProxy(context) as proxy, IndexServer(tmp_path / "plain") as plain:
        authed = proxy.url.replace("https://", "https://alice:s3cret@")
        monkeypatch.setenv("https_proxy", authed)
        monkeypatch.setenv("http_proxy", authed)
        transport = Transport(TransportSettings(timeout=5, retries=0))
        try:
            assert get(transport, tls_server) == b"<a>ok</a>"
            assert get(transport, tls_server) == b"<a>ok</a>"  # the tunnelled TLS-in-TLS connection is kept
            assert get(transport, plain.url + "p.html") == b"<a>plain</a>"
        finally:
            transport.close()
        port = tls_server.split(":")[2].split("/")[0]
        lines = [line for line, _ in proxy.seen]
        assert lines[0] == f"CONNECT 127.0.0.1:{port} HTTP/1.1" and lines.count(lines[0]) == 1
        assert lines[1] == f"GET {plain.url}p.html HTTP/1.1" and all(auth and auth.startswith("Basic ") for _, auth in proxy.seen)
        monkeypatch.delenv("SSL_CERT_FILE")  # the proxy's certificate is verified too (certifi has no test CA)
        transport = Transport(TransportSettings(timeout=5, retries=4))
        try:
            named = re.escape(f"certificate verify failed for the proxy https://***@127.0.0.1:{proxy.url.rsplit(':', 1)[1]}")
            with pytest.raises(CrawlError, match=named) as caught:
                get(transport, tls_server)
        finally:
            transport.close()
        assert "s3cret" not in str(caught.value) and transport.stats.retries == 0


def test_a_proxy_that_cannot_be_reached_is_named_not_the_origin(monkeypatch: pytest.MonkeyPatch) -> None:
    port = closed_port()
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{port}")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    transport = Transport(TransportSettings(timeout=5, retries=0))
    try:
        with pytest.raises(CrawlError, match=f"cannot reach the proxy http://127.0.0.1:{port}"):
            get(transport, "http://localhost:9/x")
    finally:
        transport.close()


@pytest.fixture
def tls_server(tmp_path: Path, cert: tuple[Path, Path]) -> Iterator[str]:
    (tmp_path / "tls").mkdir()
    (tmp_path / "tls" / "page.html").write_bytes(b"<a>ok</a>")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*cert)
    with IndexServer(tmp_path / "tls") as srv:
        srv._httpd.socket = context.wrap_socket(srv._httpd.socket, server_side=True)
        yield srv.url.replace("http://", "https://") + "page.html"


def test_a_self_signed_certificate_fails_at_once(tls_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    transport = Transport(TransportSettings(timeout=5, retries=4))
    began = time.monotonic()
    try:
        with pytest.raises(CrawlError, match="certificate verify failed for 127.0.0.1") as caught:
            get(transport, tls_server)
    finally:
        transport.close()
    assert transport.stats.retries == 0 and time.monotonic() - began < 2
    assert caught.value.hint and "certifi" in caught.value.hint and "--system-certs" in caught.value.hint


def test_the_trust_store_settings_are_named_when_they_cannot_be_loaded(tls_server: str, tmp_path: Path, cert, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "no-such-bundle.pem"
    for name, value in (("SSL_CERT_FILE", missing), ("SSL_CERT_DIR", tmp_path / "no-such-folder")):
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
        monkeypatch.setenv(name, str(value))
        transport = Transport(TransportSettings(timeout=5, retries=4))
        try:
            with pytest.raises(CrawlError, match=f"{name}={value} cannot be loaded as a trust store") as caught:
                get(transport, tls_server)
        finally:
            transport.close()
        assert transport.stats.retries == 0 and caught.value.hint and name in caught.value.hint
    monkeypatch.delenv("SSL_CERT_DIR")
    monkeypatch.setenv("SSL_CERT_FILE", str(cert[0]))  # the bundle that has it: trusted
    transport = Transport(TransportSettings(timeout=5))
    try:
        assert get(transport, tls_server) == b"<a>ok</a>"
    finally:
        transport.close()


def test_a_missing_ssl_cert_file_through_the_command(tls_server: str, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "gone.pem"
    monkeypatch.setenv("SSL_CERT_FILE", str(missing))
    base = tls_server.rsplit("/", 1)[0] + "/"
    rc, out, err = run_cli(capsys, "resolve", *TARGET, *index_flags(base), "--cache-dir", str(tmp_path / "c"))
    assert rc == 3 and "Traceback" not in err
    assert f"SSL_CERT_FILE={missing} cannot be loaded as a trust store" in err and "tried" not in err and "retrying" not in err


def test_system_certs_use_the_system_trust_store(tls_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    transport = Transport(TransportSettings(timeout=5, retries=4, system_certs=True))
    try:
        ctx = transport.tls_context  # not certifi's: the OS verifier, or on Linux the distribution's bundle
        assert not isinstance(ctx, LazyTrustContext) or ctx.system
        with pytest.raises(CrawlError, match="certificate verify failed") as caught:  # a self-signed one is in no system store
            get(transport, tls_server)
    finally:
        transport.close()
    assert transport.stats.retries == 0 and caught.value.hint and "system" in caught.value.hint


# -- nginx, where installed ------------------------------------------------------------------------------
NGINX_PAGE = b"<a href='demo-1.0.tar.gz'>demo-1.0.tar.gz</a>" * 200
NGINX = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if Path(p).exists()), None)


@pytest.fixture
def nginx(tmp_path: Path) -> Iterator[str]:
    if NGINX is None:
        pytest.skip("nginx is not installed")
    root = tmp_path / "nginx-www"
    (root / "simple" / "demo").mkdir(parents=True)
    (root / "simple" / "demo" / "index.html").write_bytes(NGINX_PAGE)
    (root / "big.bin").write_bytes(bytes(range(256)) * 4096)
    port = closed_port()
    conf = tmp_path / "nginx.conf"
    user = "user root root; " if os.geteuid() == 0 else ""  # the workers read the test's own folders
    conf.write_text(
        f"""{user}daemon off; worker_processes 1; pid {tmp_path}/nginx.pid; error_log {tmp_path}/error.log;
events {{ worker_connections 64; }}
http {{ access_log off; gzip on; gzip_min_length 1; gzip_types text/html; keepalive_requests 1000;
  client_body_temp_path {tmp_path}/t1; proxy_temp_path {tmp_path}/t2; fastcgi_temp_path {tmp_path}/t3;
  uwsgi_temp_path {tmp_path}/t4; scgi_temp_path {tmp_path}/t5;
  server {{ listen 127.0.0.1:{port}; root {root}; }} }}
"""
    )
    proc = subprocess.Popen([NGINX, "-c", str(conf), "-p", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.skip(f"nginx did not start: {proc.stderr.read().decode() if proc.stderr else ''}")
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_nginx_pages_ranges_404_and_kept_connections(nginx: str) -> None:
    transport = Transport(TransportSettings(timeout=5, retries=0, trust_env=False))
    try:
        page = get(transport, nginx + "simple/demo/")  # gzip-encoded by nginx, decoded here
        assert page == NGINX_PAGE
        with pytest.raises(CrawlError, match="unexpected answer 404 Not Found"):
            get(transport, nginx + "simple/nothing/")
        resp, final = transport.open(nginx + "big.bin", {"Range": "bytes=-100"})
        try:
            transport.check_status(resp, final, ok=(206,))
            assert transport.read_body(resp, final, 1000, "tail") == (bytes(range(256)) * 4096)[-100:]
        finally:
            transport.finish(resp)
        threads = [threading.Thread(target=get, args=(transport, nginx + "big.bin")) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert transport.stats.retries == 0
    finally:
        transport.close()


def test_system_certs_through_the_command(tls_server: str, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    base = tls_server.rsplit("/", 1)[0] + "/"
    argv = ["resolve", *TARGET, *index_flags(base), "--cache-dir", str(tmp_path / "c"), "--timeout", "2"]
    rc, _, err = run_cli(capsys, *argv)
    assert rc == 3 and "certificate verify failed for 127.0.0.1" in err and "certifi" in err and "retrying" not in err
    rc, _, err = run_cli(capsys, *argv, "--system-certs")
    # (the test server does TLS handshakes one at a time in its accept loop: parallel connects may wait there)
    assert rc == 3 and "certificate verify failed for 127.0.0.1" in err and "the trust store is the system's" in err
