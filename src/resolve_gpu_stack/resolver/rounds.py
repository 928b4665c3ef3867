"""resolvelib's resolution with its per-round question answered once.

Every round, resolvelib asks of every criterion whether the current pin of its name still
satisfies each of its requirements (twice: before choosing what to pin, and after, for what the new
pin broke): rounds x criteria questions, ~46,000 on a 215-package closure, nearly all of them asked
before. resolvelib never changes a criterion (a new requirement, or a backjump, makes a new one)
nor a pin (a candidate object), so the answer for one (criterion, pin) pair cannot change: here it
is worked out once per pair (the objects are held, so their ids are not reused) and resolvelib's
loop, its choices and its result are exactly as before. Likewise the two views of a state's
criteria that every ``get_preference`` call is given are made once per state, not once per name
asked. Falls back to resolvelib's own ``Resolver``
where its internals are not those of resolvelib 1.x.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import Any

from resolvelib import AbstractProvider, BaseReporter, Resolver
from resolvelib.resolvers import Result

from .requirement import Cand, Key, Req

Provider = AbstractProvider[Req, Cand, Key]  # the StackProvider (provider.py calls this module)

try:
    from resolvelib.resolvers import resolution as _resolution
    from resolvelib.structs import IteratorMapping

    _BASE: Any = _resolution.Resolution
    _build_result: Any = _resolution._build_result
    _ORIGINAL: Any = _BASE._is_current_pin_satisfying
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

        def _get_preference(self, name: Key) -> object:
            """resolvelib's question, with the same arguments; the two views of the criteria it
            passes (read through on every access) made once per state, not once per name asked
            (~7,000 a 215-package closure)."""
            state = self._states[-1]
            views = self._views
            if views is None or views[0] is not state.criteria:
                views = self._views = (state.criteria, IteratorMapping(state.criteria, _CANDIDATES), IteratorMapping(state.criteria, _INFORMATION))
            return self._p.get_preference(
                identifier=name, resolutions=state.mapping, candidates=views[1], information=views[2], backtrack_causes=state.backtrack_causes
            )

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
