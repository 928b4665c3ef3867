"""Orchestration: a request + a finder -> a LockPlan, or an error in the stack's own terms."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version
from resolvelib import BaseReporter, Resolver
from resolvelib.resolvers import ResolutionImpossible, ResolutionTooDeep

from ..data.definitions import Definitions, RouteContext
from ..errors import CrawlError, DowngradeRefused, NoPlanError, UsageError
from ..index.finder import Finder
from ..model import Action, CudaLabel, LockedPackage, LockPlan, Target, TargetSummary
from ..model.inputs import inputs_digest
from ..model.request import TORCH, ResolveRequest, parse_with
from .policy import describe_versions, fits_target, jit_cache_version, plan_violations, public, torch_series
from .provider import Cand, Policy, Req, StackProvider

log = logging.getLogger(__name__)



@dataclass
class _Torch:
    channel: str
    spec: SpecifierSet
    cuda: str
    installed: Version | None
    allowed: tuple[Version, ...] = ()
    notes: list[str] = field(default_factory=list)


def resolve(request: ResolveRequest, finder: Finder, defs: Definitions) -> LockPlan:
    """The plan for ``request``. With a fetcher that stores results, a plan computed earlier
    from the same inputs is returned when every page and METADATA file it came from is
    unchanged (see resultcache.py)."""
    from . import reuse as resultcache

    key = resultcache.result_key(request, defs) if finder.fetcher.result_store is not None else None
    if key is not None:
        plan = resultcache.reuse(finder, key)
        if plan is not None:
            return plan
    plan = _resolve(request, finder, defs)
    if key is not None:
        resultcache.remember(finder, key, plan)
    return plan


def _resolve(request: ResolveRequest, finder: Finder, defs: Definitions) -> LockPlan:
    target = request.target
    torch = _torch_request(request)
    ctx = RouteContext(
        torch_channel=torch.channel,
        cuda=torch.cuda,
        flashinfer_channel=request.flashinfer.channel,
    )
    _prefetch_roots(finder, request, torch, ctx)
    _select_torch(torch, finder, defs, target, ctx, request)
    ctx = replace(ctx, torch_series=torch_series(max(torch.allowed)))
    notes = list(torch.notes)

    policy = Policy(
        ctx=ctx,
        torch_candidates=torch.allowed,
        prerelease_packages=frozenset(_prerelease_packages(request, torch, defs)),
        flashinfer_components=tuple(request.components()),
        installed_requires=request.installed_requires,
    )
    provider = StackProvider(finder, defs, target, policy)
    requirements = [Req(name=TORCH, specifier=SpecifierSet(), parent="(requested)", text=f"torch ({request.torch})")]
    if request.flashinfer.wanted:
        versions, fi_notes = _select_flashinfer(provider, request, defs, ctx)
        notes += fi_notes
        policy.flashinfer_versions = versions
        requirements.append(Req(name=defs.flashinfer.python, specifier=SpecifierSet(), parent="(requested)", text=f"flashinfer-python ({request.flashinfer})"))
    requirements += [_with_requirement(w) for w in request.with_]
    provider.prefetch_closure(requirements)

    try:
        result = Resolver(provider, BaseReporter()).resolve(requirements, max_rounds=5000)
    except ResolutionImpossible as exc:
        raise _explain_impossible(exc, provider) from None
    except ResolutionTooDeep as exc:
        raise NoPlanError(f"gave up after {exc.args[0] if exc.args else 'many'} rounds of backtracking", hint="pin more of the closure with --with NAME==VERSION") from None

    plan = _build_plan(result, provider, request, defs, torch, policy, notes)
    violations = plan_violations(plan, defs, torch_floor=None if request.allow_downgrade else torch.installed, require_hashes=False)
    if violations:
        raise NoPlanError("the plan breaks the stack's invariants (a bug; please report it)", reasons=[str(v) for v in violations])
    return plan


def _prefetch_roots(finder: Finder, request: ResolveRequest, torch: _Torch, ctx: RouteContext) -> None:
    """Read the pages the first steps need (torch, the FlashInfer components, --with names) in one
    round of concurrent requests. The legacy AOT page needs torch's series: guessed from the
    installed torch (read later if the chosen torch has another series)."""
    names = [TORCH, *request.components()]
    for text in request.with_:
        try:
            names.append(canonicalize_name(Requirement(text).name))
        except InvalidRequirement:
            pass  # parse_with says what is wrong
    guess = replace(ctx, torch_series=torch_series(torch.installed)) if torch.installed is not None else ctx
    try:
        finder.prefetch(names, guess)
    except CrawlError:
        pass  # remembered by the finder; raised where the page is needed


# -- torch ---------------------------------------------------------------------------------------

def _torch_request(request: ResolveRequest) -> _Torch:
    installed = request.installed_torch
    installed_cuda = CudaLabel.of_torch(installed)
    if request.cuda and installed_cuda and request.cuda != installed_cuda and not request.change_cuda:
        raise UsageError(
            f"the installed torch {installed} is built for {installed_cuda}, but --cuda {request.cuda} was given",
            hint=f"drop --cuda to keep {installed_cuda}, or add --change-cuda to move torch to {request.cuda}",
        )
    cuda = request.cuda or installed_cuda
    if cuda is None:
        raise UsageError(
            "no CUDA label: the target has no torch with a +cuNNN label and --cuda was not given",
            hint="pass --cuda cu130 (or --installed torch==VERSION+cuNNN)",
        )
    choice = request.torch.for_installed(installed)
    return _Torch(channel=choice.channel, spec=choice.specifier, cuda=str(cuda), installed=installed)


def _select_torch(torch: _Torch, finder: Finder, defs: Definitions, target: Target, ctx: RouteContext, request: ResolveRequest) -> None:
    """Torch versions the resolver may pick: fitting the target, the request, and never lower."""
    offers, visits = finder.offers(TORCH, ctx)
    pages = ", ".join(v.location.url for v in visits) or "(no page)"
    prerelease_ok = torch.channel in ("nightly", "test") or bool(torch.spec.prereleases)
    fitting: set[Version] = set()
    everything: set[Version] = set()
    for offer in offers:
        v = offer.file.version
        everything.add(v)
        if v.local != torch.cuda:
            continue
        if fits_target(offer.file, target) is not None:
            continue
        if v.is_prerelease and not prerelease_ok:
            continue
        if not torch.spec.contains(v, prereleases=True):
            continue
        fitting.add(v)
    installed = torch.installed
    if installed is not None and torch.spec.contains(installed, prereleases=True) and (installed.local == torch.cuda):
        if torch.channel != "stable" or not installed.is_prerelease or torch.spec.prereleases:
            fitting.add(installed)
    if not fitting:
        for v in visits:
            if not v.found:
                torch.notes.append(f"{v.location.url} answered 404")
        raise NoPlanError(
            f"no torch wheel for {_target_words(target)} and {torch.cuda} matches --torch {request.torch}",
            reasons=[f"looked at {pages}", f"versions there: {describe_versions(everything)}"],
            hint="check --python/--platform and --cuda, or pick another --torch channel",
        )
    newest_overall = max((v for v in everything if v.local == torch.cuda and (v.is_prerelease == max(fitting).is_prerelease)), default=None)
    if newest_overall is not None and newest_overall > max(fitting) and torch.channel == "nightly" and not len(torch.spec):
        torch.notes.append(f"torch {newest_overall} has no wheel for {_target_words(target)}; the newest nightly that does is {max(fitting)}")
    if installed is not None and not request.allow_downgrade:
        floor_ok = {v for v in fitting if not _lower(v, installed, public_only=request.change_cuda)}
        if not floor_ok:
            best = max(fitting)
            raise DowngradeRefused(
                f"--torch {request.torch} would downgrade torch from {installed} to {best}",
                reasons=[f"torch is never taken backwards (PEP 440: {best} < {installed})"],
                hint="keep it with --torch installed, ask for a newer channel (--torch nightly), or pass --allow-downgrade if you really mean it",
            )
        fitting = floor_ok
    torch.allowed = tuple(sorted(fitting, reverse=True))


def _lower(v: Version, installed: Version, *, public_only: bool) -> bool:
    return public(v) < public(installed) if public_only else v < installed


def _target_words(target: Target) -> str:
    return f"Python {target.python_version} on {target.platform}"


def _prerelease_packages(request: ResolveRequest, torch: _Torch, defs: Definitions) -> set[str]:
    out: set[str] = set()
    if torch.channel in ("nightly", "test") or torch.spec.prereleases:
        out |= {"torch", "torchvision", "torchaudio", "triton", "pytorch-triton"}
    fi = defs.flashinfer
    if request.flashinfer.allows_prereleases:
        out |= {fi.python, fi.cubin, fi.jit_cache}
    return out


# -- FlashInfer ----------------------------------------------------------------------------------

def _select_flashinfer(provider: StackProvider, request: ResolveRequest, defs: Definitions, ctx: RouteContext) -> tuple[dict[Version, str | None], list[str]]:
    """The flashinfer-python versions for which every requested component has a fitting wheel.

    Returns {version: jit-cache label or None} and notes on the newer versions it had to skip.
    """
    fi = defs.flashinfer
    wanted = request.components()
    notes: list[str] = []
    exact = request.flashinfer.version
    python = provider.candidates(fi.python)
    _legacy_notes(provider, fi.python, notes)
    pre_ok = request.flashinfer.allows_prereleases
    versions = [c.version for c in python if (pre_ok or not c.version.is_prerelease)]
    if request.flashinfer.channel == "nightly":
        versions = [v for v in versions if v.is_devrelease]
    if exact is not None:
        versions = [v for v in versions if v == exact]
    cubins = {c.version for c in provider.candidates(fi.cubin)} if fi.cubin in wanted else set()
    labels = defs.flashinfer_labels(ctx.cuda)
    jit = {c.version for c in provider.candidates(fi.jit_cache)} if fi.jit_cache in wanted else set()
    allowed: dict[Version, str | None] = {}
    skipped: list[str] = []
    for v in versions:
        missing = []
        if fi.cubin in wanted and v not in cubins:
            missing.append(f"no {fi.cubin} {v}")
        label = None
        if fi.jit_cache in wanted:
            label = next((lab for lab in labels if jit_cache_version(v, lab) in jit), None)
            if label is None:
                missing.append(f"no {fi.jit_cache} for {ctx.cuda if not labels else '/'.join(labels)} at {v}")
        if missing:
            skipped.append(f"flashinfer {v}: {'; '.join(missing)}")
            continue
        allowed[v] = label
    if not allowed:
        why = skipped[:6] or [f"no flashinfer-python wheel fits {_target_words(provider.target)}" + (f" at {exact}" if exact else "")]
        raise NoPlanError(f"no FlashInfer version has every requested component ({', '.join(wanted)}) for {ctx.cuda}", reasons=why, hint=_fi_hint(request))
    newest = max(allowed)
    newer_skipped = [s for s, v in zip(skipped, [x for x in versions if x not in allowed]) if v > newest]
    for s in newer_skipped[:5]:
        notes.append(f"{s}; newest with every component is {newest}")
    return allowed, notes


def _fi_hint(request: ResolveRequest) -> str:
    hints = []
    if request.jit_cache:
        hints.append("--no-jit-cache")
    if request.flashinfer.text != "latest":
        hints.append("--flashinfer latest")
    return "try " + " or ".join(hints) if hints else "try another --flashinfer version"


def _legacy_notes(provider: StackProvider, name: NormalizedName, notes: list[str]) -> None:
    for visit in provider.visits.get(name, []):
        if visit.location.route.legacy and not visit.found:
            answer = visit.warnings[0] if visit.warnings else "answered 404"
            notes.append(f"{visit.location.url} {answer} (no torch-ABI-bound AOT wheels for this torch; the torch-agnostic wheels are used)")
    seen = set()
    for f, why in provider.rejections.get(name, []):
        if why.reason.name == "TORCH_ABI" and f.version not in seen:
            seen.add(f.version)
            notes.append(f"flashinfer {f.version} is {why.detail}: not used")


def _with_requirement(text: str) -> Req:
    req = parse_with(text)
    return Req(name=canonicalize_name(req.name), specifier=req.specifier, extras=frozenset(req.extras), parent="(requested with --with)", text=str(req))


# -- errors --------------------------------------------------------------------------------------

def _explain_impossible(exc: ResolutionImpossible, provider: StackProvider) -> NoPlanError:
    reasons = []
    for cause in exc.causes:
        req: Req = cause.requirement
        parent = f"{cause.parent}" if cause.parent is not None else (req.parent or "the request")
        available = [c.version for c in provider.candidates(req.name)]
        reasons.append(f"{parent} requires {req}; available for this target: {describe_versions(available)}")
    names = sorted({c.requirement.name for c in exc.causes})
    return NoPlanError(f"no plan satisfies every requirement on {', '.join(names)}", reasons=sorted(set(reasons)), hint="relax a --with pin or pick another --flashinfer / --torch")


# -- the plan ------------------------------------------------------------------------------------

def _action(version: Version, installed: Version | None) -> Action:
    if installed is None:
        return Action.INSTALL
    if version == installed:
        return Action.KEEP
    if public(version) == public(installed):
        return Action.CHANGE
    return Action.UPGRADE if version > installed else Action.DOWNGRADE


def _build_plan(result, provider: StackProvider, request: ResolveRequest, defs: Definitions, torch: _Torch, policy: Policy, notes: list[str]) -> LockPlan:
    target = request.target
    parents: dict[str, list[str]] = {}
    for key in result.mapping:
        for child in result.graph.iter_children(key):
            child_name, parent_name = child.split("[", 1)[0], key.split("[", 1)[0]
            if child_name != parent_name:
                parents.setdefault(child_name, []).append(parent_name)
    fi = defs.flashinfer
    fi_version = None
    packages = []
    for key, cand in sorted(result.mapping.items()):
        if "[" in key:
            continue
        installed = target.installed.get(cand.name)
        coupling, why = defs.coupling(cand.name, cand.version)
        f = cand.file
        reason = _reason(cand, parents.get(key, []), torch, why, request, defs)
        if cand.name == fi.python:
            fi_version = cand.version
        packages.append(
            LockedPackage(
                name=cand.name,
                version=cand.version,
                action=_action(cand.version, installed),
                index=(f.index if f is not None else "installed"),
                coupling=coupling,
                reason=reason,
                url=f.url if f else None,
                filename=f.filename if f else None,
                sha256=f.sha256 if f else None,
                size=f.size if f else None,
                upload_time=f.upload_time if f else None,
                requires_python=f.requires_python if f else None,
                installed_version=installed,
                dependencies=tuple(sorted({c.split("[", 1)[0] for c in result.graph.iter_children(key)})),
            )
        )
    label = None
    if fi_version is not None and policy.flashinfer_versions is not None:
        label = policy.flashinfer_versions.get(fi_version)
    kept_torch = next((p for p in packages if p.name == TORCH and p.action is Action.KEEP), None)
    if kept_torch is not None and kept_torch.url is None and not request.installed_requires.get(TORCH):
        notes.append(f"torch {kept_torch.version} is kept; it is not on the index any more, so its own dependencies were not re-checked")
    plan = LockPlan(
        target=TargetSummary(python=target.python_version, platform=target.platform, cuda=torch.cuda),
        packages=tuple(packages),
        notes=tuple(dict.fromkeys(notes)),
        flashinfer_version=fi_version,
        cuda_label=label,
        inputs=request.inputs(defs.recorded_urls()),
        indexes={n: url for n, url in defs.recorded_urls().items() if url},
    )
    return replace(plan, inputs_digest=inputs_digest(plan.inputs))


def _reason(cand: Cand, parents: Sequence[str], torch: _Torch, why: str, request: ResolveRequest, defs: Definitions) -> str:
    fi = defs.flashinfer
    if cand.name == TORCH:
        if cand.installed:
            return f"installed {torch.channel} build kept ({why})"
        if torch.channel == "nightly" and not len(torch.spec):
            return "newest nightly with a wheel for this target"
        return f"newest torch matching --torch {request.torch}"
    if cand.name == fi.python:
        return f"newest FlashInfer with {', '.join(request.components())} for {torch.cuda}; {why}"
    if cand.name == fi.cubin:
        return "== flashinfer-python (exact match required at import)"
    if cand.name == fi.jit_cache or fi.is_provider(cand.name):
        return f"== flashinfer-python public version + CUDA label; {why}"
    via = ", ".join(sorted(set(parents))) or "--with"
    prefix = "installed version kept; " if cand.installed else ""
    return f"{prefix}required by {via}"
