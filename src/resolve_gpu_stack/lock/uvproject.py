"""A uv project that keeps the plan: the ``[tool.uv]`` tables a plan is exported to, written into a
``pyproject.toml`` without touching anything else, and a project's ``uv.lock`` read back for ``check``.

Pure (no I/O): text in, text out. tomlkit edits the pyproject round-trip, so the user's formatting,
order and comments stay; a value is only assigned when it differs from what is there, so a second
export of the same plan changes nothing.

What one export writes (each key only when there is something to say):

* ``[dependency-groups] gpu-stack``: the stack's roots (torch, the FlashInfer components in the
  plan, the ``--with`` requirements), and ``[tool.uv] default-groups`` gains it, so a plain
  ``uv sync`` installs them;
* ``environments``: each target's marker (a plan is made for its targets only);
* ``constraint-dependencies``: every planned package at its planned version (kept ones included);
* ``override-dependencies``: the plan's overrides (a framework's torch pin replaced by the kept
  torch, a torch-family pin by the build for it, the user's ``--override``), and each ``--without``
  package as an override that never applies (uv's way to drop a requirement);
* ``no-build-isolation-package`` and ``extra-build-dependencies`` (torch, ``match-runtime``): the
  packages the plan builds against its torch (rows whose action is ``build``);
* ``[[tool.uv.index]]``: one ``explicit`` index per simple-API base a package of a non-PyPI index
  came from (the PyTorch channel and CUDA folder, FlashInfer's CUDA folder), and
  ``[tool.uv.sources]`` pinning each such package to it. PyPI packages get no source: uv's own
  default index (the user's configuration) serves them, as it served the plan;
* ``[tool.resolve-gpu-stack.uv-export]``: the record of all of the above, so that the next export
  replaces exactly what this one wrote (and nothing of the user's), and ``check`` can compare
  ``uv.lock`` with the plan (``read_export``, ``read_uv_lock``).

Several targets (a config's x86_64 and aarch64 targets, whose nightly torches differ by date) share
one project: an entry that every target has is written once, one that differs gets each target's
marker (``torch==2.12.0.dev20260307+cu130 ; platform_machine == 'x86_64' and ...``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from packaging.markers import InvalidMarker, Marker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..data.rules import FlashInferRules
from ..data.toml import parse_toml
from ..errors import LockFileError, UsageError
from ..model import Action, LockedPackage, LockPlan
from ..model.channel import torch_origin
from ..urls import strip_credentials
from .pylock import TOOL, target_marker

GROUP = "gpu-stack"  # the dependency group holding the stack's roots
RECORD = "uv-export"  # [tool.resolve-gpu-stack.uv-export]
NEVER = "sys_platform == 'never'"  # an override with this marker drops the requirement (uv's idiom)
LISTS = ("constraint-dependencies", "override-dependencies", "no-build-isolation-package")  # [tool.uv] arrays of strings
_INDEX_NAME = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportTarget:
    """One plan to export, and the name of the configured target it is for ("" for flags)."""

    name: str
    plan: LockPlan


@dataclass(frozen=True, slots=True)
class UvIndex:
    name: str
    url: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedTarget:
    """What ``check`` needs of one exported target beyond the pins: where it runs, what it keeps,
    its FlashInfer group and which index each sourced package comes from."""

    name: str
    python: str
    platform: str
    environment: str | None  # the target's marker
    kept: tuple[str, ...] = ()  # packages the plan keeps as installed (torch above all)
    flashinfer: str | None = None
    cuda_label: str | None = None
    sources: Mapping[str, str] = field(default_factory=dict)  # package -> the simple-API URL it comes from


@dataclass(frozen=True, slots=True, kw_only=True)
class UvTables:
    """Everything one export writes, in uv's words (``uv_tables``)."""

    group: tuple[str, ...] = ()
    environments: tuple[str, ...] = ()
    lists: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # LISTS key -> entries
    indexes: tuple[UvIndex, ...] = ()
    sources: Mapping[str, tuple[tuple[str, str | None], ...]] = field(default_factory=dict)  # package -> ((index name, marker), ...)
    targets: tuple[RecordedTarget, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def extra_build(self) -> tuple[str, ...]:
        """The packages that get torch (match-runtime) as a build dependency: those built without isolation."""
        return self.lists.get("no-build-isolation-package", ())


# -- a plan in uv's words ----------------------------------------------------------------------------


def uv_tables(targets: Sequence[ExportTarget], flashinfer: FlashInferRules) -> UvTables:
    """The ``[tool.uv]`` tables that make ``uv lock`` and ``uv sync`` reproduce ``targets``' plans."""
    if not targets:
        raise ValueError("nothing to export")
    marked = [(t, target_marker(t.plan.target)) for t in targets]
    names = _index_names(targets)
    return UvTables(
        group=tuple(_per_target([(m, _roots(t.plan, flashinfer)) for t, m in marked])),
        environments=tuple(dict.fromkeys(m for _, m in marked if m)),
        lists=_lists(marked),
        indexes=tuple(sorted((UvIndex(name, url) for url, name in names.items()), key=lambda i: i.name)),
        sources=_sources_of(marked, names),
        targets=tuple(_recorded(t, marker) for t, marker in marked),
        warnings=_kept_unlisted(targets),
    )


def _lists(marked: Sequence[tuple[ExportTarget, str | None]]) -> dict[str, tuple[str, ...]]:
    """The ``[tool.uv]`` lists: every package pinned, the plans' overrides, the packages built against torch."""
    return {
        "constraint-dependencies": tuple(_per_target([(m, [f"{p.name}=={p.version}" for p in t.plan.packages]) for t, m in marked])),
        "override-dependencies": tuple(_per_target([(m, _overrides(t.plan)) for t, m in marked])),
        "no-build-isolation-package": tuple(sorted({p.name for t, _ in marked for p in built_against_torch(t.plan)})),
    }


def _own_simple_index(p: LockedPackage) -> str | None:
    """The simple-API base of a package that comes from an index of its own (not PyPI, not kept
    as installed), the one a uv index and source are written for; else None."""
    return p.simple_index if p.index not in ("pypi", "installed") and p.simple_index else None


def _sources_of(marked: Sequence[tuple[ExportTarget, str | None]], names: Mapping[str, str]) -> dict[str, tuple[tuple[str, str | None], ...]]:
    """package -> the uv index (by name) of each target (by marker) that takes it from an index
    of its own (not PyPI), folded to one index when every target takes it from the same."""
    by_package: dict[str, dict[str | None, str]] = {}
    for t, marker in marked:
        for p in t.plan.packages:
            if simple := _own_simple_index(p):
                by_package.setdefault(p.name, {})[marker] = names[simple]
    return {name: _sources(by_marker, len(marked)) for name, by_marker in sorted(by_package.items())}


def _kept_unlisted(targets: Sequence[ExportTarget]) -> tuple[str, ...]:
    """A warning for each kept package no index lists any more (PyPI's torch, a release without a
    label, is listed on PyPI: the project's default index, where `uv lock` finds it)."""
    return tuple(
        f"{_label(t)}{p.name} {p.version} is kept, but no index lists it any more: `uv lock` cannot find it"
        for t in targets
        for p in t.plan.packages
        if p.index == "installed" and not (p.name == "torch" and torch_origin(p.version) == "pypi")
    )


def built_against_torch(plan: LockPlan) -> list[LockedPackage]:
    """The plan's rows built from source against its torch (action ``build``): uv must build them
    without isolation, with the torch of the environment (``match-runtime``)."""
    return [p for p in plan.packages if p.action is Action.BUILD]


def _label(t: ExportTarget) -> str:
    return f"{t.name}: " if t.name else ""


def _roots(plan: LockPlan, fi: FlashInferRules) -> list[str]:
    """What the dependency group names: torch, the FlashInfer components the plan has, and each
    ``--with`` requirement as typed (without its version: the constraints pin it)."""
    out: list[str] = [p.name for p in plan.packages if p.name == "torch" or fi.members(p.name)]
    for text in _inputs(plan, "with"):
        try:
            req = Requirement(str(text))
        except InvalidRequirement:
            continue
        extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
        name = canonicalize_name(req.name) + extras
        out.append(f"{name} ; {str(text).split(';', 1)[1].strip()}" if req.marker else name)
    return out


def _overrides(plan: LockPlan) -> list[str]:
    """The plan's replacements in uv's override words, and each ``--without`` package dropped."""
    out = []
    for o in plan.overrides:
        try:
            Requirement(o.replaced_by)
        except InvalidRequirement:
            continue  # "torchaudio (not in the plan)": nothing uv could say
        out.append(o.replaced_by)
    out += [f"{canonicalize_name(n)} ; {NEVER}" for n in _inputs(plan, "without")]
    return out


def _inputs(plan: LockPlan, key: str) -> list[str]:
    """A list the plan's recorded inputs hold (``with``, ``without``), as strings."""
    value = plan.inputs.get(key)
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else []


def _per_target(items: Sequence[tuple[str | None, Iterable[str]]]) -> list[str]:
    """Requirement texts of each target (its marker, its texts): once, bare, where every target has
    it; else once per target that has it, with that target's marker added. Sorted by name."""
    texts = [(marker, list(dict.fromkeys(group))) for marker, group in items]
    count = Counter(t for _, group in texts for t in group)
    out = [t if count[t] == len(texts) else with_marker(t, marker) for marker, group in texts for t in group]
    return sorted(dict.fromkeys(out), key=lambda t: (_name_of(t), t))


def with_marker(text: str, marker: str | None) -> str:
    """``text`` (a requirement) that applies only where ``marker`` holds."""
    if not marker:
        return text
    base, sep, own = text.partition(";")
    return f"{base.strip()} ; ({own.strip()}) and ({marker})" if sep else f"{text} ; {marker}"


def _name_of(text: str) -> str:
    return canonicalize_name(re.split(r"[\s\[<>=!~;@]", text.strip(), maxsplit=1)[0])


def _sources(by_marker: Mapping[str | None, str], targets: int) -> tuple[tuple[str, str | None], ...]:
    """One index for every target, or one per target marker when they differ."""
    if len(set(by_marker.values())) == 1:
        return ((next(iter(by_marker.values())), None),)
    return tuple((index, marker) for marker, index in by_marker.items())


def _index_names(targets: Sequence[ExportTarget]) -> dict[str, str]:
    """simple-API base URL -> its uv index name: the logical index and the folders below its base
    (``pytorch-nightly-cu130``, ``flashinfer-cu130``); unique."""
    out: dict[str, str] = {}
    for t in targets:
        for p in t.plan.packages:
            simple = _own_simple_index(p)
            if simple and simple not in out:
                out[simple] = _unique(_index_name(p.index, simple, t.plan.indexes.get(p.index) or ""), set(out.values()))
    return out


def _index_name(index: str, simple: str, base: str) -> str:
    """The uv name of the simple-API base ``simple`` of logical ``index`` (at ``base``): the index's
    name and the folders of ``simple`` below ``base``."""
    scheme, sep, rest = base.partition("://")
    base_url = (scheme.rsplit(":", 1)[-1] + sep + rest) if sep else ""  # "flat:https://..." -> "https://..."
    below = simple[len(base_url) :] if base_url and simple.startswith(base_url) else ""
    return _INDEX_NAME.sub("-", "-".join([index, *(part for part in below.split("/") if part)])).strip("-")


def _unique(name: str, taken: set[str]) -> str:
    """``name``, or ``name-2``, ``name-3``... when it is taken."""
    unique, n = name, 2
    while unique in taken:
        unique, n = f"{name}-{n}", n + 1
    return unique


def _recorded(t: ExportTarget, marker: str | None) -> RecordedTarget:
    plan = t.plan
    return RecordedTarget(
        name=t.name,
        python=plan.target.python,
        platform=plan.target.platform,
        environment=marker,
        kept=tuple(sorted(p.name for p in plan.packages if p.action is Action.KEEP)),
        flashinfer=str(plan.flashinfer_version) if plan.flashinfer_version is not None else None,
        cuda_label=plan.cuda_label,
        sources={p.name: strip_credentials(simple) for p in sorted(plan.packages, key=lambda p: p.name) if (simple := _own_simple_index(p))},
    )


# -- writing them into a pyproject.toml ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Applied:
    text: str  # the new pyproject.toml
    notes: tuple[str, ...]  # what the user should know (a source of theirs replaced, ...)


def apply_tables(text: str, tables: UvTables, *, command: str, where: str = "pyproject.toml") -> Applied:
    """``text`` (a pyproject.toml) with ``tables`` written in, the previous export's entries
    replaced, everything else as it was (formatting and comments included)."""
    import tomlkit

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
    renamed, owned = _merge_indexes(uv, tables.indexes, old.get("indexes") or [])
    notes += _merge_sources(uv, tables.sources, renamed, old.get("sources") or [])
    record = _record(tables, command=command, indexes=owned)
    _set(_table(tool, TOOL, super_table=True), RECORD, record, as_table=True)
    out = tomlkit.dumps(doc)
    return Applied(text=out if out.endswith("\n") or not out else out + "\n", notes=tuple(notes))


def parse_project(text: str, where: str) -> Any:
    """A pyproject.toml as a tomlkit document; not TOML, or no ``[project]``: ``UsageError``."""
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

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
    import tomlkit

    if key not in parent:
        parent[key] = tomlkit.table(is_super_table=super_table)
    return parent[key]


def _record_table(doc: Any) -> Any:
    tool = doc.get("tool")
    ours = tool.get(TOOL) if isinstance(tool, dict) else None
    return ours.get(RECORD) if isinstance(ours, dict) else None


def _array(items: Sequence[Any]) -> Any:
    import tomlkit

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
    import tomlkit

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
    import tomlkit

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
    mine = set(ours) | set(wanted)
    theirs = [str(item) for item in current if str(item) not in mine]
    if [str(item) for item in current] != theirs + wanted:  # theirs where they are, then ours in order
        for item in [item for item in current if str(item) in mine]:
            current.remove(item)
        current.extend(wanted)
        if len(current) > 1:
            current.multiline(True)
    if not len(current):
        del uv[key]
    return _conflicts(key, theirs, wanted)


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
    import tomlkit

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


def _normal_url(url: str) -> str:
    return url.rstrip("/") + "/"


def _merge_indexes(uv: Any, wanted: Sequence[UvIndex], ours: list[str]) -> tuple[dict[str, str], list[str]]:
    """The explicit indexes, in ``[[tool.uv.index]]``. An index of the user's with the same URL is
    used as it is (not ours); a name the user took gets a suffix. Returns (our name -> the name
    used, the names this export owns)."""
    import tomlkit

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
    import tomlkit

    theirs = {str(e.get("name")): _normal_url(str(e.get("url"))) for e in entries if e.get("name") not in ours}
    by_url = {url: name for name, url in theirs.items()}
    present = {str(e.get("name")) for e in entries}
    renamed: dict[str, str] = {}
    owned: list[str] = []
    for index in wanted:
        if _normal_url(index.url) in by_url:
            renamed[index.name] = by_url[_normal_url(index.url)]
            continue
        name = renamed[index.name] = _unique(index.name, set(theirs))
        owned.append(name)
        if name not in present:
            table = tomlkit.table()
            table.update({"name": name, "url": index.url, "explicit": True})
            entries.append(table)
    return renamed, owned


def _merge_sources(uv: Any, wanted: Mapping[str, tuple[tuple[str, str | None], ...]], renamed: Mapping[str, str], ours: list[str]) -> list[str]:
    table = uv.get("sources")
    if table is None and not wanted:
        return []
    table = _table(uv, "sources")
    for name in ours:
        if name not in wanted and name in table:
            del table[name]
    notes = []
    for name, choices in wanted.items():
        value = _source_value(choices, renamed)
        current = _plain(table.get(name))
        if current == _plain(value):
            continue
        if current is not None and name not in ours:
            notes.append(f"replaced your [tool.uv.sources] entry for {name} ({current}) by the plan's index")
        table[name] = value
    if not len(table):
        del uv["sources"]
    return notes


def _source_value(choices: tuple[tuple[str, str | None], ...], renamed: Mapping[str, str]) -> Any:
    """A package's ``[tool.uv.sources]`` value: ``{index = ...}``, or one per target marker."""
    import tomlkit

    values = []
    for index, marker in choices:
        entry = tomlkit.inline_table()
        entry["index"] = renamed.get(index, index)
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
        "indexes": sorted(indexes),
        "sources": sorted(tables.sources),
        "target": [_record_target(t) for t in tables.targets],
    }
    return {k: v for k, v in record.items() if v or k in ("command", "group", "target")}


def _record_target(t: RecordedTarget) -> dict[str, Any]:
    import tomlkit

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


# -- reading them back ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportRecord:
    """``[tool.resolve-gpu-stack.uv-export]`` of a pyproject, and the ``[tool.uv]`` values there now."""

    command: str
    wrote: Mapping[str, tuple[str, ...]]  # environments and LISTS keys -> the entries written
    sources: tuple[str, ...]
    group: str
    targets: tuple[RecordedTarget, ...]
    uv: Mapping[str, Any]  # the [tool.uv] table as it is now
    groups: Mapping[str, Any]  # [dependency-groups] as it is now

    def pins(self, target: RecordedTarget, environment: Mapping[str, str] | None) -> dict[str, Version]:
        """Package -> the version the export pinned for ``target`` (in its marker ``environment``;
        None: entries with a marker count for every target)."""
        out: dict[str, Version] = {}
        for text in self.wrote.get("constraint-dependencies", ()):
            try:
                req = Requirement(text)
                version = Version(next(iter(req.specifier)).version)
            except (InvalidRequirement, InvalidVersion, StopIteration):
                continue
            if req.marker is not None and environment is not None and not marker_holds(req.marker, environment):
                continue
            out[canonicalize_name(req.name)] = version
        return out


def read_export(text: str, where: str) -> ExportRecord | None:
    """The export record of a pyproject.toml, None when it has none; malformed: ``LockFileError``."""
    doc = parse_toml(text, where, error=LockFileError)
    tool = _dict(doc.get("tool"))
    raw = _dict(tool.get(TOOL)).get(RECORD)
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise LockFileError(f"{where}: [tool.{TOOL}.{RECORD}] must be a table", hint="export again: it rewrites the record")
    try:
        targets = tuple(_read_target(t) for t in raw.get("target", []))
        wrote = {key: tuple(str(v) for v in raw.get(key, [])) for key in ("environments", *LISTS)}
    except (TypeError, AttributeError, KeyError):
        raise LockFileError(f"{where}: [tool.{TOOL}.{RECORD}] is malformed", hint="export again: it rewrites the record") from None
    return ExportRecord(
        command=str(raw.get("command", "")),
        wrote=wrote,
        sources=tuple(str(s) for s in raw.get("sources", [])),
        group=str(raw.get("group", GROUP)),
        targets=targets,
        uv=_dict(tool.get("uv")),
        groups=_dict(doc.get("dependency-groups")),
    )


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _read_target(raw: Mapping[str, Any]) -> RecordedTarget:
    return RecordedTarget(
        name=str(raw.get("name", "")),
        python=str(raw["python"]),
        platform=str(raw["platform"]),
        environment=raw.get("environment"),
        kept=tuple(str(k) for k in raw.get("kept", [])),
        flashinfer=raw.get("flashinfer"),
        cuda_label=raw.get("cuda-label"),
        sources={str(k): str(v) for k, v in dict(raw.get("sources", {})).items()},
    )


def marker_holds(marker: Marker | str, environment: Mapping[str, str]) -> bool:
    """Whether ``marker`` holds in ``environment``; a marker that cannot be judged holds."""
    try:
        return (marker if isinstance(marker, Marker) else Marker(marker)).evaluate(dict(environment))
    except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
        return True


@dataclass(frozen=True, slots=True, kw_only=True)
class UvLockedPackage:
    name: str
    version: Version | None  # None: no version (the project itself, a path dependency)
    registry: str | None  # the index it comes from, or None (a path, a URL, the project)
    markers: tuple[str, ...] = ()  # resolution-markers: the forks it belongs to (empty: every one)


def read_uv_lock(text: str, where: str) -> tuple[UvLockedPackage, ...]:
    """The packages of a ``uv.lock`` (its ``[[package]]`` tables); malformed: ``LockFileError``."""
    doc = parse_toml(text, where, error=LockFileError)
    raw = doc.get("package", [])
    if not isinstance(raw, list) or not all(isinstance(p, dict) for p in raw):
        raise LockFileError(f"{where}: not a uv.lock: 'package' must be an array of tables", hint="run `uv lock` to write it again")
    return tuple(_uv_locked_package(p, n, where) for n, p in enumerate(raw, start=1))


def _uv_locked_package(p: Mapping[str, Any], n: int, where: str) -> UvLockedPackage:
    name, version, source = p.get("name"), p.get("version"), p.get("source")
    if not isinstance(name, str):
        raise LockFileError(f"{where}: [[package]] #{n} has no name", hint="run `uv lock` to write it again")
    try:
        parsed = Version(version) if isinstance(version, str) else None
    except InvalidVersion:
        raise LockFileError(f"{where}: {name}: version {version!r} is not a version", hint="run `uv lock` to write it again") from None
    registry = source.get("registry") if isinstance(source, dict) else None
    markers = p.get("resolution-markers", [])
    return UvLockedPackage(
        name=canonicalize_name(name),
        version=parsed,
        registry=registry if isinstance(registry, str) else None,
        markers=tuple(str(m) for m in markers) if isinstance(markers, list) else (),
    )


def locked_for(packages: Sequence[UvLockedPackage], name: str, environment: Mapping[str, str] | None) -> list[UvLockedPackage]:
    """The entries of ``name`` that the fork for ``environment`` installs (all of them when the
    environment is unknown)."""
    return [p for p in packages if p.name == name and (environment is None or not p.markers or any(marker_holds(m, environment) for m in p.markers))]


__all__ = [
    "GROUP",
    "LISTS",
    "NEVER",
    "RECORD",
    "Applied",
    "ExportRecord",
    "ExportTarget",
    "RecordedTarget",
    "UvIndex",
    "UvLockedPackage",
    "UvTables",
    "apply_tables",
    "built_against_torch",
    "locked_for",
    "marker_holds",
    "parse_project",
    "read_export",
    "read_uv_lock",
    "uv_tables",
    "with_marker",
]
