"""`resolve-gpu-stack lock`: resolve, then write pylock.<name>.toml and/or a constraints file.

Two modes:

* ``lock -o FILE ...``: one plan from the flags, written to each FILE (no config is read);
* ``lock`` without ``-o`` in a project with a config (``[tool.resolve-gpu-stack]`` in
  pyproject.toml, or gpu-stack.toml; see ``config``): every configured target (or those named with
  ``--target``) is resolved through ONE fetcher and ONE finder, so pages and metadata shared by
  the targets are read once, and each target's outputs are written. Resolver flags given on the
  command line override the config's values for every selected target.

With flags of a target of its own (``--python``/``--platform``/``--installed``) and no ``-o`` it
prints the plan, like ``resolve``; with none of these and no config there is nothing to lock (exit 2,
as ``check`` says).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ..data.definitions import load_definitions
from ..data.snapshots import PLACEHOLDER_BASE
from ..errors import CrawlError, ResolveGpuStackError, UsageError, WheelNotCached, WriteError
from ..lock.check import listed_lookup, place_files
from ..lock.constraints import overrides_path, render_overrides
from ..lock.files import lock_format, render_lock, write_texts
from ..model import Action
from ..model.inputs import inputs_digest
from ..net.download import fetch_verified, files_to_fetch
from ..net.wheelcache import FetchedWheel
from ..urls import redact_url
from . import common
from . import options as O
from . import settings as S
from .building import build_plan_of
from .config import lock_inputs, resolve_definitions, resolve_request
from .downloads import check_output_names, download_progress, fill_plan_hashes, refuse_synthetic
from .render import say_story
from .sources import sdist_metadata_of, with_sources
from .targets import discover_configured, own_target, selected_targets

if TYPE_CHECKING:
    from ..data.definitions import Definitions
    from ..model import LockPlan
    from .assemble import ResolveParts, Session
    from .config import ProjectConfig, TargetConfig


@dataclass(frozen=True, slots=True, kw_only=True)
class LockSettings(O.ResolveOptions):
    outputs: tuple[Path, ...] = ()  # -o FILE...
    configured: O.ConfigOptions = field(default_factory=O.ConfigOptions)
    allow_synthetic: bool = False
    allow_outside_project: bool = False


def read(args: argparse.Namespace, env: Mapping[str, str]) -> LockSettings:
    return LockSettings(
        **O.resolve_fields(args, env),
        outputs=tuple(args.output),
        configured=O.config_options(args),
        allow_synthetic=args.allow_synthetic,
        allow_outside_project=args.allow_outside_project,
    )


def run(settings: LockSettings, env: Mapping[str, str], session: Session) -> int:
    config = _config_to_lock(settings)
    return lock_targets(config, settings, env, session) if config is not None else _run_single(settings, env, session)


def _config_to_lock(settings: LockSettings) -> ProjectConfig | None:
    """The project config whose targets to lock, or None: one plan from the flags."""
    configured = settings.configured.asked
    if settings.outputs and configured:
        raise UsageError(
            "-o writes one plan from flags; --config/--target lock the configured targets",
            hint="drop -o to lock the configured targets, or drop --config/--target",
        )
    # Flags that describe a target of their own (--python/--platform/--installed) make `lock` the
    # resolver's twin (`lock --torch nightly ...` == `resolve-gpu-stack --torch nightly ...`) unless
    # --config/--target ask for the configured targets.
    if settings.outputs or (own_target(settings.typed) and not configured):
        return None
    config = discover_configured(settings.configured)
    if config is None:  # as `check` says it: no project, no -o, no target of its own: nothing to lock
        raise UsageError(
            "nothing to lock: no config (pyproject.toml with [tool.resolve-gpu-stack], or gpu-stack.toml) in this directory or its parents",
            hint="pass -o FILE to lock one plan from the flags, --config FILE, or print a plan with `resolve-gpu-stack resolve`",
        )
    return config


# -- one plan from flags ---------------------------------------------------------------------------


def _run_single(settings: LockSettings, env: Mapping[str, str], session: Session) -> int:
    check_output_names(settings.outputs)  # a bad name fails before anything is resolved
    plan, defs = common.run_resolve(settings, env, session)
    if not settings.outputs:
        common.emit_plan(settings.output, plan)
        return 0
    _say_story(settings, plan)
    command = common.command_line(sys.argv[1:] if sys.argv[1:] else ["lock"])
    _write_outputs(settings, env, session, plan, defs, settings.outputs, command=command)
    return 0


def _say_story(settings: LockSettings, plan: LockPlan, label: str = "") -> None:
    """The plan's story on stderr (the lock's notes hold it too), as `resolve` prints it; nothing with -q."""
    if not settings.output.quiet:
        say_story(plan.notes, plan.overrides, O.say, label=label)


def _write_outputs(
    settings: LockSettings, env: Mapping[str, str], session: Session, plan: LockPlan, defs: Definitions, paths: Sequence[Path], *, command: str, label: str = ""
) -> None:
    """Write one plan to each of ``paths`` (the format follows each file name), all or none."""
    written = write_texts(_rendered(settings, env, session, plan, defs, paths, command=command))
    _say_written(written, label, quiet=settings.output.quiet)


def _rendered(
    settings: LockSettings, env: Mapping[str, str], session: Session, plan: LockPlan, defs: Definitions, paths: Sequence[Path], *, command: str
) -> list[tuple[Path, str]]:
    """(path, text) of each output; nothing is written yet. Folders are created here. ``settings.sources.snapshot``
    is the snapshot the plan was resolved from, if any."""
    for path in paths:
        if path.is_dir():
            raise WriteError(f"cannot write {common.shown(path)}: it is a directory", hint="name a file (pylock.<name>.toml or *.txt)")

    plan = build_plan_of(settings, env, session, plan, defs)  # --build: build rows get their wheel (built once; the wheel cache keeps it)
    if any(path.name.endswith(".toml") for path in paths):  # a pylock needs a sha256 for every wheel it lists
        if not settings.allow_synthetic:  # before any download: no download makes a stand-in digest real
            refuse_synthetic(plan.packages, settings.sources.snapshot, doing="lock")
        try:
            plan = fill_plan_hashes(settings, session, plan, defs)
        except WheelNotCached as err:  # a PyTorch nightly row has no sha256 on its index: a pylock needs the wheel once
            raise _every_uncached(session, plan, err) from None
        plan = _learn_kept_hashes(settings, session, plan, defs)
        if settings.sources.snapshot is not None:
            plan = _placed(settings, session, plan, defs)
    texts = [(path, render_lock(plan, path, command=command)) for path in paths]
    texts += _overrides_texts(plan, paths, command=command)
    for path, _ in texts:
        _make_folder(path)
    return texts


def _overrides_texts(plan: LockPlan, paths: Sequence[Path], *, command: str) -> list[tuple[Path, str]]:
    """Beside each constraints file, the overrides file uv needs with it (``lock.constraints.render_overrides``):
    a framework's own pins the plan overrode would otherwise make ``uv pip install -c`` unsatisfiable."""
    out = []
    for path in paths:
        if lock_format(path)[0] != "constraints":
            continue
        beside = overrides_path(path)
        if any(beside.resolve() == p.resolve() for p in paths):
            raise UsageError(
                f"{common.shown(beside)} is both an output and the overrides file of {common.shown(path)}",
                hint=f"a constraints file gets its overrides file beside it ({beside.name}): name the outputs apart",
            )
        out.append((beside, render_overrides(plan, command=command, constraints=path.name)))
    return out


def _every_uncached(session: Session, plan: LockPlan, err: WheelNotCached) -> WheelNotCached:
    """The error of a pylock that needs wheels the wheel cache lacks while downloads are off (a
    snapshot replay): every such wheel named (not only the first met), and the routes that work."""
    cache = session.wheel_cache()
    missing = []
    for pkg in files_to_fetch(plan):
        if pkg.sha256:
            continue
        try:  # the cache alone, as the failed fill asked it: a hit returns, a miss raises
            fetch_verified(pkg.url or "", sha256=None, size=pkg.size, cache=cache, fetcher=None, filename=pkg.filename, offline=True)
        except WheelNotCached:
            missing.append(pkg)
    hint = f"{err.hint}; or write a constraints file (-o NAME.txt), which needs no sha256"
    if len(missing) <= 1:
        return WheelNotCached(err.url, err.cause, hint=hint)
    names = ", ".join(p.filename or p.name for p in missing)
    return WheelNotCached(
        err.url, f"{err.cause}; {len(missing)} wheels to lock have no sha256 on their index and are not in the wheel cache: {names}", hint=hint
    )


def _placed(settings: LockSettings, session: Session, plan: LockPlan, defs: Definitions) -> LockPlan:
    """A plan replayed from a snapshot names PyPI files by PyPI's own layout (``/packages/...``
    below the host of the configured PyPI). A configured PyPI whose simple API is not at
    ``/simple/`` (devpi's ``/root/pypi/+simple/``, Artifactory's ``/api/pypi/NAME/simple``) lays
    files out its own way: each is looked up on its page there and takes the URL given there; one
    that cannot be placed keeps the recorded layout, and the lock and stderr say so. Nothing to do
    for PyPI's layout or the snapshot's placeholder PyPI."""
    pypi = defs.indexes["pypi"].url
    if not pypi or pypi == PLACEHOLDER_BASE.format(name="pypi") or urlsplit(pypi).path.rstrip("/") == "/simple":
        return plan
    if not any(p.index == "pypi" and p.url for p in plan.packages):
        return plan
    with common.make_parts(session, settings.sources, defs, live=True) as parts:
        placement = place_files(plan, listed_lookup(parts.finder, [plan]), index="pypi")
    if not placement.unplaced:
        return placement.plan
    names = ", ".join(p.filename or p.name for p, _ in placement.unplaced)
    why = placement.unplaced[0][1] if len({w for _, w in placement.unplaced}) == 1 else "see each file"
    note = (
        f"{len(placement.unplaced)} PyPI file(s) could not be placed on {redact_url(pypi)} ({why}); their URLs follow PyPI's /packages/ "
        f"layout, which a mirror may not serve: {names}"
    )
    if not settings.output.quiet:
        print(f"warning: {note}", file=sys.stderr)
    return replace(placement.plan, notes=(*placement.plan.notes, note))


def _learn_kept_hashes(settings: LockSettings, session: Session, plan: LockPlan, defs: Definitions) -> LockPlan:
    """The plan with a sha256 for each kept package whose index row has none (a nightly torch or
    triton), learned once through the wheel cache (downloaded when online; with --snapshot only a
    cached wheel counts). Listed at its installed version and hash, uv finds a kept package
    satisfied and ``uv pip sync`` keeps it. One that cannot be hashed stays unlisted (the pylock
    names it under ``kept-unlisted``, and ``check`` warns)."""
    missing = [(p, url) for p in plan.packages if p.action is Action.KEEP and (url := p.url) and not p.sha256]
    if not missing:
        return plan
    offline = settings.sources.downloads_off
    cache, fetcher = session.wheel_cache(), session.download_fetcher(defs)
    learned: dict[str, FetchedWheel] = {}
    with download_progress(settings.output) as progress:
        for pkg, url in missing:
            try:
                learned[pkg.name] = fetch_verified(
                    url, sha256=None, size=pkg.size, cache=cache, fetcher=fetcher, filename=pkg.filename, progress=progress, offline=offline
                )
            except ResolveGpuStackError as err:
                if not settings.output.quiet:
                    print(
                        f"note: {pkg.name} {pkg.version} is kept but not listed in the pylock (its sha256 is unknown: {err}){_unlisted_because(err)}",
                        file=sys.stderr,
                    )
    return replace(
        plan, packages=tuple(replace(p, sha256=learned[p.name].sha256, size=learned[p.name].size) if p.name in learned else p for p in plan.packages)
    )


def _unlisted_because(err: ResolveGpuStackError) -> str:
    """When a kept package cannot be listed, exactly why, and what lists it (then `uv pip sync` keeps it)."""
    if isinstance(err, WheelNotCached):
        return (
            "; its index lists no sha256 and, replaying a snapshot, a kept wheel's sha256 is learnt only from the wheel cache: "
            "add --live-fallback to download it once, then `uv pip sync` of the lock keeps it (without, it would uninstall it)"
        )
    return "; `uv pip sync` of this lock would uninstall it: apply it with `uv pip install -r`, or lock again where its wheel can be downloaded"


def _make_folder(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WriteError(
            f"cannot write {common.shown(path)}: cannot create its folder ({exc.strerror or exc})",
            hint="nothing was written; make the folder writable (or pick another output path)",
        ) from None


def _say_written(paths: Sequence[Path], label: str = "", *, quiet: bool = False) -> None:
    if quiet:  # -q: nothing but errors
        return

    for path in paths:
        O.say(f"{label}wrote {common.shown(path)}")
    for path in paths:
        beside = overrides_path(path)
        if path.name.endswith(".txt") and beside in paths:
            O.say(f"{label}apply the constraints with their overrides: uv pip install -c {common.shown(path)} --overrides {common.shown(beside)} PACKAGE...")


# -- every configured target -----------------------------------------------------------------------


def lock_targets(config: ProjectConfig, settings: LockSettings, env: Mapping[str, str], session: Session) -> int:
    """Resolve the selected targets through one finder and write their outputs. 1 if any failed."""
    config, targets, extra = selected_targets(config, settings, settings.configured.targets)
    if not settings.allow_outside_project:
        _refuse_outside(config, targets)
    bundled = load_definitions()  # read once: resolved with, and what each target's inputs digest is computed under (lock_inputs)
    defs = resolve_definitions(config, env, bundled)
    settings = dataclasses.replace(settings, sources=dataclasses.replace(settings.sources, snapshot=config.snapshot))  # the config's, unless --snapshot
    records = next((r for t in targets if (r := S.text_of(t.settings, "scan_records"))), None)  # the config's scan-records (the flag wins)
    if records is not None and settings.network.scan_records is None:
        session.use_scan_records(records)
    failed = 0
    staged: list[tuple[str, list[tuple[Path, str]]]] = []
    with common.make_parts(session, settings.sources, defs) as parts:  # one crawl for all targets: pages and metadata are memoized by URL
        for target in targets:
            command = " ".join(w for w in (config.regenerate_command(target), extra) if w)
            texts = _lock_one(config, target, parts, settings, env, session, command, bundled)
            failed += texts is None
            if texts is not None:
                staged.append((f"{target.name}: ", texts))
    _write_staged(staged, quiet=settings.output.quiet)
    if failed:
        print(f"{failed} of {len(targets)} targets failed; their lock files were left as they were", file=sys.stderr)
    return 1 if failed else 0


def _refuse_outside(config: ProjectConfig, targets: Sequence[TargetConfig]) -> None:
    """Every output of the selected targets lies in the config's folder (or below it)."""
    root = config.root.resolve()
    for target in targets:
        for out in target.outputs:
            if not out.resolve().is_relative_to(root):
                raise UsageError(
                    f"{config.where}: target {target.name!r}: output {out} is outside the project folder {root}",
                    hint="a config writes only below its own folder; pass --allow-outside-project if you mean it",
                )


def _write_staged(staged: Sequence[tuple[str, list[tuple[Path, str]]]], *, quiet: bool = False) -> None:
    """Every output of every target that has a plan, in one all-or-nothing write."""
    write_texts([item for _, texts in staged for item in texts])
    for label, texts in staged:
        _say_written([path for path, _ in texts], label, quiet=quiet)


def _lock_one(
    config: ProjectConfig,
    target: TargetConfig,
    parts: ResolveParts,
    settings: LockSettings,
    env: Mapping[str, str],
    session: Session,
    command: str,
    bundled: Definitions,
) -> list[tuple[Path, str]] | None:
    """Resolve one target and render its outputs; None (with the error printed) when it has no plan."""
    label = f"{target.name}: "
    try:
        request = with_sources(resolve_request(target), settings, env, session, O.say, defs=parts.defs)
        plan = parts.resolve(request, sdist_metadata=sdist_metadata_of(request, settings, env, session, defs=parts.defs))
        inputs = lock_inputs(config, target, bundled)
        plan = replace(plan, inputs=inputs, inputs_digest=inputs_digest(inputs))
        _say_story(settings, plan, label)
        return _rendered(settings, env, session, plan, parts.defs, target.outputs, command=command)
    except (CrawlError, WriteError):
        raise
    except ResolveGpuStackError as err:
        print(f"error: {label}{err}", file=sys.stderr)
        if err.hint:
            print(f"hint: {err.hint}", file=sys.stderr)
        return None
