"""What a pylock installs on one target, as PEP 751's installation steps say (pure).

An installer reads a lock for the interpreter it installs into (uv does, for ``uv pip install -r
pylock.toml``): the lock's ``requires-python`` and ``environments`` must admit that interpreter,
an entry whose ``marker`` is false there is skipped, an entry's own ``requires-python`` must hold,
and of an entry's wheels the one whose tags the interpreter supports best is installed (a
``manylinux_2_28`` wheel on a glibc 2.36 host: its tags are in the host's list). ``select`` does
the same for a ``model.Target``, a probed interpreter or the declared target a lock records, so
that ``check`` and ``install --lock`` judge exactly the packages uv would install. Markers are
evaluated with no extras and no dependency groups (``uv pip install -r`` asks for none). Source
entries (``sdist``, ``vcs``, ``directory``, ``archive``) never get here: ``read_pylock`` refuses
them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from packaging.markers import InvalidMarker, Marker, UndefinedComparison, UndefinedEnvironmentName
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidWheelFilename, NormalizedName, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from ..model import Target
from ..rules.fit import TargetFit
from .locked import LockedEntry, LockedFile, LockedWheel


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    """Why (part of) a lock does not install on a target; ``package`` None for the whole lock."""

    package: NormalizedName | None
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Selection:
    """What a lock installs on one target.

    ``misfits`` say the target's Python or platform is not the lock's (``--force-target`` may
    relax them); ``errors`` are the lock's own faults (a marker that cannot be evaluated, two
    entries of one name that both apply): nothing relaxes those.
    """

    wheels: Mapping[NormalizedName, LockedWheel]  # the wheel of each entry that applies
    skipped: tuple[NormalizedName, ...] = ()  # entries whose marker is false on the target
    misfits: tuple[Problem, ...] = ()
    errors: tuple[Problem, ...] = ()


def select(locked: LockedFile, target: Target) -> Selection:
    """The entries of ``locked`` that apply to ``target`` and the wheel each installs (module docstring)."""
    misfits = _lock_misfits(locked, target)
    errors: list[Problem] = []
    fit = TargetFit(target)
    lock_env: dict[str, str | frozenset[str]] = {**target.markers, "extras": frozenset(), "dependency_groups": frozenset()}
    wheels: dict[NormalizedName, LockedWheel] = {}
    skipped: list[NormalizedName] = []
    for entry in locked.entries:
        applies = _applies(entry.markers, lock_env)
        if applies is None:
            errors.append(Problem(package=entry.name, message=f"its marker ({entry.marker}) cannot be evaluated for {target.describe()}"))
        elif not applies:
            skipped.append(entry.name)
        elif entry.name in wheels:
            errors.append(Problem(package=entry.name, message="two [[packages]] entries of it apply to the same target (PEP 751: an error)"))
        else:
            best, problems = _entry_wheel(entry, target, fit)
            misfits += problems
            if best is not None:
                wheels[entry.name] = best
    return Selection(wheels=wheels, skipped=tuple(skipped), misfits=tuple(misfits), errors=tuple(errors))


def _lock_misfits(locked: LockedFile, target: Target) -> list[Problem]:
    """The lock's own ``requires-python`` and ``environments`` against ``target``."""
    python = target.python_full_version
    out = []
    if locked.requires_python and not _admits(locked.requires_python, python):
        out.append(Problem(package=None, message=f"the lock requires Python {locked.requires_python}; {target.describe()} is Python {python}"))
    if locked.environments and not any(_holds(m, target.markers, "requirement") for m in locked.environments):
        shown = " or ".join(f"({m})" for m in locked.environments)
        out.append(Problem(package=None, message=f"the lock's environments {shown} exclude {target.describe()}"))
    return out


def _entry_wheel(entry: LockedEntry, target: Target, fit: TargetFit) -> tuple[LockedWheel | None, list[Problem]]:
    """(the wheel an entry that applies installs on ``target``: None when none fits, why it misfits)."""
    python = target.python_full_version
    out = []
    if entry.requires_python and not _admits(entry.requires_python, python):
        out.append(Problem(package=entry.name, message=f"it requires Python {entry.requires_python}; {target.describe()} is Python {python}"))
    best = _best_wheel(entry.wheels, fit)
    if best is None:
        names = ", ".join(w.filename for w in entry.wheels) or "no wheel at all"
        out.append(Problem(package=entry.name, message=f"no wheel of it fits {target.describe()} ({names})"))
    return best, out


def _best_wheel(wheels: tuple[LockedWheel, ...], fit: TargetFit) -> LockedWheel | None:
    """The wheel with the target's most preferred tag (None: no wheel has a tag the target supports)."""
    best: tuple[int, LockedWheel] | None = None
    for wheel in wheels:
        try:
            tags = parse_wheel_filename(wheel.filename)[3]
        except InvalidWheelFilename:
            continue
        score = fit.rank_of(tags)
        if score is not None and (best is None or score < best[0]):
            best = (score, wheel)
    return None if best is None else best[1]


def _admits(spec: str, python: str) -> bool:
    """Whether ``python`` (a full version) meets a ``requires-python`` (an unreadable one never does)."""
    try:
        return SpecifierSet(spec).contains(Version(python), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return False


def _applies(markers: tuple[str, ...], environment: Mapping[str, str | frozenset[str]]) -> bool | None:
    """Whether an entry applies: any of its markers holds (none: it always does); None when
    none holds and one cannot be evaluated."""
    values = [_holds(m, environment, "lock_file") for m in markers]
    if not values or True in values:
        return True
    return None if None in values else False


def _holds(marker: str, environment: Mapping[str, str | frozenset[str]], context: str) -> bool | None:
    """The marker's value in ``environment``; None when it cannot be evaluated there."""
    try:
        return Marker(marker).evaluate(dict(environment), context=context)  # type: ignore[arg-type]
    except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName, InvalidVersion, TypeError, ValueError):
        return None


__all__ = ["Problem", "Selection", "select"]
