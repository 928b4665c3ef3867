"""`resolve-gpu-stack lock`: resolve, then write pylock.<name>.toml and/or a constraints file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Mapping

from . import cli


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "lock",
        help="resolve and write pylock.<name>.toml or a constraints .txt",
        description="Resolve; with -o write the plan as a PEP 751 pylock.<name>.toml or a pip/uv constraints file (*.txt). Without -o it prints the plan, like `resolve`.",
    )
    cli.add_resolve_flags(p)
    cli.add_output_flags(p)
    p.add_argument("-o", "--output", type=Path, action="append", default=[], metavar="FILE", help="pylock.<name>.toml or *.txt (repeatable)")


def run(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    plan, _ = cli.run_resolve(args, env)
    if not args.output:
        cli.emit_plan(args, plan)
        return 0
    from .lockfile import write_lock

    command = cli.command_line(sys.argv[1:] if sys.argv[1:] else ["lock"])
    for path in args.output:
        written = write_lock(plan, path, command=command)
        print(f"wrote {written}", file=sys.stderr)
    return 0
