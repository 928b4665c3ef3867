"""Verified, resumable wheel downloads into the content-addressed wheel cache, over real HTTP."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name
from packaging.version import Version
from support.server import Fault
from support.wheels import build_wheel

from resolve_gpu_stack.errors import CrawlError, IntegrityError
from resolve_gpu_stack.model import Action, Coupling, LockedPackage, LockPlan, TargetSummary
from resolve_gpu_stack.net.download import WheelCache, fetch_wheel, fill_hashes
from resolve_gpu_stack.net.http import HttpFetcher
from resolve_gpu_stack.net.settings import FetchSettings, TransportSettings
from resolve_gpu_stack.net.stream import StreamAnswer, open_stream
from resolve_gpu_stack.net.transport import Transport

PAD = 300_000  # incompressible bytes, so the wheel is big enough to cut in the middle
CUT = 100_000


@pytest.fixture
def fetcher():
    f = HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10, retries=2, backoff_base=0.01)), cache=None)
    yield f
    f.close()


@pytest.fixture
def cache(tmp_path: Path) -> WheelCache:
    return WheelCache(tmp_path / "cache" / "wheels")


@pytest.fixture
def wheel(index_server):
    w = build_wheel(index_server.root / "whl", "flashinfer-jit-cache", "0.6.5+cu130", "cp39-abi3-manylinux_2_28_x86_64", padding=PAD)
    return w


def url_of(srv, wheel) -> str:
    return srv.url + "whl/" + wheel.filename.replace("+", "%2B")


def path_of(wheel) -> str:
    return "/whl/" + wheel.filename


def gets(srv, wheel):
    return [headers for method, _, headers in srv.requests_for(path_of(wheel).replace("+", "%2B")) if method == "GET"]


def leftovers(cache: WheelCache) -> list[Path]:
    """Files that hold (part of) a download: verified entries, partial bytes, validators."""
    return sorted(p for sub in ("sha256", "partial") for p in (cache.root / sub).rglob("*") if p.is_file())


def test_cut_off_download_resumes_with_range_in_a_retry(index_server, fetcher, cache, wheel):
    index_server.script(path_of(wheel), [Fault(truncate_to=CUT)])
    path = fetch_wheel(url_of(index_server, wheel), sha256=wheel.sha256, size=wheel.size, cache=cache, fetcher=fetcher)
    assert path.read_bytes() == wheel.path.read_bytes()
    assert path == cache.path_for(wheel.sha256, wheel.filename)
    first, second = gets(index_server, wheel)
    assert "Range" not in first
    assert second["Range"] == f"bytes={CUT}-"
    assert second["If-Range"].startswith('"')  # the ETag of the first answer: a changed file restarts
    assert index_server.bytes_sent == wheel.size  # nothing was sent twice
    assert leftovers(cache) == [path]


def test_a_later_call_continues_the_partial_file(index_server, cache, wheel):
    index_server.script(path_of(wheel), [Fault(truncate_to=CUT)])
    once = HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10, retries=0)), cache=None)
    try:
        with pytest.raises(CrawlError, match="truncated"):
            fetch_wheel(url_of(index_server, wheel), sha256=wheel.sha256, size=wheel.size, cache=cache, fetcher=once)
        assert cache.partial_path(url_of(index_server, wheel)).stat().st_size == CUT
        assert not (cache.root / "sha256").exists()  # nothing unverified was handed on
        path = fetch_wheel(url_of(index_server, wheel), sha256=wheel.sha256, size=wheel.size, cache=cache, fetcher=once)
    finally:
        once.close()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == wheel.sha256
    assert gets(index_server, wheel)[1]["Range"] == f"bytes={CUT}-"
    assert not cache.partial_path(url_of(index_server, wheel)).exists()


def test_server_that_ignores_range_restarts_from_zero(index_server, fetcher, cache, wheel):
    index_server.script(path_of(wheel), [Fault(truncate_to=CUT), Fault(ignore_range=True)])
    path = fetch_wheel(url_of(index_server, wheel), sha256=wheel.sha256, size=wheel.size, cache=cache, fetcher=fetcher)
    assert path.read_bytes() == wheel.path.read_bytes()  # not the first CUT bytes twice
    assert gets(index_server, wheel)[1]["Range"] == f"bytes={CUT}-"
    assert index_server.bytes_sent == CUT + wheel.size


def test_wrong_bytes_raise_integrity_error_and_leave_nothing(index_server, fetcher, cache, wheel):
    promised = hashlib.sha256(b"what the index page promised").hexdigest()
    url = url_of(index_server, wheel)
    with pytest.raises(IntegrityError) as err:
        fetch_wheel(url, sha256=promised, size=None, cache=cache, fetcher=fetcher)
    msg = str(err.value)
    assert url in msg and promised in msg and wheel.sha256 in msg
    assert err.value.exit_code != 0
    assert leftovers(cache) == []


def test_wrong_bytes_after_a_resume_leave_nothing_either(index_server, fetcher, cache, wheel):
    index_server.script(path_of(wheel), [Fault(truncate_to=CUT)])
    with pytest.raises(IntegrityError):
        fetch_wheel(url_of(index_server, wheel), sha256="0" * 64, size=wheel.size, cache=cache, fetcher=fetcher)
    assert leftovers(cache) == []


def test_cached_wheel_is_reused_with_no_request(index_server, fetcher, cache, wheel):
    url = url_of(index_server, wheel)
    first = fetch_wheel(url, sha256=wheel.sha256, size=wheel.size, cache=cache, fetcher=fetcher)
    index_server.log.clear()
    again = fetch_wheel(url, sha256=wheel.sha256.upper(), size=wheel.size, cache=cache, fetcher=fetcher)
    assert again == first and index_server.log == []
    # offline works from the cache too
    assert fetch_wheel(url, sha256=wheel.sha256, size=wheel.size, cache=cache, fetcher=None, offline=True) == first


def test_damaged_cache_entry_is_replaced_not_handed_on(index_server, fetcher, cache, wheel):
    url = url_of(index_server, wheel)
    path = fetch_wheel(url, sha256=wheel.sha256, size=wheel.size, cache=cache, fetcher=fetcher)
    path.write_bytes(b"bit rot")
    index_server.log.clear()
    again = fetch_wheel(url, sha256=wheel.sha256, size=wheel.size, cache=cache, fetcher=fetcher)
    assert again.read_bytes() == wheel.path.read_bytes() and len(gets(index_server, wheel)) == 1


def test_size_mismatch_is_detected(index_server, fetcher, cache, wheel):
    url = url_of(index_server, wheel)
    with pytest.raises(IntegrityError, match=f"{wheel.size} bytes.*{wheel.size + 1}"):
        fetch_wheel(url, sha256=None, size=wheel.size + 1, cache=cache, fetcher=fetcher)
    assert leftovers(cache) == []
    with pytest.raises(IntegrityError, match=str(wheel.size - 10)):
        fetch_wheel(url, sha256=wheel.sha256, size=wheel.size - 10, cache=cache, fetcher=fetcher)
    assert leftovers(cache) == []


def test_unknown_digest_is_learnt_and_reused(index_server, fetcher, cache, wheel):
    url = url_of(index_server, wheel)
    path = fetch_wheel(url, sha256=None, size=None, cache=cache, fetcher=fetcher)
    assert path == cache.path_for(wheel.sha256, wheel.filename)
    assert cache.known_digest(url) == (wheel.sha256, wheel.size)
    index_server.log.clear()
    assert fetch_wheel(url, sha256=None, size=None, cache=cache, fetcher=fetcher) == path
    assert index_server.log == []


def test_missing_file_and_offline_miss_name_the_url(index_server, fetcher, cache):
    url = index_server.url + "whl/nope-1.0-py3-none-any.whl"
    with pytest.raises(CrawlError, match="404") as err:
        fetch_wheel(url, sha256=None, size=None, cache=cache, fetcher=fetcher)
    assert url in str(err.value)
    index_server.log.clear()
    with pytest.raises(CrawlError, match="not in the wheel cache") as err:
        fetch_wheel(url, sha256="a" * 64, size=None, cache=cache, fetcher=fetcher, offline=True)
    assert url in str(err.value) and index_server.log == []


def test_credentials_reach_the_server_but_never_the_cache(index_server, fetcher, cache, wheel):
    index_server.auth = ("alice", "s3cr3t-token")
    url = url_of(index_server, wheel).replace("http://", "http://alice:s3cr3t-token@")
    index_server.script(path_of(wheel), [Fault(truncate_to=CUT)])
    path = fetch_wheel(url, sha256=None, size=wheel.size, cache=cache, fetcher=fetcher)
    assert path.read_bytes() == wheel.path.read_bytes()
    for f in cache.root.rglob("*"):
        if f.is_file():
            assert b"s3cr3t" not in f.read_bytes() and "s3cr3t" not in str(f)


def test_progress_reports_bytes_up_to_the_total(index_server, fetcher, cache, wheel):
    seen: list[tuple[str, int, int | None]] = []
    fetch_wheel(url_of(index_server, wheel), sha256=wheel.sha256, size=None, cache=cache, fetcher=fetcher, progress=lambda *a: seen.append(a))
    assert seen[-1] == (wheel.filename, wheel.size, wheel.size)
    assert [n for _, n, _ in seen] == sorted(n for _, n, _ in seen)


def _pkg(name: str, version: str, action: Action, url: str | None, sha256: str | None = None) -> LockedPackage:
    return LockedPackage(
        name=canonicalize_name(name),
        version=Version(version),
        action=action,
        index="pytorch",
        coupling=Coupling.AGNOSTIC,
        url=url,
        filename=url.rsplit("/", 1)[-1].replace("%2B", "+") if url else None,
        sha256=sha256,
    )


def test_fill_hashes_downloads_only_unhashed_files_to_install(index_server, fetcher, cache):
    root = index_server.root / "whl"
    torch = build_wheel(root, "torch", "2.12.0.dev20260307+cu130", "cp312-cp312-manylinux_2_28_x86_64")
    triton = build_wheel(root, "triton", "3.7.0+git9c288bc5", "cp312-cp312-manylinux_2_28_x86_64")
    numpy = build_wheel(root, "numpy", "2.2.0")
    base = index_server.url + "whl/"
    plan = LockPlan(
        target=TargetSummary(python="3.12", platform="x86_64-manylinux_2_28", cuda="cu130"),
        packages=(
            _pkg("torch", "2.12.0.dev20260307+cu130", Action.KEEP, base + torch.filename.replace("+", "%2B")),
            _pkg("triton", "3.7.0+git9c288bc5", Action.INSTALL, base + triton.filename.replace("+", "%2B")),
            _pkg("numpy", "2.2.0", Action.INSTALL, base + numpy.filename, sha256=numpy.sha256),
        ),
    )
    filled = fill_hashes(plan, cache=cache, fetcher=fetcher)
    assert filled.package("triton").sha256 == triton.sha256 and filled.package("triton").size == triton.size
    assert filled.package("torch").sha256 is None  # kept: never downloaded
    assert filled.package("numpy") == plan.package("numpy")
    asked = {path for method, path, _ in index_server.log}
    assert asked == {"/whl/" + triton.filename.replace("+", "%2B")}
    assert fill_hashes(filled, cache=cache, fetcher=fetcher) == filled


def test_partial_that_already_holds_the_whole_file_is_finished_not_refetched(index_server, fetcher, cache, wheel):
    # a run that died between the last byte and the rename: the server answers 416 to bytes=<size>-
    url = url_of(index_server, wheel)
    part = cache.partial_path(url)
    part.parent.mkdir(parents=True)
    part.write_bytes(wheel.path.read_bytes())
    path = fetch_wheel(url, sha256=wheel.sha256, size=None, cache=cache, fetcher=fetcher)
    assert path.read_bytes() == wheel.path.read_bytes()
    assert [h["Range"] for h in gets(index_server, wheel)] == [f"bytes={wheel.size}-"]
    assert index_server.bytes_sent == 0 and leftovers(cache) == [path]


def test_partial_longer_than_the_file_starts_again(index_server, fetcher, cache, wheel):
    url = url_of(index_server, wheel)
    part = cache.partial_path(url)
    part.parent.mkdir(parents=True)
    part.write_bytes(wheel.path.read_bytes() + b"junk from another file")
    path = fetch_wheel(url, sha256=wheel.sha256, size=None, cache=cache, fetcher=fetcher)
    assert path.read_bytes() == wheel.path.read_bytes()
    assert ["Range" in h for h in gets(index_server, wheel)] == [True, False]


class TransportDownloader:
    """A ``Downloader`` straight over a ``Transport``: downloads need no ``HttpFetcher``."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    def open_stream(self, url: str, *, start: int = 0, if_range: str | None = None) -> StreamAnswer:
        return open_stream(self.transport, url, start=start, if_range=if_range)

    def retrying(self, url, attempt):
        return self.transport.retrying(url, attempt)


def test_a_bare_transport_downloads_and_resumes_without_an_http_fetcher(index_server, cache, wheel):
    index_server.script(path_of(wheel), [Fault(truncate_to=CUT)])
    transport = Transport(TransportSettings(timeout=10, retries=2, backoff_base=0.01))
    try:
        path = fetch_wheel(url_of(index_server, wheel), sha256=wheel.sha256, size=wheel.size, cache=cache, fetcher=TransportDownloader(transport))
    finally:
        transport.close()
    assert path.read_bytes() == wheel.path.read_bytes()
    assert [h.get("Range") for h in gets(index_server, wheel)] == [None, f"bytes={CUT}-"]
    assert transport.stats.retries == 1 and transport.stats.bytes_received == wheel.size
