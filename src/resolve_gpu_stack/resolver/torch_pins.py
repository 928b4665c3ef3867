"""What a target with an installed torch also has: the versions that torch pins exactly (its closure).

An environment with a torch wheel installed has that wheel's exact ``==`` requirements installed
with it (a nightly torch pins ``triton==3.7.0+git9c288bc5``; PyPI's torch 2.15.0 pins
``cuda-toolkit[cublas,cudart,...]==13.2.2``, whose extras pin ``nvidia-cuda-runtime==13.2.86.*``):
pip and uv install them together. A declared target (``--installed torch==...``, a configured
target) names only torch, so these pins are read from the METADATA of that exact torch wheel on the
index, followed through the pinned packages' METADATA there (``kept_closure``), and taken as
installed, as if the user had listed them. A name the user did list keeps the user's version. A
real interpreter's closure is read from its installed dists the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from packaging.specifiers import SpecifierSet
from packaging.utils import NormalizedName
from packaging.version import InvalidVersion, Version

from ..data.definitions import RouteContext
from ..errors import CrawlError, ResolveGpuStackError
from ..index.finder import Finder
from ..index.parse import RequiresDist, parse_requires_dist
from ..model import IndexFile, Target
from ..model.cuda import CudaLabel
from ..model.request import TORCH, ResolveRequest
from ..rules.fit import TargetFit
from .kept_closure import KeptClosure, applies, exact_specifier, read_closure


def with_torch_pins(request: ResolveRequest, finder: Finder, ctx: RouteContext, fit: TargetFit) -> tuple[ResolveRequest, list[str]]:
    """``request`` with its kept torch's closure attached (``KeptTorch.closure``: what torch pins
    exactly, through the extras it asks for) and, for a declared target, its installed set holding
    that closure; a note for what was taken as installed and each pin that could not be followed.
    A real interpreter's closure came with its ``KeptTorch`` (``resolver/kept.py``, from its
    installed dists); a declared one is read here, once, from the index. The closure stays None
    without an installed torch or when that torch's wheel is not on the index."""
    installed = request.installed_torch
    target = request.target
    kept = request.kept
    if installed is None or kept is None or kept.version != installed:
        return request, []
    if target.interpreter is not None or request.installed_requires.get(TORCH):
        return request, list(kept.closure.unread) if kept.closure is not None else []
    wheel = kept_torch_wheel(finder, ctx, fit, installed)
    if wheel is None:
        return request, []
    try:
        requires = finder.metadata(wheel).requires_dist
    except CrawlError as err:
        return (
            request,
            [f"the METADATA of the installed torch {installed} could not be read ({err.cause}): only what --installed names is taken as installed"],
        )
    closure = read_closure(
        installed,
        requires,
        target.markers,
        version_of=lambda name, spec: target.installed.get(name) or _newest_on_index(finder, ctx, fit, name, spec),
        requires_of=lambda name, version: _requires_on_index(finder, ctx, fit, name, version),
        parse=finder.requires_dist,
        ahead=lambda pins: _read_ahead(finder, ctx, fit, target, pins),
    )
    request = replace(request, kept=replace(kept, closure=closure))
    added = {pin.name: pin.version for pin in closure.pins if pin.name not in target.installed}
    notes = list(closure.unread)
    if not added:
        return request, notes
    listed = closure_words(closure, added)
    note = f"taken as installed (kept) with torch {installed}, which pins them exactly: {listed}"
    return replace(request, target=replace(target, installed={**target.installed, **added})), [note, *notes]


def probed_closure(request: ResolveRequest) -> KeptClosure | None:
    """The closure of a real interpreter's torch, from its installed dists' METADATA (what is not
    installed is not part of what it keeps: the plan installs it as torch requires)."""
    installed = request.installed_torch
    if installed is None:
        return None
    have = request.target.installed
    return read_closure(
        installed,
        request.installed_requires.get(TORCH, ()),
        request.target.markers,
        version_of=lambda name, spec: v if (v := have.get(name)) is not None and spec.contains(v, prereleases=True) else None,
        requires_of=lambda name, version: request.installed_requires.get(name) if have.get(name) == version else None,
        where="installed",
    )


def closure_words(closure: KeptClosure, names: Mapping[NormalizedName, Version]) -> str:
    """``cuda-toolkit 13.2.2, nvidia-cuda-runtime 13.2.86 (by cuda-toolkit 13.2.2[cudart])``: the pins of ``names``."""
    direct = f"torch {closure.torch}"
    out = []
    for pin in sorted((p for p in closure.pins if p.name in names), key=lambda p: p.name):
        by = pin.pinned_by.removeprefix(direct + "'s ")
        out.append(f"{pin.name} {pin.version}" + ("" if pin.pinned_by == direct else f" (by {by})"))
    return ", ".join(out)


def _newest_on_index(finder: Finder, ctx: RouteContext, fit: TargetFit, name: NormalizedName, spec: SpecifierSet) -> Version | None:
    """The newest version of ``name`` in ``spec`` with a wheel for this target on its index."""
    try:
        offers, _ = finder.offers(name, ctx)
    except ResolveGpuStackError:
        return None
    return max(
        (o.file.version for o in offers if o.file.is_wheel and fit.tag_rank(o.file) is not None and spec.contains(o.file.version, prereleases=True)),
        default=None,
    )


def _read_ahead(finder: Finder, ctx: RouteContext, fit: TargetFit, target: Target, pins: Sequence[RequiresDist]) -> None:
    """Read at once what the closure's look-ups of ``pins`` will ask for: their pages in one round,
    then the METADATA of each one's wheel of the version ``_newest_on_index`` picks in another
    (one after the other, a chain of cuda-toolkit's dozen pins was two round trips each). Then the
    same for what those pins require by a range (``nvidia-nvjitlink>=13.2.86``): the closure does
    not follow them, the wiring that takes it as installed does, once the crawl has ended."""
    read = _read_newest(finder, ctx, fit, target, pins)
    ranges = {req.name: req for pin, wheel in read for req in _ranges(finder, wheel, target, frozenset(pin.extras))}
    _read_newest(finder, ctx, fit, target, list(ranges.values()))


def _read_newest(finder: Finder, ctx: RouteContext, fit: TargetFit, target: Target, reqs: Sequence[RequiresDist]) -> list[tuple[RequiresDist, IndexFile]]:
    """The pages of ``reqs`` in one round, then the METADATA of each one's wheel of the installed
    version, else the newest its specifier holds, in another; each requirement with that wheel."""
    finder.prefetch([r.name for r in reqs if r.name not in target.installed], ctx)
    read = []
    for req in reqs:
        version = target.installed.get(req.name) or _newest_on_index(finder, ctx, fit, req.name, req.specifier)
        wheel = _wheel_of(finder, ctx, fit, req.name, version) if version is not None else None
        if wheel is not None:
            read.append((req, wheel))
    try:
        finder.prefetch_metadata(wheel for _, wheel in read)
    except ResolveGpuStackError:
        return []  # the look-up of that METADATA says it, as without reading ahead
    return read


def _ranges(finder: Finder, wheel: IndexFile, target: Target, extras: frozenset[str]) -> list[RequiresDist]:
    """What ``wheel`` requires by a range (not an exact pin) on ``target`` with ``extras``, of packages it does not have."""
    try:
        lines = finder.metadata(wheel).requires_dist
    except ResolveGpuStackError:
        return []
    reqs = (finder.requires_dist(line) for line in lines)
    return [
        r
        for r in reqs
        if r is not None and not r.url and not exact_specifier(r.specifier) and r.name not in target.installed and applies(r, target.markers, extras)
    ]


def _wheel_of(finder: Finder, ctx: RouteContext, fit: TargetFit, name: NormalizedName, version: Version) -> IndexFile | None:
    """``name`` ``version``'s best wheel for this target on its index."""
    try:
        offers, _ = finder.offers(name, ctx)
    except ResolveGpuStackError:
        return None
    return _best(fit, [o.file for o in offers if o.file.version == version])


def _requires_on_index(finder: Finder, ctx: RouteContext, fit: TargetFit, name: NormalizedName, version: Version) -> tuple[str, ...] | None:
    """The Requires-Dist of ``name`` ``version``'s best wheel for this target on its index."""
    wheel = _wheel_of(finder, ctx, fit, name, version)
    try:
        return finder.metadata(wheel).requires_dist if wheel is not None else None
    except ResolveGpuStackError:
        return None


def kept_torch_wheel(finder: Finder, ctx: RouteContext, fit: TargetFit, version: Version, label: CudaLabel | None = None) -> IndexFile | None:
    """The wheel of the kept torch ``version`` for this target (best tag first), to know it by (its
    METADATA, its exports). A release without a local label is PyPI's build: its own wheel where
    its ``kept`` route says it was published, else that exact version on the PyTorch index (a flat
    mirror), else its twin there with the CUDA ``label`` (PyPI's 2.15.0 is the index's
    2.15.0+cu132, the same build). A labelled one: the PyTorch index's."""
    own = _published(finder, ctx, fit, version) if version.local is None else None
    return own or _on_the_pytorch_index(finder, ctx, fit, version, label)


def _published(finder: Finder, ctx: RouteContext, fit: TargetFit, version: Version) -> IndexFile | None:
    try:
        return _best(fit, [o.file for o in finder.kept_release(TORCH, version, ctx)])
    except ResolveGpuStackError:  # PyPI without a URL (a snapshot of other indexes only)
        return None


def _on_the_pytorch_index(finder: Finder, ctx: RouteContext, fit: TargetFit, version: Version, label: CudaLabel | None) -> IndexFile | None:
    try:
        offers, _ = finder.offers(TORCH, ctx)
    except ResolveGpuStackError:
        return None  # the torch selection reads these pages too; it says what went wrong
    exact = _best(fit, [o.file for o in offers if o.file.version == version])
    if exact is not None or version.local is not None or label is None:
        return exact
    return _best(fit, [o.file for o in offers if o.file.version.public == version.public and o.file.version.local == str(label)])


def _best(fit: TargetFit, files: list[IndexFile]) -> IndexFile | None:
    ranked = [(rank, f) for f in files if f.is_wheel and (rank := fit.tag_rank(f)) is not None]
    return min(ranked, key=lambda rf: rf[0])[1] if ranked else None


def exact_pins(
    requires_dist: tuple[str, ...], target: Target, parse: Callable[[str], RequiresDist | None] = parse_requires_dist
) -> dict[NormalizedName, Version]:
    """``name==version`` requirements (one exact specifier, no wildcard) whose markers hold on the
    target (``parse``: a finder's ``requires_dist``, which parses each line once)."""
    env = {**target.markers, "extra": ""}
    out: dict[NormalizedName, Version] = {}
    for text in requires_dist:
        req = parse(text)
        if req is None:
            continue
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        specs = list(req.specifier)
        if len(specs) != 1 or specs[0].operator != "==" or specs[0].version.endswith(".*"):
            continue
        try:
            out[req.name] = Version(specs[0].version)
        except InvalidVersion:
            continue
    return out
