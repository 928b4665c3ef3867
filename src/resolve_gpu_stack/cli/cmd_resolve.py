"""`resolve-gpu-stack [resolve]`: print the plan (the default command)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TYPE_CHECKING

from . import common
from . import options as O

if TYPE_CHECKING:
    from .assemble import Session


def read(args: argparse.Namespace, env: Mapping[str, str]) -> O.ResolveOptions:
    return O.ResolveOptions(**O.resolve_fields(args, env))


def run(settings: O.ResolveOptions, env: Mapping[str, str], session: Session) -> int:
    plan, _ = common.run_resolve(settings, env, session)
    common.emit_plan(settings.output, plan)
    return 0
