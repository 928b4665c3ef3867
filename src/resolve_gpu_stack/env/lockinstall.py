"""Install exactly what a pylock says (I/O edge: disk, uv; the network only through uv, or for
``--force-target``).

``install_lock`` is the fleet's half of ``install``: CI resolves and writes a lock once, every node
applies it. Nothing is resolved and no index is read. The lock itself goes to uv (``uv pip
install -r PYLOCK``), which downloads each wheel from the lock's own URL (or takes its ``path``,
relative to the lock file, as a wheelhouse writes them), checks its size and sha256 against the
lock, and installs, overlapping all three: as fast as plain uv. Around it, what makes ours safe:

- a lock made for another target (Python minor, platform, or another installed torch / kept
  package, listed or ``kept-unlisted``) is refused with every difference named, before uv runs;
- uv's dry run on the lock comes first (it downloads no wheel) and any change the lock does not
  make (torch above all) is refused with nothing changed (``install.run_uv_checked``);
- afterwards every package is at its locked version and every kept dist-info byte-identical;
- a wheel that is not the one the lock names (size or sha256) is refused by uv before it installs
  anything, as a ``UvError`` with a hint;
- http(s) URLs pass our URL policy first (plain http only for loopback or
  ``--allow-insecure-host``); credentials come from ~/.netrc, which uv reads as we do (a lock
  never holds any).

Two cases keep the older path (every wheel fetched into the wheel cache and verified by us, then
``install.install_plan``): ``force_target`` with a difference (the plan is re-targeted to the
interpreter as it is, kept packages at their installed versions: a plan uv's reading of the lock
would not match), and ``offline`` with wheels that are not local files (only our wheel cache can
answer for them).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from ..errors import UsageError
from ..lock.files import read_lock
from ..lock.pylock import plan_from_lock
from ..model import Action, LockedPackage, LockPlan, TargetSummary
from ..net.download import DownloadProgress, WheelCache, store_local
from ..net.urlpolicy import check_url_allowed
from .install import InstallReport, download_summary, install_plan, run_uv_checked, uv_environment
from .probe import Environment, start_probe

if TYPE_CHECKING:
    from ..net.http import HttpFetcher


def load_lock_plan(path: Path, *, wheel_cache: WheelCache) -> LockPlan:
    """The plan of a pylock, with every local (``path`` / ``file:``) wheel verified into the cache.

    Local wheels keep their place in the plan under a ``file:`` URL; the cache then answers for
    them, so no request is ever made for a local file.
    """
    plan = plan_from_lock(read_lock(path))
    packages = tuple(_localize(pkg, path.parent, wheel_cache) for pkg in plan.packages)
    return dataclasses.replace(plan, packages=packages)


def local_wheel_path(url: str, base: Path) -> Path | None:
    """The file a lock's wheel location names, when it is local: a relative or absolute path
    (relative to ``base``, the lock's folder) or a ``file:`` URL; None for http(s)."""
    if url.startswith("file:"):
        return Path(unquote(urlsplit(url).path))
    if "://" in url:
        return None
    return (base / url).resolve()


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


def target_differences(plan: LockPlan, environment: Environment) -> list[str]:
    """What differs between the target a plan was made for and this interpreter (empty: none)."""
    target = environment.target
    out = []
    want = _minor(plan.target.python)
    if want and want != target.python_version:
        out.append(f"Python {want} in the lock, {target.python_version} here")
    if plan.target.platform and plan.target.platform != target.platform:
        out.append(f"platform {plan.target.platform} in the lock, {target.platform} here")
    for pkg in plan.packages:
        now = target.installed.get(pkg.name)
        if pkg.action is Action.KEEP and now != pkg.version:
            out.append(f"the lock keeps the installed {pkg.name} {pkg.version}, here {pkg.name} is {now if now is not None else 'not installed'}")
        elif pkg.action is not Action.KEEP and now != pkg.installed_version:
            was = f"at {pkg.installed_version}" if pkg.installed_version is not None else "not installed"
            out.append(f"the lock expects {pkg.name} {was}, here it is {now if now is not None else 'not installed'}")
    return out


def retarget(plan: LockPlan, environment: Environment) -> LockPlan:
    """The plan for this interpreter as it is (``--force-target``): its Python and platform, kept
    packages at their installed versions, every other package's 'before' as installed now."""
    target = environment.target
    packages = []
    for pkg in plan.packages:
        now = target.installed.get(pkg.name)
        if pkg.action is Action.KEEP:
            if now is None:
                raise UsageError(f"the lock keeps {pkg.name} {pkg.version}, which {environment.interpreter} does not have; even with --force-target there is nothing to keep",
                                 hint=f"install {pkg.name} first, or lock for this interpreter")
            packages.append(dataclasses.replace(pkg, version=now))
        else:
            packages.append(dataclasses.replace(pkg, installed_version=now))
    summary = TargetSummary(python=target.python_version, platform=target.platform, cuda=plan.target.cuda)
    return dataclasses.replace(plan, target=summary, packages=tuple(packages))


def install_lock(
    path: Path,
    *,
    python: str,
    uv: str,
    wheel_cache: WheelCache,
    dry_run: bool = False,
    force_target: bool = False,
    fetcher: HttpFetcher | None = None,
    progress: DownloadProgress | None = None,
    offline: bool = False,
    env: Mapping[str, str] | None = None,
) -> InstallReport:
    """Install exactly the lock at ``path`` into ``python``'s environment (see the module docstring).

    ``fetcher`` downloads the lock's http(s) wheels when they are not handed to uv (one is made,
    and closed, when None and not ``offline``); ``offline`` takes every wheel from the wheel cache
    or local files.
    """
    probe = start_probe(python)  # runs while the lock is read
    try:
        plan = plan_from_lock(read_lock(path))
    except BaseException:
        probe.close()
        raise
    environment = probe.result()
    differences = target_differences(plan, environment)
    if differences and not force_target:
        raise UsageError(
            f"{path} was made for another target than {environment.interpreter}: " + "; ".join(differences),
            hint="lock for this interpreter, or pass --force-target to install it anyway (kept packages stay as installed)",
        )
    local = _all_local(plan, path.parent)
    if not differences and (local or not offline):
        insecure = fetcher.transport.allow_insecure_hosts if fetcher is not None else ()
        report = _install_with_uv(path, plan, python=python, uv=uv, environment=environment, dry_run=dry_run, local=local, insecure=insecure,
                                  wheel_cache=wheel_cache, env=env)
        return dataclasses.replace(report, lock_path=str(path))
    plan = load_lock_plan(path, wheel_cache=wheel_cache)  # the wheels through our wheel cache
    if differences:
        plan = retarget(plan, environment)
    if fetcher is None and not offline:
        from ..net.http import HttpFetcher

        with HttpFetcher(cache=None) as own:
            report = install_plan(plan, python=python, uv=uv, wheel_cache=wheel_cache, dry_run=dry_run, fetcher=own, progress=progress, offline=offline, env=env,
                                  environment=environment)
    else:
        report = install_plan(plan, python=python, uv=uv, wheel_cache=wheel_cache, dry_run=dry_run, fetcher=fetcher, progress=progress, offline=offline, env=env,
                              environment=environment)
    return dataclasses.replace(report, lock_path=str(path))


def install_plan_via_uv(plan: LockPlan, *, python: str, uv: str, environment: Environment, wheel_cache: WheelCache,
                        insecure: tuple[str, ...] = (), env: Mapping[str, str] | None = None, command: str = "resolve-gpu-stack install") -> InstallReport:
    """A freshly resolved ``plan`` (every wheel to install with its index's sha256) installed the
    way ``install_lock`` installs a lock: written as a temporary pylock and handed to uv, which
    downloads, checks and installs overlapped; uv's dry run checked first, everything checked after."""
    import tempfile

    from ..lock.files import write_lock

    with tempfile.TemporaryDirectory(prefix="resolve-gpu-stack-install-") as tmp:
        path = write_lock(plan, Path(tmp) / "pylock.install.toml", command=command)
        return _install_with_uv(path, plan_from_lock(read_lock(path)), python=python, uv=uv, environment=environment, dry_run=False,
                                local=False, insecure=insecure, wheel_cache=wheel_cache, env=env)


def uv_lock_args(path: Path, *, uv: str, python: str, local: bool) -> list[str]:
    """``uv pip install -r PYLOCK``: uv downloads each wheel from the lock's own URL (or takes its
    path), checks it against the lock's sha256 and installs it, all overlapped; ``--no-config``
    (with ``uv_environment``'s scrubbing) so no uv.toml or ``UV_*`` variable changes what is
    installed; ``--offline`` when every wheel is a local file."""
    return [uv, "pip", "install", "--python", python, "--no-config", *(["--offline"] if local else []), "-r", str(path)]


def _install_with_uv(path: Path, plan: LockPlan, *, python: str, uv: str, environment: Environment, dry_run: bool, local: bool,
                     insecure: tuple[str, ...], wheel_cache: WheelCache, env: Mapping[str, str] | None) -> InstallReport:
    """The lock as it is, to uv (the target checked already; kept-unlisted packages are installed
    at their kept versions, or ``target_differences`` said so)."""
    for pkg in plan.packages:
        if pkg.action is not Action.KEEP and pkg.url and local_wheel_path(pkg.url, path.parent) is None:
            check_url_allowed(pkg.url, insecure)  # uv would fetch plain http from anywhere
    uv_env = uv_environment(dict(os.environ if env is None else env))
    download = download_summary(plan, wheel_cache) if dry_run else None
    return run_uv_checked(plan, uv_lock_args(path, uv=uv, python=python, local=local), python=python, env=uv_env, before_env=environment,
                          dry_run=dry_run, download=download)


def _all_local(plan: LockPlan, base: Path) -> bool:
    """Whether every wheel the lock installs is a local file (uv may then run ``--offline``)."""
    return all(local_wheel_path(p.url, base) is not None for p in plan.packages if p.action is not Action.KEEP and p.url)


def _minor(python: str) -> str:
    parts = python.split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else python


__all__ = ["install_lock", "load_lock_plan", "local_wheel_path", "retarget", "target_differences", "uv_lock_args"]
