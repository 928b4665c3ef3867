"""Checking committed lock files: do they parse, hold every invariant, match the config, and can
their URLs still be downloaded?

No network and no resolver here: every check reads the lock file, the bundled index definitions and
(for freshness) the digest the config gives for the lock's target. ``verify_files`` and
``drift`` take a ``Finder`` (a recorded snapshot, or the live indexes with ``check --online``).

Each problem is a ``Finding`` naming the file and, where there is one, the package. Errors fail the
check; warnings (a nightly past the index's retention, drift) do not.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from ..data.definitions import Definitions, RouteContext
from ..errors import LockFileError, UsageError
from ..model import Action, BuildProvenance, Coupling, IndexFile, LockedPackage, LockPlan, SourceDist, Target, TargetSummary
from ..model.channel import flashinfer_channel, torch_channel
from ..model.inputs import canonical_inputs
from ..rules.fit import TargetFit
from ..rules.invariants import flashinfer_alignment, owner_of, plan_violations, synthetic_rows
from ..urls import origin, strip_credentials
from .files import read_lock
from .locked import LockedEntry, LockedFile, Pin
from .pylock import plan_from_lock
from .select import select
from .uvproject import LISTS, RECORD, TOOL, ExportRecord, RecordedTarget, UvLockedPackage, locked_for, read_export, read_uv_lock

if TYPE_CHECKING:
    from ..index.finder import Finder
    from ..model.abi import AbiVerdict

ERROR, WARNING, NOTE = "error", "warning", "note"

# What a finding is about, where ``install --lock`` treats it apart (None: the lock's own promises).
TARGET = "target"  # the target's Python or platform is not the lock's: ``--force-target`` relaxes it
INSTALLED = "installed"  # what the target has installed is not what the lock keeps or moves from
LOCATION = "location"  # where a wheel is fetched from (a wheelhouse moves every wheel; the sha256 holds)


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    level: str  # error | warning | note
    path: Path
    message: str
    package: str | None = None
    hint: str | None = None
    rule: str | None = None  # TARGET, INSTALLED, LOCATION or None

    def render(self, shown: str | None = None) -> str:
        where = shown or str(self.path)
        what = f"{self.package}: " if self.package else ""
        text = f"{self.level}: {where}: {what}{self.message}"
        return text + (f"\n  {self.hint}" if self.hint else "")


@dataclass(frozen=True, slots=True, kw_only=True)
class Expected:
    """What the current config says a lock file should have been made from."""

    target: str
    inputs: Mapping[str, object]
    digest: str
    command: str  # regenerates the file (run in ``folder``)
    folder: Path


@dataclass(frozen=True, slots=True, kw_only=True)
class Checked:
    """One file's result; ``plan`` is what the file says (None if it could not be read)."""

    path: Path
    findings: tuple[Finding, ...]
    plan: LockPlan | None = None
    locked: LockedFile | None = None


def regenerate_hint(expected: Expected | None, cwd: Path | None = None) -> str | None:
    if expected is None:
        return None
    here = (cwd or Path.cwd()).resolve()
    prefix = "" if expected.folder.resolve() == here else f"cd {expected.folder} && "
    return f"regenerate: {prefix}{expected.command}"


# -- one file ------------------------------------------------------------------------------------


def check_lock(
    path: Path,
    defs: Definitions,
    *,
    expected: Expected | None = None,
    today: dt.date | None = None,
    target: Target | None = None,
    read: Callable[[Path], LockedFile] = read_lock,
) -> Checked:
    """Every offline check of one lock file (pylock or constraints).

    ``target``: the interpreter the lock is about to be installed into (``install --lock``); its
    markers, tags and Python decide what the lock installs (``select``), and what it has installed
    must be what the lock keeps and moves from. Without one, the lock's own declared target decides.
    ``read``: how the file is read (``read_lock``; a caller that read it already passes its memo).
    """
    today = today or dt.date.today()
    try:
        locked = read(path)
    except LockFileError as err:
        return Checked(path=path, findings=(_error(path, _without_path(str(err), path), hint=regenerate_hint(expected)),))
    if not locked.generated:
        what = "no [tool.resolve-gpu-stack] table" if locked.format == "pylock" else "no '# inputs-digest:' header"
        return Checked(
            path=path,
            locked=locked,
            findings=(_error(path, f"{what}: not written by resolve-gpu-stack, so there is nothing to check it against", hint=regenerate_hint(expected)),),
        )
    defs = defs.with_recorded_package_indexes(locked.indexes)  # the routing the lock was made with (--package-index)
    if locked.format == "pylock":
        findings, plan = _pylock_findings(path, locked, defs)
    else:
        findings, plan = _constraints_findings(path, locked, defs)
    if plan is not None:
        findings += plan_findings(path, locked, plan, defs, expected=expected, today=today, target=target)
    findings += freshness_findings(path, locked, expected)
    return Checked(path=path, findings=tuple(findings), plan=plan, locked=locked)


def plan_findings(
    path: Path, locked: LockedFile, plan: LockPlan, defs: Definitions, *, expected: Expected | None, today: dt.date, target: Target | None
) -> list[Finding]:
    """What the plan a lock file holds must keep (``check_lock``, once the file reads as a plan)."""
    inputs = locked.inputs if locked.inputs else (expected.inputs if expected else {})
    hint = regenerate_hint(expected)
    findings = [
        _error(path, v.message, package=v.package, hint=hint)
        for v in plan_violations(plan, defs, torch_floor=torch_floor(inputs), require_hashes=locked.format == "pylock")
    ]
    findings += kept_torch_findings(path, plan, inputs, expected)
    findings += torch_move_findings(path, plan, inputs, expected)
    if locked.format == "pylock":
        findings += target_findings(path, locked, plan, target)
    if target is not None:
        findings += installed_findings(path, plan, target)
    findings += [
        _error(
            path,
            "its sha256 is a stand-in from the reconstructed part of a snapshot, not the file's digest: installing it will fail",
            package=p.name,
            hint=hint,
        )
        for p in synthetic_rows(plan.packages)
    ]
    findings += retention_findings(path, plan.packages, defs, today, expected)
    findings += abi_findings(path, plan, locked.inputs, expected)
    return findings


def abi_findings(path: Path, plan: LockPlan, inputs: Mapping[str, Any], expected: Expected | None = None) -> list[Finding]:
    """Every compiled wheel's recorded ABI verdict must hold for the lock's torch and CUDA
    (``rules.abi.recorded_verdict_fails``); a lock without verdicts (written before they were
    recorded) is held to the torch its torch-ABI rows were built for. A failure is an error, unless
    the lock's inputs record the user's word (``abi-mismatch = "warn"``): then a warning."""
    out: list[Finding] = []
    for pkg in plan.packages:
        message = _abi_problem(pkg, plan.torch) if pkg.action is not Action.KEEP else None
        if message is None:
            continue
        if inputs.get("abi-mismatch") == "warn":
            out.append(Finding(level=WARNING, path=path, message=message + " (locked with --abi-mismatch warn)", package=pkg.name))
        else:
            hint = regenerate_hint(expected) or f"regenerate the lock with --without {pkg.name}, or with --abi-mismatch warn to accept it"
            out.append(_error(path, message, package=pkg.name, hint=hint))
    return out


def _abi_problem(pkg: LockedPackage, torch: LockedPackage | None) -> str | None:
    """Why ``pkg`` cannot be shown to run with the lock's ``torch``: its recorded verdict fails, its
    scan did not finish, or (no verdict recorded) a torch-ABI wheel built for another torch."""
    version = torch.version if torch is not None else None
    if pkg.abi is not None:
        return _verdict_problem(pkg.abi, version)
    if pkg.coupling is Coupling.UNKNOWN:
        return "compiled code whose scan did not finish: it cannot be shown to run with the lock's torch"
    if pkg.coupling is Coupling.TORCH_ABI and (pkg.abi_mismatch or _built_for_another(pkg.built_for, version)):
        built = f"built for torch {pkg.built_for}" if pkg.built_for else "built for a torch nothing names"
        return f"torch-ABI wheel {built}, the lock's torch is {version or 'unknown'}: it would fail to import (undefined symbol)"
    return None


def _verdict_problem(abi: AbiVerdict, torch: Version | None) -> str | None:
    """Why a recorded ABI verdict does not hold for ``torch`` (and its CUDA label's major)."""
    from ..model.cuda import CudaLabel
    from ..rules.abi import recorded_verdict_fails

    label = CudaLabel.of_torch(torch)
    why = recorded_verdict_fails(abi, torch, label.major if label else None)
    return f"cannot be shown to run with the lock's torch: {why}" if why else None


def _built_for_another(built_for: str | None, torch: Version | None) -> bool:
    """Whether a wheel says it was built for a torch that is not ``torch``."""
    return built_for is not None and torch is not None and not _fits(built_for, torch)


def _fits(built_for: str, torch: Version) -> bool:
    """Whether a build for ``built_for`` (a version, or an A.B series) is for ``torch``."""
    want = built_for.removesuffix(".*")
    public = torch.public
    return public == want or public.startswith(want + ".")


def _error(path: Path, message: str, *, package: str | None = None, hint: str | None = None, rule: str | None = None) -> Finding:
    return Finding(level=ERROR, path=path, message=message, package=package, hint=hint, rule=rule)


def _without_path(message: str, path: Path) -> str:
    """A LockFileError message names the file; the finding names it once already."""
    return message[len(str(path)) + 2 :] if message.startswith(f"{path}: ") else message


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
        _error(
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
    lock was made for, and only as far as its inputs allow: lowered only with ``allow-downgrade``,
    moved to another CUDA build only when its ``cuda`` input asks for that label."""
    torch, installed = plan.torch, inputs.get("installed-torch")
    if torch is None or torch.action in (Action.KEEP, Action.INSTALL):
        return []
    broken = (
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
    return [_error(path, message, package="torch", hint=regenerate_hint(expected)) for failed, message in broken if failed]


def target_findings(path: Path, locked: LockedFile, plan: LockPlan, target: Target | None) -> list[Finding]:
    """What the lock installs on ``target`` (default: the lock's own declared target), as uv
    would see it (``select``): the target's Python and platform fit (``TARGET``), and every package
    of the lock's plan that has a ``[[packages]]`` entry is one that applies there."""
    if target is None:
        target = _declared(plan.target.python, plan.target.platform)
        if target is None:
            return [
                Finding(
                    level=WARNING,
                    path=path,
                    message=f"the lock's target ({plan.target.python}, {plan.target.platform}) is not one this tool can describe: its markers and wheel tags were not checked",
                    rule=TARGET,
                )
            ]
    chosen = select(locked, target)
    hint = f"lock for {target.describe()}, or install it on the target the lock was made for"
    out = [_error(path, p.message, package=p.package, hint=hint, rule=TARGET) for p in chosen.misfits]
    out += [_error(path, p.message, package=p.package) for p in chosen.errors]
    skipped = set(chosen.skipped).difference(chosen.wheels)  # a marker skips it and no other entry of it installs a wheel
    markers = {e.name: e.marker for e in locked.entries if e.name in skipped}
    for pkg in plan.packages:
        if pkg.name in skipped:
            marker = markers[pkg.name]
            out.append(
                _error(
                    path,
                    f"its [[packages]] marker ({marker}) excludes {target.describe()}, so uv would skip it; the lock's plan has it ({pkg.action.value} {pkg.version})",
                    package=pkg.name,
                )
            )
    return out


def _declared(python: str, platform: str) -> Target | None:
    """The target a lock or an export records, as a declared target (None when it is not one this
    tool can declare: a probed target's platform, a malformed version)."""
    from ..model.declared import declared_target

    try:
        return declared_target(python, platform)
    except (ValueError, UsageError):
        return None


def installed_findings(path: Path, plan: LockPlan, target: Target) -> list[Finding]:
    """What ``target`` has installed against what the lock keeps and moves from (``INSTALLED``):
    every kept package exactly at its locked version, and a torch the lock moves still the one it
    was made for (the lock's no-downgrade promise is about that torch). Nothing relaxes these."""
    out = []
    hint = "lock for this interpreter as it is (a lock never changes the torch it was not made for)"
    for pkg in plan.packages:
        now = target.installed.get(pkg.name)
        shown = now if now is not None else "not installed"
        if pkg.action is Action.KEEP and now != pkg.version:
            out.append(
                _error(path, f"the lock keeps the installed {pkg.name} {pkg.version}; here {pkg.name} is {shown}", package=pkg.name, hint=hint, rule=INSTALLED)
            )
        elif pkg.action is not Action.KEEP and pkg.name == "torch" and now not in (pkg.installed_version, pkg.version):
            was = pkg.installed_version or "nothing"
            out.append(_error(path, f"the lock moves torch from {was} to {pkg.version}; here torch is {shown}", package=pkg.name, hint=hint, rule=INSTALLED))
    return out


def _pylock_findings(path: Path, locked: LockedFile, defs: Definitions) -> tuple[list[Finding], LockPlan | None]:
    counts = Counter(e.name for e in locked.entries)  # one pass: a 100k-row lock is checked in linear time
    findings = [_error(path, f"has {counts[name]} [[packages]] entries", package=name) for name in sorted(n for n, c in counts.items() if c > 1)]
    if not locked.inputs_match_digest:
        findings.append(_error(path, "the recorded inputs do not match the recorded inputs-digest: the file was edited by hand"))
    findings += credential_findings(path, locked)
    try:
        plan = plan_from_lock(locked)
    except LockFileError as err:
        return [*findings, _unplanned(path, locked, err)], None
    entries = {e.name: e for e in locked.entries}
    for pkg in plan.packages:
        if pkg.action is Action.BUILD:  # built here: its provenance is checked, not an index URL
            findings += build_findings(path, pkg, plan, locked, defs)
        else:
            findings += _file_findings(path, pkg, locked, defs, entries.get(pkg.name))
    findings += kept_unlisted_findings(path, plan, entries)
    return findings, plan


def _unplanned(path: Path, locked: LockedFile, err: LockFileError) -> Finding:
    """Why a pylock is not a plan, naming the package when the error starts with one of its pins."""
    text = _without_path(str(err), path)
    head, sep, rest = text.partition(": ")
    package = head if sep and canonicalize_name(head) == head and locked.pin(head) else None
    return _error(path, rest if package else text, package=package)


def kept_unlisted_findings(path: Path, plan: LockPlan, entries: Mapping[Any, Any]) -> list[Finding]:
    """A warning for each kept package the pylock could not list (no wheel with a sha256): ``uv pip
    sync`` of the lock would uninstall it."""
    names = sorted(p.name for p in plan.packages if p.action is Action.KEEP and p.name not in entries)
    if not names:
        return []
    return [
        Finding(
            level=WARNING,
            path=path,
            package=name,
            message="kept but not listed in [[packages]] (no wheel with a sha256 is known for it, or it is gone from the index): `uv pip sync` of this lock would uninstall it",
            hint="apply this lock with `uv pip install -r`, or relock online (or with the wheel in the wheel cache) so that it is listed",
        )
        for name in names
    ]


def _file_findings(path: Path, pkg: LockedPackage, locked: LockedFile, defs: Definitions, entry: LockedEntry | None) -> list[Finding]:
    """The wheel a package entry points at must be that package, from its index's base and hosts."""
    out = [_error(path, problem, package=pkg.name) for problem in (_wheel_problem(pkg)[0], _entry_index_problem(pkg, locked, entry)) if problem]
    base, index = locked.indexes.get(pkg.index), defs.indexes.get(pkg.index)
    if pkg.url and index is not None and base:
        problem = wheel_url_problem(pkg.url, base, index.hosts)
        if problem:
            out.append(
                _error(
                    path,
                    f"its wheel URL {problem}: {strip_credentials(pkg.url)}",
                    package=pkg.name,
                    hint=f"the {pkg.index} index serves files from {base} and {', '.join(index.hosts) or 'no other host'}",
                    rule=LOCATION,
                )
            )
    return out


def _wheel_problem(pkg: LockedPackage) -> tuple[str | None, frozenset[Tag]]:
    """(what is wrong with the name of the package's wheel file: not a wheel's, or another
    package's or version's; its tags, none when it is not a wheel's name)."""
    if not pkg.filename:
        return None, frozenset()
    try:
        name, version, _, tags = parse_wheel_filename(pkg.filename)
    except InvalidWheelFilename:
        return f"{pkg.filename!r} is not a wheel file name", frozenset()
    if name != pkg.name or version != pkg.version:
        return f"the lock says {pkg.version}, but its wheel {pkg.filename} is {name} {version}", tags
    return None, tags


def _entry_index_problem(pkg: LockedPackage, locked: LockedFile, entry: LockedEntry | None) -> str | None:
    """A ``[[packages]]`` index that is neither the package's recorded index nor a folder below it."""
    base = locked.indexes.get(pkg.index)
    if entry is None or base is None or entry.index is None or _below(entry.index, base):
        return None
    return f"[[packages]] index {strip_credentials(entry.index)} is not the {pkg.index} index ({base}) it is recorded as coming from, nor a folder below it"


def build_findings(path: Path, pkg: LockedPackage, plan: LockPlan, locked: LockedFile, defs: Definitions) -> list[Finding]:
    """A wheel built from its sdist (``--build``): instead of looking it up on an index, its
    provenance must hold: the sdist from the index that owns the package (https, its sha256), built
    against the lock's own torch, for the lock's Python, platform and CUDA; the wheel of that
    package and version, with a tag that fits the target."""
    sdist, built = pkg.sdist, pkg.provenance
    warnings: list[str] = []
    hint = "lock it again with --build " + pkg.name
    if sdist is None or built is None:
        problems = ["a build row without its sdist and provenance ([tool.resolve-gpu-stack] packages: sdist, built)"]
    else:
        if sdist.origin is not None:  # a source tree (--build 'NAME @ URL'): lock/check_sources.py
            from .check_sources import relock_reference, source_problems

            source, warnings = source_problems(sdist)
            hint = f"lock it again with --build '{pkg.name} @ {relock_reference(sdist)}'"
        else:
            source = _sdist_problems(pkg, sdist, locked, defs)
        problems = [*source, *_provenance_problems(built, plan), *_built_wheel_problems(pkg, plan.target)]
    return [_error(path, problem, package=pkg.name, hint=hint) for problem in problems] + [
        Finding(level=WARNING, path=path, package=pkg.name, message=w) for w in warnings
    ]


def _sdist_problems(pkg: LockedPackage, sdist: SourceDist, locked: LockedFile, defs: Definitions) -> list[str]:
    """The sdist a wheel was built from: from its index's own places, with a sha256."""
    base, index = locked.indexes.get(pkg.index), defs.indexes.get(pkg.index)
    problem = (
        wheel_url_problem(sdist.url, base, index.hosts) if base and index is not None else f"comes from the {pkg.index} index, which the lock does not record"
    )
    out = [f"its sdist URL {problem}: {strip_credentials(sdist.url)}"] if problem else []
    if not (sdist.sha256 and re.fullmatch(r"[0-9a-f]{64}", sdist.sha256.lower())):
        out.append(f"its sdist {sdist.filename} has no sha256: the build's input cannot be verified")
    return out


def _provenance_problems(built: BuildProvenance, plan: LockPlan) -> list[str]:
    """A build's record against the lock: its torch, and the target's Python, platform and CUDA."""
    torch = plan.torch
    out = []
    if torch is None or built.torch != str(torch.version):
        out.append(f"built against torch {built.torch}, but the lock's torch is {torch.version if torch else 'none'}")
    target = plan.target
    out += [
        f"built for {what} {recorded or 'none'}, the lock's target has {want or 'none'}"
        for what, recorded, want in (("Python", built.python, target.python), ("platform", built.platform, target.platform), ("CUDA", built.cuda, target.cuda))
        if recorded != want
    ]
    if not built.command:
        out.append("its provenance records no build command")
    return out


def _built_wheel_problems(pkg: LockedPackage, target: TargetSummary) -> list[str]:
    """The built wheel is the package's, at its version, with a tag of the target's."""
    problem, tags = _wheel_problem(pkg)
    if not tags:  # no wheel named, or not a wheel's name
        return [problem] if problem else []
    declared = _declared(target.python, target.platform)  # None: a target this tool cannot declare, its tags are not judged here
    fits = declared is None or TargetFit(declared).rank_of(tags) is not None
    unfit = None if fits else f"its wheel {pkg.filename} fits no tag of Python {target.python} on {target.platform}"
    return [p for p in (problem, unfit) if p]


def wheel_url_problem(url: str, base: str, hosts: Iterable[str]) -> str | None:
    """Why a locked wheel URL is not one its index (at ``base``, sending files to ``hosts``) gives,
    or None: https on the index's own origin or a listed host; plain http only on loopback or on
    the index's own (plain http) origin."""
    from ..net.urlpolicy import is_loopback

    try:
        parts = urlsplit(url)
        here, own = origin(url), origin(base)
    except ValueError:
        return "is not a URL"
    if parts.scheme not in ("http", "https"):
        return f"is a {parts.scheme or 'relative'} URL, not https"
    if parts.scheme == "http" and here != own and not is_loopback(here[1]):
        return "is plain http to a host that is not loopback"
    if here == own or "*" in hosts or (here[1] in hosts and parts.scheme == "https"):
        return None
    return f"is on {here[1]}:{here[2]}, which the index does not send files to"


def _below(url: str, base: str) -> bool:
    """``url`` is ``base`` or a folder under it (a simple-API base below the logical index)."""
    return url == base or (url.startswith(base.rstrip("/") + "/") and "?" not in url and "#" not in url)


def credential_findings(path: Path, locked: LockedFile) -> list[Finding]:
    """Any URL in the file with a user:password part (the message never repeats the secret)."""
    out: list[Finding] = []

    def look(text: str | None, package: str | None, what: str) -> None:
        if text and strip_credentials(text) != text:
            out.append(
                _error(
                    path,
                    f"{what} carries credentials: {strip_credentials(text)}",
                    package=package,
                    hint="credentials never belong in a lock file; rotate them if this was committed",
                )
            )

    for entry in locked.entries:
        look(entry.index, entry.name, "[[packages]] index URL")
        for wheel in entry.wheels:
            look(wheel.url, entry.name, "wheel URL")
    for pin in locked.pins:
        look(pin.package.url if pin.package else None, pin.name, "wheel URL")
    for name, url in locked.indexes.items():
        look(url, None, f"index {name!r}")
    look(locked.command, None, "the recorded command")
    for note in locked.notes:
        look(note, None, "a note")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return out
    if not out and strip_credentials(text) != text:
        out.append(_error(path, "a URL in the file carries credentials", hint="credentials never belong in a lock file; rotate them if this was committed"))
    return out


def _constraints_findings(path: Path, locked: LockedFile, defs: Definitions) -> tuple[list[Finding], LockPlan | None]:
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
        cuda_label=jit.version.local if jit is not None else None,
    )
    packages = tuple(_package_from_pin(p, defs, skeleton) for p in locked.pins)
    return credential_findings(path, locked), replace(skeleton, packages=packages, inputs=dict(locked.inputs), inputs_digest=locked.inputs_digest or "")


def _constraints_cuda(locked: LockedFile) -> str | None:
    """The CUDA label of a constraints file's target: recorded, else its torch pin's local label."""
    torch = locked.pin("torch")
    if locked.target is not None and locked.target.cuda is not None:
        return locked.target.cuda
    local = torch.version.local if torch is not None else None
    return local if local and local.startswith("cu") else None


def _package_from_pin(pin: Pin, defs: Definitions, plan: LockPlan) -> LockedPackage:
    coupling = pin.coupling or defs.coupling(pin.name, pin.version)[0]
    index = pin.index or ("installed" if pin.action is Action.KEEP else owner_of(defs, pin.name, pin.version, plan) or "installed")
    return LockedPackage(name=pin.name, version=pin.version, action=pin.action or Action.INSTALL, index=index, coupling=coupling)


# -- a constraints file against its sibling pylock -------------------------------------------------


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
    return [_error(path, problem, package=name) for name, problem in problems if problem]


def _written_together(locked: LockedFile, sibling: Checked) -> bool:
    """Whether ``sibling`` (a pylock, read) was written with the constraints file ``locked``: the
    same inputs digest, and the same target when the constraints file records one."""
    source, plan = sibling.locked, sibling.plan
    if source is None or plan is None or source.inputs_digest != locked.inputs_digest:
        return False
    return locked.target is None or locked.target == plan.target


def _pin_problem(pin: Pin | None, pkg: LockedPackage | None, shown: str) -> str | None:
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


# -- freshness -----------------------------------------------------------------------------------


def freshness_findings(path: Path, locked: LockedFile, expected: Expected | None) -> list[Finding]:
    if expected is None or locked.inputs_digest == expected.digest:
        return []
    changed = changed_inputs(locked.inputs, expected.inputs) if locked.inputs else []
    detail = f" ({'; '.join(changed)})" if changed else ""
    return [
        _error(
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


# -- retention -----------------------------------------------------------------------------------

_DEV_DATE_RE = re.compile(r"^(\d{4})(\d{2})(\d{2})$")


def build_date(version: Version, upload_time: str | None) -> dt.date | None:
    """When a nightly was built: ``devYYYYMMDD`` in its version, else its upload time."""
    if version.dev is not None and (m := _DEV_DATE_RE.match(str(version.dev))):
        try:
            return dt.date(int(m[1]), int(m[2]), int(m[3]))
        except ValueError:
            pass
    if upload_time:
        try:
            return dt.date.fromisoformat(upload_time[:10])
        except ValueError:
            return None
    return None


def _is_nightly(pkg: LockedPackage) -> bool:
    """A dev release, or a file under a ``nightly/`` folder (triton's ``3.7.0+git...`` wheels)."""
    return pkg.version.is_devrelease or (pkg.url is not None and "/nightly/" in urlsplit(pkg.url).path)


def retention_findings(path: Path, packages: Iterable[LockedPackage], defs: Definitions, today: dt.date, expected: Expected | None = None) -> list[Finding]:
    """A warning for each wheel to download that its index has (or soon will have) deleted."""
    out: list[Finding] = []
    for pkg in packages:
        if pkg.action is Action.KEEP:
            continue  # nothing to download
        index = defs.indexes.get(pkg.index)
        if index is None or index.retention_days <= 0 or not _is_nightly(pkg):
            continue
        built = build_date(pkg.version, pkg.upload_time)
        if built is None:
            continue
        age = (today - built).days
        if age > index.retention_days:
            out.append(
                Finding(
                    level=WARNING,
                    path=path,
                    package=pkg.name,
                    message=f"{pkg.version} was built on {built} ({age} days ago); the {index.name} index deletes nightlies after about {index.retention_days} days, so its URL will stop working (if it has not already)",
                    hint=(regenerate_hint(expected) or "regenerate:").replace("regenerate:", "relock onto a current nightly:", 1).rstrip(":"),
                )
            )
    return out


# -- against an index (a snapshot, or the live indexes) -------------------------------------------


def route_context(plan: LockPlan) -> RouteContext:
    """The routing a plan's packages were found under: the channels its recorded inputs asked for
    (``torch``, ``installed-torch``, ``flashinfer``, parsed as the command line's are); read off the
    plan's versions only when it records no inputs."""
    torch = plan.torch
    torch_asked, flashinfer_asked = recorded_channels(plan.inputs)
    return RouteContext(
        torch_channel=torch_asked or (torch_channel(torch.version) if torch is not None else "stable"),
        cuda=plan.target.cuda,
        flashinfer_channel=flashinfer_asked or flashinfer_channel(plan.flashinfer_version),
        torch_series=f"{torch.version.major}.{torch.version.minor}" if torch is not None else None,
    )


def recorded_channels(inputs: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(the torch channel, the FlashInfer channel) the recorded inputs resolved under; None for one
    they do not say (or say in a way this version cannot read)."""
    from ..errors import UsageError
    from ..model.request import FlashInferChoice, TorchChoice

    torch = flashinfer = None
    try:
        if isinstance(inputs.get("torch"), str):
            installed = inputs.get("installed-torch")
            torch = TorchChoice.parse(inputs["torch"]).for_installed(Version(installed) if isinstance(installed, str) else None).channel
    except (UsageError, InvalidVersion):
        pass
    try:
        if isinstance(inputs.get("flashinfer"), str):
            flashinfer = FlashInferChoice.parse(inputs["flashinfer"]).channel
    except UsageError:
        pass
    return torch, flashinfer


Lookup = Callable[[str, RouteContext, "set[str]"], "list[IndexFile]"]


def finder_lookup(finder: Finder) -> Lookup:
    """Files offered for a package, through a ``Finder`` (full pages, shared with a re-resolve)."""
    return lambda name, ctx, _filenames: [o.file for o in finder.offers(name, ctx)[0]]


def listed_lookup(finder: Finder, plans: Iterable[LockPlan] = ()) -> Lookup:
    """Files offered for a package, through a ``Finder`` reading only the rows that name them
    (``Finder.listed``): given the ``plans`` to verify, the rows of every file they use for that
    package, so each page is parsed once for all of them (the locks of several targets share
    most pages)."""
    wanted: dict[str, set[str]] = {}
    for plan in plans:
        for pkg in plan.packages:
            for filename in (pkg.filename, pkg.sdist.filename if pkg.sdist else None):
                if filename:
                    wanted.setdefault(pkg.name, set()).add(filename)

    def lookup(name: str, ctx: RouteContext, filenames: set[str]) -> list[IndexFile]:
        rows = wanted.get(canonicalize_name(name), set()) | filenames
        return [o.file for o in finder.listed(name, ctx, rows) if o.file.filename in filenames]

    return lookup


@dataclass(frozen=True, slots=True)
class Placement:
    """A plan whose ``index`` files were looked up on that index's own pages (their URLs there),
    and the files that could not be placed, with why."""

    plan: LockPlan
    unplaced: tuple[tuple[LockedPackage, str], ...] = ()


def place_files(plan: LockPlan, lookup: Lookup, *, index: str) -> Placement:
    """Each wheel of ``index`` the plan lists, at the URL ``index``'s page gives for that file
    name (a mirror's own layout, not the one a snapshot recorded), when the page lists it with the
    same sha256. A page that cannot be read stops the look-ups (every file left is unplaced, with
    that reason); a page that lists another sha256 for the file is an ``IntegrityError``."""
    from ..errors import CrawlError, IntegrityError

    ctx = route_context(plan)
    placed: dict[str, str] = {}
    unplaced: list[tuple[LockedPackage, str]] = []
    failure: str | None = None
    for pkg in (p for p in plan.packages if _placeable(p, index)):
        try:
            match = _offered(lookup, pkg, ctx) if failure is None else None
        except CrawlError as err:
            failure = f"its page could not be read ({err})"
        if failure is not None:
            unplaced.append((pkg, failure))
        elif match is None:
            unplaced.append((pkg, f"the {index} index's page for {pkg.name} does not list {pkg.filename}"))
        elif _differs(match.sha256, pkg.sha256):
            raise IntegrityError(
                match.url,
                f"the {index} index lists sha256 {match.sha256} for {pkg.filename}, the recorded plan {pkg.sha256}",
                hint="the index serves another file under this name; it is not locked",
            )
        else:
            placed[pkg.name] = match.url
    packages = tuple(replace(p, url=placed.get(p.name, p.url)) for p in plan.packages)
    return Placement(plan=replace(plan, packages=packages), unplaced=tuple(unplaced))


def _placeable(pkg: LockedPackage, index: str) -> bool:
    """A file of ``index`` the lock lists (a listed kept file too), with the URL it was found at."""
    return pkg.index == index and bool(pkg.url) and _listed_file(pkg)


def _listed_file(pkg: LockedPackage) -> bool:
    """Whether the lock names a file for ``pkg`` to be found on its index (a kept package the
    lock does not list has none)."""
    return bool(pkg.filename) and not (pkg.action is Action.KEEP and not pkg.sha256)


def _offered(lookup: Lookup, pkg: LockedPackage, ctx: RouteContext) -> IndexFile | None:
    """The file of ``pkg``'s name among those its index offers (``CrawlError`` when its page cannot be read)."""
    assert pkg.filename is not None
    return next((f for f in lookup(pkg.name, ctx, {pkg.filename}) if f.filename == pkg.filename), None)


def _differs(offered: str | None, locked: str | None) -> bool:
    """Whether two sha256 digests are both known and differ."""
    return bool(offered and locked and offered.lower() != locked.lower())


def verify_files(path: Path, plan: LockPlan, lookup: Lookup, *, source: str) -> list[Finding]:
    """Each wheel the lock downloads must still be offered, with the sha256 and size locked."""
    from ..errors import CrawlError

    out: list[Finding] = []
    ctx = route_context(plan)
    for pkg in plan.packages:
        if pkg.action is Action.BUILD and pkg.sdist is not None and pkg.sdist.origin is not None:
            continue  # built from a source tree no index offers (check_sources verifies it)
        if pkg.action is Action.BUILD and pkg.sdist is not None:  # a built wheel: its sdist is what the index offers
            pkg = replace(pkg, filename=pkg.sdist.filename, sha256=pkg.sdist.sha256, size=pkg.sdist.size)
        if not _listed_file(pkg):
            continue  # a kept package the lock does not list: nothing to verify
        try:
            problem = _offer_problem(_offered(lookup, pkg, ctx), pkg, source)
        except CrawlError as err:
            out.append(Finding(level=WARNING, path=path, package=pkg.name, message=f"cannot verify against {source}: {err}"))
            continue
        if problem:
            out.append(_error(path, problem, package=pkg.name))
    return out


def _offer_problem(match: IndexFile | None, pkg: LockedPackage, source: str) -> str | None:
    """How the file an index offers differs from the one the lock names (None: it is that file)."""
    if match is None:
        return f"{pkg.filename} is not offered by the {pkg.index} index ({source})"
    if _differs(match.sha256, pkg.sha256):
        return f"sha256 {pkg.sha256} differs from the {pkg.index} index's {match.sha256} ({source})"
    if match.size is not None and pkg.size is not None and match.size != pkg.size:
        return f"size {pkg.size} differs from the {pkg.index} index's {match.size} ({source})"
    return None


def drift(path: Path, locked: LockPlan, fresh: LockPlan, *, source: str, hint: str | None) -> list[Finding]:
    """What a re-resolve picks now that the lock does not have (torch and FlashInfer first)."""
    old = {p.name: p.version for p in locked.packages}
    new = {p.name: p.version for p in fresh.packages}
    first = ("torch", "flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache")
    names = sorted(set(old) | set(new), key=lambda n: (first.index(n) if n in first else len(first), n))
    out = []
    for name in names:
        if old.get(name) == new.get(name):
            continue
        if name not in new:
            what = f"locked {old[name]}, no longer part of a fresh plan"
        elif name not in old:
            what = f"a fresh plan adds {new[name]}"
        else:
            direction = "newer" if new[name] > old[name] else "different"
            what = f"{source} now gives {new[name]}, {direction} than the locked {old[name]}"
        out.append(Finding(level=WARNING, path=path, package=name, message=f"drift: {what}", hint=hint))
    return out


# -- a uv project's uv.lock against the plan `export uv` wrote into its pyproject.toml --------------


def uv_project_findings(pyproject: Path, lock: Path, defs: Definitions) -> list[Finding]:
    """``lock`` (a ``uv.lock``) against the export record of ``pyproject``: every planned package
    at its planned version in each target's fork, a kept package at its kept version, each sourced
    package from the index the plan took it from, FlashInfer aligned; and the entries the export
    wrote still in ``[tool.uv]``. Each drift is one finding naming the package."""
    from ..data.toml import read_text

    try:
        record = read_export(read_text(pyproject, error=LockFileError), str(pyproject))
    except LockFileError as err:
        return [_error(pyproject, _without_path(str(err), pyproject), hint=err.hint)]
    if record is None:
        return [
            _error(
                lock,
                f"{pyproject.name} has no [tool.{TOOL}.{RECORD}] table: no plan was exported into this project, so there is nothing to check uv.lock against",
                hint="write one with `resolve-gpu-stack export uv`",
            )
        ]
    hint = f"export again ({record.command}), then `uv lock`" if record.command else "export again, then `uv lock`"
    out = _exported_entries_findings(pyproject, record, hint)
    if not lock.is_file():
        return [*out, _error(lock, f"missing: {pyproject.name} holds an exported plan but there is no uv.lock", hint="run `uv lock` in the project")]
    try:
        packages = read_uv_lock(read_text(lock, error=LockFileError), str(lock))
    except LockFileError as err:
        return [*out, _error(lock, _without_path(str(err), lock), hint=err.hint)]
    for target in record.targets:
        out += _uv_target_findings(lock, record, target, packages, defs, several=len(record.targets) > 1)
    return out


def _exported_entries_findings(pyproject: Path, record: ExportRecord, hint: str) -> list[Finding]:
    """What the export wrote into [tool.uv] and its dependency group, still there (a hand edit of
    pyproject.toml is drift too: `uv lock` follows it)."""
    out: list[Finding] = []
    for key in ("environments", *LISTS):
        have = record.uv.get(key) or []
        for entry in record.wrote.get(key, ()):
            if entry not in have:
                out.append(_error(pyproject, f"[tool.uv] {key} no longer has {entry!r}, which `export uv` wrote", hint=hint))
    sources = record.uv.get("sources") or {}
    for name in record.sources:
        if name not in sources:
            out.append(_error(pyproject, f"[tool.uv.sources] has no entry for {name} any more: uv may take it from another index", package=name, hint=hint))
    if record.group not in record.groups:
        out.append(_error(pyproject, f"[dependency-groups] has no {record.group!r} group any more: `uv sync` leaves the stack's roots out", hint=hint))
    return out


def _uv_target_findings(
    lock: Path, record: ExportRecord, target: RecordedTarget, packages: Sequence[UvLockedPackage], defs: Definitions, *, several: bool
) -> list[Finding]:
    declared = _declared(target.python, target.platform)
    environment = declared.markers if declared is not None else None  # None: a probed target's platform, every fork counts
    label = f"target {target.name!r}: " if several and target.name else ""
    relock = "run `uv lock` again (pyproject.toml still holds the plan), or export again"
    out: list[Finding] = []
    versions: dict[str, Version] = {}
    for name, version in sorted(record.pins(target, environment).items()):
        problems, found = _uv_pin_problems(name, version, locked_for(packages, name, environment), target)
        out += [_error(lock, label + problem, package=name, hint=relock) for problem in problems]
        if found is not None:
            versions[name] = found
    found_plan = LockPlan(
        target=TargetSummary(python=target.python, platform=target.platform, cuda=None),
        cuda_label=target.cuda_label,
        packages=tuple(
            LockedPackage(name=canonicalize_name(n), version=v, action=Action.INSTALL, index="uv.lock", coupling=Coupling.AGNOSTIC) for n, v in versions.items()
        ),
    )
    out += [_error(lock, f"{label}in uv.lock: {v.message}", package=v.package, hint=relock) for v in flashinfer_alignment(found_plan, defs)]
    return out


def _uv_pin_problems(name: str, version: Version, got: Sequence[UvLockedPackage], target: RecordedTarget) -> tuple[list[str], Version | None]:
    """(how uv.lock's entries ``got`` for ``name`` differ from the exported pin ``version``, the
    version uv.lock has: None when it has none)."""
    if not got:
        return [f"not in uv.lock; the exported plan installs {version}"], None
    have = sorted({p.version for p in got if p.version is not None})
    out = []
    if have != [version]:
        shown = ", ".join(map(str, have)) or "no version"
        out.append(
            f"uv.lock has {shown}, but the plan keeps the installed {version}: `uv sync` would replace it"
            if name in target.kept
            else f"uv.lock has {shown}, the exported plan pins {version}"
        )
    registry = _registry_problem(got, target.sources.get(name))
    return [*out, *([registry] if registry else [])], have[-1] if have else version


def _registry_problem(got: Sequence[UvLockedPackage], source: str | None) -> str | None:
    """uv.lock's entries of a package taken from a registry other than the plan's ``source``."""
    if source is None:
        return None
    wrong = sorted({p.registry for p in got if p.registry is not None and p.registry.rstrip("/") != source.rstrip("/")})
    return f"uv.lock takes it from {', '.join(map(strip_credentials, wrong))}, the plan from {source}" if wrong else None
