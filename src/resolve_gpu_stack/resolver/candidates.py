"""`resolve-gpu-stack candidates PACKAGE`: what every owning index offers, and what fits.

"Fits" is the resolver's own judgement (``factory.Judge``): a row marked as fitting is one the
resolver could pick for this target and torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.utils import canonicalize_name

from ..data.definitions import Definitions, RouteContext
from ..index.finder import Finder, PageVisit
from ..model import CudaLabel, IndexFile, Target
from ..model.request import TORCH
from ..rules.fit import Rejection, RejectReason
from ..rules.versions import torch_series
from .factory import Judge


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


def list_candidates(finder: Finder, defs: Definitions, target: Target, package: str, *, torch_channel: str = "nightly", cuda: CudaLabel | None = None, flashinfer_channel: str = "stable") -> tuple[list[CandidateRow], list[PageVisit]]:
    """Every file the owning indexes offer for ``package``, newest first, each judged as the
    resolver's candidate factory judges it (target, torch ABI against the installed torch, CUDA
    coupling against ``cuda`` or the installed torch's label, yanked)."""
    torch = target.installed.get(TORCH)
    label = cuda or CudaLabel.of_torch(torch)
    series = torch_series(torch) if torch is not None else None
    ctx = RouteContext(torch_channel=torch_channel, cuda=str(label) if label else None, flashinfer_channel=flashinfer_channel, torch_series=series)
    judge = Judge(defs=defs, target=target, torch=torch, cuda=label)
    name = canonicalize_name(package)
    offers, visits = finder.offers(package, ctx)
    rows = [_row(offer.file, judge(name, offer.file)) for offer in sorted(offers, key=lambda o: (o.file.version, o.file.filename), reverse=True)]
    return rows, visits


def _row(f: IndexFile, why: Rejection | None) -> CandidateRow:
    if why is None and f.is_yanked:
        why = Rejection(RejectReason.YANKED)
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
        why_not=why.reason.value if why else None,
    )
