"""A uv project: the ``uv.lock`` a pyproject exported by ``export uv`` locks what the exported plan holds."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import Version

from ...data.definitions import Definitions
from ...data.toml import read_text
from ...errors import LockFileError
from ...model import Action, Coupling, LockedPackage, LockPlan, TargetSummary
from ...rules.invariants import flashinfer_alignment
from ...urls import strip_credentials
from ..locked import LockedEntry
from ..pylock import TOOL
from ..uvproject import LISTS, RECORD, ExportRecord, RecordedTarget, locked_for, read_export, read_uv_lock
from .finding import Finding, error_at, without_path
from .target import declared_target_of


def uv_project_findings(pyproject: Path, lock: Path, defs: Definitions) -> list[Finding]:
    """``lock`` (a ``uv.lock``) against the export record of ``pyproject``: every planned package
    at its planned version in each target's fork, a kept package at its kept version, each sourced
    package from the index the plan took it from, FlashInfer aligned; and the entries the export
    wrote still in ``[tool.uv]``. Each drift is one finding naming the package."""
    try:
        record = read_export(read_text(pyproject, error=LockFileError), str(pyproject))
    except LockFileError as err:
        return [error_at(pyproject, without_path(str(err), pyproject), hint=err.hint)]
    if record is None:
        return [
            error_at(
                lock,
                f"{pyproject.name} has no [tool.{TOOL}.{RECORD}] table: no plan was exported into this project, so there is nothing to check uv.lock against",
                hint="write one with `resolve-gpu-stack export uv`",
            )
        ]
    hint = f"export again ({record.command}), then `uv lock`" if record.command else "export again, then `uv lock`"
    out = _exported_entries_findings(pyproject, record, hint)
    if not lock.is_file():
        return [*out, error_at(lock, f"missing: {pyproject.name} holds an exported plan but there is no uv.lock", hint="run `uv lock` in the project")]
    try:
        packages = read_uv_lock(read_text(lock, error=LockFileError), str(lock))
    except LockFileError as err:
        return [*out, error_at(lock, without_path(str(err), lock), hint=err.hint)]
    for target in record.targets:
        out += _uv_target_findings(lock, record, target, packages, defs, several=len(record.targets) > 1)
    return out


def _exported_entries_findings(pyproject: Path, record: ExportRecord, hint: str) -> list[Finding]:
    """What the export wrote into [tool.uv] and its dependency group, still there (a hand edit of
    pyproject.toml is drift too: `uv lock` follows it)."""
    out: list[Finding] = []
    for key in ("environments", *LISTS):
        have = record.uv.get(key) or []
        for entry in record.wrote.get(key, ()):
            if entry not in have:
                out.append(error_at(pyproject, f"[tool.uv] {key} no longer has {entry!r}, which `export uv` wrote", hint=hint))
    sources = record.uv.get("sources") or {}
    for name in record.sources:
        if name not in sources:
            out.append(error_at(pyproject, f"[tool.uv.sources] has no entry for {name} any more: uv may take it from another index", package=name, hint=hint))
    if record.group not in record.groups:
        out.append(error_at(pyproject, f"[dependency-groups] has no {record.group!r} group any more: `uv sync` leaves the stack's roots out", hint=hint))
    return out


def _uv_target_findings(
    lock: Path, record: ExportRecord, target: RecordedTarget, packages: Sequence[LockedEntry], defs: Definitions, *, several: bool
) -> list[Finding]:
    declared = declared_target_of(target.python, target.platform)
    environment = declared.markers if declared is not None else None  # None: a probed target's platform, every fork counts
    label = f"target {target.name!r}: " if several and target.name else ""
    relock = "run `uv lock` again (pyproject.toml still holds the plan), or export again"
    out: list[Finding] = []
    versions: dict[str, Version] = {}
    for name, version in sorted(record.pins(target, environment).items()):
        problems, found = _uv_pin_problems(name, version, locked_for(packages, name, environment), target)
        out += [error_at(lock, label + problem, package=name, hint=relock) for problem in problems]
        if found is not None:
            versions[name] = found
    found_plan = LockPlan(
        target=TargetSummary(python=target.python, platform=target.platform, cuda=None),
        cuda_label=target.cuda_label,
        packages=tuple(
            LockedPackage(name=canonicalize_name(n), version=v, action=Action.INSTALL, index="uv.lock", coupling=Coupling.AGNOSTIC) for n, v in versions.items()
        ),
    )
    out += [error_at(lock, f"{label}in uv.lock: {v.message}", package=v.package, hint=relock) for v in flashinfer_alignment(found_plan, defs)]
    return out


def _uv_pin_problems(name: str, version: Version, got: Sequence[LockedEntry], target: RecordedTarget) -> tuple[list[str], Version | None]:
    """(how uv.lock's entries ``got`` for ``name`` differ from the exported pin ``version``, the
    version uv.lock has: None when it has none)."""
    if not got:
        return [f"not in uv.lock; the exported plan installs {version}"], None
    have = sorted({p.version for p in got if p.version is not None})
    out = []
    if have != [version]:
        shown = ", ".join(map(str, have)) or "no version"
        out.append(
            f"uv.lock has {shown}, but the plan keeps the installed {version}: `uv sync` would replace it"
            if name in target.kept
            else f"uv.lock has {shown}, the exported plan pins {version}"
        )
    registry = _registry_problem(got, target.sources.get(name))
    return [*out, *([registry] if registry else [])], have[-1] if have else version


def _registry_problem(got: Sequence[LockedEntry], source: str | None) -> str | None:
    """uv.lock's entries of a package taken from a registry other than the plan's ``source``."""
    if source is None:
        return None
    wrong = sorted({p.simple_index for p in got if p.simple_index is not None and p.simple_index.rstrip("/") != source.rstrip("/")})
    return f"uv.lock takes it from {', '.join(map(strip_credentials, wrong))}, the plan from {source}" if wrong else None
