"""A warm resolve reuses the plan a cold one stored, only when nothing it came from changed.
Real HTTP on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.server import IndexServer
from support.stack_world import build_story_world, resolve_with

from resolve_gpu_stack.data.definitions import load_definitions
from resolve_gpu_stack.index.finder import Finder
from resolve_gpu_stack.model.codec import plan_from_dict, plan_to_dict
from resolve_gpu_stack.model.declared import declared_target
from resolve_gpu_stack.model.request import ResolveRequest
from resolve_gpu_stack.net.cache import HttpCache
from resolve_gpu_stack.net.http import HttpFetcher
from resolve_gpu_stack.net.settings import FetchSettings, TransportSettings
from resolve_gpu_stack.resolver import reuse as resultcache

NIGHTLY = "2.12.0.dev20260307+cu130"


def request(**kw) -> ResolveRequest:
    return ResolveRequest.build(target=declared_target("3.12", "x86_64-manylinux_2_28", [f"torch=={NIGHTLY}"]), **kw)


class Runner:
    def __init__(self, world, srv: IndexServer, cache: Path, urls: dict[str, str] | None = None) -> None:
        self.world, self.srv, self.cache = world, srv, cache
        self.defs = load_definitions().with_index_urls(urls or world.index_urls(srv.url))

    def __call__(self, req: ResolveRequest | None = None):
        mark = len(self.srv.log)
        fetcher = HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=HttpCache(self.cache))
        try:
            plan = resolve_with(Finder(fetcher, self.defs), self.defs, req or request(), store=fetcher.cache)
        finally:
            fetcher.close()
        return plan, self.srv.log[mark:]


@pytest.fixture
def story(tmp_path: Path):
    world = build_story_world(tmp_path / "www")
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        yield Runner(world, srv, tmp_path / "cache")


def page_requests(log):
    return [entry for entry in log if entry[1].endswith("/")]


def test_warm_resolve_reuses_the_plan_after_conditional_requests_only(story):
    cold, cold_log = story()
    warm, warm_log = story()
    assert warm == cold
    # every page the cold run read was asked again, conditionally; no METADATA was fetched
    assert {e[1] for e in page_requests(warm_log)} == {e[1] for e in page_requests(cold_log)}
    assert all("If-None-Match" in h for _, path, h in page_requests(warm_log) if path not in _missing(story, cold_log))
    assert not [e for e in warm_log if not e[1].endswith("/")]
    assert len(list((story.cache / "results-v1").rglob("*"))) >= 1


def _results(story) -> list:
    """The stored plans: the files of ``results-v1``."""
    return [p for p in (story.cache / "results-v1").rglob("*") if p.is_file()]


def _missing(story, log):
    return {path for _, path, _ in log if not (story.world.root / path.lstrip("/")).exists()}


def test_a_changed_page_means_a_full_resolve(story):
    cold, _ = story()
    assert cold.package("numpy").version.public == "2.2.0"
    story.world.pypi("numpy", "2.2.1")  # a new release: the numpy page changes
    story.world.write(story.srv.url)
    warm, log = story()
    assert str(warm.package("numpy").version) == "2.2.1"
    assert any(path == "/files/numpy-2.2.1-py3-none-any.whl" for _, path, _ in log)  # its METADATA, read


def test_other_inputs_are_another_entry(story):
    story()
    plan, _ = story(request(with_=("torchvision",)))
    assert plan.package("torchvision") is not None
    plan, _ = story(request(flashinfer="0.6.4"))
    assert str(plan.package("flashinfer-python").version) == "0.6.4"
    assert len(_results(story)) == 3


def test_a_damaged_entry_is_a_miss(story, caplog):
    cold, _ = story()
    [entry] = _results(story)
    entry.write_bytes(entry.read_bytes()[:-20] + b"x" * 20)
    warm, _ = story()
    assert warm == cold  # resolved in full, and stored again
    assert "is corrupt" in caplog.text
    key = entry.name
    assert HttpCache(story.cache).get_result(resultcache.result_key(request(), story.defs)) is not None
    assert [p.name for p in _results(story)] == [key]


def test_plan_record_round_trip(story):
    plan, _ = story(request(with_=("torchvision",)))
    assert plan_from_dict(json.loads(json.dumps(plan_to_dict(plan)))) == plan


def test_the_entry_holds_no_credentials(tmp_path: Path):
    world = build_story_world(tmp_path / "www")
    with IndexServer(world.root) as srv:
        srv.auth = ("alice", "s3cr3t-token")
        world.write(srv.url)
        host = srv.url.split("//", 1)[1]
        urls = {name: url.replace(host, f"alice:s3cr3t-token@{host}") for name, url in world.index_urls(srv.url).items()}
        run = Runner(world, srv, tmp_path / "cache", urls)
        cold, _ = run()
        warm, log = run()
        assert warm == cold and log
    for path in (tmp_path / "cache").rglob("*"):
        if path.is_file():
            assert b"s3cr3t-token" not in path.read_bytes(), path


def test_a_page_that_now_fails_is_the_full_resolve_error(story):
    from support.server import Fault

    from resolve_gpu_stack.errors import CrawlError

    story()
    story.srv.script("/simple/numpy/", [Fault(status=503)] * 30)
    fetcher = HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10, retries=1, backoff_base=0.01)), cache=HttpCache(story.cache))
    try:
        with pytest.raises(CrawlError) as err:
            resolve_with(Finder(fetcher, story.defs), story.defs, request(), store=fetcher.cache)
    finally:
        fetcher.close()
    assert "/simple/numpy/" in str(err.value) and "503" in str(err.value)
    assert len(story.srv.requests_for("/simple/numpy/")) == 1 + 2  # the cold run's, then 2 attempts once
