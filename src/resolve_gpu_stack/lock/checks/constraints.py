"""Constraints files: their pins read as a plan, and the pylock written beside one agreeing with it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ...data.definitions import Definitions
from ...model import Action, LockedPackage, LockPlan, TargetSummary
from ...rules.invariants import owner_of
from ..locked import LockedEntry, LockedFile
from .finding import Checked, Finding, error_at
from .urls import credential_findings


def constraints_findings(path: Path, locked: LockedFile, defs: Definitions) -> tuple[list[Finding], LockPlan | None]:
    """A constraints file: its pins as a plan (couplings from the definitions, indexes from the
    pins' comments, or the owner when a pin has none)."""
    cuda = _constraints_cuda(locked)
    target = locked.target or TargetSummary(python="", platform="", cuda=cuda)
    fi = defs.flashinfer
    fi_pin = locked.pin(fi.python)
    jit = locked.pin(fi.jit_cache)
    skeleton = LockPlan(
        target=replace(target, cuda=cuda),
        packages=(),
        flashinfer_version=fi_pin.version if fi_pin else None,
        cuda_label=jit.version.local if jit is not None and jit.version is not None else None,
    )
    packages = tuple(_package_from_pin(p, defs, skeleton) for p in locked.pins)
    return credential_findings(path, locked), replace(skeleton, packages=packages, inputs=dict(locked.inputs), inputs_digest=locked.inputs_digest or "")


def _constraints_cuda(locked: LockedFile) -> str | None:
    """The CUDA label of a constraints file's target: recorded, else its torch pin's local label."""
    torch = locked.pin("torch")
    if locked.target is not None and locked.target.cuda is not None:
        return locked.target.cuda
    local = torch.version.local if torch is not None and torch.version is not None else None
    return local if local and local.startswith("cu") else None


def _package_from_pin(pin: LockedEntry, defs: Definitions, plan: LockPlan) -> LockedPackage:
    assert pin.version is not None  # a constraints line pins one
    coupling = pin.coupling or defs.coupling(pin.name, pin.version)[0]
    index = pin.index or ("installed" if pin.action is Action.KEEP else owner_of(defs, pin.name, pin.version, plan) or "installed")
    return LockedPackage(name=pin.name, version=pin.version, action=pin.action or Action.INSTALL, index=index, coupling=coupling)


def sibling_findings(path: Path, locked: LockedFile, sibling: Checked) -> list[Finding]:
    """A constraints file's pins against the pylock written with it (the same inputs digest and
    target): every pin must be that lock's package, version and action. The pylock carries hashes
    and is verified against the index, so a hand edit of the ``.txt`` shows up here."""
    other = sibling.plan
    if other is None or not _written_together(locked, sibling):
        return []
    shown = sibling.path.name
    pinned = {p.name: p for p in locked.pins}
    expected = {p.name: p for p in other.packages}
    problems = ((name, _pin_problem(pinned.get(name), expected.get(name), shown)) for name in sorted(set(pinned) | set(expected)))
    return [error_at(path, problem, package=name) for name, problem in problems if problem]


def _written_together(locked: LockedFile, sibling: Checked) -> bool:
    """Whether ``sibling`` (a pylock, read) was written with the constraints file ``locked``: the
    same inputs digest, and the same target when the constraints file records one."""
    source, plan = sibling.locked, sibling.plan
    if source is None or plan is None or source.inputs_digest != locked.inputs_digest:
        return False
    return locked.target is None or locked.target == plan.target


def _pin_problem(pin: LockedEntry | None, pkg: LockedPackage | None, shown: str) -> str | None:
    """How a constraints pin differs from the package of the pylock ``shown`` written with it."""
    if pkg is None:
        return f"pinned at {pin.version if pin else '?'}, but {shown} (written with it) has no such package: the file was edited by hand"
    if pin is None:
        return f"missing: {shown} (written with it) locks {pkg.version}: the file was edited by hand"
    if pin.version != pkg.version:
        return f"pinned at {pin.version}, but {shown} (written with it) locks {pkg.version}: the file was edited by hand"
    if pin.action is not None and pin.action is not pkg.action:
        return f"action {pin.action.value}, but {shown} (written with it) says {pkg.action.value}"
    return None
