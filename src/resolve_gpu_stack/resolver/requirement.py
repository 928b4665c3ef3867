"""What the resolver reasons about: identifiers, requirements and candidates, each owning its logic.

Stdlib + packaging only. An identifier is a structured ``Key`` (name, extras), never a string to
split; a ``Req`` decides which ``Cand`` satisfies it and says itself in an error.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import NamedTuple

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

from ..model import IndexFile

WITH_PARENT = "(requested with --with)"  # the parent of a requirement the user named with --with


@dataclass(frozen=True, slots=True)
class RequiresDist:
    """One Requires-Dist line, parsed."""

    name: NormalizedName
    specifier: SpecifierSet
    extras: frozenset[str]
    marker: Marker | None
    url: str | None
    text: str  # the requirement without its marker: ``torch==2.9.0``


@functools.lru_cache(maxsize=16384)
def parse_requires_dist(line: str) -> RequiresDist | None:
    """A Requires-Dist line, parsed once per process (the same lines come back for every extra,
    every wiring and every target); None when it does not parse."""
    try:
        req = Requirement(line)
    except InvalidRequirement:
        return None
    return RequiresDist(
        name=canonicalize_name(req.name),
        specifier=req.specifier,
        extras=frozenset(canonicalize_name(e) for e in req.extras),
        marker=req.marker,
        url=req.url,
        text=str(req).split(";", 1)[0].strip(),
    )


class Key(NamedTuple):
    """A resolvelib identifier: a package, or the same package with extras (its own node)."""

    name: NormalizedName
    extras: frozenset[str] = frozenset()

    def __str__(self) -> str:
        return f"{self.name}[{','.join(sorted(self.extras))}]" if self.extras else self.name


@dataclass(frozen=True, slots=True)
class Cand:
    """One version of one package: a wheel on its owning index, or what is already installed."""

    name: NormalizedName
    version: Version
    file: IndexFile | None  # None: the installed distribution, nothing to download
    extras: frozenset[str] = frozenset()
    installed: bool = False  # this exact version is installed on the target

    @property
    def key(self) -> Key:
        return Key(self.name, self.extras)

    def with_extras(self, extras: frozenset[str]) -> Cand:
        return self if extras == self.extras else replace(self, extras=extras)

    def __str__(self) -> str:
        return f"{self.key} {self.version}"


@dataclass(frozen=True, slots=True)
class Req:
    """A requirement on one identifier (``name`` or ``name[extras]``)."""

    name: NormalizedName
    specifier: SpecifierSet
    extras: frozenset[str] = frozenset()
    parent: str | None = None  # "flashinfer-python 0.6.5", "(requested)", ...
    text: str = ""

    @property
    def key(self) -> Key:
        return Key(self.name, self.extras)

    @property
    def pinned(self) -> bool:
        """An exact pin (``==V`` or ``===V``, no wildcard)."""
        return any(s.operator in ("==", "===") and "*" not in s.version for s in self.specifier)

    def is_satisfied_by(self, cand: Cand) -> bool:
        """Same package, inside the range (pre-releases judged by the factory), and a yanked
        file only when pinned exactly (PEP 592)."""
        if self.name != cand.name or not contains(self.specifier, cand.version):
            return False
        if cand.file is not None and cand.file.is_yanked:
            return any(s.operator in ("==", "===") for s in self.specifier)
        return True

    def __str__(self) -> str:
        return self.text or f"{self.key}{self.specifier}"


_CONTAINS: dict[tuple[int, int], tuple[SpecifierSet, Version, bool]] = {}


def forget_contains() -> None:
    """Drop the ``contains`` memo: a resolve starts with it empty, so the specifiers and versions
    of the targets resolved before it (a lock of many targets) are not kept alive."""
    _CONTAINS.clear()



def contains(spec: SpecifierSet, version: Version) -> bool:
    """``spec.contains(version, prereleases=True)``, once per (specifier, version) object pair:
    resolvelib asks again for every pinned requirement on every round."""
    if not spec:
        return True
    key = (id(spec), id(version))
    hit = _CONTAINS.get(key)
    if hit is not None and hit[0] is spec and hit[1] is version:
        return hit[2]
    ok = spec.contains(version, prereleases=True)
    if len(_CONTAINS) > 200_000:
        _CONTAINS.clear()
    _CONTAINS[key] = (spec, version, ok)  # holding both keeps their ids unique
    return ok
