"""`resolve-gpu-stack snapshot --output DIR`: record every page and metadata file a resolve reads."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path

from . import common


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "snapshot",
        help="record every page and metadata file a resolve reads",
        description="Run the resolver and record every page and METADATA file it reads (404s included) into DIR, with a manifest. Replay with --snapshot DIR. "
        "With --snapshot OLD it extends a snapshot: OLD is replayed, what it lacks is fetched live (as --live-fallback does), and both are recorded into DIR.",
    )
    common.add_resolve_flags(p)
    common.add_output_flags(p)
    p.add_argument("--output", type=Path, required=True, metavar="DIR")
    p.add_argument("--exclude-newer", metavar="YYYY-MM-DD", help="cut recorded PyPI pages to files uploaded on or before this day")


def run(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    from ..net.snapshot import FileCut

    defs = common.definitions(args, env, replay=False)
    target, _ = common.target_from_args(args, env)
    cut = FileCut(frozenset({target.python_version}), frozenset({target.machine}))  # PyPI pages: only files for the recorded targets
    with common.command_session(args, env) as session:
        recorder = session.recording(defs, args.output, extend=args.snapshot, exclude_newer=args.exclude_newer, cut=cut)
        plan, _ = common.run_resolve(args, env, fetcher=recorder, defs=defs)
    common.emit_plan(args, plan)
    print(f"recorded {recorder.recorded} pages and metadata files into {args.output}", file=sys.stderr)
    return 0
