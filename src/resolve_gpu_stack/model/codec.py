"""One codec for plans: ``LockedPackage`` / ``LockPlan`` <-> plain dicts (JSON and TOML alike).

Every place that stores or shows a plan goes through here: the stored plans of the warm path
(``resolver.reuse``), the ``[tool.resolve-gpu-stack]`` table of a pylock and reading it back
(``lock.pylock``), and the plan JSON of ``--json`` (``cli.render``, through an adapter that keeps
that schema's own keys).

Keys are the lock files' kebab-case, in one fixed order. ``*_to_dict`` writes every field (None
where unset); ``*_from_dict`` accepts a missing optional key as unset and checks each type,
raising ``CodecError`` (a ``ValueError``) with ``<where>: <what>`` that callers prefix with the
file they read.
"""

from __future__ import annotations

import datetime as dt
import enum
import re
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import InvalidVersion, Version

from .abi import ABI_KEY_TYPES, ABI_KEYS, AbiVerdict
from .plan import Action, BuildProvenance, Coupling, LockedPackage, LockPlan, Override, SourceDist, SourceOrigin, TargetSummary
from .source import git_source_problem

E = TypeVar("E", bound=enum.Enum)

#: The fields of a package that describe its wheel (a kept package's stay in the tool table).
FILE_KEYS = ("url", "filename", "sha256", "size", "upload-time", "requires-python", "simple-index")

#: A value's type in words, for messages about TOML and JSON alike (``type_name``, ``kinds_named``; ``data/toml.py`` reads with them too).
TYPE_NAMES: dict[type, str] = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "a boolean",
    dict: "a table",
    list: "an array",
    dt.datetime: "a date-time",
}


def type_name(value: object) -> str:
    """The type of ``value`` in words (``a string``, ``a table``, ...)."""
    return TYPE_NAMES.get(type(value), type(value).__name__)


def kinds_named(kinds: Iterable[type]) -> str:
    """Types in words, as a message names what a value must be (``a string or a date-time``)."""
    return " or ".join(TYPE_NAMES.get(k, k.__name__) for k in kinds)


class CodecError(ValueError):
    """A dict that is not a plan (or a package of one); the message says where and what."""


# -- encoding --------------------------------------------------------------------------------------
def package_to_dict(pkg: LockedPackage) -> dict[str, Any]:
    """Every field of ``pkg``, strings for versions and enums, None where unset."""
    return {
        "name": pkg.name,
        "version": str(pkg.version),
        "action": pkg.action.value,
        "coupling": pkg.coupling.value,
        "index": pkg.index,
        "reason": pkg.reason,
        "installed-version": None if pkg.installed_version is None else str(pkg.installed_version),
        "dependencies": list(pkg.dependencies),
        "url": pkg.url,
        "filename": pkg.filename,
        "sha256": pkg.sha256,
        "size": pkg.size,
        "upload-time": pkg.upload_time,
        "requires-python": pkg.requires_python,
        "built-for": pkg.built_for,
        "abi-mismatch": True if pkg.abi_mismatch else None,  # written only when planned despite a mismatch
        "simple-index": pkg.simple_index,
        **(pkg.abi.to_dict() if pkg.abi is not None else dict.fromkeys(ABI_KEYS)),
        "sdist": None if pkg.sdist is None else sdist_to_dict(pkg.sdist),
        "built": None if pkg.provenance is None else provenance_to_dict(pkg.provenance),
    }


def sdist_to_dict(sdist: SourceDist) -> dict[str, Any]:
    """A build row's sdist (None values dropped: TOML has no null)."""
    origin = sdist.origin
    source = None
    if origin is not None:
        source = without_none({"kind": origin.kind, "url": origin.url, "rev": origin.rev, "commit": origin.commit, "subdirectory": origin.subdirectory})
    return without_none({"url": sdist.url, "filename": sdist.filename, "sha256": sdist.sha256, "size": sdist.size, "origin": source})


def provenance_to_dict(built: BuildProvenance) -> dict[str, Any]:
    """Where a built wheel came from (None values dropped)."""
    return without_none(
        {
            "torch": built.torch,
            "torch-sha256": built.torch_sha256,
            "cuda": built.cuda,
            "nvcc": built.nvcc,
            "arch-list": built.arch_list,
            "python": built.python,
            "platform": built.platform,
            "command": built.command,
        }
    )


def override_to_dict(override: Override) -> dict[str, Any]:
    return {"package": override.package, "requirement": override.requirement, "replaced-by": override.replaced_by, "reason": override.reason}


def target_to_dict(target: TargetSummary) -> dict[str, Any]:
    return {"python": target.python, "platform": target.platform, "cuda": target.cuda}


def plan_to_dict(plan: LockPlan) -> dict[str, Any]:
    """The whole plan (inputs as given: JSON-able values are the caller's business)."""
    return {
        "target": target_to_dict(plan.target),
        "packages": [package_to_dict(p) for p in plan.packages],
        "notes": list(plan.notes),
        "flashinfer-version": None if plan.flashinfer_version is None else str(plan.flashinfer_version),
        "cuda-label": plan.cuda_label,
        "inputs": dict(plan.inputs),
        "inputs-digest": plan.inputs_digest,
        "indexes": dict(plan.indexes),
        "overrides": [override_to_dict(o) for o in plan.overrides],
    }


def without_none(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` less its None values (TOML has no null)."""
    return {k: v for k, v in data.items() if v is not None}


def format_datetime(value: dt.datetime) -> str:
    """UTC, ``Z``, microseconds only when non-zero: the spelling PyPI and the PyTorch index serve."""
    if value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc)
    fraction = f".{value.microsecond:06d}" if value.microsecond else ""
    return value.strftime("%Y-%m-%dT%H:%M:%S") + fraction + ("Z" if value.tzinfo is not None else "")


_RFC3339 = re.compile(r"(\d{4}-\d\d-\d\d)[Tt ](\d\d:\d\d:\d\d)(?:\.(\d+))?([Zz]|[+-]\d\d:\d\d)?")


def parse_datetime(value: object) -> dt.datetime | None:
    """An RFC 3339 date-time (an index's ``upload-time``): in UTC when it gives a zone, naive when
    it gives none (the caller decides what that means); a fraction of any length (``fromisoformat``
    on 3.10 takes 3 or 6 digits). None when it is not one."""
    if not isinstance(value, str):
        return None
    m = _RFC3339.fullmatch(value.strip())
    if m is None:
        return None
    date, clock, fraction, zone = m.groups()
    micro = (fraction or "")[:6].ljust(6, "0")
    offset = "" if zone is None else "+00:00" if zone in "Zz" else zone
    try:
        when = dt.datetime.fromisoformat(f"{date}T{clock}.{micro}{offset}")
    except ValueError:
        return None
    return when if when.tzinfo is None else when.astimezone(dt.timezone.utc)


# -- decoding --------------------------------------------------------------------------------------
class _Fields:
    """Typed reads from one dict, errors naming ``where``."""

    def __init__(self, raw: Mapping[str, Any], where: str) -> None:
        if not isinstance(raw, Mapping):
            raise CodecError(f"{where}: must be a table, not {type_name(raw)}")
        self.raw = raw
        self.where = where

    def fail(self, what: str) -> CodecError:
        return CodecError(f"{self.where}: {what}")

    def get(self, key: str, kind: type | tuple[type, ...], *, required: bool = False) -> Any:
        value = self.raw.get(key)
        if value is None:
            if required:
                raise self.fail(f"missing {key!r}")
            return None
        kinds = (kind,) if isinstance(kind, type) else kind
        if not isinstance(value, kinds) or (bool not in kinds and isinstance(value, bool)):
            raise self.fail(f"{key!r} must be {kinds_named(kinds)}, not {type_name(value)}")
        return value

    def strings(self, key: str, what: str) -> tuple[str, ...]:
        value = self.get(key, list) or []
        if not all(isinstance(v, str) for v in value):
            raise self.fail(what)
        return tuple(value)

    def version(self, key: str, *, required: bool = False) -> Version | None:
        text = self.get(key, str, required=required)
        if text is None:
            return None
        try:
            return Version(text)
        except InvalidVersion:
            raise self.fail(f"{text!r} is not a version") from None

    def enum(self, cls: type[E], key: str) -> E:
        text = self.get(key, str, required=True)
        try:
            return cls(text)
        except ValueError:
            allowed = ", ".join(str(m.value) for m in cls)
            raise self.fail(f"{text!r} is not one of {allowed}") from None

    def time(self, key: str) -> str | None:
        value = self.get(key, (str, dt.datetime))
        return format_datetime(value) if isinstance(value, dt.datetime) else value


def package_from_dict(raw: Mapping[str, Any], where: str) -> LockedPackage:
    """A ``LockedPackage`` from ``package_to_dict``'s shape (optional keys may be absent)."""
    f = _Fields(raw, where)
    name = canonicalize_name(f.get("name", str, required=True))
    f.where = f"{where} ({name})"
    version = f.version("version", required=True)
    assert version is not None
    return LockedPackage(
        name=name,
        version=version,
        action=f.enum(Action, "action"),
        coupling=f.enum(Coupling, "coupling"),
        index=f.get("index", str, required=True),
        reason=f.get("reason", str) or "",
        installed_version=f.version("installed-version"),
        dependencies=tuple(NormalizedName(canonicalize_name(d)) for d in f.strings("dependencies", "'dependencies' must be a list of names")),
        url=f.get("url", str),
        filename=f.get("filename", str),
        sha256=f.get("sha256", str),
        size=f.get("size", int),
        upload_time=f.time("upload-time"),
        requires_python=f.get("requires-python", str),
        built_for=f.get("built-for", str),
        abi_mismatch=bool(f.get("abi-mismatch", bool)),
        simple_index=f.get("simple-index", str),
        abi=_abi(f),
        sdist=_sdist(f.get("sdist", dict), f"{f.where}.sdist"),
        provenance=provenance_from_dict(f.get("built", dict), f"{f.where}.built"),
    )


def _abi(f: _Fields) -> AbiVerdict | None:
    """The package's ABI verdict, its keys type-checked."""
    for key, kind in ABI_KEY_TYPES.items():
        f.get(key, kind)
    try:
        return AbiVerdict.from_dict(f.raw)
    except ValueError as exc:
        raise f.fail(f"bad ABI verdict: {exc}") from None


def _sdist(raw: Mapping[str, Any] | None, where: str) -> SourceDist | None:
    if raw is None:
        return None
    f = _Fields(raw, where)
    return SourceDist(
        url=f.get("url", str, required=True),
        filename=f.get("filename", str, required=True),
        sha256=f.get("sha256", str),
        size=f.get("size", int),
        origin=_origin(f.get("origin", dict), f"{where}.origin"),
    )


def _origin(raw: Mapping[str, Any] | None, where: str) -> SourceOrigin | None:
    if raw is None:
        return None
    f = _Fields(raw, where)
    kind = f.get("kind", str, required=True)
    if kind not in ("git", "directory"):
        raise f.fail(f"source kind {kind!r} is not git or directory")
    origin = SourceOrigin(
        kind=kind, url=f.get("url", str, required=True), rev=f.get("rev", str), commit=f.get("commit", str), subdirectory=f.get("subdirectory", str)
    )
    if kind == "git":
        problem = git_source_problem(origin.url, origin.rev, origin.subdirectory) or (
            git_source_problem(origin.url, origin.commit) if origin.commit is not None else None
        )
        if problem is not None:
            raise f.fail(problem)
    return origin


def provenance_from_dict(raw: Mapping[str, Any] | None, where: str) -> BuildProvenance | None:
    if raw is None:
        return None
    f = _Fields(raw, where)
    return BuildProvenance(
        torch=f.get("torch", str, required=True),
        torch_sha256=f.get("torch-sha256", str),
        cuda=f.get("cuda", str),
        nvcc=f.get("nvcc", str),
        arch_list=f.get("arch-list", str) or "",
        python=f.get("python", str) or "",
        platform=f.get("platform", str) or "",
        command=f.get("command", str) or "",
    )


def override_from_dict(raw: Mapping[str, Any], where: str) -> Override:
    f = _Fields(raw, where)
    return Override(
        package=f.get("package", str, required=True),
        requirement=f.get("requirement", str, required=True),
        replaced_by=f.get("replaced-by", str) or "",
        reason=f.get("reason", str) or "",
    )


def target_from_dict(raw: Mapping[str, Any], where: str) -> TargetSummary:
    f = _Fields(raw, where)
    return TargetSummary(python=f.get("python", str, required=True), platform=f.get("platform", str, required=True), cuda=f.get("cuda", str))


def plan_from_dict(raw: Mapping[str, Any], where: str = "plan") -> LockPlan:
    """A ``LockPlan`` from ``plan_to_dict``'s shape."""
    f = _Fields(raw, where)
    packages = f.get("packages", list) or []
    indexes = f.get("indexes", dict) or {}
    if not all(isinstance(v, str) for v in indexes.values()):
        raise CodecError(f"{where}.indexes: every index must be a URL string")
    return LockPlan(
        target=target_from_dict(f.get("target", dict, required=True), f"{where}.target"),
        packages=tuple(package_from_dict(p, f"{where}.packages #{i + 1}") for i, p in enumerate(packages)),
        notes=_Fields(raw, f"{where}.notes").strings("notes", "must be a list of strings"),
        flashinfer_version=f.version("flashinfer-version"),
        cuda_label=f.get("cuda-label", str),
        inputs=dict(f.get("inputs", dict) or {}),
        inputs_digest=f.get("inputs-digest", str) or "",
        indexes=dict(indexes),
        overrides=tuple(override_from_dict(o, f"{where}.overrides #{i + 1}") for i, o in enumerate(f.get("overrides", list) or [])),
    )


__all__ = [
    "ABI_KEYS",
    "TYPE_NAMES",
    "kinds_named",
    "type_name",
    "FILE_KEYS",
    "CodecError",
    "format_datetime",
    "parse_datetime",
    "override_from_dict",
    "override_to_dict",
    "package_from_dict",
    "package_to_dict",
    "plan_from_dict",
    "plan_to_dict",
    "provenance_from_dict",
    "provenance_to_dict",
    "sdist_to_dict",
    "target_from_dict",
    "target_to_dict",
    "without_none",
]
