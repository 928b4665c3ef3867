"""``--build 'NAME @ URL'`` from the command line: the source trees fetched before the resolve
(``env/sources.py``), for every command that resolves a request from the flags."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name

from ..errors import BuildError
from ..model import Action, Coupling, LockedPackage, LockPlan, TargetSummary, WheelMetadata
from ..model.request import requested

if TYPE_CHECKING:
    from pathlib import Path

    from packaging.utils import NormalizedName

    from ..data.definitions import Definitions
    from ..env.probe import Environment
    from ..env.sources import TreeMetadata
    from ..index.sdist import SdistMetadata
    from ..model import IndexFile
    from ..model.request import ResolveRequest
    from ..model.source import SourceTree
    from .assemble import Session
    from .options import ResolveOptions


def with_sources(
    request: ResolveRequest,
    options: ResolveOptions,
    env: Mapping[str, str],
    session: Session,
    say: Callable[[str], None],
    *,
    defs: Definitions,
    environment: Environment | None = None,
) -> ResolveRequest:
    """``request`` with its ``--build 'NAME @ URL'`` trees fetched (git, or a local folder) into
    the ``session``'s wheel cache and read (``env/sources.py``), each asked for as a requirement of its own
    (``NAME==VERSION``, as pip takes a direct reference). Unchanged without one. A tree whose
    metadata is dynamic is asked in a build environment with the kept torch (``environment``'s
    own, the probed target of ``install``; else its wheel, from ``defs``' PyTorch index)."""
    specs = [s for s in request.build_specs if s.source is not None]
    if not specs:
        return request
    # the build machinery, for a --build only (every resolve comes here): +94 ms
    from ..env.build import source_metadata
    from ..env.sources import fetch_source
    from .buildenv import build_context

    def metadata_of(name: NormalizedName, archive: Path, digest: str) -> TreeMetadata:
        plan = _kept_torch_plan(request, name)
        with build_context(options, env, session, plan, defs, environment=environment) as ctx:
            return source_metadata(name, archive, digest, plan, ctx)

    trees = tuple(fetch_source(s, session.wheel_cache(), env, metadata_of) for s in specs)
    if not options.output.quiet:
        for t in trees:
            say(f"{t.name} {t.version}: source {t.origin.reference} ({t.sha256[:12]})")
    return _with_trees(request, trees)


def sdist_metadata_of(
    request: ResolveRequest,
    options: ResolveOptions,
    env: Mapping[str, str],
    session: Session,
    *,
    defs: Definitions,
    environment: Environment | None = None,
) -> SdistMetadata | None:
    """The resolve's way to the metadata of a ``--build NAME`` sdist from an index whose PKG-INFO is
    not static (core metadata < 2.2, or Requires-Dist / Requires-Python / Provides-Extra listed as
    Dynamic; ``index/sdist.py``): the sdist downloaded into the ``session``'s wheel cache (sha256
    checked; the build uses the same file) and its build backend asked ``prepare_metadata_for_build_wheel``
    in a build environment with the kept torch (``env/build.py``'s ``source_metadata``: once per the
    sdist's sha256, the kept torch, Python and platform). None without such a ``--build`` name."""
    if not any(s.source is None for s in request.build_specs):
        return None
    # the build machinery, for a --build only (every resolve comes here): +94 ms
    from ..env.build import cached_source_metadata, source_metadata
    from .buildenv import build_context

    asked: dict[str, WheelMetadata] = {}  # by sdist URL: several wirings of one resolve ask once
    lock = threading.Lock()

    def metadata(file: IndexFile, pkg_info: WheelMetadata) -> WheelMetadata:
        with lock:
            if file.url not in asked:
                asked[file.url] = _backend_metadata(file, pkg_info)
            return asked[file.url]

    def _backend_metadata(file: IndexFile, pkg_info: WheelMetadata) -> WheelMetadata:
        plan = _kept_torch_plan(request, file.name)
        known = cached_source_metadata(session.wheel_cache(), file.sha256, plan) if file.sha256 else None  # asked before: nothing made
        if known is None:
            with build_context(options, env, session, plan, defs, environment=environment) as ctx:
                fetched = ctx.fetch(file.url, sha256=file.sha256, size=file.size, filename=file.filename)
                known = source_metadata(file.name, fetched.path, fetched.sha256, plan, ctx)
        version, requires, requires_python = known
        if version != file.version:
            raise BuildError(f"--build {file.name}: the build backend of {file.filename} says it is version {version}, not {file.version}")
        return WheelMetadata(
            name=file.name,
            version=version,
            requires_dist=requires,
            requires_python=requires_python,
            provides_extra=pkg_info.provides_extra,
            metadata_version=pkg_info.metadata_version,
        )

    return metadata


def _kept_torch_plan(request: ResolveRequest, name: NormalizedName) -> LockPlan:
    """The plan of a build environment before the resolve: the target and the kept torch (the
    installed one, or ``--installed torch==V`` of a declared target)."""
    torch = request.installed_torch
    if torch is None:
        raise BuildError(
            f"--build {name}: its metadata is dynamic (setup.py), asked of its build backend in a build environment with the kept torch, and no torch is kept",
            hint="name the torch the build is for: --installed torch==VERSION (with --python X.Y), or --python PATH of an environment that has it",
        )
    kept = request.kept_torch  # its CUDA by the one rule: a probed PyPI torch has no label, its pin or version.py says
    label = request.cuda or (kept.label if kept is not None else None)
    row = LockedPackage(name=canonicalize_name("torch"), version=torch, action=Action.KEEP, index="installed", coupling=Coupling.TORCH)
    target = TargetSummary(python=request.target.python_version, platform=request.target.platform, cuda=str(label) if label is not None else None)
    return LockPlan(target=target, packages=(row,))


def _with_trees(request: ResolveRequest, trees: tuple[SourceTree, ...]) -> ResolveRequest:
    """``request`` with the fetched ``trees``, each asked for at its version (unless asked already)."""
    asked = {r.name for r in request.with_}
    extra = tuple(f"{t.name}=={t.version}" for t in trees if t.name not in asked)
    return dataclasses.replace(request, build_sources=trees, with_=(*request.with_, *requested(extra, "--with")))
