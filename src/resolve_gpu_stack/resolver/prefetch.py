"""Prefetching: read the pages and METADATA the resolver will most likely ask for, before it asks.

Concurrency for a cold cache only: a guess that backtracking later proves wrong costs a request,
and errors are left for the resolver's own lookup to raise with its context.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from packaging.specifiers import SpecifierSet
from packaging.utils import NormalizedName
from packaging.version import Version

from ..errors import CrawlError, ResolveGpuStackError
from .dependencies import Dependencies
from .factory import CandidateFactory, Policy
from .requirement import Cand, Req, contains

CRAWL_THREADS = 96  # as many as HttpFetcher has connections (``TransportSettings.max_connections``)

_Seen = set[tuple[str, Version, frozenset[str]]]


class Prefetcher:
    """``on_candidate``: told each candidate the crawl follows (the framework step starts its
    wheel's scan then, ``framework.scan_early``): as soon as it is picked when its page offers a
    PEP 658 sidecar, so a native wheel's scan reads its zip's tail in the same round trip as the
    sidecar; else once its METADATA is in, read from that same tail by range (``TailMemo``), which
    the scan then starts from without a request of its own."""

    def __init__(self, factory: CandidateFactory, deps: Dependencies, policy: Policy, *, on_candidate: Callable[[Cand], None] | None = None) -> None:
        self.factory = factory
        self.finder = factory.finder
        self.deps = deps
        self.policy = policy
        self.on_candidate = on_candidate

    def closure(self, roots: Sequence[Req]) -> None:
        """For each requirement its best candidate now, then that candidate's requirements.

        With a fetcher that may be called from several threads, every requirement is followed
        as soon as its parent's METADATA is in (a crawl on ``CRAWL_THREADS`` threads), so the
        closure costs about two round trips per level of depth, not two per package and no
        waiting for the slowest of a level. Otherwise it goes level by level, each level two
        batches (``levels``).
        """
        if self.finder.fetcher.concurrent_calls:
            self.crawl(roots)
        else:
            self.levels(roots)

    def _best(self, req: Req) -> Cand | None:
        return next(self.factory.matches(req.name, [req], self.policy), None)

    def crawl(self, roots: Sequence[Req]) -> None:
        seen: _Seen = set()
        lock = threading.Lock()
        futures: list[Future[None]] = []
        asked = _Asked()
        with ThreadPoolExecutor(max_workers=CRAWL_THREADS, thread_name_prefix="closure") as pool:

            def submit(req: Req, path: _Path) -> None:
                with lock:
                    futures.append(pool.submit(visit, req, path))

            def offer(cand: Cand, path: _Path) -> None:
                """``on_candidate``, unless a requirement met so far rules ``cand`` (or a
                candidate it was reached through) out: its scan waits for a path that does not."""
                if self.on_candidate is not None and asked.offer(cand, path):
                    self.on_candidate(cand)

            def visit(req: Req, path: _Path) -> None:
                asked.add(req)
                try:
                    cand = self._best(req)
                    if cand is None:
                        return
                    with lock:
                        if (cand.name, cand.version, req.extras) in seen:
                            again = True
                        else:
                            again = False
                            seen.add((cand.name, cand.version, req.extras))
                    if again:
                        offer(cand, path)  # a scan held back on another path starts on this one
                        return
                    for dep in self._guess(cand, req.extras):
                        submit(dep, (*path, cand))
                    ahead = cand.file is not None and cand.file.has_metadata  # its scan reads a tail the METADATA's read does not
                    if ahead:
                        offer(cand, path)
                    if cand.file is not None:
                        self.finder.prefetch_metadata([cand.file])
                    deps = self.deps.of(cand, req.extras)
                    if not ahead:
                        offer(cand, path)
                except ResolveGpuStackError:
                    return  # the resolver's own lookup raises it, with its context
                for dep in deps:
                    submit(dep, (*path, cand))

            for req in roots:
                submit(req, ())
            done = 0
            while True:  # a task queues its children before it ends: all are queued once the last ends
                with lock:
                    if done == len(futures):
                        break
                    future = futures[done]
                future.result()
                done += 1

    def _guess(self, cand: Cand, extras: frozenset[str]) -> list[Req]:
        """When another wheel of this release was read (another target of the same lock), its
        requirements, to follow now while this wheel's own METADATA is read."""
        if cand.file is None:
            return []
        sibling = self.finder.release_metadata(cand.name, cand.version)
        if sibling is None or self.finder.has_metadata(cand.file):
            return []
        guessed = self.deps.requirements(cand, frozenset(), sibling.requires_dist)
        if extras:
            guessed += self.deps.requirements(cand, extras, sibling.requires_dist)
        return guessed

    def levels(self, roots: Sequence[Req], *, max_rounds: int = 16) -> None:
        seen: _Seen = set()
        asked = _Asked()
        reqs: list[tuple[Req, _Path]] = [(r, ()) for r in roots]
        for _ in range(max_rounds):
            if not reqs:
                return
            try:
                self.finder.prefetch(sorted({r.name for r, _ in reqs if not self.factory.has_offers(r.name)}), self.factory.ctx)
            except CrawlError:
                return
            for req, _ in reqs:
                asked.add(req)
            paths = {id(req): path for req, path in reqs}
            picks = self._picks([r for r, _ in reqs], seen)
            self.warm_metadata([c for c, _, _ in picks])
            reqs = []
            for cand, extras, req in picks:
                path = paths[id(req)]
                try:
                    reqs += [(dep, (*path, cand)) for dep in self.deps.of(cand, extras)]
                except CrawlError:
                    continue
                if self.on_candidate is not None and asked.offer(cand, path):
                    self.on_candidate(cand)

    def _picks(self, reqs: Sequence[Req], seen: _Seen) -> list[tuple[Cand, frozenset[str], Req]]:
        picks: list[tuple[Cand, frozenset[str], Req]] = []
        for req in reqs:
            try:
                cand = self._best(req)
            except CrawlError:
                continue
            if cand is None or (cand.name, cand.version, req.extras) in seen:
                continue
            seen.add((cand.name, cand.version, req.extras))
            picks.append((cand, req.extras, req))
        return picks

    def warm(self, names: Iterable[NormalizedName]) -> None:
        """Read the pages of ``names`` not read yet, in one round, and the best candidates' METADATA."""
        todo = [n for n in set(names) if not self.factory.has_offers(n)]
        if not todo:
            return
        try:
            self.finder.prefetch(todo, self.factory.ctx)
            tops = []
            for n in todo:
                cands = self.factory.candidates(n)
                if cands and cands[0].file is not None:
                    tops.append(cands[0])
            self.warm_metadata(tops)
        except CrawlError:
            pass  # the real lookup will raise it with full context

    def warm_metadata(self, cands: Sequence[Cand]) -> None:
        files = [c.file for c in cands if c.file is not None]
        if files:
            try:
                self.finder.prefetch_metadata(files)
            except CrawlError:
                pass


_Path = tuple[Cand, ...]  # the candidates a requirement was reached through, from a root


class _Asked:
    """The requirements the crawl met so far, by name: a candidate one of them rules out (numpy
    2.5.5 once ``numpy<2.5`` is met; a release reached only through such a candidate) is
    unlikely to be the plan's, and its scan is held back (``offer``). A scan held back starts
    when the candidate is met again on a path nothing rules out, else the plan's couplings scan
    it if the plan keeps it after all. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._specs: dict[NormalizedName, set[SpecifierSet]] = {}
        self._offered: set[tuple[NormalizedName, Version]] = set()

    def add(self, req: Req) -> None:
        with self._lock:
            self._specs.setdefault(req.name, set()).add(req.specifier)

    def offer(self, cand: Cand, path: _Path) -> bool:
        """Whether ``cand``'s scan starts now: nothing met so far rules it or its path out, and it
        was not offered before."""
        with self._lock:
            key = (cand.name, cand.version)
            if key in self._offered or any(self._ruled_out(c) for c in (*path, cand)):
                return False
            self._offered.add(key)
            return True

    def _ruled_out(self, cand: Cand) -> bool:
        return any(not contains(spec, cand.version) for spec in self._specs.get(cand.name, ()))
