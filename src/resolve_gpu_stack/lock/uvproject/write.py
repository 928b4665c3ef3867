"""The tables written into a ``pyproject.toml`` round-trip with tomlkit (``apply_tables``): the previous export's entries replaced, the user's formatting, order, comments and entries kept; a value assigned only when it differs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import tomlkit
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version
from tomlkit.exceptions import TOMLKitError

from ...data.toml import parse_toml
from ...errors import UsageError
from ..pylock import TOOL
from .tables import (
    GROUP,
    LISTS,
    RECORD,
    RecordedTarget,
    UvIndex,
    UvTables,
    unique_name,
)


@dataclass(frozen=True, slots=True)
class Applied:
    text: str  # the new pyproject.toml
    notes: tuple[str, ...]  # what the user should know (a source of theirs replaced, ...)


def apply_tables(text: str, tables: UvTables, *, command: str, where: str = "pyproject.toml") -> Applied:
    """``text`` (a pyproject.toml) with ``tables`` written in, the previous export's entries
    replaced, everything else as it was (formatting and comments included)."""
    doc = parse_project(text, where)
    old = _plain(_record_table(doc)) or {}
    notes: list[str] = [*tables.warnings, *_python_notes(doc, tables)]
    _set(_table(doc, "dependency-groups"), GROUP, list(tables.group))  # first: a new table goes after [project]
    tool = _table(doc, "tool", super_table=True)
    uv = _table(tool, "uv")
    _default_groups(uv, doc)
    notes += _environments(uv, list(tables.environments), old.get("environments") or [])
    for key in LISTS:
        notes += _merge_list(uv, key, list(tables.lists.get(key, ())), old.get(key) or [])
    _merge_extra_build(uv, tables.extra_build, old.get("extra-build-dependencies") or [])
    _merge_build_variables(uv, tables.build_variables, old.get("extra-build-variables") or [])
    renamed, owned = _merge_indexes(uv, tables.indexes, old.get("indexes") or [])
    values = {name: _source_value(choices, renamed) for name, choices in tables.sources.items()}
    values.update({name: _tree_value(choices) for name, choices in tables.trees.items()})
    notes += _merge_sources(uv, dict(sorted(values.items())), old.get("sources") or [])
    record = _record(tables, command=command, indexes=owned)
    _set(_table(tool, TOOL, super_table=True), RECORD, record, as_table=True)
    out = tomlkit.dumps(doc)
    return Applied(text=out if out.endswith("\n") or not out else out + "\n", notes=tuple(notes))


def parse_project(text: str, where: str) -> Any:
    """A pyproject.toml as a tomlkit document; not TOML, or no ``[project]``: ``UsageError``."""
    parse_toml(text, where, error=UsageError)  # the bounds every TOML we read gets (digits, nesting)
    try:
        doc = tomlkit.parse(text)
    except TOMLKitError as exc:
        raise UsageError(f"{where}: not valid TOML: {exc}", hint="fix the file (uv reads it too), then export again") from None
    if not isinstance(doc.get("project"), dict):
        raise UsageError(f"{where}: no [project] table: not a uv project", hint="create one with `uv init`, or name the project's folder with --project DIR")
    return doc


def _plain(value: Any) -> Any:
    return value.unwrap() if hasattr(value, "unwrap") else value


def _table(parent: Any, key: str, *, super_table: bool = False) -> Any:
    if key not in parent:
        parent[key] = tomlkit.table(is_super_table=super_table)
    return parent[key]


def _record_table(doc: Any) -> Any:
    tool = doc.get("tool")
    ours = tool.get(TOOL) if isinstance(tool, dict) else None
    return ours.get(RECORD) if isinstance(ours, dict) else None


def _array(items: Sequence[Any]) -> Any:
    arr = tomlkit.array()
    arr.extend(items)
    if len(items) > 1:
        arr.multiline(True)
    return arr


def _set(parent: Any, key: str, value: Any, *, as_table: bool = False) -> None:
    """``parent[key] = value`` unless it already holds that value; an empty value removes the key."""
    if _plain(parent.get(key)) == value:
        return
    if not value:
        if key in parent:
            del parent[key]
        return
    if as_table:  # its keys set in place (a table replaced whole loses the blank line after it)
        _update(parent[key] if isinstance(parent.get(key), dict) else _new_table(parent, key), value)
    else:
        parent[key] = _array(value) if isinstance(value, list) else value


def _new_table(parent: Any, key: str) -> Any:
    parent[key] = tomlkit.table()
    return parent[key]


def _update(table: Any, value: Mapping[str, Any]) -> None:
    """``table`` made to hold ``value``, key by key; an array of tables row by row while it has
    as many rows (so the whitespace around it stays as it was)."""
    for k in [k for k in table if k not in value]:
        del table[k]
    for k, v in value.items():
        current = table.get(k)
        if _plain(current) != v:
            _put(table, k, current, v)


def _put(table: Any, key: str, current: Any, value: Any) -> None:
    """``table[key]`` (now ``current``) made to hold ``value``."""
    rows = isinstance(value, list) and bool(value) and isinstance(value[0], dict)
    if rows and isinstance(current, list) and len(current) == len(value):
        for row, wanted in zip(current, value):
            _update(row, wanted)
    elif rows:
        aot = tomlkit.aot()
        for wanted in value:
            _update(row := tomlkit.table(), wanted)
            aot.append(row)
        table[key] = aot
    else:
        table[key] = _array(value) if isinstance(value, list) else value


def _python_notes(doc: Any, tables: UvTables) -> list[str]:
    """A target Python outside the project's ``requires-python``: uv would refuse the environments."""
    text = doc["project"].get("requires-python")
    if not isinstance(text, str):
        return []
    try:
        spec = SpecifierSet(text)
    except InvalidSpecifier:
        return []
    out = []
    for t in tables.targets:
        try:
            if Version(f"{t.python}.99" if t.python.count(".") == 1 else t.python) not in spec and Version(t.python) not in spec:
                out.append(
                    f"{t.name + ': ' if t.name else ''}the plan is for Python {t.python}, outside the project's requires-python {text!r}: uv will refuse the environments"
                )
        except InvalidVersion:
            continue
    return out


def _default_groups(uv: Any, doc: Any) -> None:
    """``default-groups`` names the stack's group (uv's default is ``dev`` alone)."""
    current = _plain(uv.get("default-groups"))
    if current == "all" or (isinstance(current, list) and GROUP in current):
        return
    if isinstance(current, list):
        uv["default-groups"].append(GROUP)
        return
    groups = _plain(doc.get("dependency-groups")) or {}
    has_dev = "dev" in groups or bool(_plain(uv.get("dev-dependencies")))
    uv["default-groups"] = _array([*(["dev"] if has_dev else []), GROUP])


def _environments(uv: Any, wanted: list[str], ours: list[str]) -> list[str]:
    current = _plain(uv.get("environments"))
    if current == wanted:
        return []
    notes = []
    if current and current != ours:
        notes.append(f"replaced [tool.uv] environments {current} by the plan's targets {wanted}")
    _set(uv, "environments", wanted)
    return notes


def _merge_list(uv: Any, key: str, wanted: list[str], ours: list[str]) -> list[str]:
    """``uv[key]`` less the entries the previous export wrote, plus ``wanted``; the user's entries
    stay where they are. A user constraint that excludes a planned version is named."""
    current = uv.get(key)
    if current is None:
        _set(uv, key, wanted)
        return []
    theirs = _replace_ours(current, set(ours) | set(wanted), wanted)
    if not len(current):
        del uv[key]
    return _conflicts(key, theirs, wanted)


def _replace_ours(current: Any, mine: set[str], wanted: list[str]) -> list[str]:
    """The array ``current`` as the user's entries where they are, then ``wanted`` in order (the
    entries in ``mine``, the previous export's and the wanted ones, taken out first); left as it
    is when it is that already. The user's entries."""
    theirs = [str(item) for item in current if str(item) not in mine]
    if [str(item) for item in current] == theirs + wanted:
        return theirs
    for item in [item for item in current if str(item) in mine]:
        current.remove(item)
    current.extend(wanted)
    if len(current) > 1:
        current.multiline(True)
    return theirs


def _conflicts(key: str, theirs: list[str], wanted: list[str]) -> list[str]:
    if key != "constraint-dependencies":
        return []
    pins = {}
    for text in wanted:
        req = Requirement(text)
        pins[canonicalize_name(req.name)] = next(iter(req.specifier)).version
    out = []
    for text in theirs:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        pin = pins.get(canonicalize_name(req.name))
        if pin is not None and not req.specifier.contains(pin, prereleases=True):
            out.append(f"your [tool.uv] constraint {text!r} excludes the planned {req.name} {pin}: `uv lock` will find no solution")
    return out


def _merge_extra_build(uv: Any, names: Sequence[str], ours: list[str]) -> None:
    current = uv.get("extra-build-dependencies")
    if current is None and not names:
        return
    table = _table(uv, "extra-build-dependencies")
    for name in ours:
        if name not in names and name in table:
            del table[name]
    for name in names:
        entry = tomlkit.inline_table()
        entry.update({"requirement": "torch", "match-runtime": True})
        _set(table, name, [entry])
    if not len(table):
        del uv["extra-build-dependencies"]


def _merge_build_variables(uv: Any, wanted: Mapping[str, Mapping[str, str]], ours: list[str]) -> None:
    """``[tool.uv.extra-build-variables]``: each built package's variables (its arch list), the
    previous export's entries that are no more removed, the user's own kept."""
    current = uv.get("extra-build-variables")
    if current is None and not wanted:
        return
    table = _table(uv, "extra-build-variables")
    for name in ours:
        if name not in wanted and name in table:
            del table[name]
    for name, variables in wanted.items():
        entry = tomlkit.inline_table()
        entry.update(dict(variables))
        _set(table, name, entry)
    if not len(table):
        del uv["extra-build-variables"]


def _normal_url(url: str) -> str:
    return url.rstrip("/") + "/"


def _merge_indexes(uv: Any, wanted: Sequence[UvIndex], ours: list[str]) -> tuple[dict[str, str], list[str]]:
    """The explicit indexes, in ``[[tool.uv.index]]``. An index of the user's with the same URL is
    used as it is (not ours); a name the user took gets a suffix. Returns (our name -> the name
    used, the names this export owns)."""
    entries = uv.get("index")
    if entries is None:
        entries = tomlkit.aot()
    _drop_stale_indexes(entries, wanted, ours)
    renamed, owned = _add_indexes(entries, wanted, ours)
    if len(entries) and "index" not in uv:
        uv["index"] = entries
    elif not len(entries) and "index" in uv:
        del uv["index"]
    return renamed, owned


def _drop_stale_indexes(entries: Any, wanted: Sequence[UvIndex], ours: list[str]) -> None:
    """The previous export's indexes this one does not write again at the same URL."""
    wanted_by_name = {i.name: i for i in wanted}
    for entry in list(entries):
        name = entry.get("name")
        mine = wanted_by_name.get(name)
        if name in ours and (mine is None or _normal_url(str(entry.get("url"))) != _normal_url(mine.url)):
            entries.remove(entry)


def _add_indexes(entries: Any, wanted: Sequence[UvIndex], ours: list[str]) -> tuple[dict[str, str], list[str]]:
    """Each wanted index: the user's of its URL when there is one, else ours (under a name the
    user has not taken), added when missing. (our name -> the name used, the names ours)."""
    theirs = {str(e.get("name")): _normal_url(str(e.get("url"))) for e in entries if e.get("name") not in ours}
    by_url = {url: name for name, url in theirs.items()}
    present = {str(e.get("name")) for e in entries}
    renamed: dict[str, str] = {}
    owned: list[str] = []
    for index in wanted:
        if _normal_url(index.url) in by_url:
            renamed[index.name] = by_url[_normal_url(index.url)]
            continue
        name = renamed[index.name] = unique_name(index.name, set(theirs))
        owned.append(name)
        if name not in present:
            table = tomlkit.table()
            table.update({"name": name, "url": index.url, "explicit": True})
            entries.append(table)
    return renamed, owned


def _merge_sources(uv: Any, wanted: Mapping[str, Any], ours: list[str]) -> list[str]:
    """``[tool.uv.sources]``: each package's value (``wanted``), the previous export's that are no more removed."""
    table = uv.get("sources")
    if table is None and not wanted:
        return []
    table = _table(uv, "sources")
    for name in ours:
        if name not in wanted and name in table:
            del table[name]
    notes = [note for name, value in wanted.items() if (note := _put_source(table, name, value, ours)) is not None]
    if not len(table):
        del uv["sources"]
    return notes


def _put_source(table: Any, name: str, value: Any, ours: list[str]) -> str | None:
    """``[tool.uv.sources] name = value`` unless it is so already; a note when a source of the
    user's is replaced."""
    current = _plain(table.get(name))
    if current == _plain(value):
        return None
    table[name] = value
    if current is not None and name not in ours:
        kind = "index" if isinstance(_plain(value), dict) and "index" in _plain(value) else "source"
        return f"replaced your [tool.uv.sources] entry for {name} ({current}) by the plan's {kind}"
    return None


def _source_value(choices: tuple[tuple[str, str | None], ...], renamed: Mapping[str, str]) -> Any:
    """A package's ``[tool.uv.sources]`` value: ``{index = ...}``, or one per target marker."""
    values = []
    for index, marker in choices:
        entry = tomlkit.inline_table()
        entry["index"] = renamed.get(index, index)
        if marker:
            entry["marker"] = marker
        values.append(entry)
    return values[0] if len(values) == 1 else _array(values)


def _tree_value(choices: tuple[tuple[Mapping[str, str], str | None], ...]) -> Any:
    """A built package's ``[tool.uv.sources]`` value: its tree (git at the locked commit, or a
    folder), or one per target marker."""
    values = []
    for source, marker in choices:
        entry = tomlkit.inline_table()
        entry.update(dict(source))
        if marker:
            entry["marker"] = marker
        values.append(entry)
    return values[0] if len(values) == 1 else _array(values)


def _record(tables: UvTables, *, command: str, indexes: list[str]) -> dict[str, Any]:
    """The record: what this export wrote, and per target what ``check`` compares uv.lock with."""
    record: dict[str, Any] = {
        "command": command,
        "group": GROUP,
        "environments": list(tables.environments),
        **{key: list(tables.lists.get(key, ())) for key in LISTS},
        "extra-build-dependencies": list(tables.extra_build),
        "extra-build-variables": sorted(tables.build_variables),
        "indexes": sorted(indexes),
        "sources": sorted({*tables.sources, *tables.trees}),
        "target": [_record_target(t) for t in tables.targets],
    }
    return {k: v for k, v in record.items() if v or k in ("command", "group", "target")}


def _record_target(t: RecordedTarget) -> dict[str, Any]:
    sources = None
    if t.sources:
        sources = tomlkit.inline_table()
        sources.update(t.sources)
    entry = {
        "name": t.name,
        "python": t.python,
        "platform": t.platform,
        "environment": t.environment,
        "kept": list(t.kept),
        "flashinfer": t.flashinfer,
        "cuda-label": t.cuda_label,
        "sources": sources,
    }
    return {k: v for k, v in entry.items() if v or k == "kept"}
