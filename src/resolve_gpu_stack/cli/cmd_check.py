"""`resolve-gpu-stack check [FILES...]`: are the committed lock files consistent and fresh?

Offline by default, and fast: it reads the lock files, the config and the bundled index
definitions; with a ``snapshot`` in the config it also verifies every locked wheel's sha256 against
the recorded index pages. ``--online`` re-resolves each configured target (from the network, or the
snapshot) and reports drift without writing anything. Exit 1 when any check fails; warnings
alone exit 0.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from collections.abc import Mapping
from pathlib import Path

from . import app as cli


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check",
        help="check lock files: invariants, hashes, freshness against the config, nightly retention",
        description=(
            "Check lock files (default: every output of every configured target). Each must parse and hold every "
            "invariant (FlashInfer components aligned, jit-cache label = torch's CUDA major, no torch-ABI wheel for "
            "another torch, a sha256 for every file, each package from the index that owns it, no duplicates, no "
            "credentials), be fresh (its inputs digest equals the config's for its target) and never record a torch "
            "below the installed one. Nightlies past the index's retention are warnings. No network unless --online."
        ),
    )
    p.add_argument("files", nargs="*", type=Path, metavar="FILE", help="pylock*.toml or constraints *.txt files (default: the configured outputs)")
    p.add_argument("--config", type=Path, metavar="FILE", help="the config file (default: search the current directory and its parents)")
    p.add_argument("--target", action="append", default=[], metavar="NAME", help="check only this configured target's outputs (repeatable)")
    p.add_argument("--online", action="store_true", help="also re-resolve each target (network, or the configured snapshot) and report drift; writes nothing")
    p.add_argument("--today", type=_day, metavar="YYYY-MM-DD", help="judge nightly retention as of this day (default: today)")
    cli.add_index_flags(p)
    p.add_argument("-v", "--verbose", action="store_true", help="log requests to stderr")
    p.add_argument("-q", "--quiet", action="store_true", help="print only problems")


def _day(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date (YYYY-MM-DD)") from None


def run(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    from ..errors import UsageError
    from ..lock.check import ERROR, WARNING, check_lock, regenerate_hint
    from .config import bundled_definitions, discover_config, effective

    today = args.today or dt.date.today()
    config = discover_config(args.config)
    if config is not None:
        config = effective(config, snapshot=args.snapshot, indexes=cli._index_overrides(args))
    files = _files(args, config)
    if args.online and config is None:
        raise UsageError("--online re-resolves configured targets, but no config was found", hint="add [tool.resolve-gpu-stack] to pyproject.toml (or a gpu-stack.toml), or pass --config FILE")
    defs = bundled_definitions()
    results = []
    findings = []
    for path, expected in files:
        if not path.is_file():
            from ..lock.check import Finding

            findings.append(Finding(level=ERROR, path=path, message="missing", hint=regenerate_hint(expected) or "write it with `resolve-gpu-stack lock`"))
            continue
        checked = check_lock(path, defs, expected=expected, today=today)
        results.append((checked, expected))
        findings += checked.findings
    findings += _against_index(args, env, config, results)

    for finding in findings:
        print(finding.render(_shown(finding.path)), file=sys.stdout if finding.level == ERROR else sys.stderr)
    errors = sum(f.level == ERROR for f in findings)
    warnings = sum(f.level == WARNING for f in findings)
    bad = len({f.path for f in findings if f.level == ERROR})
    if errors:
        print(f"check failed: {errors} problem{'s' * (errors != 1)} in {bad} of {len(files)} lock file{'s' * (len(files) != 1)}", file=sys.stderr)
        return 1
    if not args.quiet:
        tail = f", {warnings} warning{'s' * (warnings != 1)}" if warnings else ""
        print(f"ok: {len(files)} lock file{'s' * (len(files) != 1)} consistent and fresh{tail}", file=sys.stderr)
    return 0


def _files(args: argparse.Namespace, config) -> list[tuple[Path, object]]:
    """(path, Expected or None) for each file to check."""
    from ..errors import UsageError

    if args.files:
        if args.target:
            raise UsageError("give FILES or --target, not both")
        out = []
        for path in args.files:
            target = config.target_for_output(path) if config is not None else None
            out.append((path, _expected(config, target) if target is not None else None))
        return out
    if config is None:
        raise UsageError(
            "nothing to check: no config (pyproject.toml with [tool.resolve-gpu-stack], or gpu-stack.toml) in this directory or its parents",
            hint="pass lock files, or --config FILE",
        )
    return [(out, _expected(config, t)) for t in config.select(args.target) for out in t.outputs]


def _expected(config, target):
    from ..lock.check import Expected
    from ..model.inputs import inputs_digest
    from .config import lock_inputs

    inputs = lock_inputs(config, target)
    return Expected(target=target.name, inputs=inputs, digest=inputs_digest(inputs), command=config.regenerate_command(target), folder=config.root)


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _against_index(args: argparse.Namespace, env: Mapping[str, str], config, results) -> list:
    """Hashes against the snapshot (offline) or the live indexes (--online), and drift (--online)."""
    pylocks = [(c, e) for c, e in results if c.plan is not None and c.locked is not None and c.locked.format == "pylock"]
    online = bool(args.online)
    if not online and (config is None or config.snapshot is None or not pylocks):
        return []
    from ..index.finder import Finder
    from ..lock.check import ERROR, Finding, ListedFiles, finder_lookup, verify_files
    from .config import resolve_definitions

    if config.snapshot is not None and not config.snapshot.is_dir():
        return [Finding(level=ERROR, path=config.path, message=f"snapshot {config.snapshot} does not exist", hint="fix 'snapshot' in the config, or record it with `resolve-gpu-stack snapshot`")]
    source = f"snapshot {config.relative(config.snapshot)}/" if config.snapshot is not None else "the live index"
    defs = resolve_definitions(config, env)
    fetcher = cli.make_fetcher(argparse.Namespace(**{**vars(args), "snapshot": config.snapshot}), env, defs)
    finder = Finder(fetcher, defs)
    # offline: parse only the rows the locks use; online: full pages, shared with the re-resolve
    lookup = finder_lookup(finder) if online else ListedFiles(fetcher, defs, [c.plan for c, _ in pylocks])
    out: list = []
    try:
        for checked, _ in pylocks:
            out += verify_files(checked.path, checked.plan, lookup, source=source)
        if online:
            out += _drift(config, results, finder, defs, source)
    finally:
        fetcher.close()
    return out


def _drift(config, results, finder, defs, source: str) -> list:
    from ..errors import CrawlError, ResolveGpuStackError
    from ..lock.check import WARNING, Finding, drift, regenerate_hint
    from ..resolver.resolve import resolve
    from .config import resolve_request

    out: list = []
    fresh_plans: dict[str, object] = {}
    for checked, expected in results:
        if checked.plan is None:
            continue
        if expected is None:
            out.append(Finding(level="note", path=checked.path, message="not an output of a configured target: drift not checked"))
            continue
        if expected.target not in fresh_plans:
            target = config.select([expected.target])[0]
            try:
                fresh_plans[expected.target] = resolve(resolve_request(target), finder, defs)
            except CrawlError:
                raise
            except ResolveGpuStackError as err:
                fresh_plans[expected.target] = None
                out.append(Finding(level=WARNING, path=checked.path, message=f"re-resolving target {expected.target!r} failed: {err}"))
        fresh = fresh_plans[expected.target]
        if fresh is not None:
            out += drift(checked.path, checked.plan, fresh, source=source, hint=regenerate_hint(expected))
    return out
