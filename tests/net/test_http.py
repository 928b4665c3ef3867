"""HttpFetcher against a real loopback server: answers, retries, limits, redirects, cache, metadata."""

from __future__ import annotations

import base64
import email.utils
import gzip
import hashlib
import json
import logging
import re
import shutil
import socket
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from packaging.utils import canonicalize_name
from packaging.version import Version
from support.paths import SRC
from support.server import Fault, IndexServer
from support.wheels import BuiltWheel, build_wheel, metadata_text

from resolve_gpu_stack.data.definitions import IndexDefinition
from resolve_gpu_stack.errors import CrawlError, IntegrityError
from resolve_gpu_stack.model import IndexFile
from resolve_gpu_stack.net.cache import HttpCache
from resolve_gpu_stack.net.http import HttpFetcher
from resolve_gpu_stack.net.pages import JSON_ACCEPT
from resolve_gpu_stack.net.settings import FetchSettings, TransportSettings
from resolve_gpu_stack.net.urlpolicy import Credentials, check_redirect, check_url_allowed, is_loopback, page_content_type, parse_retry_after
from resolve_gpu_stack.urls import bare_url, origin, without_fragment

PAGE = b"<!DOCTYPE html><html><body><a href='../../files/demo-1.0-py3-none-any.whl'>demo</a></body></html>"
MakeFetcher = Callable[..., HttpFetcher]


def _index(url: str, dialect: str = "html") -> IndexDefinition:
    return IndexDefinition(name="test", url=url, dialect=dialect, hosts=("*",), channels={})


def _file(url: str, wheel: BuiltWheel, **kw: object) -> IndexFile:
    name, version = wheel.filename.split("-")[:2]
    return IndexFile(filename=wheel.filename, url=url, name=canonicalize_name(name), version=Version(version), **kw)


def _page(root: Path, path: str, body: bytes = PAGE, name: str = "index.html") -> None:
    (root / path).mkdir(parents=True, exist_ok=True)
    (root / path / name).write_bytes(body)


@pytest.fixture
def make_fetcher(tmp_path: Path) -> Iterator[MakeFetcher]:
    made: list[HttpFetcher] = []

    def make(*, cache: HttpCache | None = None, progress: Callable[[str], None] | None = None, **kw: Any) -> HttpFetcher:
        """A fetcher with quick retries and no netrc or environment; ``kw``: fields of its
        ``TransportSettings`` or ``FetchSettings``."""
        transport = {"backoff_base": 0.01, "timeout": 5.0, "trust_env": False, "netrc_path": tmp_path / "no-netrc"}
        transport |= {k: v for k, v in kw.items() if k in {f.name for f in fields(TransportSettings)}}
        fetch = {k: v for k, v in kw.items() if k not in transport}
        fetcher = HttpFetcher(FetchSettings(transport=TransportSettings(**transport), **fetch), cache=cache, progress=progress)
        made.append(fetcher)
        return fetcher

    yield make
    for fetcher in made:
        fetcher.close()


@pytest.fixture
def srv(index_server: IndexServer) -> IndexServer:
    return index_server


def _get(fetcher: HttpFetcher, url: str, dialect: str = "html"):
    return fetcher.fetch_pages([url], index=_index(url, dialect))[url]


# -- pages: answers ------------------------------------------------------------------------------
def test_page_is_returned_with_its_content_type_and_html_accept(srv: IndexServer, make_fetcher: MakeFetcher) -> None:
    _page(srv.root, "simple/demo")
    resp = _get(make_fetcher(), srv.url + "simple/demo/")
    assert resp.found and not resp.from_cache
    assert resp.page is not None and resp.page.content == PAGE and resp.page.content_type == "text/html"
    assert resp.page.url == srv.url + "simple/demo/"
    assert srv.requests_for("/simple/demo/")[0][2]["Accept"] == "text/html"


def test_json_negotiation_for_json_or_html_indexes(srv: IndexServer, make_fetcher: MakeFetcher) -> None:
    body = json.dumps({"meta": {"api-version": "1.1"}, "name": "demo", "files": []}).encode()
    _page(srv.root, "simple/demo")
    _page(srv.root, "simple/demo", body, "index.json")
    fetcher = make_fetcher()
    resp = _get(fetcher, srv.url + "simple/demo/", dialect="json-or-html")
    assert resp.page is not None and resp.page.content == body
    assert resp.page.content_type == "application/vnd.pypi.simple.v1+json"
    assert srv.log[-1][2]["Accept"] == JSON_ACCEPT
    html = _get(fetcher, srv.url + "simple/demo/", dialect="html")
    assert html.page is not None and html.page.content == PAGE


@pytest.mark.parametrize("status", [404, 410])
def test_missing_page_is_an_answer(srv: IndexServer, make_fetcher: MakeFetcher, status: int) -> None:
    srv.script("/simple/gone/", [Fault(status=status, body=b"gone")])
    fetcher = make_fetcher()
    resp = _get(fetcher, srv.url + "simple/gone/")
    assert resp.page is None and not resp.found
    assert _get(fetcher, srv.url + "simple/never-existed/").page is None


def test_unreachable_host_fails_quickly_naming_the_url(make_fetcher: MakeFetcher) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/simple/demo/"
    start = time.monotonic()
    with pytest.raises(CrawlError) as info:
        _get(make_fetcher(retries=2), url)
    assert time.monotonic() - start < 2
    assert info.value.url == url and "connection refused (tried 3 times)" in str(info.value)


def test_many_pages_are_fetched_concurrently(srv: IndexServer, make_fetcher: MakeFetcher) -> None:
    for i in range(16):
        _page(srv.root, f"simple/p{i}", f"<html><body>{i}</body></html>".encode())
    srv.latency = 0.25
    said: list[str] = []
    urls = [f"{srv.url}simple/p{i}/" for i in range(16)]
    start = time.monotonic()
    got = make_fetcher(max_connections=16, progress=said.append).fetch_pages(urls, index=_index(srv.url))
    assert time.monotonic() - start < 2  # 16 x 0.25 s one after the other would be 4 s
    assert [got[u].page.content for u in urls] == [f"<html><body>{i}</body></html>".encode() for i in range(16)]  # type: ignore[union-attr]
    assert said == ["fetching 16 pages from test"]


def test_one_failing_page_fails_the_batch_naming_it(srv: IndexServer, make_fetcher: MakeFetcher) -> None:
    _page(srv.root, "simple/ok")
    srv.script("/simple/bad/", [Fault(status=418, body=b"teapot")])
    with pytest.raises(CrawlError, match=r"simple/bad/: unexpected answer 418"):
        make_fetcher().fetch_pages([srv.url + "simple/ok/", srv.url + "simple/bad/"], index=_index(srv.url))


# -- pages: retries ------------------------------------------------------------------------------
def test_503_twice_then_200(srv: IndexServer, make_fetcher: MakeFetcher) -> None:
    _page(srv.root, "simple/demo")
    srv.script("/simple/demo/", [Fault(status=503), Fault(status=503)])
    fetcher = make_fetcher()
    assert _get(fetcher, srv.url + "simple/demo/").page.content == PAGE  # type: ignore[union-attr]
    assert len(srv.requests_for("/simple/demo/")) == 3
    assert fetcher.stats.retries == 2 and fetcher.stats.requests == 3


def test_persistent_5xx_gives_up_with_the_status(srv: IndexServer, make_fetcher: MakeFetcher) -> None:
    srv.script("/simple/demo/", [Fault(status=503)] * 3)
    with pytest.raises(CrawlError, match="503 Service Unavailable after 3 attempts"):
        _get(make_fetcher(retries=2), srv.url + "simple/demo/")


def test_429_honours_retry_after(srv: IndexServer, make_fetcher: MakeFetcher) -> None:
    _page(srv.root, "simple/demo")
    srv.script("/simple/demo/", [Fault(status=429, headers={"Retry-After": "1"})])
    start = time.monotonic()
    assert _get(make_fetcher(), srv.url + "simple/demo/").found
    assert 0.9 <= time.monotonic() - start < 3
    assert len(srv.requests_for("/simple/demo/")) == 2


def test_retry_after_is_capped(srv: IndexServer, make_fetcher: MakeFetcher) -> None:
    _page(srv.root, "simple/demo")
    srv.script("/simple/demo/", [Fault(status=503, headers={"Retry-After": "3600"})])
    start = time.monotonic()
    assert _get(make_fetcher(max_retry_after=0.2), srv.url + "simple/demo/").found
    assert time.monotonic() - start < 1.5


def test_parse_retry_after() -> None:
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after("Sat, 07 Mar 2026 10:00:30 GMT", now=1772877600.0) == 30.0
    assert parse_retry_after("Sat, 07 Mar 2026 09:00:00 GMT", now=1772877600.0) == 0.0
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


def test_stall_past_the_timeout(srv: IndexServer, make_fetcher: MakeFetcher) -> None:
    _page(srv.root, "simple/demo")
    srv.script("/simple/demo/", [Fault(delay=1.2), Fault(delay=1.2)])
    start = time.monotonic()
    with pytest.raises(CrawlError, match=r"timed out after 0\.5 s \(tried 2 times\)"):
        _get(make_fetcher(timeout=0.5, retries=1), srv.url + "simple/demo/")
    assert time.monotonic() - start < 2


def test_one_stall_then_success(srv: IndexServer, make_fetcher: MakeFetcher) -> None:
    _page(srv.root, "simple/demo")
    srv.script("/simple/demo/", [Fault(delay=1.0)])
    assert _get(make_fetcher(timeout=0.3), srv.url + "simple/demo/").found


def test_connection_reset_is_retried_then_reported(srv: IndexServer, make_fetcher: MakeFetcher) -> None:
    _page(srv.root, "simple/demo")
    srv.script("/simple/demo/", [Fault(reset=True)])
    assert _get(make_fetcher(), srv.url + "simple/demo/").found
    srv.script("/simple/demo/", [Fault(reset=True)] * 2)
    with pytest.raises(CrawlError, match="connection reset"):
        _get(make_fetcher(retries=1), srv.url + "simple/demo/")


def test_truncated_body_is_retried_then_reported(srv: IndexServer, make_fetcher: MakeFetcher) -> None:
    body = b"<html><body>" + b"x" * 5000 + b"</body></html>"
    _page(srv.root, "simple/demo", body)
    srv.script("/simple/demo/", [Fault(truncate_to=120)])
    assert _get(make_fetcher(), srv.url + "simple/demo/").page.content == body  # type: ignore[union-attr]
    srv.script("/simple/demo/", [Fault(truncate_to=120)] * 2)
    with pytest.raises(CrawlError, match=f"body truncated: 120 of {len(body)} bytes"):
        _get(make_fetcher(retries=1), srv.url + "simple/demo/")


def test_a_page_reset_mid_body_is_retried_whole_then_reported_with_what_came(srv: IndexServer, make_fetcher: MakeFetcher) -> None:
    """A page of declared length is read into one buffer: a reset part-way loses that buffer, the
    page is asked again and comes whole; the last failure says how far the body came."""
    body = b"<html><body>" + b"<a href='x-1.0.tar.gz'>x-1.0.tar.gz</a><br>\n" * 30000 + b"</body></html>"
    _page(srv.root, "simple/demo", body)
    srv.script("/simple/demo/", [Fault(reset_after=300_000)])
    assert _get(make_fetcher(), srv.url + "simple/demo/").page.content == body  # type: ignore[union-attr]
    srv.script("/simple/demo/", [Fault(reset_after=300_000)] * 2)
    with pytest.raises(CrawlError, match=rf"body truncated: \d+ of {len(body)} bytes \(tried 2 times\)"):
        _get(make_fetcher(retries=1), srv.url + "simple/demo/")


# -- pages: what is not an index page ------------------------------------------------------------
@pytest.mark.parametrize(
    ("ctype", "body"),
    [("application/pdf", b"%PDF-1.7 ..."), ("image/png", b"\x89PNG\r\n\x1a\n"), ("application/octet-stream", bytes(range(256)))],
)
def test_not_an_index_page(srv: IndexServer, make_fetcher: MakeFetcher, ctype: str, body: bytes) -> None:
    srv.script("/simple/demo/", [Fault(body=body, headers={"Content-Type": ctype})])
    with pytest.raises(CrawlError, match=f"not an index page: content-type '{ctype}'"):
        _get(make_fetcher(), srv.url + "simple/demo/")


def test_html_served_as_octet_stream_is_sniffed() -> None:
    assert page_content_type("application/octet-stream", b"\n  <!DOCTYPE html><html>") == "text/html"
    assert page_content_type("", b'{"meta": {"api-version": "1.0"}, "files": []}') == "application/vnd.pypi.simple.v1+json"
    assert page_content_type("text/html; charset=utf-8", b"") == "text/html; charset=utf-8"
    with pytest.raises(ValueError, match="not an index page"):
        page_content_type("text/plain", b"hello")


def test_gzip_page_is_decoded(srv: IndexServer, make_fetcher: MakeFetcher) -> None:
    srv.script("/simple/demo/", [Fault(body=gzip.compress(PAGE), headers={"Content-Encoding": "gzip"})])
    assert _get(make_fetcher(), srv.url + "simple/demo/").page.content == PAGE  # type: ignore[union-attr]


def test_page_over_the_cap(srv: IndexServer, make_fetcher: MakeFetcher) -> None:
    _page(srv.root, "simple/big", b"<html><body>" + b"a" * 300_000 + b"</body></html>")
    with pytest.raises(CrawlError, match="index page is 300026 bytes, over the 100000-byte cap"):
        _get(make_fetcher(max_page_bytes=100_000), srv.url + "simple/big/")


def test_gzip_bomb_page_stops_at_the_cap(srv: IndexServer, make_fetcher: MakeFetcher) -> None:
    bomb = gzip.compress(b"<html>" + b" " * 5_000_000, compresslevel=1)
    srv.script("/simple/demo/", [Fault(body=bomb, headers={"Content-Encoding": "gzip"})])
    with pytest.raises(CrawlError, match="over the 1000000-byte cap; stopped reading"):
        _get(make_fetcher(max_page_bytes=1_000_000), srv.url + "simple/demo/")


# -- pages: redirects and URL policy -------------------------------------------------------------
def test_relative_redirect_is_followed_and_page_url_is_final(srv: IndexServer, make_fetcher: MakeFetcher) -> None:
    _page(srv.root, "simple/demo")
    srv.script("/simple/Demo", [Fault(status=301, headers={"Location": "/simple/demo/"})])
    resp = _get(make_fetcher(), srv.url + "simple/Demo")
    assert resp.page is not None and resp.page.url == srv.url + "simple/demo/" and resp.page.content == PAGE


def test_redirect_loop(srv: IndexServer, make_fetcher: MakeFetcher) -> None:
    srv.script("/a/", [Fault(status=302, headers={"Location": "/b/"})])
    srv.script("/b/", [Fault(status=302, headers={"Location": "/a/"})])
    with pytest.raises(CrawlError, match=r"redirect loop: .*/a/ -> .*/b/ -> .*/a/"):
        _get(make_fetcher(), srv.url + "a/")


def test_too_many_redirects(srv: IndexServer, make_fetcher: MakeFetcher) -> None:
    for i in range(12):
        srv.script(f"/r{i}", [Fault(status=307, headers={"Location": f"/r{i + 1}"})])
    with pytest.raises(CrawlError, match="more than 10 redirects"):
        _get(make_fetcher(), srv.url + "r0")


def test_cross_host_redirect_is_followed(tmp_path: Path, make_fetcher: MakeFetcher) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with IndexServer(tmp_path / "a") as first, IndexServer(tmp_path / "b") as storage:
        port = storage.url.rsplit(":", 1)[1].rstrip("/")
        _page(storage.root, "assets/demo")
        first.script("/simple/demo/", [Fault(status=302, headers={"Location": f"http://localhost:{port}/assets/demo/"})])
        resp = _get(make_fetcher(), first.url + "simple/demo/")
    assert resp.page is not None and resp.page.content == PAGE
    assert resp.page.url == f"http://localhost:{port}/assets/demo/"


def test_https_to_http_redirect_is_refused() -> None:
    with pytest.raises(CrawlError, match="redirected from https to plain http"):
        check_redirect("https://idx.example/simple/x/", "http://idx.example/simple/x/")
    with pytest.raises(CrawlError, match="non-HTTP"):
        check_redirect("https://idx.example/simple/x/", "file:///etc/passwd")
    check_redirect("https://idx.example/simple/x/", "https://storage.example/x")
    check_redirect("http://127.0.0.1:8000/x", "http://localhost:8000/x")


def test_redirect_to_a_plain_http_host_is_refused_before_connecting(srv: IndexServer, make_fetcher: MakeFetcher) -> None:
    srv.script("/simple/demo/", [Fault(status=302, headers={"Location": "http://mirror.example/simple/demo/"})])
    with pytest.raises(CrawlError, match="plain http is refused") as info:
        _get(make_fetcher(), srv.url + "simple/demo/")
    assert info.value.hint == "use https, or pass --allow-insecure-host mirror.example"


def test_credentials_learned_after_a_request_apply_from_the_next_one(srv: IndexServer, make_fetcher: MakeFetcher) -> None:
    """What a request to an origin was sent with is not kept for that origin once credentials for
    it are learned (a page URL with ``user:token@``): the next file of that origin carries them."""
    _page(srv.root, "simple/demo")
    first = build_wheel(srv.root / "files", "demo", "1.0")
    second = build_wheel(srv.root / "files", "other", "1.0")
    fetcher = make_fetcher(retries=0)
    before = _file(srv.url + "files/" + first.filename, first)
    assert fetcher.fetch_metadata([before]) == {before.url: first.metadata}
    srv.auth = ("alice", SECRET)
    base = srv.url.replace("http://", f"http://alice:{SECRET}@") + "simple/"
    assert fetcher.fetch_pages([base + "demo/"], index=_index(base))[base + "demo/"].found
    after = _file(srv.url + "files/" + second.filename, second)
    assert fetcher.fetch_metadata([after]) == {after.url: second.metadata}
    sent = [e[2].get("Authorization") for e in srv.log]
    assert sent[0] is None and sent[1:] == [_basic("alice", SECRET)] * (len(sent) - 1) and len(sent) >= 3


def test_a_refused_origin_stays_refused_and_an_allowed_one_allowed(make_fetcher: MakeFetcher) -> None:
    """The transport decides a URL's policy once per origin: a refusal is never remembered as a pass."""
    transport = make_fetcher(allow_insecure_hosts=("mirror.example:8080",)).transport
    for _ in range(2):
        transport.check_allowed("http://mirror.example:8080/simple/a/")
        transport.check_allowed("https://files.example/b.whl")
        with pytest.raises(CrawlError, match="plain http is refused"):
            transport.check_allowed("http://mirror.example/simple/a/")
        with pytest.raises(CrawlError, match="plain http is refused"):
            transport.check_allowed("http://mirror.example:8081/simple/a/")
        with pytest.raises(CrawlError, match="cannot fetch a ftp: URL"):
            transport.check_allowed("ftp://mirror.example:8080/simple/a/")


def test_url_policy() -> None:
    for host in ("127.0.0.1", "127.9.9.9", "::1", "localhost", "LOCALHOST"):
        assert is_loopback(host)
    for host in ("10.0.0.1", "mirror.example", "localhost.example"):
        assert not is_loopback(host)
    check_url_allowed("http://127.0.0.1:9/x")
    check_url_allowed("http://[::1]:9/x")
    check_url_allowed("https://mirror.example/x")
    check_url_allowed("http://mirror.example/x", ["mirror.example"])
    check_url_allowed("http://mirror.example:8080/x", ["mirror.example:8080"])
    with pytest.raises(CrawlError, match="plain http is refused"):
        check_url_allowed("http://mirror.example:8080/x", ["other.example"])
    with pytest.raises(CrawlError, match="cannot fetch a ftp: URL"):
        check_url_allowed("ftp://mirror.example/x")


def test_plain_http_index_is_refused(make_fetcher: MakeFetcher) -> None:
    with pytest.raises(CrawlError) as info:
        _get(make_fetcher(), "http://mirror.example/simple/demo/")
    assert "--allow-insecure-host mirror.example" in (info.value.hint or "")


# -- pages: cache --------------------------------------------------------------------------------
def test_second_fetch_is_conditional_and_served_from_cache(srv: IndexServer, make_fetcher: MakeFetcher, tmp_path: Path) -> None:
    _page(srv.root, "simple/demo")
    cache = HttpCache(tmp_path / "cache")
    first = _get(make_fetcher(cache=cache), srv.url + "simple/demo/")
    assert not first.from_cache and "If-None-Match" not in srv.log[-1][2]
    fetcher = make_fetcher(cache=cache)
    second = _get(fetcher, srv.url + "simple/demo/")
    sent = srv.log[-1][2]
    assert second.from_cache and second.page == first.page
    assert sent["If-None-Match"] == '"' + hashlib.sha256(PAGE).hexdigest()[:32] + '"'
    assert "If-Modified-Since" in sent and fetcher.stats.cache_hits == 1
    # The page changes: a fresh 200, and the cache follows.
    _page(srv.root, "simple/demo", PAGE + b"<!-- v2 -->")
    third = _get(fetcher, srv.url + "simple/demo/")
    assert not third.from_cache and third.page.content == PAGE + b"<!-- v2 -->"  # type: ignore[union-attr]
    assert _get(fetcher, srv.url + "simple/demo/").page.content == PAGE + b"<!-- v2 -->"  # type: ignore[union-attr]


def test_corrupted_cache_entry_is_fetched_again(srv: IndexServer, make_fetcher: MakeFetcher, tmp_path: Path) -> None:
    _page(srv.root, "simple/demo")
    cache = HttpCache(tmp_path / "cache")
    _get(make_fetcher(cache=cache), srv.url + "simple/demo/")
    (entry,) = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    entry.write_bytes(entry.read_bytes().replace(b"demo</a>", b"evil</a>"))
    resp = _get(make_fetcher(cache=cache), srv.url + "simple/demo/")
    assert not resp.from_cache and resp.page.content == PAGE  # type: ignore[union-attr]
    assert "If-None-Match" not in srv.log[-1][2]
    assert _get(make_fetcher(cache=cache), srv.url + "simple/demo/").from_cache


def test_page_gone_drops_its_cache_entry(srv: IndexServer, make_fetcher: MakeFetcher, tmp_path: Path) -> None:
    _page(srv.root, "simple/demo")
    cache = HttpCache(tmp_path / "cache")
    _get(make_fetcher(cache=cache), srv.url + "simple/demo/")
    (srv.root / "simple/demo/index.html").unlink()
    assert _get(make_fetcher(cache=cache), srv.url + "simple/demo/").page is None
    assert cache.get_page(srv.url + "simple/demo/") is None


def test_threads_fetching_into_one_cache(srv: IndexServer, make_fetcher: MakeFetcher, tmp_path: Path) -> None:
    import threading

    for i in range(10):
        _page(srv.root, f"simple/p{i}", f"<html><body>{i}</body></html>".encode())
    urls = [f"{srv.url}simple/p{i}/" for i in range(10)]
    cache = HttpCache(tmp_path / "cache")
    errors: list[BaseException] = []

    def run() -> None:
        fetcher = make_fetcher(cache=cache, max_connections=4)
        try:
            for _ in range(3):
                got = fetcher.fetch_pages(urls, index=_index(srv.url))
                assert [got[u].page.content for u in urls] == [f"<html><body>{i}</body></html>".encode() for i in range(10)]  # type: ignore[union-attr]
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert all(cache.get_page(u) is not None for u in urls)


# -- metadata ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def big_wheel(tmp_path_factory: pytest.TempPathFactory) -> BuiltWheel:
    return build_wheel(tmp_path_factory.mktemp("big"), "big-stack", "2.0.0", requires=["torch>=2.11", "numpy"], padding=30_000_000)


def test_sidecar_with_good_digest(srv: IndexServer, make_fetcher: MakeFetcher, tmp_path: Path) -> None:
    wheel = build_wheel(srv.root / "files", "demo", "1.0")
    (srv.root / "files" / (wheel.filename + ".metadata")).write_bytes(wheel.metadata)
    url = srv.url + "files/" + wheel.filename
    f = _file(url, wheel, has_metadata=True, metadata_sha256=hashlib.sha256(wheel.metadata).hexdigest())
    fetcher = make_fetcher(cache=HttpCache(tmp_path / "cache"))
    assert fetcher.fetch_metadata([f]) == {url: wheel.metadata}
    assert [e[1] for e in srv.log] == ["/files/" + wheel.filename + ".metadata"]
    assert fetcher.fetch_metadata([f]) == {url: wheel.metadata}  # cached: no request at all
    assert len(srv.log) == 1 and fetcher.stats.cache_hits == 1


def test_sidecar_with_bad_digest(srv: IndexServer, make_fetcher: MakeFetcher, tmp_path: Path) -> None:
    wheel = build_wheel(srv.root / "files", "demo", "1.0")
    (srv.root / "files" / (wheel.filename + ".metadata")).write_bytes(wheel.metadata + b"Requires-Dist: evil\n")
    url = srv.url + "files/" + wheel.filename
    f = _file(url, wheel, has_metadata=True, metadata_sha256=hashlib.sha256(wheel.metadata).hexdigest())
    with pytest.raises(IntegrityError, match=wheel.filename + r"\.metadata: sha256 [0-9a-f]{64} does not match") as info:
        make_fetcher(cache=HttpCache(tmp_path / "cache")).fetch_metadata([f])
    assert info.value.url == url + ".metadata"
    assert not (tmp_path / "cache").exists() or not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]


def test_missing_sidecar_falls_back_to_range_reads(srv: IndexServer, make_fetcher: MakeFetcher) -> None:
    wheel = build_wheel(srv.root / "files", "demo", "1.0", requires=["numpy"])
    url = srv.url + "files/" + wheel.filename
    f = _file(url, wheel, has_metadata=True)
    assert make_fetcher().fetch_metadata([f]) == {url: wheel.metadata}
    assert [e[1] for e in srv.log] == ["/files/" + wheel.filename + ".metadata", "/files/" + wheel.filename]


def test_range_reads_of_a_large_wheel(srv: IndexServer, make_fetcher: MakeFetcher, big_wheel: BuiltWheel) -> None:
    (srv.root / "files").mkdir()
    shutil.copyfile(big_wheel.path, srv.root / "files" / big_wheel.filename)
    url = srv.url + "files/" + big_wheel.filename
    fetcher = make_fetcher()
    got = fetcher.fetch_metadata([_file(url, big_wheel)])
    assert got == {url: big_wheel.metadata}
    assert big_wheel.size > 30_000_000
    assert srv.bytes_sent < big_wheel.size / 100
    assert all("Range" in e[2] for e in srv.log) and fetcher.stats.full_downloads == 0


def test_central_directory_and_member_outside_the_tail(srv: IndexServer, make_fetcher: MakeFetcher) -> None:
    files = {f"wide/module_with_a_long_name_{i:05d}.py": f"X = {i}\n".encode() for i in range(3000)}
    wheel = build_wheel(srv.root / "files", "wide", "1.0", requires=["numpy"], files=files)
    url = srv.url + "files/" + wheel.filename
    assert make_fetcher().fetch_metadata([_file(url, wheel)]) == {url: wheel.metadata}
    ranges = [e[2]["Range"] for e in srv.log]
    assert len(ranges) == 3 and ranges[0].startswith("bytes=-")  # tail, central directory, member
    assert srv.bytes_sent < wheel.size


def test_server_ignoring_range_downloads_the_whole_wheel(srv: IndexServer, make_fetcher: MakeFetcher, caplog: pytest.LogCaptureFixture) -> None:
    wheel = build_wheel(srv.root / "files", "demo", "1.0", requires=["numpy"], padding=2_000_000)
    srv.ignore_ranges = True
    url = srv.url + "files/" + wheel.filename
    said: list[str] = []
    fetcher = make_fetcher(progress=said.append)
    with caplog.at_level(logging.WARNING):
        assert fetcher.fetch_metadata([_file(url, wheel, sha256=wheel.sha256)]) == {url: wheel.metadata}
    warning = "server ignored Range; downloaded the whole wheel (1.9 MB) to read its metadata"
    assert any(warning in r.getMessage() for r in caplog.records)
    assert any(warning in s for s in said)
    assert fetcher.stats.full_downloads == 1 and len(srv.log) == 1


def test_a_server_ignoring_range_and_sending_without_end_stops_at_the_declared_size(
    srv: IndexServer, make_fetcher: MakeFetcher, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: the METADATA fallback had no cap (a hostile endless 200 wrote GBs to $TMPDIR). Now it
    stops past the size the index page lists, with a clear error, and leaves nothing in $TMPDIR."""
    import tempfile

    wheel = build_wheel(srv.root / "files", "demo", "1.0", requires=["numpy"], padding=100_000)
    endless = wheel.path.read_bytes() * 40  # 4 MB where the page says 100 kB, sent chunked (no length)
    srv.script("/files/" + wheel.filename, [Fault(body=endless, chunked=True, ignore_range=True) for _ in range(10)])
    scratch = tmp_path / "tmpdir"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", None)
    url = srv.url + "files/" + wheel.filename
    with pytest.raises(IntegrityError, match=f"ignored Range and sent more than the {wheel.size} bytes its index page lists; stopped"):
        make_fetcher().fetch_metadata([_file(url, wheel, size=wheel.size)])
    assert list(scratch.iterdir()) == []
    assert srv.bytes_sent < 40 * wheel.size


def test_whole_download_with_a_wrong_sha256(srv: IndexServer, make_fetcher: MakeFetcher) -> None:
    wheel = build_wheel(srv.root / "files", "demo", "1.0")
    srv.ignore_ranges = True
    url = srv.url + "files/" + wheel.filename
    with pytest.raises(IntegrityError, match="does not match " + "0" * 64):
        make_fetcher().fetch_metadata([_file(url, wheel, sha256="0" * 64)])


def test_truncated_range_answer_is_retried(srv: IndexServer, make_fetcher: MakeFetcher) -> None:
    wheel = build_wheel(srv.root / "files", "demo", "1.0")
    srv.script("/files/" + wheel.filename, [Fault(truncate_to=10)])
    url = srv.url + "files/" + wheel.filename
    assert make_fetcher().fetch_metadata([_file(url, wheel)]) == {url: wheel.metadata}
    assert len(srv.log) == 2


def test_listed_wheel_missing_on_the_server(srv: IndexServer, make_fetcher: MakeFetcher) -> None:
    wheel = build_wheel(srv.root / "elsewhere", "demo", "1.0")
    url = srv.url + "files/" + wheel.filename
    with pytest.raises(CrawlError, match="404 Not Found: the index lists this wheel but the server does not have it"):
        make_fetcher().fetch_metadata([_file(url, wheel)])


def _zip_wheel(path: Path, members: dict[str, bytes]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ({"demo/__init__.py": b"", "demo-1.0.dist-info/RECORD": b""}, r"no \*\.dist-info/METADATA in the wheel"),
        (
            {"demo-1.0.dist-info/METADATA": b"Name: demo\n", "other-2.0.dist-info/METADATA": b"Name: other\n"},
            "2 dist-info directories with METADATA",
        ),
    ],
)
def test_wheel_without_exactly_one_metadata(srv: IndexServer, make_fetcher: MakeFetcher, members: dict[str, bytes], message: str) -> None:
    _zip_wheel(srv.root / "files" / "demo-1.0-py3-none-any.whl", members)
    url = srv.url + "files/demo-1.0-py3-none-any.whl"
    f = IndexFile(filename="demo-1.0-py3-none-any.whl", url=url, name=canonicalize_name("demo"), version=Version("1.0"))
    with pytest.raises(CrawlError, match="demo-1.0-py3-none-any.whl: cannot read METADATA from the wheel: " + message):
        make_fetcher().fetch_metadata([f])


def test_not_a_wheel_at_all(srv: IndexServer, make_fetcher: MakeFetcher) -> None:
    (srv.root / "files").mkdir()
    (srv.root / "files" / "demo-1.0-py3-none-any.whl").write_bytes(b"<html>an error page with a 200</html>")
    url = srv.url + "files/demo-1.0-py3-none-any.whl"
    f = IndexFile(filename="demo-1.0-py3-none-any.whl", url=url, name=canonicalize_name("demo"), version=Version("1.0"))
    with pytest.raises(CrawlError, match="not a zip file"):
        make_fetcher().fetch_metadata([f])


def test_metadata_zip_bomb(srv: IndexServer, make_fetcher: MakeFetcher) -> None:
    bomb = metadata_text("demo", "1.0") + b"Description: " + b"A" * 20_000_000
    wheel = build_wheel(srv.root / "files", "demo", "1.0", metadata_override=bomb)
    url = srv.url + "files/" + wheel.filename
    with pytest.raises(IntegrityError, match=f"refusing METADATA: demo-1.0.dist-info/METADATA is {len(bomb)} bytes, over the 1048576-byte cap"):
        make_fetcher(max_metadata_bytes=2**20).fetch_metadata([_file(url, wheel)])
    assert srv.bytes_sent < 200_000


def test_many_wheels_at_once(srv: IndexServer, make_fetcher: MakeFetcher) -> None:
    wheels = [build_wheel(srv.root / "files", f"pkg{i}", "1.0", requires=[f"dep{i}"]) for i in range(12)]
    files = [_file(srv.url + "files/" + w.filename, w) for w in wheels]
    said: list[str] = []
    got = make_fetcher(progress=said.append).fetch_metadata(files)
    assert got == {f.url: w.metadata for f, w in zip(files, wheels)}
    assert said == ["reading the metadata of 12 wheels"]


# -- credentials ---------------------------------------------------------------------------------
SECRET = "tok-Zq81-secret"


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_credentials_go_only_to_their_host_and_never_leak(tmp_path: Path, make_fetcher: MakeFetcher, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    (tmp_path / "private").mkdir()
    (tmp_path / "storage").mkdir()
    cache_dir = tmp_path / "cache"
    messages: list[str] = []
    with IndexServer(tmp_path / "private") as private, IndexServer(tmp_path / "storage") as storage:
        private.auth = ("alice", SECRET)
        storage_port = storage.url.rsplit(":", 1)[1].rstrip("/")
        _page(private.root, "simple/demo")
        wheel = build_wheel(private.root / "files", "demo", "1.0", requires=["numpy"])
        moved = build_wheel(storage.root / "assets", "moved", "1.0")
        base = private.url.replace("http://", f"http://alice:{SECRET}@") + "simple/"
        fetcher = make_fetcher(cache=HttpCache(cache_dir), progress=messages.append)
        index = _index(base)
        page = fetcher.fetch_pages([base + "demo/"], index=index)[base + "demo/"]
        assert page.page is not None and page.page.content == PAGE
        assert SECRET not in page.page.url
        # File URLs on the page carry no credentials; the host's credentials still apply.
        own = _file(private.url + "files/" + wheel.filename, wheel)
        assert fetcher.fetch_metadata([own]) == {own.url: wheel.metadata}
        # A redirect to another host (release asset -> storage) must not carry them.
        private.script(
            "/files/moved-1.0-py3-none-any.whl", [Fault(status=302, headers={"Location": f"http://localhost:{storage_port}/assets/{moved.filename}"})]
        )
        far = _file(private.url + "files/" + moved.filename, moved)
        assert fetcher.fetch_metadata([far]) == {far.url: moved.metadata}
        # Failures name the URL without the secret.
        private.script("/simple/broken/", [Fault(status=500)] * 5)
        with pytest.raises(CrawlError) as failure:
            fetcher.fetch_pages([base + "broken/"], index=index)
        private.auth = ("alice", "other")
        with pytest.raises(CrawlError) as refused:
            make_fetcher(cache=None).fetch_pages([base + "demo/"], index=index)
    assert all(e[2].get("Authorization") == _basic("alice", SECRET) for e in private.log if e[2].get("Authorization"))
    assert sum(1 for e in private.log if "Authorization" in e[2]) == len(private.log)
    assert storage.log and all("Authorization" not in e[2] for e in storage.log)
    assert refused.value.hint == "the credentials sent to 127.0.0.1 were refused"
    for text in [str(failure.value), failure.value.url, str(refused.value), refused.value.url, *messages]:
        assert SECRET not in text
    assert "***@127.0.0.1" in str(failure.value)
    encoded = base64.b64encode(f"alice:{SECRET}".encode()).decode()
    for record in caplog.records:
        assert SECRET not in record.getMessage() and encoded not in record.getMessage()
    for path in cache_dir.rglob("*"):
        if path.is_file():
            raw = path.read_bytes()
            assert SECRET.encode() not in raw and encoded.encode() not in raw


def test_missing_credentials_hint(srv: IndexServer, make_fetcher: MakeFetcher) -> None:
    srv.auth = ("alice", SECRET)
    _page(srv.root, "simple/demo")
    with pytest.raises(CrawlError, match="401 Unauthorized") as info:
        _get(make_fetcher(), srv.url + "simple/demo/")
    assert "netrc" in (info.value.hint or "") and "USER:TOKEN@" in (info.value.hint or "")


def test_netrc_credentials_for_their_host_only(tmp_path: Path, make_fetcher: MakeFetcher) -> None:
    (tmp_path / "www").mkdir()
    rc = tmp_path / "netrc"
    rc.write_text(f"machine 127.0.0.1 login bob password {SECRET}\n")
    with IndexServer(tmp_path / "www") as server:
        server.auth = ("bob", SECRET)
        _page(server.root, "simple/demo")
        fetcher = make_fetcher(netrc_path=rc)
        assert _get(fetcher, server.url + "simple/demo/").found
        server.auth = None
        port = server.url.rsplit(":", 1)[1].rstrip("/")
        assert _get(fetcher, f"http://localhost:{port}/simple/demo/").found
    assert server.log[0][2]["Authorization"] == _basic("bob", SECRET)
    assert "Authorization" not in server.log[1][2]


def test_unparsable_netrc_is_ignored_without_echoing_it(tmp_path: Path, srv: IndexServer, make_fetcher: MakeFetcher, caplog: pytest.LogCaptureFixture) -> None:
    rc = tmp_path / "netrc"
    rc.write_text(f"machine 127.0.0.1 login bob password {SECRET}\n{SECRET} is not a netrc keyword\n")
    _page(srv.root, "simple/demo")
    with caplog.at_level(logging.WARNING):
        assert _get(make_fetcher(netrc_path=rc), srv.url + "simple/demo/").found
    assert "Authorization" not in srv.log[0][2]
    assert all(SECRET not in r.getMessage() for r in caplog.records)


def test_stats_count_requests_and_bytes(srv: IndexServer, make_fetcher: MakeFetcher) -> None:
    _page(srv.root, "simple/demo")
    fetcher = make_fetcher()
    _get(fetcher, srv.url + "simple/demo/")
    assert fetcher.stats.requests == 1 and fetcher.stats.bytes_received == len(PAGE) == srv.bytes_sent


def test_ranges_after_a_redirect_go_straight_to_the_storage_host(tmp_path: Path, make_fetcher: MakeFetcher) -> None:
    (tmp_path / "index").mkdir()
    (tmp_path / "storage").mkdir()
    with IndexServer(tmp_path / "index") as index, IndexServer(tmp_path / "storage") as storage:
        files = {f"wide/module_with_a_long_name_{i:05d}.py": f"X = {i}\n".encode() for i in range(3000)}
        wheel = build_wheel(storage.root / "assets", "wide", "1.0", files=files)
        port = storage.url.rsplit(":", 1)[1].rstrip("/")
        index.script("/releases/" + wheel.filename, [Fault(status=302, headers={"Location": f"http://localhost:{port}/assets/{wheel.filename}"})])
        url = index.url + "releases/" + wheel.filename
        assert make_fetcher().fetch_metadata([_file(url, wheel)]) == {url: wheel.metadata}
    assert len(index.log) == 1 and len(storage.log) == 3  # one redirect, then tail, directory, member


def test_whole_download_of_the_wrong_size(srv: IndexServer, make_fetcher: MakeFetcher) -> None:
    wheel = build_wheel(srv.root / "files", "demo", "1.0")
    srv.ignore_ranges = True
    url = srv.url + "files/" + wheel.filename
    with pytest.raises(IntegrityError, match=f"downloaded {wheel.size} bytes, the index page says {wheel.size + 1}"):
        make_fetcher().fetch_metadata([_file(url, wheel, size=wheel.size + 1)])


def test_open_stream_reports_offset_total_and_a_strong_validator(srv: IndexServer, make_fetcher: MakeFetcher) -> None:
    wheel = build_wheel(srv.root / "files", "demo", "1.0", padding=10_000)
    data = wheel.path.read_bytes()
    url = srv.url + "files/" + wheel.filename
    fetcher = make_fetcher()
    with fetcher.open_stream(url) as whole:
        assert (whole.status, whole.offset, whole.total) == (200, 0, len(data))
        assert b"".join(whole.chunks()) == data and whole.validator and whole.validator.startswith('"')
    with fetcher.open_stream(url, start=1000, if_range=whole.validator) as rest:
        assert (rest.status, rest.offset, rest.total) == (206, 1000, len(data))
        assert b"".join(rest.chunks()) == data[1000:]
    assert srv.log[-1][2]["If-Range"] == whole.validator and srv.log[-1][2]["Range"] == "bytes=1000-"
    with fetcher.open_stream(url, start=len(data)) as past:
        assert (past.status, past.total) == (416, len(data))
    srv.script("/files/" + wheel.filename, [Fault(headers={"ETag": 'W/"weak"'})])
    with fetcher.open_stream(url) as weak:
        assert weak.validator == email.utils.formatdate(wheel.path.stat().st_mtime, usegmt=True)


def test_a_whole_wheel_that_cannot_be_decoded_is_a_crawl_error(srv: IndexServer, make_fetcher: MakeFetcher) -> None:
    wheel = build_wheel(srv.root / "files", "demo", "1.0")
    url = srv.url + "files/" + wheel.filename
    srv.script("/files/" + wheel.filename, [Fault(body=b"not gzip at all", headers={"Content-Encoding": "gzip"})])
    with pytest.raises(CrawlError, match="cannot decode the download"):
        make_fetcher(retries=0).fetch_metadata([_file(url, wheel)])


def test_unreadable_netrc_is_ignored_naming_its_line_never_its_token(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    rc = tmp_path / "netrc"
    rc.write_text("machine idx.example login alice password s3cr3t\nmachine\n")
    with caplog.at_level(logging.WARNING):
        assert Credentials(rc).header_for("https://idx.example/simple/") is None
    assert "cannot read netrc file" in caplog.text and "(line " in caplog.text and "s3cr3t" not in caplog.text


def test_url_text_helpers_live_in_urls() -> None:
    url = "https://alice:s3cr3t@IDX.example/simple/x/?q=1#sha256=ab"
    assert without_fragment(url) == "https://alice:s3cr3t@IDX.example/simple/x/?q=1"
    assert bare_url(url) == "https://IDX.example/simple/x/?q=1"
    assert origin(url) == ("https", "idx.example", 443) and origin("http://127.0.0.1/x") == ("http", "127.0.0.1", 80)
    assert origin("https://h.example:8443/") == ("https", "h.example", 8443)


NET = SRC / "net"


@pytest.mark.parametrize("module", sorted(p.name for p in NET.glob("*.py")))
def test_net_declares_capabilities_and_keeps_to_public_apis(module: str) -> None:
    """No probing for capabilities (protocols say what a collaborator offers) and no reaching
    into another object's private members (``StreamAnswer`` uses the transport's public API)."""
    source = (NET / module).read_text()
    assert not re.search(r"\b(hasattr|getattr)\(", source)
    assert not re.findall(r"(?<!\bself)(?<!\bcls)\.(_[a-z]\w*)", source)
