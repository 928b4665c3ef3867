"""The candidate factory: what the finder offers, judged against the target and the policy.

One place decides whether a file can be a candidate (``judge``: target fit, torch ABI, CUDA
coupling) and which candidates a set of requirements may pick (``CandidateFactory.matches``:
pre-releases, yanked files, the FlashInfer versions allowed, installed first). The provider and
the ``candidates`` command both use it, so the command never shows as fitting a wheel the
resolver would reject.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

from ..data.definitions import Definitions, RouteContext
from ..index.finder import Finder, Offer, PageVisit
from ..index.variants import VariantTarget, judge_variant, specificity
from ..model import IndexFile, Target
from ..model.cuda import CudaLabel
from ..model.request import TORCH
from ..rules.fit import Rejection, RejectReason, TargetFit, cuda_mismatch, family_date_mismatch, per_torch_mismatch, torch_abi_mismatch, uploaded_after
from .requirement import Cand, Containment, Req

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    """What the resolver inputs allow beyond plain PEP 440 ranges (built once, after the torch
    and FlashInfer selections)."""

    flashinfer_python: NormalizedName  # the package whose versions ``flashinfer_versions`` limits
    prerelease_packages: frozenset[str] = frozenset()  # may pick pre-releases without an explicit spec
    flashinfer_versions: Mapping[Version, str | None] | None = None  # allowed python versions -> jit-cache label
    flashinfer_components: tuple[str, ...] = ()
    installed_requires: Mapping[NormalizedName, tuple[str, ...]] = field(default_factory=dict)
    # flashinfer-python's order: None keeps the installed version first (a bare request, as uv does);
    # a version: that one first (the newer of installed FlashInfer halves: alignment goes up); () newest first
    flashinfer_first: Version | tuple[()] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Judge:
    """Whether one offered file can be a candidate on a target. ``fit``: the target's
    ``TargetFit`` (its memo of tag ranks), shared with the torch selection; made when not given."""

    defs: Definitions
    target: Target
    torch: Version | None  # the torch the plan will have (for torch-ABI-bound wheels)
    cuda: CudaLabel | None  # torch's CUDA (for torch and CUDA-bound wheels); None: not checked
    fit: TargetFit = field(default=None, compare=False, repr=False)  # type: ignore[assignment]
    exclude_newer: str | None = None  # --exclude-newer YYYY-MM-DD: files uploaded after it are no candidates
    variants: VariantTarget | None = None  # --wheel-variants: what a variant wheel is judged against; None: none is planned

    def __post_init__(self) -> None:
        if self.fit is None or not self.fit.judges_like(self.target):
            object.__setattr__(self, "fit", TargetFit(self.target))

    def judges_like(self, other: Judge) -> bool:
        """Whether ``other`` gives every file the same verdict: the same rules, torch, CUDA, tags
        and Python (what is installed on the target plays no part in a verdict)."""
        same = self.defs is other.defs and self.torch == other.torch and self.cuda == other.cuda and self.exclude_newer == other.exclude_newer
        same = same and self.variants == other.variants
        return same and self.fit.judges_like(other.target)

    def __call__(self, name: str, file: IndexFile) -> Rejection | None:
        why = self.fit(file) or uploaded_after(file.upload_time, self.exclude_newer)
        if why is not None:
            return why
        coupling, reason = self.defs.coupling(name, file.version)
        fi = self.defs.flashinfer
        labelled = name == fi.jit_cache or fi.is_provider(name)  # FlashInfer's CUDA builds carry +cuNNN
        return (
            torch_abi_mismatch(coupling, reason, file.version, self.torch)
            or family_date_mismatch(self.defs.family_built_for.get(canonicalize_name(name)), file.version, self.torch)
            or per_torch_mismatch(self.defs.per_torch, file.version, self.torch, self.cuda)
            or cuda_mismatch(coupling, file.version, self.cuda, label_required=labelled)
        )


def variant_verdict(finder: Finder, judge: Judge, file: IndexFile) -> tuple[Rejection | None, int]:
    """A variant wheel judged (PEP 825, a draft; the plain files pass: ``(None, 0)``): refused
    without ``--wheel-variants`` (naming it); with it, by its properties in its release's
    variants.json (read through the finder, hash-checked) against ``judge.variants`` by the data
    rules (components.toml ``[variants]``). With the verdict, how specific a fitting variant is
    (its number of features): among a release's fitting files the most specific is planned."""
    ref = file.variant
    if ref is None:
        return None, 0
    if judge.variants is None:
        return Rejection(RejectReason.VARIANT, f"label {ref.label!r}: judged and planned only with --wheel-variants"), 0
    props = finder.variant_properties(file)
    if isinstance(props, str):
        return Rejection(RejectReason.VARIANT_METADATA, f"label {ref.label!r}: {props}"), 0
    rules = judge.defs.variants
    why = judge_variant(props, judge.variants, rules) if rules is not None else "the data has no [variants] rules"
    if why is not None:
        return Rejection(RejectReason.VARIANT, f"label {ref.label!r}: {why}"), 0
    return None, specificity(props)


class CandidateFactory:
    """Candidates per package, computed once (the prefetch crawl's threads may race for one).

    ``torch_allowed``: the torch versions the torch selection allows (never a downgrade).
    The factory owns what one resolve remembers beyond the finder's pages: the verdicts, the
    candidate lists, the narrowed lists per name, and ``contains`` (specifier x version); nothing
    of it is global, so two resolves (in turn or at once) never see each other's.
    """

    NEWEST_FIRST = frozenset({TORCH})  # "keep installed" does not apply: the torch selection decided

    def __init__(
        self,
        finder: Finder,
        judge: Judge,
        ctx: RouteContext,
        *,
        torch_allowed: tuple[Version, ...] | None = None,
        installed_requires: Mapping[NormalizedName, tuple[str, ...]] | None = None,
        build: frozenset[NormalizedName] = frozenset(),
        asked: frozenset[NormalizedName] = frozenset(),
    ) -> None:
        self.finder = finder
        self.asked = asked  # the names asked for by name (--with): a quarantined project is taken only then
        self.judge = judge
        self.ctx = ctx
        self.torch_allowed = torch_allowed
        self.installed_requires = installed_requires or {}
        self.build = build  # --build NAME: a version with no wheel for the target is a candidate through its sdist
        self._sdists: dict[NormalizedName, dict[Version, IndexFile]] = {}  # build names: the sdist of each version
        self.rejections: dict[NormalizedName, list[tuple[IndexFile, Rejection]]] = {}
        self.visits: dict[NormalizedName, list[PageVisit]] = {}
        self._offers: dict[NormalizedName, list[Offer]] = {}
        self._judged: dict[NormalizedName, dict[Version, IndexFile]] = {}  # name -> the best wheel per version
        self._candidates: dict[NormalizedName, list[Cand]] = {}
        self._narrowed: dict[NormalizedName, _Narrowed] = {}
        self._locks: dict[NormalizedName, threading.RLock] = {}
        self._locks_lock = threading.Lock()
        self.contains = Containment()

    def rebased(self, judge: Judge, *, installed_requires: Mapping[NormalizedName, tuple[str, ...]] | None = None) -> CandidateFactory:
        """A factory for ``judge``'s target. When ``judge`` gives the same verdicts (the target only
        has more installed: a kept torch's exact pins joined it), the offers, the page visits and
        the verdicts are shared, and only the candidate lists (installed first) are rebuilt;
        otherwise a fresh factory."""
        new = CandidateFactory(
            self.finder, judge, self.ctx, torch_allowed=self.torch_allowed, installed_requires=installed_requires, build=self.build, asked=self.asked
        )
        if self.judge.judges_like(judge):
            new._offers, new.visits, new.rejections, new._judged, new._sdists = self._offers, self.visits, self.rejections, self._judged, self._sdists
        return new

    @property
    def target(self) -> Target:
        return self.judge.target

    def has_offers(self, name: NormalizedName) -> bool:
        return name in self._offers

    def offers(self, name: NormalizedName) -> list[Offer]:
        if name not in self._offers:
            with self._lock_for(name):
                if name not in self._offers:
                    offers, visits = (
                        ([], [])
                        if self._keeps_pypis_torch(name)
                        else self.finder.offers(name, self.ctx, tags=self.judge.fit.tag_set, sdists=name in self.build)
                    )
                    self.visits[name] = visits
                    self._offers[name] = offers
        return self._offers[name]

    def listed(self, name: NormalizedName) -> list[Offer]:
        """Every file the index lists for ``name``, for this target or not (``offers`` reads only
        this target's wheels, and sdists for a ``--build`` name): its whole page, for what is said
        of the other files (a refusal's build hints, FlashInfer's published versions)."""
        return [] if self._keeps_pypis_torch(name) else self.finder.offers(name, self.ctx)[0]

    def status(self, name: NormalizedName) -> PageVisit | None:
        """The page that gives ``name`` a PEP 792 status (archived, quarantined, deprecated), if any."""
        self.offers(name)
        return next((v for v in self.visits.get(name, ()) if v.status is not None), None)

    def quarantined(self, name: NormalizedName) -> Rejection | None:
        """Every file of a project its index marks quarantined (PEP 792: unsafe for use, e.g.
        malware) is refused, unless it was asked for by name (``--with NAME``)."""
        visit = self.status(name)
        if visit is None or visit.status != "quarantined" or name in self.asked:
            return None
        return Rejection(RejectReason.QUARANTINED, visit.status_reason or "")

    def _keeps_pypis_torch(self, name: NormalizedName) -> bool:
        """Whether ``name`` is torch and the only torch allowed is the kept one, PyPI's build (no
        label): no file of the PyTorch index can be that torch, so its page is not read."""
        return name == TORCH and self.ctx.torch_from == "pypi" and tuple(self.torch_allowed or ()) == (self.target.installed.get(TORCH),)

    def candidates(self, name: NormalizedName) -> list[Cand]:
        """Every usable version of ``name``, best first: one wheel per version (best tag).

        Pre-releases are included here; ``matches`` drops them unless asked for.
        """
        if name not in self._candidates:
            with self._lock_for(name):
                if name not in self._candidates:
                    self._candidates[name] = self._build(name)
        return self._candidates[name]

    def matches(self, name: NormalizedName, reqs: Sequence[Req], policy: Policy, bad: Iterable[Version] = ()) -> Iterator[Cand]:
        """The candidates of ``name`` that every one of ``reqs`` allows, best first. One
        requirement (the prefetcher's, the notes') is answered lazily: its first match is found
        without checking the rest of a list of thousands of versions."""
        bad = set(bad)
        cands, prereleases = self._allowed_by(name, list(reqs))
        pre_ok = name in policy.prerelease_packages or prereleases
        allowed = policy.flashinfer_versions if name == policy.flashinfer_python else None
        if allowed is not None and policy.flashinfer_first is not None:
            cands = _ordered(list(cands), policy.flashinfer_first)
        return (c for c in cands if c.version not in bad and _allows(c, allowed, pre_ok=pre_ok))

    def _allowed_by(self, name: NormalizedName, reqs: list[Req]) -> tuple[Iterable[Cand], bool]:
        """(the candidates every one of ``reqs`` allows, best first; whether one asks for pre-releases)."""
        if len(reqs) >= 2:
            narrowed = self._narrow(name, reqs)
            return narrowed.cands, narrowed.prereleases
        contains = self.contains
        return (c for c in self.candidates(name) if all(r.is_satisfied_by(c, contains) for r in reqs)), any(r.specifier.prereleases for r in reqs)

    def _narrow(self, name: NormalizedName, reqs: list[Req]) -> _Narrowed:
        """The candidates every one of ``reqs`` (two or more) allows, best first, worked out incrementally.

        resolvelib asks again each time a requirement on ``name`` is added, with the list it asked
        with before plus the new ones (a ``with`` list of 4000 entries on one name: 4000 questions).
        When ``reqs`` extends the list of the previous question, only the new requirements are
        checked against what the previous ones allowed: linear instead of quadratic.
        """
        with self._lock_for(name):
            prev = self._narrowed.get(name)
            if prev is not None and len(prev.reqs) <= len(reqs) and reqs[: len(prev.reqs)] == prev.reqs:
                narrowed = prev.extend(reqs, self.contains)
            else:
                narrowed = _Narrowed.of(reqs, self.candidates(name), self.contains)
            self._narrowed[name] = narrowed
            return narrowed

    def _lock_for(self, name: NormalizedName) -> threading.RLock:
        with self._locks_lock:
            return self._locks.setdefault(name, threading.RLock())

    def _build(self, name: NormalizedName) -> list[Cand]:
        best = self._best_files(name)
        versions = sorted(best, reverse=True)
        if name == TORCH and self.torch_allowed is not None:
            allowed = set(self.torch_allowed)
            versions = [v for v in versions if v in allowed]
        installed = self.target.installed.get(name)
        cands = [Cand(name=name, version=v, file=best[v], installed=(v == installed)) for v in versions]
        if installed is None:
            return cands
        if name not in self.NEWEST_FIRST:
            return self._installed_first(name, installed, cands)
        return self._installed_torch(name, installed, cands)

    def _installed_torch(self, name: NormalizedName, installed: Version, cands: list[Cand]) -> list[Cand]:
        """The installed torch, in version order, when the torch selection allows it and no
        wheel for it is on the index any more."""
        if name == TORCH and not any(c.installed for c in cands) and installed in (self.torch_allowed or ()):
            cands.append(Cand(name=name, version=installed, file=None, installed=True))
            cands.sort(key=lambda c: c.version, reverse=True)
        return cands

    def sdist(self, name: NormalizedName, version: Version) -> IndexFile | None:
        """The sdist of ``name`` ``version`` on its index, for a ``--build`` name (None otherwise)."""
        self._best_files(name)
        return self._sdists.get(name, {}).get(version)

    def _best_files(self, name: NormalizedName) -> dict[Version, IndexFile]:
        """Per version, the accepted wheel with the best tag; the rejected files are recorded. For a
        ``--build`` name, a version with no wheel for the target is offered through its sdist."""
        judged = self._judged.get(name)
        if judged is not None:
            return judged
        best: dict[Version, tuple[tuple[int, int, int, str], IndexFile]] = {}
        rejected: list[tuple[IndexFile, Rejection]] = []
        sdists: dict[Version, IndexFile] = {}
        quarantined = self.quarantined(name)
        for offer in self.offers(name):
            f = offer.file
            if quarantined is not None:
                rejected.append((f, quarantined))
                continue
            if not f.is_wheel and name in self.build:
                why = self.judge.fit.python_rejection(f)
                if why is None:
                    sdists.setdefault(f.version, f)
                    continue
                rejected.append((f, why))
                continue
            why = self.judge(name, f)
            spec = 0
            if why is None and f.variant is not None:
                why, spec = variant_verdict(self.finder, self.judge, f)
            if why is not None:
                rejected.append((f, why))
                continue
            # the best tag; then the most specific variant, a plain wheel before the null variant
            rank = (self.judge.fit.tag_rank(f) or 0, -spec, f.variant is not None, f.variant.label if f.variant else "")
            if f.version not in best or rank < best[f.version][0]:
                best[f.version] = (rank, f)
        self.rejections[name] = rejected
        _say_variants_refused(name, rejected, self.judge)
        if sdists:
            self._sdists[name] = sdists
        judged = self._judged[name] = {v: f for v, (_, f) in best.items()} | {v: f for v, f in sdists.items() if v not in best}
        return judged

    def _installed_first(self, name: NormalizedName, installed: Version, cands: list[Cand]) -> list[Cand]:
        """Keep what is installed when it satisfies: first, or (no file for it any more, but its
        requirements are declared) as a candidate of its own."""
        cands.sort(key=lambda c: not c.installed)
        if not any(c.installed for c in cands) and name in self.installed_requires:
            cands.insert(0, Cand(name=name, version=installed, file=None, installed=True))
        return cands


def _say_variants_refused(name: NormalizedName, rejected: Sequence[tuple[IndexFile, Rejection]], judge: Judge) -> None:
    """A package's variant wheels refused, said once as a warning (a release may be passed over
    for them): without ``--wheel-variants``, how many; with it, a variants.json that could not be
    used (a variant that does not match is said by ``candidates``, not here)."""
    if judge.variants is None:
        count = sum(1 for _, why in rejected if why.reason is RejectReason.VARIANT)
        if count:
            log.warning(
                "%s: %d variant wheel%s (PEP 825, a draft) not planned: judged only with --wheel-variants, and uv cannot install one",
                name,
                count,
                "s" * (count != 1),
            )
        return
    for detail in dict.fromkeys(why.detail.partition(": ")[2] for _, why in rejected if why.reason is RejectReason.VARIANT_METADATA):
        log.warning("%s: %s; its variant wheels are not planned", name, detail)


def variant_words(name: NormalizedName, rejected: Sequence[tuple[IndexFile, Rejection]], judge: Judge) -> tuple[str, str] | None:
    """(what, how) when ``name`` has no candidate and variant wheels were refused: only variant
    wheels are offered without ``--wheel-variants``, or none of them fits with it. None otherwise."""
    refused = [(f, why) for f, why in rejected if why.reason in (RejectReason.VARIANT, RejectReason.VARIANT_METADATA)]
    if not refused:
        return None
    labels = ", ".join(dict.fromkeys(f.variant.label for f, _ in refused if f.variant is not None))
    if judge.variants is None:
        return (
            f"{name}: its index offers this target only variant wheels (PEP 825, a draft; labels {labels}), planned only with --wheel-variants",
            f"pass --wheel-variants to judge them against the target's CUDA, --gpu set and torch (uv cannot install one: install refuses such a plan), "
            f"or serve a plain wheel of {name}",
        )
    said = "; ".join(dict.fromkeys(why.detail for _, why in refused))
    return (
        f"{name}: none of its variant wheels (PEP 825, a draft) fits this target: {said}",
        "a variant is planned only when every property holds for the target (docs/reference/wheel-variants.md); give the --gpu set it serves, "
        "drop --wheel-variants for a plain wheel, or serve a plain wheel or a variant that fits",
    )


@dataclass(frozen=True, slots=True)
class _Narrowed:
    """Requirements on one name and the candidates all of them allow (best first)."""

    reqs: list[Req]
    cands: list[Cand]
    prereleases: bool  # some requirement asks for pre-releases

    @classmethod
    def of(cls, reqs: list[Req], cands: Sequence[Cand], contains: Containment) -> _Narrowed:
        return cls([], list(cands), False).extend(reqs, contains)

    def extend(self, reqs: list[Req], contains: Containment) -> _Narrowed:
        """The same with ``reqs`` (whose first ``len(self.reqs)`` are ``self.reqs``)."""
        new = reqs[len(self.reqs) :]
        cands = [c for c in self.cands if all(r.is_satisfied_by(c, contains) for r in new)] if new else self.cands
        return _Narrowed(reqs, cands, self.prereleases or any(r.specifier.prereleases for r in new))


def _ordered(cands: Sequence[Cand], first: Version | tuple[()]) -> list[Cand]:
    """``cands`` newest first, ``first`` (when a version) ahead of the rest."""
    newest = sorted(cands, key=lambda c: c.version, reverse=True)
    return newest if first == () else sorted(newest, key=lambda c: c.version != first)


def _allows(cand: Cand, allowed: Mapping[Version, str | None] | None, *, pre_ok: bool) -> bool:
    """Whether ``cand`` is allowed beyond the requirements: a FlashInfer version the selection
    allows, a pre-release only when asked for (or installed)."""
    if allowed is not None and cand.version not in allowed:
        return False
    return not (cand.version.is_prerelease and not (pre_ok or cand.installed))
