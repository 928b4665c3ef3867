"""Against the indexes (``check --online`` or a snapshot): every locked file is still offered as locked
(``verify_files``), a re-resolve gives the same plan (``drift``), and files placed on a mirror's layout.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from ...data.definitions import RouteContext
from ...errors import CrawlError, IntegrityError, UsageError
from ...model import Action, IndexFile, LockedPackage, LockPlan
from ...model.channel import flashinfer_channel, torch_channel, torch_origin
from ...model.request import FlashInferChoice, recorded_torch_choice
from .finding import WARNING, Finding, error_at

if TYPE_CHECKING:
    from ...index.finder import Finder


def route_context(plan: LockPlan) -> RouteContext:
    """The routing a plan's packages were found under: the channels its recorded inputs asked for
    (``torch``, ``installed-torch``, ``flashinfer``, parsed as the command line's are); read off the
    plan's versions only when it records no inputs."""
    torch = plan.torch
    torch_asked, flashinfer_asked = recorded_channels(plan.inputs)
    return RouteContext(
        torch_channel=torch_asked or (torch_channel(torch.version) if torch is not None else "stable"),
        cuda=plan.target.cuda,
        flashinfer_channel=flashinfer_asked or flashinfer_channel(plan.flashinfer_version),
        torch_series=f"{torch.version.major}.{torch.version.minor}" if torch is not None else None,
        torch_from=torch_origin(torch.version if torch is not None else None),
    )


def recorded_channels(inputs: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(the torch channel, the FlashInfer channel) the recorded inputs resolved under; None for one
    they do not say (or say in a way this version cannot read)."""
    flashinfer = None
    choice = recorded_torch_choice(inputs)  # a kept torch's own channel unless the inputs named a move
    torch = choice.channel if choice is not None else None
    try:
        if isinstance(inputs.get("flashinfer"), str):
            flashinfer = FlashInferChoice.parse(inputs["flashinfer"]).channel
    except UsageError:
        pass
    return torch, flashinfer


Lookup = Callable[[str, RouteContext, "set[str]"], "list[IndexFile]"]


def finder_lookup(finder: Finder) -> Lookup:
    """Files offered for a package, through a ``Finder`` (full pages, shared with a re-resolve)."""
    return lambda name, ctx, filenames: _with_kept(finder, name, ctx, filenames, [o.file for o in finder.offers(name, ctx)[0]])


def _with_kept(finder: Finder, name: str, ctx: RouteContext, filenames: set[str], found: list[IndexFile]) -> list[IndexFile]:
    """``found``, and each of ``filenames`` it lacks that is a kept release's wheel where that release
    was published (PyPI's torch, listed in a lock by its own wheel: routing.toml ``kept``)."""
    have = {f.filename for f in found}
    for filename in sorted(filenames - have):
        try:
            version = parse_wheel_filename(filename)[1]
        except InvalidWheelFilename:
            continue
        found = [*found, *(o.file for o in finder.kept_release(name, version, ctx) if o.file.filename == filename)]
    return found


def listed_lookup(finder: Finder, plans: Iterable[LockPlan] = ()) -> Lookup:
    """Files offered for a package, through a ``Finder`` reading only the rows that name them
    (``Finder.listed``): given the ``plans`` to verify, the rows of every file they use for that
    package, so each page is parsed once for all of them (the locks of several targets share
    most pages)."""
    wanted: dict[str, set[str]] = {}
    for plan in plans:
        for pkg in plan.packages:
            for filename in (pkg.filename, pkg.sdist.filename if pkg.sdist else None):
                if filename:
                    wanted.setdefault(pkg.name, set()).add(filename)

    def lookup(name: str, ctx: RouteContext, filenames: set[str]) -> list[IndexFile]:
        rows = wanted.get(canonicalize_name(name), set()) | filenames
        return _with_kept(finder, name, ctx, filenames, [o.file for o in finder.listed(name, ctx, rows) if o.file.filename in filenames])

    return lookup


@dataclass(frozen=True, slots=True)
class Placement:
    """A plan whose ``index`` files were looked up on that index's own pages (their URLs there),
    and the files that could not be placed, with why."""

    plan: LockPlan
    unplaced: tuple[tuple[LockedPackage, str], ...] = ()


def place_files(plan: LockPlan, lookup: Lookup, *, index: str) -> Placement:
    """Each wheel of ``index`` the plan lists, at the URL ``index``'s page gives for that file
    name (a mirror's own layout, not the one a snapshot recorded), when the page lists it with the
    same sha256. A page that cannot be read stops the look-ups (every file left is unplaced, with
    that reason); a page that lists another sha256 for the file is an ``IntegrityError``."""
    ctx = route_context(plan)
    placed: dict[str, str] = {}
    unplaced: list[tuple[LockedPackage, str]] = []
    failure: str | None = None
    for pkg in (p for p in plan.packages if _placeable(p, index)):
        try:
            match = _offered(lookup, pkg, ctx) if failure is None else None
        except CrawlError as err:
            failure = f"its page could not be read ({err})"
        if failure is not None:
            unplaced.append((pkg, failure))
        elif match is None:
            unplaced.append((pkg, f"the {index} index's page for {pkg.name} does not list {pkg.filename}"))
        elif _differs(match.sha256, pkg.sha256):
            raise IntegrityError(
                match.url,
                f"the {index} index lists sha256 {match.sha256} for {pkg.filename}, the recorded plan {pkg.sha256}",
                hint="the index serves another file under this name; it is not locked",
            )
        else:
            placed[pkg.name] = match.url
    packages = tuple(replace(p, url=placed.get(p.name, p.url)) for p in plan.packages)
    return Placement(plan=replace(plan, packages=packages), unplaced=tuple(unplaced))


def _placeable(pkg: LockedPackage, index: str) -> bool:
    """A file of ``index`` the lock lists (a listed kept file too), with the URL it was found at."""
    return pkg.index == index and bool(pkg.url) and _listed_file(pkg)


def _listed_file(pkg: LockedPackage) -> bool:
    """Whether the lock names a file for ``pkg`` to be found on its index (a kept package the
    lock does not list has none)."""
    return bool(pkg.filename) and not (pkg.action is Action.KEEP and not pkg.sha256)


def _offered(lookup: Lookup, pkg: LockedPackage, ctx: RouteContext) -> IndexFile | None:
    """The file of ``pkg``'s name among those its index offers (``CrawlError`` when its page cannot be read)."""
    assert pkg.filename is not None
    return next((f for f in lookup(pkg.name, ctx, {pkg.filename}) if f.filename == pkg.filename), None)


def _differs(offered: str | None, locked: str | None) -> bool:
    """Whether two sha256 digests are both known and differ."""
    return bool(offered and locked and offered.lower() != locked.lower())


def verify_files(path: Path, plan: LockPlan, lookup: Lookup, *, source: str) -> list[Finding]:
    """Each wheel the lock downloads must still be offered, with the sha256 and size locked."""
    out: list[Finding] = []
    ctx = route_context(plan)
    for pkg in plan.packages:
        if pkg.action is Action.BUILD and pkg.sdist is not None and pkg.sdist.origin is not None:
            continue  # built from a source tree no index offers (checks/sources.py verifies it)
        if pkg.action is Action.BUILD and pkg.sdist is not None:  # a built wheel: its sdist is what the index offers
            pkg = replace(pkg, filename=pkg.sdist.filename, sha256=pkg.sdist.sha256, size=pkg.sdist.size)
        if not _listed_file(pkg):
            continue  # a kept package the lock does not list: nothing to verify
        try:
            problem = _offer_problem(_offered(lookup, pkg, ctx), pkg, source)
        except CrawlError as err:
            out.append(Finding(level=WARNING, path=path, package=pkg.name, message=f"cannot verify against {source}: {err}"))
            continue
        if problem:
            out.append(error_at(path, problem, package=pkg.name))
    return out


def _offer_problem(match: IndexFile | None, pkg: LockedPackage, source: str) -> str | None:
    """How the file an index offers differs from the one the lock names (None: it is that file)."""
    if match is None:
        return f"{pkg.filename} is not offered by the {pkg.index} index ({source})"
    if _differs(match.sha256, pkg.sha256):
        return f"sha256 {pkg.sha256} differs from the {pkg.index} index's {match.sha256} ({source})"
    if match.size is not None and pkg.size is not None and match.size != pkg.size:
        return f"size {pkg.size} differs from the {pkg.index} index's {match.size} ({source})"
    return None


def drift(path: Path, locked: LockPlan, fresh: LockPlan, *, source: str, hint: str | None) -> list[Finding]:
    """What a re-resolve picks now that the lock does not have (torch and FlashInfer first)."""
    old = {p.name: p.version for p in locked.packages}
    new = {p.name: p.version for p in fresh.packages}
    first = ("torch", "flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache")
    names = sorted(set(old) | set(new), key=lambda n: (first.index(n) if n in first else len(first), n))
    out = []
    for name in names:
        if old.get(name) == new.get(name):
            continue
        if name not in new:
            what = f"locked {old[name]}, no longer part of a fresh plan"
        elif name not in old:
            what = f"a fresh plan adds {new[name]}"
        else:
            direction = "newer" if new[name] > old[name] else "different"
            what = f"{source} now gives {new[name]}, {direction} than the locked {old[name]}"
        out.append(Finding(level=WARNING, path=path, package=name, message=f"drift: {what}", hint=hint))
    return out
