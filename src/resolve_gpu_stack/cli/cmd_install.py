"""`resolve-gpu-stack install`: resolve, download and verify every wheel, install it with uv.

The installed torch is never reinstalled or replaced (see ``install``); ``--dry-run`` downloads
nothing and runs no uv: it compares the plan with the environment and prints, per package,
installed -> planned, why, and the bytes an install would download.
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from rich.console import Console
from rich.markup import escape

from ..data.definitions import load_definitions
from ..env.confirm import Confirming
from ..env.install import gate_installed, install_plan, preview_plan
from ..env.lockinstall import install_lock, install_plan_via_uv
from ..env.probe import active_venv_interpreter, default_interpreter, locate_interpreter, start_probe
from ..errors import UsageError, WheelNotCached
from ..index.variants import variant_refusal
from ..lock.files import write_lock
from ..model import Action
from ..model.declared import NamedInterpreter, PythonVersion
from ..net.download import fill_hashes
from ..resolver.planning import UPGRADE_WORDS
from ..urls import has_credentials
from . import common, render
from . import options as O
from . import settings as S
from .building import build_needs, build_plan_of
from .downloads import check_output_names, download_progress, find_uv, refuse_synthetic
from .render import print_story, story_json
from .tables import Column, fitted_table, print_fitted

if TYPE_CHECKING:
    from ..data.definitions import Definitions
    from ..env.install import InstallReport, InstallRow
    from ..env.probe import Environment
    from ..model import LockPlan
    from ..net.wheelcache import WheelCache
    from .assemble import Session


@dataclass(frozen=True, slots=True, kw_only=True)
class InstallSettings(O.ResolveOptions):
    dry_run: bool = False
    system: bool = False
    uv: str | None = None  # --uv PATH (None: the default uv)
    write_lock: Path | None = None  # -o LOCKFILE
    lock: Path | None = None  # --lock PYLOCK: install exactly it
    force_target: bool = False


def read(args: argparse.Namespace, env: Mapping[str, str]) -> InstallSettings:
    return InstallSettings(
        **O.resolve_fields(args, env),
        dry_run=args.dry_run,
        system=args.system,
        uv=args.uv,
        write_lock=args.output,
        lock=args.lock,
        force_target=args.force_target,
    )


def interpreter_of(settings: InstallSettings, env: Mapping[str, str]) -> str:
    """The interpreter to install into; a declared ``--python 3.12`` is a usage error here.

    Like uv: with no ``--python``, the active virtual environment, and never the system's
    interpreter unless ``--system`` says so.
    """
    flag = settings.typed.python
    if flag is None:
        venv = active_venv_interpreter(env)
        if venv is not None:
            return venv
        if not settings.system:
            raise UsageError(
                "no virtual environment is active, and install does not touch the system Python unless told to",
                hint="activate one (uv venv && . .venv/bin/activate), pass --python .venv/bin/python, or pass --system",
            )
        return default_interpreter(env)
    if isinstance(flag, PythonVersion):
        raise UsageError(
            f"install needs a real interpreter, not a declared Python version ({flag})",
            hint="pass --python /path/to/venv/bin/python, or activate the virtual environment",
        )
    return locate_interpreter(flag, search_path=env.get("PATH"))


def run(settings: InstallSettings, env: Mapping[str, str], session: Session) -> int:
    if settings.lock is not None or settings.force_target:
        return run_lock(settings, env, session)

    _check_output_flag(settings)
    python = interpreter_of(settings, env)
    settings = dataclasses.replace(
        settings, typed=settings.typed.replaced("python", NamedInterpreter(python))
    )  # resolve for exactly the interpreter we install into
    uv = find_uv(settings.uv, env)
    # One probe for the whole run: the resolver's target and the install's "before" are the same
    # environment (uv's dry run and the check after the install still see the environment as it is).
    probe = start_probe(python)
    try:
        plan, defs = common.run_resolve(settings, env, session, probe=probe)
    finally:
        probe.close()
    plan = _gate_installed(plan, defs, probe.result())
    cache = session.wheel_cache()
    refusal = variant_refusal(((p.name, p.filename) for p in plan.packages if p.action is not Action.KEEP), doing="install")
    if settings.dry_run:
        if refusal is not None:  # the plan is shown; the install itself would stop here
            O.say(f"warning: install (not a dry run) will refuse this plan: {refusal}")
        emit_report(settings.output, preview_plan(plan, python=python, wheel_cache=cache))
        if not settings.output.quiet and any(p.action is Action.BUILD for p in plan.packages):
            for line in build_needs(settings.uv, env, plan, python=python):
                O.say(line)
        return 0
    if refusal is not None:  # uv cannot install a variant wheel: stopped before anything is downloaded or changed
        raise refusal
    snapshot = settings.sources.snapshot
    if snapshot is not None:  # before any download: no wheel matches a stand-in digest (it was: downloaded, then an integrity error)
        refuse_synthetic([p for p in plan.packages if p.action is not Action.KEEP], snapshot, doing="install")
    built = any(p.action is Action.BUILD for p in plan.packages)
    if built:  # --build: each build row gets its wheel, built against this environment's torch (or found in the wheel cache)
        plan = build_plan_of(settings, env, session, plan, defs, uv=settings.uv, environment=probe.result())
    if not built and _uv_downloads(settings, plan, defs):
        # Every wheel has its index's sha256: uv downloads, checks and installs them overlapped
        # (a temporary pylock, as `install --lock` does), after its dry run is checked.

        fetcher = session.download_fetcher(defs)
        with download_progress(settings.output) as progress:
            report = install_plan_via_uv(
                plan,
                python=python,
                uv=uv,
                environment=probe.result(),
                wheel_cache=cache,
                insecure=settings.network.fetch.transport.allow_insecure_hosts,
                env=env,
                command=_command(),
                confirming=Confirming(defs=defs, wheel_cache=cache, fetcher=fetcher, progress=progress),
            )
    else:
        try:
            report = _install_downloaded(settings, env, session, plan, defs, python=python, uv=uv, cache=cache, environment=probe.result())
        except WheelNotCached as err:
            raise WheelNotCached(err.url, err.cause, hint=f"{err.hint}; or {_lock_route(snapshot, python)}") from None
    emit_report(settings.output, report)
    return 0


def _gate_installed(plan: LockPlan, defs: Definitions, environment: Environment) -> LockPlan:
    """``plan`` past the install door's gate (``env/install.gate_installed``), with a note for each
    package kept broken by --keep-broken that only the environment's files told (the report tells it)."""
    extra = tuple(note for note in gate_installed(plan, defs, environment) if note not in plan.notes)
    return dataclasses.replace(plan, notes=(*plan.notes, *extra)) if extra else plan


def _lock_route(snapshot: Path | None, python: str) -> str:
    """The route from a snapshot to an install that downloads: lock the snapshot's plan (its URLs and
    hashes), then install exactly the lock (uv downloads and verifies each wheel)."""
    snap = shlex.quote(str(snapshot))
    target = shlex.quote(python)
    return (
        f"lock the snapshot's plan and install the lock: `resolve-gpu-stack lock --snapshot {snap} --python {target} [the same flags] -o pylock.x.toml` "
        f"(--live-fallback there too when an index lists no sha256 for a wheel), then `resolve-gpu-stack install --lock pylock.x.toml --python {target}`"
    )


def _check_output_flag(settings: InstallSettings) -> None:
    """``-o``: not with ``--dry-run``, and a lock file name; said before anything is probed or resolved."""
    if settings.write_lock is None:
        return
    if settings.dry_run:
        raise UsageError(
            "--dry-run writes nothing, -o included (a lock needs every wheel's sha256, which may mean downloads)",
            hint="write the lock with `resolve-gpu-stack lock -o FILE`",
        )

    check_output_names([settings.write_lock])


def _uv_downloads(settings: InstallSettings, plan: LockPlan, defs: Definitions) -> bool:
    """Whether uv may download the plan's wheels itself: online, no lock to write, every wheel
    hashed by its index, and no credentials given in an --index URL (those are ours to send)."""
    return settings.sources.snapshot is None and settings.write_lock is None and _all_hashed(plan) and not _credentials_in(defs)


def _command() -> str:
    return common.command_line(sys.argv[1:] or ["install"])


def _install_downloaded(
    settings: InstallSettings,
    env: Mapping[str, str],
    session: Session,
    plan: LockPlan,
    defs: Definitions,
    *,
    python: str,
    uv: str,
    cache: WheelCache,
    environment: Environment,
) -> InstallReport:
    """The plan's wheels downloaded and verified by us (hashes filled in, ``-o`` written), then installed."""
    offline = settings.sources.downloads_off
    lock_path = None
    fetcher = session.download_fetcher(defs)
    with download_progress(settings.output) as progress:
        plan = fill_hashes(plan, cache=cache, fetcher=fetcher, progress=progress, offline=offline)
        if settings.write_lock is not None:
            lock_path = str(write_lock(plan, settings.write_lock, command=_command()))
            if not settings.output.quiet:  # -q: nothing but errors
                O.say(f"wrote {lock_path}")
        report = install_plan(
            plan,
            python=python,
            uv=uv,
            wheel_cache=cache,
            dry_run=False,  # run() answered --dry-run before anything was downloaded
            fetcher=fetcher,
            progress=progress,
            offline=offline,
            env=env,
            environment=environment,
            defs=defs,
        )
    return dataclasses.replace(report, lock_path=lock_path) if lock_path is not None else report


def _all_hashed(plan: LockPlan) -> bool:
    """Whether every wheel the plan installs has a sha256 from its index (no download needed to learn one)."""
    return all(p.sha256 for p in plan.packages if p.action is not Action.KEEP)


def _credentials_in(defs: Definitions) -> bool:
    return any(has_credentials(d.url) for d in defs.indexes.values() if d.url)


def emit_report(output: O.OutputOptions, report: InstallReport) -> None:
    if common.output_format(output) == "json":
        render.print_json({**report.to_json(), **story_json(report.notes, report.overrides)}, sys.stdout)
    else:
        print_report_table(report, sys.stdout)


_STYLE = {"keep": "green", "install": "cyan", "upgrade": "yellow", "downgrade": "bold red", "change": "magenta", "build": "bold blue"}


def print_report_table(report: InstallReport, out: TextIO) -> None:
    """The install report; for a dry run also each wheel's size, why each FlashInfer component (and
    torch) moves, and the download total.

    Names and versions are never cut: at a narrow width the index and size columns wrap or go.
    """
    console = Console(file=out, highlight=False, soft_wrap=False)
    unchanged = all(row.action.value == "keep" for row in report.rows)
    title = f"{('Nothing would change' if unchanged else 'Would change') if report.dry_run else 'Installed'} in {report.python}"
    columns = [
        Column("package", keep=True),
        Column("action", keep=True),
        Column("installed", keep=True),
        Column("planned" if report.dry_run else "after", keep=True),
        Column("index", drop=3),
        Column("size", drop=2, justify="right"),
    ]
    table, width = fitted_table(
        console, columns[: 6 if report.dry_run else 5], [_report_cells(row, dry_run=report.dry_run) for row in report.rows], title=title, title_justify="left"
    )
    print_fitted(console, table, width)
    for line in _summary(report):
        console.print(line, markup=False, soft_wrap=True)
    print_story(console, report.notes, report.overrides)


def _summary(report: InstallReport) -> list[str]:
    """Below the table: how many packages each action touches; for a dry run why torch and each
    FlashInfer component move; the download total."""
    counts = Counter(row.action.value for row in report.rows)
    summary = ", ".join(f"{n} {a}" for a, n in sorted(counts.items()))
    lines = [("dry run, nothing changed: " if report.dry_run else "") + summary, *(_moves(report) if report.dry_run else ())]
    if report.dry_run and set(counts) <= {"keep"}:
        return [f"dry run: nothing would change, every package is kept ({summary})", *_moves(report)]
    return lines + ([download_line(report)] if report.download is not None and report.download.files else [])


def _report_cells(row: InstallRow, *, dry_run: bool) -> list[str]:
    """One row of the install report: name, action, before, after (planned for a dry run), index, size (dry run)."""
    style = _STYLE.get(row.action.value, "")
    after = str(row.version) if dry_run else (str(row.after) if row.after is not None else "-")
    cells = [escape(row.name), f"[{style}]{row.action.value}[/]", str(row.before) if row.before is not None else "-", after, row.index]
    return cells + (["" if row.action.value == "keep" else _size(row.size)] if dry_run else [])


def _moves(report: InstallReport) -> list[str]:
    """Why torch and each FlashInfer component a dry run would change moves, and why a kept
    FlashInfer stays where a newer one exists (its reason names the newer)."""
    return [
        f"  {row.name} {row.action.value} {f'{row.before} -> {row.version}' if row.before is not None and row.before != row.version else row.version}: {row.reason}"
        for row in report.rows
        if (row.action.value != "keep" and (row.name.startswith("flashinfer") or row.name == "torch"))
        or (row.action.value == "keep" and UPGRADE_WORDS in row.reason)
    ]


def _size(size: int | None) -> str:
    if size is None:
        return "?"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


def download_line(report: InstallReport) -> str:
    d = report.download
    assert d is not None
    to_fetch = d.files - d.cached
    sized = to_fetch - len(d.unknown_size)
    line = f"would download {to_fetch} of {d.files} wheels"
    if sized:  # every count adds up: sized + unknown = to download, to download + cached = wheels
        line += f": {_size(d.bytes)}" + (f" ({d.bytes:,} bytes)" if d.bytes >= 1000 else "") + (f" for {sized} of them" if d.unknown_size else "")
    if d.unknown_size:
        line += f"{';' if sized else ':'} {len(d.unknown_size)} of a size the index does not give ({', '.join(d.unknown_size)})"
    if d.cached:
        line += f"; {d.cached} already in the wheel cache"
    return line


# -- install --lock FILE: exactly a lock, nothing resolved ----------------------------------------


def lock_conflicts(settings: InstallSettings) -> list[str]:
    """The resolver flags typed with ``--lock`` (they would be silently ignored: refused instead)."""
    typed = [S.BY_NAME[name].flag for name in settings.typed.values if name != "python"]
    sources = settings.sources
    other = (
        ("--index", bool(sources.indexes)),
        ("--package-index", bool(sources.package_indexes)),
        ("--snapshot", sources.snapshot is not None),
        ("-o/--output", settings.write_lock is not None),
    )
    return typed + [flag for flag, given in other if given]


def run_lock(settings: InstallSettings, env: Mapping[str, str], session: Session) -> int:
    """``install --lock PYLOCK [--force-target]``."""
    lock = settings.lock
    if lock is None:
        raise UsageError("--force-target only applies to --lock PYLOCK", hint="pass --lock pylock.<name>.toml, or leave --force-target out")
    conflicts = lock_conflicts(settings)
    if conflicts:
        raise UsageError(
            f"install --lock installs exactly what the lock says; {', '.join(conflicts)} would change what is resolved, and nothing is",
            hint="leave them out, or leave out --lock to resolve and install",
        )
    if not lock.is_file():
        raise UsageError(f"--lock {lock}: no such file", hint="pass a pylock.<name>.toml written by `resolve-gpu-stack lock` or `wheelhouse`")
    python = interpreter_of(settings, env)
    uv = find_uv(settings.uv, env)
    defs = load_definitions()
    with download_progress(settings.output, dry_run=settings.dry_run) as progress:
        report = install_lock(
            lock,
            python=python,
            uv=uv,
            wheel_cache=session.wheel_cache(),
            defs=defs,
            dry_run=settings.dry_run,
            force_target=settings.force_target,
            fetcher=session.download_fetcher(defs),
            progress=progress,
            env=env,
        )
    emit_report(settings.output, report)
    return 0
