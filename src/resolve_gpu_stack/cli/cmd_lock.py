"""`resolve-gpu-stack lock`: resolve, then write pylock.<name>.toml and/or a constraints file.

Two modes:

* ``lock -o FILE ...``: one plan from the flags, written to each FILE (no config is read);
* ``lock`` without ``-o`` in a project with a config (``[tool.resolve-gpu-stack]`` in
  pyproject.toml, or gpu-stack.toml; see ``config``): every configured target (or those named with
  ``--target``) is resolved through ONE fetcher and ONE finder, so pages and metadata shared by
  the targets are read once, and each target's outputs are written. Resolver flags given on the
  command line override the config's values for every selected target.

Without ``-o`` and without a config it prints the plan, like ``resolve``.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from . import app as cli


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "lock",
        help="resolve and write the lock files of every configured target, or of one plan with -o",
        description=(
            "With a project config ([tool.resolve-gpu-stack] in pyproject.toml, or gpu-stack.toml, found in the "
            "current directory or a parent): resolve every configured target (or those named with --target), "
            "sharing one crawl, and write each target's outputs. Flags given here override the config's values. "
            "With -o: resolve one plan from the flags and write it as a PEP 751 pylock.<name>.toml or a pip/uv "
            "constraints file (*.txt). Without either, print the plan like `resolve`."
        ),
    )
    cli.add_resolve_flags(p)
    cli.add_output_flags(p)
    p.add_argument("-o", "--output", type=Path, action="append", default=[], metavar="FILE", help="pylock.<name>.toml or *.txt (repeatable); the config is not read")
    g = p.add_argument_group("project config")
    g.add_argument("--config", type=Path, metavar="FILE", help="the config file (default: search the current directory and its parents)")
    g.add_argument("--target", action="append", default=[], metavar="NAME", help="lock only this configured target (repeatable)")
    # None = "not given", so that a config value is only overridden by a flag the user typed.
    p.set_defaults(torch=None, flashinfer=None)


def run(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    from ..errors import UsageError
    from .config import discover_config

    if args.output and (args.config is not None or args.target):
        raise UsageError("-o writes one plan from flags; --config/--target lock the configured targets", hint="drop -o to lock the configured targets, or drop --config/--target")
    # Flags that describe a target of their own (--python/--platform/--installed) make `lock` the
    # resolver's twin (`lock --torch nightly ...` == `resolve-gpu-stack --torch nightly ...`) unless
    # --config/--target ask for the configured targets.
    own_target = bool(args.python or args.platform or args.installed) and args.config is None and not args.target
    config = None if args.output or own_target else discover_config(args.config)
    if config is None:
        if args.target:
            raise UsageError("--target names a configured target, but no config was found", hint="add [tool.resolve-gpu-stack] to pyproject.toml (or a gpu-stack.toml), or pass --config FILE")
        return _run_single(args, env)
    return lock_targets(config, args, env)


# -- one plan from flags ---------------------------------------------------------------------------

def _run_single(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    args.torch = args.torch or "nightly"
    args.flashinfer = args.flashinfer or "latest"
    plan, defs = cli.run_resolve(args, env)
    if not args.output:
        cli.emit_plan(args, plan)
        return 0
    command = cli.command_line(sys.argv[1:] if sys.argv[1:] else ["lock"])
    _write_outputs(args, env, plan, defs, args.output, command=command)
    return 0


def _write_outputs(args: argparse.Namespace, env: Mapping[str, str], plan, defs, paths: Sequence[Path], *, command: str, label: str = "") -> None:
    """Write one plan to each of ``paths`` (the format follows each file name). Both modes write
    through here. ``args.snapshot`` is the snapshot the plan was resolved from, if any."""
    from ..lock.files import write_lock

    if any(path.name.endswith(".toml") for path in paths):  # a pylock needs a sha256 for every wheel it lists
        from .cmd_install import fill_plan_hashes

        plan = fill_plan_hashes(args, env, plan, defs)
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        written = write_lock(plan, path, command=command)
        print(f"{label}wrote {_shown(written)}", file=sys.stderr)


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


# -- every configured target -----------------------------------------------------------------------

def overrides_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The resolver settings the command line gave, as ``TargetConfig`` field names."""
    from ..env.target import parse_python_flag
    from ..errors import UsageError

    out: dict[str, Any] = {}
    if args.python is not None:
        kind, _ = parse_python_flag(args.python, search_path="")
        if kind != "version":
            raise UsageError(f"--python {args.python!r}: configured targets are declared, so --python must be a version here", hint="e.g. --python 3.12")
        out["python"] = args.python
    for attr in ("platform", "cuda", "torch", "flashinfer"):
        if getattr(args, attr) is not None:
            out[attr] = getattr(args, attr)
    if args.installed:
        out["installed"] = tuple(args.installed)
    if args.with_:
        out["with_"] = tuple(args.with_)
    for attr in ("change_cuda", "allow_downgrade"):
        if getattr(args, attr):
            out[attr] = True
    if args.no_jit_cache:
        out["jit_cache"] = False
    if args.no_cubin:
        out["cubin"] = False
    return out


_FLAG = {"python": "--python", "platform": "--platform", "cuda": "--cuda", "torch": "--torch", "flashinfer": "--flashinfer",
         "installed": "--installed", "with_": "--with", "change_cuda": "--change-cuda", "allow_downgrade": "--allow-downgrade",
         "jit_cache": "--no-jit-cache", "cubin": "--no-cubin"}


def _override_words(overrides: Mapping[str, Any], args: argparse.Namespace, config) -> list[str]:
    from ..urls import redact_url

    words: list[str] = []
    for key, value in overrides.items():
        flag = _FLAG[key]
        if isinstance(value, bool):
            words.append(flag)
        elif isinstance(value, tuple):
            for item in value:
                words += [flag, item]
        else:
            words += [flag, value]
    if args.snapshot is not None:
        words += ["--snapshot", config.relative(args.snapshot.resolve())]
    for item in args.index:
        name, _, url = item.partition("=")
        words += ["--index", f"{name}={redact_url(url)}"]
    return words


def lock_targets(config, args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """Resolve the selected targets through one finder and write their outputs. 1 if any failed."""
    from dataclasses import replace

    from ..errors import CrawlError, ResolveGpuStackError
    from ..index.finder import Finder
    from ..model.inputs import inputs_digest
    from ..resolver.resolve import resolve
    from .config import effective, lock_inputs, resolve_definitions, resolve_request, with_overrides

    overrides = overrides_from_args(args)
    config = effective(config, snapshot=args.snapshot, indexes=cli._index_overrides(args))
    targets = [with_overrides(t, overrides) for t in config.select(args.target)]
    extra = _override_words(overrides, args, config)
    defs = resolve_definitions(config, env)
    args = argparse.Namespace(**{**vars(args), "snapshot": config.snapshot})  # the config's, unless --snapshot
    fetcher = cli.make_fetcher(args, env, defs)
    finder = Finder(fetcher, defs)  # one crawl for all targets: pages and metadata are memoized by URL
    failed = 0
    try:
        for target in targets:
            label = f"{target.name}: "
            command = " ".join([config.regenerate_command(target), *map(shlex.quote, extra)])
            try:
                plan = resolve(resolve_request(target), finder, defs)
                inputs = lock_inputs(config, target)
                plan = replace(plan, inputs=inputs, inputs_digest=inputs_digest(inputs))
                _write_outputs(args, env, plan, defs, target.outputs, command=command, label=label)
            except CrawlError:
                raise
            except ResolveGpuStackError as err:
                failed += 1
                print(f"error: {label}{err}", file=sys.stderr)
                if err.hint:
                    print(f"hint: {err.hint}", file=sys.stderr)
    finally:
        fetcher.close()
    if failed:
        print(f"{failed} of {len(targets)} targets failed; their lock files were left as they were", file=sys.stderr)
    return 1 if failed else 0
