"""The resolver reads a cold closure in a few rounds of concurrent requests (latency, not package
count, sets its wall time), reads every index in the same round, and never retries a page that
already failed. Real HTTP on 127.0.0.1 over the story world."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from resolve_gpu_stack.errors import CrawlError
from resolve_gpu_stack.finder import Finder
from resolve_gpu_stack.http import HttpFetcher
from resolve_gpu_stack.indexes import load_definitions
from resolve_gpu_stack.resolve import ResolveRequest, resolve
from resolve_gpu_stack.target import declared_target

from server import Fault, IndexServer
from stack_world import build_story_world

NIGHTLY = "2.12.0.dev20260307+cu130"


class Recorder:
    """A fetcher that records each call (one call = one round of concurrent requests)."""

    def __init__(self, inner: HttpFetcher, concurrent: bool) -> None:
        self.inner = inner
        self.calls: list[tuple[str, str, int]] = []
        self.concurrent_calls = concurrent
        self.overlap = 0  # calls that started while another was still running
        self._running = 0
        self._lock = threading.Lock()

    def _enter(self, call: tuple[str, str, int]) -> None:
        with self._lock:
            self.calls.append(call)
            self.overlap += self._running > 0
            self._running += 1

    def _leave(self) -> None:
        with self._lock:
            self._running -= 1

    def fetch_pages(self, urls, *, index):
        self._enter(("pages", index.name, len(urls)))
        try:
            return self.inner.fetch_pages(urls, index=index)
        finally:
            self._leave()

    def fetch_metadata(self, files):
        self._enter(("metadata", "", len(files)))
        try:
            return self.inner.fetch_metadata(files)
        finally:
            self._leave()

    def close(self) -> None:
        self.inner.close()


def story_request() -> ResolveRequest:
    return ResolveRequest(target=declared_target("3.12", "x86_64-manylinux_2_28", [f"torch=={NIGHTLY}"]))


@pytest.fixture
def story(tmp_path: Path):
    return build_story_world(tmp_path / "www")


def _resolve(world, *, concurrent: bool, **fetcher_kw):
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        defs = load_definitions().with_index_urls(world.index_urls(srv.url))
        rec = Recorder(HttpFetcher(cache=None, timeout=10, **fetcher_kw), concurrent)
        try:
            plan = resolve(story_request(), Finder(rec, defs), defs)
        finally:
            rec.close()
        return plan, rec, srv


def test_story1_closure_is_read_in_a_few_rounds(story):
    plan, rec, srv = _resolve(story, concurrent=True)
    metadata_rounds = [c for c in rec.calls if c[0] == "metadata"]
    page_rounds = [c for c in rec.calls if c[0] == "pages"]
    # 13 packages; one round per dependency level, not one per package
    assert len(plan.packages) == 13
    assert len(metadata_rounds) <= 4, rec.calls
    assert len(page_rounds) <= 8, rec.calls
    assert sum(n for _, _, n in metadata_rounds) >= 12  # every wheel's METADATA, batched
    # the first round asks the PyTorch, PyPI and FlashInfer indexes at once
    assert {c[1] for c in rec.calls[:3]} == {"pytorch", "pypi", "flashinfer"}
    assert rec.overlap >= 1


def test_prefetching_does_not_change_the_plan(story):
    fast, _, _ = _resolve(story, concurrent=True)
    serial, rec, _ = _resolve(story, concurrent=False)
    def summary(plan):  # the two servers listen on different ports: compare all but URLs
        return [(p.name, str(p.version), p.filename, p.index, p.action, p.sha256) for p in plan.packages]

    assert summary(fast) == summary(serial)
    assert len(fast.notes) == len(serial.notes)
    assert rec.overlap == 0  # a fetcher without concurrent_calls is only called from one thread


def test_a_page_that_fails_is_not_asked_again(story):
    with IndexServer(story.root) as srv:
        story.write(srv.url)
        srv.script("/simple/numpy/", [Fault(status=503)] * 20)
        defs = load_definitions().with_index_urls(story.index_urls(srv.url))
        fetcher = HttpFetcher(cache=None, timeout=10, retries=2, backoff_base=0.01)
        try:
            with pytest.raises(CrawlError) as err:
                resolve(story_request(), Finder(fetcher, defs), defs)
        finally:
            fetcher.close()
        assert "/simple/numpy/" in str(err.value) and "503" in str(err.value)
        # one attempt plus two retries: the prefetch's failure is the answer, not tried again
        assert len(srv.requests_for("/simple/numpy/")) == 3
