"""Read lock files back: a PEP 751 pylock (ours or another tool's) or a constraints file.

Pure parsing (tomllib; tomli on 3.10). Every error is a ``LockFileError`` naming the file and the
key or line. ``plan_from_lock`` rebuilds the ``LockPlan`` a pylock was written from.
"""

from __future__ import annotations

import datetime as dt
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import InvalidVersion, Version

from ..errors import LockFileError
from ..model import Action, Coupling, LockedPackage, LockPlan, TargetSummary
from .format import (
    CONSTRAINTS_HEADER,
    INDEX_COMMENT,
    SCHEMA,
    TOOL,
    format_datetime,
    inputs_digest,
    strip_credentials,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


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


@dataclass(frozen=True, slots=True, kw_only=True)
class Pin:
    """One package of the plan as the file records it (pylock tool table, or a constraints line)."""

    name: NormalizedName
    version: Version
    action: Action | None = None
    coupling: Coupling | None = None
    index: str | None = None  # logical index name
    reason: str = ""
    installed_version: Version | None = None
    dependencies: tuple[NormalizedName, ...] = ()
    wheel: LockedWheel | None = None  # kept packages only: their file, when the plan had one
    requires_python: str | None = None  # kept packages only


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


def read_lock(path: Path) -> LockedFile:
    """Parse a pylock (``*.toml``) or constraints (anything else) file; ``LockFileError`` when malformed."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise LockFileError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LockFileError(f"{path}: not UTF-8 text (byte {exc.start})") from exc
    if path.name.endswith(".toml"):
        return _read_pylock(path, text)
    return _read_constraints(path, text)


_TOML_TYPES = {str: "a string", int: "an integer", float: "a float", bool: "a boolean", dict: "a table",
               list: "an array", dt.datetime: "a date-time"}


class _Reader:
    """Typed access into parsed TOML with errors that name the file and the key."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, where: str, what: str) -> LockFileError:
        return LockFileError(strip_credentials(f"{self.path}: {where}: {what}"))

    def get(self, table: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str, *, required: bool = False) -> Any:
        if key not in table:
            if required:
                raise self.fail(where, f"missing {key!r}")
            return None
        value = table[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            kinds = (kind,) if isinstance(kind, type) else kind
            names = " or ".join(_TOML_TYPES.get(k, k.__name__) for k in kinds)
            raise self.fail(where, f"{key!r} must be {names}, not {_TOML_TYPES.get(type(value), type(value).__name__)}")
        return value

    def version(self, text: str, where: str) -> Version:
        try:
            return Version(text)
        except InvalidVersion as exc:
            raise self.fail(where, f"{text!r} is not a version") from exc

    def enum(self, cls: type, text: str, where: str) -> Any:
        try:
            return cls(text)
        except ValueError as exc:
            allowed = ", ".join(m.value for m in cls)
            raise self.fail(where, f"{text!r} is not one of {allowed}") from exc

    def tables(self, table: Mapping[str, Any], key: str, where: str) -> list[Mapping[str, Any]]:
        items = self.get(table, key, list, where) or []
        if not all(isinstance(i, dict) for i in items):
            raise self.fail(where, f"{key!r} must be an array of tables")
        return items


def _upload_time_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return format_datetime(value)
    return str(value)


def _read_wheel(r: _Reader, raw: Mapping[str, Any], where: str) -> LockedWheel:
    url = r.get(raw, "url", str, where) or r.get(raw, "path", str, where)
    if not url:
        raise r.fail(where, "a wheel needs a 'url' or a 'path'")
    hashes = r.get(raw, "hashes", dict, where, required=True)
    if not hashes:
        raise r.fail(where, "'hashes' must hold at least one hash (PEP 751)")
    sha256 = hashes.get("sha256")
    if sha256 is not None and not (isinstance(sha256, str) and re.fullmatch(r"[0-9a-fA-F]{64}", sha256)):
        raise r.fail(where, f"sha256 {sha256!r} is not 64 hex digits")
    size = r.get(raw, "size", int, where)
    upload = r.get(raw, "upload-time", (dt.datetime, str), where)
    filename = r.get(raw, "name", str, where) or url.rsplit("/", 1)[-1].split("#")[0]
    return LockedWheel(filename=filename, url=url, sha256=sha256.lower() if sha256 else None, size=size,
                       upload_time=_upload_time_text(upload))


def _read_entry(r: _Reader, raw: Mapping[str, Any], n: int) -> LockedEntry:
    where = f"packages #{n}"
    name = canonicalize_name(r.get(raw, "name", str, where, required=True))
    where = f"packages #{n} ({name})"
    version_text = r.get(raw, "version", str, where)
    wheels = tuple(_read_wheel(r, w, f"{where} wheel #{i + 1}") for i, w in enumerate(r.tables(raw, "wheels", where)))
    return LockedEntry(
        name=name,
        version=r.version(version_text, where) if version_text is not None else None,
        index=r.get(raw, "index", str, where),
        requires_python=r.get(raw, "requires-python", str, where),
        wheels=wheels,
    )


def _read_pin(r: _Reader, raw: Mapping[str, Any], n: int) -> Pin:
    where = f"tool.{TOOL}.packages #{n}"
    name = canonicalize_name(r.get(raw, "name", str, where, required=True))
    where += f" ({name})"
    installed = r.get(raw, "installed-version", str, where)
    deps = r.get(raw, "dependencies", list, where) or []
    if not all(isinstance(d, str) for d in deps):
        raise r.fail(where, "'dependencies' must be a list of names")
    url = r.get(raw, "url", str, where)
    wheel = None
    if url is not None:
        wheel = LockedWheel(
            filename=r.get(raw, "filename", str, where) or url.rsplit("/", 1)[-1],
            url=url,
            sha256=r.get(raw, "sha256", str, where),
            size=r.get(raw, "size", int, where),
            upload_time=_upload_time_text(r.get(raw, "upload-time", (str, dt.datetime), where)),
        )
    return Pin(
        name=name,
        version=r.version(r.get(raw, "version", str, where, required=True), where),
        action=r.enum(Action, r.get(raw, "action", str, where, required=True), where),
        coupling=r.enum(Coupling, r.get(raw, "coupling", str, where, required=True), where),
        index=r.get(raw, "index", str, where, required=True),
        reason=r.get(raw, "reason", str, where) or "",
        installed_version=r.version(installed, where) if installed is not None else None,
        dependencies=tuple(canonicalize_name(d) for d in deps),
        wheel=wheel,
        requires_python=r.get(raw, "requires-python", str, where),
    )


def _check_lock_version(r: _Reader, doc: Mapping[str, Any]) -> str:
    version = r.get(doc, "lock-version", str, "top level", required=True)
    major = version.split(".", 1)[0]
    if major != "1":
        raise r.fail("lock-version", f"{version!r} is not supported (this tool reads lock-version 1.x)")
    return version


def _read_pylock(path: Path, text: str) -> LockedFile:
    r = _Reader(path)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise LockFileError(f"{path}: not valid TOML: {exc}") from exc
    _check_lock_version(r, doc)
    created_by = r.get(doc, "created-by", str, "top level", required=True)
    if "packages" not in doc:
        raise r.fail("top level", "missing 'packages' (PEP 751 requires the array, even if empty)")
    entries = tuple(_read_entry(r, raw, i + 1) for i, raw in enumerate(r.tables(doc, "packages", "top level")))
    envs = r.get(doc, "environments", list, "top level") or []
    common: dict[str, Any] = {
        "path": path, "format": "pylock", "entries": entries, "created_by": created_by,
        "requires_python": r.get(doc, "requires-python", str, "top level"),
        "environments": tuple(str(e) for e in envs),
    }
    tools = r.get(doc, "tool", dict, "top level") or {}
    tool = r.get(tools, TOOL, dict, "tool")
    if tool is None:
        return LockedFile(**common)
    return LockedFile(**common, **_read_tool(r, tool))


def _read_tool(r: _Reader, tool: Mapping[str, Any]) -> dict[str, Any]:
    where = f"tool.{TOOL}"
    schema = r.get(tool, "schema", str, where, required=True)
    if schema != SCHEMA:
        raise r.fail(where, f"schema {schema!r} is not {SCHEMA!r}")
    target = r.get(tool, "target", dict, where, required=True)
    pins = tuple(_read_pin(r, raw, i + 1) for i, raw in enumerate(r.tables(tool, "packages", where)))
    names = [p.name for p in pins]
    if len(set(names)) != len(names):
        raise r.fail(where, "a package is listed twice")
    torch_raw = r.get(tool, "torch", dict, where)
    torch = None
    if torch_raw is not None:
        tw = f"{where}.torch"
        torch = TorchPin(
            version=r.version(r.get(torch_raw, "version", str, tw, required=True), tw),
            action=r.enum(Action, r.get(torch_raw, "action", str, tw, required=True), tw),
            local=r.get(torch_raw, "local", str, tw),
            index=r.get(torch_raw, "index", str, tw, required=True),
            url=r.get(torch_raw, "url", str, tw),
        )
    fi = r.get(tool, "flashinfer", dict, where) or {}
    fi_version = r.get(fi, "version", str, f"{where}.flashinfer")
    indexes = r.get(tool, "indexes", dict, where) or {}
    if not all(isinstance(v, str) for v in indexes.values()):
        raise r.fail(f"{where}.indexes", "every index must be a URL string")
    notes = r.get(tool, "notes", list, where) or []
    if not all(isinstance(n, str) for n in notes):
        raise r.fail(f"{where}.notes", "must be a list of strings")
    tw = f"{where}.target"
    return {
        "pins": pins,
        "command": r.get(tool, "command", str, where, required=True),
        "inputs_digest": r.get(tool, "inputs-digest", str, where, required=True),
        "inputs": r.get(tool, "inputs", dict, where) or {},
        "target": TargetSummary(
            python=r.get(target, "python", str, tw, required=True),
            platform=r.get(target, "platform", str, tw, required=True),
            cuda=r.get(target, "cuda", str, tw),
        ),
        "torch": torch,
        "cuda_label": r.get(tool, "cuda-label", str, where),
        "flashinfer_version": r.version(fi_version, f"{where}.flashinfer") if fi_version else None,
        "flashinfer_components": tuple(canonicalize_name(c) for c in (fi.get("components") or [])),
        "indexes": dict(indexes),
        "notes": tuple(notes),
        "name": r.get(tool, "name", str, where),
    }


_PIN_RE = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*(?P<version>[^\s;#]+)\s*(?:#\s*(?P<comment>.*))?$")
_PIN_COMMENT_RE = re.compile(r"index=(?P<index>\S+)\s+action=(?P<action>\S+)\s+coupling=(?P<coupling>\S+)")
_TARGET_RE = re.compile(r"^# target: python=(?P<python>\S+) platform=(?P<platform>\S+) cuda=(?P<cuda>\S+)$")


def _read_constraints(path: Path, text: str) -> LockedFile:
    r = _Reader(path)
    header: dict[str, Any] = {"indexes": {}, "notes": []}
    pins: list[Pin] = []
    lines = text.splitlines()
    in_indexes = False
    for n, raw in enumerate(lines, start=1):
        line = raw.strip()
        if raw.startswith("#"):
            in_indexes = _read_header_line(raw, lines, n, header, in_indexes)
            continue
        in_indexes = False
        if not line:
            continue
        pins.append(_read_pin_line(r, line, n))
    seen: set[str] = set()
    for pin in pins:
        if pin.name in seen:
            raise r.fail("constraints", f"{pin.name} is pinned twice")
        seen.add(pin.name)
    torch = next((p for p in pins if p.name == "torch"), None)
    return LockedFile(
        path=path,
        format="constraints",
        pins=tuple(pins),
        command=header.get("command"),
        inputs_digest=header.get("inputs_digest"),
        target=header.get("target"),
        torch=TorchPin(version=torch.version, action=torch.action, local=torch.version.local, index=torch.index or "")
        if torch is not None and torch.action is not None else None,
        indexes=header["indexes"],
        notes=tuple(header["notes"]),
    )


def _read_header_line(raw: str, lines: list[str], n: int, header: dict[str, Any], in_indexes: bool) -> bool:
    if raw == CONSTRAINTS_HEADER and n < len(lines) and lines[n].startswith("#    "):
        header["command"] = lines[n][5:].strip()
    elif raw.startswith("# inputs-digest: "):
        header["inputs_digest"] = raw.split(": ", 1)[1].strip()
    elif m := _TARGET_RE.match(raw):
        header["target"] = TargetSummary(
            python="" if m["python"] == "unknown" else m["python"],
            platform="" if m["platform"] == "unknown" else m["platform"],
            cuda=None if m["cuda"] == "none" else m["cuda"],
        )
    elif raw == INDEX_COMMENT:
        return True
    elif in_indexes and raw.startswith("#   ") and ": " in raw:
        key, _, url = raw[4:].partition(": ")
        header["indexes"][key.strip()] = url.strip()
        return True
    elif raw.startswith("# note: "):
        header["notes"].append(raw[len("# note: "):])
    return False


def _read_pin_line(r: _Reader, line: str, n: int) -> Pin:
    where = f"line {n}"
    if line.startswith("-"):
        raise r.fail(where, f"option lines are not allowed in a constraints lock ({line.split()[0]})")
    m = _PIN_RE.match(line)
    if not m:
        raise r.fail(where, f"expected 'name==version', got {line!r}")
    action = coupling = index = None
    comment = m.group("comment")
    if comment and (c := _PIN_COMMENT_RE.search(comment)):
        index = c["index"]
        action = r.enum(Action, c["action"], where)
        coupling = r.enum(Coupling, c["coupling"], where)
    return Pin(
        name=canonicalize_name(m["name"]),
        version=r.version(m["version"], where),
        action=action,
        coupling=coupling,
        index=index,
    )


# -- back to a plan ----------------------------------------------------------------------------


def _package_from(locked: LockedFile, pin: Pin, entries: Mapping[str, LockedEntry]) -> LockedPackage:
    where = f"{locked.path}: {pin.name}"
    entry = entries.get(pin.name)
    wheel = pin.wheel
    requires_python = pin.requires_python
    if pin.action is not Action.KEEP:
        if entry is None:
            raise LockFileError(f"{where}: {pin.action.value if pin.action else 'a'} package without a [[packages]] entry")
        if entry.version != pin.version:
            raise LockFileError(f"{where}: [[packages]] says {entry.version}, the tool table says {pin.version}")
        if len(entry.wheels) != 1:
            raise LockFileError(f"{where}: expected exactly one wheel, found {len(entry.wheels)}")
        wheel = entry.wheels[0]
        requires_python = entry.requires_python
    elif entry is not None:
        raise LockFileError(f"{where}: a kept package must not have a [[packages]] entry (uv would reinstall it)")
    assert pin.action is not None and pin.coupling is not None and pin.index is not None
    return LockedPackage(
        name=pin.name,
        version=pin.version,
        action=pin.action,
        index=pin.index,
        coupling=pin.coupling,
        reason=pin.reason,
        url=wheel.url if wheel else None,
        filename=wheel.filename if wheel else None,
        sha256=wheel.sha256 if wheel else None,
        size=wheel.size if wheel else None,
        upload_time=wheel.upload_time if wheel else None,
        requires_python=requires_python,
        installed_version=pin.installed_version,
        dependencies=pin.dependencies,
    )


def plan_from_lock(locked: LockedFile) -> LockPlan:
    """Rebuild the plan a pylock file was written from (for ``check`` and ``install``)."""
    if locked.format != "pylock":
        raise LockFileError(
            f"{locked.path}: a constraints file does not record wheels, hashes or couplings",
            hint="use a pylock.toml written by resolve-gpu-stack",
        )
    if not locked.generated or locked.target is None:
        raise LockFileError(f"{locked.path}: no [tool.{TOOL}] table: not written by resolve-gpu-stack")
    entries = {e.name: e for e in locked.entries}
    pinned = {p.name for p in locked.pins}
    extra = sorted(set(entries) - pinned)
    if extra:
        raise LockFileError(f"{locked.path}: [[packages]] {', '.join(extra)} missing from [tool.{TOOL}.packages]")
    return LockPlan(
        target=locked.target,
        packages=tuple(_package_from(locked, pin, entries) for pin in locked.pins),
        notes=locked.notes,
        flashinfer_version=locked.flashinfer_version,
        cuda_label=locked.cuda_label,
        inputs=dict(locked.inputs),
        inputs_digest=locked.inputs_digest or "",
        indexes=dict(locked.indexes),
    )


__all__ = ["LockedEntry", "LockedFile", "LockedWheel", "Pin", "TorchPin", "plan_from_lock", "read_lock"]
