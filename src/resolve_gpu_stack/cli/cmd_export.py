"""`resolve-gpu-stack export uv`: write a plan into a uv project's ``pyproject.toml``.

A uv project (``pyproject.toml`` + ``uv.lock``, ``uv sync``) resolves again with ``uv lock``; the
plan survives that only as uv project configuration: explicit indexes, sources, constraints,
overrides, environments (``lock.uvproject`` says what and why). This command resolves like
``lock`` (one plan from the flags, or the targets of the project's config, sharing one crawl) and
writes those tables into the project: only its own keys, the user's formatting and comments kept,
nothing changed by a second run of the same plan. ``--dry-run`` shows the diff instead.
"""

from __future__ import annotations

import argparse
import difflib
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..data.toml import read_text
from ..errors import CrawlError, ResolveGpuStackError, UsageError
from ..index.variants import variant_refusal
from ..lock.files import write_texts
from ..lock.uvproject import ExportTarget, apply_tables, parse_project, uv_tables
from . import common
from . import options as O
from .config import resolve_definitions, resolve_request
from .render import say_story
from .sources import sdist_metadata_of
from .targets import discover_configured, own_target, selected_targets, source_words
from .uvsync import uv_sync_warnings

if TYPE_CHECKING:
    from ..data.definitions import Definitions
    from .assemble import Session
    from .config import ProjectConfig

PYPROJECT = "pyproject.toml"


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportSettings(O.ResolveOptions):
    project: Path | None = None  # --project DIR
    dry_run: bool = False
    configured: O.ConfigOptions = field(default_factory=O.ConfigOptions)


def read(args: argparse.Namespace, env: Mapping[str, str]) -> ExportSettings:
    return ExportSettings(**O.resolve_fields(args, env), project=args.project, dry_run=args.dry_run, configured=O.config_options(args))


def run(settings: ExportSettings, env: Mapping[str, str], session: Session) -> int:
    config = _config(settings)
    folder = settings.project if settings.project is not None else (config.root if config is not None else Path.cwd())
    path = folder / PYPROJECT
    if not path.is_file():
        raise UsageError(
            f"{common.shown(path)}: no such file: {common.shown(folder)} is not a uv project",
            hint="create the project with `uv init`, or name its folder with --project DIR",
        )
    before = read_text(path, error=UsageError)
    parse_project(before, common.shown(path))  # a broken pyproject fails before anything is resolved
    targets, command, defs = _plans(config, settings, env, session) if config is not None else _flags_plan(settings, env, session)
    refusal = variant_refusal(((p.name, p.filename) for t in targets for p in t.plan.packages), doing="export uv")
    if refusal is not None:  # uv would resolve the export itself, and cannot install a variant wheel: nothing is written
        raise refusal
    applied = apply_tables(before, uv_tables(targets, defs.flashinfer), command=command, where=common.shown(path))
    quiet = settings.output.quiet
    if not quiet:
        for t in targets:  # the plan's story, as `resolve` and `install` tell it
            say_story(t.plan.notes, t.plan.overrides, O.say, label=f"{t.name}: " if t.name else "")
        for note in applied.notes:
            print(f"note: {note}", file=sys.stderr)
        for warning in uv_sync_warnings(folder, {t.plan.target.python for t in targets}):
            print(f"warning: {warning}", file=sys.stderr)
    if settings.dry_run:
        sys.stdout.write("".join(difflib.unified_diff(before.splitlines(True), applied.text.splitlines(True), f"a/{PYPROJECT}", f"b/{PYPROJECT}")))
        if not quiet:
            print(f"{common.shown(path)}: {'unchanged' if applied.text == before else 'not written (--dry-run)'}", file=sys.stderr)
        return 0
    if applied.text != before:
        write_texts([(path, applied.text)])
    if quiet:
        return 0
    if applied.text == before:
        print(f"{common.shown(path)} unchanged: it already holds this plan", file=sys.stderr)
    else:
        print(
            f"wrote {common.shown(path)} ([tool.uv] for {len(targets)} target{'s' * (len(targets) != 1)}); next: `uv lock` and `uv sync` in {common.shown(folder)}",
            file=sys.stderr,
        )
    return 0


def _config(settings: ExportSettings) -> ProjectConfig | None:
    """The config whose targets to export, or None: one plan from the flags (as ``lock`` decides)."""
    if own_target(settings.typed) and not settings.configured.asked:
        return None
    return discover_configured(settings.configured)


def _flags_plan(settings: ExportSettings, env: Mapping[str, str], session: Session) -> tuple[list[ExportTarget], str, Definitions]:
    """The plan of the flags, the command that exports it again, the definitions it was resolved with."""
    plan, defs = common.run_resolve(settings, env, session)
    words = [*settings.typed.words, *source_words(settings.sources)]
    return [ExportTarget(name="", plan=plan)], " ".join(["resolve-gpu-stack export uv", *map(shlex.quote, words)]), defs


def _plans(config: ProjectConfig, settings: ExportSettings, env: Mapping[str, str], session: Session) -> tuple[list[ExportTarget], str, Definitions]:
    """Every selected target's plan through one finder (the first target without a plan fails the
    export: nothing is written, a project's tables are all or nothing), the command that exports
    them again, the definitions they were resolved with."""
    names = settings.configured.targets
    config, targets, extra = selected_targets(config, settings, names)
    defs = resolve_definitions(config, env)
    out = []
    with common.make_parts(session, settings.sources, defs, snapshot=config.snapshot) as parts:
        for target in targets:
            try:
                request = resolve_request(target)
                backend = sdist_metadata_of(request, settings, env, session, defs=defs)  # a --build sdist whose PKG-INFO is not static
                out.append(ExportTarget(name=target.name, plan=parts.resolve(request, sdist_metadata=backend)))
            except CrawlError:
                raise
            except ResolveGpuStackError as err:
                err.message = f"{target.name}: {err.message}"
                raise
    words = ["resolve-gpu-stack export uv", config.config_flag(), *(f"--target {shlex.quote(n)}" for n in names)]
    return out, " ".join(w for w in (*words, extra) if w), defs
