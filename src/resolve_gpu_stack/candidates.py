"""`resolve-gpu-stack candidates PACKAGE`: what every owning index offers, and what fits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TextIO

from packaging.utils import canonicalize_name

from .finder import Finder, PageVisit
from .indexes import Definitions, RouteContext
from .models import Target
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
    from .target import cuda_from_torch

    torch = target.installed.get(canonicalize_name("torch"))
    cuda = cuda or (cuda_from_torch(torch) if torch is not None else None)
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


def _json(rows: list[CandidateRow]) -> list[dict[str, Any]]:
    return [
        {
            "filename": r.filename, "version": r.version, "tags": r.tags, "index": r.index, "url": r.url,
            "sha256": r.sha256, "metadata_sha256": r.metadata_sha256, "size": r.size,
            "upload_time": r.upload_time, "yanked": r.yanked, "fits_target": r.fits, "why_not": r.why_not,
        }
        for r in rows
    ]


def print_candidates(rows: list[CandidateRow], visits: list[PageVisit], fmt: str, out: TextIO) -> None:
    if fmt == "json":
        from .output import print_json

        print_json(_json(rows), out)
        return
    from rich.console import Console
    from rich.table import Table

    console = Console(file=out, highlight=False, width=None if out.isatty() else 220)
    table = Table(title_justify="left")
    for col in ("version", "tags", "index", "sha256", "size", "fits"):
        table.add_column(col, overflow="fold", no_wrap=col in ("version", "sha256"))
    for r in rows:
        table.add_row(
            r.version, r.tags, r.index,
            r.sha256 or (f"no hash (metadata sha256 {r.metadata_sha256})" if r.metadata_sha256 else "no hash"),
            f"{r.size:,}" if r.size else "", "yes" if r.fits else f"no: {r.why_not}",
        )
    console.print(table)
    for v in visits:
        state = f"{v.files} files" if v.found else "404 (no such page)"
        console.print(f"{v.location.url}: {state}", markup=False)
        for w in v.warnings:
            console.print(f"  warning: {w}", markup=False)
