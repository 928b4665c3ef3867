"""The command line: the only place that reads flags, the environment and config files.

Heavy modules (httpx, resolvelib, rich, bs4) are imported inside the commands, so ``--help``
stays fast.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

COMMANDS = ("resolve", "lock", "candidates", "snapshot", "install", "doctor", "check")

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


def add_target_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("target (markers and tags are the target's, never this machine's)")
    g.add_argument("--python", metavar="PATH|X.Y", help="an interpreter to inspect, or a Python version to declare (default: the active virtual environment, else python3)")
    g.add_argument("--platform", metavar="PLATFORM", help="with a declared --python: x86_64-manylinux_2_28 (default) or aarch64-manylinux_2_28, ...")
    g.add_argument("--installed", metavar="NAME==VERSION", action="append", default=[], help="with a declared --python: a distribution the target already has (repeatable), e.g. torch==2.12.0.dev20260307+cu130")
    g.add_argument("--cuda", metavar="cuNNN", help="CUDA label; default: the installed torch's (+cu130). A different one is an error unless --change-cuda")
    g.add_argument("--change-cuda", action="store_true", help="allow --cuda to move torch to another CUDA label")


def add_index_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("indexes")
    g.add_argument("--index", metavar="NAME=URL", action="append", default=[], help="base URL of a logical index: pytorch, flashinfer or pypi (a mirror keeps the same paths). The PyPI URL otherwise comes from uv/pip configuration")
    g.add_argument("--snapshot", metavar="DIR", type=Path, help="replay a recorded snapshot, with no network at all")
    g.add_argument("--cache-dir", metavar="DIR", type=Path, help="HTTP cache (default: $XDG_CACHE_HOME/resolve-gpu-stack)")
    g.add_argument("--allow-insecure-host", metavar="HOST", action="append", default=[], help="allow plain http:// to HOST (loopback is always allowed)")
    g.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS", help="per-request timeout (default 30)")


def add_resolve_flags(p: argparse.ArgumentParser) -> None:
    add_target_flags(p)
    g = p.add_argument_group("what to resolve")
    g.add_argument("--torch", default="nightly", metavar="CHANNEL|SPEC", help="nightly (default: the newest nightly with a wheel for this target), test, stable, installed (keep exactly what is installed), or a version/specifier")
    g.add_argument("--allow-downgrade", action="store_true", help="let --torch pick a torch lower than the installed one (off: such a request fails)")
    g.add_argument("--flashinfer", default="latest", metavar="VERSION|latest|nightly|none", help="FlashInfer version (default latest: the newest with every component for this target)")
    g.add_argument("--no-jit-cache", action="store_true", help="leave out flashinfer-jit-cache (kernels are JIT-compiled; needs nvcc)")
    g.add_argument("--no-cubin", action="store_true", help="leave out flashinfer-cubin")
    g.add_argument("--with", dest="with_", metavar="REQ", action="append", default=[], help="add a package to the plan, e.g. --with torchvision (repeatable)")
    add_index_flags(p)


def add_output_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("table", "json"), help="output format (default: table on a terminal, json otherwise)")
    p.add_argument("-v", "--verbose", action="store_true", help="log requests and decisions to stderr")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress messages")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="resolve-gpu-stack", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("resolve", help="print the plan (the default command)", description="Resolve and print the plan: per package keep / install / upgrade, from where, and why.")
    add_resolve_flags(p)
    add_output_flags(p)

    p = sub.add_parser("candidates", help="list what every owning index offers for a package", description="List the files each owning index offers for PACKAGE: version, tags, index, sha256 or 'no hash', size, and whether it fits the target.")
    p.add_argument("package")
    add_target_flags(p)
    p.add_argument("--torch", default="nightly", metavar="CHANNEL", help="PyTorch channel for pytorch-index packages: nightly (default), test, stable")
    p.add_argument("--flashinfer", default="latest", metavar="CHANNEL", help="latest (stable pages) or nightly")
    add_index_flags(p)
    add_output_flags(p)

    p = sub.add_parser("snapshot", help="record every page and metadata file a resolve reads", description="Run the resolver and record every page and METADATA file it reads (404s included) into DIR, with a manifest. Replay with --snapshot DIR.")
    add_resolve_flags(p)
    add_output_flags(p)
    p.add_argument("--output", type=Path, required=True, metavar="DIR")
    p.add_argument("--exclude-newer", metavar="YYYY-MM-DD", help="cut recorded PyPI pages to files uploaded on or before this day")
    for name in PLUGIN_COMMANDS:
        module = _plugin(name)
        if module is not None:
            module.register(sub)
    return parser


def _configure_logging(args: argparse.Namespace) -> None:
    level = logging.DEBUG if getattr(args, "verbose", False) else (logging.ERROR if getattr(args, "quiet", False) else logging.WARNING)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0] not in COMMANDS and argv[0] not in ("-h", "--help")):
        argv = ["resolve", *argv]
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    _configure_logging(args)
    from ..errors import ResolveGpuStackError

    if args.command in _HANDLERS:
        handler: Callable[[argparse.Namespace, Mapping[str, str]], int] = _HANDLERS[args.command]
    else:
        handler = _plugin(args.command).run
    try:
        return handler(args, os.environ)
    except ResolveGpuStackError as err:
        _print_error(err)
        return err.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _print_error(err: Any) -> None:
    print(f"error: {err}", file=sys.stderr)
    if getattr(err, "hint", None):
        print(f"hint: {err.hint}", file=sys.stderr)


# -- building blocks -----------------------------------------------------------------------------

def _index_overrides(args: argparse.Namespace) -> dict[str, str]:
    from ..errors import UsageError

    out = {}
    for item in args.index:
        name, sep, url = item.partition("=")
        if not sep or not name or not url:
            raise UsageError(f"--index {item!r}: expected NAME=URL", hint="e.g. --index pypi=https://mirror.example/simple/")
        out[name.strip()] = url.strip()
    return out


def definitions(args: argparse.Namespace, env: Mapping[str, str], *, need_pypi: bool = True, replay: bool = True):
    """Index definitions with --index overrides; PyPI's URL from config unless a snapshot replays it."""
    from ..data.definitions import load_definitions
    from ..net.snapshot import PLACEHOLDER_BASE

    defs = load_definitions()
    overrides = _index_overrides(args)
    if "pypi" not in overrides:
        if args.snapshot is not None and replay:
            overrides["pypi"] = PLACEHOLDER_BASE.format(name="pypi")
        elif need_pypi:
            from .userconfig import discover_pypi_url

            overrides["pypi"] = discover_pypi_url(env)
    return defs.with_index_urls(overrides)


def progress_printer(args: argparse.Namespace) -> Callable[[str], None] | None:
    if getattr(args, "quiet", False) or not sys.stderr.isatty():
        return None
    return lambda msg: print(msg, file=sys.stderr)


def live_fetcher(args: argparse.Namespace, env: Mapping[str, str]):
    from ..net.cache import HttpCache, default_cache_dir
    from ..net.http import HttpFetcher

    cache_dir = args.cache_dir or default_cache_dir(env)
    return HttpFetcher(
        cache=HttpCache(cache_dir),
        timeout=args.timeout,
        allow_insecure_hosts=tuple(args.allow_insecure_host),
        progress=progress_printer(args),
    )


def make_fetcher(args: argparse.Namespace, env: Mapping[str, str], defs):
    if args.snapshot is not None:
        from ..net.snapshot import SnapshotFetcher

        return SnapshotFetcher(args.snapshot, {n: d.url for n, d in defs.indexes.items()})
    return live_fetcher(args, env)


def target_from_args(args: argparse.Namespace, env: Mapping[str, str]):
    """(Target, installed requirements by name) from --python/--platform/--installed."""
    from ..env.probe import default_interpreter, inspect_environment, parse_python_flag
    from ..errors import UsageError
    from ..model.declared import declared_target

    if args.python is not None:
        kind, value = parse_python_flag(args.python, search_path=env.get("PATH"))
    else:
        kind, value = "interpreter", default_interpreter(env)
    if kind == "version":
        return declared_target(value, args.platform or "x86_64-manylinux_2_28", args.installed), {}
    if args.platform or args.installed:
        raise UsageError("--platform and --installed describe a declared target", hint="use them with --python X.Y, not with an interpreter path")
    environment = inspect_environment(value)
    requires = {name: tuple(d.requires_dist) for name, d in environment.distributions.items()}
    return environment.target, requires


def request_from_args(args: argparse.Namespace, env: Mapping[str, str]):
    from ..model.request import ResolveRequest

    target, requires = target_from_args(args, env)
    return ResolveRequest.build(
        target=target,
        torch=args.torch,
        cuda=args.cuda,
        change_cuda=args.change_cuda,
        flashinfer=args.flashinfer,
        jit_cache=not args.no_jit_cache,
        cubin=not args.no_cubin,
        with_=tuple(args.with_),
        allow_downgrade=args.allow_downgrade,
        installed_requires=requires,
    )


def output_format(args: argparse.Namespace) -> str:
    return args.format or ("table" if sys.stdout.isatty() else "json")


def command_line(argv: Sequence[str]) -> str:
    """The command as a user would retype it, with any credentials removed."""
    import shlex

    from ..urls import redact_url

    return "resolve-gpu-stack " + " ".join(shlex.quote(redact_url(a) if "://" in a else a) for a in argv)


def run_resolve(args: argparse.Namespace, env: Mapping[str, str], fetcher=None, defs=None):
    from ..index.finder import Finder
    from ..resolver.resolve import resolve

    defs = defs or definitions(args, env)
    request = request_from_args(args, env)
    fetcher = fetcher or make_fetcher(args, env, defs)
    try:
        return resolve(request, Finder(fetcher, defs), defs), defs
    finally:
        fetcher.close()


def emit_plan(args: argparse.Namespace, plan) -> None:
    from .render import plan_to_json, print_json, print_plan_table

    if output_format(args) == "json":
        print_json(plan_to_json(plan), sys.stdout)
    else:
        print_plan_table(plan, sys.stdout)


# -- commands ------------------------------------------------------------------------------------

def cmd_resolve(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    plan, _ = run_resolve(args, env)
    emit_plan(args, plan)
    return 0


def cmd_snapshot(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    from ..net.snapshot import FallbackFetcher, RecordingFetcher, SnapshotFetcher

    defs = definitions(args, env, replay=False)
    bases = {n: d.url for n, d in defs.indexes.items()}
    live = live_fetcher(args, env)
    inner = FallbackFetcher(SnapshotFetcher(args.snapshot, bases), live) if args.snapshot is not None else live
    recorder = RecordingFetcher(inner, args.output, bases, exclude_newer=args.exclude_newer)
    plan, _ = run_resolve(args, env, fetcher=recorder, defs=defs)
    emit_plan(args, plan)
    print(f"recorded {recorder.recorded} pages and metadata files into {args.output}", file=sys.stderr)
    return 0


def cmd_candidates(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    from ..index.finder import Finder
    from ..resolver.candidates import list_candidates
    from .render import print_candidates

    defs = definitions(args, env)
    target, _ = target_from_args(args, env)
    fetcher = make_fetcher(args, env, defs)
    try:
        rows, visits = list_candidates(Finder(fetcher, defs), defs, target, args.package, torch_channel=args.torch, cuda=args.cuda, flashinfer_channel="nightly" if args.flashinfer == "nightly" else "stable")
    finally:
        fetcher.close()
    print_candidates(rows, visits, output_format(args), sys.stdout)
    return 0


_HANDLERS: dict[str, Callable[[argparse.Namespace, Mapping[str, str]], int]] = {
    "resolve": cmd_resolve,
    "snapshot": cmd_snapshot,
    "candidates": cmd_candidates,
}

# Commands that live in their own module ``cmd_<name>.py`` with ``register(subparsers)`` and
# ``run(args, env) -> int``; their heavy imports stay inside ``run``.
PLUGIN_COMMANDS = ("lock", "install", "doctor", "check")


def _plugin(name: str):
    import importlib

    try:
        return importlib.import_module(f".cmd_{name}", __package__)
    except ModuleNotFoundError as exc:
        if exc.name == f"{__package__}.cmd_{name}":
            return None
        raise


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
