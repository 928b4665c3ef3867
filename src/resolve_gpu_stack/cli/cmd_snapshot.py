"""`resolve-gpu-stack snapshot --output DIR`: record every page and metadata file a resolve reads."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..net.snapshot import FileCut
from . import common
from . import options as O

if TYPE_CHECKING:
    from .assemble import Session


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotSettings(O.ResolveOptions):
    folder: Path  # --output DIR: the snapshot recorded (``sources.snapshot``: the one it extends)
    exclude_newer: str | None = None  # --exclude-newer (the settings table's row): recorded PyPI pages are cut to it too


def read(args: argparse.Namespace, env: Mapping[str, str]) -> SnapshotSettings:
    return SnapshotSettings(**O.resolve_fields(args, env), folder=args.output, exclude_newer=args.exclude_newer)


def run(settings: SnapshotSettings, env: Mapping[str, str], session: Session) -> int:
    defs = common.definitions(settings.sources, env, replay=False)
    target, _ = common.target_of(settings.typed, env)
    cut = FileCut(frozenset({target.python_version}), frozenset({target.machine}))  # PyPI pages: only files for the recorded targets
    recorder = session.recording(defs, settings.folder, extend=settings.sources.snapshot, exclude_newer=settings.exclude_newer, cut=cut)
    plan, _ = common.run_resolve(settings, env, session, fetcher=recorder, defs=defs)
    common.emit_plan(settings.output, plan)
    print(f"recorded {recorder.recorded} pages and metadata files into {settings.folder}", file=sys.stderr)
    return 0
