"""The target: the Python and platform a lock is for, and what the target has installed."""

from __future__ import annotations

from pathlib import Path

from ...errors import UsageError
from ...model import Action, LockPlan, Target
from ...model.declared import declared_target
from ..locked import LockedFile
from ..select import select
from .finding import INSTALLED, TARGET, WARNING, Finding, error_at


def target_findings(path: Path, locked: LockedFile, plan: LockPlan, target: Target | None) -> list[Finding]:
    """What the lock installs on ``target`` (default: the lock's own declared target), as uv
    would see it (``select``): the target's Python and platform fit (``TARGET``), and every package
    of the lock's plan that has a ``[[packages]]`` entry is one that applies there."""
    if target is None:
        target = declared_target_of(plan.target.python, plan.target.platform)
        if target is None:
            return [
                Finding(
                    level=WARNING,
                    path=path,
                    message=f"the lock's target ({plan.target.python}, {plan.target.platform}) is not one this tool can describe: its markers and wheel tags were not checked",
                    rule=TARGET,
                )
            ]
    chosen = select(locked, target)
    hint = f"lock for {target.describe()}, or install it on the target the lock was made for"
    out = [error_at(path, p.message, package=p.package, hint=hint, rule=TARGET) for p in chosen.misfits]
    out += [error_at(path, p.message, package=p.package) for p in chosen.errors]
    skipped = set(chosen.skipped).difference(chosen.wheels)  # a marker skips it and no other entry of it installs a wheel
    markers = {e.name: e.marker for e in locked.entries if e.name in skipped}
    for pkg in plan.packages:
        if pkg.name in skipped:
            marker = markers[pkg.name]
            out.append(
                error_at(
                    path,
                    f"its [[packages]] marker ({marker}) excludes {target.describe()}, so uv would skip it; the lock's plan has it ({pkg.action.value} {pkg.version})",
                    package=pkg.name,
                )
            )
    return out


def declared_target_of(python: str, platform: str) -> Target | None:
    """The target a lock or an export records, as a declared target (None when it is not one this
    tool can declare: a probed target's platform, a malformed version)."""
    try:
        return declared_target(python, platform)
    except (ValueError, UsageError):
        return None


def installed_findings(path: Path, plan: LockPlan, target: Target) -> list[Finding]:
    """What ``target`` has installed against what the lock keeps and moves from (``INSTALLED``):
    every kept package exactly at its locked version, and a torch the lock moves still the one it
    was made for (the lock's no-downgrade promise is about that torch). Nothing relaxes these."""
    out = []
    hint = "lock for this interpreter as it is (a lock never changes the torch it was not made for)"
    for pkg in plan.packages:
        now = target.installed.get(pkg.name)
        shown = now if now is not None else "not installed"
        if pkg.action is Action.KEEP and now != pkg.version:
            out.append(
                error_at(
                    path, f"the lock keeps the installed {pkg.name} {pkg.version}; here {pkg.name} is {shown}", package=pkg.name, hint=hint, rule=INSTALLED
                )
            )
        elif pkg.action is not Action.KEEP and pkg.name == "torch" and now not in (pkg.installed_version, pkg.version):
            was = pkg.installed_version or "nothing"
            out.append(error_at(path, f"the lock moves torch from {was} to {pkg.version}; here torch is {shown}", package=pkg.name, hint=hint, rule=INSTALLED))
    return out
