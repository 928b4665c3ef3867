"""Write lock files: PEP 751 ``pylock.toml`` for uv, and a pip constraints file.

Pure rendering plus one atomic-write helper; no network. Credentials (``user:pass@`` in any URL)
never reach a file: every string is scrubbed before it is written.

pylock layout: one ``[[packages]]`` entry per package that has a wheel to install. A *kept* package
(already installed, e.g. a nightly torch) is not listed there, since uv would reinstall it; it is
recorded in ``[tool.resolve-gpu-stack]`` with everything else uv does not need (couplings, the
torch pin, the FlashInfer group, the resolver inputs and their digest).

Reading lives in ``lockread`` and is re-exported here: ``read_lock``, ``plan_from_lock``.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from ..errors import LockFileError, UsageError
from ..model import Action, LockedPackage, LockPlan, TargetSummary
from .format import (
    CONSTRAINTS_HEADER,
    INDEX_COMMENT,
    LOCK_VERSION,
    SCHEMA,
    TOOL,
    canonical_inputs,
    inputs_digest,
    parse_rfc3339,
    scrub,
    strip_credentials,
    toml_string,
    toml_table,
    toml_value,
)
from .read import LockedEntry, LockedFile, LockedWheel, Pin, TorchPin, plan_from_lock, read_lock

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


# -- pylock ------------------------------------------------------------------------------------


def _check_packages(plan: LockPlan) -> list[LockedPackage]:
    seen: set[str] = set()
    for pkg in plan.packages:
        if pkg.name in seen:
            raise LockFileError(f"the plan lists {pkg.name} twice")
        seen.add(pkg.name)
    return sorted(plan.packages, key=lambda p: p.name)


def _is_listed(pkg: LockedPackage) -> bool:
    """Whether a package becomes a ``[[packages]]`` entry (something for uv to install)."""
    return pkg.action is not Action.KEEP


def _wheel_table(pkg: LockedPackage) -> dict[str, Any]:
    if not pkg.url:
        raise LockFileError(f"{pkg.name} {pkg.version} ({pkg.action.value}) has no wheel URL to lock")
    if not pkg.sha256:
        raise LockFileError(
            f"{pkg.name} {pkg.version}: no sha256 for {pkg.filename or strip_credentials(pkg.url)}",
            hint="PEP 751 requires a hash for every wheel: download the wheel to compute it, then write the lock",
        )
    wheel: dict[str, Any] = {"name": pkg.filename or pkg.url.rsplit("/", 1)[-1].split("#")[0], "url": pkg.url}
    if pkg.size is not None:
        wheel["size"] = pkg.size
    if pkg.upload_time:
        wheel["upload-time"] = parse_rfc3339(pkg.upload_time, f"{pkg.name} {pkg.version}")
    wheel["hashes"] = {"sha256": pkg.sha256.lower()}
    return wheel


def _tool_package(pkg: LockedPackage) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": pkg.name,
        "version": str(pkg.version),
        "action": pkg.action.value,
        "coupling": pkg.coupling.value,
        "index": pkg.index,
        "reason": pkg.reason,
    }
    if pkg.installed_version is not None:
        entry["installed-version"] = str(pkg.installed_version)
    if pkg.dependencies:
        entry["dependencies"] = list(pkg.dependencies)
    if not _is_listed(pkg):  # the file fields of a kept package live only here
        for key, value in (("url", pkg.url), ("filename", pkg.filename), ("sha256", pkg.sha256), ("size", pkg.size),
                           ("upload-time", pkg.upload_time), ("requires-python", pkg.requires_python)):
            if value is not None:
                entry[key] = value
    return entry


def _flashinfer_members(packages: list[LockedPackage]) -> list[str]:
    return [p.name for p in packages if p.name == "flashinfer" or p.name.startswith("flashinfer-")]


def _tool_table(plan: LockPlan, packages: list[LockedPackage], *, name: str | None, command: str) -> dict[str, Any]:
    target: dict[str, Any] = {"python": plan.target.python, "platform": plan.target.platform}
    if plan.target.cuda is not None:
        target["cuda"] = plan.target.cuda
    tool: dict[str, Any] = {"schema": SCHEMA}
    if name is not None:
        tool["name"] = name
    tool["command"] = command
    tool["inputs-digest"] = plan.inputs_digest or inputs_digest(plan.inputs)
    tool["target"] = target
    torch = plan.torch
    if torch is not None:
        pin: dict[str, Any] = {"version": str(torch.version), "action": torch.action.value}
        if torch.version.local:
            pin["local"] = torch.version.local
        pin["index"] = torch.index
        if torch.url:
            pin["url"] = torch.url
        tool["torch"] = pin
    if plan.cuda_label is not None:
        tool["cuda-label"] = plan.cuda_label
    members = _flashinfer_members(packages)
    if plan.flashinfer_version is not None or members:
        group: dict[str, Any] = {}
        if plan.flashinfer_version is not None:
            group["version"] = str(plan.flashinfer_version)
        group["components"] = members
        tool["flashinfer"] = group
    tool["indexes"] = {k: plan.indexes[k] for k in sorted(plan.indexes)}
    tool["notes"] = list(plan.notes)
    return tool


def render_pylock(plan: LockPlan, *, name: str | None, command: str) -> str:
    """The plan as a PEP 751 ``pylock.toml`` (deterministic: packages sorted by name)."""
    if name is not None and not _LOCK_NAME_RE.match(name):
        raise UsageError(f"bad lock name {name!r}", hint="a pylock name is non-empty and has no dots or slashes")
    packages = _check_packages(plan)
    lines = toml_table(None, {"lock-version": LOCK_VERSION, "created-by": TOOL})
    minor = _python_minor(plan.target.python)
    if minor:
        lines.append(f"requires-python = {toml_string(f'=={minor}.*')}")
    marker = target_marker(plan.target)
    if marker:
        lines.append(f"environments = {toml_value([marker])}")
    if not any(_is_listed(p) for p in packages):
        lines.append("packages = []")  # required by PEP 751 even when everything is kept
    for pkg in packages:
        if not _is_listed(pkg):
            continue
        entry: dict[str, Any] = {"name": pkg.name, "version": str(pkg.version)}
        if pkg.index in plan.indexes:
            entry["index"] = plan.indexes[pkg.index]
        if pkg.requires_python:
            entry["requires-python"] = pkg.requires_python
        wheel = _wheel_table(pkg)
        lines += ["", *toml_table("[[packages]]", scrub(entry)), "", *toml_table("[[packages.wheels]]", scrub(wheel))]
    tool = scrub(_tool_table(plan, packages, name=name, command=" ".join(command.split())))
    lines += ["", *toml_table(f"[tool.{TOOL}]", tool)]
    inputs = scrub(canonical_inputs(plan.inputs))
    lines += ["", *toml_table(f"[tool.{TOOL}.inputs]", {k: inputs[k] for k in sorted(inputs)})]
    for pkg in packages:
        lines += ["", *toml_table(f"[[tool.{TOOL}.packages]]", scrub(_tool_package(pkg)))]
    return "\n".join(lines) + "\n"


# -- constraints -------------------------------------------------------------------------------


def _one_line(text: str) -> str:
    return " ".join(strip_credentials(text).split())


def _target_line(target: TargetSummary) -> str:
    return f"# target: python={target.python or 'unknown'} platform={target.platform or 'unknown'} cuda={target.cuda or 'none'}"


def render_constraints(plan: LockPlan, *, command: str) -> str:
    """The plan as a pip/uv constraints file: ``name==version`` for every package, kept ones too.

    No index option lines, ever: pip applies ``--index-url`` & co. from a ``-c`` file globally.
    """
    packages = _check_packages(plan)
    lines = [
        CONSTRAINTS_HEADER,
        f"#    {_one_line(command)}",
        f"# inputs-digest: {plan.inputs_digest or inputs_digest(plan.inputs)}",
        _one_line(_target_line(plan.target)),
        INDEX_COMMENT,
    ]
    lines += [f"#   {_one_line(k)}: {_one_line(plan.indexes[k])}" for k in sorted(plan.indexes)]
    lines += [f"# note: {_one_line(note)}" for note in plan.notes]
    lines.append("")
    for pkg in packages:
        lines.append(f"{pkg.name}=={pkg.version}  # index={pkg.index} action={pkg.action.value} coupling={pkg.coupling.value}")
    return "\n".join(lines) + "\n"


# -- writing -----------------------------------------------------------------------------------

_LOCK_NAME_RE = re.compile(r"^[^./\\\s]+$")
_PYLOCK_FILE_RE = re.compile(r"^pylock(?:\.(?P<name>[^.]*))?\.toml$")


def lock_format(path: Path) -> tuple[str, str | None]:
    """``("pylock", name)`` or ``("constraints", None)`` from the file name, else ``UsageError``."""
    m = _PYLOCK_FILE_RE.match(path.name)
    if m and (m.group("name") is None or _LOCK_NAME_RE.match(m.group("name"))):
        return "pylock", m.group("name")
    if path.name.endswith(".txt") and len(path.name) > len(".txt") and not path.name.startswith("pylock."):
        return "constraints", None
    raise UsageError(
        f"{path}: not a lock file name; accepted: pylock.toml or pylock.<name>.toml (PEP 751, <name> "
        "non-empty and without dots), or *.txt for a constraints file",
        hint="for example pylock.gpu.toml or constraints.txt",
    )


def atomic_write(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` via a temp file in the same folder, fsync and ``os.replace``.

    On any failure the old file is untouched and the temp file is gone.
    """
    data = text.encode("utf-8")
    directory = path.parent
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o644
    except OSError as exc:
        raise LockFileError(f"cannot write {path}: {exc.strerror or exc}") from exc
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise LockFileError(f"cannot write {path}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise LockFileError(f"cannot write {path}: {exc.strerror or exc}") from exc
        raise
    _fsync_dir(directory)
    return path


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_lock(plan: LockPlan, path: Path, *, command: str) -> Path:
    """Render the plan in the format the file name asks for and write it atomically."""
    kind, name = lock_format(path)
    text = render_pylock(plan, name=name, command=command) if kind == "pylock" else render_constraints(plan, command=command)
    return atomic_write(path, text)


__all__ = [
    "LockedEntry",
    "LockedFile",
    "LockedWheel",
    "Pin",
    "TorchPin",
    "atomic_write",
    "canonical_inputs",
    "inputs_digest",
    "lock_format",
    "plan_from_lock",
    "read_lock",
    "render_constraints",
    "render_pylock",
    "strip_credentials",
    "target_marker",
    "write_lock",
]
