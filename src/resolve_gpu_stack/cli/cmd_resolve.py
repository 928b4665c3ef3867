"""`resolve-gpu-stack [resolve]`: print the plan (the default command)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from . import common


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "resolve",
        help="print the plan (the default command)",
        description="Resolve and print the plan: per package keep / install / upgrade, from where, and why.",
    )
    common.add_resolve_flags(p)
    common.add_output_flags(p)


def run(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    plan, _ = common.run_resolve(args, env)
    common.emit_plan(args, plan)
    return 0
