"""What a lock file says, as read back: the values ``pylock``, ``constraints`` and ``check`` share.

Pure data. ``LockedFile.pins`` is the plan as the file records it, for both formats; ``entries``
are a pylock's PEP 751 ``[[packages]]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

from ..data.toml import TomlReader
from ..errors import LockFileError, ResolveGpuStackError
from ..model import Action, Coupling, LockedPackage, LockPlan, Override, TargetSummary
from ..model.inputs import inputs_digest
from ..urls import strip_credentials


@dataclass(frozen=True, slots=True, kw_only=True)
class LockedWheel:
    filename: str
    url: str
    sha256: str | None
    size: int | None = None
    upload_time: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LockedEntry:
    """One PEP 751 ``[[packages]]`` entry."""

    name: NormalizedName
    version: Version | None
    index: str | None  # base URL
    requires_python: str | None = None
    wheels: tuple[LockedWheel, ...] = ()
    marker: str | None = None  # PEP 751 ``packages.marker``: when the entry applies (None: always)


@dataclass(frozen=True, slots=True, kw_only=True)
class Pin:
    """One package of the plan as the file records it (pylock tool table, or a constraints line).

    ``package`` is the whole tool-table record of a pylock (a kept package's file fields
    included); a constraints line has only the name, version and, when commented, the rest.
    """

    name: NormalizedName
    version: Version
    action: Action | None = None
    coupling: Coupling | None = None
    index: str | None = None  # logical index name
    package: LockedPackage | None = None

    @classmethod
    def of(cls, pkg: LockedPackage) -> Pin:
        return cls(name=pkg.name, version=pkg.version, action=pkg.action, coupling=pkg.coupling, index=pkg.index, package=pkg)


@dataclass(frozen=True, slots=True, kw_only=True)
class TorchPin:
    version: Version
    action: Action
    local: str | None
    index: str
    url: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LockedFile:
    """What a lock file says. ``entries`` only for pylock; ``pins`` for both formats."""

    path: Path
    format: str  # "pylock" | "constraints"
    pins: tuple[Pin, ...] = ()
    entries: tuple[LockedEntry, ...] = ()
    command: str | None = None
    inputs_digest: str | None = None
    inputs: Mapping[str, Any] = field(default_factory=dict)
    target: TargetSummary | None = None
    torch: TorchPin | None = None
    cuda_label: str | None = None
    flashinfer_version: Version | None = None
    flashinfer_components: tuple[NormalizedName, ...] = ()
    indexes: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    overrides: tuple[Override, ...] = ()  # requirements the plan replaced (pylock tool table)
    name: str | None = None  # the <name> recorded in a pylock tool table
    created_by: str | None = None
    requires_python: str | None = None
    environments: tuple[str, ...] = ()

    @property
    def generated(self) -> bool:
        """Whether resolve-gpu-stack wrote it (a pylock with our tool table, or our constraints header)."""
        return self.inputs_digest is not None

    @property
    def inputs_match_digest(self) -> bool:
        """Whether the recorded inputs still hash to the recorded digest (pylock only: a
        constraints file records the digest but not the inputs, so this is False there)."""
        return self.inputs_digest == inputs_digest(self.inputs)

    def pin(self, name: str) -> Pin | None:
        key = canonicalize_name(name)
        return next((p for p in self.pins if p.name == key), None)


class LockReader(TomlReader):
    """``TomlReader`` raising ``LockFileError``s that never repeat a credential from the file."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, error=LockFileError)

    def fail(self, where: str, what: str, *, hint: str | None = None) -> ResolveGpuStackError:
        return LockFileError(strip_credentials(f"{self.source}: {where}: {what}"), hint=hint)


def sorted_packages(plan: LockPlan) -> list[LockedPackage]:
    """The plan's packages by name; a name listed twice is an error (both formats are keyed by name)."""
    seen: set[str] = set()
    for pkg in plan.packages:
        if pkg.name in seen:
            raise LockFileError(f"the plan lists {pkg.name} twice")
        seen.add(pkg.name)
    return sorted(plan.packages, key=lambda p: p.name)


__all__ = ["LockReader", "LockedEntry", "LockedFile", "LockedWheel", "Pin", "TorchPin", "sorted_packages"]
