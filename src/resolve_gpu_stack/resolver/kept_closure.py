"""The kept torch's closure: what its Requires-Dist pins exactly, followed through the extras it asks for.

PyPI's torch 2.15.0 requires ``cuda-toolkit[cublas,cudart,...,nvrtc,...]==13.2.2``, and
cuda-toolkit 13.2.2's extras pin ``nvidia-cuda-runtime==13.2.86.*``, ``nvidia-cuda-nvrtc==13.2.86.*``
and the rest: the CUDA libraries torch was built and tested with. Installed with torch, they are
part of the torch a user keeps. The closure is read from METADATA only (a probed environment: its
installed dists; a declared target: the wheels on their index, or a snapshot's), recursively
wherever a requirement pins exactly (``==V`` or ``==V.*``), and the plan holds it exactly: another
version of one of them is a conflict named as such (``conflict_words``), unless the user overrides it.

Pure: the METADATA and the versions come from the caller's two look-ups.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from packaging.specifiers import SpecifierSet
from packaging.utils import NormalizedName
from packaging.version import Version

from ..index.parse import RequiresDist, parse_requires_dist
from ..model.kept import ClosurePin, KeptClosure

VersionOf = Callable[[NormalizedName, SpecifierSet], "Version | None"]
"""The version of NAME that SPECIFIER holds: the installed one, or the newest its index serves for the target."""
RequiresOf = Callable[[NormalizedName, Version], "Sequence[str] | None"]
"""The Requires-Dist of NAME at VERSION (None: its METADATA could not be read)."""
ReadAhead = Callable[["Sequence[RequiresDist]"], None]
"""Told the exact pins of one Requires-Dist before they are followed one by one (to read what
``version_of`` and ``requires_of`` will ask for at once: siblings in one round, not one after another)."""


def exact_specifier(specifier: SpecifierSet) -> bool:
    """Whether ``specifier`` pins one version (``==V``, ``==V.*``, ``===V``) and nothing else."""
    specs = list(specifier)
    return len(specs) == 1 and specs[0].operator in ("==", "===")


def read_closure(
    torch: Version,
    requires: Sequence[str],
    markers: Mapping[str, str],
    *,
    version_of: VersionOf,
    requires_of: RequiresOf,
    parse: Callable[[str], RequiresDist | None] = parse_requires_dist,
    where: str = "found on its index",
    ahead: ReadAhead | None = None,
) -> KeptClosure:
    """The closure of torch ``torch`` whose Requires-Dist is ``requires``, on a target with ``markers``.

    ``where``: where ``version_of`` looks, in words (``installed``, ``found on its index``). An exact pin
    whose version ``version_of`` does not find is held at the pinned version when the pin
    names one (``==13.2.2``), else left out with a note; a pinned package whose METADATA cannot be read
    is held without its own pins, with a note. ``ahead``: told each Requires-Dist's exact pins
    that hold on the target before they are followed (the look-ups then find what it read)."""
    walk = _Walk(version_of, requires_of, where)
    queue: list[tuple[str, Sequence[str], frozenset[str]]] = [(f"torch {torch}", requires, frozenset())]
    while queue:
        pinner, lines, extras = queue.pop(0)
        exact = [req for line in lines if (req := parse(line)) is not None and not req.url and exact_specifier(req.specifier) and applies(req, markers, extras)]
        if ahead is not None and exact:
            ahead(exact)
        queue.extend(step for req in exact if (step := walk.follow(req, pinner)) is not None)
    return KeptClosure(torch=torch, pins=tuple(walk.pins.values()), unread=tuple(walk.unread))


class _Walk:
    """One closure being read: the pins so far, what could not be read, and the extras each pinned
    package was followed with."""

    def __init__(self, version_of: VersionOf, requires_of: RequiresOf, where: str) -> None:
        self.version_of = version_of
        self.requires_of = requires_of
        self.where = where
        self.pins: dict[NormalizedName, ClosurePin] = {}
        self.unread: list[str] = []
        self.followed: dict[NormalizedName, frozenset[str]] = {}

    def follow(self, req: RequiresDist, pinner: str) -> tuple[str, Sequence[str], frozenset[str]] | None:
        """Hold ``req`` (an exact pin of ``pinner``'s); what its package pins in turn, to be read
        (None: nothing new to read, or a note said why not)."""
        pin = self.pins.get(req.name) or _pin(req, pinner, self.version_of)
        if pin is None:
            self.unread.append(f"{pinner} pins {req.text}, and no version of {req.name} matching it was {self.where}: it is not held with torch")
            return None
        seen = self.followed.get(req.name)
        wanted = frozenset(req.extras) | (seen or frozenset())
        self.pins[req.name] = ClosurePin(
            name=pin.name, version=pin.version, pin=pin.pin, pinned_by=pin.pinned_by, extras=wanted, found=pin.found, named=pin.named
        )
        if seen is not None and wanted == seen:
            return None
        self.followed[req.name] = wanted
        own = self.requires_of(pin.name, pin.version) if pin.found else None
        if own is None and pin.named and not pin.found:
            return None  # the target has another version than the pin: its word, not followed
        if own is None:
            why = "its METADATA could not be read" if pin.found else f"it was not {self.where}"
            self.unread.append(f"{pin.name} {pin.version}, pinned by {pin.pinned_by}: {why}, so what it pins is not held with torch")
            return None
        return (f"{pin.pinned_by}'s {pin.name} {pin.version}", own, wanted)


def _pin(req: RequiresDist, pinner: str, version_of: VersionOf) -> ClosurePin | None:
    found = version_of(req.name, req.specifier)
    if found is not None:  # outside the pin: the target says so (a version the user named); not held
        return ClosurePin(name=req.name, version=found, pin=req.text, pinned_by=pinner, found=req.specifier.contains(found, prereleases=True), named=True)
    spec = next(iter(req.specifier))
    if spec.version.endswith(".*"):
        return None
    try:
        return ClosurePin(name=req.name, version=Version(spec.version), pin=req.text, pinned_by=pinner, found=False)
    except ValueError:
        return None


def applies(req: RequiresDist, markers: Mapping[str, str], extras: frozenset[str]) -> bool:
    """Whether ``req``'s marker holds on the target, for the base requirements or one of ``extras``."""
    if req.marker is None:
        return True
    for extra in ("", *sorted(extras)):
        try:
            if req.marker.evaluate({**markers, "extra": extra}):
                return True
        except Exception:  # an undefined comparison: the marker does not hold  # noqa: BLE001
            continue
    return False


def conflict_words(requirer: str, requirement: str, pin: ClosurePin) -> str:
    """``humming-kernels 0.1.19 needs nvidia-cuda-runtime>=13.5; torch 2.15.0's cuda-toolkit 13.2.2 pins 13.2.86``."""
    return f"{requirer} needs {requirement}; {pin.words()}"


__all__ = ["ClosurePin", "KeptClosure", "RequiresOf", "VersionOf", "conflict_words", "exact_specifier", "read_closure"]
