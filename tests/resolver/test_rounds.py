"""``resolver/rounds.py`` answers resolvelib's per-round questions once (the pin question per
(criterion, pin), the views ``get_preference`` is given per state): the resolution, and every
question the provider is asked, are exactly those of resolvelib's own ``Resolver``, backtracking
included. Real resolvelib on both sides, over a small graph whose first choices conflict."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import pytest
from resolvelib import AbstractProvider, BaseReporter, Resolver

from resolve_gpu_stack.resolver import rounds

# name -> version -> its requirements (name, allowed versions); newest first is tried first
GRAPH: dict[str, dict[int, list[tuple[str, frozenset[int]]]]] = {
    "app": {1: [("a", frozenset({1, 2, 3})), ("b", frozenset({1, 2, 3}))]},
    "a": {3: [("c", frozenset({3}))], 2: [("c", frozenset({2})), ("d", frozenset({1, 2}))], 1: [("c", frozenset({1}))]},
    "b": {3: [("c", frozenset({1}))], 2: [("c", frozenset({2})), ("d", frozenset({2}))], 1: [("c", frozenset({1, 2}))]},
    "c": {3: [], 2: [("d", frozenset({1, 2}))], 1: []},
    "d": {2: [], 1: []},
}

Req = tuple[str, frozenset[int]]
Cand = tuple[str, int]


class GraphProvider(AbstractProvider[Req, Cand, str]):
    """A provider over ``GRAPH`` that writes down every question it is asked, with what it was shown."""

    def __init__(self) -> None:
        self.asked: list[Any] = []

    def identify(self, requirement_or_candidate: Req | Cand) -> str:
        return requirement_or_candidate[0]

    def get_preference(
        self,
        identifier: str,
        resolutions: Mapping[str, Cand],
        candidates: Mapping[str, Iterator[Cand]],
        information: Mapping[str, Iterator[Any]],
        backtrack_causes: Sequence[Any],
    ) -> Any:
        count = sum(1 for _ in candidates[identifier])
        infos = sorted((sorted(i.requirement[1]), i.parent) for i in information[identifier])
        self.asked.append(("preference", identifier, dict(resolutions), count, infos, len(backtrack_causes), sorted(candidates), sorted(information)))
        return (count, identifier)

    def find_matches(self, identifier: str, requirements: Mapping[str, Iterator[Req]], incompatibilities: Mapping[str, Iterator[Cand]]) -> Iterable[Cand]:
        reqs = list(requirements[identifier])
        bad = set(incompatibilities[identifier])
        out = [(identifier, v) for v in sorted(GRAPH[identifier], reverse=True) if all(v in r[1] for r in reqs) and (identifier, v) not in bad]
        self.asked.append(("matches", identifier, out))
        return out

    def is_satisfied_by(self, requirement: Req, candidate: Cand) -> bool:
        return candidate[1] in requirement[1]

    def get_dependencies(self, candidate: Cand) -> Iterable[Req]:
        return list(GRAPH[candidate[0]][candidate[1]])


def resolved(resolve: Any) -> tuple[dict[str, Cand], list[Any]]:
    provider = GraphProvider()
    result = resolve(provider)
    return dict(result.mapping), provider.asked


@pytest.mark.parametrize("roots", [[("app", frozenset({1}))], [("b", frozenset({2, 3})), ("a", frozenset({2, 3}))]])
def test_the_rounds_resolve_as_resolvelib_does_and_ask_the_same_questions(roots: list[Req]) -> None:
    theirs, asked_theirs = resolved(lambda p: Resolver(p, BaseReporter()).resolve(roots, max_rounds=200))
    ours, asked_ours = resolved(lambda p: rounds.resolve(p, roots, max_rounds=200))
    assert ours == theirs
    assert asked_ours == asked_theirs
    assert sum(1 for q in asked_theirs if q[0] == "matches") > len(theirs)  # the graph made resolvelib go back
    assert any(q[0] == "preference" and q[5] for q in asked_theirs)  # and the preferences saw its causes
