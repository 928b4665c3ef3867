"""Which FlashInfer versions the resolver may pick: those for which every requested component has
a fitting wheel, each with the jit-cache CUDA label to use, at or above every floor the GPUs and
the required APIs put on FlashInfer (``indexes/gpus.toml``). Pure: the candidates come in."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from packaging.version import Version

from ..data.definitions import Definitions
from ..errors import NoPlanError, UsageError
from ..index.finder import PageVisit
from ..model import CudaLabel, IndexFile
from ..model.request import ResolveRequest
from ..rules.fit import Rejection, RejectReason
from ..rules.versions import jit_cache_version

if TYPE_CHECKING:
    from ..data.gpus import GpuTable


@dataclass(frozen=True, slots=True, kw_only=True)
class FlashInferOffer:
    """The usable versions of each FlashInfer component for the target (from the factory)."""

    python: tuple[Version, ...]  # best first
    cubin: frozenset[Version] = frozenset()
    jit_cache: frozenset[Version] = frozenset()
    published: frozenset[Version] = frozenset()  # every flashinfer-python version its index lists, fitting or not


@dataclass(frozen=True, slots=True)
class Floor:
    """A lower bound on FlashInfer: ``what`` needs ``version`` or newer (and, for a GPU, a build for
    ``cuda`` or newer), per ``source``."""

    what: str  # "GPU sm120", "--require-api mm_mxfp8 on sm120"
    version: Version
    source: str
    cuda: CudaLabel | None = None

    def __str__(self) -> str:
        built = f", built for {self.cuda} or newer" if self.cuda is not None else ""
        return f"{self.what} needs FlashInfer >= {self.version}{built}"


def flashinfer_floors(request: ResolveRequest, gpu_table: Callable[[], GpuTable]) -> tuple[tuple[Floor, ...], tuple[str, ...]]:
    """(the floors of ``request``'s GPUs and required APIs, notes). An API asked for on a GPU it has
    no kernels for raises ``NoPlanError``; a GPU the table does not know puts no floor (a note says so).
    ``gpu_table``: the definitions' (``Definitions.gpu_table``), asked only with GPUs or APIs."""
    if not request.gpus and not request.require_api:
        return (), ()  # nothing to look up: the GPU table is not even parsed
    table = gpu_table()
    floors: list[Floor] = []
    notes: list[str] = []
    for gpu in request.gpus:
        try:
            arch = table.floor_for_arch(gpu)
        except UsageError:
            notes.append(f"GPU {gpu} is not in indexes/gpus.toml: no FlashInfer floor is known for it")
            continue
        floors.append(Floor(f"GPU {gpu}", arch.version, arch.source, arch.cuda))
    for name in request.require_api:
        if not request.gpus:
            api = table.floor_for_api(name)
            floors.append(Floor(f"--require-api {name}", api.version, api.source))
        for gpu in request.gpus:
            api = table.floor_for_api(name, gpu)
            floors.append(Floor(f"--require-api {name} on {gpu}", api.version, api.source))
    return tuple(floors), tuple(notes)


class Skipped(NamedTuple):
    """A flashinfer-python version left out: why (a message), and the components it misses."""

    version: Version
    why: str  # "flashinfer 0.3.1: no flashinfer-cubin 0.3.1; ..."
    components: frozenset[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class FlashInferSelection:
    """Allowed flashinfer-python versions -> the jit-cache label (None: no jit-cache), and notes."""

    versions: Mapping[Version, str | None] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    left_out: Mapping[Version, Skipped] = field(default_factory=dict)  # versions a component misses, and why

    def label(self, version: Version | None) -> str | None:
        return None if version is None else self.versions.get(version)


def select_flashinfer(
    request: ResolveRequest, defs: Definitions, cuda: CudaLabel, components: Sequence[str], offer: FlashInferOffer, *, where: str, floors: Sequence[Floor] = ()
) -> FlashInferSelection:
    """The flashinfer-python versions for which every one of ``components`` has a wheel, at or
    above every one of ``floors``.

    ``where`` names the target in an error ("Python 3.12 on ..."). Notes name the newer
    versions it had to skip. A floor no version meets raises ``NoPlanError`` naming the floor and
    what stood in the way.
    """
    wanted = _wanted_versions(request, offer.python)
    min_cuda = _cuda_floor(floors, cuda)
    versions = [v for v in wanted if all(v >= f.version for f in floors)]
    if floors and wanted and not versions:
        raise _floor_error(request, floors, wanted, where)
    labels = _labels_at_or_above(defs, cuda, min_cuda)
    allowed, skipped = _complete_versions(versions, defs, cuda, labels, components, offer)
    if not allowed:
        raise _no_complete_version(request, defs, cuda, components, floors, min_cuda, skipped, where, offer)
    return FlashInferSelection(
        versions=allowed, notes=_skipped_notes(allowed, skipped) + _floor_notes(floors, wanted), left_out={s.version: s for s in skipped}
    )


def _skipped_notes(allowed: Collection[Version], skipped: Sequence[Skipped]) -> tuple[str, ...]:
    """The newer versions skipped (at most five), each with why."""
    newest = max(allowed)
    return tuple(f"{s.why}; newest with every component is {newest}" for s in skipped if s.version > newest)[:5]


def _labels_at_or_above(defs: Definitions, cuda: CudaLabel, min_cuda: CudaLabel | None) -> list[str]:
    """The jit-cache labels torch's CUDA can run, at or above the GPUs' CUDA floor (if any)."""
    return [lab for lab in defs.flashinfer_labels(str(cuda)) if min_cuda is None or (CudaLabel.parse(lab) or cuda) >= min_cuda]


def _complete_versions(
    versions: Sequence[Version], defs: Definitions, cuda: CudaLabel, labels: Sequence[str], components: Sequence[str], offer: FlashInferOffer
) -> tuple[dict[Version, str | None], list[Skipped]]:
    """({version: jit-cache label} of the versions with every component, the versions left out)."""
    allowed: dict[Version, str | None] = {}
    skipped: list[Skipped] = []
    for v in versions:
        label, missing = _components_at(v, defs, cuda, list(labels), components, offer)
        if missing:
            skipped.append(Skipped(v, f"flashinfer {v}: {'; '.join(missing.values())}", frozenset(missing)))
        else:
            allowed[v] = label
    return allowed, skipped


def _no_complete_version(
    request: ResolveRequest,
    defs: Definitions,
    cuda: CudaLabel,
    components: Sequence[str],
    floors: Sequence[Floor],
    min_cuda: CudaLabel | None,
    skipped: Sequence[Skipped],
    where: str,
    offer: FlashInferOffer,
) -> NoPlanError:
    exact = request.flashinfer.version
    why = [s.why for s in skipped][:6] or [f"no flashinfer-python wheel fits {where}" + (f" at {exact}" if exact else "")]
    if exact is not None and offer.published and exact not in offer.published:
        newest = max((v for v in offer.python if not v.is_prerelease), default=None) or max(offer.published)
        fi = defs.flashinfer.python
        return NoPlanError(
            f"{fi} {exact} does not exist: its index lists no such version (the newest with a wheel for {where} is {newest})",
            reasons=why,
            hint=f"pick a version that exists (`resolve-gpu-stack candidates {fi}` lists them), or --flashinfer latest",
        )
    if min_cuda is not None and defs.flashinfer.jit_cache in components:
        why.insert(0, "; ".join(str(f) for f in floors if f.cuda == min_cuda))
    return NoPlanError(
        f"no FlashInfer version has every requested component ({', '.join(components)}) for {cuda}", reasons=why, hint=_hint(request, defs, skipped)
    )


def _cuda_floor(floors: Sequence[Floor], cuda: CudaLabel) -> CudaLabel | None:
    """The highest CUDA label the GPUs need; torch's CUDA below it raises ``NoPlanError``."""
    needed = [(f.cuda, f) for f in floors if f.cuda is not None]
    if not needed:
        return None
    top_cuda, top = max(needed, key=lambda pair: pair[0])
    if cuda < top_cuda:
        raise NoPlanError(
            f"{top.what} needs FlashInfer built for {top.cuda} or newer, but torch runs {cuda}",
            reasons=[f"{top}: {top.source}", f"the CUDA label {cuda} has no FlashInfer build whose kernels run on {top.what.split()[-1]}"],
            hint=f"use a torch built for {top.cuda} or newer (--cuda {top.cuda} --change-cuda)",
        )
    return top_cuda


def _floor_error(request: ResolveRequest, floors: Sequence[Floor], wanted: Sequence[Version], where: str) -> NoPlanError:
    """No wanted version meets every floor: name the highest floor, and what stood in the way."""
    top = max(floors, key=lambda f: f.version)
    pin = request.flashinfer.version
    if pin is not None:
        blocker = f"--flashinfer {request.flashinfer} pins {pin}, below it"
        hint = f"drop --flashinfer {request.flashinfer} or pin {top.version} or newer"
    else:
        blocker = f"the newest FlashInfer with a wheel for {where} is {max(wanted)}"
        hint = (
            "drop the --require-api / --gpu that raises the floor"
            if request.flashinfer.text == "nightly"
            else "allow pre-releases (--flashinfer nightly) or drop the --require-api / --gpu that raises the floor"
        )
    best = pin if pin is not None else max(wanted)  # the floors it meets are no reason (a satisfied GPU floor is no bullet)
    return NoPlanError(f"{top} (floor {top.version}); {blocker}", reasons=[f"{f}: {f.source}" for f in floors if f.version > best][:6], hint=hint)


def _floor_notes(floors: Sequence[Floor], wanted: Sequence[Version]) -> tuple[str, ...]:
    """A note for each floor that left out a version the selection would otherwise consider."""
    return tuple(f"{f}: older FlashInfer versions left out ({f.source})" for f in floors if any(v < f.version for v in wanted))


def _components_at(
    v: Version, defs: Definitions, cuda: CudaLabel, labels: Sequence[str], components: Sequence[str], offer: FlashInferOffer
) -> tuple[str | None, dict[str, str]]:
    """The jit-cache label to use at flashinfer-python ``v`` (None: no jit-cache asked for), and
    what is missing for that version ({component: why})."""
    fi = defs.flashinfer
    missing: dict[str, str] = {}
    if fi.cubin in components and v not in offer.cubin:
        missing[fi.cubin] = f"no {fi.cubin} {v}"
    if fi.jit_cache not in components:
        return None, missing
    label = next((lab for lab in labels if jit_cache_version(v, lab) in offer.jit_cache), None)
    if label is None:
        missing[fi.jit_cache] = f"no {fi.jit_cache} for {cuda if not labels else '/'.join(labels)} at {v}"
    return label, missing


def _wanted_versions(request: ResolveRequest, python: Sequence[Version]) -> list[Version]:
    choice = request.flashinfer
    versions = [v for v in python if choice.allows_prereleases or not v.is_prerelease]
    if choice.channel == "nightly":
        versions = [v for v in versions if v.is_devrelease]
    if choice.version is not None:
        versions = [v for v in versions if v == choice.version]
    return versions


def _hint(request: ResolveRequest, defs: Definitions, skipped: Sequence[Skipped]) -> str:
    """What would give a plan: leaving out a component only where it is all some version misses
    (not for a version that has no flashinfer-python at all), another --flashinfer only where one was given."""
    fi = defs.flashinfer
    components = ((request.jit_cache, fi.jit_cache, "--no-jit-cache"), (request.cubin, fi.cubin, "--no-cubin"))
    hints = [flag for asked, component, flag in components if asked and any(s.components == {component} for s in skipped)]
    if request.flashinfer.text != "latest":
        hints.append("--flashinfer latest")
    return "try " + " or ".join(hints) if hints else "check the FlashInfer index (--index flashinfer=URL) and --cuda: no version has these components"


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
