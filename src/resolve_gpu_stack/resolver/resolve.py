"""Orchestration: a request + a finder -> a LockPlan, or an error in the stack's own terms.

It only wires the steps: torch selection (``torch_selection``), candidates (``factory``),
FlashInfer selection (``flashinfer_selection``), prefetching (``prefetch``), resolvelib over the
thin ``provider``, the plan (``planning``) and its invariants (``policy.plan_violations``).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from packaging.specifiers import SpecifierSet
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version
from resolvelib.resolvers import ResolutionImpossible, ResolutionTooDeep, Result

from ..data.definitions import Definitions, RouteContext
from ..errors import CrawlError, NoPlanError
from ..index.finder import Finder
from ..index.variants import VariantTarget, properties_text
from ..model import Coupling, IndexFile, LockPlan
from ..model.abi import AbiKind, WheelAbi
from ..model.channel import torch_origin
from ..model.cuda import CudaLabel
from ..model.request import TORCH, ResolveRequest
from ..rules.abi import AbiPolicy, AbiTorch, ExportsSource, asks_for_exports
from ..rules.fit import TargetFit
from ..rules.gate import broken_message, gate
from ..rules.invariants import synthetic_note, synthetic_rows
from ..rules.versions import public
from . import builds, framework, walkback
from .coupling import Found, ScanAhead, WheelClassifier
from .dependencies import Dependencies
from .explain import closure_conflict, explain_impossible
from .factory import CandidateFactory, Judge, Policy
from .flashinfer_selection import FlashInferOffer, FlashInferSelection, Floor, flashinfer_floors, legacy_notes, select_flashinfer
from .kept import route_context, with_kept
from .kept_closure import KeptClosure
from .overrides import WITHOUT, OverrideRules, Overrides, unused_without_note
from .planning import PlanContext, build_plan
from .prefetch import Prefetcher
from .provider import StackProvider
from .reachability import LeftOut, leave_out_unreachable
from .requirement import BUILD_PARENT, WITH_PARENT, Cand, Key, Req
from .roots import first_round, keeps_pypis_torch
from .sources import source_file, source_metadata
from .torch_pins import with_torch_pins
from .torch_selection import TorchSelection, kept_way_out, select_torch, target_words, torch_cuda

if TYPE_CHECKING:
    from ..index.sdist import SdistMetadata

log = logging.getLogger(__name__)

_A = TypeVar("_A")
_B = TypeVar("_B")


def resolve(
    request: ResolveRequest,
    finder: Finder,
    defs: Definitions,
    *,
    classifier: WheelClassifier,
    exports: ExportsSource,
    sdist_metadata: SdistMetadata | None = None,
) -> LockPlan:
    """The plan for ``request``, resolved (a plan stored for the same inputs is reused one floor up,
    by ``cli/assemble.ResolveParts.resolve`` through ``reuse.reused_or``). ``classifier`` tells what a native wheel's shared objects import;
    ``exports`` what the plan's torch exports (read only when a version-locked wheel asks). Every
    compiled wheel the data does not cover is judged by them (``rules/abi.py``). ``sdist_metadata``:
    what the build backend of a ``--build`` package's sdist says, when its PKG-INFO is not static
    (``index/sdist.py``); without it, the PKG-INFO is taken as it is.

    Reentrant: what one resolve remembers lives in its own objects (the candidate factory, the
    target's ``TargetFit``) or in the finder, which several resolves may share, in turn or at once."""
    with ScanAhead(classifier) as ahead:  # scans start during the closure crawl
        return _resolve(request, finder, defs, ahead, exports, sdist_metadata)


def _resolve(
    request: ResolveRequest, finder: Finder, defs: Definitions, classifier: ScanAhead, exports: ExportsSource, sdist_metadata: SdistMetadata | None = None
) -> LockPlan:
    """The plan; a plan that cannot be made on a torch kept by default says how to let torch move."""
    try:
        return _resolve_on(request, finder, defs, classifier, exports, sdist_metadata)
    except NoPlanError as err:
        way = kept_way_out(request)
        if request.keeps_torch_by_default and way not in (err.hint or ""):  # a way out, not a reason: with the hint's
            err.hint = f"{err.hint}\n  {way}" if err.hint else way
        raise


def _resolve_on(
    request: ResolveRequest, finder: Finder, defs: Definitions, classifier: ScanAhead, exports: ExportsSource, sdist_metadata: SdistMetadata | None
) -> LockPlan:
    fit = TargetFit(request.target)  # this target's tag ranks, shared by the torch selection and both wirings
    sel = _select(request, finder, defs, classifier, exports, fit)
    floors, floor_notes = flashinfer_floors(sel.request, defs.gpu_table) if sel.request.flashinfer.wanted else ((), ())
    wired = _wired(sel, finder, defs, floors, classifier, fit, sdist_metadata)
    request, w, closure = wired.request, wired.wiring, wired.closure
    result = _run_resolvelib(w.provider, w.requirements, w.factory, w.flashinfer, closure)
    _refuse_walk_backs(request, defs, w, result, closure)

    abi_torch = _abi_torch(result.mapping, sel.torch, exports, sel.own)
    facts = _framework_facts(request, defs, result.mapping, w.dependencies, w.overrides, w.factory, w.policy, w.requirements, classifier, abi_torch)
    if request.abi_mismatch == "error":
        framework.refuse_mismatches(facts.found, _parent_names(result), _torch_of(result.mapping), facts.ways)
    notes = [
        *((sel.reach.warning,) if sel.reach.warning is not None else ()),
        *sel.torch.notes,
        *wired.pin_notes,
        *(w.flashinfer.notes if w.flashinfer else ()),
        *floor_notes,
        *_provider_notes(result, request, defs, w.dependencies, w.factory),
        *_undated_notes(request, result.mapping),
        *_status_notes(w.factory, result.mapping),
        *_variant_notes(w.factory, result.mapping),
    ]
    plan_ctx = PlanContext(
        request=request,
        defs=defs,
        torch=sel.torch,
        flashinfer=w.flashinfer,
        components=sel.reach.components,
        facts=facts,
        offers=w.factory.offers,
        kept_wheel=sel.own,
        closure=closure,
    )
    return _checked(build_plan(result, plan_ctx, notes), defs, request, None if request.allow_downgrade else sel.torch.installed)


class _Selected(NamedTuple):
    """The first steps of a resolve: the request with its kept torch made, the torch selected."""

    request: ResolveRequest
    kept: Version | None  # the installed torch the request names
    torch: TorchSelection
    reach: LeftOut  # the FlashInfer components planned, less those of an index that cannot be read
    own: IndexFile | None  # a kept torch from PyPI: its own wheel
    ctx: RouteContext  # the family's route context: it follows its torch (routing.toml)


def _select(request: ResolveRequest, finder: Finder, defs: Definitions, classifier: ScanAhead, exports: ExportsSource, fit: TargetFit) -> _Selected:
    """The first crawl (torch, the FlashInfer components, --with names) and the torch selection;
    the kept torch's exports read ahead, once a scan asks, when the plan keeps PyPI's torch."""
    if request.installed_torch is not None and request.installed_torch_cuda is None and request.cuda is None:
        request = with_kept(request, finder, fit)  # a declared torch without label: its CUDA is its METADATA's (its runtime pin)
    cuda = torch_cuda(request)
    kept = request.installed_torch
    ctx = route_context(request, cuda)
    # `--torch installed` keeping PyPI's torch installs no torch: the PyTorch index is not asked for
    # one (its own release, on PyPI's page, is what the selection checks the target against)
    pypi_kept = keeps_pypis_torch(request)
    reach = _first_crawl(request, finder, defs, ctx)
    request = with_kept(request, finder, fit)  # the kept torch, made once: its wheel on the pages just read
    torch_offers, torch_visits = (finder.kept_release(TORCH, kept, ctx), []) if pypi_kept and kept is not None else finder.offers(TORCH, ctx)
    torch = select_torch(request, cuda, torch_offers, torch_visits, fit=fit)
    own = request.kept.wheel if request.kept is not None and kept is not None and kept.local is None else None  # PyPI's torch: its own wheel
    if kept is not None and own is not None and torch.allowed == (kept,):  # the plan's torch: its exports read during the crawl, once a scan asks
        classifier.follow(_exports_ahead(kept, own, torch, exports, AbiPolicy.of(defs.abi)))
    return _Selected(request, kept, torch, reach, own, _family_context(request, kept, torch, cuda))


def _first_crawl(request: ResolveRequest, finder: Finder, defs: Definitions, ctx: RouteContext) -> LeftOut:
    """The --build source trees added, the roots' pages read in one round, and the FlashInfer
    components planned, less those on an optional index that cannot be read (a host down: warned)."""
    components = defs.flashinfer.requested(cubin=request.cubin, jit_cache=request.jit_cache) if request.flashinfer.wanted else ()
    for tree in request.build_sources:  # --build 'NAME @ URL': the tree's archive is the package's only file
        finder.add_source(source_file(tree), source_metadata(tree))
    _prefetch_roots(finder, request, components, ctx)
    reach = leave_out_unreachable(finder, defs, components, [r.name for r in request.with_], ctx, flashinfer=str(request.flashinfer))  # a host down
    if reach.warning is not None:
        log.warning("%s", reach.warning)
    return reach


def _family_context(request: ResolveRequest, kept: Version | None, torch: TorchSelection, cuda: CudaLabel) -> RouteContext:
    """The route context of the family: it follows its torch (routing.toml): PyPI's for a kept release without a label."""
    origin = request.kept.origin if request.kept is not None and kept is not None and torch.allowed[:1] == (kept,) else torch_origin(None)
    return RouteContext(
        torch_channel=request.torch_choice.channel,
        cuda=str(cuda),
        flashinfer_channel=request.flashinfer.channel,
        torch_series=torch.series,
        torch_from=origin,
    )


class _Wired(NamedTuple):
    """The request with the kept torch's pins, its wiring, the closure held and the pins' notes."""

    request: ResolveRequest
    wiring: _Wiring
    closure: KeptClosure | None
    pin_notes: list[str]


def _wired(
    sel: _Selected,
    finder: Finder,
    defs: Definitions,
    floors: Sequence[Floor],
    classifier: ScanAhead,
    fit: TargetFit,
    sdist_metadata: SdistMetadata | None,
) -> _Wired:
    """The wiring of the selected request; wired again, on the same pages, when a declared torch's
    closure came with its pins."""
    request, torch, ctx, components = sel.request, sel.torch, sel.ctx, sel.reach.components
    keeps = sel.kept is not None and torch.allowed == (sel.kept,)  # the plan keeps the torch: its closure with it
    probed = request.kept.closure if keeps and request.kept is not None and request.target.interpreter is not None else None
    w, (pinned, pin_notes) = _beside(  # the kept torch's closure (its pins' pages and METADATA, one after another) read while the crawl runs
        lambda: _wire(request, defs, finder, torch, ctx, components, floors, classifier, fit=fit, closure=probed, sdist_metadata=sdist_metadata),
        lambda: with_torch_pins(request, finder, ctx, fit),
        together=finder.fetcher.concurrent_calls,
    )
    moved = pinned.target is not request.target  # a declared torch's closure taken as installed
    request = pinned
    closure = request.kept.closure if keeps and request.kept is not None else None  # the one closure every step below reads
    if not keeps:
        pin_notes = pin_notes[:1] if moved else []  # what was taken as installed; the closure is not held
    if moved:  # a declared torch's closure came with it: the same pages, candidates rebuilt
        w = _wire(
            request,
            defs,
            finder,
            torch,
            ctx,
            components,
            floors,
            classifier,
            fit=fit,
            previous=w.factory,
            closure=closure,
            sdist_metadata=sdist_metadata,
        )
    return _Wired(request, w, closure, pin_notes)


def _beside(main: Callable[[], _A], other: Callable[[], _B], *, together: bool) -> tuple[_A, _B]:
    """``(main(), other())``. With ``together`` (a fetcher that takes calls from several threads),
    ``other`` runs on a thread of its own while ``main`` runs: two readers of the same finder that
    need nothing of each other, so each gives what it gives alone. An error of ``main`` is raised
    once ``other`` has ended (its result unused), one of ``other`` after ``main`` has ended."""
    if not together:
        return main(), other()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="kept-closure") as pool:
        beside = pool.submit(other)
        first = main()
        return first, beside.result()


def _refuse_walk_backs(request: ResolveRequest, defs: Definitions, w: _Wiring, result: Result[Req, Cand, Key], closure: KeptClosure | None) -> None:
    """Raise when the plan walks back a package named with --with: no walk-back without the user's word."""
    named = [r for r in w.requirements if r.parent == WITH_PARENT]
    if walked := walkback.walk_backs(named, result.mapping, w.factory, w.policy, defs.pytorch_family):
        raise walkback.refuse(
            walked, functools.partial(_why_not_newest, w, w.requirements, w.flashinfer, closure), auto_torch_override=request.auto_torch_override
        )


def _run_resolvelib(
    provider: StackProvider,
    requirements: list[Req],
    factory: CandidateFactory,
    flashinfer: FlashInferSelection | None = None,
    closure: KeptClosure | None = None,
) -> Result[Req, Cand, Key]:
    try:
        return provider.resolve(requirements, max_rounds=5000)
    except ResolutionImpossible as exc:
        raise closure_conflict(exc, closure) or explain_impossible(exc, factory, flashinfer) from None
    except ResolutionTooDeep as exc:
        raise NoPlanError(
            f"gave up after {exc.args[0] if exc.args else 'many'} rounds of backtracking", hint="pin more of the closure with --with NAME==VERSION"
        ) from None


def _why_not_newest(
    w: _Wiring, requirements: Sequence[Req], flashinfer: FlashInferSelection | None, closure: KeptClosure | None, wb: walkback.WalkBack
) -> walkback.WhyNot | None:
    """Why no plan has ``wb``'s newest release: the resolver's explanation of the request with that
    release asked for exactly, the kept torch's closure moved first (None: such a plan exists; the
    resolution preferred another)."""
    exact = SpecifierSet(f"=={wb.newest}")
    pinned = [replace(r, specifier=exact, text=f"{r.name}=={wb.newest}") if r is wb.root else r for r in requirements]
    try:
        w.provider.resolve(pinned, max_rounds=5000)
    except ResolutionImpossible as exc:
        blocked = tuple(sorted({c.requirement.name for c in exc.causes} - {wb.root.name}))
        return walkback.WhyNot(closure_conflict(exc, closure) or explain_impossible(exc, w.factory, flashinfer), blocked)
    except ResolutionTooDeep:
        return walkback.WhyNot(NoPlanError("the resolver gave up backtracking on it"))
    return None


def _checked(plan: LockPlan, defs: Definitions, request: ResolveRequest, torch_floor: Version | None) -> LockPlan:
    """``plan`` with a note per stand-in digest, once it passes the gate (``rules/gate.py``): an
    invariant broken is a bug, said as such; an installed package the plan would leave broken is
    an error naming it and the ways out, or, kept by ``--keep-broken``, a note."""
    if synthetic := synthetic_rows(plan.packages):
        plan = replace(plan, notes=(*plan.notes, *map(synthetic_note, synthetic)))
    verdict = gate(plan, defs, installed=request.target.installed, keep=request.keep_broken_names, torch_floor=torch_floor)
    if verdict.bugs:
        raise NoPlanError("the plan breaks the stack's invariants (a bug; please report it)", reasons=[str(v) for v in verdict.bugs])
    if verdict.broken:
        message, reasons, hint = broken_message(verdict.broken)
        raise NoPlanError(message, reasons=reasons, hint=hint)
    return replace(plan, notes=(*plan.notes, *verdict.kept_notes())) if verdict.kept else plan


def _override_rules(request: ResolveRequest, defs: Definitions, torch: TorchSelection) -> OverrideRules:
    fi = defs.flashinfer
    family = frozenset(defs.pytorch_family - {TORCH})

    def protected(cand: Cand) -> bool:
        """A package whose torch pin is its ABI: the torch family, or torch-ABI-bound by data."""
        rule = defs.coupling_rule(cand.name, cand.version)
        return cand.name in family or (rule is not None and rule[0] in (Coupling.TORCH_ABI, Coupling.TORCH))

    return OverrideRules(
        user={canonicalize_name(r.name): r for r in request.override_requirements},
        without=request.without_names,
        torch_allowed=torch.allowed,
        auto_torch=request.auto_torch_override,
        family=family,
        flashinfer_version=request.flashinfer.version,
        flashinfer_pinned=frozenset({fi.python, fi.cubin}),
        protected=protected,
        markers=request.target.markers,
    )


def _framework_facts(
    request: ResolveRequest,
    defs: Definitions,
    mapping: Mapping[Key, Cand],
    deps: Dependencies,
    overrides: Overrides,
    factory: CandidateFactory,
    policy: Policy,
    roots: Sequence[Req],
    classifier: WheelClassifier,
    abi_torch: AbiTorch | None,
) -> framework.FrameworkFacts:
    cands = framework.packages(mapping)
    torch = next((c for c in cands if c.name == TORCH), None)
    found = framework.couplings(cands, deps, defs, abi_torch, classifier, AbiPolicy.of(defs.abi))
    built = builds.plan_builds(cands, found, request.build_names, factory.sdist, torch.version if torch else None)

    def torch_requirement(cand: Cand) -> str | None:
        return next((str(r.specifier) or None for r in deps.requirements(cand, frozenset()) if r.name == TORCH), None)

    words, without_notes = framework.overrides_in_words(overrides, cands, request, defs.family_built_for, torch_requirement)
    notes = (
        *without_notes,
        *_unused_without(request, overrides, cands),
        *framework.dropped_extra_notes(deps, cands, torch),
        *walkback.kept_newer_notes([r for r in roots if r.parent == WITH_PARENT], mapping, factory, policy),
        *framework.walked_back_notes(cands, factory, defs.pytorch_family),
        *built.notes,
    )
    return framework.FrameworkFacts(found=built.found, overrides=words, notes=notes, builds=built.sdists, ways=_ways(built.found, request, defs, factory))


def _unused_without(request: ResolveRequest, overrides: Overrides, cands: Sequence[Cand]) -> list[str]:
    """A note per ``--without`` name that nothing in the plan (nor a --with) required."""
    used = {r.name for records in overrides.of(cands).values() for r in records if r.kind == WITHOUT}
    used |= {canonicalize_name(r.name) for r in request.with_}
    return [unused_without_note(n) for n in sorted(request.without_names - used)]


def _ways(found: Mapping[framework.Pkg, Found], request: ResolveRequest, defs: Definitions, factory: CandidateFactory) -> dict[NormalizedName, builds.WayFacts]:
    """For each package built for another torch: what the indexes offer towards a build for the
    kept torch (``builds.ways_for`` words it for the refusal)."""
    requested = {text.name for text in request.with_}
    return {
        name: builds.way_facts(
            name,
            family=defs.pytorch_family,
            family_candidates=factory.candidates,
            files=lambda n: [o.file for o in factory.listed(n)],
            requested=requested,
            version=version,
            unknown=f.mismatch if f.abi is not None and f.abi.kind is AbiKind.UNKNOWN else None,
            tied=f.torch_tie,
        )
        for (name, version), f in found.items()
        if f.mismatch is not None
    }


def _exports_ahead(
    kept: Version, own: IndexFile, torch: TorchSelection, exports: ExportsSource, policy: AbiPolicy
) -> Callable[[IndexFile, WheelAbi], Callable[[], object] | None]:
    """``ScanAhead.follow``'s watch: the read of the kept torch's exports (from ``own``, its wheel),
    once a scanned wheel's verdict against that torch would read them (a version-locked wheel);
    none where an exports record of that wheel answers for the wheel's C++ imports."""
    against = AbiTorch(version=kept, cuda_major=torch.cuda.major if torch.cuda is not None else None)

    def watch(file: IndexFile, abi: WheelAbi) -> Callable[[], object] | None:
        if not asks_for_exports(file.name, file.version, abi, against, policy):
            return None
        names = tuple(sorted({s for m in abi.members if m.links_torch for s in m.cxx}))  # an exports record for other names: the wheel read ahead too
        return lambda: exports(kept, own).covering(names)

    return watch


def _abi_torch(mapping: Mapping[Key, Cand], torch: TorchSelection, exports: ExportsSource, own: IndexFile | None = None) -> AbiTorch | None:
    """The plan's torch as the ABI judgement sees it; its exports read once, on first use (a kept
    torch from PyPI, with no wheel on the PyTorch index: from ``own``, its wheel where it was
    published, else its labelled twin on the PyTorch index: ``torch_pins.kept_torch_wheel``)."""
    cand = mapping.get(Key(TORCH))
    if cand is None:
        return None
    label = CudaLabel.of_torch(cand.version) or torch.cuda
    file = cand.file if cand.file is not None or not cand.installed else own
    return AbiTorch(version=cand.version, cuda_major=label.major if label is not None else None, exports=functools.cache(lambda: exports(cand.version, file)))


def _parent_names(result: Any) -> dict[str, list[str]]:
    parents: dict[str, list[str]] = {}
    for key, cand in result.mapping.items():
        for child in result.graph.iter_children(key):
            if child.name != key.name:
                parents.setdefault(child.name, []).append(f"{cand.name} {cand.version}")
    return parents


def _torch_of(mapping: Mapping[Key, Cand]) -> Version | None:
    cand = mapping.get(Key(TORCH))
    return cand.version if cand is not None else None


class _Wiring(NamedTuple):
    """What resolving one request is wired from (built twice when a kept torch's pins join it)."""

    factory: CandidateFactory
    flashinfer: FlashInferSelection | None
    policy: Policy
    overrides: Overrides
    dependencies: Dependencies
    provider: StackProvider
    requirements: list[Req]


def _wire(
    request: ResolveRequest,
    defs: Definitions,
    finder: Finder,
    torch: TorchSelection,
    ctx: RouteContext,
    components: tuple[str, ...],
    floors: Sequence[Floor],
    ahead: ScanAhead | None = None,
    *,
    fit: TargetFit,
    previous: CandidateFactory | None = None,
    closure: KeptClosure | None = None,
    sdist_metadata: SdistMetadata | None = None,
) -> _Wiring:
    """The candidate factory, the FlashInfer selection, the overrides and the provider for
    ``request``, with the closure of its root requirements prefetched (and, with ``ahead``, the
    scans of the native wheels it meets started). ``previous``: the first wiring's factory; its
    crawl already read these pages and judged their files, so this wiring shares its verdicts and
    goes level by level on one thread: threads only cost here."""
    variants = VariantTarget(torch.cuda, () if request.all_gpu_archs else request.gpus, torch.newest) if request.wheel_variants else None
    judge = Judge(defs=defs, target=request.target, torch=torch.newest, cuda=torch.cuda, fit=fit, exclude_newer=request.exclude_newer, variants=variants)
    if previous is None:
        asked = frozenset(canonicalize_name(r.name) for r in request.with_)  # a quarantined project is taken only when named
        factory = CandidateFactory(
            finder, judge, ctx, torch_allowed=torch.allowed, installed_requires=request.installed_requires, build=request.build_names, asked=asked
        )
    else:
        factory = previous.rebased(judge, installed_requires=request.installed_requires)
    flashinfer = _select_flashinfer(request, defs, torch, factory, components, floors) if request.flashinfer.wanted else None
    policy = _policy(request, defs, torch, flashinfer, components)
    overrides = Overrides(_override_rules(request, defs, torch))
    dependencies = Dependencies(
        finder,
        request.target,
        defs.flashinfer,
        policy,
        overrides,
        gpus=() if request.all_gpu_archs else request.gpus,
        gpu_table=defs.gpu_table,
        sdist_metadata=sdist_metadata,
    )
    hook = framework.scan_early(ahead, defs) if ahead is not None else None
    prefetcher = Prefetcher(factory, dependencies, policy, on_candidate=hook)
    requirements = overrides.roots([*_requirements(request, defs, floors, torch.cuda, ctx.torch_from), *_closure_roots(closure)])
    if previous is not None:
        prefetcher.levels(requirements)
    else:
        prefetcher.closure(requirements)
    return _Wiring(factory, flashinfer, policy, overrides, dependencies, StackProvider(factory, dependencies, policy, prefetcher), requirements)


def _policy(request: ResolveRequest, defs: Definitions, torch: TorchSelection, flashinfer: FlashInferSelection | None, components: tuple[str, ...]) -> Policy:
    return Policy(
        flashinfer_python=defs.flashinfer.python,
        prerelease_packages=_prerelease_packages(request, torch, defs),
        flashinfer_versions=flashinfer.versions if flashinfer is not None else None,
        flashinfer_components=components,
        installed_requires=request.installed_requires,
        flashinfer_first=_flashinfer_first(request, defs),
    )


def _flashinfer_first(request: ResolveRequest, defs: Definitions) -> Version | tuple[()] | None:
    """flashinfer-python's first candidate: the newest (``()``), unless ``--flashinfer installed``
    keeps an installed one: then, where an installed FlashInfer component is newer than the
    installed flashinfer-python, its version (alignment goes up, not down); else None: the
    installed version, as for any package (the newest when none is installed)."""
    if request.flashinfer.text != "installed":
        return ()
    installed = request.target.installed
    python = installed.get(defs.flashinfer.python)
    if python is None:
        return None  # nothing to keep: the newest, its components aligned to it
    newer = max(public(v) for name in defs.flashinfer.components if (v := installed.get(canonicalize_name(name))) is not None)
    return newer if newer > python else None


def _prefetch_roots(finder: Finder, request: ResolveRequest, components: Sequence[str], ctx: RouteContext) -> None:
    """Read the pages the first steps need (torch, the FlashInfer components, --with names) in one
    round of concurrent requests (``roots.first_round``)."""
    names, guess = first_round(request, components, ctx)  # what the command may have started already (roots.read_ahead)
    try:
        finder.prefetch(names, guess)
    except CrawlError:
        pass  # remembered by the finder; raised where the page is needed


def _provider_notes(result: object, request: ResolveRequest, defs: Definitions, dependencies: Dependencies, factory: CandidateFactory) -> list[str]:
    """What planning only the providers the GPUs need left out, and the bytes that saves (the
    sizes the index pages list)."""
    shim = getattr(result, "mapping", {}).get(Key(defs.flashinfer.jit_cache))
    skipped = dependencies.skipped_providers(shim) if shim is not None else ()
    if shim is None or not skipped:
        return []
    saved = _saved([_file_size(factory, canonicalize_name(n), shim.version) for n in skipped])
    gpus = ", ".join(str(g) for g in request.gpus)
    return [
        f"{defs.flashinfer.jit_cache} {shim.version}: {len(skipped)} of its providers are not needed for {gpus} and are "
        f"left out ({', '.join(skipped)}); {saved}; --all-gpu-archs plans them all"
    ]


def _status_notes(factory: CandidateFactory, mapping: Mapping[Key, Cand]) -> list[str]:
    """A warning per planned package its index gives a PEP 792 status (archived, deprecated; a
    quarantined one asked for by name), said once on stderr too."""
    out = []
    for name in sorted({key.name for key in mapping}):
        visit = factory.status(name) if factory.has_offers(name) else None
        if visit is not None and visit.status is not None:
            why = f": {visit.status_reason}" if visit.status_reason else ""
            note = f"{name}: its index marks the project {visit.status} (PEP 792){why}"
            log.warning("%s", note)
            out.append(note)
    return out


def _variant_notes(factory: CandidateFactory, mapping: Mapping[Key, Cand]) -> list[str]:
    """With ``--wheel-variants``: each variant wheel planned, its label and properties, and what
    the doors that hand a plan on do with it."""
    out = []
    for key, cand in sorted(mapping.items(), key=lambda kv: str(kv[0])):
        ref = cand.file.variant if cand.file is not None and not key.extras else None
        if ref is None or cand.file is None:
            continue
        props = factory.finder.variant_properties(cand.file)
        said = properties_text(props) if not isinstance(props, str) else props
        out.append(
            f"{cand.name} {cand.version}: the variant wheel {ref.label!r} (PEP 825, a draft; {said}), planned by --wheel-variants; "
            "uv cannot install a variant wheel, so install, export uv and lock refuse this plan"
        )
    return out


def _undated_notes(request: ResolveRequest, mapping: Mapping[Key, Cand]) -> list[str]:
    """With ``--exclude-newer``: the plan's files whose page carries no upload times (PEP 700: the
    PyTorch index's and FlashInfer's HTML pages do not), which it could not cut, per index."""
    if request.exclude_newer is None:
        return []
    undated: dict[str, list[str]] = {}
    for key, cand in sorted(mapping.items(), key=lambda kv: str(kv[0])):
        if not key.extras and cand.file is not None and cand.file.upload_time is None:
            undated.setdefault(cand.file.index, []).append(cand.name)
    return [
        f"--exclude-newer {request.exclude_newer}: the {index} index's pages carry no upload times, so these were not cut: {', '.join(names)}"
        for index, names in sorted(undated.items())
    ]


def _saved(sizes: Sequence[int | None]) -> str:
    known = [n for n in sizes if n is not None]
    return f"saves {_size(sum(known))}" + ("" if len(known) == len(sizes) else f" (and {len(sizes) - len(known)} of unknown size)")


def _file_size(factory: CandidateFactory, name: NormalizedName, version: Version) -> int | None:
    """The size the index page lists for the wheel of ``name`` at ``version`` (None: not listed)."""
    return next((c.file.size for c in factory.candidates(name) if c.version == version and c.file is not None), None)


def _size(size: int) -> str:
    return f"{size / 1e9:.1f} GB" if size >= 1e9 else f"{size / 1e6:.1f} MB" if size >= 1e6 else f"{size} bytes"


def _select_flashinfer(
    request: ResolveRequest, defs: Definitions, torch: TorchSelection, factory: CandidateFactory, components: Sequence[str], floors: Sequence[Floor] = ()
) -> FlashInferSelection:
    fi = defs.flashinfer
    python = tuple(c.version for c in factory.candidates(fi.python))
    notes = legacy_notes(factory.visits.get(fi.python, []), factory.rejections.get(fi.python, []))
    cubin = frozenset(c.version for c in factory.candidates(fi.cubin)) if fi.cubin in components else frozenset()
    jit = frozenset(c.version for c in factory.candidates(fi.jit_cache)) if fi.jit_cache in components else frozenset()
    published = frozenset(o.file.version for o in factory.listed(fi.python))
    offer = FlashInferOffer(python=python, cubin=cubin, jit_cache=jit, published=published)
    selected = select_flashinfer(request, defs, torch.cuda, components, offer, where=target_words(request.target), floors=floors)
    return FlashInferSelection(versions=selected.versions, notes=notes + selected.notes, left_out=selected.left_out)


def _prerelease_packages(request: ResolveRequest, torch: TorchSelection, defs: Definitions) -> frozenset[str]:
    """The packages that may be pre-releases without a pre-release specifier: the PyTorch family
    on a pre-release torch channel, the FlashInfer components on a pre-release FlashInfer."""
    out: set[str] = set()
    if torch.choice.allows_prereleases:
        out |= defs.pytorch_family
    if request.flashinfer.allows_prereleases:
        out |= set(defs.flashinfer.components)
    return frozenset(out)


def _requirements(
    request: ResolveRequest, defs: Definitions, floors: Sequence[Floor] = (), cuda: CudaLabel | None = None, torch_from: str | None = None
) -> list[Req]:
    out = [Req(name=TORCH, specifier=SpecifierSet(), parent="(requested)", text=f"torch ({request.torch})")]
    if request.flashinfer.wanted:
        extras = frozenset(e.name for e in defs.flashinfer.extras_for(cuda.major if cuda is not None else None, torch_from))  # [flashinfer.extras]
        shown = f"[{','.join(sorted(extras))}]" if extras else ""
        text = f"flashinfer-python{shown} ({request.flashinfer})"
        out.append(Req(name=defs.flashinfer.python, specifier=SpecifierSet(), extras=extras, parent="(requested)", text=text))
    if floors:  # the floor as a requirement, so a framework's lower pin fails naming it
        top = max(floors, key=lambda f: f.version)
        out.append(
            Req(name=defs.flashinfer.python, specifier=SpecifierSet(f">={top.version}"), parent=f"({top})", text=f"{defs.flashinfer.python}>={top.version}")
        )
    for r in request.with_:
        req = r.requirement
        out.append(Req(name=r.name, specifier=req.specifier, extras=frozenset(req.extras), parent=WITH_PARENT, text=str(req)))
    # --build NAME implies the package: planned as if --with NAME (an unconstrained root changes
    # nothing where something else already requires it)
    out += [Req(name=n, specifier=SpecifierSet(), parent=BUILD_PARENT, text=f"{n} (--build)") for n in request.build_roots]
    return out


CLOSURE_PARENT = "(the kept torch's closure)"


def _closure_roots(closure: KeptClosure | None) -> list[Req]:
    """The kept torch's closure held exactly: a root requirement ``NAME==VERSION`` per pin found
    installed or on its index (a user's ``--override`` on the name replaces it: ``Overrides.roots``)."""
    if closure is None:
        return []
    return [
        Req(name=p.name, specifier=SpecifierSet(f"=={p.version}"), extras=p.extras, parent=CLOSURE_PARENT, text=f"{p.name}=={p.version} ({p.words()})")
        for p in closure.pins
        if p.found
    ]
