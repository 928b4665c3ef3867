"""`resolve-gpu-stack candidates PACKAGE`: what every owning index offers, and what fits."""

from __future__ import annotations

from dataclasses import dataclass

from packaging.utils import canonicalize_name

from ..data.definitions import Definitions, RouteContext
from ..index.finder import Finder, PageVisit
from ..model import Target
from .policy import fits_target


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


def list_candidates(finder: Finder, defs: Definitions, target: Target, package: str, *, torch_channel: str = "nightly", cuda: str | None = None, flashinfer_channel: str = "stable") -> tuple[list[CandidateRow], list[PageVisit]]:
    from ..model.cuda import cuda_label_text

    torch = target.installed.get(canonicalize_name("torch"))
    cuda = cuda or cuda_label_text(torch)
    series = f"{torch.major}.{torch.minor}" if torch is not None else None
    ctx = RouteContext(torch_channel=torch_channel, cuda=cuda, flashinfer_channel=flashinfer_channel, torch_series=series)
    offers, visits = finder.offers(package, ctx)
    rows = []
    for offer in sorted(offers, key=lambda o: (o.file.version, o.file.filename), reverse=True):
        f = offer.file
        why = fits_target(f, target)
        rows.append(
            CandidateRow(
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
                fits=why is None and not f.is_yanked,
                why_not=why.reason.value if why else ("yanked" if f.is_yanked else None),
            )
        )
    return rows, visits
