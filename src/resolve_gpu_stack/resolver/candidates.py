"""`resolve-gpu-stack candidates PACKAGE`: what every owning index offers, and what fits.

"Fits" is the resolver's own judgement (``factory.Judge``): a row marked as fitting is one the
resolver could pick for this target and torch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from packaging.utils import NormalizedName, canonicalize_name

from ..data.definitions import Definitions, PageLocation, RouteContext
from ..errors import CrawlError
from ..index.finder import Finder, PageVisit
from ..index.variants import VariantTarget, properties_text
from ..model import CudaLabel, IndexFile, Target
from ..model.abi import UNVERIFIED, AbiVerdict
from ..model.gpu import GpuArch
from ..model.kept import KeptTorch
from ..rules.fit import Rejection, RejectReason
from .coupling import is_native
from .factory import Judge, variant_verdict
from .reachability import host_of, required_unreachable

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CandidateRow:
    filename: str
    version: str
    tags: str
    index: str
    url: str
    sha256: str | None
    metadata_sha256: str | None
    size: int | None
    upload_time: str | None
    yanked: bool
    fits: bool
    why_not: str | None
    abi: str | None = None  # a compiled wheel's ABI verdict in words (kind, and why it cannot run or what to know)
    built_for: str | None = None  # what a per-torch build's label says it was built for: "torch 2.9, CUDA 12.8"
    variant: str | None = None  # a variant wheel's label (PEP 825, a draft)
    variant_properties: str | None = None  # its properties by its release's variants.json (read with --wheel-variants)


def list_candidates(
    finder: Finder,
    defs: Definitions,
    target: Target,
    package: str,
    *,
    torch_channel: str = "nightly",
    cuda: CudaLabel | None = None,
    flashinfer_channel: str = "stable",
    verdict: Callable[[IndexFile], AbiVerdict | None] | None = None,
    exclude_newer: str | None = None,
    kept: KeptTorch | None = None,
    variant_gpus: tuple[GpuArch, ...] | None = None,
) -> tuple[list[CandidateRow], list[PageVisit]]:
    """Every file the owning indexes offer for ``package``, newest first, each judged as the
    resolver's candidate factory judges it (target, torch ABI against the installed torch, CUDA
    coupling against ``cuda`` or the kept torch's CUDA, yanked); a fitting compiled wheel the
    data does not cover is also judged by what it imports (``verdict``: the resolver's ABI
    judgement, against the target's torch) and does not fit when that refuses it. ``variant_gpus``
    (``--wheel-variants``, with the ``--gpu`` set): each variant wheel is judged by its release's
    variants.json as the resolver judges it, its properties shown; None: variant wheels are refused."""
    kept = kept if kept is not None else KeptTorch.of_target(target)
    torch = kept.version if kept is not None else None
    label = cuda or (kept.label if kept is not None else None)  # the one rule, read once (``KeptTorch``)
    ctx = RouteContext.of_torch(torch, str(label) if label else None, torch_channel=torch_channel, flashinfer_channel=flashinfer_channel)
    variants = VariantTarget(label, variant_gpus, torch) if variant_gpus is not None else None
    judge = Judge(defs=defs, target=target, torch=torch, cuda=label, exclude_newer=exclude_newer, variants=variants)
    name = canonicalize_name(package)
    offers, visits = finder.offers(package, ctx)
    down = finder.unreadable(name, ctx) if not all(v.found for v in visits) else []  # an optional index (FlashInfer's) that cannot be read
    if down and not any(v.found for v in visits):
        raise required_unreachable(name, down, defs)
    _warn_of_visits(name, visits, down)
    rows = [
        _judged_row(finder, defs, judge, verdict, name, offer.file, show_variants=variants is not None)
        for offer in sorted(offers, key=lambda o: (o.file.version, o.file.filename), reverse=True)
    ]
    return rows, visits


def _warn_of_visits(name: NormalizedName, visits: list[PageVisit], down: list[tuple[PageLocation, CrawlError]]) -> None:
    """Log what an index says of the project (PEP 792 status) and an optional index that cannot be read."""
    for visit in visits:
        if visit.status is not None:
            said = f": {visit.status_reason}" if visit.status_reason else ""
            log.warning("%s: its index marks the project %s (PEP 792)%s", name, visit.status, said)
    if down:
        loc, exc = down[0]
        log.warning("the %s index's host %s cannot be read (%s): %s's files there are not listed", loc.index, host_of(loc), exc.cause, name)


def _judged_row(
    finder: Finder,
    defs: Definitions,
    judge: Judge,
    verdict: Callable[[IndexFile], AbiVerdict | None] | None,
    name: NormalizedName,
    f: IndexFile,
    *,
    show_variants: bool,
) -> CandidateRow:
    """``f``'s row, judged as the resolver judges it (see ``list_candidates``)."""
    why = judge(name, f)
    if why is None:
        why = variant_verdict(finder, judge, f)[0]
    scanned = verdict(f) if verdict is not None and why is None and is_native(f) and defs.coupling_rule(name, f.version) is None else None
    row = _row(f, why, scanned, _built_for(defs, f))
    if f.variant is None:
        return row
    props = finder.variant_properties(f) if show_variants else None
    shown = properties_text(props) if props is not None and not isinstance(props, str) else None
    return replace(row, variant=f.variant.label, variant_properties=shown)


def _built_for(defs: Definitions, f: IndexFile) -> str | None:
    """What ``f``'s local label says it was built for (components.toml ``[per-torch]``), in words."""
    said = defs.per_torch.built_for(f.version.local) if defs.per_torch is not None else None
    if said is None:
        return None
    cuda = f"CUDA {said.cuda}" if len(said.cuda) <= 2 else f"CUDA {said.cuda[:-1]}.{said.cuda[-1]}"
    abi = {"true": ", C++11 ABI", "false": ", old C++ ABI"}.get(said.cxx11abi or "", "")
    return f"torch {said.torch}, {cuda}{abi}"


def _row(f: IndexFile, why: Rejection | None, verdict: AbiVerdict | None = None, built_for: str | None = None) -> CandidateRow:
    if why is None and f.is_yanked:
        why = Rejection(RejectReason.YANKED)
    if why is None and verdict is not None and verdict.refusal is not None:
        why = Rejection(RejectReason.ABI, verdict.refusal)
    return CandidateRow(
        filename=f.filename,
        version=str(f.version),
        tags=", ".join(sorted(str(t) for t in f.tags)) or "sdist",
        index=f.index,
        url=f.url,
        sha256=f.sha256,
        metadata_sha256=f.metadata_sha256,
        size=f.size,
        upload_time=f.upload_time,
        yanked=f.is_yanked,
        fits=why is None,
        why_not=(str(why) if why.reason in (RejectReason.VARIANT, RejectReason.VARIANT_METADATA) else why.reason.value) if why else None,
        abi=_abi_words(verdict) if verdict is not None else None,
        built_for=built_for,
    )


def _abi_words(verdict: AbiVerdict) -> str:
    """A wheel's ABI verdict in a few words: its kind, and its refusal or note."""
    kind = verdict.kind.value if verdict.kind is not None else "cuda" if verdict.cuda_majors else "no torch"
    if verdict.unverified:  # a guess from the library names in its first bytes: never shown as fitting on its word alone
        kind += f" ({UNVERIFIED})"
    return kind + (f": {verdict.refusal}" if verdict.refusal else f": {verdict.note}" if verdict.note else "")
