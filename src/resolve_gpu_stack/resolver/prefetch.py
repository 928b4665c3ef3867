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
    the scan then starts from without a request of its own. Not told, until it is met on a path
    nothing rules out, a candidate a requirement met so far rules out (``_Asked``): the plan
    would most likely not keep it, and its scan would be wasted."""

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
                future = pool.submit(visit, req, path)  # outside the lock: it may start a thread, and wait for it to run
                with lock:
                    futures.append(future)  # before the task that submits it ends (``while`` below)

            def offer(cand: Cand, path: _Path) -> None:
                """``on_candidate``, unless a requirement met so far rules ``cand`` (or a
                candidate it was reached through) out: its scan waits for a path that does not."""
                if self.on_candidate is not None and asked.offer(cand, path):
                    self.on_candidate(cand)

            def visit(req: Req, path: _Path) -> None:
                asked.add(req, path)
                try:
                    cand = self._best(req)
                    if cand is None:
                        return
                    asked.met(cand)
                    with lock:
                        if (cand.name, cand.version, req.extras) in seen:
                            again = True
                        else:
                            again = False
                            seen.add((cand.name, cand.version, req.extras))
                    if again:
                        if self.on_candidate is not None and asked.released(cand, path):  # held back on another path, not on this one
                            self.on_candidate(cand)
                            for dep in self.deps.of(cand, req.extras):  # (read already) what it leads to, met again on this path
                                submit(dep, (*path, cand))
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
            for req, via in reqs:
                asked.add(req, via)
            paths = {id(req): path for req, path in reqs}
            picks = self._picks([r for r, _ in reqs], seen)
            self.warm_metadata([c for c, _, _ in picks])
            reqs = []
            for cand, _, _ in picks:
                asked.met(cand)
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
    """The requirements the crawl met so far, by name, each with the candidates it was reached
    through: a candidate one of them rules out (numpy 2.4.6 once ``numpy<2.4`` is met and 2.3.5
    meets every requirement; a release reached only through such a candidate) is unlikely to be
    the plan's, and its scan is held back (``offer``). A requirement of a candidate itself ruled
    out rules nothing out (cutlass-dsl 4.8.1's ``libs-base==4.8.1``, once sglang's
    ``cutlass-dsl==4.8.0`` is met), nor do requirements no release met so far satisfies together
    (sglang's ``kernels<0.15`` and a transformers' ``kernels>=0.19.1``: the resolver drops one of
    their parents, which the crawl cannot tell). A scan held back starts when the candidate is met
    again on a path nothing rules out (its own held back below it with it), else the plan's
    couplings scan it if the plan keeps it after all. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._specs: dict[NormalizedName, dict[SpecifierSet, list[Cand | None]]] = {}  # the parents each was met from (None: a root)
        self._versions: dict[NormalizedName, set[Version]] = {}  # the releases the crawl met
        self._offered: set[tuple[NormalizedName, Version]] = set()
        self._held: set[tuple[NormalizedName, Version]] = set()
        self._contains: dict[tuple[SpecifierSet, Version], bool] = {}

    def _in(self, spec: SpecifierSet, version: Version) -> bool:
        """``contains``, remembered (the same few requirements are asked about each release again and again)."""
        key = (spec, version)
        found = self._contains.get(key)
        if found is None:
            found = self._contains[key] = contains(spec, version)
        return found

    def add(self, req: Req, path: _Path) -> None:
        with self._lock:
            parents = self._specs.setdefault(req.name, {}).setdefault(req.specifier, [])
            parent = path[-1] if path else None
            if parent not in parents:
                parents.append(parent)

    def met(self, cand: Cand) -> None:
        with self._lock:
            self._versions.setdefault(cand.name, set()).add(cand.version)

    def offer(self, cand: Cand, path: _Path) -> bool:
        """Whether ``cand``'s scan starts now: nothing met so far rules it or its path out, and it
        was not offered before."""
        with self._lock:
            key = (cand.name, cand.version)
            if key in self._offered:
                return False
            if any(self._ruled_out(c) for c in (*path, cand)):
                self._held.add(key)
                return False
            self._offered.add(key)
            self._held.discard(key)
            return True

    def released(self, cand: Cand, path: _Path) -> bool:
        """Whether ``cand``, held back on an earlier path, is met now on ``path``, which nothing
        rules out: its scan starts (``offer``), and what was reached through it is to be met again."""
        with self._lock:
            if (cand.name, cand.version) not in self._held:
                return False
        return self.offer(cand, path)

    def _ruled_out(self, cand: Cand, *, deep: bool = True) -> bool:
        """Whether the requirements met rule ``cand`` out: one met from a root, or from a parent
        no requirement rules out (``deep``; the parent's own are taken as they are), while some
        release met so far meets all of those."""
        counted = [
            spec
            for spec, parents in self._specs.get(cand.name, {}).items()
            if not deep or any(p is None or not self._ruled_out(p, deep=False) for p in parents)
        ]
        if all(self._in(spec, cand.version) for spec in counted):
            return False
        return any(all(self._in(spec, v) for spec in counted) for v in self._versions.get(cand.name, ()))
