"""``resolver/rounds.py`` answers resolvelib's per-round questions once (the pin question per
(criterion, pin), the views ``get_preference`` is given per state): the resolution, and every
question the provider is asked, are exactly those of resolvelib's own ``Resolver``, backtracking
included. Real resolvelib on both sides, over a small graph whose first choices conflict, and over
graphs drawn by hypothesis (conflicts, dead ends, backjumps, optimistic backjumping rolled back)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from resolvelib import AbstractProvider, BaseReporter, ResolutionImpossible, ResolutionTooDeep, Resolver

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


Graph = dict[str, dict[int, list[tuple[str, frozenset[int]]]]]


class GraphProvider(AbstractProvider[Req, Cand, str]):
    """A provider over ``graph`` that writes down every question it is asked, with what it was shown."""

    def __init__(self, graph: Graph = GRAPH) -> None:
        self.graph = graph
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
        infos = sorted((sorted(i.requirement[1]), repr(i.parent)) for i in information[identifier])
        self.asked.append(("preference", identifier, dict(resolutions), count, infos, len(backtrack_causes), sorted(candidates), sorted(information)))
        return (count, identifier)

    def find_matches(self, identifier: str, requirements: Mapping[str, Iterator[Req]], incompatibilities: Mapping[str, Iterator[Cand]]) -> Iterable[Cand]:
        reqs = list(requirements[identifier])
        bad = set(incompatibilities[identifier])
        out = [(identifier, v) for v in sorted(self.graph[identifier], reverse=True) if all(v in r[1] for r in reqs) and (identifier, v) not in bad]
        self.asked.append(("matches", identifier, out))
        return out

    def is_satisfied_by(self, requirement: Req, candidate: Cand) -> bool:
        return candidate[1] in requirement[1]

    def get_dependencies(self, candidate: Cand) -> Iterable[Req]:
        return list(self.graph[candidate[0]][candidate[1]])


def resolved(resolve: Any, graph: Graph = GRAPH) -> tuple[object, list[Any]]:
    """(the mapping, or the error and its causes; every question asked)."""
    provider = GraphProvider(graph)
    try:
        result = resolve(provider)
    except ResolutionImpossible as exc:
        return ("impossible", [(c.requirement, c.parent) for c in exc.causes]), provider.asked
    except ResolutionTooDeep as exc:
        return ("too deep", exc.args), provider.asked
    return dict(result.mapping), provider.asked


@pytest.mark.parametrize("own_loop", [True, False], ids=["the loop here", "resolvelib's loop"])
@pytest.mark.parametrize("roots", [[("app", frozenset({1}))], [("b", frozenset({2, 3})), ("a", frozenset({2, 3}))]])
def test_the_rounds_resolve_as_resolvelib_does_and_ask_the_same_questions(roots: list[Req], own_loop: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both ways ``rounds`` runs: resolvelib 1.2's loop here, or (another 1.x layout) resolvelib's
    own loop with the pin question answered once per (criterion, pin)."""
    monkeypatch.setattr(rounds, "_OWN_LOOP", own_loop)
    theirs, asked_theirs = resolved(lambda p: Resolver(p, BaseReporter()).resolve(roots, max_rounds=200))
    ours, asked_ours = resolved(lambda p: rounds.resolve(p, roots, max_rounds=200))
    assert ours == theirs
    assert asked_ours == asked_theirs
    assert sum(1 for q in asked_theirs if q[0] == "matches") > len(theirs)  # the graph made resolvelib go back
    assert any(q[0] == "preference" and q[5] for q in asked_theirs)  # and the preferences saw its causes


NAMES = ["a", "b", "c", "d", "e", "f"]


@st.composite
def graphs(draw: st.DrawFn) -> tuple[Graph, list[Req]]:
    """A graph of up to six packages, each with one to four versions requiring earlier-named packages
    at some of their versions (a DAG: resolvelib's own loop and ours both end), and roots over it."""
    graph: Graph = {}
    for i, name in enumerate(NAMES[: draw(st.integers(2, len(NAMES)))]):
        versions = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4, unique=True))
        graph[name] = {}
        for v in versions:
            deps = draw(st.lists(st.sampled_from(NAMES[i + 1 : len(NAMES)] or ["-"]), max_size=3, unique=True))
            graph[name][v] = [(d, frozenset(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))) for d in deps if d != "-"]
    for deps in [d for versions in graph.values() for d in versions.values()]:
        deps[:] = [(d, allowed) for d, allowed in deps if d in graph]
    names = sorted(graph)
    roots = [
        (n, frozenset(draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))))
        for n in draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))
    ]
    return graph, roots


@settings(max_examples=300, deadline=None)
@given(graphs(), st.sampled_from([4, 8, 200]))
def test_drawn_graphs_resolve_as_resolvelib_does_and_ask_the_same_questions(drawn: tuple[Graph, list[Req]], max_rounds: int) -> None:
    graph, roots = drawn
    theirs, asked_theirs = resolved(lambda p: Resolver(p, BaseReporter()).resolve(roots, max_rounds=max_rounds), graph)
    ours, asked_ours = resolved(lambda p: rounds.resolve(p, roots, max_rounds=max_rounds), graph)
    assert ours == theirs
    assert asked_ours == asked_theirs


@pytest.mark.parametrize("own_loop", [True, False], ids=["the loop here", "resolvelib's loop"])
def test_a_pin_broken_by_a_later_pin_is_taken_back_as_resolvelib_does(own_loop: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """c (two candidates) is pinned first, at 2 (which asks for d); a's newest then asks for c 1
    only: c's pin is broken, what c 2 asked of d dropped (d's preference is then asked with no
    information), and c is pinned again."""
    graph: Graph = {
        "a": {3: [("c", frozenset({1}))], 2: [], 1: []},
        "c": {2: [("d", frozenset({1, 2, 3}))], 1: []},
        "d": {3: [], 2: [], 1: []},
    }
    roots: list[Req] = [("a", frozenset({1, 2, 3})), ("c", frozenset({1, 2}))]
    monkeypatch.setattr(rounds, "_OWN_LOOP", own_loop)
    theirs, asked_theirs = resolved(lambda p: Resolver(p, BaseReporter()).resolve(roots, max_rounds=50), graph)
    ours, asked_ours = resolved(lambda p: rounds.resolve(p, roots, max_rounds=50), graph)
    assert ours == theirs == {"a": ("a", 3), "c": ("c", 1)}
    assert ("preference", "d", {"a": ("a", 3), "c": ("c", 2)}, 3, [], 0, ["a", "c", "d"], ["a", "c", "d"]) in asked_theirs
    assert asked_ours == asked_theirs
