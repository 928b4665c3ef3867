"""The resolvelib provider: a thin adapter over the candidate factory and the requirements.

Candidates come from ``factory`` (owning index only, target-aware, torch-safe); requirements
from ``dependencies``; it talks to a ``Finder`` (never to httpx) only through them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from packaging.specifiers import SpecifierSet
from resolvelib import AbstractProvider

from ..model.request import TORCH
from .dependencies import Dependencies
from .factory import CandidateFactory, Policy
from .prefetch import Prefetcher
from .requirement import WITH_PARENT, Cand, Key, Req


class Preference(NamedTuple):
    """The order in which resolvelib settles identifiers (smallest first).

    Exact pins first (nothing to choose), then torch (the anchor every torch-bound package
    follows), then what the user named with ``--with`` (a serving framework is settled before
    the packages it pins, so its newest release pins them, rather than a FlashInfer chosen first
    walking the framework back to an old release), then the identifier with the fewest
    candidates left (the most constrained: a conflict shows early, before much was decided on top
    of it), then the name (deterministic).
    """

    not_pinned: bool
    not_torch: bool
    not_named_by_user: bool
    candidate_count: int
    name: str


class StackProvider(AbstractProvider):  # type: ignore[type-arg,unused-ignore]
    def __init__(self, factory: CandidateFactory, dependencies: Dependencies, prefetcher: Prefetcher, policy: Policy) -> None:
        self.factory = factory
        self.dependencies = dependencies
        self.prefetcher = prefetcher
        self.policy = policy

    def identify(self, requirement_or_candidate: Req | Cand) -> Key:
        return requirement_or_candidate.key

    def get_preference(self, identifier: Key, resolutions: Mapping[Key, Cand], candidates: Mapping[Key, Iterator[Cand]], information: Mapping[Key, Iterator[Any]], backtrack_causes: Sequence[Any]) -> Preference:
        infos = list(information[identifier])
        pinned = any(info.requirement.pinned for info in infos)
        named = any(info.parent is None and info.requirement.parent == WITH_PARENT for info in infos)
        count = sum(1 for _ in candidates[identifier])
        return Preference(not pinned, identifier.name != TORCH, not named, count, str(identifier))

    def find_matches(self, identifier: Key, requirements: Mapping[Key, Iterator[Req]], incompatibilities: Mapping[Key, Iterator[Cand]]) -> list[Cand]:
        reqs = list(requirements[identifier])
        bad = {c.version for c in incompatibilities[identifier]}
        extras = frozenset().union(*(r.extras for r in reqs)) if reqs else frozenset()
        out = [c.with_extras(extras) for c in self.factory.matches(identifier.name, reqs, self.policy, bad)]
        if out and out[0].file is not None:
            self.prefetcher.warm_metadata([out[0]])
        return out

    def is_satisfied_by(self, requirement: Req, candidate: Cand) -> bool:
        return requirement.is_satisfied_by(candidate, self.factory.contains)

    def get_dependencies(self, candidate: Cand) -> list[Req]:
        if candidate.extras:
            base = Req(name=candidate.name, specifier=SpecifierSet(f"=={candidate.version}"), parent=str(candidate))
            deps = [base, *self.dependencies.of_extras(candidate, candidate.extras)]
            self.prefetcher.warm([d.name for d in deps[1:]])
            return deps
        deps = self.dependencies.of(candidate)
        self.prefetcher.warm([d.name for d in deps])
        return deps
