"""Hand a plan to uv, and never let uv touch what the plan keeps (I/O edge: disk, subprocess).

How uv is called, and why:

- Every file to install is first fetched into the wheel cache and verified (``download``); uv
  gets a temporary flat folder of links to those cache files (``--find-links``) and a
  requirements file of ``name==version --hash=sha256:...`` lines (``--require-hashes``). uv
  checks the hashes a second time, and the environment ends up exactly as after an index
  install: no ``direct_url.json`` pointing into our cache, ``pip freeze`` shows ``name==version``.
  (``name @ file:///...`` lines would record the cache path in every installed dist-info.)
- ``--no-deps``: the plan is the full closure, uv must not resolve anything of its own.
- ``--no-index --offline``: uv cannot go fishing on other indexes; ``--no-config`` and a scrubbed
  environment keep a uv.toml / ``UV_OVERRIDE`` / ``UV_FIND_LINKS`` from changing the install set.
- Kept packages (the installed torch above all) are not in the requirements, and are pinned to
  their installed version, local label included, in a ``-c`` constraints file.
- The plan's overrides (``--override``, a framework's torchaudio pin replaced by the build for
  the kept torch) go to uv as an ``--override`` file: each overridden package the plan installs,
  at the plan's version with its hash (uv's ``--require-hashes`` wants one on every line). An
  override of a kept package (a framework's torch pin replaced by the kept torch) is the
  constraints file's pin already: a kept package has no wheel hash to give.
- The installed torch moves only when the command line named the move (the plan's recorded inputs:
  an exact ``--torch VERSION``, ``--upgrade-package torch``, ``--change-cuda``): a plan that changes torch without it is refused before uv runs
  (``check_torch_named``), whatever made it.
- ``uv pip install --dry-run`` runs first with the same arguments; if uv would add, remove or
  change anything the plan does not say (a ``- torch==...`` line while torch is kept), nothing is
  run and ``UvError`` quotes uv's line.
- Afterwards the environment is inspected again: every package must be at its planned version and
  the dist-info of every kept package byte-identical.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import InvalidVersion, Version

from ..data.definitions import load_definitions
from ..errors import LockFileError, NoPlanError, UsageError, UvError
from ..model import Action, LockedPackage, LockPlan, Override
from ..model.request import torch_move_named
from ..net import process
from ..net.download import DownloadProgress, FetchedWheel, WheelCache, fetch_packages, files_to_fetch, fill_hashes
from ..rules.gate import broken_message, gate
from ..urls import strip_credentials
from .abi_imports import static_verdicts
from .confirm import confirm_verdicts
from .probe import Environment, InstalledDistribution, inspect_environment

if TYPE_CHECKING:
    from ..data.definitions import Definitions
    from ..net.http import HttpFetcher

REPORT_SCHEMA = "resolve-gpu-stack/install/v1"
TORCH = NormalizedName("torch")

# Environment variables that could widen or change what uv installs; uv gets none of them.
_SCRUBBED_ENV = (
    "UV_OVERRIDE",
    "UV_CONSTRAINT",
    "UV_BUILD_CONSTRAINT",
    "UV_FIND_LINKS",
    "UV_INDEX",
    "UV_INDEX_URL",
    "UV_DEFAULT_INDEX",
    "UV_EXTRA_INDEX_URL",
    "UV_PYTHON",
    "UV_SYSTEM_PYTHON",
    "UV_CONFIG_FILE",
    "UV_REINSTALL",
    "UV_UPGRADE",
    "UV_TARGET",
    "UV_PREFIX",
    "UV_NO_BINARY",
    "UV_EXCLUDE_NEWER",
)

_CHANGE_RE = re.compile(
    r"^\s*(?P<op>[-+~])\s+(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)(?:\[[^\]]*\])?"
    r"(?:\s*==\s*(?P<version>[^\s;]+)|\s+@\s+(?P<url>\S+))?"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class UvChange:
    """One ``+ name==version`` / ``- name==version`` / ``~ name==version`` line of uv's output."""

    op: str  # "+" install, "-" remove, "~" reinstall
    name: NormalizedName
    version: Version | None
    line: str


@dataclass(frozen=True, slots=True, kw_only=True)
class InstallRow:
    name: NormalizedName
    version: Version  # what the plan says
    action: Action
    index: str
    before: Version | None  # installed before the run
    after: Version | None  # installed after the run (None in a dry run, or when absent)
    reason: str = ""  # why the plan has this package at this version (the plan's own reason)
    size: int | None = None  # bytes of its wheel, as the index gave it (None: kept, or not given)


@dataclass(frozen=True, slots=True, kw_only=True)
class DownloadSummary:
    """What an install would download: from the plan's sizes and the wheel cache, with no request."""

    files: int  # wheels to install
    cached: int  # of which already in the wheel cache
    bytes: int  # known sizes of the wheels not cached
    unknown_size: tuple[NormalizedName, ...] = ()  # not cached, and the index gave no size

    def to_json(self) -> dict[str, Any]:
        return {"files": self.files, "cached": self.cached, "bytes": self.bytes, "unknown_size": list(self.unknown_size)}


@dataclass(frozen=True, slots=True, kw_only=True)
class InstallReport:
    python: str
    dry_run: bool
    rows: tuple[InstallRow, ...]
    uv_changes: tuple[str, ...] = ()  # uv's own lines (the real run's)
    lock_path: str | None = None
    download: DownloadSummary | None = None  # a dry run's preview of the downloads
    notes: tuple[str, ...] = ()  # the plan's story (its notes and overrides), told as every door tells it (cli/render.py)
    overrides: tuple[Override, ...] = ()

    @property
    def changed(self) -> tuple[InstallRow, ...]:
        return tuple(r for r in self.rows if r.action is not Action.KEEP)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": REPORT_SCHEMA,
            "python": self.python,
            "dry_run": self.dry_run,
            "lock": self.lock_path,
            "packages": [
                {
                    "name": r.name,
                    "version": str(r.version),
                    "action": r.action.value,
                    "index": r.index,
                    "before": None if r.before is None else str(r.before),
                    "after": None if r.after is None else str(r.after),
                    "size": r.size,
                    "reason": r.reason,
                }
                for r in self.rows
            ],
            "download": None if self.download is None else self.download.to_json(),
            "uv": list(self.uv_changes),
        }


# -- pure checks ---------------------------------------------------------------------------------


def parse_uv_changes(output: str) -> list[UvChange]:
    """The package lines of ``uv pip install`` output (dry run or real), in order."""
    changes = []
    for line in output.splitlines():
        m = _CHANGE_RE.match(line)
        if not m:
            continue
        try:
            version = Version(m.group("version")) if m.group("version") else None
        except InvalidVersion:
            version = None
        changes.append(UvChange(op=m.group("op"), name=canonicalize_name(m.group("name")), version=version, line=line.strip()))
    return changes


def check_uv_changes(changes: Sequence[UvChange], plan: LockPlan, installed: Mapping[NormalizedName, Version]) -> None:
    """Refuse (``UvError``) any change of uv's that the plan does not make."""
    for change in changes:
        pkg = plan.package(change.name)
        if _planned(change, pkg, installed):
            continue
        what = {"+": "install", "-": "remove", "~": "reinstall"}[change.op]
        if change.name == TORCH and TORCH in installed and (pkg is None or pkg.action is Action.KEEP):
            message = f"uv would {what} torch, but the installed torch {installed[TORCH]} must stay as it is; uv said: {change.line!r}"
        elif pkg is None:
            message = f"uv would {what} {change.name}, which is not in the plan; uv said: {change.line!r}"
        else:
            message = f"uv would {what} {change.name}, but the plan says {pkg.action.value} {pkg.version}; uv said: {change.line!r}"
        raise UvError(message + "; nothing was changed", hint="resolve again; if this persists, report it with the plan (--format json)")


def _planned(change: UvChange, pkg: LockedPackage | None, installed: Mapping[NormalizedName, Version]) -> bool:
    """Whether the plan makes this change of uv's (it never reinstalls the same version: "~")."""
    if pkg is None or pkg.action is Action.KEEP:
        return False
    if change.op == "+":
        return change.version is None or change.version == pkg.version
    if change.op == "-":
        return change.version is not None and change.version == installed.get(change.name)
    return pkg.action is Action.BUILD and change.version in (None, pkg.version)  # "~": a rebuilt wheel over its version


def gate_installed(plan: LockPlan, defs: Definitions, environment: Environment) -> tuple[str, ...]:
    """The install doors re-check the plan at the gate (``rules/gate.py``) with what only the
    environment's files tell: each installed compiled package the plan leaves as it is, judged from
    its shared objects against the kept torch (``abi_imports.static_verdicts``, as ``doctor``
    does), and the FlashInfer components it leaves out of line. One that cannot work stops the
    install before anything changes (``NoPlanError`` naming it and the ways out), unless the plan's
    request kept it (``--keep-broken NAME``): the notes that say so are returned."""
    torch = plan.torch
    keeps_torch = torch is not None and torch.action is Action.KEEP
    raw = plan.inputs.get("keep-broken")
    keep = frozenset(canonicalize_name(str(n)) for n in raw) if isinstance(raw, (list, tuple)) else frozenset()
    refusals = (
        {canonicalize_name(v.name): v.verdict.refusal for v in static_verdicts(environment, defs) if v.verdict.refusal is not None} if keeps_torch else {}
    )
    verdict = gate(plan, defs, installed=environment.target.installed, keep=keep, installed_refusals=refusals)
    if verdict.broken:
        message, reasons, hint = broken_message(verdict.broken)
        raise NoPlanError(message, reasons=reasons, hint=hint)
    return verdict.kept_notes()


def check_torch_named(plan: LockPlan, installed: Mapping[NormalizedName, Version]) -> None:
    """Refuse (``UsageError``, nothing changed) a plan that changes the installed torch when its
    recorded inputs do not name that move (``model.request.torch_move_named``): the kept torch
    moves only on the user's word, checked again at the hand-off to uv."""
    have = installed.get(TORCH)
    torch = plan.torch
    if have is None or torch is None or (torch.action is Action.KEEP and torch.version == have) or torch_move_named(plan.inputs, have):
        return
    raise UsageError(
        f"the plan changes the installed torch {have} to {torch.version} ({torch.action.value}), but the command line does not name that move; nothing was changed",
        hint=f"keep torch: resolve again without that change; to move it, say so: --torch {torch.version} or --upgrade-package torch",
    )


def check_environment(plan: LockPlan, environment: Environment) -> None:
    """The plan must have been made for this interpreter, and the environment must not have moved,
    and the installed torch moves only when the command line named it (``check_torch_named``)."""
    check_torch_named(plan, environment.target.installed)
    target = environment.target
    if plan.target.python and _minor(plan.target.python) != target.python_version:
        raise UsageError(
            f"the plan is for Python {plan.target.python}, but {environment.interpreter} is Python {target.python_version}",
            hint="resolve for this interpreter: --python " + environment.interpreter,
        )
    if plan.target.platform and plan.target.platform != target.platform:
        raise UsageError(
            f"the plan is for {plan.target.platform}, but {environment.interpreter} is {target.platform}",
            hint="resolve for this interpreter: --python " + environment.interpreter,
        )
    for pkg in plan.packages:
        _check_unmoved(pkg, target.installed.get(pkg.name), environment.interpreter)


def _check_unmoved(pkg: LockedPackage, now: Version | None, interpreter: str) -> None:
    """``pkg`` is installed at the version the plan found (``now``: the environment's now)."""
    expected = pkg.version if pkg.action is Action.KEEP else pkg.installed_version
    if now == expected:
        return
    planned = f"keeps {pkg.name} {pkg.version}" if pkg.action is Action.KEEP else f"expects {pkg.name} {'at ' + str(expected) if expected else 'not installed'}"
    raise LockFileError(
        f"the environment changed since the plan was made: the plan {planned}, but {interpreter} has {pkg.name} {now if now is not None else '(not installed)'}",
        hint="resolve again for the environment as it is now",
    )


def _minor(python: str) -> str:
    try:
        release = Version(python).release
    except InvalidVersion:
        return python
    return f"{release[0]}.{release[1] if len(release) > 1 else 0}"


def requirements_text(packages: Sequence[LockedPackage]) -> str:
    lines = []
    for pkg in sorted(packages, key=lambda p: p.name):
        if not pkg.sha256:
            raise LockFileError(f"{pkg.name} {pkg.version}: no sha256 to install it with")
        lines.append(f"{pkg.name}=={pkg.version} --hash=sha256:{pkg.sha256.lower()}")
    return "\n".join(lines) + "\n"


def constraints_text(plan: LockPlan, installed: Mapping[NormalizedName, Version]) -> str:
    """``name==<installed version>`` for every kept package, and for torch whenever the plan keeps it."""
    pins = {p.name: installed[p.name] for p in plan.packages if p.action is Action.KEEP and p.name in installed}
    torch = plan.torch
    if TORCH in installed and (torch is None or torch.action is Action.KEEP):
        pins[TORCH] = installed[TORCH]
    return "".join(f"{name}=={version}\n" for name, version in sorted(pins.items()))


def overrides_text(plan: LockPlan) -> str:
    """``name==<planned version> --hash=...`` for every package the plan installs that an override
    replaced a requirement on (kept ones are pinned by ``constraints_text``)."""
    names = {canonicalize_name(re.split(r"[\s\[<>=!~;@]", o.replaced_by.strip(), maxsplit=1)[0]) for o in plan.overrides}
    todo = [p for p in plan.packages if p.name in names and p.action is not Action.KEEP]
    return requirements_text(todo) if todo else ""


def uv_environment(env: Mapping[str, str]) -> dict[str, str]:
    out = {k: v for k, v in env.items() if k not in _SCRUBBED_ENV}
    out["UV_PYTHON_DOWNLOADS"] = "never"
    out["UV_NO_PROGRESS"] = "1"
    return out


# -- the run ------------------------------------------------------------------------------------


def find_uv(env: Mapping[str, str]) -> str:
    """The uv installed with this tool, else ``uv`` on PATH."""
    try:
        from uv import find_uv_bin  # optional: without the uv wheel, uv on PATH

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        pass
    found = shutil.which("uv", path=env.get("PATH"))
    if found:
        return found
    raise UsageError("uv not found", hint="install uv, or pass --uv /path/to/uv")


def download_summary(plan: LockPlan, wheel_cache: WheelCache) -> DownloadSummary:
    """The wheels an install of ``plan`` would fetch, and their bytes; reads the cache, fetches nothing.

    A wheel counts as cached when the cache holds a file under its sha256 (from the index, or
    recorded when a hashless wheel was downloaded before); it is re-verified only when installed.
    """
    todo = [_sdist_row(p) for p in plan.packages if p.action is not Action.KEEP]
    cached, size, unknown = 0, 0, []
    for pkg in todo:
        digest = pkg.sha256 or ((wheel_cache.known_digest(pkg.url) or ("", 0))[0] if pkg.url else "")
        filename = pkg.filename or (pkg.url.rsplit("/", 1)[-1] if pkg.url else "")
        if digest and filename and wheel_cache.path_for(digest, filename).is_file():
            cached += 1
        elif pkg.size is None:
            unknown.append(pkg.name)
        else:
            size += pkg.size
    return DownloadSummary(files=len(todo), cached=cached, bytes=size, unknown_size=tuple(sorted(unknown)))


def _sdist_row(pkg: LockedPackage) -> LockedPackage:
    """A build row not built yet (--build) as the file it downloads first: its sdist."""
    if pkg.action is not Action.BUILD or pkg.url or pkg.sdist is None:
        return pkg
    return replace(pkg, url=pkg.sdist.url, filename=pkg.sdist.filename, sha256=pkg.sdist.sha256, size=pkg.sdist.size)


def preview_plan(plan: LockPlan, *, python: str, wheel_cache: WheelCache) -> InstallReport:
    """``install --dry-run``: what the plan would change in ``python``'s environment, and what it
    would download, with no download and no uv (uv's own dry run needs the wheel files)."""
    environment = inspect_environment(python)
    check_environment(plan, environment)
    rows = _rows(plan, dict(environment.target.installed), None)
    return InstallReport(python=python, dry_run=True, rows=rows, download=download_summary(plan, wheel_cache), notes=plan.notes, overrides=plan.overrides)


def install_plan(
    plan: LockPlan,
    *,
    python: str,
    uv: str,
    wheel_cache: WheelCache,
    dry_run: bool,
    fetcher: HttpFetcher | None = None,
    progress: DownloadProgress | None = None,
    offline: bool = False,
    env: Mapping[str, str] | None = None,
    environment: Environment | None = None,
    defs: Definitions | None = None,
) -> InstallReport:
    """Install the plan into the environment of ``python`` with uv (see the module docstring).

    ``environment``: ``python``'s environment as the caller just inspected it (one probe less);
    inspected here when None. Every compiled wheel's verdict is confirmed from its verified file
    before uv runs (``env/confirm.py``; ``defs``: the rules it is judged by, default the bundled).
    """
    env = dict(os.environ if env is None else env)
    before_env = environment if environment is not None else inspect_environment(python)
    check_environment(plan, before_env)
    before = dict(before_env.target.installed)
    with wheel_cache.in_use():  # the files handed to uv stay until it is done (cache prune waits)
        plan = fill_hashes(plan, cache=wheel_cache, fetcher=fetcher, progress=progress, offline=offline)
        todo = files_to_fetch(plan)
        if not todo:
            rows = _rows(plan, before, None if dry_run else before)
            return InstallReport(python=python, dry_run=dry_run, rows=rows, notes=plan.notes, overrides=plan.overrides)
        fetched = fetch_packages(todo, cache=wheel_cache, fetcher=fetcher, progress=progress, offline=offline)

        confirm_verdicts(plan, {name: wheel.path for name, wheel in fetched.items()}, before_env, defs if defs is not None else load_definitions())
        with tempfile.TemporaryDirectory(prefix="resolve-gpu-stack-install-") as tmp:
            args = _uv_args(
                Path(tmp), uv=uv, python=python, todo=todo, fetched=fetched, constraints=constraints_text(plan, before), overrides=overrides_text(plan)
            )
            # a wheel built here over the same version installed (a patched tree rebuilt): uv reinstalls it
            args += [w for p in todo if p.action is Action.BUILD and before.get(p.name) == p.version for w in ("--reinstall-package", p.name)]
            return run_uv_checked(plan, args, python=python, env=uv_environment(env), before_env=before_env, dry_run=dry_run)


def run_uv_checked(
    plan: LockPlan, args: Sequence[str], *, python: str, env: Mapping[str, str], before_env: Environment, dry_run: bool, download: DownloadSummary | None = None
) -> InstallReport:
    """Run ``args`` (a ``uv pip install`` of ``plan`` into ``python``) as the module docstring says:
    uv's dry run first, any change the plan does not make refused; then (unless ``dry_run``) the
    real run, and every package checked at its planned version, kept dist-info byte-identical.

    ``before_env``: the environment as inspected before (``check_environment`` passed on it);
    ``env``: uv's environment, scrubbed (``uv_environment``).
    """
    before = dict(before_env.target.installed)
    check_torch_named(plan, before)  # the hand-off: a torch move nobody asked for never reaches uv
    kept = {p.name: _dist_info_digest(before_env.distributions.get(p.name)) for p in plan.packages if p.action is Action.KEEP}
    dry = _run_uv([*args, "--dry-run"], env, what="uv pip install --dry-run")
    check_uv_changes(parse_uv_changes(dry), plan, before)
    if dry_run:
        return InstallReport(
            python=python,
            dry_run=True,
            rows=_rows(plan, before, None),
            uv_changes=_change_lines(dry),
            download=download,
            notes=plan.notes,
            overrides=plan.overrides,
        )
    real = _run_uv(list(args), env, what="uv pip install")
    after_env = inspect_environment(python)
    after = dict(after_env.target.installed)
    _check_after(plan, after, kept, after_env)
    return InstallReport(
        python=python, dry_run=False, rows=_rows(plan, before, after), uv_changes=_change_lines(real), notes=plan.notes, overrides=plan.overrides
    )


def _uv_args(
    tmp: Path, *, uv: str, python: str, todo: Sequence[LockedPackage], fetched: Mapping[str, FetchedWheel], constraints: str, overrides: str = ""
) -> list[str]:
    links = tmp / "wheels"
    links.mkdir()
    for pkg in todo:
        source = fetched[pkg.name].path
        _link(source, links / source.name)
    (tmp / "requirements.txt").write_text(requirements_text(todo))
    (tmp / "constraints.txt").write_text(constraints)
    return [
        uv,
        "pip",
        "install",
        "--python",
        python,
        "--no-config",
        "--no-deps",
        "--no-index",
        "--offline",
        "--find-links",
        str(links),
        "--require-hashes",
        "-r",
        str(tmp / "requirements.txt"),
        "-c",
        str(tmp / "constraints.txt"),
        *_override_args(tmp, overrides),
    ]


def _override_args(tmp: Path, overrides: str) -> list[str]:
    if not overrides:
        return []
    (tmp / "overrides.txt").write_text(overrides)
    return ["--override", str(tmp / "overrides.txt")]


def _link(source: Path, link: Path) -> None:
    try:
        link.symlink_to(source)
    except OSError:
        try:
            os.link(source, link)
        except OSError:
            shutil.copyfile(source, link)


def _run_uv(args: list[str], env: Mapping[str, str], *, what: str) -> str:
    try:
        proc = process.run(args, env=dict(env), text=True)
    except OSError as exc:
        raise UvError(f"cannot run {args[0]}: {exc.strerror or exc}", hint="pass --uv /path/to/uv") from None
    output = strip_credentials(proc.stderr + ("\n" + proc.stdout if proc.stdout else ""))
    if proc.returncode != 0:
        said = f":\n{output.strip()}" if output.strip() else f", and said nothing: is {args[0]} uv?"
        raise UvError(f"{what} failed (exit {proc.returncode}){said}", hint=_uv_hint(output))
    return output


def _uv_hint(output: str) -> str:
    if not output.strip():
        return "the environment is as uv left it; pass --uv /path/to/uv (`uv --version` should answer)"
    if "hash mismatch" in output.lower():
        return (
            "a wheel is not the file the lock names (its sha256 differs): the wheelhouse or the server changed it; uv checks every "
            "wheel before it installs any, so nothing was installed: export the wheelhouse again, or lock again"
        )
    return "the environment is as uv left it; see uv's message above"


def _change_lines(output: str) -> tuple[str, ...]:
    return tuple(c.line for c in parse_uv_changes(output))


def _dist_info_digest(dist: InstalledDistribution | None) -> str | None:
    """One digest over every file of a dist-info folder (names and bytes)."""
    if dist is None or dist.dist_info is None or not dist.dist_info.is_dir():
        return None
    digest = hashlib.sha256()
    for path in sorted(p for p in dist.dist_info.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(dist.dist_info)).encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _check_after(plan: LockPlan, after: Mapping[NormalizedName, Version], kept: Mapping[NormalizedName, str | None], environment: Environment) -> None:
    problems = []
    for pkg in plan.packages:
        now = after.get(pkg.name)
        if now != pkg.version:
            problems.append(f"{pkg.name} is {now if now is not None else 'not installed'}, the plan says {pkg.version}")
        elif pkg.action is Action.KEEP and kept.get(pkg.name) != _dist_info_digest(environment.distributions.get(pkg.name)):
            problems.append(f"the dist-info of the kept {pkg.name} {pkg.version} changed")
    if problems:
        raise UvError("after uv ran: " + "; ".join(problems), hint="the environment is as uv left it; resolve again and check `uv pip list`")


def _rows(plan: LockPlan, before: Mapping[NormalizedName, Version], after: Mapping[NormalizedName, Version] | None) -> tuple[InstallRow, ...]:
    return tuple(
        InstallRow(
            name=p.name,
            version=p.version,
            action=p.action,
            index=p.index,
            before=before.get(p.name),
            after=None if after is None else after.get(p.name),
            reason=p.reason,
            size=_sdist_row(p).size,
        )
        for p in sorted(plan.packages, key=lambda p: p.name)
    )


__all__ = [
    "DownloadSummary",
    "InstallReport",
    "InstallRow",
    "UvChange",
    "check_environment",
    "check_torch_named",
    "check_uv_changes",
    "constraints_text",
    "download_summary",
    "find_uv",
    "install_plan",
    "overrides_text",
    "parse_uv_changes",
    "preview_plan",
    "requirements_text",
    "run_uv_checked",
    "uv_environment",
]
