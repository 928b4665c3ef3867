"""The resolvelib provider: a thin adapter over the candidate factory and the requirements.

Candidates come from ``factory`` (owning index only, target-aware, torch-safe); requirements
from ``dependencies``; it talks to a ``Finder`` (never to the network) only through them. It uses the
provider API as resolvelib (>= 1.1) intends it: typed over ``Req``, ``Cand`` and ``Key``, the
selection narrowed to the last conflict's identifiers (``narrow_requirement_selection``, as pip
does with backtrack causes), and the preference's candidate counts remembered from
``find_matches`` rather than counted again on every round.

resolvelib asks, on every round, whether each pinned candidate still satisfies each of its
requirements and what each unpinned identifier's preference is: on a closure of 200 packages
that is ~100,000 questions about the same few hundred (requirement, candidate) pairs. Both answers
are remembered per resolve, keyed by the objects' identities (the provider holds the objects, so
an identity is never reused for another while it is remembered).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import NamedTuple

from packaging.specifiers import SpecifierSet
from packaging.utils import NormalizedName
from resolvelib import AbstractProvider
from resolvelib.resolvers import Result
from resolvelib.structs import RequirementInformation

from ..model.request import TORCH
from . import rounds
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
        # (identifier, ids of the requirements it was asked with) -> how many candidates find_matches
        # gave, with the requirements held
        self._counts: dict[tuple[Key, tuple[int, ...]], tuple[int, list[Req]]] = {}
        # the same key -> its preference (when the count came from find_matches), with the infos held
        self._preferences: dict[tuple[Key, tuple[int, ...]], tuple[Preference, list[Information]]] = {}
        # identifier -> (the information list last asked with, held; its preference), until find_matches asks again
        self._last_preference: dict[Key, tuple[object, Preference]] = {}
        # (id(requirement), id(candidate)) -> satisfied; ``_held`` keeps both alive (their ids unique)
        self._satisfied: dict[tuple[int, int], bool] = {}
        self._held: list[tuple[Req, Cand]] = []

    def resolve(self, requirements: Iterable[Req], *, max_rounds: int) -> Result[Req, Cand, Key]:
        """resolvelib over this provider, its per-round question answered once per criterion and
        pin (``rounds``)."""
        return rounds.resolve(self, requirements, max_rounds=max_rounds)

    def identify(self, requirement_or_candidate: Req | Cand) -> Key:
        return requirement_or_candidate.key

    def narrow_requirement_selection(
        self,
        identifiers: Iterable[Key],
        resolutions: Mapping[Key, Cand],
        candidates: Mapping[Key, Iterator[Cand]],
        information: Mapping[Key, Iterator[Information]],
        backtrack_causes: Sequence[Information],
    ) -> Iterable[Key]:
        return backtrack_focus(identifiers, backtrack_causes)

    def get_preference(
        self,
        identifier: Key,
        resolutions: Mapping[Key, Cand],
        candidates: Mapping[Key, Iterator[Cand]],
        information: Mapping[Key, Iterable[Information]],
        backtrack_causes: Sequence[Information],
    ) -> Preference:
        return self.preference_of(identifier, information[identifier], lambda: candidates[identifier])

    def preference_of(self, identifier: Key, information: Iterable[Information], candidates: Callable[[], Iterable[Cand]]) -> Preference:
        """``get_preference`` from the identifier's criterion itself (its information, and its
        candidates, counted only when ``find_matches`` did not count them): what ``rounds`` asks,
        without the views of every criterion resolvelib's call is given."""
        last = self._last_preference.get(identifier)
        if last is not None and last[0] is information:  # the same criterion's list, asked again (~30 times a round)
            return last[1]
        infos = list(information)
        key = (identifier, tuple([id(info.requirement) for info in infos]))
        known = self._preferences.get(key)
        if known is None:
            counted = self._counts.get(key)
            if counted is None:  # not asked with exactly these requirements: count what resolvelib holds
                return Preference.of(identifier, infos, sum(1 for _ in candidates()))
            known = self._preferences[key] = (Preference.of(identifier, infos, counted[0]), infos)
        if isinstance(information, list):  # a criterion's own list (resolvelib makes a new one for new information)
            self._last_preference[identifier] = (information, known[0])
        return known[0]

    def find_matches(self, identifier: Key, requirements: Mapping[Key, Iterator[Req]], incompatibilities: Mapping[Key, Iterator[Cand]]) -> list[Cand]:
        reqs = list(requirements[identifier])
        bad = {c.version for c in incompatibilities[identifier]}
        extras = frozenset().union(*(r.extras for r in reqs)) if reqs else frozenset()
        out = [c.with_extras(extras) for c in self.factory.matches(identifier.name, reqs, self.policy, bad)]
        key = (identifier, tuple(map(id, reqs)))
        self._counts[key] = (len(out), reqs)
        self._preferences.pop(key, None)  # asked again (after a backtrack): the count may differ
        self._last_preference.pop(identifier, None)
        if out and out[0].file is not None and self.prefetcher is not None:
            self.prefetcher.warm_metadata([out[0]])
        return out

    def is_satisfied_by(self, requirement: Req, candidate: Cand) -> bool:
        key = (id(requirement), id(candidate))
        known = self._satisfied.get(key)
        if known is None:
            known = self._satisfied[key] = requirement.is_satisfied_by(candidate, self.factory.contains)
            self._held.append((requirement, candidate))
        return known

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
