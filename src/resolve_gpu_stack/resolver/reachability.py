"""Degrade, don't die, when an optional host is down (issue 50).

A plan needs an index only for what it must take from there. An index marked ``optional`` in its
``indexes/NAME.toml`` (FlashInfer's) that cannot be read leaves out the components that live only
there, when the user did not ask for them by name: the plan is made without them, with one warning
naming the host, what was left out and what that costs (the index's ``without``). A part the user
asked for by name is an error naming the host. Pure: the finder remembers what could not be read.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from packaging.utils import NormalizedName, canonicalize_name

from ..data.definitions import Definitions, PageLocation, RouteContext
from ..errors import CrawlError
from ..index.finder import Finder


@dataclass(frozen=True, slots=True, kw_only=True)
class LeftOut:
    """The components left out because their optional index could not be read, and the warning."""

    components: tuple[NormalizedName, ...]  # what the plan keeps
    left_out: tuple[NormalizedName, ...] = ()
    warning: str | None = None  # said once (a warning, and a note of the plan)


def host_of(location: PageLocation) -> str:
    """The host (and port) of a page, as a user types it."""
    return urlsplit(location.url).netloc.rpartition("@")[2]


def leave_out_unreachable(
    finder: Finder, defs: Definitions, components: Sequence[NormalizedName], asked: Collection[str], ctx: RouteContext, *, flashinfer: str = ""
) -> LeftOut:
    """``components`` less those with a page on an optional index that could not be read, unless
    asked for by name (``asked``: the ``--with`` names), which raises naming the host; so does
    flashinfer-python when every page of it is there (``flashinfer``: the ``--flashinfer`` choice,
    ``nightly``: FlashInfer's own index alone has them)."""
    kept: list[NormalizedName] = []
    gone: list[NormalizedName] = []
    down: list[tuple[PageLocation, CrawlError]] = []
    named = {canonicalize_name(n) for n in asked}
    for name in components:
        failed = finder.unreadable(name, ctx)
        if name == defs.flashinfer.python and failed and len(failed) == _pages(defs, name, ctx):
            hint = "--flashinfer latest takes its releases from PyPI; --flashinfer none plans without FlashInfer"
            raise required_unreachable(name, failed, defs, asked_as=f"asked for (--flashinfer {flashinfer or 'nightly'})", leave_out=hint)
        if not failed or name == defs.flashinfer.python:
            kept.append(name)
            continue
        if name in named:
            raise required_unreachable(name, failed, defs)
        gone.append(name)
        down += failed
    for name in sorted(named - set(components)):  # --with NAME of a package only an optional index has
        failed = finder.unreadable(name, ctx)
        if failed:
            raise required_unreachable(name, failed, defs)
    if not gone:
        return LeftOut(components=tuple(kept))
    return LeftOut(components=tuple(kept), left_out=tuple(gone), warning=_warning(gone, down, defs))


def _pages(defs: Definitions, name: str, ctx: RouteContext) -> int:
    """How many pages (legacy ones aside) ``name`` is read from under ``ctx``."""
    return sum(not loc.route.legacy for loc in defs.pages_for(name, ctx))


def required_unreachable(
    name: str, failed: Sequence[tuple[PageLocation, CrawlError]], defs: Definitions, *, asked_as: str = "asked for by name", leave_out: str = ""
) -> CrawlError:
    """The error of a part asked for whose optional index cannot be read: it names the host."""
    loc, exc = failed[0]
    index = defs.indexes[loc.index]
    return CrawlError(
        loc.url,
        f"{name} was {asked_as} and lives on the {index.name} index, whose host {host_of(loc)} cannot be read: {exc.cause}",
        hint=f"try again when {host_of(loc)} answers, point --index {index.name}=URL at a mirror, or "
        + (leave_out or f"leave {name} out (a plan without it is made)"),
    )


def _warning(gone: Sequence[str], down: Sequence[tuple[PageLocation, CrawlError]], defs: Definitions) -> str:
    loc, exc = down[0]
    index = defs.indexes[loc.index]
    cost = f": {index.without}" if index.without else ""
    return f"the {index.name} index's host {host_of(loc)} cannot be read ({exc.cause}): planned without {', '.join(gone)}{cost}"


def unreachable_words(finder: Finder, name: str, ctx: RouteContext, defs: Definitions) -> CrawlError | None:
    """The error for a package asked for by name (``candidates NAME``) whose optional index cannot
    be read, or None."""
    failed = finder.unreadable(name, ctx)
    return required_unreachable(name, failed, defs) if failed else None


__all__ = ["LeftOut", "host_of", "leave_out_unreachable", "required_unreachable", "unreachable_words"]
