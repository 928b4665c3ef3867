"""What a lock file says, as read back: the values ``pylock``, ``constraints``, ``check``,
``install --lock``, the wheelhouse and the ``uv.lock`` check share.

Pure data. One model of a package read from a lock, ``LockedEntry``, whatever the lock: a pylock's
PEP 751 ``[[packages]]`` entry (built from ``packaging.pylock``'s ``Package``) and its tool-table
record, a constraints line, a ``uv.lock`` ``[[package]]``, a wheelhouse manifest's file. Each
reader fills what its file says and leaves the rest unset. ``LockedFile.pins`` is the plan as the
file records it, for both lock formats; ``entries`` are a pylock's ``[[packages]]``.
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
    """A wheel a lock names: its file name, where it is (a URL, or a path as a wheelhouse writes
    it), its hash and size."""

    filename: str
    url: str
    sha256: str | None
    size: int | None = None
    upload_time: str | None = None
    metadata_sha256: str | None = None  # a wheelhouse's ``<wheel>.metadata`` beside it (PEP 658)


@dataclass(frozen=True, slots=True, kw_only=True)
class LockedEntry:
    """One package as a lock records it: a pylock's ``[[packages]]`` entry or tool-table record, a
    constraints line, a ``uv.lock`` package, a wheelhouse's file (see the module docstring).

    Where it comes from is ``index`` (the logical index the plan took it from, as the plan's
    ``LockedPackage.index``) and ``simple_index`` (the base URL the file lists: PEP 751
    ``packages.index``, ``uv.lock``'s ``source.registry``). ``markers``: it applies where any of
    them holds, everywhere when there is none (a pylock entry's one ``marker``, a ``uv.lock``
    package's ``resolution-markers``). ``action`` and ``coupling`` are the plan's, when the file
    records them; ``planned`` is a pylock tool table's whole record of it (the plan's row).
    """

    name: NormalizedName
    version: Version | None  # None: a PEP 751 entry or a uv.lock package that has none (the project, a path)
    index: str | None = None
    simple_index: str | None = None
    requires_python: str | None = None
    markers: tuple[str, ...] = ()
    wheels: tuple[LockedWheel, ...] = ()
    action: Action | None = None
    coupling: Coupling | None = None
    planned: LockedPackage | None = None
    locks: tuple[str, ...] = ()  # a wheelhouse's file: the file names of the locks that install it

    @classmethod
    def of(cls, pkg: LockedPackage) -> LockedEntry:
        """A plan's row as a lock's tool table records it."""
        return cls(name=pkg.name, version=pkg.version, action=pkg.action, coupling=pkg.coupling, index=pkg.index, planned=pkg)

    @property
    def marker(self) -> str | None:
        """``markers`` as one marker (a pylock entry's own), None when it applies everywhere."""
        if len(self.markers) < 2:
            return self.markers[0] if self.markers else None
        return " or ".join(f"({m})" for m in self.markers)

    @property
    def wheel(self) -> LockedWheel:
        """The one wheel of a wheelhouse's file (or of a pylock entry ``plan_from_lock`` accepted)."""
        (wheel,) = self.wheels
        return wheel


@dataclass(frozen=True, slots=True, kw_only=True)
class LockedFile:
    """What a lock file says. ``entries`` only for pylock; ``pins`` for both formats; ``torch``:
    the tool table's torch (a pylock), or the torch pin with its action (a constraints file we wrote)."""

    path: Path
    format: str  # "pylock" | "constraints"
    pins: tuple[LockedEntry, ...] = ()
    entries: tuple[LockedEntry, ...] = ()
    command: str | None = None
    inputs_digest: str | None = None
    inputs: Mapping[str, Any] = field(default_factory=dict)
    target: TargetSummary | None = None
    torch: LockedEntry | None = None
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

    def pin(self, name: str) -> LockedEntry | None:
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


__all__ = ["LockReader", "LockedEntry", "LockedFile", "LockedWheel", "sorted_packages"]
