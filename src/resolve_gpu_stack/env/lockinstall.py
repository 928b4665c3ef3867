"""Install exactly what a pylock says (I/O edge: disk, uv; the network only through uv, or for
``--force-target``).

``install_lock`` is the fleet's half of ``install``: CI resolves and writes a lock once, every node
applies it. Nothing is resolved and no index is read. The lock itself goes to uv (``uv pip
install -r PYLOCK``), which downloads each wheel from the lock's own URL (or takes its ``path``,
relative to the lock file, as a wheelhouse writes them), checks its size and sha256 against the
lock, and installs, overlapping all three: as fast as plain uv. Around it, what makes ours safe:

- before uv runs, the lock passes every offline rule ``check`` applies (``lock.check.check_lock``,
  the very function: torch never lowered or moved unless its inputs say so, kept packages exact,
  FlashInfer aligned, every file hashed, wheels only), judged for this interpreter: what uv would
  install here (markers, ``requires-python``, ``environments``, each wheel's tags against the
  interpreter's own tag list: a ``manylinux_2_28`` wheel fits a glibc 2.36 host), every kept
  package installed here at exactly its locked version, and a torch the lock moves still the one
  it was made for. Any failure refuses the lock with nothing touched; ``--force-target`` relaxes
  only the Python and platform fit, never the installed packages;
- uv's dry run on the lock comes first (it downloads no wheel) and any change the lock does not
  make (torch above all) is refused with nothing changed (``install.run_uv_checked``); uv always
  runs with ``--no-build``;
- afterwards every package is at its locked version and every kept dist-info byte-identical;
- a wheel that is not the one the lock names (size or sha256) is refused by uv before it installs
  anything, as a ``UvError`` with a hint;
- http(s) URLs pass our URL policy first (plain http only for loopback or
  ``--allow-insecure-host``); credentials come from ~/.netrc, which uv reads as we do (a lock
  never holds any). Where a wheel is fetched from is not ``check``'s business here: a wheelhouse
  moves every wheel, and its sha256 still decides.

Before uv runs, every compiled wheel the lock installs is fetched and verified by us too (a local
one read where it lies) and its verdict re-derived from that file, read from its start
(``env/confirm.py``: a verdict recorded in a lock is a claim, not evidence): one the file does not
hold refuses the lock with nothing installed. uv then installs the same bytes (their sha256).

Two cases keep the older path (every wheel fetched into the wheel cache and verified by us, then
``install.install_plan``): ``force_target`` with a Python or platform misfit (the plan is
re-targeted to the interpreter as it is: uv's reading of the lock would refuse it), and
``offline`` with wheels that are not local files (only our wheel cache can answer for them).
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from ..data.definitions import load_definitions
from ..errors import LockFileError, UsageError
from ..lock.check import ERROR, INSTALLED, LOCATION, TARGET, Checked, Finding, check_lock
from ..lock.files import read_lock, write_lock
from ..lock.pylock import plan_from_lock
from ..model import Action, LockedPackage, LockPlan, TargetSummary
from ..net.download import DownloadProgress, WheelCache, store_local
from ..net.urlpolicy import check_url_allowed
from .confirm import Confirming
from .install import InstallReport, download_summary, gate_installed, install_plan, run_uv_checked, uv_environment
from .probe import Environment, start_probe

if TYPE_CHECKING:
    from ..data.definitions import Definitions
    from ..net.http import HttpFetcher


def local_wheel_path(url: str, base: Path) -> Path | None:
    """The file a lock's wheel location names, when it is local: a relative or absolute path
    (relative to ``base``, the lock's folder) or a ``file:`` URL; None for http(s)."""
    if url.startswith("file:"):
        return Path(unquote(urlsplit(url).path))
    if "://" in url:
        return None
    return (base / url).resolve()


def _localized(plan: LockPlan, base: Path, cache: WheelCache) -> LockPlan:
    """The plan with every local (``path`` / ``file:``) wheel verified into the cache: it keeps
    its place under a ``file:`` URL, and the cache answers for it (no request for a local file)."""
    return dataclasses.replace(plan, packages=tuple(_localize(pkg, base, cache) for pkg in plan.packages))


def _localize(pkg: LockedPackage, base: Path, cache: WheelCache) -> LockedPackage:
    if pkg.action is Action.KEEP or not pkg.url:
        return pkg
    local = local_wheel_path(pkg.url, base)
    if local is None:
        return pkg
    if not pkg.sha256:
        raise UsageError(f"{pkg.name} {pkg.version}: the lock has no sha256 for {local}", hint="PEP 751 requires one; write the lock again")
    stored = store_local(local, sha256=pkg.sha256, size=pkg.size, cache=cache, filename=pkg.filename or local.name)
    return dataclasses.replace(pkg, url=local.as_uri(), filename=stored.path.name)


def installable(path: Path, checked: Checked, environment: Environment, *, force_target: bool = False) -> tuple[LockPlan, bool]:
    """(the lock's plan, whether it misfits the interpreter's Python or platform) when ``checked``
    (``check_lock`` for ``environment``'s target) allows installing it, else the refusal:
    ``LockFileError`` (exit 1) when the lock breaks its own promises, ``UsageError`` (exit 2) when
    it was made for another target (a Python or platform misfit passes with ``force_target``;
    what is installed never does)."""
    errors = [f for f in checked.findings if f.level == ERROR and f.rule != LOCATION]
    _refuse_broken(path, checked, errors)
    assert checked.plan is not None
    misfits = [f for f in errors if f.rule == TARGET]
    _refuse_other_target(path, [f for f in errors if f.rule == INSTALLED] + ([] if force_target else misfits), environment)
    return checked.plan, bool(misfits)


def _refuse_broken(path: Path, checked: Checked, errors: list[Finding]) -> None:
    """``LockFileError`` for a lock that breaks its own promises, or is not a pylock."""
    own = [f for f in errors if f.rule not in (TARGET, INSTALLED)]
    if own or checked.plan is None or checked.locked is None:
        raise LockFileError(
            f"{path}: refused before anything was installed: " + _listed(own or errors),
            hint=f"`resolve-gpu-stack check {path}` lists every problem; lock again to fix them",
        )
    if checked.locked.format != "pylock":
        raise LockFileError(f"{path}: a constraints file does not record wheels or hashes", hint="install a pylock.<name>.toml written by resolve-gpu-stack")


def _refuse_other_target(path: Path, held: list[Finding], environment: Environment) -> None:
    """``UsageError`` for a lock made for another target: the whole lock first (its Python and
    platform: the cause a user looks for), then what is installed (no flag relaxes it), then each
    wheel."""
    if not held:
        return
    relaxable = not any(f.rule == INSTALLED for f in held)
    hint = (
        "lock for this interpreter, or pass --force-target to install it anyway (its Python and platform only)"
        if relaxable
        else "lock for this interpreter as it is: no flag installs a lock over packages it does not keep or move from (torch above all)"
    )
    held.sort(key=lambda f: (f.package is not None, f.rule != INSTALLED))
    raise UsageError(f"{path} was made for another target than {environment.interpreter}: " + _listed(held), hint=hint)


def _said(finding: Finding) -> str:
    return f"{finding.package}: {finding.message}" if finding.package else finding.message


def _listed(findings: list[Finding], most: int = 4) -> str:
    shown = "; ".join(_said(f) for f in findings[:most])
    return shown + (f"; and {len(findings) - most} more" if len(findings) > most else "")


def retarget(plan: LockPlan, environment: Environment) -> LockPlan:
    """The plan for this interpreter's Python and platform (``--force-target``), every package's
    'before' as installed now. Kept packages are what the lock keeps (``installable`` said so)."""
    target = environment.target
    packages = tuple(pkg if pkg.action is Action.KEEP else dataclasses.replace(pkg, installed_version=target.installed.get(pkg.name)) for pkg in plan.packages)
    summary = TargetSummary(python=target.python_version, platform=target.platform, cuda=plan.target.cuda)
    return dataclasses.replace(plan, target=summary, packages=packages)


def install_lock(
    path: Path,
    *,
    python: str,
    uv: str,
    wheel_cache: WheelCache,
    defs: Definitions | None = None,
    dry_run: bool = False,
    force_target: bool = False,
    fetcher: HttpFetcher,
    progress: DownloadProgress | None = None,
    offline: bool = False,
    env: Mapping[str, str] | None = None,
) -> InstallReport:
    """Install exactly the lock at ``path`` into ``python``'s environment (see the module docstring).

    ``defs``: the index definitions the lock is checked with (default: the bundled ones).
    ``fetcher`` (the caller's: the command session's ``download_fetcher``) downloads the
    lock's http(s) wheels when they are not handed to uv, and names the hosts plain http may reach;
    ``offline`` takes every wheel from the wheel cache or local files.
    """
    if defs is None:
        defs = load_definitions()
    probe = start_probe(python)
    try:
        environment = probe.result()
    finally:
        probe.close()
    plan, misfit = installable(path, check_lock(path, defs, target=environment.target), environment, force_target=force_target)
    gate_installed(plan, defs, environment)  # what the lock would leave broken here is named before anything is installed
    local = _all_local(plan, path.parent)
    if not misfit and (local or not offline):
        report = _install_with_uv(
            path,
            plan,
            python=python,
            uv=uv,
            environment=environment,
            dry_run=dry_run,
            local=local,
            insecure=fetcher.transport.allow_insecure_hosts,
            wheel_cache=wheel_cache,
            env=env,
            confirming=Confirming(defs=defs, wheel_cache=wheel_cache, fetcher=fetcher, progress=progress, offline=offline),
        )
        return dataclasses.replace(report, lock_path=str(path))
    with wheel_cache.in_use():
        plan = _localized(plan, path.parent, wheel_cache)  # the wheels through our wheel cache
        if misfit:
            plan = retarget(plan, environment)
        report = install_plan(
            plan,
            python=python,
            uv=uv,
            wheel_cache=wheel_cache,
            dry_run=dry_run,
            fetcher=fetcher,
            progress=progress,
            offline=offline,
            env=env,
            environment=environment,
            defs=defs,
        )
    return dataclasses.replace(report, lock_path=str(path))


def install_plan_via_uv(
    plan: LockPlan,
    *,
    python: str,
    uv: str,
    environment: Environment,
    wheel_cache: WheelCache,
    insecure: tuple[str, ...] = (),
    env: Mapping[str, str] | None = None,
    command: str = "resolve-gpu-stack install",
    confirming: Confirming | None = None,
) -> InstallReport:
    """A freshly resolved ``plan`` (every wheel to install with its index's sha256) installed the
    way ``install_lock`` installs a lock: written as a temporary pylock and handed to uv, which
    downloads, checks and installs overlapped; uv's dry run checked first, everything checked after."""
    with tempfile.TemporaryDirectory(prefix="resolve-gpu-stack-install-") as tmp:
        path = write_lock(plan, Path(tmp) / "pylock.install.toml", command=command)
        return _install_with_uv(
            path,
            plan_from_lock(read_lock(path)),
            python=python,
            uv=uv,
            environment=environment,
            dry_run=False,
            local=False,
            insecure=insecure,
            wheel_cache=wheel_cache,
            env=env,
            confirming=confirming,
        )


def uv_lock_args(path: Path, *, uv: str, python: str, local: bool) -> list[str]:
    """``uv pip install -r PYLOCK``: uv downloads each wheel from the lock's own URL (or takes its
    path), checks it against the lock's sha256 and installs it, all overlapped; ``--no-config``
    (with ``uv_environment``'s scrubbing) so no uv.toml or ``UV_*`` variable changes what is
    installed; ``--no-build``: nothing is ever built (a lock we install has wheels only);
    ``--offline`` when every wheel is a local file."""
    return [uv, "pip", "install", "--python", python, "--no-config", "--no-build", *(["--offline"] if local else []), "-r", str(path)]


def _install_with_uv(
    path: Path,
    plan: LockPlan,
    *,
    python: str,
    uv: str,
    environment: Environment,
    dry_run: bool,
    local: bool,
    insecure: tuple[str, ...],
    wheel_cache: WheelCache,
    env: Mapping[str, str] | None,
    confirming: Confirming | None = None,
) -> InstallReport:
    """The lock as it is, to uv (``installable`` said so: kept packages, listed or not, are
    installed here at their kept versions); unless ``dry_run``, its compiled wheels' verdicts
    confirmed from their verified files first (``confirming``)."""
    for pkg in plan.packages:
        if pkg.action is not Action.KEEP and pkg.url and local_wheel_path(pkg.url, path.parent) is None:
            check_url_allowed(pkg.url, insecure)  # uv would fetch plain http from anywhere
    if confirming is not None and not dry_run:
        confirming.confirm(plan, lambda url: local_wheel_path(url, path.parent), environment)
    uv_env = uv_environment(dict(os.environ if env is None else env))
    download = download_summary(plan, wheel_cache) if dry_run else None
    return run_uv_checked(
        plan, uv_lock_args(path, uv=uv, python=python, local=local), python=python, env=uv_env, before_env=environment, dry_run=dry_run, download=download
    )


def _all_local(plan: LockPlan, base: Path) -> bool:
    """Whether every wheel the lock installs is a local file (uv may then run ``--offline``)."""
    return all(local_wheel_path(p.url, base) is not None for p in plan.packages if p.action is not Action.KEEP and p.url)


__all__ = ["install_lock", "installable", "local_wheel_path", "retarget", "uv_lock_args"]
