"""``--build 'NAME @ URL'`` from the command line: the source trees fetched before the resolve
(``env/sources.py``), for every command that resolves a request from the flags."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..model.request import ResolveRequest
    from ..model.source import SourceTree
    from .options import CommandOptions


def with_sources(request: ResolveRequest, options: CommandOptions, env: Mapping[str, str], say: Callable[[str], None]) -> ResolveRequest:
    """``request`` with its ``--build 'NAME @ URL'`` trees fetched (git, or a local folder) into
    the wheel cache and read (``env/sources.py``), each asked for as a requirement of its own
    (``NAME==VERSION``, as pip takes a direct reference). Unchanged without one."""
    specs = [s for s in request.build_specs if s.source is not None]
    if not specs:
        return request
    from ..env.sources import fetch_source
    from .assemble import Session, command_session

    with command_session(lambda: Session(options.network)) as session:  # the command's own (app.py opens it): its cache folder outlives this block
        cache = session.wheel_cache()
        trees = tuple(fetch_source(s, cache, env) for s in specs)
    if not options.output.quiet:
        for t in trees:
            say(f"{t.name} {t.version}: source {t.origin.reference} ({t.sha256[:12]})")
    return _with_trees(request, trees)


def _with_trees(request: ResolveRequest, trees: tuple[SourceTree, ...]) -> ResolveRequest:
    """``request`` with the fetched ``trees``, each asked for at its version (unless asked already)."""
    import dataclasses

    from ..model.request import requested

    asked = {r.name for r in request.with_}
    extra = tuple(f"{t.name}=={t.version}" for t in trees if t.name not in asked)
    return dataclasses.replace(request, build_sources=trees, with_=(*request.with_, *requested(extra, "--with")))
