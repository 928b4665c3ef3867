"""An export read back (``read_export``: the record and the ``[tool.uv]`` values there now) and a project's ``uv.lock`` (``read_uv_lock``), for ``check``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from packaging.markers import InvalidMarker, Marker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ...data.toml import parse_toml
from ...errors import LockFileError
from ..locked import LockedEntry
from ..pylock import TOOL
from .tables import (
    GROUP,
    LISTS,
    RECORD,
    RecordedTarget,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportRecord:
    """``[tool.resolve-gpu-stack.uv-export]`` of a pyproject, and the ``[tool.uv]`` values there now."""

    command: str
    wrote: Mapping[str, tuple[str, ...]]  # environments and LISTS keys -> the entries written
    sources: tuple[str, ...]
    group: str
    targets: tuple[RecordedTarget, ...]
    uv: Mapping[str, Any]  # the [tool.uv] table as it is now
    groups: Mapping[str, Any]  # [dependency-groups] as it is now

    def pins(self, target: RecordedTarget, environment: Mapping[str, str] | None) -> dict[str, Version]:
        """Package -> the version the export pinned for ``target`` (in its marker ``environment``;
        None: entries with a marker count for every target)."""
        out: dict[str, Version] = {}
        for text in self.wrote.get("constraint-dependencies", ()):
            try:
                req = Requirement(text)
                version = Version(next(iter(req.specifier)).version)
            except (InvalidRequirement, InvalidVersion, StopIteration):
                continue
            if req.marker is not None and environment is not None and not marker_holds(req.marker, environment):
                continue
            out[canonicalize_name(req.name)] = version
        return out


def read_export(text: str, where: str) -> ExportRecord | None:
    """The export record of a pyproject.toml, None when it has none; malformed: ``LockFileError``."""
    doc = parse_toml(text, where, error=LockFileError)
    tool = _dict(doc.get("tool"))
    raw = _dict(tool.get(TOOL)).get(RECORD)
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise LockFileError(f"{where}: [tool.{TOOL}.{RECORD}] must be a table", hint="export again: it rewrites the record")
    try:
        targets = tuple(_read_target(t) for t in raw.get("target", []))
        wrote = {key: tuple(str(v) for v in raw.get(key, [])) for key in ("environments", *LISTS)}
    except (TypeError, AttributeError, KeyError):
        raise LockFileError(f"{where}: [tool.{TOOL}.{RECORD}] is malformed", hint="export again: it rewrites the record") from None
    return ExportRecord(
        command=str(raw.get("command", "")),
        wrote=wrote,
        sources=tuple(str(s) for s in raw.get("sources", [])),
        group=str(raw.get("group", GROUP)),
        targets=targets,
        uv=_dict(tool.get("uv")),
        groups=_dict(doc.get("dependency-groups")),
    )


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _read_target(raw: Mapping[str, Any]) -> RecordedTarget:
    return RecordedTarget(
        name=str(raw.get("name", "")),
        python=str(raw["python"]),
        platform=str(raw["platform"]),
        environment=raw.get("environment"),
        kept=tuple(str(k) for k in raw.get("kept", [])),
        flashinfer=raw.get("flashinfer"),
        cuda_label=raw.get("cuda-label"),
        sources={str(k): str(v) for k, v in dict(raw.get("sources", {})).items()},
    )


def marker_holds(marker: Marker | str, environment: Mapping[str, str]) -> bool:
    """Whether ``marker`` holds in ``environment``; a marker that cannot be judged holds."""
    try:
        return (marker if isinstance(marker, Marker) else Marker(marker)).evaluate(dict(environment))
    except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
        return True


def read_uv_lock(text: str, where: str) -> tuple[LockedEntry, ...]:
    """The packages of a ``uv.lock`` (its ``[[package]]`` tables): each one's version (None: the
    project itself, a path dependency), the registry it comes from as ``simple_index`` (None: a
    path, a URL, the project) and its ``resolution-markers``, the forks it belongs to (none: every
    one); malformed: ``LockFileError``."""
    doc = parse_toml(text, where, error=LockFileError)
    raw = doc.get("package", [])
    if not isinstance(raw, list) or not all(isinstance(p, dict) for p in raw):
        raise LockFileError(f"{where}: not a uv.lock: 'package' must be an array of tables", hint="run `uv lock` to write it again")
    return tuple(_uv_locked_package(p, n, where) for n, p in enumerate(raw, start=1))


def _uv_locked_package(p: Mapping[str, Any], n: int, where: str) -> LockedEntry:
    name, version, source = p.get("name"), p.get("version"), p.get("source")
    if not isinstance(name, str):
        raise LockFileError(f"{where}: [[package]] #{n} has no name", hint="run `uv lock` to write it again")
    try:
        parsed = Version(version) if isinstance(version, str) else None
    except InvalidVersion:
        raise LockFileError(f"{where}: {name}: version {version!r} is not a version", hint="run `uv lock` to write it again") from None
    registry = source.get("registry") if isinstance(source, dict) else None
    markers = p.get("resolution-markers", [])
    return LockedEntry(
        name=canonicalize_name(name),
        version=parsed,
        simple_index=registry if isinstance(registry, str) else None,
        markers=tuple(str(m) for m in markers) if isinstance(markers, list) else (),
    )


def locked_for(packages: Sequence[LockedEntry], name: str, environment: Mapping[str, str] | None) -> list[LockedEntry]:
    """The entries of ``name`` that the fork for ``environment`` installs (all of them when the
    environment is unknown)."""
    return [p for p in packages if p.name == name and (environment is None or not p.markers or any(marker_holds(m, environment) for m in p.markers))]
