"""The resolvelib provider: candidates from the owning index only, target-aware, torch-safe.

It talks to a ``Finder`` (never to httpx). Policy comes from ``policy`` and ``indexes`` data.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from packaging.markers import Marker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version
from resolvelib import AbstractProvider

from ..data.definitions import Definitions, RouteContext
from ..errors import CrawlError, ResolveGpuStackError
from ..index.finder import Finder, Offer
from ..model import Coupling, IndexFile, Target
from .policy import (
    Rejection,
    fits_target,
    jit_cache_version,
    tag_rank,
    torch_abi_mismatch,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Req:
    """A requirement on one identifier (``name`` or ``name[extras]``)."""

    name: NormalizedName
    specifier: SpecifierSet
    extras: frozenset[str] = frozenset()
    parent: str | None = None  # "flashinfer-python 0.6.5", "(requested)", ...
    text: str = ""

    @property
    def key(self) -> str:
        return identifier(self.name, self.extras)

    def __str__(self) -> str:
        return self.text or f"{self.key}{self.specifier}"


@dataclass(frozen=True, slots=True)
class Cand:
    """One version of one package: a wheel on its owning index, or what is already installed."""

    name: NormalizedName
    version: Version
    file: IndexFile | None  # None: the installed distribution, nothing to download
    extras: frozenset[str] = frozenset()
    installed: bool = False  # this exact version is installed on the target

    @property
    def key(self) -> str:
        return identifier(self.name, self.extras)

    def __str__(self) -> str:
        return f"{self.key} {self.version}"


def identifier(name: str, extras: frozenset[str]) -> str:
    return f"{name}[{','.join(sorted(extras))}]" if extras else name


class Preference(NamedTuple):
    """Resolve pinned things first, then the most constrained; the name last keeps it deterministic."""

    not_pinned: bool
    not_torch: bool
    candidate_count: int
    name: str


@dataclass(kw_only=True)
class Policy:
    """What the resolver inputs allow, beyond plain PEP 440 ranges."""

    ctx: RouteContext
    prerelease_packages: frozenset[str] = frozenset()  # may pick pre-releases without an explicit spec
    torch_candidates: tuple[Version, ...] | None = None  # pre-filtered torch versions (never downgrade)
    newest_first: frozenset[str] = frozenset({"torch"})  # ignore "keep installed" preference for these
    flashinfer_versions: Mapping[Version, str | None] | None = None  # allowed python versions -> jit-cache label
    flashinfer_components: tuple[str, ...] = ()
    installed_requires: Mapping[NormalizedName, tuple[str, ...]] = field(default_factory=dict)


class StackProvider(AbstractProvider):  # type: ignore[type-arg]
    def __init__(self, finder: Finder, defs: Definitions, target: Target, policy: Policy) -> None:
        self.finder = finder
        self.defs = defs
        self.target = target
        self.policy = policy
        self.rejections: dict[NormalizedName, list[tuple[IndexFile, Rejection]]] = {}
        self.visits: dict[NormalizedName, list] = {}
        self._offers: dict[NormalizedName, list[Offer]] = {}
        self._candidates: dict[NormalizedName, list[Cand]] = {}
        self._locks: dict[NormalizedName, threading.RLock] = {}  # per name, for the crawl's threads
        self._contains_memo: dict[tuple[int, int], tuple[SpecifierSet, Version, bool]] = {}
        self._locks_lock = threading.Lock()

    # -- resolvelib hooks --------------------------------------------------------------------
    def identify(self, requirement_or_candidate: Req | Cand) -> str:
        return requirement_or_candidate.key

    def get_preference(self, identifier: str, resolutions: Mapping[str, Cand], candidates: Mapping[str, Iterator[Cand]], information: Mapping[str, Iterator[Any]], backtrack_causes: Sequence[Any]) -> Preference:
        infos = list(information[identifier])
        pinned = any(
            any(s.operator in ("==", "===") and "*" not in s.version for s in info.requirement.specifier)
            for info in infos
        )
        name = identifier.split("[", 1)[0]
        return Preference(not pinned, name != "torch", 0, identifier)

    def find_matches(self, identifier: str, requirements: Mapping[str, Iterator[Req]], incompatibilities: Mapping[str, Iterator[Cand]]) -> list[Cand]:
        reqs = list(requirements[identifier])
        bad = {c.version for c in incompatibilities[identifier]}
        name = canonicalize_name(identifier.split("[", 1)[0])
        extras = frozenset().union(*(r.extras for r in reqs)) if reqs else frozenset()
        out = [
            Cand(name=c.name, version=c.version, file=c.file, extras=extras, installed=c.installed)
            for c in self._matching(name, reqs, bad)
        ]
        if out and out[0].file is not None:
            self._warm_metadata([out[0]])
        return out

    def _matching(self, name: NormalizedName, reqs: Sequence[Req], bad: Iterable[Version] = ()) -> Iterator[Cand]:
        """The candidates of ``name`` that every one of ``reqs`` allows, best first."""
        bad = set(bad)
        pre_ok = self._prerelease_ok(name) or any(r.specifier.prereleases for r in reqs)
        allowed = self.policy.flashinfer_versions if name == self.defs.flashinfer.python else None
        return (
            c
            for c in self.candidates(name)
            if c.version not in bad
            and (allowed is None or c.version in allowed)
            and (pre_ok or not c.version.is_prerelease or c.installed)
            and all(self._allows(r, c) for r in reqs)
        )

    def is_satisfied_by(self, requirement: Req, candidate: Cand) -> bool:
        return self._allows(requirement, candidate)

    def get_dependencies(self, candidate: Cand) -> list[Req]:
        if candidate.extras:
            base = Req(name=candidate.name, specifier=SpecifierSet(f"=={candidate.version}"), parent=str(candidate))
            extra_deps = self._requirements(candidate, candidate.extras)
            self._warm([d.name for d in extra_deps])
            return [base, *extra_deps]
        deps = self._requirements(candidate, frozenset())
        deps += self._coupled(candidate)
        self._warm([d.name for d in deps])
        return deps

    # -- candidates --------------------------------------------------------------------------
    def offers(self, name: NormalizedName) -> list[Offer]:
        if name not in self._offers:
            with self._lock_for(name):
                if name not in self._offers:
                    offers, visits = self.finder.offers(name, self.policy.ctx)
                    self.visits[name] = visits
                    self._offers[name] = offers
        return self._offers[name]

    def candidates(self, name: NormalizedName) -> list[Cand]:
        """Every usable version of ``name``, best first: one wheel per version (best tag).

        Pre-releases are included here; ``find_matches`` drops them unless asked for.
        """
        if name not in self._candidates:
            with self._lock_for(name):  # computed once, even when the crawl's threads race
                if name not in self._candidates:
                    self._candidates[name] = self._compute_candidates(name)
        return self._candidates[name]

    def _lock_for(self, name: NormalizedName) -> threading.RLock:
        with self._locks_lock:
            return self._locks.setdefault(name, threading.RLock())

    def _compute_candidates(self, name: NormalizedName) -> list[Cand]:
        best: dict[Version, tuple[int, IndexFile]] = {}
        rejected: list[tuple[IndexFile, Rejection]] = []
        torch_version = self._torch_version()
        for offer in self.offers(name):
            f = offer.file
            why = fits_target(f, self.target)
            if why is None:
                coupling, reason = self.defs.coupling(name, f.version)
                why = torch_abi_mismatch(coupling, reason, f.version, torch_version)
            if why is not None:
                rejected.append((f, why))
                continue
            rank = tag_rank(f, self.target) or 0
            if f.version not in best or rank < best[f.version][0]:
                best[f.version] = (rank, f)
        self.rejections[name] = rejected
        versions = sorted(best, reverse=True)
        if name == "torch" and self.policy.torch_candidates is not None:
            allowed = set(self.policy.torch_candidates)
            versions = [v for v in versions if v in allowed]
        installed = self.target.installed.get(name)
        cands = [Cand(name=name, version=v, file=best[v][1], installed=(v == installed)) for v in versions]
        if installed is not None and name not in self.policy.newest_first:
            cands.sort(key=lambda c: not c.installed)  # keep what is installed when it satisfies
            if not any(c.installed for c in cands) and name in self.policy.installed_requires:
                cands.insert(0, Cand(name=name, version=installed, file=None, installed=True))
        elif installed is not None and not any(c.installed for c in cands) and name == "torch" and installed in (self.policy.torch_candidates or ()):
            cands.append(Cand(name=name, version=installed, file=None, installed=True))
            cands.sort(key=lambda c: c.version, reverse=True)
        return cands

    def _prerelease_ok(self, name: str) -> bool:
        return name in self.policy.prerelease_packages

    def _allows(self, req: Req, cand: Cand) -> bool:
        if req.name != cand.name:
            return False
        if not self._contains(req.specifier, cand.version):
            return False
        if cand.file is not None and cand.file.is_yanked:
            return any(s.operator in ("==", "===") for s in req.specifier)
        return True

    def _contains(self, spec: SpecifierSet, version: Version) -> bool:
        """``spec.contains(version, prereleases=True)``, once per (specifier, version) object
        pair: resolvelib asks again for every pinned requirement on every round."""
        if not spec:
            return True
        key = (id(spec), id(version))
        hit = self._contains_memo.get(key)
        if hit is not None and hit[0] is spec and hit[1] is version:
            return hit[2]
        ok = spec.contains(version, prereleases=True)
        self._contains_memo[key] = (spec, version, ok)  # holding both keeps their ids unique
        return ok

    def _torch_version(self) -> Version | None:
        if self.policy.torch_candidates:
            return max(self.policy.torch_candidates)
        return self.target.installed.get(NormalizedName("torch"))

    # -- dependencies ------------------------------------------------------------------------
    def _requirements(self, cand: Cand, extras: frozenset[str], lines: Sequence[str] | None = None) -> list[Req]:
        if lines is None:
            lines = self._requires_dist(cand)
        out: list[Req] = []
        for line in lines:
            try:
                req = Requirement(line)
            except InvalidRequirement:
                log.warning("%s: ignoring unparsable requirement %r", cand, line)
                continue
            if req.url:
                log.warning("%s: ignoring direct-URL requirement %r", cand, line)
                continue
            if not self._marker_ok(req.marker, extras):
                continue
            out.append(
                Req(
                    name=canonicalize_name(req.name),
                    specifier=req.specifier,
                    extras=frozenset(canonicalize_name(e) for e in req.extras),
                    parent=f"{cand.name} {cand.version}",
                    text=str(req).split(";", 1)[0].strip(),
                )
            )
        return out

    def _requires_dist(self, cand: Cand) -> tuple[str, ...]:
        if cand.file is None:
            return tuple(self.policy.installed_requires.get(cand.name, ()))
        return self.finder.metadata(cand.file).requires_dist

    def _marker_ok(self, marker: Marker | None, extras: frozenset[str]) -> bool:
        if marker is None:
            return not extras
        envs = [dict(self.target.markers, extra=e) for e in sorted(extras)] if extras else [dict(self.target.markers, extra="")]
        for env in envs:
            try:
                if marker.evaluate(env):
                    return True
            except (UndefinedComparison, UndefinedEnvironmentName):
                continue
        return False

    def _coupled(self, cand: Cand) -> list[Req]:
        """The FlashInfer alignment, added as requirements: cubin == python; jit-cache == V+label."""
        fi = self.defs.flashinfer
        if cand.name != fi.python or self.policy.flashinfer_versions is None:
            return []
        parent = f"{cand.name} {cand.version} (FlashInfer alignment)"
        out = []
        if fi.cubin in self.policy.flashinfer_components:
            out.append(Req(name=fi.cubin, specifier=SpecifierSet(f"=={cand.version}"), parent=parent, text=f"{fi.cubin}=={cand.version}"))
        label = self.policy.flashinfer_versions.get(cand.version)
        if fi.jit_cache in self.policy.flashinfer_components and label:
            v = jit_cache_version(cand.version, label)
            out.append(Req(name=fi.jit_cache, specifier=SpecifierSet(f"=={v}"), parent=parent, text=f"{fi.jit_cache}=={v}"))
        return out

    # -- prefetching (concurrency for a cold cache) --------------------------------------------
    CRAWL_THREADS = 32  # as many as HttpFetcher has connections

    def prefetch_closure(self, roots: Sequence[Req]) -> None:
        """Read the pages and METADATA the resolver will most likely ask for, before it asks:
        for each requirement its best candidate now, then that candidate's requirements.

        With a fetcher that may be called from several threads, every requirement is followed
        as soon as its parent's METADATA is in (a crawl on ``CRAWL_THREADS`` threads), so the
        closure costs about two round trips per level of depth, not two per package and no
        waiting for the slowest of a level. Otherwise it goes level by level, each level two
        batches (``_prefetch_levels``). A guess that backtracking later proves wrong only costs a
        request; errors are left for the real lookup to raise with its context.
        """
        if self.finder.fetcher.concurrent_calls:
            self._crawl(roots)
        else:
            self._prefetch_levels(roots)

    def _crawl(self, roots: Sequence[Req]) -> None:
        seen: set[tuple[str, Version, frozenset[str]]] = set()
        lock = threading.Lock()
        futures: list[Future[None]] = []
        with ThreadPoolExecutor(max_workers=self.CRAWL_THREADS, thread_name_prefix="closure") as pool:

            def submit(req: Req) -> None:
                with lock:
                    futures.append(pool.submit(visit, req))

            def visit(req: Req) -> None:
                try:
                    cand = next(self._matching(req.name, [req]), None)
                    if cand is None:
                        return
                    with lock:
                        if (cand.name, cand.version, req.extras) in seen:
                            return
                        seen.add((cand.name, cand.version, req.extras))
                    if cand.file is not None:
                        sibling = self.finder.release_metadata(cand.name, cand.version)
                        if sibling is not None and not self.finder.has_metadata(cand.file):
                            # Another wheel of this release was read (another target of the same
                            # lock): follow its requirements now, while this wheel's own are read.
                            guessed = self._requirements(cand, frozenset(), sibling.requires_dist)
                            if req.extras:
                                guessed += self._requirements(cand, req.extras, sibling.requires_dist)
                            for dep in guessed:
                                submit(dep)
                        self.finder.prefetch_metadata([cand.file])
                    deps = self._requirements(cand, frozenset()) + self._coupled(cand)
                    if req.extras:
                        deps += self._requirements(cand, req.extras)
                except ResolveGpuStackError:
                    return  # the resolver's own lookup raises it, with its context
                for dep in deps:
                    submit(dep)

            for req in roots:
                submit(req)
            done = 0
            while True:  # a task queues its children before it ends: all are queued once the last ends
                with lock:
                    if done == len(futures):
                        break
                    future = futures[done]
                future.result()
                done += 1

    def _prefetch_levels(self, roots: Sequence[Req], *, max_rounds: int = 16) -> None:
        seen: set[tuple[str, Version, frozenset[str]]] = set()
        reqs = list(roots)
        for _ in range(max_rounds):
            if not reqs:
                return
            try:
                self.finder.prefetch(sorted({r.name for r in reqs if r.name not in self._offers}), self.policy.ctx)
            except CrawlError:
                return
            picks: list[tuple[Cand, frozenset[str]]] = []
            for req in reqs:
                try:
                    cand = next(self._matching(req.name, [req]), None)
                except CrawlError:
                    continue
                if cand is None or (cand.name, cand.version, req.extras) in seen:
                    continue
                seen.add((cand.name, cand.version, req.extras))
                picks.append((cand, req.extras))
            self._warm_metadata([c for c, _ in picks])
            reqs = []
            for cand, extras in picks:
                try:
                    reqs += self._requirements(cand, frozenset()) + self._coupled(cand)
                    if extras:
                        reqs += self._requirements(cand, extras)
                except CrawlError:
                    continue

    def _warm(self, names: Iterable[NormalizedName]) -> None:
        todo = [n for n in set(names) if n not in self._offers]
        if not todo:
            return
        try:
            self.finder.prefetch(todo, self.policy.ctx)
            tops = []
            for n in todo:
                cands = self.candidates(n)
                if cands and cands[0].file is not None:
                    tops.append(cands[0])
            self._warm_metadata(tops)
        except CrawlError:
            pass  # the real lookup will raise it with full context

    def _warm_metadata(self, cands: Sequence[Cand]) -> None:
        files = [c.file for c in cands if c.file is not None]
        if files:
            try:
                self.finder.prefetch_metadata(files)
            except CrawlError:
                pass

    def coupling_of(self, name: NormalizedName, version: Version) -> tuple[Coupling, str]:
        return self.defs.coupling(name, version)
