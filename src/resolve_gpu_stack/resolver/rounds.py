"""resolvelib's resolution with its per-round questions answered once.

Every round, resolvelib asks of every criterion whether the current pin of its name still
satisfies each of its requirements (twice: before choosing what to pin, and after, for what the new
pin broke): rounds x criteria questions, ~54,000 on a 215-package closure, nearly all of them asked
before. resolvelib never changes a criterion (a new requirement, or a backjump, makes a new one)
nor a pin (a candidate object), so the answer for one (criterion, pin) pair cannot change. With
resolvelib 1.2's layout its loop runs here, step for step, with the names a pin leaves
unsatisfied worked out from the round's own (only the pinned name and the names its requirements
touched asked again) and carried to the next round's state; the pins are held in a plain dict (the
same order and ``popitem``; a state's copy ~30x cheaper than an ``OrderedDict``'s); the
``StackProvider``'s preference is asked of the criterion itself. With another 1.x layout
resolvelib's own loop runs, each (criterion, pin) question answered once (the objects are held,
so their ids are not reused). Either way the choices, the questions the provider is asked and the
result are exactly resolvelib's (``tests/resolver/test_rounds.py``). Falls back to resolvelib's
own ``Resolver`` where its internals are not those of resolvelib 1.x.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import Any

from resolvelib import AbstractProvider, BaseReporter, Resolver
from resolvelib.resolvers import RequirementsConflicted, ResolutionImpossible, ResolutionTooDeep, Result

from .requirement import Cand, Key, Req

Provider = AbstractProvider[Req, Cand, Key]  # the StackProvider (provider.py calls this module)

try:
    from resolvelib.resolvers import resolution as _resolution
    from resolvelib.structs import IteratorMapping, State

    _BASE: Any = _resolution.Resolution
    _build_result: Any = _resolution._build_result
    _ORIGINAL: Any = _BASE._is_current_pin_satisfying
    # resolvelib 1.2's loop (optimistic backjumping): run here with its two scans of every criterion
    # per round answered from the last answer per name; another 1.x layout runs resolvelib's own loop
    _OWN_LOOP = hasattr(_BASE, "_rollback_states") and hasattr(_BASE, "_save_state")
except (ImportError, AttributeError):  # another resolvelib layout: its own Resolver, unchanged
    _BASE = None


def resolve(provider: Provider, requirements: Iterable[Req], *, max_rounds: int) -> Result[Req, Cand, Key]:
    """``Resolver(provider, BaseReporter()).resolve(requirements, max_rounds=...)``, with each
    (criterion, pin) question answered once."""
    if _BASE is None:
        return Resolver(provider, BaseReporter()).resolve(requirements, max_rounds=max_rounds)
    resolution = _Resolution(provider, BaseReporter())
    result: Result[Req, Cand, Key] = _build_result(resolution.resolve(requirements, max_rounds=max_rounds))
    return result


_CANDIDATES = operator.attrgetter("candidates")
_INFORMATION = operator.attrgetter("information")

if _BASE is not None:

    class _Resolution(_BASE):  # type: ignore[misc,unused-ignore]  # a subclass of Any under --strict
        def __init__(self, provider: Provider, reporter: BaseReporter[Req, Cand, Key]) -> None:
            super().__init__(provider, reporter)
            self._pin_answers: dict[tuple[int, int], tuple[bool, object, object]] = {}
            self._views: tuple[object, Any, Any] | None = None  # (a state's criteria, its candidates and information views)
            self._preference_of: Any = getattr(provider, "preference_of", None)
            self._touched: list[Key] = []  # the names the last ``_get_updated_criteria`` touched
            self._answers: dict[Key, tuple[object, Cand, bool]] = {}  # name -> (the criterion, the pin, satisfied) last asked

        def _state_views(self, state: Any) -> tuple[object, Any, Any]:
            views = self._views
            if views is None or views[0] is not state.criteria:
                views = self._views = (state.criteria, IteratorMapping(state.criteria, _CANDIDATES), IteratorMapping(state.criteria, _INFORMATION))
            return views

        def _get_preference(self, name: Key) -> Any:
            """resolvelib's question, with the same arguments; the two views of the criteria it
            passes (read through on every access) made once per state, not once per name asked
            (~7,000 a 215-package closure)."""
            state = self._states[-1]
            if self._preference_of is not None:  # the StackProvider's question asked of the criterion itself
                criterion = state.criteria[name]
                return self._preference_of(name, criterion.information, criterion.candidates.__iter__)
            views = self._state_views(state)
            return self._p.get_preference(
                identifier=name, resolutions=state.mapping, candidates=views[1], information=views[2], backtrack_causes=state.backtrack_causes
            )

        def resolve(self, requirements: Iterable[Req], max_rounds: int) -> Any:
            """resolvelib 1.2's ``Resolution.resolve``, step for step, but for its two scans of
            every criterion a round (which names the current pins leave unsatisfied; which of the
            satisfied ones the new pin broke): both read ``_unsatisfied``, which asks resolvelib's
            question only for a name whose criterion or pin changed since it was last asked."""
            if not _OWN_LOOP:
                return super().resolve(requirements, max_rounds)
            self._start(requirements)
            self._optimistic: tuple[int, int] | None = None  # (the round optimistic backjumping started, its cutoff)
            carried: tuple[object, list[Key]] | None = None  # (a state, its unsatisfied names) worked out the round before
            for round_index in range(max_rounds):
                self._r.starting_round(index=round_index)
                if self._optimism_ended(round_index, max_rounds):
                    self._rollback_states()
                    continue
                state = self._states[-1]
                unsatisfied = carried[1] if carried is not None and carried[0] is state else self._unsatisfied(state)
                carried = None
                if not unsatisfied:
                    self._r.ending(state=state)
                    return state
                satisfied = set(state.criteria) - set(unsatisfied)
                name = self._choose(state, unsatisfied)
                failure = self._attempt_to_pin_criterion(name)
                if failure:
                    self._go_back(failure)
                else:
                    carried = self._pinned(state, unsatisfied, satisfied, name)
                self._r.ending_round(index=round_index, state=self.state)
            raise ResolutionTooDeep(max_rounds)

        def _start(self, requirements: Iterable[Req]) -> None:
            """The root state with the requirements' criteria, and the first state above it."""
            if self._states:
                raise RuntimeError("already resolved")
            self._r.starting()
            # the pins in a dict, not an OrderedDict: the same order, the same popitem (the last pin) and
            # move to the end (pop, then set), and a copy per round of ~200 pins 0.6 us, not 20 us
            self._states: list[Any] = [State(mapping={}, criteria={}, backtrack_causes=[])]
            for r in requirements:
                try:
                    self._add_to_criteria(self.state.criteria, r, parent=None)
                except RequirementsConflicted as e:
                    raise ResolutionImpossible(e.criterion.information) from e
            self._push_new_state()

        def _optimism_ended(self, round_index: int, max_rounds: int) -> bool:
            """Whether optimistic backjumping, once started, has run out of rounds (its states are
            then rolled back), as resolvelib counts them."""
            if not self._optimistic_backjumping_ratio or self._save_states is None:
                return False
            if self._optimistic is None:
                self._optimistic = (round_index, int((max_rounds - round_index) * self._optimistic_backjumping_ratio))
                return self._optimistic[1] <= 0
            return round_index - self._optimistic[0] >= self._optimistic[1]

        def _choose(self, state: Any, unsatisfied: list[Key]) -> Key:
            """The name to pin this round: the provider's narrowing of the unsatisfied names, then its preference."""
            if len(unsatisfied) > 1:
                views = self._state_views(state)
                narrowed: list[Key] = list(
                    self._p.narrow_requirement_selection(
                        identifiers=unsatisfied,
                        resolutions=state.mapping,
                        candidates=views[1],
                        information=views[2],
                        backtrack_causes=state.backtrack_causes,
                    )
                )
            else:
                narrowed = unsatisfied
            if not narrowed:
                raise RuntimeError("narrow_requirement_selection returned 0 names")
            return min(narrowed, key=self._get_preference) if len(narrowed) > 1 else narrowed[0]

        def _go_back(self, failure: list[Any]) -> None:
            """No candidate of the name could be pinned: backjump (optimistically, then safely)."""
            causes = self._extract_causes(failure)
            self._r.resolving_conflicts(causes=causes)
            try:
                success = self._backjump(causes)
            except ResolutionImpossible:
                if not (self._optimistic_backjumping_ratio and self._save_states):
                    raise
                failed_optimistic = True
            else:
                failed_optimistic = bool(not success and self._optimistic_backjumping_ratio and self._save_states)
            if failed_optimistic and self._save_states:
                self._rollback_states()
                return
            self.state.backtrack_causes[:] = causes
            if not success:
                raise ResolutionImpossible(self.state.backtrack_causes)

        def _pinned(self, state: Any, unsatisfied: list[Key], satisfied: set[Key], name: Key) -> tuple[object, list[Key]] | None:
            """``name`` pinned: the information of the pins it broke dropped, a new state pushed;
            (that state, its unsatisfied names) when no pin was broken (it is a copy of this one)."""
            after = self._after_pin(state, unsatisfied, satisfied, name)
            broken = {key for key in after if key in satisfied}  # the satisfied names the new pin broke
            self._remove_information_from_criteria(self.state.criteria, broken)
            self._push_new_state()
            return None if broken else (self._states[-1], after)

        def _get_updated_criteria(self, candidate: Cand) -> Any:
            """resolvelib's, with the names it adds to or changes in the criteria written down
            (``_touched``): a pin changes no other criterion."""
            criteria = self.state.criteria.copy()
            self._touched = touched = []
            for requirement in self._p.get_dependencies(candidate=candidate):
                self._add_to_criteria(criteria, requirement, parent=candidate)
                touched.append(self._p.identify(requirement_or_candidate=requirement))
            return criteria

        def _after_pin(self, state: Any, unsatisfied: list[Key], satisfied: set[Key], name: Key) -> list[Key]:
            """``_unsatisfied(state)`` once ``name`` is pinned in it, worked out from the names
            unsatisfied before (``unsatisfied``, the rest ``satisfied``), asking again only of the
            pinned name and of the names the pin's requirements touched: no other criterion, and
            no other pin, changed. Unpinned names stay unsatisfied; a pin that failed a
            requirement still fails it (a criterion only gains requirements); the names the pin
            added come last, in the order they were added, as they do in the criteria."""
            touched = dict.fromkeys(self._touched)
            touched[name] = None
            mapping, criteria = state.mapping, state.criteria
            answers = self._answers

            def fails(key: Key) -> bool:
                pin = mapping.get(key)
                if pin is None:
                    return True
                criterion = criteria[key]
                known = answers.get(key)
                if known is None or known[0] is not criterion or known[1] is not pin:
                    known = answers[key] = (criterion, pin, _ORIGINAL(self, key, criterion))
                return not known[2]

            if any(key in satisfied and fails(key) for key in touched):
                return self._unsatisfied(state)  # a pin broken: the names in the criteria's order
            after = [key for key in unsatisfied if key not in touched or fails(key)]
            after += [key for key in touched if key not in satisfied and key not in unsatisfied and fails(key)]
            return after

        def _unsatisfied(self, state: Any) -> list[Key]:
            """The names of ``state``'s criteria its pins do not satisfy, in the criteria's order
            (resolvelib's ``_is_current_pin_satisfying`` over each): the answer per name is kept
            with the criterion and pin it was given for, and asked again only when either changed
            (resolvelib never changes a criterion or a pin; it makes new ones)."""
            mapping = state.mapping
            answers = self._answers
            out: list[Key] = []
            for key, criterion in state.criteria.items():
                pin = mapping.get(key)
                if pin is None:
                    out.append(key)
                    continue
                known = answers.get(key)
                if known is None or known[0] is not criterion or known[1] is not pin:
                    known = answers[key] = (criterion, pin, _ORIGINAL(self, key, criterion))
                if not known[2]:
                    out.append(key)
            return out

        def _is_current_pin_satisfying(self, name: Key, criterion: object) -> bool:
            try:
                states = self._states  # what the ``state`` property reads, without its call (~85,000 a run)
            except AttributeError:
                states = [self.state]
            pin = states[-1].mapping.get(name)
            if pin is None:
                return False
            key = (id(criterion), id(pin))
            known = self._pin_answers.get(key)
            if known is None:
                known = self._pin_answers[key] = (_ORIGINAL(self, name, criterion), criterion, pin)
            return known[0]


__all__ = ["resolve"]
