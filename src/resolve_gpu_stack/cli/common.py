"""What the commands share, on their settings values (``options``): index definitions, the
session and the resolve parts, the target and the request of the typed settings, the output
format and the command line as typed.

Light at import time (``--help`` imports it): the fetchers, the resolver and rich are imported by
the functions that use them.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ..data.definitions import load_definitions
from ..data.snapshots import PLACEHOLDER_BASE
from ..env.gpu import query_nvidia_smi, visible_archs
from ..env.probe import default_interpreter, inspect_environment, locate_interpreter
from ..errors import IndexDefinitionError, UsageError
from ..model.declared import PythonVersion, declared_target
from ..model.request import TORCH
from ..resolver.overrides import unused_without_note  # not resolver.resolve: this module loads before the first request, the resolver after it
from ..urls import normalize_base_url, redact_url
from . import render, userconfig
from . import settings as S
from .options import say
from .sources import sdist_metadata_of, with_sources

if TYPE_CHECKING:
    from packaging.utils import NormalizedName

    from ..data.definitions import Definitions
    from ..env.probe import ProbeRun
    from ..model import LockPlan
    from ..model.request import ResolveRequest
    from ..model.target import Target
    from ..net.source import Source
    from .assemble import ResolveParts, Session
    from .options import OutputOptions, ResolveOptions, SourceOptions


# -- indexes and fetchers --------------------------------------------------------------------------


def package_index_overrides(sources: SourceOptions) -> dict[str, str]:
    """``--package-index NAME=URL`` as {package: url} (the definitions check the name and the URL)."""
    out = {}
    for item in sources.package_indexes:
        name, sep, url = item.partition("=")
        if not sep or not name.strip() or not url.strip():
            raise UsageError(f"--package-index {redact_url(item)!r}: expected NAME=URL", hint="e.g. --package-index flash-attn=https://wheels.example/simple/")
        out[name.strip()] = url.strip()
    return out


def index_overrides(sources: SourceOptions) -> dict[str, str]:
    """``--index NAME=URL`` as {name: url}."""
    out = {}
    for item in sources.indexes:
        name, sep, url = item.partition("=")
        if not sep or not name or not url:
            raise UsageError(f"--index {redact_url(item)!r}: expected NAME=URL", hint="e.g. --index pypi=https://mirror.example/simple/")
        # a layout prefix (``flat:URL``) is the definitions' to check; the URL after it is checked here
        layout, colon, rest = url.partition(":")
        prefix = layout + colon if colon and "://" in rest and "://" not in layout and "/" not in layout else ""
        try:
            out[name.strip()] = prefix + normalize_base_url(url[len(prefix) :])
        except IndexDefinitionError as exc:
            raise UsageError(f"--index {name.strip()}: {exc.message}", hint=exc.hint) from None
    return out


def definitions(sources: SourceOptions, env: Mapping[str, str], *, need_pypi: bool = True, replay: bool = True) -> Definitions:
    """Index definitions with --index overrides; PyPI's URL from uv/pip configuration (a snapshot
    replays its PyPI pages under it: see ``replay_pypi_url``)."""
    overrides = index_overrides(sources)
    if "pypi" not in overrides:
        if sources.snapshot is not None and replay:
            overrides["pypi"] = replay_pypi_url(env)
        elif need_pypi:
            overrides["pypi"] = userconfig.discover_pypi_url(env)
    return load_definitions().with_index_urls(overrides).with_package_indexes(package_index_overrides(sources))


def replay_pypi_url(env: Mapping[str, str]) -> str:
    """The PyPI base a snapshot's PyPI pages are replayed under: the user's PyPI (uv/pip
    configuration, else uv's default), so that the recorded relative file URLs become URLs that
    install; the snapshot's placeholder only when no PyPI can be found at all (then said on stderr)."""
    try:
        return userconfig.discover_pypi_url(env)
    except UsageError:
        placeholder = PLACEHOLDER_BASE.format(name="pypi")
        print(
            f"warning: no PyPI index is configured (uv/pip): PyPI files from the snapshot get the placeholder base {placeholder}, "
            "which does not install; pass --index pypi=URL",
            file=sys.stderr,
        )
        return placeholder


@contextmanager
def make_parts(
    session: Session, sources: SourceOptions, defs: Definitions, *, snapshot: Path | None = None, fetcher: Source | None = None, live: bool = False
) -> Iterator[ResolveParts]:
    """A resolve's parts (``assemble.ResolveParts``) from the command's ``session``: over ``fetcher``
    when given; live when ``live``; else the replay of ``snapshot`` (else ``--snapshot``), with what
    it lacks fetched live under ``--live-fallback``; else live, the HTTP cache then keeping the
    computed plans (a replay is as fast as reusing). Use it in a ``with`` block."""
    if snapshot is None and not live:
        snapshot = sources.snapshot
    with session.resolve_parts(defs, source=fetcher, snapshot=snapshot, live_fallback=sources.live_fallback) as parts:
        yield parts


# -- the target and the request --------------------------------------------------------------------


def target_of(
    typed: S.TypedSettings, env: Mapping[str, str], probe: ProbeRun | None = None, *, for_plan: bool = False
) -> tuple[Target, dict[NormalizedName, tuple[str, ...]]]:
    """(Target, installed requirements by name) from --python/--platform/--installed.

    ``probe``: an ``env.probe.ProbeRun`` of exactly the interpreter ``--python`` names, already
    started by the caller (``install`` probes once, and installs against that same environment).
    ``for_plan``: a plan is made for it, so the tool's own environment with no torch (and no
    --cuda) is refused, naming it (the README's `.venv` is the tool's; the target is another)."""
    python = typed.python
    if isinstance(python, PythonVersion):
        return declared_target(python, typed.platform, typed.installed), {}
    value = locate_interpreter(python, search_path=env.get("PATH")) if python is not None else default_interpreter(env)
    if "platform" in typed or "installed" in typed:
        raise UsageError("--platform and --installed describe a declared target", hint="use them with --python X.Y, not with an interpreter path")
    environment = probe.result() if probe is not None else inspect_environment(value)
    if for_plan and typed.cuda is None and TORCH not in environment.target.installed and _is_own(environment.prefix):
        raise UsageError(
            f"no CUDA label: {value} is resolve-gpu-stack's own environment ({environment.prefix}), and it has no torch",
            hint="name the environment that holds the torch you keep with --python /path/to/venv/bin/python (the tool is best installed "
            "apart: `uv tool install .`); or pass --cuda cuNNN to plan a torch into this one",
        )
    requires = {name: tuple(d.requires_dist) for name, d in environment.distributions.items()}
    return environment.target, requires


def _is_own(prefix: str) -> bool:
    """Whether an environment's prefix is the one this tool runs in."""
    try:
        return Path(prefix).resolve() == Path(sys.prefix).resolve()
    except OSError:
        return False


def request_of(
    options: ResolveOptions, env: Mapping[str, str], session: Session, probe: ProbeRun | None = None, defs: Definitions | None = None
) -> ResolveRequest:
    """The request of the settings typed, the table's defaults for the rest (``probe``: see ``target_of``;
    ``defs``: the indexes a dynamic source tree's build environment is made from); a ``--build 'NAME @ URL'``
    tree fetched through the command's ``session``."""
    values = S.complete(options.typed.values)
    target, requires = target_of(options.typed, env, probe, for_plan=True)
    if "gpus" not in options.typed and not options.typed.declares:
        values["gpus"] = S.BY_NAME["gpus"].parse(local_gpus(env))
    request = S.build_request(values, target=target, installed_requires=requires)

    environment = probe.result() if probe is not None and request.target.interpreter is not None else None
    return with_sources(request, options, env, session, say, defs=defs or definitions(options.sources, env), environment=environment)


def local_gpus(env: Mapping[str, str]) -> tuple[str, ...]:
    """A probed target's default GPUs: the compute capabilities nvidia-smi lists (none without it)."""
    return visible_archs(query_nvidia_smi(None, env))


def run_resolve(
    options: ResolveOptions,
    env: Mapping[str, str],
    session: Session,
    fetcher: Source | None = None,
    defs: Definitions | None = None,
    probe: ProbeRun | None = None,
) -> tuple[LockPlan, Definitions]:
    """(plan, definitions) for the settings, through the command's ``session`` (``fetcher``: a source
    it made, e.g. a recorder; ``probe``: see ``target_of``)."""
    defs = defs or definitions(options.sources, env)
    request = request_of(options, env, session, probe, defs)

    environment = probe.result() if probe is not None and request.target.interpreter is not None else None
    backend = sdist_metadata_of(request, options, env, session, defs=defs, environment=environment)
    with make_parts(session, options.sources, defs, fetcher=fetcher) as parts:
        plan = parts.resolve(request, sdist_metadata=backend)
    _warn_unused_without(options.output, request, plan)
    return plan, defs


def _warn_unused_without(output: OutputOptions, request: ResolveRequest, plan: LockPlan) -> None:
    """A ``--without`` that left nothing out is said on stderr too (a misspelt name would otherwise go unseen)."""
    if output.quiet:
        return
    for name in sorted(request.without_names):
        if unused_without_note(name) in plan.notes:
            say(f"warning: {unused_without_note(name)}")


# -- output ----------------------------------------------------------------------------------------


def output_format(output: OutputOptions) -> str:
    return output.format or ("table" if sys.stdout.isatty() else "json")


def emit_plan(output: OutputOptions, plan: LockPlan) -> None:
    if output_format(output) == "json":
        render.print_json(render.plan_to_json(plan), sys.stdout)
    else:
        from .tables import print_plan_table  # rich, for a table only: +57 ms on a plain resolve printing JSON

        print_plan_table(plan, sys.stdout)


def command_line(argv: Sequence[str]) -> str:
    """The command as a user would retype it, with any credentials removed."""
    return "resolve-gpu-stack " + " ".join(shlex.quote(redact_url(a) if "://" in a else a) for a in argv)


def shown(path: Path) -> str:
    """``path`` relative to the current directory when it is below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
