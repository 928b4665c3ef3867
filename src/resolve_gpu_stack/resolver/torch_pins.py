"""What a declared target with an installed torch also has: the versions that torch pins exactly.

An environment with a torch wheel installed has that wheel's exact ``==`` requirements installed
with it (a nightly torch pins ``triton==3.7.0+git9c288bc5``): pip and uv install them together.
A declared target (``--installed torch==...``, a configured target) names only torch, so these
pins are read from the METADATA of that exact torch wheel on the index and taken as installed, as
if the user had listed them. A name the user did list keeps the user's version.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from packaging.utils import NormalizedName
from packaging.version import InvalidVersion, Version

from ..data.definitions import RouteContext
from ..errors import CrawlError, ResolveGpuStackError
from ..index.finder import Finder
from ..index.parse import RequiresDist, parse_requires_dist
from ..model import IndexFile, Target
from ..model.cuda import CudaLabel, kept_torch_cuda
from ..model.request import TORCH, ResolveRequest
from ..rules.fit import TargetFit


def with_torch_pins(request: ResolveRequest, finder: Finder, ctx: RouteContext, fit: TargetFit) -> tuple[ResolveRequest, list[str]]:
    """``request`` with the installed torch's exact pins added to its declared target's installed
    set, and a note for each. Unchanged for a real interpreter (its installed set is read from it),
    without an installed torch, or when that torch's wheel is not on the index."""
    installed = request.installed_torch
    target = request.target
    if installed is None or target.interpreter is not None or request.installed_requires.get(TORCH):
        return request, []
    wheel = kept_torch_wheel(finder, ctx, fit, installed)
    if wheel is None:
        return request, []
    try:
        requires = finder.metadata(wheel).requires_dist
    except CrawlError as err:
        return request, [f"the METADATA of the installed torch {installed} could not be read ({err.cause}): only what --installed names is taken as installed"]
    pins = {name: version for name, version in exact_pins(requires, target, finder.requires_dist).items() if name not in target.installed}
    if not pins:
        return request, []
    listed = ", ".join(f"{name} {version}" for name, version in sorted(pins.items()))
    note = f"taken as installed (kept) with torch {installed}, which pins them exactly: {listed}"
    return replace(request, target=replace(target, installed={**target.installed, **pins})), [note]


def with_declared_torch_cuda(request: ResolveRequest, finder: Finder, ctx: RouteContext, fit: TargetFit) -> ResolveRequest:
    """``request`` whose declared torch without a ``+cuNNN`` label (and no ``--cuda``) has its CUDA
    from that release's METADATA (its runtime pin, the one rule), read from its own wheel (PyPI's,
    routing.toml ``kept``; or an index mirrored flat: ``--index pytorch=flat:URL``). Unchanged
    otherwise: the torch selection then asks for ``--cuda``, saying why."""
    installed = request.installed_torch
    target = request.target
    if installed is None or installed.local is not None or request.cuda is not None or target.interpreter is not None or target.torch_cuda is not None:
        return request
    wheel = kept_torch_wheel(finder, ctx, fit, installed)
    if wheel is None:
        return request
    try:
        requires = finder.metadata(wheel).requires_dist
    except CrawlError:
        return request
    found = kept_torch_cuda(installed, requires, target.markers)
    return request if found is None else replace(request, target=replace(target, torch_cuda=found))


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
