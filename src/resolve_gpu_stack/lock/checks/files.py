"""A pylock file's rows: each package's files, their index, their tags, and the kept packages left unlisted."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from ...data.definitions import Definitions
from ...errors import LockFileError
from ...model import Action, LockedPackage, LockPlan
from ...urls import strip_credentials
from ..locked import LockedEntry, LockedFile
from ..pylock import kept_unlisted_reason, plan_from_lock
from .builds import build_findings
from .finding import LOCATION, WARNING, Finding, error_at, without_path
from .urls import credential_findings, is_below, wheel_problem, wheel_url_problem


def pylock_findings(path: Path, locked: LockedFile, defs: Definitions) -> tuple[list[Finding], LockPlan | None]:
    counts = Counter(e.name for e in locked.entries)  # one pass: a 100k-row lock is checked in linear time
    findings = [error_at(path, f"has {counts[name]} [[packages]] entries", package=name) for name in sorted(n for n, c in counts.items() if c > 1)]
    if not locked.inputs_match_digest:
        findings.append(error_at(path, "the recorded inputs do not match the recorded inputs-digest: the file was edited by hand"))
    findings += credential_findings(path, locked)
    try:
        plan = plan_from_lock(locked)
    except LockFileError as err:
        return [*findings, _unplanned(path, locked, err)], None
    entries = {e.name: e for e in locked.entries}
    for pkg in plan.packages:
        if pkg.action is Action.BUILD:  # built here: its provenance is checked, not an index URL
            findings += build_findings(path, pkg, plan, locked, defs)
        else:
            findings += _file_findings(path, pkg, locked, defs, entries.get(pkg.name))
    findings += kept_unlisted_findings(path, plan, entries)
    return findings, plan


def _unplanned(path: Path, locked: LockedFile, err: LockFileError) -> Finding:
    """Why a pylock is not a plan, naming the package when the error starts with one of its pins."""
    text = without_path(str(err), path)
    head, sep, rest = text.partition(": ")
    package = head if sep and canonicalize_name(head) == head and locked.pin(head) else None
    return error_at(path, rest if package else text, package=package)


def kept_unlisted_findings(path: Path, plan: LockPlan, entries: Mapping[Any, Any]) -> list[Finding]:
    """A warning for each kept package the pylock could not list (no wheel with a sha256): ``uv pip
    sync`` of the lock would uninstall it."""
    kept = sorted((p for p in plan.packages if p.action is Action.KEEP and p.name not in entries), key=lambda p: p.name)
    return [
        Finding(
            level=WARNING,
            path=path,
            package=pkg.name,
            message=f"kept but not listed in [[packages]] ({kept_unlisted_reason(pkg)}): `uv pip sync` of this lock would uninstall it",
            hint="apply this lock with `uv pip install -r`, or relock online (or with the wheel in the wheel cache) so that it is listed",
        )
        for pkg in kept
    ]


def _file_findings(path: Path, pkg: LockedPackage, locked: LockedFile, defs: Definitions, entry: LockedEntry | None) -> list[Finding]:
    """The wheel a package entry points at must be that package, from its index's base and hosts."""
    out = [error_at(path, problem, package=pkg.name) for problem in (wheel_problem(pkg)[0], _entry_index_problem(pkg, locked, entry)) if problem]
    base, index = locked.indexes.get(pkg.index), defs.indexes.get(pkg.index)
    if pkg.url and index is not None and base:
        problem = wheel_url_problem(pkg.url, base, index.hosts)
        if problem:
            out.append(
                error_at(
                    path,
                    f"its wheel URL {problem}: {strip_credentials(pkg.url)}",
                    package=pkg.name,
                    hint=f"the {pkg.index} index serves files from {base} and {', '.join(index.hosts) or 'no other host'}",
                    rule=LOCATION,
                )
            )
    return out


def _entry_index_problem(pkg: LockedPackage, locked: LockedFile, entry: LockedEntry | None) -> str | None:
    """A ``[[packages]]`` index that is neither the package's recorded index nor a folder below it."""
    base = locked.indexes.get(pkg.index)
    if entry is None or base is None or entry.simple_index is None or is_below(entry.simple_index, base):
        return None
    return (
        f"[[packages]] index {strip_credentials(entry.simple_index)} is not the {pkg.index} index ({base}) it is recorded as coming from, nor a folder below it"
    )
