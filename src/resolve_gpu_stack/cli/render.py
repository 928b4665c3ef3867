"""Rendering plans for people (a rich table) and programs (one JSON object). CLI layer."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TextIO, TypeAlias, TypedDict

from ..index.finder import PageVisit
from ..model import LockedPackage, LockPlan, Override
from ..model.codec import override_to_dict, plan_to_dict
from ..urls import redact_url

if TYPE_CHECKING:
    from rich.box import Box
    from rich.console import Console, JustifyMethod
    from rich.table import Table
    from typing_extensions import Unpack  # Python 3.10's typing has none (a type only)

    from ..resolver.candidates import CandidateRow  # a type only: resolving does not load the candidates command

PLAN_SCHEMA = "resolve-gpu-stack/plan/v1"

# A JSON value, as ``json.dumps`` writes it: what the JSON outputs are made of (a fixed shape is a
# TypedDict of these, e.g. ``cmd_inspect.InspectReport``).
Json: TypeAlias = "dict[str, Json] | list[Json] | str | int | float | bool | None"
JsonObject: TypeAlias = "dict[str, Json]"


# The plan JSON's own keys for a package, from model.codec's (schema resolve-gpu-stack/plan/v1).
_JSON_PACKAGE_KEYS = {
    "name": "name",
    "version": "version",
    "action": "action",
    "installed": "installed-version",
    "index": "index",
    "url": "url",
    "sha256": "sha256",
    "size": "size",
    "coupling": "coupling",
    "reason": "reason",
    "built_for": "built-for",
}
_JSON_OVERRIDE_KEYS = {"package": "package", "requirement": "requirement", "replaced_by": "replaced-by", "reason": "reason"}


_JSON_ABI_KEYS = {
    "kind": "abi",
    "torch": "abi-torch",
    "floor": "abi-floor",
    "cuda_majors": "cuda-majors",
    "builds": "abi-builds",
    "refusal": "abi-refusal",
    "note": "abi-note",
    "read": "abi-read",  # recorded: replayed from a scan record, provisional; names: judged from the library names in first bytes, unverified (install reads the file again)
}


def _json_package(p: Mapping[str, Json]) -> JsonObject:
    abi: Json = {key: p[field] for key, field in _JSON_ABI_KEYS.items()} if p["abi"] is not None or p["cuda-majors"] or p["abi-read"] else None
    out: JsonObject = {**{key: p[field] for key, field in _JSON_PACKAGE_KEYS.items()}, "abi_mismatch": bool(p["abi-mismatch"]), "abi": abi}
    if p["sdist"] is not None:  # a build row (--build NAME): the sdist it is built from, and once built, how
        out["sdist"] = p["sdist"]
        out["built"] = p["built"]
    return out


def coupling_words(p: LockedPackage) -> str:
    """The coupling column: the coupling, what the ABI verdict adds, and a mismatch planned anyway."""
    words = p.coupling.value + _abi_words(p)
    abi = p.abi
    if abi is not None and abi.cuda_majors:
        words += " CUDA " + "+".join(str(m) for m in abi.cuda_majors)
    if abi is not None and abi.unverified:  # judged from the library names in its first bytes: install reads it again
        words += " UNVERIFIED"
    return words + (" ABI MISMATCH" if p.abi_mismatch else "")


def _abi_words(p: LockedPackage) -> str:
    """What the ABI verdict adds to the coupling: a stable ABI's torch floor, a version-locked
    wheel or per-torch builds, or the torch a build was made for."""
    abi = p.abi
    if abi is not None and abi.floor:
        return f" (torch >= {abi.floor})"
    if abi is not None and abi.kind is not None and abi.kind.value in ("locked", "builds"):
        return f" ({abi.kind.value}" + (f" {abi.builds[0]}-{abi.builds[-1]}" if abi.builds else "") + ")"
    return f" (built for torch {p.built_for})" if p.built_for else ""


def plan_to_json(plan: LockPlan) -> JsonObject:
    """The plan as the ``resolve-gpu-stack/plan/v1`` object: ``model.codec``'s dict under that schema's keys."""
    data = plan_to_dict(plan)
    return {
        "schema": PLAN_SCHEMA,
        "target": data["target"],
        "flashinfer": {"version": data["flashinfer-version"], "cuda_label": data["cuda-label"]},
        "packages": [_json_package(p) for p in data["packages"]],
        **story_json(plan.notes, plan.overrides),
        "inputs_digest": data["inputs-digest"],
    }


# -- the plan's story: one renderer for every door ---------------------------------------------------


def story_json(notes: Sequence[str], overrides: Sequence[Override]) -> JsonObject:
    """The plan's story (its notes: choices, walk-backs, downgrades with the requirement that forces
    each; its overrides) as every JSON output carries it: ``resolve``, ``install`` (dry run and
    real, ``--lock`` too)."""
    return {
        "notes": list(notes),
        "overrides": [{key: o[field] for key, field in _JSON_OVERRIDE_KEYS.items()} for o in map(override_to_dict, overrides)],
    }


def story_lines(notes: Sequence[str], overrides: Sequence[Override]) -> list[str]:
    """The plan's story as lines of text, as every table and message shows it: ``resolve``,
    ``install``, ``export uv`` (on stderr), the lock's notes."""
    lines = []
    if notes:
        lines += ["Notes", *(f"  - {note}" for note in notes)]
    if overrides:
        lines += ["Overrides", *(f"  - {override_words(o)}" for o in overrides)]
    return lines


def say_story(notes: Sequence[str], overrides: Sequence[Override], say: Callable[[str], None], *, label: str = "") -> None:
    """``story_lines`` said line by line (on stderr, by the commands whose output is a file: ``lock``
    with ``-o`` or a config's targets, ``export uv``), each after ``label`` (a config target's
    ``NAME: ``), so that they tell the story ``resolve`` prints."""
    for line in story_lines(notes, overrides):
        say(f"{label}{line}")


def override_words(o: Override) -> str:
    """One override in words: ``sglang: torch==2.9.1 -> torch==2.15.0 (the installed torch is kept)``."""
    return f"{o.package}: {o.requirement} -> {o.replaced_by} ({o.reason})"


def print_story(console: Console, notes: Sequence[str], overrides: Sequence[Override]) -> None:
    """``story_lines`` on a rich console, the section heads in bold, the rest as typed (no markup)."""
    for line in story_lines(notes, overrides):
        if line.startswith(" "):
            console.print(line, markup=False)
        else:
            console.print(f"[bold]{line}[/]")


def print_json(data: Mapping[str, object], out: TextIO) -> None:
    """One JSON object (a ``JsonObject``, or a TypedDict of JSON values), indented, on ``out``."""
    out.write(json.dumps(data, indent=2, sort_keys=False) + "\n")


_ACTION_STYLE = {"keep": "green", "install": "cyan", "upgrade": "yellow", "downgrade": "bold red", "change": "magenta", "build": "bold blue"}


def print_plan_table(plan: LockPlan, out: TextIO) -> None:
    """The plan as a table that fits the terminal: package and version are never cut (a user copies
    them), the action wraps, and at a narrow width the index, then the coupling go (a mismatch is in
    the notes too); notes and overrides wrap at the terminal's width."""
    from rich import box
    from rich.console import Console
    from rich.markup import escape

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


# -- tables that fit -------------------------------------------------------------------------------


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


class TableArgs(TypedDict, total=False):
    """What a fitted table passes on to rich's ``Table``."""

    title: str | None
    title_justify: JustifyMethod
    box: Box | None
    pad_edge: bool


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
    from rich.text import Text

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
    from rich.table import Table

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


_COLOR_SYSTEMS: Mapping[str, Literal["standard", "256", "truecolor", "windows"]] = {
    "standard": "standard",
    "256": "256",
    "truecolor": "truecolor",
    "windows": "windows",
}  # a console's color system, as rich names it, passed on to a wider one


def print_fitted(console: Console, table: Table, width: int) -> None:
    """Print at ``width``; wider than the console means a console of that width (the terminal wraps)."""
    from rich.console import Console

    if width > console.width:
        colors = _COLOR_SYSTEMS.get(console.color_system or "")
        console = Console(file=console.file, highlight=False, soft_wrap=False, width=width, color_system=colors)
    console.print(table)


# -- candidates ------------------------------------------------------------------------------------


def _json(rows: list[CandidateRow]) -> list[Json]:
    return [
        {
            "filename": r.filename,
            "version": r.version,
            "tags": r.tags,
            "index": r.index,
            "url": r.url,
            "sha256": r.sha256,
            "metadata_sha256": r.metadata_sha256,
            "size": r.size,
            "upload_time": r.upload_time,
            "yanked": r.yanked,
            "fits_target": r.fits,
            "why_not": r.why_not,
            "abi": r.abi,
            "built_for": r.built_for,
            "variant": r.variant,
            "variant_properties": r.variant_properties,
        }
        for r in rows
    ]


CANDIDATES_SCHEMA = "resolve-gpu-stack/candidates/v1"

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


def candidates_to_json(package: str, rows: list[CandidateRow], visits: list[PageVisit]) -> JsonObject:
    return {
        "schema": CANDIDATES_SCHEMA,
        "package": package,
        "files": _json(rows),
        "pages": [{"url": redact_url(v.location.url), "found": v.found, "files": v.files, "warnings": list(v.warnings)} for v in visits],
    }


def print_candidates(rows: list[CandidateRow], visits: list[PageVisit], fmt: str, out: TextIO, *, package: str = "") -> None:
    if fmt == "json":
        print_json(candidates_to_json(package, rows, visits), out)
        return
    from rich.console import Console
    from rich.markup import escape

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
