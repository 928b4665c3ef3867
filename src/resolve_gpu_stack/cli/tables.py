"""The tables people read (rich): a plan's, the candidates', and the fitted tables of the other
commands (package and version never cut; the other columns wrap, then go, at a narrow width).

Imported by the commands that print tables; ``resolve``/``lock`` import it only for a table
(``common.emit_plan``): JSON, the output when stdout is no terminal, does not load rich.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TextIO, TypedDict

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ..index.finder import PageVisit
from ..model import LockPlan
from . import render
from .render import candidates_to_json, coupling_words, print_story

if TYPE_CHECKING:
    from rich.box import Box
    from rich.console import JustifyMethod
    from typing_extensions import Unpack  # Python 3.10's typing has none (a type only)

    from ..resolver.candidates import CandidateRow  # a type only: resolving does not load the candidates command

_ACTION_STYLE = {"keep": "green", "install": "cyan", "upgrade": "yellow", "downgrade": "bold red", "change": "magenta", "build": "bold blue"}


class TableArgs(TypedDict, total=False):
    """What a fitted table passes on to rich's ``Table``."""

    title: str | None
    title_justify: JustifyMethod
    box: Box | None
    pad_edge: bool


_COLOR_SYSTEMS: Mapping[str, Literal["standard", "256", "truecolor", "windows"]] = {
    "standard": "standard",
    "256": "256",
    "truecolor": "truecolor",
    "windows": "windows",
}  # a console's color system, as rich names it, passed on to a wider one


_ACTION_STYLE = {"keep": "green", "install": "cyan", "upgrade": "yellow", "downgrade": "bold red", "change": "magenta", "build": "bold blue"}


def print_plan_table(plan: LockPlan, out: TextIO) -> None:
    """The plan as a table that fits the terminal: package and version are never cut (a user copies
    them), the action wraps, and at a narrow width the index, then the coupling go (a mismatch is in
    the notes too); notes and overrides wrap at the terminal's width."""
    console = Console(file=out, highlight=False, soft_wrap=False, width=None if out.isatty() else 160)
    t = plan.target
    title = f"Plan for Python {t.python} on {t.platform}, CUDA {t.cuda}"
    stack_first = sorted(plan.packages, key=lambda p: (p.coupling.value == "agnostic" and not p.name.startswith("flashinfer"), p.name))
    cells = []
    for p in stack_first:
        action = p.action.value
        if p.installed_version is not None and action not in ("keep",):
            action += f" (from {p.installed_version})"
        style = _ACTION_STYLE.get(p.action.value, "")
        coupling = coupling_words(p)
        cells.append(
            (
                escape(p.name),
                escape(str(p.version)),
                f"[{style}]{escape(action)}[/]" if style else escape(action),
                escape(p.index),
                f"[bold red]{escape(coupling)}[/]" if p.abi_mismatch else escape(coupling),
            )
        )
    columns = (Column("package", keep=True), Column("version", keep=True), Column("action"), Column("index", drop=3), Column("coupling", drop=2))
    table, width = fitted_table(console, columns, cells, title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    print_fitted(console, table, width)
    counts: dict[str, int] = {}
    for p in plan.packages:
        counts[p.action.value] = counts.get(p.action.value, 0) + 1
    console.print(", ".join(f"{n} {a}" for a, n in sorted(counts.items())))
    print_story(console, plan.notes, plan.overrides)


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a fitted table. ``keep`` columns (names, versions) are never cut nor wrapped;
    the others wrap (``fold``) and, from the highest ``drop`` rank down, are left out when even
    wrapped they do not fit."""

    header: str
    keep: bool = False
    drop: int = 0  # 0: never dropped; higher: dropped first
    justify: JustifyMethod = "left"
    whole: bool = False  # never wrapped: shown whole, or (``drop``) left out (a wheel's tags folded over three lines read as three tags)


_WRAPPED_MIN = 12  # the narrowest a wrapping column gets before it is dropped


def fitted_table(
    console: Console,
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    *,
    narrower: Sequence[Sequence[str]] | None = None,
    **table_args: Unpack[TableArgs],
) -> tuple[Table, int]:
    """(a rich Table, the width to print it at) for ``console``'s width.

    ``narrower``: the same rows in shorter words, shown instead when ``rows`` do not fit whole
    (every column at its own width, nothing wrapped). Never cuts a kept column: the others wrap
    down to a few characters, then go, highest ``drop`` first; if the kept ones alone are wider
    than the console, the table is printed at its own width and the terminal wraps the lines.
    """

    def longest(rows: Sequence[Sequence[str]], i: int) -> int:
        return max([len(columns[i].header), *(Text.from_markup(row[i]).cell_len for row in rows)])

    widths = [longest(rows, i) for i in range(len(columns))]
    if narrower is not None and sum(widths) + 3 * len(columns) + 1 > console.width:
        rows = narrower
        widths = [longest(rows, i) for i in range(len(columns))]
    shown = list(range(len(columns)))

    def needed() -> int:
        return sum(widths[i] if columns[i].keep or columns[i].whole else min(widths[i], _WRAPPED_MIN) for i in shown) + 3 * len(shown) + 1

    while needed() > console.width and any(columns[i].drop for i in shown):
        shown.remove(max((i for i in shown if columns[i].drop), key=lambda i: columns[i].drop))
    return _table([columns[i] for i in shown], [widths[i] for i in shown], [[row[i] for i in shown] for row in rows], table_args), max(console.width, needed())


def _table(columns: Sequence[Column], widths: Sequence[int], rows: Sequence[Sequence[str]], table_args: TableArgs) -> Table:
    """The rich Table of the columns shown, a kept or whole one at its own width, the others folding."""
    table = Table(**table_args)
    for c, width in zip(columns, widths, strict=True):
        whole = c.keep or c.whole
        if whole:
            table.add_column(c.header, no_wrap=True, overflow="ignore", justify=c.justify, min_width=width)
        else:
            table.add_column(c.header, no_wrap=False, overflow="fold", justify=c.justify, min_width=None)
    for row in rows:
        table.add_row(*row)
    return table


def print_fitted(console: Console, table: Table, width: int) -> None:
    """Print at ``width``; wider than the console means a console of that width (the terminal wraps)."""
    if width > console.width:
        colors = _COLOR_SYSTEMS.get(console.color_system or "")
        console = Console(file=console.file, highlight=False, soft_wrap=False, width=width, color_system=colors)
    console.print(table)


# version is never cut; tags are shown whole or not at all; the rest wrap, and at a narrow width
# size, then index, then tags go
_CANDIDATE_COLUMNS = (
    Column("version", keep=True),
    Column("tags", drop=2, whole=True),
    Column("index", drop=3),
    Column("sha256"),
    Column("size", drop=4, justify="right"),
    Column("built for", drop=1),
    Column("fits"),
)


def _variant_words(r: CandidateRow) -> str:
    """A variant wheel's label and properties, for the table's "built for" column."""
    if r.variant is None:
        return ""
    return f"variant {r.variant}" + (f": {r.variant_properties}" if r.variant_properties else "")


def _short_hash(digest: str) -> str:
    return digest if len(digest) <= 13 else digest[:12] + "…"


def print_candidates(rows: list[CandidateRow], visits: list[PageVisit], fmt: str, out: TextIO, *, package: str = "") -> None:
    if fmt == "json":
        render.print_json(candidates_to_json(package, rows, visits), out)
        return

    console = Console(file=out, highlight=False, width=None if out.isatty() else 220)

    def cells(digest: Callable[[str], str]) -> list[tuple[str, ...]]:
        return [
            (
                escape(r.version),
                escape(r.tags),
                r.index,
                digest(r.sha256) if r.sha256 else (f"no hash (metadata sha256 {digest(r.metadata_sha256)})" if r.metadata_sha256 else "no hash"),
                f"{r.size:,}" if r.size else "",
                escape(r.built_for or _variant_words(r)),
                ("yes" if r.fits else escape(f"no: {r.why_not}")) + (escape(f" ({r.abi})") if r.abi else ""),
            )
            for r in rows
        ]

    # hashes shorten (the first 12 hex digits; --format json has them whole) before anything wraps
    table, width = fitted_table(console, _CANDIDATE_COLUMNS, cells(lambda h: h), narrower=cells(_short_hash), title_justify="left")
    print_fitted(console, table, width)
    for v in visits:
        state = f"{v.files} files" if v.found else "not read" if v.warnings else "404 (no such page)"
        console.print(f"{v.location.url}: {state}", markup=False)
        for w in v.warnings:
            console.print(f"  warning: {w}", markup=False)
