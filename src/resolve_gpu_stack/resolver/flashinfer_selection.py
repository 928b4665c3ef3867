"""Which FlashInfer versions the resolver may pick: those for which every requested component has
a fitting wheel, each with the jit-cache CUDA label to use. Pure: the candidates come in."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from packaging.version import Version

from ..data.definitions import Definitions
from ..errors import NoPlanError
from ..index.finder import PageVisit
from ..model import CudaLabel, IndexFile
from ..model.request import ResolveRequest
from .policy import Rejection, RejectReason, jit_cache_version


@dataclass(frozen=True, slots=True, kw_only=True)
class FlashInferOffer:
    """The usable versions of each FlashInfer component for the target (from the factory)."""

    python: tuple[Version, ...]  # best first
    cubin: frozenset[Version] = frozenset()
    jit_cache: frozenset[Version] = frozenset()


@dataclass(frozen=True, slots=True, kw_only=True)
class FlashInferSelection:
    """Allowed flashinfer-python versions -> the jit-cache label (None: no jit-cache), and notes."""

    versions: Mapping[Version, str | None] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def label(self, version: Version | None) -> str | None:
        return None if version is None else self.versions.get(version)


def select_flashinfer(request: ResolveRequest, defs: Definitions, cuda: CudaLabel, components: Sequence[str], offer: FlashInferOffer, *, where: str) -> FlashInferSelection:
    """The flashinfer-python versions for which every one of ``components`` has a wheel.

    ``where`` names the target in an error ("Python 3.12 on ..."). Notes name the newer
    versions it had to skip.
    """
    versions = _wanted_versions(request, offer.python)
    labels = defs.flashinfer_labels(str(cuda))
    allowed: dict[Version, str | None] = {}
    skipped: list[tuple[Version, str]] = []
    for v in versions:
        label, missing = _components_at(v, defs, cuda, labels, components, offer)
        if missing:
            skipped.append((v, f"flashinfer {v}: {'; '.join(missing)}"))
        else:
            allowed[v] = label
    if not allowed:
        exact = request.flashinfer.version
        why = [s for _, s in skipped][:6] or [f"no flashinfer-python wheel fits {where}" + (f" at {exact}" if exact else "")]
        raise NoPlanError(f"no FlashInfer version has every requested component ({', '.join(components)}) for {cuda}", reasons=why, hint=_hint(request))
    newest = max(allowed)
    notes = tuple(f"{s}; newest with every component is {newest}" for v, s in skipped if v > newest)[:5]
    return FlashInferSelection(versions=allowed, notes=notes)


def _components_at(v: Version, defs: Definitions, cuda: CudaLabel, labels: Sequence[str], components: Sequence[str], offer: FlashInferOffer) -> tuple[str | None, list[str]]:
    """The jit-cache label to use at flashinfer-python ``v`` (None: no jit-cache asked for), and
    what is missing for that version."""
    fi = defs.flashinfer
    missing = []
    if fi.cubin in components and v not in offer.cubin:
        missing.append(f"no {fi.cubin} {v}")
    if fi.jit_cache not in components:
        return None, missing
    label = next((lab for lab in labels if jit_cache_version(v, lab) in offer.jit_cache), None)
    if label is None:
        missing.append(f"no {fi.jit_cache} for {cuda if not labels else '/'.join(labels)} at {v}")
    return label, missing


def _wanted_versions(request: ResolveRequest, python: Sequence[Version]) -> list[Version]:
    choice = request.flashinfer
    versions = [v for v in python if choice.allows_prereleases or not v.is_prerelease]
    if choice.channel == "nightly":
        versions = [v for v in versions if v.is_devrelease]
    if choice.version is not None:
        versions = [v for v in versions if v == choice.version]
    return versions


def _hint(request: ResolveRequest) -> str:
    hints = []
    if request.jit_cache:
        hints.append("--no-jit-cache")
    if request.flashinfer.text != "latest":
        hints.append("--flashinfer latest")
    return "try " + " or ".join(hints) if hints else "try another --flashinfer version"


def legacy_notes(visits: Collection[PageVisit], rejections: Sequence[tuple[IndexFile, Rejection]]) -> tuple[str, ...]:
    """Notes on the legacy torch-ABI-bound AOT pages: which answered 404, which wheels were built
    for another torch."""
    notes = []
    for visit in visits:
        if visit.location.route.legacy and not visit.found:
            answer = visit.warnings[0] if visit.warnings else "answered 404"
            notes.append(f"{visit.location.url} {answer} (no torch-ABI-bound AOT wheels for this torch; the torch-agnostic wheels are used)")
    seen = set()
    for f, why in rejections:
        if why.reason is RejectReason.TORCH_ABI and f.version not in seen:
            seen.add(f.version)
            notes.append(f"flashinfer {f.version} is {why.detail}: not used")
    return tuple(notes)
