"""Requirements replaced before the resolver sees them: the user's ``--override`` (uv's meaning),
the user's ``--flashinfer VERSION`` over a framework's FlashInfer pin, the selected torch over a
torch pin it cannot meet, the torch-family build that matches it over a family pin of the same
package, and ``--without`` (the requirement dropped).

``Overrides.apply`` rewrites one candidate's requirements and records what it replaced; the plan
keeps the records of the candidates it ends up with (``Overrides.of``): a candidate resolvelib
tried and left does not leave an override behind.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

from ..model.request import TORCH
from .requirement import Cand, Req, contains

# Why a requirement was replaced; the plan words ``replaced_by`` from the kind.
USER = "user"  # --override
FLASHINFER = "flashinfer"  # --flashinfer VERSION
TORCH_PIN = "torch"  # the selected torch
FAMILY = "family"  # the torch-family build matching the selected torch
WITHOUT = "without"  # --without: dropped


def unused_without_note(name: str) -> str:
    """The note of a ``--without NAME`` that left nothing out (the CLI also says it as a warning)."""
    return f"--without {name}: no package of the plan requires {name}, so nothing was left out (is the name right?)"


@dataclass(frozen=True, slots=True)
class Replaced:
    """One replaced requirement of one candidate."""

    kind: str
    name: NormalizedName
    requirement: str  # as the candidate states it
    replacement: str = ""  # the requirement put in its place ("" for the torch and family kinds: worded at plan time)


@dataclass(frozen=True, slots=True, kw_only=True)
class OverrideRules:
    """What may be replaced (built once from the request and the torch selection)."""

    user: Mapping[NormalizedName, Requirement]
    without: frozenset[NormalizedName]
    torch_allowed: tuple[Version, ...]  # the torch versions the plan may have
    auto_torch: bool
    family: frozenset[NormalizedName]  # the PyTorch family (torch excluded)
    flashinfer_version: Version | None
    flashinfer_pinned: frozenset[NormalizedName]  # the FlashInfer components --flashinfer VERSION pins
    protected: Callable[[Cand], bool]  # candidates whose torch pin is their ABI (never overridden)
    markers: Mapping[str, str]

    def torch_unmet(self, req: Req) -> bool:
        return req.name == TORCH and bool(req.specifier) and not any(contains(req.specifier, v) for v in self.torch_allowed)


class Overrides:
    def __init__(self, rules: OverrideRules) -> None:
        self.rules = rules
        self._seen: dict[tuple[NormalizedName, Version], tuple[Replaced, ...]] = {}
        self._lock = threading.Lock()

    def roots(self, reqs: Sequence[Req]) -> list[Req]:
        """The requested requirements, with --without and --override applied (never the automatic
        torch override: a --with pin on torch is the user's word)."""
        out: list[Req] = []
        for req in reqs:
            if req.name in self.rules.without:
                continue
            user = self.rules.user.get(req.name)
            if user is not None and req.name != TORCH:
                req = _from_requirement(user, req.parent)
            out.append(req)
        return out

    def apply(self, cand: Cand, reqs: Sequence[Req]) -> list[Req]:
        """``reqs`` of ``cand`` with the overrides applied; what was replaced is recorded."""
        rules = self.rules
        out: list[Req] = []
        done: list[Replaced] = []
        torch_overridden = rules.auto_torch and not rules.protected(cand) and any(rules.torch_unmet(r) for r in reqs)
        for req in reqs:
            new, replaced = self._one(req, torch_overridden=torch_overridden)
            if replaced is not None:
                done.append(replaced)
            if new is not None:
                out.append(new)
        if done or (cand.name, cand.version) not in self._seen:
            with self._lock:
                known = self._seen.get((cand.name, cand.version), ())
                self._seen[(cand.name, cand.version)] = tuple(dict.fromkeys([*known, *done]))
        return out

    def _one(self, req: Req, *, torch_overridden: bool) -> tuple[Req | None, Replaced | None]:
        rules = self.rules
        text = str(req)
        if req.name in rules.without:
            return None, Replaced(WITHOUT, req.name, text)
        if req.name in rules.user:
            return self._user(req, text)
        return self._automatic(req, text, torch_overridden=torch_overridden)

    def _user(self, req: Req, text: str) -> tuple[Req | None, Replaced | None]:
        """``req`` replaced by the user's --override on its name (dropped when its markers do not hold)."""
        user = self.rules.user[req.name]
        if not _marker_ok(user.marker, self.rules.markers):
            return None, Replaced(USER, req.name, text, f"(none: {user})")
        new = _from_requirement(user, req.parent)
        return new, (Replaced(USER, req.name, text, str(new)) if str(new) != text else None)

    def _automatic(self, req: Req, text: str, *, torch_overridden: bool) -> tuple[Req, Replaced | None]:
        """``req`` with the overrides the resolver makes itself: the user's --flashinfer version, the
        selected torch over a pin it cannot meet, and the torch family along with it."""
        rules = self.rules
        v = rules.flashinfer_version
        if v is not None and req.name in rules.flashinfer_pinned and not contains(req.specifier, v):
            new = replace(req, specifier=SpecifierSet(f"=={v}"), text=f"{_with_extras(req)}=={v}")
            return new, Replaced(FLASHINFER, req.name, text, str(new))
        if torch_overridden and req.name == TORCH and rules.torch_unmet(req):
            return replace(req, specifier=SpecifierSet(), text=TORCH), Replaced(TORCH_PIN, req.name, text)
        if torch_overridden and req.name in rules.family and req.specifier:
            return replace(req, specifier=SpecifierSet(), text=_with_extras(req)), Replaced(FAMILY, req.name, text)
        return req, None

    def of(self, cands: Iterable[Cand]) -> dict[tuple[NormalizedName, Version], tuple[Replaced, ...]]:
        """What was replaced in the requirements of each of ``cands`` (the plan's packages)."""
        with self._lock:
            return {(c.name, c.version): self._seen[(c.name, c.version)] for c in cands if self._seen.get((c.name, c.version))}


def _with_extras(req: Req) -> str:
    return str(req.key)


def _from_requirement(user: Requirement, parent: str | None) -> Req:
    return Req(
        name=canonicalize_name(user.name),
        specifier=user.specifier,
        extras=frozenset(canonicalize_name(e) for e in user.extras),
        parent=parent,
        text=str(user).split(";", 1)[0].strip(),
    )


def _marker_ok(marker: Marker | None, markers: Mapping[str, str]) -> bool:
    return marker is None or marker.evaluate(dict(markers, extra=""))
