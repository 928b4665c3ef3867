"""The PEP 751 format: render a plan as ``pylock.toml`` for uv, and read a pylock back into a plan.

Pure (no network). TOML is written with ``tomli_w`` and read with ``data.toml``; the PEP 751 part
goes through ``packaging.pylock``'s objects both ways (``Pylock``, ``Package``, ``PackageWheel``:
what we write is built from them, every pylock we read, ours or another tool's, is read by them),
which validate it; on top we refuse what we do not install (sources other than wheels) and ask
more of a wheel (a sha256 of 64 hex digits, a file name a file system keeps). Credentials
(``user:pass@`` in any URL) never reach a file: every string is scrubbed before it is written.

Layout: one ``[[packages]]`` entry per package that has a wheel to install, and one per *kept*
package (already installed: a nightly torch, PyPI's torch by its own wheel there, the closure it
pins exactly) whose wheel and sha256 are known: listed at its
exact installed version and hash, uv finds it satisfied and leaves it alone, with ``uv pip install
-r`` and ``uv pip sync`` alike (``sync`` uninstalls whatever is not listed). A kept package
without a known wheel and hash (gone from the index, or a nightly not hashed yet) cannot be listed:
``kept-unlisted`` in the tool table names it with its reason, a note says what that means, and ``check`` warns.
Everything else uv does not need (couplings, the torch pin, the FlashInfer group, the resolver
inputs and their digest) is in ``[tool.resolve-gpu-stack]``; its packages are ``model.codec``'s
package dicts.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import tomli_w
from packaging.markers import Marker
from packaging.pylock import Package, PackageWheel, Pylock, PylockValidationError
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import InvalidVersion, Version

from ..data.toml import parse_toml
from ..errors import LockFileError, UsageError
from ..index.variants import NOT_LOCKABLE, WAY_OUT, is_variant_filename
from ..model import Action, LockedPackage, LockPlan, TargetSummary
from ..model.codec import (
    FILE_KEYS,
    CodecError,
    format_datetime,
    override_from_dict,
    override_to_dict,
    package_from_dict,
    package_to_dict,
    parse_datetime,
    target_from_dict,
    target_to_dict,
    without_none,
)
from ..model.inputs import canonical_inputs, inputs_digest
from ..urls import scrub, strip_credentials
from .locked import LockedEntry, LockedFile, LockedWheel, LockReader, sorted_packages

TOOL = "resolve-gpu-stack"
SCHEMA = "resolve-gpu-stack/lock/v1"
LOCK_VERSION = "1.0"
LOCK_NAME_RE = re.compile(r"^[^./\\\s]+$")

T = TypeVar("T")


# -- target ------------------------------------------------------------------------------------
def _python_minor(python: str) -> str | None:
    if not python:
        return None
    try:
        release = Version(python).release
    except InvalidVersion as exc:
        raise LockFileError(f"target python {python!r} is not a version") from exc
    return f"{release[0]}.{release[1] if len(release) > 1 else 0}"


def target_marker(target: TargetSummary) -> str | None:
    """The PEP 508 marker of the plan's target, e.g. ``platform_machine == 'x86_64' and ...``."""
    clauses = []
    machine, _, os_tag = target.platform.partition("-")
    if machine:
        clauses.append(f"platform_machine == '{machine}'")
    if os_tag.startswith(("manylinux", "musllinux", "linux")):
        clauses.append("sys_platform == 'linux'")
    elif os_tag.startswith("macosx"):
        clauses.append("sys_platform == 'darwin'")
    minor = _python_minor(target.python)
    if minor:
        clauses.append(f"python_version == '{minor}'")
    return " and ".join(clauses) or None


class _WrittenMarker(Marker):
    """A marker that TOML gets as written here (single quotes, no escapes in a TOML string), not in
    packaging's double-quoted normal form."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self._text = text

    def __str__(self) -> str:
        return self._text

    def __deepcopy__(self, memo: object) -> _WrittenMarker:
        return self  # immutable (``Pylock.to_dict`` copies every value)


# -- upload times ------------------------------------------------------------------------------
class _UploadTime(dt.datetime):
    """A UTC datetime that TOML writers spell as PyPI serves it (``...T10:00:00.250000Z``)."""

    def __str__(self) -> str:
        return format_datetime(self)


def _upload_time(pkg: LockedPackage) -> dt.datetime | None:
    """The package's ``upload-time`` as served (RFC 3339 text) as the TOML date-time PEP 751 wants."""
    if not pkg.upload_time:
        return None
    when = parse_datetime(pkg.upload_time)
    if when is None or when.tzinfo is None:
        raise LockFileError(f"{pkg.name} {pkg.version}: upload time {pkg.upload_time!r} is not an RFC 3339 date-time with a time zone")
    return _UploadTime(when.year, when.month, when.day, when.hour, when.minute, when.second, when.microsecond, tzinfo=dt.timezone.utc)


# -- render ------------------------------------------------------------------------------------
def _is_listed(pkg: LockedPackage) -> bool:
    """Whether a package becomes a ``[[packages]]`` entry: something for uv to install, or a kept
    package uv can find satisfied (its wheel and sha256 known)."""
    return pkg.action is not Action.KEEP or bool(pkg.url and pkg.sha256)


def kept_unlisted(packages: list[LockedPackage] | tuple[LockedPackage, ...]) -> list[str]:
    """The kept packages a pylock cannot list (no wheel URL or no sha256)."""
    return sorted(p.name for p in packages if p.action is Action.KEEP and not _is_listed(p))


KEPT_UNLISTED_WHY = (
    "kept (installed) but not in [[packages]]: PEP 751 lists a wheel with its sha256, and for these none is known "
    "(see reasons), so `uv pip sync` of this lock would uninstall them; use `uv pip install -r`, or relock online "
    "(with a snapshot: with the wheels in the wheel cache) to list them"
)


def kept_unlisted_reason(pkg: LockedPackage) -> str:
    """Why a kept package has no ``[[packages]]`` entry, as true as the plan knows it."""
    if not pkg.url:
        return f"no wheel of {pkg.name} {pkg.version} was found on its index (gone from it, or a build it never served)"
    return f"its index lists {pkg.filename or 'its wheel'} without a sha256, and the wheel could not be downloaded to hash it"


def _wheel(pkg: LockedPackage) -> PackageWheel:
    if not pkg.url:
        raise LockFileError(f"{pkg.name} {pkg.version} ({pkg.action.value}) has no wheel URL to lock")
    if not pkg.sha256:
        raise LockFileError(
            f"{pkg.name} {pkg.version}: no sha256 for {pkg.filename or strip_credentials(pkg.url)}",
            hint="PEP 751 requires a hash for every wheel: download the wheel to compute it, then write the lock",
        )
    url = strip_credentials(pkg.url)
    remote = "://" in url  # a wheel built here (--build) is a file in the wheel cache: a path (``wheelhouse`` exports it)
    return PackageWheel(
        name=pkg.filename or url.rsplit("/", 1)[-1].split("#")[0],
        url=url if remote else None,
        path=None if remote else url,
        size=pkg.size,
        upload_time=_upload_time(pkg),
        hashes={"sha256": pkg.sha256.lower()},
    )


def _index_of(pkg: LockedPackage, plan: LockPlan) -> str | None:
    """The simple-API base the file was found under (PEP 751), e.g. ``.../whl/nightly/cu130/``; none
    for a built wheel (a tool falling back to the index would fetch its wheel, built for another torch)."""
    if pkg.action is Action.BUILD:
        return None
    index = pkg.simple_index or plan.indexes.get(pkg.index)
    return strip_credentials(index) if index else None


def _package(pkg: LockedPackage, plan: LockPlan) -> Package:
    """The PEP 751 ``[[packages]]`` entry of a package uv installs."""
    try:
        requires_python = SpecifierSet(pkg.requires_python) if pkg.requires_python else None
    except InvalidSpecifier:
        raise LockFileError(f"{pkg.name} {pkg.version}: requires-python {pkg.requires_python!r} is not a version specifier") from None
    return Package(name=pkg.name, version=pkg.version, requires_python=requires_python, index=_index_of(pkg, plan), wheels=[_wheel(pkg)])


def _tool_package(pkg: LockedPackage) -> dict[str, Any]:
    """The codec's dict, less what is unset and, for a listed package, its file (``[[packages]]`` has it)."""
    entry = without_none(package_to_dict(pkg))
    if not entry["dependencies"]:
        del entry["dependencies"]
    if _is_listed(pkg):
        for key in FILE_KEYS:
            entry.pop(key, None)
    return entry


def _flashinfer_members(packages: list[LockedPackage]) -> list[str]:
    return [p.name for p in packages if p.name == "flashinfer" or p.name.startswith("flashinfer-")]


def _torch_pin(torch: LockedPackage) -> dict[str, Any]:
    pin: dict[str, Any] = {"version": str(torch.version), "action": torch.action.value}
    if torch.version.local:
        pin["local"] = torch.version.local
    pin["index"] = torch.index
    if torch.url:
        pin["url"] = torch.url
    return pin


def _flashinfer_group(plan: LockPlan, packages: list[LockedPackage]) -> dict[str, Any] | None:
    members = _flashinfer_members(packages)
    if plan.flashinfer_version is None and not members:
        return None
    return without_none({"version": str(plan.flashinfer_version) if plan.flashinfer_version is not None else None, "components": members})


def _tool_table(plan: LockPlan, packages: list[LockedPackage], *, name: str | None, command: str) -> dict[str, Any]:
    unlisted = kept_unlisted(packages)
    inputs = canonical_inputs(plan.inputs)
    return without_none(
        {
            "schema": SCHEMA,
            "name": name,
            "command": command,
            "inputs-digest": plan.inputs_digest or inputs_digest(plan.inputs),
            "target": without_none(target_to_dict(plan.target)),
            "torch": _torch_pin(plan.torch) if plan.torch is not None else None,
            "cuda-label": plan.cuda_label,
            "flashinfer": _flashinfer_group(plan, packages),
            "indexes": {k: plan.indexes[k] for k in sorted(plan.indexes)},
            "kept-unlisted": {
                "packages": unlisted,
                "why": KEPT_UNLISTED_WHY,
                "reasons": {p.name: kept_unlisted_reason(p) for p in packages if p.name in unlisted},
            }
            if unlisted
            else None,
            "notes": list(plan.notes),
            "overrides": [override_to_dict(o) for o in plan.overrides] or None,
            "inputs": {k: inputs[k] for k in sorted(inputs)},
            "packages": [_tool_package(p) for p in packages],
        }
    )


def render_pylock(plan: LockPlan, *, name: str | None, command: str) -> str:
    """The plan as a PEP 751 ``pylock.toml`` (deterministic: packages sorted by name), written
    through ``packaging.pylock``'s objects and validated by them."""
    if name is not None and not LOCK_NAME_RE.match(name):
        raise UsageError(f"bad lock name {name!r}", hint="a pylock name is non-empty and has no dots or slashes")
    packages = sorted_packages(plan)
    minor = _python_minor(plan.target.python)
    marker = target_marker(plan.target)
    lock = Pylock(
        lock_version=Version(LOCK_VERSION),
        created_by=TOOL,
        requires_python=SpecifierSet(f"=={minor}.*") if minor else None,
        environments=[_WrittenMarker(marker)] if marker else None,
        packages=[_package(p, plan) for p in packages if _is_listed(p)],  # [] when all are kept: PEP 751 wants it
        tool={TOOL: scrub(_tool_table(plan, packages, name=name, command=" ".join(command.split())))},
    )
    doc = _in_order(dict(lock.to_dict()))
    try:
        Pylock.from_dict(doc)  # what ``Pylock.validate`` does, on the dict we write
    except PylockValidationError as exc:
        raise LockFileError(f"the plan does not make a valid PEP 751 lock: {strip_credentials(' '.join(str(exc).split()))}") from None
    text = tomli_w.dumps(doc)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise LockFileError(f"cannot write a lone surrogate (U+{ord(exc.object[exc.start]):04X}) to a lock file") from None
    return text


# PEP 751's order of the keys we write (its examples' and the spec's), fixed here: the order
# ``packaging.pylock`` emits changed between its releases, and a relock must not rewrite a
# committed lock for key order alone. A key not named here follows, in the order it came.
_TOP_ORDER = ("lock-version", "environments", "requires-python", "extras", "dependency-groups", "default-groups", "created-by", "packages", "tool")
_PACKAGE_ORDER = ("name", "version", "marker", "requires-python", "dependencies", "index", "wheels", "attestation-identities", "tool")
_WHEEL_ORDER = ("name", "upload-time", "url", "path", "size", "hashes")


def _keys_in(order: Sequence[str], table: Mapping[str, Any]) -> dict[str, Any]:
    return {k: table[k] for k in order if k in table} | {k: v for k, v in table.items() if k not in order}


def _in_order(doc: Mapping[str, Any]) -> dict[str, Any]:
    """``doc`` with its keys, its packages' and their wheels' in ``_TOP_ORDER`` etc."""
    out = _keys_in(_TOP_ORDER, doc)
    out["packages"] = [_package_in_order(p) for p in out.get("packages", [])]
    return out


def _package_in_order(package: Mapping[str, Any]) -> dict[str, Any]:
    out = _keys_in(_PACKAGE_ORDER, package)
    if "wheels" in out:
        out["wheels"] = [_keys_in(_WHEEL_ORDER, w) for w in out["wheels"]]
    return out


# -- read --------------------------------------------------------------------------------------
def _decoded(r: LockReader, decode: Callable[..., T], raw: Mapping[str, Any], where: str) -> T:
    """``decode(raw, where)`` (a ``model.codec`` reader), its errors naming the file."""
    try:
        return decode(raw, where)
    except CodecError as exc:
        raise LockFileError(strip_credentials(f"{r.source}: {exc}")) from None


# PEP 751 sources other than wheels: installing any of them builds (runs the package's code) or
# takes whatever a folder or a repository holds at install time. A lock we install has wheels only.
SOURCE_KEYS = {
    "sdist": "an sdist (a build would run its code)",
    "vcs": "a version-control source (a build would run its code)",
    "directory": "a local directory (a build would run its code)",
    "archive": "an archive (a build would run its code)",
}
MAX_WHEEL_NAME = 255 - len(".metadata")  # a wheelhouse keeps <wheel>.metadata beside each wheel, in one file name
_SHA256 = re.compile(r"[0-9a-fA-F]{64}")


def _validated(r: LockReader, doc: Mapping[str, Any]) -> Pylock:
    """The PEP 751 part as ``packaging.pylock`` reads it (the one reader), its errors naming the
    file and, for an entry, its package."""
    try:
        return Pylock.from_dict(doc)
    except PylockValidationError as exc:
        said = " ".join(str(exc).split())
        named = re.match(r"Invalid wheel filename '([^']{1,300})'", said)
        if named is not None and is_variant_filename(named[1]):  # one a --wheel-variants plan may hold: said as such
            said += f": a variant wheel (PEP 825, a draft); {NOT_LOCKABLE}; {WAY_OUT}"
        raise r.fail("PEP 751", said + _package_named(doc, exc.context)) from None


def _package_named(doc: Mapping[str, Any], context: str | None) -> str:
    """`` (NAME)`` when ``context`` (``packages[3].wheels[0]``) is inside an entry that names its package."""
    m = re.match(r"packages\[(\d+)\]", context or "")
    packages = doc.get("packages")
    if m is None or not isinstance(packages, list) or int(m[1]) >= len(packages):
        return ""
    entry = packages[int(m[1])]
    name = entry.get("name") if isinstance(entry, Mapping) else None
    return f" ({name})" if isinstance(name, str) else ""


def _wheel_of(r: LockReader, wheel: PackageWheel, where: str) -> LockedWheel:
    """What we read of a wheel packaging validated, and what we ask beyond PEP 751."""
    sha256 = wheel.hashes.get("sha256")
    if sha256 is not None and not _SHA256.fullmatch(sha256):
        raise r.fail(where, f"sha256 {sha256!r} is not 64 hex digits")
    filename = wheel.filename
    if len(filename.encode("utf-8", "surrogatepass")) > MAX_WHEEL_NAME:
        raise r.fail(
            where, f"a wheel file name of {len(filename)} characters; no file system keeps one that long beside its .metadata ({MAX_WHEEL_NAME} bytes at most)"
        )
    location = wheel.url or wheel.path
    assert location is not None  # packaging: a wheel has one or the other
    return LockedWheel(
        filename=filename,
        url=location,
        sha256=sha256.lower() if sha256 else None,
        size=wheel.size,
        upload_time=format_datetime(wheel.upload_time) if wheel.upload_time else None,
    )


def _entry_of(r: LockReader, package: Package, n: int) -> LockedEntry:
    """An entry packaging validated, refused when it installs anything but wheels."""
    where = f"packages #{n} ({package.name})"
    sources = [what for key, what in SOURCE_KEYS.items() if getattr(package, key) is not None]
    if sources:
        raise r.fail(
            where,
            f"installs from {' and '.join(sources)}; resolve-gpu-stack installs wheels only",
            hint="lock it again with resolve-gpu-stack (its locks name a hashed wheel for every package); a lock with sources is never installed or passed",
        )
    wheels = tuple(_wheel_of(r, w, f"{where} wheel #{i}") for i, w in enumerate(package.wheels or (), 1))
    return LockedEntry(
        name=package.name,
        version=package.version,
        simple_index=package.index,
        wheels=wheels,
        requires_python=str(package.requires_python) if package.requires_python is not None else None,
        markers=(str(package.marker),) if package.marker is not None else (),
    )


def read_pylock(path: Path, text: str) -> LockedFile:
    """A pylock (ours or another tool's), read by ``packaging.pylock``; our tool table when it has one."""
    r = LockReader(path)
    lock = _validated(r, parse_toml(text, str(path), error=LockFileError))
    tool = r.get(lock.tool or {}, TOOL, dict, "tool")
    return LockedFile(
        path=path,
        format="pylock",
        created_by=lock.created_by,
        entries=tuple(_entry_of(r, package, n) for n, package in enumerate(lock.packages, 1)),
        requires_python=str(lock.requires_python) if lock.requires_python is not None else None,
        environments=tuple(str(e) for e in lock.environments or ()),
        **(_read_tool(r, tool) if tool is not None else {}),
    )


def _read_torch(r: LockReader, raw: Mapping[str, Any], where: str) -> LockedEntry:
    """The tool table's torch (its ``local`` is its version's local label, read to be checked)."""
    r.get(raw, "local", str, where)
    url = r.get(raw, "url", str, where)
    return LockedEntry(
        name=canonicalize_name("torch"),
        version=r.version(r.get(raw, "version", str, where, required=True), where),
        action=r.enum(Action, r.get(raw, "action", str, where, required=True), where),
        index=r.get(raw, "index", str, where, required=True),
        wheels=(LockedWheel(filename=url.rsplit("/", 1)[-1].split("#")[0], url=url, sha256=None),) if url else (),
    )


def _read_tool(r: LockReader, tool: Mapping[str, Any]) -> dict[str, Any]:
    where = f"tool.{TOOL}"
    schema = r.get(tool, "schema", str, where, required=True)
    if schema != SCHEMA:
        raise r.fail(where, f"schema {schema!r} is not {SCHEMA!r}")
    torch_raw = r.get(tool, "torch", dict, where)
    return {
        "pins": _read_pins(r, tool, where),
        "command": r.get(tool, "command", str, where, required=True),
        "inputs_digest": r.get(tool, "inputs-digest", str, where, required=True),
        "inputs": r.get(tool, "inputs", dict, where) or {},
        "target": _decoded(r, target_from_dict, r.get(tool, "target", dict, where, required=True), f"{where}.target"),
        "torch": _read_torch(r, torch_raw, f"{where}.torch") if torch_raw is not None else None,
        "cuda_label": r.get(tool, "cuda-label", str, where),
        **_read_flashinfer(r, r.get(tool, "flashinfer", dict, where) or {}, f"{where}.flashinfer"),
        "indexes": _all_strings(r, r.get(tool, "indexes", dict, where) or {}, f"{where}.indexes", "every index must be a URL string"),
        "notes": tuple(_all_strings(r, r.get(tool, "notes", list, where) or [], f"{where}.notes", "must be a list of strings")),
        "overrides": tuple(_decoded(r, override_from_dict, raw, f"{where}.overrides #{i + 1}") for i, raw in enumerate(r.tables(tool, "overrides", where))),
        "name": r.get(tool, "name", str, where),
    }


def _read_flashinfer(r: LockReader, group: Mapping[str, Any], where: str) -> dict[str, Any]:
    version = r.get(group, "version", str, where)
    return {
        "flashinfer_version": r.version(version, where) if version else None,
        "flashinfer_components": tuple(canonicalize_name(c) for c in (r.strings(group, "components", where) or ())),
    }


def _read_pins(r: LockReader, tool: Mapping[str, Any], where: str) -> tuple[LockedEntry, ...]:
    """The tool table's packages, each once."""
    pins = tuple(LockedEntry.of(_decoded(r, package_from_dict, raw, f"{where}.packages #{i + 1}")) for i, raw in enumerate(r.tables(tool, "packages", where)))
    if len({p.name for p in pins}) != len(pins):
        raise r.fail(where, "a package is listed twice")
    return pins


C = TypeVar("C", dict[str, Any], list[Any])


def _all_strings(r: LockReader, values: C, where: str, what: str) -> C:
    """``values`` (a table's values, or a list) when every one is a string."""
    if not all(isinstance(v, str) for v in (values.values() if isinstance(values, dict) else values)):
        raise r.fail(where, what)
    return values


# -- back to a plan ----------------------------------------------------------------------------
def _package_from(locked: LockedFile, pin: LockedEntry, entries: Mapping[NormalizedName, LockedEntry]) -> LockedPackage:
    """The tool table's package, with its wheel from ``[[packages]]`` unless it is kept."""
    where = f"{locked.path}: {pin.name}"
    pkg = pin.planned
    assert pkg is not None
    entry = entries.get(pin.name)
    if pkg.action is Action.KEEP and entry is None:
        return replace(pkg, filename=pkg.url.rsplit("/", 1)[-1]) if pkg.url and not pkg.filename else pkg
    if entry is None:
        raise LockFileError(f"{where}: {pkg.action.value} package without a [[packages]] entry")
    if entry.version != pkg.version:
        raise LockFileError(f"{where}: [[packages]] says {entry.version}, the tool table says {pkg.version}")
    if len(entry.wheels) != 1:
        raise LockFileError(f"{where}: expected exactly one wheel, found {len(entry.wheels)}")
    wheel = entry.wheels[0]
    simple = entry.simple_index if entry.simple_index != locked.indexes.get(pkg.index) else None  # the logical base: not recorded
    return replace(
        pkg,
        url=wheel.url,
        filename=wheel.filename,
        sha256=wheel.sha256,
        size=wheel.size,
        upload_time=wheel.upload_time,
        requires_python=entry.requires_python,
        simple_index=simple,
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
        overrides=locked.overrides,
    )


__all__ = ["KEPT_UNLISTED_WHY", "LOCK_NAME_RE", "kept_unlisted", "SCHEMA", "TOOL", "plan_from_lock", "read_pylock", "render_pylock", "target_marker"]
