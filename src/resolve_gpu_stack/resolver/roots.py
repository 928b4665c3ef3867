"""The pages a resolve reads first: torch's, the FlashInfer components', the ``--with`` names'.

``resolve`` reads them in one round before anything else (``first_round``). Which pages they are
follows from the request and the definitions alone, except where the request leaves torch's CUDA
to an index (a declared torch without a ``+cuNNN`` label, whose CUDA its METADATA tells) or a
``--build`` tree replaces a package's pages. Everywhere else the command starts that round before
it asks the plan store and loads the resolver (``read_ahead``, from ``cli/assemble.py``), so the
first round trip overlaps the import of the resolver, the scanner and resolvelib (``cli/resolving.py``:
~40 ms of a cold start's CPU); the store's check of a reused plan and the resolver's own round then
wait for those pages instead of asking again (the finder never reads a page twice at once).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import replace

from ..data.definitions import Definitions, RouteContext
from ..errors import ResolveGpuStackError
from ..index.finder import Finder
from ..model.request import TORCH, ResolveRequest, TorchKind
from ..rules.versions import torch_series
from .kept import route_context
from .torch_selection import torch_cuda

log = logging.getLogger(__name__)


def keeps_pypis_torch(request: ResolveRequest) -> bool:
    """Whether ``request`` keeps PyPI's torch with ``--torch installed`` (a release without a local
    label): it installs no torch, so the PyTorch index is not asked for one (its own release, on
    PyPI's page, is what the selection checks the target against)."""
    kept = request.kept_torch
    return kept is not None and request.torch_choice.kind is TorchKind.INSTALLED and kept.origin == "pypi"


def first_round(request: ResolveRequest, components: Sequence[str], ctx: RouteContext) -> tuple[list[str], RouteContext]:
    """The names whose pages the first round reads (torch's unless PyPI's is kept), and the
    context it reads them under: the legacy AOT page needs torch's series, guessed from the
    installed torch (read later if the chosen torch has another series)."""
    names = [*([] if keeps_pypis_torch(request) else [TORCH]), *components, *(r.name for r in request.with_), *request.build_roots]
    installed = request.installed_torch
    if installed is None:
        return names, ctx
    return names, replace(ctx, torch_series=torch_series(installed))


def known_first_round(request: ResolveRequest, defs: Definitions) -> tuple[list[str], RouteContext] | None:
    """``first_round`` as ``resolve`` will ask for it, worked out from the request alone; None
    where an index decides it (a declared torch without a CUDA label, a ``--build`` tree) or the
    request is one ``resolve`` refuses (it says why)."""
    installed = request.installed_torch
    target = request.target
    cuda_known = installed is None or request.installed_torch_cuda is not None or request.cuda is not None or target.interpreter is not None
    if request.build_sources or not cuda_known:
        return None
    try:
        ctx = route_context(request, torch_cuda(request))
    except (ResolveGpuStackError, ValueError):
        return None
    components = defs.flashinfer.requested(cubin=request.cubin, jit_cache=request.jit_cache) if request.flashinfer.wanted else ()
    return first_round(request, components, ctx)


def read_ahead(finder: Finder, request: ResolveRequest, defs: Definitions) -> threading.Thread | None:
    """Start reading ``known_first_round``'s pages on a thread of their own (a fetcher that takes
    calls from several threads only); the thread, for the caller to join, or None."""
    if not finder.fetcher.concurrent_calls:
        return None
    known = known_first_round(request, defs)
    if known is None:
        return None
    names, ctx = known

    def read() -> None:
        try:
            finder.prefetch(names, ctx)  # a page that cannot be read is remembered, and raised where it is needed
        except Exception as exc:  # noqa: BLE001 - the resolver's own round reads again and raises it with its context
            log.debug("reading ahead: %s", exc)

    thread = threading.Thread(target=read, name="first-pages", daemon=True)
    thread.start()
    return thread


__all__ = ["first_round", "known_first_round", "read_ahead"]
