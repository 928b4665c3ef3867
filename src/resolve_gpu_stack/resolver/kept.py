"""The ``KeptTorch`` of a target, made once per request: what the target says of its torch, and what
its index says of it (its own wheel: URL, sha256, size; a declared torch's METADATA: its
``Requires-Dist`` and, without a ``+cuNNN`` label, its CUDA by its runtime pin).

Every door that judges, plans or lists against the kept torch asks this module once and hands the
value on: the resolve (``resolve.py``), ``inspect`` and ``candidates`` (``cli/assemble.py``), so
that they judge a wheel against the same torch with the same CUDA.
"""

from __future__ import annotations

from dataclasses import replace

from ..data.definitions import RouteContext
from ..errors import CrawlError
from ..index.finder import Finder
from ..model import Target
from ..model.channel import torch_origin
from ..model.cuda import CudaLabel, TorchCuda, kept_torch_cuda
from ..model.kept import KeptTorch
from ..model.request import TORCH, ResolveRequest
from ..rules.fit import TargetFit
from .torch_pins import kept_torch_wheel, probed_closure


def kept_torch(
    target: Target,
    finder: Finder | None,
    fit: TargetFit | None = None,
    *,
    requires: tuple[str, ...] = (),
    cuda: CudaLabel | None = None,
    metadata: bool = False,
) -> tuple[KeptTorch | None, tuple[str, ...]]:
    """(the target's kept torch, notes): None without a torch. ``requires``: a probed torch's
    installed ``Requires-Dist``; ``cuda``: ``--cuda`` (where a torch without label has no runtime
    pin at hand, the PyTorch index's twin of that CUDA stands in for its wheel). A declared
    torch's METADATA is read when its CUDA needs it (no label, no ``--cuda``) or ``metadata`` asks. Without a
    ``finder`` (``doctor``: offline), what the target alone says."""
    base = KeptTorch.of_target(target, requires)
    if base is None or finder is None:
        return _named(base, target, cuda), ()
    fit = fit if fit is not None else TargetFit(target)
    label = base.label or cuda
    ctx = RouteContext.of_torch(base.version, str(label) if label else None, torch_channel=base.channel)
    wheel = kept_torch_wheel(finder, ctx, fit, base.version, label)
    if wheel is None:
        return _named(base, target, cuda), ()
    kept = replace(base, wheel=wheel)
    if target.interpreter is not None or (label is not None and not metadata):
        return _named(kept, target, cuda), ()  # a probed torch: its Requires-Dist and CUDA are read from its own files
    try:
        found = finder.metadata(wheel).requires_dist
    except CrawlError as err:
        return _named(kept, target, cuda), (f"the METADATA of the installed torch {base.version} could not be read ({err.cause})",)
    return _named(replace(kept, requires_dist=found, cuda=base.cuda or kept_torch_cuda(base.version, found, target.markers)), target, cuda), ()


def route_context(request: ResolveRequest, cuda: CudaLabel) -> RouteContext:
    """The route context of a request's first crawl, read from its kept torch: the channel asked,
    the plan's CUDA (``cuda``, ``torch_selection.torch_cuda``) and where the kept torch was
    published (``KeptTorch.origin``: PyPI's pages for a release without a label). Raises as
    ``request.torch_choice`` does for a request ``resolve`` refuses."""
    kept = request.kept_torch
    return RouteContext(
        torch_channel=request.torch_choice.channel,
        cuda=str(cuda),
        flashinfer_channel=request.flashinfer.channel,
        torch_from=kept.origin if kept is not None else torch_origin(None),
    )


def _named(kept: KeptTorch | None, target: Target, cuda: CudaLabel | None) -> KeptTorch | None:
    """``kept`` with ``--cuda`` as its CUDA where nothing else names it (a declared torch without
    label whose METADATA was not read): the user said which build it is."""
    if kept is None or kept.cuda is not None or cuda is None or target.interpreter is not None:
        return kept
    return replace(kept, cuda=TorchCuda(cuda, "declared"))


def with_kept(request: ResolveRequest, finder: Finder, fit: TargetFit | None = None) -> ResolveRequest:
    """``request`` with its ``KeptTorch`` made (unchanged when it has one for its torch, or no torch).
    A probed torch's closure comes with it, read from the installed dists (``probed_closure``); a
    declared torch's is attached after the crawl (``torch_pins.with_torch_pins``)."""
    installed = request.installed_torch
    if installed is None:
        return request
    if request.kept is not None and request.kept.version == installed:
        return _with_probed_closure(request, request.kept)
    kept, _ = kept_torch(request.target, finder, fit, requires=request.installed_requires.get(TORCH, ()), cuda=request.cuda)
    return request if kept is None else _with_probed_closure(request, kept)


def _with_probed_closure(request: ResolveRequest, kept: KeptTorch) -> ResolveRequest:
    """``request`` holding ``kept``, with its closure read from the installed dists where the target
    says what is installed (a probed interpreter, or dists whose METADATA was read)."""
    probed = request.target.interpreter is not None or bool(request.installed_requires.get(TORCH))
    if probed and kept.closure is None:
        kept = replace(kept, closure=probed_closure(request))
    return request if kept is request.kept else replace(request, kept=kept)


__all__ = ["kept_torch", "route_context", "with_kept"]
