"""After resolvelib: what a framework on a kept torch adds to the plan.

Each package's coupling with its evidence and ABI verdict (``coupling.find_coupling``), the
refusal of compiled wheels that cannot run with the plan's torch (or, with ``abi_mismatch="warn"``,
their flags), the overrides in the plan's words, and the notes: what ``--without`` left out, FlashInfer extras dropped for their
torch floors, newer releases of a requested package passed over.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import NormalizedName
from packaging.version import Version

from ..data.definitions import Definitions
from ..errors import NoPlanError
from ..model import IndexFile, Override
from ..model.abi import AbiKind, WheelAbi
from ..model.request import TORCH, ResolveRequest
from ..rules.abi import AbiPolicy, AbiTorch
from ..rules.fit import RejectReason
from .builds import WayFacts, ways_for
from .coupling import Found, ScanAhead, WheelClassifier, classify_all, find_coupling, wants_scan
from .dependencies import Dependencies
from .factory import CandidateFactory
from .overrides import FAMILY, FLASHINFER, TORCH_PIN, USER, WITHOUT, Overrides, Replaced
from .requirement import Cand, Key

Pkg = tuple[NormalizedName, Version]


@dataclass(frozen=True, slots=True, kw_only=True)
class FrameworkFacts:
    """What the plan's rows and notes take from this step."""

    found: Mapping[Pkg, Found]
    overrides: tuple[Override, ...] = ()
    notes: tuple[str, ...] = ()
    builds: Mapping[Pkg, IndexFile] = field(default_factory=dict)  # --build: the packages built from their sdist (builds.plan_builds)
    ways: Mapping[NormalizedName, WayFacts] = field(default_factory=dict)  # per mismatched package: the ways to a build for the kept torch (builds.ways_for)


def packages(mapping: Mapping[Key, Cand]) -> list[Cand]:
    return [c for k, c in sorted(mapping.items(), key=lambda kv: str(kv[0])) if not k.extras]


def couplings(
    cands: Sequence[Cand], deps: Dependencies, defs: Definitions, torch: AbiTorch | None, classifier: WheelClassifier, policy: AbiPolicy
) -> dict[Pkg, Found]:
    """Every package's coupling and verdict; the classifier is asked only about native wheels the
    data and the METADATA leave open."""
    reqs = {(c.name, c.version): deps.requirements(c, frozenset()) for c in cands}
    to_scan = [c.file for c in cands if c.file is not None and wants_scan(c, defs)]
    scans: dict[str, WheelAbi] = classify_all(to_scan, classifier)
    return {
        (c.name, c.version): find_coupling(c, reqs[(c.name, c.version)], defs, torch, scans.get(c.file.url) if c.file is not None else None, policy)
        for c in cands
    }


def scan_early(ahead: ScanAhead, defs: Definitions) -> Callable[[Cand], None]:
    """The closure crawl's hook: start the scan of a candidate ``couplings`` would ask about (the
    page's row says whether: ``wants_scan``), so the scans overlap the crawl and the resolution."""

    def offer(cand: Cand) -> None:
        if cand.file is not None and wants_scan(cand, defs):
            ahead.start(cand.file)

    return offer


def refuse_mismatches(
    found: Mapping[Pkg, Found], parents: Mapping[str, Sequence[str]], torch: Version | None, ways: Mapping[NormalizedName, WayFacts] | None = None
) -> None:
    """``NoPlanError`` naming every package that cannot be shown to run with the plan's torch:
    built for another torch, another CUDA major, a stable-ABI floor above it, or a scan that did
    not finish; why, and per package the ways out, best first (``builds.ways_for``: the torch
    family's build, ``--build``, an index of per-torch builds, leaving it out last)."""
    bad = sorted((k, f) for k, f in found.items() if f.mismatch)
    if not bad:
        return
    raise NoPlanError(
        _mismatch_headline(", ".join(n for (n, _), _ in bad), _unknown_count(bad), len(bad), torch),
        reasons=_mismatch_reasons(bad, parents),
        hint=_ways_out([n for (n, _), _ in bad], ways or {}, asked={n: v for (n, v), _ in bad if not parents.get(n)}),
    )


def _unknown_count(bad: Sequence[tuple[Pkg, Found]]) -> int:
    """How many of the packages refused have a scan that could not tell."""
    return sum(1 for _, f in bad if f.abi is not None and f.abi.kind is AbiKind.UNKNOWN)


def _mismatch_reasons(bad: Sequence[tuple[Pkg, Found]], parents: Mapping[str, Sequence[str]]) -> list[str]:
    """Each mismatched package, what requires it, and why it cannot run with the plan's torch."""
    return [f"{name} {version} (required by {', '.join(sorted(set(parents.get(name, ())))) or 'the request'}): {f.mismatch}" for (name, version), f in bad]


def _ways_out(names: Sequence[NormalizedName], ways: Mapping[NormalizedName, WayFacts], asked: Mapping[NormalizedName, Version] | None = None) -> str:
    """Per package (once each), the ways to a plan, best first. A package the request asked for
    (``asked``: its newest fitting release, refused) is never walked back to an older release
    unasked: how to accept one is the last way. Packages whose scan a snapshot never recorded (it
    scanned its own targets' wheels) get one line first, for all of them: scan live or re-record."""
    older = asked or {}
    per_package = [
        f"{name}: "
        + "; or ".join([*ways_for(name, ways.get(name, WayFacts())), *([f"accept an older release: --with '{name}<{older[name]}'"] if name in older else [])])
        for name in dict.fromkeys(names)
    ]
    unrecorded = [name for name in dict.fromkeys(names) if "snapshot" in (ways.get(name, WayFacts()).unknown or "")]
    scan_live = (
        [
            f"{', '.join(unrecorded)}: not scanned in the snapshot (it scanned the wheels of the targets it was recorded for): "
            "add --live-fallback to scan them live (range reads), or record a snapshot that scans them "
            "(`resolve-gpu-stack snapshot --snapshot DIR --output NEW` with the same flags)"
        ]
        if unrecorded
        else []
    )
    return "the ways out, best first:\n  " + "\n  ".join([*scan_live, *per_package]) + "\n  or plan them anyway, flagged, with --abi-mismatch warn"


def _mismatch_headline(names: str, unknown: int, total: int, torch: Version | None) -> str:
    """What ``total`` mismatched packages (``unknown`` of them not scanned to the end) have in common."""
    if unknown == total:
        return f"{names}: compiled code whose scan did not finish; it cannot be shown to run with torch {torch}"
    if not unknown:
        return f"{names}: compiled for another torch or CUDA than torch {torch}; it would fail at import (undefined symbol) or crash"
    return f"{names}: compiled code that cannot be shown to run with torch {torch} (built for another torch or CUDA, or not scanned)"


def overrides_in_words(
    replaced: Overrides,
    cands: Sequence[Cand],
    request: ResolveRequest,
    built_for: Mapping[NormalizedName, str] | None = None,
    torch_requirement: Callable[[Cand], str | None] = lambda cand: None,
) -> tuple[tuple[Override, ...], tuple[str, ...]]:
    """The plan's overrides, and the --without notes, from what was replaced in the plan's packages
    (``built_for``: components.toml ``[pytorch] built-for``, how a family member names its torch;
    ``torch_requirement``: what a planned package's METADATA requires of torch, ``==2.14.0`` or
    ``>=2.14.0``, None for nothing)."""
    chosen = {c.name: c for c in cands}
    out: list[Override] = []
    left_out: dict[str, list[str]] = {}
    for (name, version), records in sorted(replaced.of(cands).items()):
        for r in records:
            if r.kind == WITHOUT:
                left_out.setdefault(r.name, []).append(f"{name} {version}")
                continue
            override = _override(name, r, chosen, request, built_for or {}, torch_requirement)
            if override is not None:
                out.append(override)
    notes = tuple(f"{n} left out (--without), with what only it needs; required by {', '.join(sorted(set(by)))}" for n, by in sorted(left_out.items()))
    return tuple(dict.fromkeys(out)), notes


def _override(
    package: str,
    r: Replaced,
    chosen: Mapping[NormalizedName, Cand],
    request: ResolveRequest,
    built_for: Mapping[NormalizedName, str],
    torch_requirement: Callable[[Cand], str | None] = lambda cand: None,
) -> Override | None:
    """A requirement of ``package`` the plan replaced, in the plan's words: by what, and why."""
    if r.kind == TORCH_PIN:
        torch = chosen.get(TORCH)
        if torch is None:
            return Override(
                package=package, requirement=r.requirement, replaced_by="torch (none)", reason=f"the selected torch (--torch {request.torch}) is kept"
            )
        why = "the installed torch is kept" if torch.installed else f"the selected torch (--torch {request.torch}) is kept"
        return Override(package=package, requirement=r.requirement, replaced_by=f"torch=={torch.version}", reason=why)
    if r.kind == FAMILY:
        got = chosen.get(r.name)
        if got is not None and _meets(r.requirement, got.version):
            return None  # the build for the kept torch is the pinned one: nothing was replaced (no `torchcodec==0.17.0 -> torchcodec==0.17.0`)
        by = f"{r.name}=={got.version}" if got is not None else f"{r.name} (not in the plan)"
        how = _family_how(got, built_for.get(r.name), torch_requirement(got) if got is not None else None)
        return Override(package=package, requirement=r.requirement, replaced_by=by, reason=f"the {r.name} build for the kept torch, from its index ({how})")
    reason = {USER: "--override", FLASHINFER: f"--flashinfer {request.flashinfer} is the user's word"}.get(r.kind)
    return Override(package=package, requirement=r.requirement, replaced_by=r.replacement, reason=reason) if reason else None


def _meets(requirement: str, version: Version) -> bool:
    """Whether ``version`` satisfies ``requirement`` as its package states it (an unreadable one: no)."""
    try:
        return Requirement(requirement).specifier.contains(version, prereleases=True)
    except InvalidRequirement:
        return False


def _family_how(got: Cand | None, built_for: str | None, requires: str | None) -> str:
    """How the family member's build for the kept torch was told apart, from what its METADATA
    says: an exact pin names that torch, a floor admits it, a nightly of the same day names none."""
    if got is not None and built_for == "date" and got.version.is_devrelease:
        return "a nightly of that torch's day: it names no torch itself"
    if requires and requires.startswith(("==", "===")):
        return f"its METADATA pins torch{requires}"
    if requires:
        return f"its METADATA requires torch{requires}, which the kept torch meets"
    return "its METADATA names no torch"


def dropped_extra_notes(deps: Dependencies, cands: Iterable[Cand], torch: Cand | None) -> tuple[str, ...]:
    planned = {f"{c.name} {c.version}" for c in cands}
    torch_words = f"torch {torch.version}" if torch is not None else "the plan's torch"
    return tuple(
        f"{pkg}: extra [{extra}] left out: it requires {', '.join(unmet)}, which {torch_words} does not meet"
        for (pkg, extra), unmet in sorted(deps.dropped_extras.items())
        if pkg in planned
    )


JUDGED = frozenset({RejectReason.TORCH_ABI, RejectReason.CUDA, RejectReason.ABI})  # the tool's own judgement, not the target's tags


def walked_back_notes(cands: Iterable[Cand], factory: CandidateFactory, skip: frozenset[NormalizedName]) -> tuple[str, ...]:
    """For each planned package (but ``skip``: the torch family, whose build for the kept torch is
    chosen among many) below a newer release the judgement refused: that release and why."""
    notes = []
    for cand in cands:
        if cand.name in skip or cand.installed:
            continue
        public = Version(cand.version.public)  # another CUDA label of the planned release is no walk-back
        refused = {f.version: r for f, r in factory.rejections.get(cand.name, ()) if r.reason in JUDGED and Version(f.version.public) > public}
        if refused:
            newest = max(refused)
            notes.append(f"{cand.name} {cand.version} is planned, walked back past {newest}: {refused[newest].detail}")
    return tuple(notes)
