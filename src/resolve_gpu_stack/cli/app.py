"""The command line: the parser and ``main``. The only place that reads flags, the environment and
config files is this floor (``cli/``).

Each command lives in its own module with ``register(subparsers)`` and ``run(args, env) -> int``;
``COMMANDS`` is the static table of them. Their heavy imports (httpx, resolvelib, rich) stay inside
``run``, so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from ..errors import ResolveGpuStackError
from . import cmd_cache, cmd_candidates, cmd_check, cmd_doctor, cmd_install, cmd_lock, cmd_resolve, cmd_snapshot, cmd_wheelhouse
from .common import configure_logging, refuse_long_numbers_in

# command name -> module; the order is the order of --help
COMMANDS: dict[str, ModuleType] = {
    "resolve": cmd_resolve,
    "candidates": cmd_candidates,
    "snapshot": cmd_snapshot,
    "lock": cmd_lock,
    "install": cmd_install,
    "wheelhouse": cmd_wheelhouse,
    "doctor": cmd_doctor,
    "check": cmd_check,
    "cache": cmd_cache,
}

DESCRIPTION = """\
Resolve a PyTorch + FlashInfer GPU stack that fits the torch already installed, and never
downgrade that torch. Each package comes only from the index that owns it (torch and friends from
the PyTorch index, flashinfer-jit-cache from flashinfer.ai, the rest from PyPI).

  resolve-gpu-stack --torch nightly                     plan for the active environment
  resolve-gpu-stack --python 3.12 --platform x86_64-manylinux_2_28 \\
      --installed torch==2.12.0.dev20260307+cu130 --snapshot indexes/snapshots/2026-03-07
  resolve-gpu-stack lock --torch nightly -o pylock.gpu.toml
  resolve-gpu-stack candidates flashinfer-jit-cache --cuda cu130

Exit codes: 0 plan found (or check passed), 1 no plan exists / check failed (a refused torch
downgrade included), 2 usage error, 3 an index could not be reached or answered garbage.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="resolve-gpu-stack", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS.values():
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0] not in COMMANDS and argv[0] not in ("-h", "--help")):
        argv = ["resolve", *argv]
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    configure_logging(args)
    try:
        refuse_long_numbers_in(argv)
        return COMMANDS[args.command].run(args, os.environ)
    except ResolveGpuStackError as err:
        _print_error(err)
        return err.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _print_error(err: ResolveGpuStackError) -> None:
    print(f"error: {err}", file=sys.stderr)
    if err.hint:
        print(f"hint: {err.hint}", file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
