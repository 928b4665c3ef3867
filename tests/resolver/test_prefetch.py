"""The resolver reads a cold closure in a few sequential round trips (the closure's depth, not its
size, sets the wall time at a given latency), reads every index in the same round, and never
retries a page that already failed. Real HTTP on 127.0.0.1 over the story world."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from support.server import Fault, IndexServer
from support.stack_world import build_story_world, resolve_with

from resolve_gpu_stack.data.definitions import load_definitions
from resolve_gpu_stack.errors import CrawlError
from resolve_gpu_stack.index.finder import Finder
from resolve_gpu_stack.model.declared import declared_target
from resolve_gpu_stack.model.request import ResolveRequest
from resolve_gpu_stack.net.http import HttpFetcher
from resolve_gpu_stack.net.settings import FetchSettings, TransportSettings

NIGHTLY = "2.12.0.dev20260307+cu130"


class Recorder:
    """A fetcher that records each call (one call = one round of concurrent requests)."""

    def __init__(self, inner: HttpFetcher, concurrent: bool) -> None:
        self.inner = inner
        self.calls: list[tuple[str, str, int]] = []
        self.spans: list[tuple[float, float]] = []  # (start, end) of each call
        self.concurrent_calls = concurrent
        self.overlap = 0  # calls that started while another was still running
        self._running = 0
        self._lock = threading.Lock()

    def _enter(self, call: tuple[str, str, int]) -> float:
        with self._lock:
            self.calls.append(call)
            self.overlap += self._running > 0
            self._running += 1
        return time.perf_counter()

    def _leave(self, start: float) -> None:
        with self._lock:
            self._running -= 1
            self.spans.append((start, time.perf_counter()))

    def fetch_pages(self, urls, *, index):
        start = self._enter(("pages", index.name, len(urls)))
        try:
            return self.inner.fetch_pages(urls, index=index)
        finally:
            self._leave(start)

    def fetch_page_round(self, batches):  # one call per index, all in flight together
        starts = [self._enter(("pages", index.name, len(urls))) for urls, index in batches]
        try:
            return self.inner.fetch_page_round(batches)
        finally:
            for start in starts:
                self._leave(start)

    def fetch_metadata(self, files):
        start = self._enter(("metadata", "", len(files)))
        try:
            return self.inner.fetch_metadata(files)
        finally:
            self._leave(start)

    def sequential_calls(self) -> int:
        """The longest chain of calls each starting after the previous one ended: the number of
        round trips the run had to wait for one after another."""
        spans = sorted(self.spans)
        longest = [1] * len(spans)
        for j, (start, _) in enumerate(spans):
            for i in range(j):
                if spans[i][1] <= start:
                    longest[j] = max(longest[j], longest[i] + 1)
        return max(longest, default=0)

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name):  # the rest of the fetcher (its classifier, its exports reader) as it is
        return getattr(self.inner, name)


def story_request() -> ResolveRequest:
    return ResolveRequest(target=declared_target("3.12", "x86_64-manylinux_2_28", [f"torch=={NIGHTLY}"]))


@pytest.fixture
def story(tmp_path: Path):
    return build_story_world(tmp_path / "www")


def _resolve(world, *, concurrent: bool, latency: float = 0.0):
    with IndexServer(world.root, latency=latency) as srv:
        world.write(srv.url)
        defs = load_definitions().with_index_urls(world.index_urls(srv.url))
        rec = Recorder(HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None), concurrent)
        try:
            plan = resolve_with(Finder(rec, defs), defs, story_request())
        finally:
            rec.close()
        return plan, rec, srv


@pytest.mark.parametrize("concurrent", [True, False], ids=["crawl", "levels"])
def test_story1_closure_costs_round_trips_per_level_not_per_package(story, concurrent):
    # every response waits 20 ms, so a call lasts at least that: calls that did not overlap
    # were round trips the run waited for one after another
    plan, rec, srv = _resolve(story, concurrent=concurrent, latency=0.02)
    assert len(plan.packages) == 13
    fetched = sum(n for kind, _, n in rec.calls if kind == "metadata")
    assert fetched >= 12  # every wheel's METADATA was read...
    # ...in about two round trips per level of the closure (torch -> cuda-toolkit[extras] ->
    # nvidia-*; flashinfer-python -> its deps), after the first pages: not two per package
    assert rec.sequential_calls() <= 9, (rec.sequential_calls(), rec.calls)


def test_first_round_asks_every_index_at_once(story):
    _, rec, _ = _resolve(story, concurrent=True)
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
        fetcher = HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10, retries=2, backoff_base=0.01)), cache=None)
        try:
            with pytest.raises(CrawlError) as err:
                resolve_with(Finder(fetcher, defs), defs, story_request())
        finally:
            fetcher.close()
        assert "/simple/numpy/" in str(err.value) and "503" in str(err.value)
        # one attempt plus two retries: the prefetch's failure is the answer, not tried again
        assert len(srv.requests_for("/simple/numpy/")) == 3


def test_second_target_follows_a_sibling_wheels_requirements_without_waiting(tmp_path: Path):
    # numpy and its (made-up) binary dependency have one wheel per platform: for a second
    # target, numpy's requirements are known from the first target's wheel of the same release,
    # so its dependency's METADATA is read alongside numpy's, not after it
    world = build_story_world(tmp_path / "www")
    for arch in ("manylinux_2_28_x86_64", "manylinux_2_28_aarch64"):
        world.pypi("numpy", "2.2.9", tag=f"cp312-cp312-{arch}", requires=["npcore==1.0"])
        world.pypi("npcore", "1.0", tag=f"cp312-cp312-{arch}", requires=["npbase==1.0"])
        world.pypi("npbase", "1.0", tag=f"cp312-cp312-{arch}")
    with IndexServer(world.root, latency=0.05) as srv:
        world.write(srv.url)
        defs = load_definitions().with_index_urls(world.index_urls(srv.url))
        rec = Recorder(HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None), True)
        finder = Finder(rec, defs)
        try:
            first = resolve_with(finder, defs, story_request())
            rec.spans.clear()
            arm = ResolveRequest(target=declared_target("3.12", "aarch64-manylinux_2_28", [f"torch=={NIGHTLY}"]))
            second = resolve_with(finder, defs, arm)
        finally:
            rec.close()
    assert str(first.package("npbase").version) == str(second.package("npbase").version) == "1.0"
    assert second.package("npbase").filename.endswith("aarch64.whl")
    # new METADATA for the aarch64 wheels of torch, numpy, npcore, npbase (+ the jit-cache):
    # without the sibling guess that is a chain of four; with it, numpy/npcore/npbase overlap
    assert rec.sequential_calls() <= 2, rec.spans


def test_the_first_pages_are_asked_for_before_the_resolver_loads_and_read_once(story):
    # The command starts the resolve's first round (torch, the FlashInfer components, --with
    # names) on a thread of its own before it loads the resolver; the resolver's own first round
    # then asks for the same pages under the same context and waits for them: no page twice.
    from resolve_gpu_stack.resolver.roots import known_first_round

    calls: list[tuple[str, list[str], object]] = []

    class Recording(Finder):
        def prefetch(self, names, ctx):
            calls.append((threading.current_thread().name, list(names), ctx))
            super().prefetch(names, ctx)

    with IndexServer(story.root, latency=0.02) as srv:
        story.write(srv.url)
        defs = load_definitions().with_index_urls(story.index_urls(srv.url))
        request = story_request()
        known = known_first_round(request, defs)
        assert known is not None
        fetcher = HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None)
        try:
            plan = resolve_with(Recording(fetcher, defs), defs, request)
        finally:
            fetcher.close()
        asked = [path for method, path, _ in srv.log if method == "GET"]
    assert len(plan.packages) == 13
    ahead = [c for c in calls if c[0] == "first-pages"]
    assert [(names, ctx) for _, names, ctx in ahead] == [known]
    assert (known[0], known[1]) in [(names, ctx) for thread, names, ctx in calls if thread != "first-pages"]  # the resolver's own round: the same pages
    assert len(asked) == len(set(asked)), sorted(p for p in asked if asked.count(p) > 1)


def test_no_read_ahead_where_an_index_decides_the_first_pages(story):
    # a declared torch without a +cuNNN label: its CUDA comes from its METADATA, so which pages
    # come first is the resolver's to find out
    from resolve_gpu_stack.resolver.roots import known_first_round

    defs = load_definitions()
    unlabelled = ResolveRequest(target=declared_target("3.12", "x86_64-manylinux_2_28", ["torch==2.12.0.dev20260307"]))
    assert known_first_round(unlabelled, defs) is None
    assert known_first_round(story_request(), defs) is not None


class _Arrivals(list):  # type: ignore[type-arg]
    """``IndexServer.log`` that keeps when each request arrived."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []

    def append(self, item) -> None:  # type: ignore[no-untyped-def]
        self.times.append(time.monotonic())
        super().append(item)


SIDECAR_WAIT = 3.0  # seconds the server holds the native wheel's METADATA sidecar


@pytest.mark.parametrize("door", ["resolve", "lock"])
def test_a_native_wheels_scan_does_not_wait_for_its_sidecar(tmp_path: Path, capsys, door: str) -> None:  # type: ignore[no-untyped-def]
    """Issue 53: the page row says the wheel is native, so its scan (a range read of its zip's
    tail) is asked for while its PEP 658 sidecar is still being answered, not a round trip after:
    the server holds the sidecar SIDECAR_WAIT seconds and the tail's request arrives before it
    answers. The verdict is the scan's, the same as when the two are read one after the other."""
    from support.abi_doors import DECLARED
    from support.doors import index_flags, run_cli
    from support.elfbuild import synthetic_elf
    from support.wheels import build_wheel
    from support.world import _Entry

    world = build_story_world(tmp_path / "www", hostile=False)
    so = synthetic_elf(bits=64, big=False, needed=("libc.so.6",))
    wheel = build_wheel(world.root / "files", "fastext", "1.0", "cp310-abi3-manylinux_2_28_x86_64", (), files={"fastext/__init__.py": b"", "fastext/_C.so": so})
    world._add("simple/fastext/", "pypi", _Entry(wheel, "files/" + wheel.filename, sidecar=True, upload_time="2026-01-01T00:00:00Z"))
    with IndexServer(world.root) as srv:
        srv.log = _Arrivals()
        world.write(srv.url)
        srv.script(f"/files/{wheel.filename}.metadata", [Fault(delay=SIDECAR_WAIT)])
        out_args = ["-o", str(tmp_path / "pylock.toml")] if door == "lock" else ["--format", "json"]
        code, out, err = run_cli(capsys, door, *DECLARED, *index_flags(srv.url), "--with", "fastext", "--cache-dir", str(tmp_path / "cache"), *out_args)
        assert code == 0, err
        log, times = list(srv.log), srv.log.times
    asked = [(t, path, headers) for t, (_, path, headers) in zip(times, log, strict=True) if wheel.filename in path]
    sidecar = next(t for t, path, _ in asked if path.endswith(".metadata"))
    tail = next(t for t, path, headers in asked if path.endswith(".whl") and any(k.lower() == "range" for k in headers))
    assert tail < sidecar + SIDECAR_WAIT, (tail - sidecar, [p for _, p, _ in asked])
    if door == "resolve":
        plan = {p["name"]: p for p in json.loads(out)["packages"]}
        assert plan["fastext"]["coupling"] == "agnostic" and "1 shared object(s) need neither torch nor CUDA" in plan["fastext"]["reason"], plan["fastext"]
