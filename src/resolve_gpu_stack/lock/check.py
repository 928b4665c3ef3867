"""Checking committed lock files: do they parse, hold every invariant, match the config, and can
their URLs still be downloaded?

No network and no resolver here: every check reads the lock file, the bundled index definitions and
(for freshness) the digest the config gives for the lock's target. ``verify_files`` and
``drift`` take a ``Finder`` (a recorded snapshot, or the live indexes with ``check --online``).

Each problem is a ``Finding`` naming the file and, where there is one, the package. Errors fail the
check; warnings (a nightly past the index's retention, drift) do not.

This module is where the families of findings are called (``check_lock``, ``plan_findings``); each
family is a module of ``lock/checks/`` (the finding itself, the pylock rows, constraints files, the
kept torch, the target, compiled wheels' ABI, built wheels, wheel names and URLs, freshness,
retention, the indexes, a uv project's ``uv.lock``). Their public names are importable from here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

from ..data.definitions import Definitions
from ..errors import LockFileError
from ..model import LockPlan, Target
from ..rules.invariants import plan_violations, synthetic_rows
from .checks.abi import abi_findings
from .checks.builds import build_findings
from .checks.constraints import constraints_findings, sibling_findings
from .checks.files import kept_unlisted_findings, pylock_findings
from .checks.finding import ERROR, INSTALLED, LOCATION, NOTE, TARGET, WARNING, Checked, Expected, Finding, error_at, regenerate_hint, without_path
from .checks.freshness import changed_inputs, freshness_findings
from .checks.indexes import Lookup, Placement, drift, finder_lookup, listed_lookup, place_files, recorded_channels, route_context, verify_files
from .checks.retention import build_date, retention_findings
from .checks.target import installed_findings, target_findings
from .checks.torch import kept_torch_findings, torch_floor, torch_move_findings
from .checks.urls import credential_findings, wheel_url_problem
from .checks.uvlock import uv_project_findings
from .files import read_lock
from .locked import LockedFile


def check_lock(
    path: Path,
    defs: Definitions,
    *,
    expected: Expected | None = None,
    today: dt.date | None = None,
    target: Target | None = None,
    read: Callable[[Path], LockedFile] = read_lock,
) -> Checked:
    """Every offline check of one lock file (pylock or constraints).

    ``target``: the interpreter the lock is about to be installed into (``install --lock``); its
    markers, tags and Python decide what the lock installs (``select``), and what it has installed
    must be what the lock keeps and moves from. Without one, the lock's own declared target decides.
    ``read``: how the file is read (``read_lock``; a caller that read it already passes its memo).
    """
    today = today or dt.date.today()
    try:
        locked = read(path)
    except LockFileError as err:
        return Checked(path=path, findings=(error_at(path, without_path(str(err), path), hint=regenerate_hint(expected)),))
    if not locked.generated:
        what = "no [tool.resolve-gpu-stack] table" if locked.format == "pylock" else "no '# inputs-digest:' header"
        return Checked(
            path=path,
            locked=locked,
            findings=(error_at(path, f"{what}: not written by resolve-gpu-stack, so there is nothing to check it against", hint=regenerate_hint(expected)),),
        )
    defs = defs.with_recorded_package_indexes(locked.indexes)  # the routing the lock was made with (--package-index)
    if locked.format == "pylock":
        findings, plan = pylock_findings(path, locked, defs)
    else:
        findings, plan = constraints_findings(path, locked, defs)
    if plan is not None:
        findings += plan_findings(path, locked, plan, defs, expected=expected, today=today, target=target)
    findings += freshness_findings(path, locked, expected)
    return Checked(path=path, findings=tuple(findings), plan=plan, locked=locked)


def plan_findings(
    path: Path, locked: LockedFile, plan: LockPlan, defs: Definitions, *, expected: Expected | None, today: dt.date, target: Target | None
) -> list[Finding]:
    """What the plan a lock file holds must keep (``check_lock``, once the file reads as a plan)."""
    inputs = locked.inputs if locked.inputs else (expected.inputs if expected else {})
    hint = regenerate_hint(expected)
    findings = [
        error_at(path, v.message, package=v.package, hint=hint)
        for v in plan_violations(plan, defs, torch_floor=torch_floor(inputs), require_hashes=locked.format == "pylock")
    ]
    findings += kept_torch_findings(path, plan, inputs, expected)
    findings += torch_move_findings(path, plan, inputs, expected)
    if locked.format == "pylock":
        findings += target_findings(path, locked, plan, target)
    if target is not None:
        findings += installed_findings(path, plan, target)
    findings += [
        error_at(
            path,
            "its sha256 is a stand-in from the reconstructed part of a snapshot, not the file's digest: installing it will fail",
            package=p.name,
            hint=hint,
        )
        for p in synthetic_rows(plan.packages)
    ]
    findings += retention_findings(path, plan.packages, defs, today, expected)
    findings += abi_findings(path, plan, locked.inputs, expected)
    return findings


__all__ = [
    "Checked",
    "ERROR",
    "Expected",
    "Finding",
    "INSTALLED",
    "LOCATION",
    "Lookup",
    "NOTE",
    "Placement",
    "TARGET",
    "WARNING",
    "abi_findings",
    "build_date",
    "build_findings",
    "changed_inputs",
    "check_lock",
    "credential_findings",
    "drift",
    "finder_lookup",
    "freshness_findings",
    "installed_findings",
    "kept_torch_findings",
    "kept_unlisted_findings",
    "listed_lookup",
    "place_files",
    "plan_findings",
    "recorded_channels",
    "regenerate_hint",
    "retention_findings",
    "route_context",
    "sibling_findings",
    "target_findings",
    "torch_floor",
    "torch_move_findings",
    "uv_project_findings",
    "verify_files",
    "wheel_url_problem",
]
