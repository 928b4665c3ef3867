"""The kept torch: a lock keeps exactly the installed torch it was made for, and moves from it only as recorded."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from ...model import Action, LockPlan
from ...model.request import torch_move_named
from .finding import Expected, Finding, error_at, regenerate_hint


def torch_floor(inputs: Mapping[str, Any]) -> Version | None:
    """The installed torch a lock was made for, unless it allowed a downgrade."""
    text = inputs.get("installed-torch")
    if not isinstance(text, str) or inputs.get("allow-downgrade") is True:
        return None
    try:
        return Version(text)
    except InvalidVersion:
        return None


def kept_torch_findings(path: Path, plan: LockPlan, inputs: Mapping[str, Any], expected: Expected | None) -> list[Finding]:
    """A torch the lock keeps is exactly the installed torch the lock was made for."""
    torch, installed = plan.torch, inputs.get("installed-torch")
    if torch is None or torch.action is not Action.KEEP or not isinstance(installed, str) or _same_version(installed, torch.version):
        return []
    return [
        error_at(
            path,
            f"the lock keeps torch {torch.version}, but the installed torch it was made for is {installed}",
            package="torch",
            hint=regenerate_hint(expected),
        )
    ]


def _same_version(text: str, version: Version | None) -> bool:
    try:
        return version is not None and Version(text) == version
    except InvalidVersion:
        return False


def torch_move_findings(path: Path, plan: LockPlan, inputs: Mapping[str, Any], expected: Expected | None) -> list[Finding]:
    """A torch the lock moves (upgrade, change, downgrade) is moved from the installed torch the
    lock was made for, and only as far as its inputs allow: only when they name the move (an exact
    ``torch``, ``upgrade-package``: ``model.request.torch_move_named``), lowered only with
    ``allow-downgrade``, moved to another CUDA build only when its ``cuda`` input asks for that label."""
    torch, installed = plan.torch, inputs.get("installed-torch")
    if torch is None or torch.action in (Action.KEEP, Action.INSTALL):
        return []
    broken = (
        (
            torch.installed_version is not None and not torch_move_named(inputs, torch.installed_version),
            f"the lock moves torch from {torch.installed_version} to {torch.version}, and its inputs do not name that move "
            "(an exact --torch VERSION, or --upgrade-package torch): the installed torch is kept unless the command line says so",
        ),
        (
            isinstance(installed, str) and not _same_version(installed, torch.installed_version),
            f"the lock moves torch from {torch.installed_version or 'nothing'}, but the installed torch it was made for is {installed}",
        ),
        (
            torch.action is Action.DOWNGRADE and inputs.get("allow-downgrade") is not True,
            f"the lock lowers torch to {torch.version}, and its inputs do not allow a downgrade",
        ),
        (
            torch.action is Action.CHANGE and inputs.get("cuda") != torch.version.local,
            f"the lock changes torch to the {torch.version.local or 'unlabelled'} build, and its inputs ask for no such CUDA label",
        ),
    )
    return [error_at(path, message, package="torch", hint=regenerate_hint(expected)) for failed, message in broken if failed]
