"""The resolvelib provider: a thin adapter over the candidate factory and the requirements.

Candidates come from ``factory`` (owning index only, target-aware, torch-safe); requirements
from ``dependencies``; it talks to a ``Finder`` (never to httpx) only through them. It uses the
provider API as resolvelib (>= 1.1) intends it: typed over ``Req``, ``Cand`` and ``Key``, the
selection narrowed to the last conflict's identifiers (``narrow_requirement_selection``, as pip
does with backtrack causes), and the preference's candidate counts remembered from
``find_matches`` rather than counted again on every round.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import NamedTuple

from packaging.specifiers import SpecifierSet
from packaging.utils import NormalizedName
from resolvelib import AbstractProvider
from resolvelib.structs import RequirementInformation

from ..model.request import TORCH
from .dependencies import Dependencies
from .factory import CandidateFactory, Policy
from .prefetch import Prefetcher
from .requirement import WITH_PARENT, Cand, Key, Req

Information = RequirementInformation[Req, Cand]


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

    @classmethod
    def of(cls, identifier: Key, infos: Sequence[Information], count: int) -> Preference:
        pinned = any(info.requirement.pinned for info in infos)
        named = any(info.parent is None and info.requirement.parent == WITH_PARENT for info in infos)
        return cls(not pinned, identifier.name != TORCH, not named, count, str(identifier))


def backtrack_focus(identifiers: Iterable[Key], causes: Sequence[Information]) -> list[Key]:
    """The identifiers among ``identifiers`` that the last conflict was about (a requirement's, or
    its parent's), or all of them when none was: a resolution cannot go on while that conflict
    stands, and finding them here costs one pass instead of a check per identifier per round."""
    wanted = {info.requirement.key for info in causes} | {info.parent.key for info in causes if info.parent is not None}
    pending = list(identifiers)
    focus = [key for key in pending if key in wanted] if wanted else []
    return focus or pending


class StackProvider(AbstractProvider[Req, Cand, Key]):
    """``prefetcher``: warms the pages and METADATA the next rounds will ask for (None: nothing is
    read ahead, as in a test driving the provider over a fixed finder)."""

    def __init__(self, factory: CandidateFactory, dependencies: Dependencies, policy: Policy, prefetcher: Prefetcher | None = None) -> None:
        self.factory = factory
        self.dependencies = dependencies
        self.prefetcher = prefetcher
        self.policy = policy
        # (identifier, the requirements it was asked with) -> how many candidates find_matches gave
        self._counts: dict[tuple[Key, tuple[int, ...]], int] = {}

    def identify(self, requirement_or_candidate: Req | Cand) -> Key:
        return requirement_or_candidate.key

    def narrow_requirement_selection(self, identifiers: Iterable[Key], resolutions: Mapping[Key, Cand], candidates: Mapping[Key, Iterator[Cand]],
                                     information: Mapping[Key, Iterator[Information]], backtrack_causes: Sequence[Information]) -> Iterable[Key]:
        return backtrack_focus(identifiers, backtrack_causes)

    def get_preference(self, identifier: Key, resolutions: Mapping[Key, Cand], candidates: Mapping[Key, Iterator[Cand]],
                       information: Mapping[Key, Iterable[Information]], backtrack_causes: Sequence[Information]) -> Preference:
        infos = list(information[identifier])
        count = self._counts.get((identifier, tuple(id(info.requirement) for info in infos)))
        if count is None:  # not asked with exactly these requirements: count what resolvelib holds
            count = sum(1 for _ in candidates[identifier])
        return Preference.of(identifier, infos, count)

    def find_matches(self, identifier: Key, requirements: Mapping[Key, Iterator[Req]], incompatibilities: Mapping[Key, Iterator[Cand]]) -> list[Cand]:
        reqs = list(requirements[identifier])
        bad = {c.version for c in incompatibilities[identifier]}
        extras = frozenset().union(*(r.extras for r in reqs)) if reqs else frozenset()
        out = [c.with_extras(extras) for c in self.factory.matches(identifier.name, reqs, self.policy, bad)]
        self._counts[(identifier, tuple(map(id, reqs)))] = len(out)
        if out and out[0].file is not None and self.prefetcher is not None:
            self.prefetcher.warm_metadata([out[0]])
        return out

    def is_satisfied_by(self, requirement: Req, candidate: Cand) -> bool:
        return requirement.is_satisfied_by(candidate, self.factory.contains)

    def get_dependencies(self, candidate: Cand) -> list[Req]:
        if candidate.extras:
            base = Req(name=candidate.name, specifier=SpecifierSet(f"=={candidate.version}"), parent=str(candidate))
            deps = [base, *self.dependencies.of_extras(candidate, candidate.extras)]
            self._warm([d.name for d in deps[1:]])
            return deps
        deps = self.dependencies.of(candidate)
        self._warm([d.name for d in deps])
        return deps

    def _warm(self, names: list[NormalizedName]) -> None:
        if self.prefetcher is not None:
            self.prefetcher.warm(names)
