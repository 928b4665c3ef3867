"""Why resolvelib found no plan, in the stack's own terms: a pin of the kept torch's closure moved,
a FlashInfer component missing at a pinned version, a quarantined project, a package not on its
index, one that offers only sdists or pre-releases, or else every requirement and what is available."""

from __future__ import annotations

from packaging.utils import NormalizedName, canonicalize_name
from resolvelib.resolvers import ResolutionImpossible

from ..errors import NoPlanError
from ..model.request import TORCH
from ..rules.versions import describe_versions
from .factory import CandidateFactory, variant_words
from .flashinfer_selection import FlashInferSelection
from .kept_closure import KeptClosure, conflict_words
from .provider import Information
from .requirement import Req, contains


def closure_conflict(exc: ResolutionImpossible, closure: KeptClosure | None) -> NoPlanError | None:  # type: ignore[type-arg,unused-ignore]
    """A requirement that needs another version of a package the kept torch pins, named as such:
    ``humming-kernels 0.1.19 needs nvidia-cuda-runtime>=13.5; torch 2.15.0's cuda-toolkit 13.2.2 pins 13.2.86``."""
    if closure is None:
        return None
    conflicts = []
    for cause in exc.causes:
        req: Req = cause.requirement
        pin = closure.get(req.name)
        if pin is None or cause.parent is None or contains(req.specifier, pin.version):
            continue
        conflicts.append(conflict_words(str(cause.parent), req.text or f"{req.name}{req.specifier}", pin))
    if not conflicts:
        return None
    names = sorted({canonicalize_name(c.requirement.name) for c in exc.causes if closure.get(c.requirement.name) is not None})
    return NoPlanError(
        f"the plan would move the kept torch's closure: {'; '.join(dict.fromkeys(conflicts))}",
        reasons=sorted(set(conflicts)),
        hint=(
            f"torch {closure.torch} and what it pins move only when you say so: keep an older release of the package that needs more, "
            f"or override the pin (--override '{names[0]}>=...') if you accept other CUDA libraries under torch {closure.torch}"
        ),
    )


def explain_impossible(exc: ResolutionImpossible, factory: CandidateFactory, flashinfer: FlashInferSelection | None = None) -> NoPlanError:  # type: ignore[type-arg,unused-ignore]
    """The error for a resolution found impossible: the first explanation that applies, in turn a
    FlashInfer component gap, a quarantined project, a package not on its index, a package with
    nothing a pin could reach, else every requirement with what is available for this target."""
    gap = _component_gap(exc, factory, flashinfer)
    if gap is not None:
        return gap
    quarantined = _quarantined(exc, factory)
    if quarantined is not None:
        return quarantined
    reasons = sorted({_requirement_words(factory, cause) for cause in exc.causes})
    names = sorted({c.requirement.name for c in exc.causes})
    return (
        _not_on_index(factory, names, reasons)
        or _blocked(exc, factory, reasons)
        or NoPlanError(
            f"no plan satisfies every requirement on {', '.join(names)}",
            reasons=reasons,
            hint="relax a --with pin or pick another --flashinfer / --torch",
        )
    )


def _quarantined(exc: ResolutionImpossible, factory: CandidateFactory) -> NoPlanError | None:  # type: ignore[type-arg,unused-ignore]
    """The error for a required project its index marks quarantined (PEP 792); None when none is."""
    quarantined = [(n, q) for n in sorted({c.requirement.name for c in exc.causes}) if (q := factory.quarantined(n)) is not None]
    if not quarantined:
        return None
    name, why = quarantined[0]
    parents = sorted({_parent_words(c) for c in exc.causes if c.requirement.name == name})
    return NoPlanError(
        f"{name}: its index marks the project quarantined (PEP 792: considered unsafe for use, e.g. malware); none of its files is planned",
        reasons=[f"required by {', '.join(parents)}", *([f"the index says: {why.detail}"] if why.detail else [])],
        hint=f"leave out what requires it (--without {name}), or, only if you trust it, name it: --with {name}",
    )


def _parent_words(cause: Information) -> str:
    """Who asked for ``cause``'s requirement: the candidate that requires it, else the root's parent."""
    req: Req = cause.requirement
    return str(cause.parent) if cause.parent is not None else (req.parent or "the request")


def _requirement_words(factory: CandidateFactory, cause: Information) -> str:
    """A cause in words: who requires what, and what is available for this target."""
    req: Req = cause.requirement
    available = [c.version for c in factory.candidates(req.name)]
    return f"{_parent_words(cause)} requires {req}{_unserved(factory, req)}; available for this target: {describe_versions(available)}"


def _not_on_index(factory: CandidateFactory, names: list[NormalizedName], reasons: list[str]) -> NoPlanError | None:
    """The error for required packages whose every page answered 404; None when there is none."""
    missing = [n for n in names if _not_on_its_index(factory, n)]
    if not missing:
        return None
    pages = [v.location for n in missing for v in factory.visits.get(n, ())]
    where = ", ".join(f"{loc.url} ({loc.index})" for loc in pages) or "its index"
    return NoPlanError(
        f"{', '.join(missing)}: no such package on its index ({where} answered 404)",
        reasons=reasons,
        hint=f"check the spelling of {', '.join(missing)} (in --with, or in what requires it); a package of another index needs --package-index NAME=URL",
    )


def _blocked(exc: ResolutionImpossible, factory: CandidateFactory, reasons: list[str]) -> NoPlanError | None:  # type: ignore[type-arg,unused-ignore]
    """Nothing to relax: a package has no wheel, or only pre-releases nobody asked for; None otherwise."""
    blocked = [words for cause in exc.causes if (words := _unusable(factory, cause.requirement)) is not None]
    if not blocked:
        return None
    return NoPlanError("; ".join(dict.fromkeys(what for what, _ in blocked)), reasons=reasons, hint="; ".join(dict.fromkeys(how for _, how in blocked)))


def _unusable(factory: CandidateFactory, req: Req) -> tuple[str, str] | None:
    """(what, how) when ``req``'s package offers nothing a pin could reach: its index lists only
    sdists (no wheel to install: build one, or serve wheels built for this torch), or this target's
    wheels are all pre-releases (taken only when a specifier names one, as PEP 440 says). None otherwise."""
    name = req.name
    cands = factory.candidates(name)
    if not cands:
        variants = variant_words(name, factory.rejections.get(name, ()), factory.judge)
        if variants is not None:
            return variants
        files = [o.file for o in factory.listed(name)]
        sdists = sorted((f for f in files if not f.is_wheel), key=lambda f: f.version)
        if not files or len(sdists) < len(files):
            return None
        return (
            f"{name} has no wheel on its index, only source distributions ({sdists[-1].filename}{', ...' if len(sdists) > 1 else ''})",
            f"build it against this torch with --build {name}, or serve wheels built for this torch from an index of your own "
            f"(--package-index {name}=URL); see docs/guides/building.md",
        )
    pres = [c.version for c in cands if c.version.is_prerelease]
    if len(pres) < len(cands) or req.specifier.prereleases:
        return None
    newest = max(pres)
    return (
        f"{name} has only pre-releases for this target ({describe_versions(pres)}), and a pre-release is taken only when a specifier names one",
        f"allow it with a pre-release in the requirement: --with '{name}>={newest}' (or =={newest})",
    )


def _unserved(factory: CandidateFactory, req: Req) -> str:
    """``, which no index serves (PAGE)`` when no file on any page read for ``req``'s package, for
    any target, is a release it allows (a pin on a version nobody published); else nothing. Not
    for torch: its pages are its channel's, and the torch selection words what they lack."""
    if req.name == TORCH or not req.specifier or any(contains(req.specifier, o.file.version) for o in factory.listed(req.name)):
        return ""
    pages = ", ".join(dict.fromkeys(v.location.url for v in factory.visits.get(req.name, ()))) or "its index"
    return f", which no index serves (read: {pages})"


def _component_gap(exc: ResolutionImpossible, factory: CandidateFactory, flashinfer: FlashInferSelection | None) -> NoPlanError | None:  # type: ignore[type-arg,unused-ignore]
    """A requirement on flashinfer-python that only versions missing a component meet: blamed on that
    component (``flashinfer-cubin`` has no 0.6.3), not on flashinfer-python, which has it."""
    if flashinfer is None or not flashinfer.left_out:
        return None
    fi = factory.judge.defs.flashinfer
    leave_out: dict[str, str] = {fi.cubin: "--no-cubin", fi.jit_cache: "--no-jit-cache"}
    for cause in exc.causes:
        req: Req = cause.requirement
        gaps = [s for v, s in sorted(flashinfer.left_out.items(), reverse=True) if req.name == fi.python and contains(req.specifier, v)]
        if not gaps or any(contains(req.specifier, v) for v in flashinfer.versions):
            continue
        parent = f"{cause.parent}" if cause.parent is not None else (req.parent or "the request")
        missing = sorted({c for s in gaps for c in s.components})
        flags = [leave_out[c] for c in missing if c in leave_out]
        return NoPlanError(
            f"{parent} requires {req}, and {' and '.join(missing)} {'has' if len(missing) == 1 else 'have'} no wheel at {', '.join(str(s.version) for s in gaps)}",
            reasons=[s.why for s in gaps][:6],
            hint=" or ".join([f"leave it out with {f}" for f in flags] + ["relax that pin"]),
        )
    return None


def _not_on_its_index(factory: CandidateFactory, name: NormalizedName) -> bool:
    """Whether every page read for ``name`` answered 404: the package does not exist there."""
    visits = factory.visits.get(name, ())
    return bool(visits) and not any(v.found for v in visits) and not factory.candidates(name)
