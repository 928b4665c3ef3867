"""What the resolver reasons about: identifiers, requirements and candidates, each owning its logic.

Stdlib + packaging only. An identifier is a structured ``Key`` (name, extras), never a string to
split; a ``Req`` decides which ``Cand`` satisfies it and says itself in an error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import NamedTuple

from packaging.specifiers import SpecifierSet
from packaging.utils import NormalizedName
from packaging.version import Version

from ..model import IndexFile

WITH_PARENT = "(requested with --with)"  # the parent of a requirement the user named with --with
BUILD_PARENT = "(requested with --build)"  # the parent of a --build NAME no --with names: the package is implied


def contains(spec: SpecifierSet, version: Version) -> bool:
    """``spec.contains(version, prereleases=True)`` (pre-releases are the factory's to judge)."""
    return not spec or spec.contains(version, prereleases=True)


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

    def is_satisfied_by(self, cand: Cand, contains: Callable[[SpecifierSet, Version], bool] = contains) -> bool:
        """Same package, inside the range (pre-releases judged by the factory), and a yanked
        file only when pinned exactly (PEP 592). ``contains``: a resolve's ``Containment`` memo."""
        if self.name != cand.name or not contains(self.specifier, cand.version):
            return False
        if cand.file is not None and cand.file.is_yanked:
            return any(s.operator in ("==", "===") for s in self.specifier)
        return True

    def __str__(self) -> str:
        return self.text or f"{self.key}{self.specifier}"


class Containment:
    """``contains``, remembered per (specifier, version) object pair: resolvelib asks again for every
    pinned requirement on every round. One per resolve (the candidate factory's): it dies with its
    target, so the specifiers and versions of the targets resolved before it are not kept alive."""

    __slots__ = ("_known",)

    def __init__(self) -> None:
        self._known: dict[tuple[int, int], tuple[SpecifierSet, Version, bool]] = {}

    def __call__(self, spec: SpecifierSet, version: Version) -> bool:
        if not spec:
            return True
        key = (id(spec), id(version))
        hit = self._known.get(key)
        if hit is not None and hit[0] is spec and hit[1] is version:
            return hit[2]
        ok = contains(spec, version)
        self._known[key] = (spec, version, ok)  # holding both keeps their ids unique
        return ok
