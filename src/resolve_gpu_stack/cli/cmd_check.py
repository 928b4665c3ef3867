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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..data.definitions import load_definitions
from ..data.toml import read_text
from ..errors import CrawlError, LockFileError, ResolveGpuStackError, UsageError
from ..lock.check import (
    ERROR,
    WARNING,
    Expected,
    Finding,
    check_lock,
    drift,
    finder_lookup,
    listed_lookup,
    regenerate_hint,
    sibling_findings,
    uv_project_findings,
    verify_files,
)
from ..lock.files import read_lock
from ..lock.uvproject import RECORD, read_export
from ..model.inputs import inputs_digest
from . import common, render
from . import options as O
from .config import discover_config, effective, lock_inputs, recorded_overrides, resolve_definitions, resolve_request
from .settings import TypedSettings
from .sources import sdist_metadata_of
from .uvsync import uv_sync_warnings

if TYPE_CHECKING:
    from ..data.definitions import Definitions
    from ..index.sdist import SdistMetadata
    from ..lock.check import Checked
    from ..lock.locked import LockedFile
    from ..model import LockPlan
    from ..model.request import ResolveRequest
    from .assemble import ResolveParts, Session
    from .config import ProjectConfig, TargetConfig

    Judged = tuple[Checked, Expected | None]  # a lock file checked offline, and what the config says it is made from


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckSettings(O.CommandOptions):
    """``output.format``: text (default) or json."""

    files: tuple[Path, ...] = ()
    configured: O.ConfigOptions = field(default_factory=O.ConfigOptions)
    online: bool = False
    today: dt.date | None = None
    sources: O.SourceOptions = field(default_factory=O.SourceOptions)


def read(args: argparse.Namespace, env: Mapping[str, str]) -> CheckSettings:
    return CheckSettings(
        **O.command_fields(args, env),
        files=tuple(args.files),
        configured=O.config_options(args),
        online=args.online,
        today=args.today,
        sources=O.source_options(args),
    )


def run(settings: CheckSettings, env: Mapping[str, str], session: Session) -> int:
    config = discover_config(settings.configured.config)
    if config is not None:
        config = effective(config, snapshot=settings.sources.snapshot, indexes=common.index_overrides(settings.sources))
    bundled = load_definitions()  # read once: every file is checked against them
    locks = Locks()  # and every lock file read once
    projects = _uv_projects(settings, config)
    files = _files(settings, config, projects, bundled, locks)
    if settings.online and config is None:
        raise UsageError(
            "--online re-resolves configured targets, but no config was found",
            hint="add [tool.resolve-gpu-stack] to pyproject.toml (or a gpu-stack.toml), or pass --config FILE",
        )
    today = settings.today or dt.date.today()
    findings, results = _check_files(files, today, bundled, locks)
    findings += _against_siblings(results, config, today, bundled, locks)
    findings += _against_index(settings, config, results, bundled, env, session)
    findings += _check_uv_projects(projects, bundled)
    count = len(files) + len(projects)
    if settings.output.format == "json":
        return _report_json(findings, count)
    return _report(findings, count, quiet=settings.output.quiet)


UV_LOCK = "uv.lock"


class Locks:
    """``read_lock`` once per file for one check (what its command records, then its checks);
    a file that cannot be read raises its ``LockFileError`` each time it is asked for."""

    def __init__(self) -> None:
        self._read: dict[Path, LockedFile | LockFileError] = {}

    def __call__(self, path: Path) -> LockedFile:
        if path not in self._read:
            try:
                self._read[path] = read_lock(path)
            except LockFileError as err:
                self._read[path] = err
        got = self._read[path]
        if isinstance(got, LockFileError):
            raise got
        return got


def _uv_projects(settings: CheckSettings, config: ProjectConfig | None) -> list[tuple[Path, Path]]:
    """(pyproject.toml, uv.lock) of each uv project to check against the plan exported into it:
    each ``uv.lock`` named on the command line; without FILES, the project of the config's folder
    (else of the current directory or a parent) when `export uv` wrote into it."""
    if settings.files:
        return [(path.parent / "pyproject.toml", path) for path in settings.files if path.name == UV_LOCK]
    folders = [config.root] if config is not None else [Path.cwd().resolve(), *Path.cwd().resolve().parents]
    for folder in folders:
        pyproject = folder / "pyproject.toml"
        if _has_export(pyproject):
            return [(pyproject, folder / UV_LOCK)]
        if pyproject.is_file():
            break  # the nearest project decides
    return []


def _has_export(pyproject: Path) -> bool:
    """Whether `export uv` wrote into this pyproject.toml (a cheap look; the check reads it properly)."""
    try:
        return f".{RECORD}]" in pyproject.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def _check_uv_projects(projects: list[tuple[Path, Path]], bundled: Definitions) -> list[Finding]:
    return [f for pyproject, lock in projects for f in [*uv_project_findings(pyproject, lock, bundled), *_uv_sync_findings(pyproject)]]


def _uv_sync_findings(pyproject: Path) -> list[Finding]:
    """Warnings on what `uv sync` would do to the project's .venv beyond the plan (see ``uvsync.uv_sync_warnings``)."""
    try:
        record = read_export(read_text(pyproject, error=LockFileError), str(pyproject))
    except ResolveGpuStackError:
        return []  # said by the uv.lock check itself
    pythons = {t.python for t in record.targets} if record is not None else set()
    return [Finding(level=WARNING, path=pyproject, message=w) for w in uv_sync_warnings(pyproject.parent, pythons)]


def _check_files(files: list[tuple[Path, Expected | None]], today: dt.date, defs: Definitions, locks: Locks) -> tuple[list[Finding], list[Judged]]:
    """Offline checks of each file: (findings, [(CheckedLock, Expected or None)] of those that exist)."""
    results: list[Judged] = []
    findings: list[Finding] = []
    for path, expected in files:
        if not path.is_file():
            findings.append(Finding(level=ERROR, path=path, message="missing", hint=regenerate_hint(expected) or "write it with `resolve-gpu-stack lock`"))
            continue
        checked = check_lock(path, defs, expected=expected, today=today, read=locks)
        results.append((checked, expected))
        findings += checked.findings
    return findings, results


def _against_siblings(results: Sequence[Judged], config: ProjectConfig | None, today: dt.date, defs: Definitions, locks: Locks) -> list[Finding]:
    """Each constraints file against the pylock of the same target written with it (checked here,
    or read from the target's outputs when only the ``.txt`` was named)."""
    out: list[Finding] = []
    pylocks = [c for c, _ in results if _is_pylock(c)]
    for checked, _ in results:
        if checked.locked is None or checked.locked.format != "constraints" or not checked.locked.generated:
            continue
        sibling = _written_with(checked.locked.inputs_digest, _pylocks_of(checked.path, pylocks, config, today, defs, locks))
        if sibling is not None:
            out += sibling_findings(checked.path, checked.locked, sibling)
    return out


def _written_with(digest: str | None, pylocks: Sequence[Checked]) -> Checked | None:
    """The pylock among ``pylocks`` written with the same inputs digest."""
    return next((c for c in pylocks if _is_pylock(c) and c.locked is not None and c.locked.inputs_digest == digest), None)


def _pylocks_of(path: Path, pylocks: Sequence[Checked], config: ProjectConfig | None, today: dt.date, defs: Definitions, locks: Locks) -> list[Checked]:
    """The pylocks checked here, and those of the configured target that writes ``path`` (checked now)."""
    target = config.target_for_output(path) if config is not None else None
    known = {c.path.resolve() for c in pylocks}
    more = [
        check_lock(o, defs, today=today, read=locks)
        for o in (target.outputs if target is not None else ())
        if o.name.endswith(".toml") and o.is_file() and o not in known
    ]
    return [*pylocks, *more]


def _report(findings: list[Finding], count: int, *, quiet: bool) -> int:
    """Print the findings and the verdict (diagnostics: stderr); the exit status."""
    for finding in findings:
        if not quiet or finding.level == ERROR:  # -q: errors only (a pre-commit hook runs it on every commit)
            print(finding.render(common.shown(finding.path)), file=sys.stderr)
    errors = sum(f.level == ERROR for f in findings)
    warnings = sum(f.level == WARNING for f in findings)
    if errors or not quiet:
        print(_verdict(findings, count), file=sys.stderr)
    elif warnings:  # the warnings in one line, not theirs
        print(f"{_verdict(findings, count)} (`resolve-gpu-stack check` without -q shows them)", file=sys.stderr)
    return 1 if errors else 0


def _verdict(findings: list[Finding], count: int) -> str:
    """The last line of a check: how many problems in how many files, or that every file is fine."""
    errors = sum(f.level == ERROR for f in findings)
    files = f"{count} lock file{'s' * (count != 1)}"
    if errors:
        return f"check failed: {errors} problem{'s' * (errors != 1)} in {len({f.path for f in findings if f.level == ERROR})} of {files}"
    warnings = sum(f.level == WARNING for f in findings)
    return f"ok: {files} consistent and fresh" + (f", {warnings} warning{'s' * (warnings != 1)}" if warnings else "")


CHECK_SCHEMA = "resolve-gpu-stack/check/v1"


def _report_json(findings: list[Finding], count: int) -> int:
    """The findings and the verdict as one JSON object on stdout; the exit status."""
    errors = sum(f.level == ERROR for f in findings)
    render.print_json(
        {
            "schema": CHECK_SCHEMA,
            "ok": errors == 0,
            "files": count,
            "errors": errors,
            "warnings": sum(f.level == WARNING for f in findings),
            "findings": [{"level": f.level, "path": common.shown(f.path), "package": f.package, "message": f.message, "hint": f.hint} for f in findings],
        },
        sys.stdout,
    )
    return 1 if errors else 0


def _files(
    settings: CheckSettings, config: ProjectConfig | None, projects: list[tuple[Path, Path]], bundled: Definitions, locks: Locks
) -> list[tuple[Path, Expected | None]]:
    """(path, Expected or None) for each lock file to check (a ``uv.lock`` is a project's: see ``_uv_projects``)."""
    if settings.files:
        if settings.configured.targets:
            raise UsageError("give FILES or --target, not both")
        return [(path, _expected_of(config, path, bundled, locks)) for path in settings.files if path.name != UV_LOCK]
    if config is None and projects:
        return []  # a uv project exported from flags: its uv.lock only
    if config is None:
        raise UsageError(
            "nothing to check: no config (pyproject.toml with [tool.resolve-gpu-stack], or gpu-stack.toml) and no project `export uv` "
            "wrote into, in this directory or its parents",
            hint="pass lock files, or --config FILE",
        )
    return [(out, _expected(config, t, out, bundled, locks)) for t in config.select(settings.configured.targets) for out in t.outputs]


def _expected_of(config: ProjectConfig | None, path: Path, bundled: Definitions, locks: Locks) -> Expected | None:
    """What the config says a lock file named on the command line should be made from (None: no
    configured target writes it)."""
    target = config.target_for_output(path) if config is not None else None
    return _expected(config, target, path, bundled, locks) if config is not None and target is not None else None


def _expected(config: ProjectConfig, target: TargetConfig, path: Path, bundled: Definitions, locks: Locks) -> Expected:
    """What the config says ``path`` should be made from: the target's settings, with the flags its
    lock command recorded (``lock --target x --no-cubin``) applied as ``lock`` applied them."""
    name, command = target.name, config.regenerate_command(target)
    recorded = recorded_overrides(config, target, _recorded_command(path, locks))
    if recorded is not None:
        config, target = recorded
        command = _recorded_command(path, locks) or command
    inputs = lock_inputs(config, target, bundled)
    return Expected(target=name, inputs=inputs, digest=inputs_digest(inputs), command=command, folder=config.root)


def _recorded_command(path: Path, locks: Locks) -> str | None:
    """The command a lock file records (None when it cannot be read: the check says why)."""
    if not path.is_file():
        return None
    try:
        return locks(path).command
    except LockFileError:
        return None


def _against_index(
    settings: CheckSettings, config: ProjectConfig | None, results: Sequence[Judged], bundled: Definitions, env: Mapping[str, str], session: Session
) -> list[Finding]:
    """Hashes against the snapshot (offline) or the live indexes (--online), and drift (--online)."""
    pylocks = [(c.path, plan) for c, _ in results if (plan := _pylock_plan(c)) is not None]
    if config is None or not (settings.online or (config.snapshot is not None and pylocks)):
        return []  # (--online without a config was refused before)
    if config.snapshot is not None and not config.snapshot.is_dir():
        return [
            Finding(
                level=ERROR,
                path=config.path,
                message=f"snapshot {config.snapshot} does not exist",
                hint="fix 'snapshot' in the config, or record it with `resolve-gpu-stack snapshot`",
            )
        ]
    return _verify(settings, env, session, config, results, pylocks, bundled)


def _is_pylock(checked: Checked) -> bool:
    return _pylock_plan(checked) is not None


def _pylock_plan(checked: Checked) -> LockPlan | None:
    """The plan of a pylock that could be read (None for a constraints file, or a file that could not be read)."""
    return checked.plan if checked.locked is not None and checked.locked.format == "pylock" else None


def _verify(
    settings: CheckSettings,
    env: Mapping[str, str],
    session: Session,
    config: ProjectConfig,
    results: Sequence[Judged],
    pylocks: Sequence[tuple[Path, LockPlan]],
    bundled: Definitions,
) -> list[Finding]:
    """Every pylock's files against the index pages; with --online, also each target's drift."""
    source = f"snapshot {config.relative(config.snapshot)}/" if config.snapshot is not None else "the live index"
    defs = resolve_definitions(config, env, bundled)
    with common.make_parts(session, settings.sources, defs, snapshot=config.snapshot) as parts:
        # offline: parse only the rows the locks use; online: full pages, shared with the re-resolve
        lookup = finder_lookup(parts.finder) if settings.online else listed_lookup(parts.finder, [plan for _, plan in pylocks])
        out = [f for path, plan in pylocks for f in verify_files(path, plan, lookup, source=source)]
        if settings.online:

            def backend(request: ResolveRequest) -> SdistMetadata | None:
                options = O.ResolveOptions(output=settings.output, network=settings.network, sources=settings.sources, typed=TypedSettings())
                return sdist_metadata_of(request, options, env, session, defs=defs)

            out += _drift(config, results, parts, source, backend)
        return out


def _drift(
    config: ProjectConfig,
    results: Sequence[Judged],
    parts: ResolveParts,
    source: str,
    backend: Callable[[ResolveRequest], SdistMetadata | None] | None = None,
) -> list[Finding]:

    out: list[Finding] = []
    fresh_plans: dict[str, LockPlan | None] = {}
    for checked, expected in results:
        if checked.plan is None:
            continue
        if expected is None:
            out.append(Finding(level="note", path=checked.path, message="not an output of a configured target: drift not checked"))
            continue
        if expected.target not in fresh_plans:
            fresh_plans[expected.target], failure = _re_resolve(config, expected.target, parts, backend)
            if failure:
                out.append(Finding(level=WARNING, path=checked.path, message=f"re-resolving target {expected.target!r} failed: {failure}"))
        fresh = fresh_plans[expected.target]
        if fresh is not None:
            out += drift(checked.path, checked.plan, fresh, source=source, hint=regenerate_hint(expected))
    return out


def _re_resolve(
    config: ProjectConfig, name: str, parts: ResolveParts, backend: Callable[[ResolveRequest], SdistMetadata | None] | None = None
) -> tuple[LockPlan | None, str | None]:
    """(the fresh plan of target ``name``, None) or (None, why it failed); ``backend``: the way to
    a ``--build`` sdist's metadata when its PKG-INFO is not static (``cli/sources.py``)."""
    try:
        request = resolve_request(config.select([name])[0])
        return parts.resolve(request, sdist_metadata=backend(request) if backend is not None else None), None
    except CrawlError:
        raise
    except ResolveGpuStackError as err:
        return None, str(err)
