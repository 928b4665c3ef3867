"""Freshness: the inputs a lock was made from are still the config's (its inputs digest)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...model.inputs import canonical_inputs
from ...urls import strip_credentials
from ..locked import LockedFile
from .finding import Expected, Finding, error_at, regenerate_hint


def freshness_findings(path: Path, locked: LockedFile, expected: Expected | None) -> list[Finding]:
    if expected is None or locked.inputs_digest == expected.digest:
        return []
    changed = changed_inputs(locked.inputs, expected.inputs) if locked.inputs else []
    detail = f" ({'; '.join(changed)})" if changed else ""
    return [
        error_at(
            path,
            f"stale: the config for target {expected.target!r} changed since this lock was written{detail}",
            hint=regenerate_hint(expected),
        )
    ]


def changed_inputs(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """Human-readable differences between the inputs a lock records and the config's."""
    old, new = canonical_inputs(recorded), canonical_inputs(current)
    out = []
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            out.append(f"{key}: {_show(old.get(key))} -> {_show(new.get(key))}")
    return out


def _show(value: Any) -> str:
    if value is None:
        return "unset"
    return strip_credentials(repr(value))
