"""`resolve-gpu-stack candidates PACKAGE`: what every owning index offers for a package."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..index.parse import parse_metadata
from ..model import IndexFile
from ..model.abi import AbiVerdict
from ..model.request import TORCH
from ..resolver.candidates import list_candidates
from . import common
from . import options as O
from . import settings as S
from .assemble import offline_hinted
from .tables import print_candidates

if TYPE_CHECKING:
    from .assemble import Session


@dataclass(frozen=True, slots=True, kw_only=True)
class CandidatesSettings(O.ResolveOptions):
    package: str


def read(args: argparse.Namespace, env: Mapping[str, str]) -> CandidatesSettings:
    return CandidatesSettings(**O.resolve_fields(args, env), package=args.package)


def run(settings: CandidatesSettings, env: Mapping[str, str], session: Session) -> int:
    # parsed at the edge by the settings table, as every command (a bad --cuda is a usage error);
    # the target settings go to target_of, which also takes an interpreter path; the rest reach
    # this command as the request's typed fields
    defs = common.definitions(settings.sources, env)
    target, installed_requires = common.target_of(settings.typed, env)
    request = S.build_request(S.complete(settings.typed.values), target=target, installed_requires=installed_requires)
    torch, flashinfer, cuda, exclude_newer, wheel_variants, gpus = (
        request.torch,
        request.flashinfer,
        request.cuda,
        request.exclude_newer,
        request.wheel_variants,
        request.gpus,
    )
    torch_channel = torch.for_kept(target.installed.get(TORCH)).channel  # an installed torch is kept: the rest follow its channel

    with common.make_parts(session, settings.sources, defs) as parts, offline_hinted(target.installed.get(TORCH)):
        kept = parts.kept_torch(target, installed_requires.get(TORCH, ()), cuda)

        def verdict(file: IndexFile) -> AbiVerdict | None:
            """A compiled wheel judged as the resolver judges it: what it imports, against the target's torch."""
            metadata = parts.source.fetch_metadata([file]).get(file.url, b"")
            requires = parse_metadata(metadata, source=file.url).requires_dist if metadata else ()
            return parts.judge(file.name, parts.classifier(file), requires, kept, target)

        rows, visits = list_candidates(
            parts.finder,
            defs,
            target,
            settings.package,
            torch_channel=torch_channel,
            cuda=cuda,
            flashinfer_channel=flashinfer.channel,
            verdict=verdict,
            exclude_newer=exclude_newer,
            kept=kept,
            variant_gpus=tuple(gpus) if wheel_variants else None,
        )
    print_candidates(rows, visits, common.output_format(settings.output), sys.stdout, package=settings.package)
    return 0
