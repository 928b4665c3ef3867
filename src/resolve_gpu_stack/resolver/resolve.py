"""Orchestration: a request + a finder -> a LockPlan, or an error in the stack's own terms.

It only wires the steps: torch selection (``torch_selection``), candidates (``factory``),
FlashInfer selection (``flashinfer_selection``), prefetching (``prefetch``), resolvelib over the
thin ``provider``, the plan (``planning``) and its invariants (``policy.plan_violations``).
"""

from __future__ import annotations

from collections.abc import Sequence

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from resolvelib import BaseReporter, Resolver
from resolvelib.resolvers import ResolutionImpossible, ResolutionTooDeep

from ..data.definitions import Definitions, RouteContext
from ..errors import CrawlError, NoPlanError
from ..index.finder import Finder
from ..model import LockPlan
from ..model.request import TORCH, ResolveRequest, parse_with
from .dependencies import Dependencies
from .factory import CandidateFactory, Judge, Policy
from .flashinfer_selection import FlashInferOffer, FlashInferSelection, legacy_notes, select_flashinfer
from .planning import PlanContext, build_plan
from .policy import describe_versions, plan_violations, torch_series
from .prefetch import Prefetcher
from .provider import StackProvider
from .requirement import Req
from .torch_selection import TorchSelection, select_torch, target_words, torch_cuda


def resolve(request: ResolveRequest, finder: Finder, defs: Definitions) -> LockPlan:
    """The plan for ``request``. With a fetcher that stores results, a plan computed earlier
    from the same inputs is returned when every page and METADATA file it came from is
    unchanged (see reuse.py)."""
    from . import reuse

    key = reuse.result_key(request, defs) if finder.fetcher.result_store is not None else None
    if key is not None:
        plan = reuse.reuse(finder, key)
        if plan is not None:
            return plan
    plan = _resolve(request, finder, defs)
    if key is not None:
        reuse.remember(finder, key, plan)
    return plan


def _resolve(request: ResolveRequest, finder: Finder, defs: Definitions) -> LockPlan:
    from .torch_pins import with_torch_pins

    cuda = torch_cuda(request)
    choice = request.torch.for_installed(request.installed_torch)
    ctx = RouteContext(torch_channel=choice.channel, cuda=str(cuda), flashinfer_channel=request.flashinfer.channel)
    components = defs.flashinfer.requested(cubin=request.cubin, jit_cache=request.jit_cache) if request.flashinfer.wanted else ()
    _prefetch_roots(finder, request, components, ctx)
    torch = select_torch(request, cuda, *finder.offers(TORCH, ctx))

    ctx = RouteContext(torch_channel=choice.channel, cuda=str(cuda), flashinfer_channel=request.flashinfer.channel, torch_series=torch.series)
    requirements = _requirements(request, defs)
    factory, flashinfer, provider = _wire(request, defs, finder, torch, ctx, components, crawl=requirements)
    pinned, pin_notes = with_torch_pins(request, finder, ctx)  # after the crawl: the torch METADATA is in
    if pinned is not request:  # a declared torch's exact pins came with it: the same pages, candidates rebuilt
        request = pinned
        factory, flashinfer, provider = _wire(request, defs, finder, torch, ctx, components, crawl=requirements)  # all in memory now
    try:
        result = Resolver(provider, BaseReporter()).resolve(requirements, max_rounds=5000)
    except ResolutionImpossible as exc:
        raise _explain_impossible(exc, factory) from None
    except ResolutionTooDeep as exc:
        raise NoPlanError(f"gave up after {exc.args[0] if exc.args else 'many'} rounds of backtracking", hint="pin more of the closure with --with NAME==VERSION") from None

    plan = build_plan(result, PlanContext(request=request, defs=defs, torch=torch, flashinfer=flashinfer, components=components, offers=factory.offers), [*torch.notes, *pin_notes, *(flashinfer.notes if flashinfer else ())])
    violations = plan_violations(plan, defs, torch_floor=None if request.allow_downgrade else torch.installed, require_hashes=False)
    if violations:
        raise NoPlanError("the plan breaks the stack's invariants (a bug; please report it)", reasons=[str(v) for v in violations])
    return plan


def _wire(request: ResolveRequest, defs: Definitions, finder: Finder, torch: TorchSelection, ctx: RouteContext, components: tuple[str, ...], *,
          crawl: Sequence[Req] = ()) -> tuple[CandidateFactory, FlashInferSelection | None, StackProvider]:
    """The candidate factory, the FlashInfer selection and the provider for ``request``; the
    closure of ``crawl`` prefetched."""
    judge = Judge(defs=defs, target=request.target, torch=torch.newest, cuda=torch.cuda)
    factory = CandidateFactory(finder, judge, ctx, torch_allowed=torch.allowed, installed_requires=request.installed_requires)
    flashinfer = _select_flashinfer(request, defs, torch, factory, components) if request.flashinfer.wanted else None
    policy = _policy(request, defs, torch, flashinfer, components)
    dependencies = Dependencies(finder, request.target, defs.flashinfer, policy)
    prefetcher = Prefetcher(factory, dependencies, policy)
    if crawl:
        prefetcher.closure(crawl)
    return factory, flashinfer, StackProvider(factory, dependencies, prefetcher, policy)


def _policy(request: ResolveRequest, defs: Definitions, torch: TorchSelection, flashinfer: FlashInferSelection | None, components: tuple[str, ...]) -> Policy:
    return Policy(
        flashinfer_python=defs.flashinfer.python,
        prerelease_packages=_prerelease_packages(request, torch, defs),
        flashinfer_versions=flashinfer.versions if flashinfer is not None else None,
        flashinfer_components=components,
        installed_requires=request.installed_requires,
    )


def _prefetch_roots(finder: Finder, request: ResolveRequest, components: Sequence[str], ctx: RouteContext) -> None:
    """Read the pages the first steps need (torch, the FlashInfer components, --with names) in one
    round of concurrent requests. The legacy AOT page needs torch's series: guessed from the
    installed torch (read later if the chosen torch has another series)."""
    names = [TORCH, *components]
    for text in request.with_:
        try:
            names.append(canonicalize_name(Requirement(text).name))
        except InvalidRequirement:
            pass  # parse_with says what is wrong
    installed = request.installed_torch
    guess = ctx if installed is None else RouteContext(torch_channel=ctx.torch_channel, cuda=ctx.cuda, flashinfer_channel=ctx.flashinfer_channel, torch_series=torch_series(installed))
    try:
        finder.prefetch(names, guess)
    except CrawlError:
        pass  # remembered by the finder; raised where the page is needed


def _select_flashinfer(request: ResolveRequest, defs: Definitions, torch: TorchSelection, factory: CandidateFactory, components: Sequence[str]) -> FlashInferSelection:
    fi = defs.flashinfer
    python = tuple(c.version for c in factory.candidates(fi.python))
    notes = legacy_notes(factory.visits.get(fi.python, []), factory.rejections.get(fi.python, []))
    cubin = frozenset(c.version for c in factory.candidates(fi.cubin)) if fi.cubin in components else frozenset()
    jit = frozenset(c.version for c in factory.candidates(fi.jit_cache)) if fi.jit_cache in components else frozenset()
    offer = FlashInferOffer(python=python, cubin=cubin, jit_cache=jit)
    selected = select_flashinfer(request, defs, torch.cuda, components, offer, where=target_words(request.target))
    return FlashInferSelection(versions=selected.versions, notes=notes + selected.notes)


def _prerelease_packages(request: ResolveRequest, torch: TorchSelection, defs: Definitions) -> frozenset[str]:
    """The packages that may be pre-releases without a pre-release specifier: the PyTorch family
    on a pre-release torch channel, the FlashInfer components on a pre-release FlashInfer."""
    out: set[str] = set()
    if torch.choice.allows_prereleases:
        out |= defs.pytorch_family
    if request.flashinfer.allows_prereleases:
        out |= set(defs.flashinfer.components)
    return frozenset(out)


def _requirements(request: ResolveRequest, defs: Definitions) -> list[Req]:
    out = [Req(name=TORCH, specifier=SpecifierSet(), parent="(requested)", text=f"torch ({request.torch})")]
    if request.flashinfer.wanted:
        out.append(Req(name=defs.flashinfer.python, specifier=SpecifierSet(), parent="(requested)", text=f"flashinfer-python ({request.flashinfer})"))
    for text in request.with_:
        req = parse_with(text)
        out.append(Req(name=canonicalize_name(req.name), specifier=req.specifier, extras=frozenset(req.extras), parent="(requested with --with)", text=str(req)))
    return out


def _explain_impossible(exc: ResolutionImpossible, factory: CandidateFactory) -> NoPlanError:  # type: ignore[type-arg,unused-ignore]
    reasons = []
    for cause in exc.causes:
        req: Req = cause.requirement
        parent = f"{cause.parent}" if cause.parent is not None else (req.parent or "the request")
        available = [c.version for c in factory.candidates(req.name)]
        reasons.append(f"{parent} requires {req}; available for this target: {describe_versions(available)}")
    names = sorted({c.requirement.name for c in exc.causes})
    return NoPlanError(f"no plan satisfies every requirement on {', '.join(names)}", reasons=sorted(set(reasons)), hint="relax a --with pin or pick another --flashinfer / --torch")
