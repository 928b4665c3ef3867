"""Project configuration: the lock targets a repository keeps, read from its ``pyproject.toml``.

Part of the CLI layer (the only layer that reads config files). Pure otherwise: stdlib, packaging
and the light modules below; no network, no resolver.

Where it lives: a ``[tool.resolve-gpu-stack]`` table in ``pyproject.toml``, or a ``gpu-stack.toml``
beside it holding the same keys at its top level. Both in one folder is an error. Without
``--config FILE`` the current directory and then its parents are searched; the first folder with
either file wins (a ``pyproject.toml`` without the table does not count).

Schema (every key optional unless said otherwise)::

    [tool.resolve-gpu-stack]
    snapshot = "indexes/snapshots/2026-03-07"  # resolve offline from a recorded snapshot
    indexes = { pytorch = "https://mirror.example/whl/" }  # base URL overrides: pytorch, flashinfer,
                                               # pypi; never with credentials (use netrc/keyring)
    package-indexes = { flash-attn = "https://wheels.example/simple/" }  # an index that alone serves a
                                               # package (per-torch builds); no credentials either

    [tool.resolve-gpu-stack.defaults]          # shared by all targets; a target's own keys win
    torch = "nightly"        # nightly | test | stable | installed | a version or specifier
    cuda = "cu130"           # CUDA label (default: the installed torch's)
    change-cuda = false      # allow cuda to move torch to another label
    flashinfer = "latest"    # latest | installed | nightly | none | a version
    jit-cache = true         # include flashinfer-jit-cache
    cubin = true             # include flashinfer-cubin
    with = []                # extra requirements, e.g. ["torchvision"]
    allow-downgrade = false  # let torch go below the installed one
    python = "3.12"          # python, platform and installed may be shared here too
    platform = "x86_64-manylinux_2_28"
    installed = []

    [[tool.resolve-gpu-stack.target]]          # one per lock target; at least one
    name = "x86_64-py312"                      # required: letters, digits, '-' and '_'
    python = "3.12"                            # required (here or in defaults): a version, X.Y
    platform = "x86_64-manylinux_2_28"         # default x86_64-manylinux_2_28
    installed = ["torch==2.12.0.dev20260307+cu130"]  # what the target machine already has
    output = ["constraints/pylock.x86_64-py312.toml", "constraints/x86_64-py312.txt"]  # required

``output`` is a string or a list: ``pylock.toml`` / ``pylock.<name>.toml`` (PEP 751) or ``*.txt``
(a pip/uv constraints file). Relative paths (``snapshot``, ``output``) are relative to the config
file's folder. Targets are always *declared* (``python`` is a version, never an interpreter path),
so a lock does not depend on the machine that wrote it. Command-line flags override these values.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import NoReturn

from ..data.definitions import INDEX_NAMES, Definitions, load_definitions
from ..data.snapshots import PLACEHOLDER_BASE
from ..data.toml import TomlReader, load_toml, type_name
from ..errors import IndexDefinitionError, UsageError
from ..lock.files import lock_format
from ..lock.uvproject import RECORD
from ..model.request import ResolveRequest
from ..urls import has_credentials, normalize_base_url
from . import common, userconfig
from . import settings as S
from .common import replay_pypi_url
from .options import add_resolve_flags, source_options

TOOL = "resolve-gpu-stack"
PYPROJECT = "pyproject.toml"
GPU_STACK_TOML = "gpu-stack.toml"

_TARGET_ONLY_KEYS = ("name", "output")
_TOP_KEYS = ("snapshot", "indexes", "package-indexes", "defaults", "target", RECORD)  # RECORD: what `export uv` wrote (lock.uvproject)
_SETTING_KEYS = tuple(S.BY_KEY)
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetConfig:
    """One lock target: the resolver's settings (model values, every row of ``settings.SETTINGS``)
    and where its lock files go."""

    name: str
    settings: Mapping[str, S.Value]  # field name -> model value (TorchChoice, CudaLabel, ...)
    outputs: tuple[Path, ...] = ()  # absolute


@dataclass(frozen=True, slots=True, kw_only=True)
class ProjectConfig:
    path: Path  # the config file (absolute)
    table: str | None  # "tool.resolve-gpu-stack" in a pyproject.toml, None for top-level keys
    snapshot: Path | None = None  # absolute
    indexes: Mapping[str, str] = field(default_factory=dict)
    package_indexes: Mapping[str, str] = field(default_factory=dict)  # package -> the index that alone serves it
    targets: tuple[TargetConfig, ...] = ()

    @property
    def root(self) -> Path:
        return self.path.parent

    @property
    def where(self) -> str:
        return f"{self.path} [{self.table}]" if self.table else str(self.path)

    def select(self, names: Sequence[str]) -> list[TargetConfig]:
        """The targets named (all when ``names`` is empty), in config order; unknown names fail."""
        if not names:
            return list(self.targets)
        known = {t.name: t for t in self.targets}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise UsageError(f"{self.where}: no target named {', '.join(map(repr, unknown))}", hint=f"targets: {', '.join(known)}")
        return [t for t in self.targets if t.name in set(names)]

    def target_for_output(self, path: Path) -> TargetConfig | None:
        wanted = path.resolve()
        return next((t for t in self.targets if wanted in t.outputs), None)

    def config_flag(self) -> str:
        """``--config NAME`` when a command run in the config's folder must name the file ("": the
        search finds it: ``pyproject.toml`` or ``gpu-stack.toml``)."""
        return "" if self.path.name in (PYPROJECT, GPU_STACK_TOML) else f"--config {shlex.quote(self.path.name)}"

    def regenerate_command(self, target: TargetConfig) -> str:
        """The command, run in the config file's folder, that rewrites ``target``'s locks."""
        return " ".join(w for w in ("resolve-gpu-stack lock", self.config_flag(), f"--target {target.name}") if w)

    def relative(self, path: Path) -> str:
        """``path`` relative to the config's folder (POSIX), as recorded in lock inputs."""
        return Path(os.path.relpath(path, self.root)).as_posix()


# -- finding the file ----------------------------------------------------------------------------


def _read_toml(path: Path) -> dict[str, object]:
    return load_toml(path, error=UsageError)


def _pyproject_table(path: Path) -> dict[str, object] | None:
    doc = _read_toml(path)
    tool = doc.get("tool")
    if not isinstance(tool, dict) or TOOL not in tool:
        return None
    table = tool[TOOL]
    if not isinstance(table, dict):
        raise UsageError(f"{path}: [tool.{TOOL}] must be a table")
    if set(table) <= {RECORD}:
        return None  # only the record of `export uv` (a project exported from flags): no config
    return table


def find_config(start: Path) -> Path | None:
    """The config file for ``start``: the nearest folder (itself, then parents) that has one."""
    start = start.resolve()
    for folder in (start, *start.parents):
        pyproject, stack = folder / PYPROJECT, folder / GPU_STACK_TOML
        has_table = pyproject.is_file() and _pyproject_table(pyproject) is not None
        if has_table and stack.is_file():
            raise UsageError(
                f"{folder}: both {PYPROJECT} [tool.{TOOL}] and {GPU_STACK_TOML} configure resolve-gpu-stack",
                hint="keep one of them (or pass --config FILE)",
            )
        if has_table:
            return pyproject
        if stack.is_file():
            return stack
    return None


def discover_config(explicit: Path | None, cwd: Path | None = None) -> ProjectConfig | None:
    """``--config FILE`` when given (it must exist), else the nearest config above ``cwd``."""
    if explicit is not None:
        if not explicit.is_file():
            raise UsageError(f"--config {explicit}: no such file")
        return load_config(explicit)
    found = find_config(cwd or Path.cwd())
    return load_config(found) if found is not None else None


# -- parsing and validation ----------------------------------------------------------------------


def load_config(path: Path) -> ProjectConfig:
    """Parse and validate a config file; every problem is a ``UsageError`` naming file, target, key."""
    path = path.resolve()
    if path.name == PYPROJECT:
        table = _pyproject_table(path)
        if table is None:
            raise UsageError(f"{path}: no [tool.{TOOL}] table", hint="add one, or name a gpu-stack.toml with --config")
        return _parse(path, table, f"tool.{TOOL}")
    return _parse(path, _read_toml(path), None)


class _Reader(TomlReader):
    """``TomlReader`` for a config: UsageErrors naming the file, the table and the key."""

    def __init__(self, path: Path, table: str | None) -> None:
        super().__init__(path, error=UsageError)
        self.table = table

    def section(self, sub: str | None = None) -> str:
        parts = [p for p in (self.table, sub) if p]
        return f"[{'.'.join(parts)}]" if parts else "top level"

    def string_list(self, value: object, key: str, where: str) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(where, f"{key!r} must be an array of strings, not {type_name(value)}")
        return tuple(value)


def _settings(r: _Reader, where: str, raw: Mapping[str, object]) -> dict[str, S.Value]:
    """The resolver settings of a target or of the defaults table, type-checked and parsed into
    model values (field name -> value) by the table's parsers. An error names the KEY, never a flag."""
    out: dict[str, S.Value] = {}
    for key, setting in S.BY_KEY.items():
        if key not in raw:
            continue
        value: S.Raw
        if setting.kind == "list":
            value = r.string_list(raw[key], key, where)
        elif setting.kind == "bool":
            value = r.get(raw, key, bool, where)
        else:
            value = r.get(raw, key, str, where)
        if setting.names_file and isinstance(value, str):
            value = str(_inside(r, where, key, value))
        try:
            out[setting.name] = setting.configured(setting.parse(value))
        except UsageError as exc:
            raise r.fail(where, f"{key}: {exc.message.replace(setting.flag + ' ', '', 1)}", hint=exc.hint) from None
    return out


def _inside(r: _Reader, where: str, key: str, value: str) -> Path:
    """A file a config names to be read (``overrides-file``): relative to the config's folder and,
    links resolved, inside it (a config from an untrusted repository must not read ``~/.netrc``;
    ``~`` is not expanded). Reading it then takes a regular file of bounded size only."""
    root = Path(r.source).parent.resolve()
    path = (root / value).resolve()
    if not path.is_relative_to(root):
        raise r.fail(where, f"{key} {value!r} is outside the project folder {root}", hint="a config reads files only below its own folder")
    return path


def _outputs(r: _Reader, where: str, raw: object, root: Path) -> tuple[Path, ...]:
    items = r.string_list([raw] if isinstance(raw, str) else raw, "output", where)
    if not items:
        raise r.fail(where, "'output' names no file", hint='e.g. output = ["constraints/pylock.NAME.toml"]')
    out: list[Path] = []
    for item in items:
        path = (root / item).resolve()
        try:
            lock_format(path)
        except UsageError as exc:
            raise r.fail(where, f"output {item!r}: {exc.message}", hint=exc.hint) from None
        if path in out:
            raise r.fail(where, f"output {item!r} is listed twice")
        out.append(path)
    return tuple(out)


def _indexes(r: _Reader, doc: Mapping[str, object]) -> dict[str, str]:
    where = r.section()
    table = r.get(doc, "indexes", dict, where) or {}
    out = {}
    for name in table:
        if name not in INDEX_NAMES:
            raise r.fail(where, f"indexes: unknown index {name!r}", hint=f"known indexes: {', '.join(INDEX_NAMES)}")
        url = r.get(table, name, str, f"{where}: indexes")
        if has_credentials(url.strip()):
            raise r.fail(
                where,
                f"indexes.{name}: the URL carries credentials; a config file is committed",
                hint="put credentials in netrc, a keyring or UV_INDEX_* environment variables, never in the config",
            )
        try:
            out[name] = normalize_base_url(url)
        except IndexDefinitionError as exc:
            raise r.fail(where, f"indexes.{name}: {exc.message}", hint=exc.hint) from None
    return out


def _package_indexes(r: _Reader, doc: Mapping[str, object]) -> dict[str, str]:
    """``package-indexes = { NAME = URL }``: checked as ``--package-index`` is (and never with credentials)."""
    where = r.section()
    table = r.get(doc, "package-indexes", dict, where) or {}
    out = {}
    for name in table:
        url = r.get(table, name, str, f"{where}: package-indexes")
        if has_credentials(url.strip()):
            raise r.fail(
                where,
                f"package-indexes.{name}: the URL carries credentials; a config file is committed",
                hint="put credentials in netrc, a keyring or UV_INDEX_* environment variables, never in the config",
            )
        out[name] = url.strip()
    if not out:
        return out
    try:
        load_definitions().with_package_indexes(out)
    except IndexDefinitionError as exc:
        raise r.fail(where, f"package-indexes: {exc.message.removeprefix('--package-index ')}", hint=exc.hint) from None
    return out


def _parse(path: Path, doc: Mapping[str, object], table: str | None) -> ProjectConfig:
    r = _Reader(path, table)
    root = path.parent
    r.unknown_keys(doc, _TOP_KEYS, r.section())
    snapshot = r.get(doc, "snapshot", str, r.section())
    defaults_raw = r.get(doc, "defaults", dict, r.section()) or {}
    r.unknown_keys(defaults_raw, _SETTING_KEYS, r.section("defaults"))
    defaults = {**S.defaults(), **_settings(r, r.section("defaults"), defaults_raw)}
    defaults_given = {S.BY_KEY[k].name for k in defaults_raw}
    indexes = _indexes(r, doc)
    package_indexes = _package_indexes(r, doc)
    targets: list[TargetConfig] = []
    owners: dict[Path, str] = {}
    for n, raw in enumerate(_target_tables(r, doc), start=1):
        target = _parse_target(r, n, raw, defaults, defaults_given, root)
        if any(t.name == target.name for t in targets):
            raise r.fail(r.section("target"), f"two targets are named {target.name!r}", hint="target names must be unique")
        for out in target.outputs:
            if out in owners:
                raise r.fail(r.section("target"), f"targets {owners[out]!r} and {target.name!r} both write {out}", hint="each lock file belongs to one target")
            owners[out] = target.name
        targets.append(target)
    return ProjectConfig(
        path=path,
        table=table,
        snapshot=(root / snapshot).resolve() if snapshot is not None else None,
        indexes=indexes,
        package_indexes=package_indexes,
        targets=tuple(targets),
    )


def _target_tables(r: _Reader, doc: Mapping[str, object]) -> list[Mapping[str, object]]:
    raw_targets = doc.get("target")
    if raw_targets is None:
        raise r.fail(
            r.section(), "no [[target]] tables: nothing to lock", hint=f"add [[{'.'.join(p for p in (r.table, 'target') if p)}]] with name, python and output"
        )
    if not isinstance(raw_targets, list) or not all(isinstance(t, dict) for t in raw_targets):
        raise r.fail(r.section(), "'target' must be an array of tables ([[target]])")
    return raw_targets


def _parse_target(r: _Reader, n: int, raw: Mapping[str, object], defaults: Mapping[str, S.Value], defaults_given: set[str], root: Path) -> TargetConfig:
    where = r.section("target") + f" #{n}"
    name = r.get(raw, "name", str, where, required=True)
    if not _NAME_RE.match(name):
        raise r.fail(where, f"name {name!r}: use letters, digits, '-' and '_' (it names pylock.<name>.toml)")
    where = r.section("target") + f" {name!r}"
    r.unknown_keys(raw, (*_TARGET_ONLY_KEYS, *_SETTING_KEYS), where)
    own = _settings(r, where, raw)
    if "python" not in own and "python" not in defaults_given:
        raise r.fail(where, "missing 'python' (here or in [defaults])", hint='e.g. python = "3.12"')
    if "output" not in raw:
        raise r.fail(where, "missing 'output'", hint=f'e.g. output = ["constraints/pylock.{name}.toml"]')
    return TargetConfig(name=name, settings=MappingProxyType({**defaults, **own}), outputs=_outputs(r, where, raw["output"], root))


# -- overrides from the command line ---------------------------------------------------------------


def with_overrides(target: TargetConfig, overrides: Mapping[str, S.Value]) -> TargetConfig:
    """``target`` with the model values the command line gave (``TypedSettings.values``: parsed at
    the edge), each checked as a configured target's (``--python`` a version); an error names the
    flag the user typed."""
    unknown = set(overrides) - set(S.BY_NAME)
    if unknown:
        raise ValueError(f"not overridable: {sorted(unknown)}")
    checked = {name: S.BY_NAME[name].configured(value) for name, value in overrides.items()}
    return replace(target, settings=MappingProxyType({**target.settings, **checked}))


def recorded_overrides(config: ProjectConfig, target: TargetConfig, command: str | None) -> tuple[ProjectConfig, TargetConfig] | None:
    """The config and target a lock was written from, when its recorded ``command`` is the target's
    regenerate command followed by flags (``lock --target x --no-cubin``): the resolver settings and
    ``--snapshot``/``--index`` given there, applied as ``lock`` applied them. None when the command
    is not that (a lock written with ``-o``, by hand, or by another version) or adds no flags."""
    prefix = config.regenerate_command(target)
    if not command or not command.startswith(prefix):
        return None
    try:
        words = shlex.split(command[len(prefix) :])
    except ValueError:
        return None
    if not words:
        return None
    parser = _ArgumentParser(add_help=False)
    add_resolve_flags(parser)
    try:
        args = parser.parse_args(words)
        sources = source_options(args)
        indexes = common.index_overrides(sources)
        package_indexes = common.package_index_overrides(sources)
        target = with_overrides(target, S.typed(args).values)
    except (UsageError, ValueError):
        return None
    snapshot = (config.root / sources.snapshot) if sources.snapshot is not None else None
    return effective(config, snapshot=snapshot, indexes=indexes, package_indexes=package_indexes), target


class _ArgumentParser(argparse.ArgumentParser):
    """An argparse parser that raises instead of exiting (a recorded command is data, not a command line)."""

    def error(self, message: str) -> NoReturn:
        raise ValueError(message)


# -- what a target's lock is made from ------------------------------------------------------------


def effective(
    config: ProjectConfig, *, snapshot: Path | None = None, indexes: Mapping[str, str] | None = None, package_indexes: Mapping[str, str] | None = None
) -> ProjectConfig:
    """The config with ``--snapshot`` / ``--index`` / ``--package-index`` from the command line applied over it."""
    return replace(
        config,
        snapshot=snapshot.resolve() if snapshot is not None else config.snapshot,
        indexes={**config.indexes, **(indexes or {})},
        package_indexes={**config.package_indexes, **(package_indexes or {})},
    )


def index_urls(config: ProjectConfig) -> dict[str, str]:
    """The base URLs the config decides: its ``indexes``, plus the snapshot's placeholder PyPI.

    A PyPI URL that comes from this machine's uv/pip configuration is deliberately not here: it is
    per machine, so it must not make a lock look stale on another machine.
    """
    urls = dict(config.indexes)
    if config.snapshot is not None and "pypi" not in urls:
        urls["pypi"] = PLACEHOLDER_BASE.format(name="pypi")
    return urls


def resolve_definitions(config: ProjectConfig, env: Mapping[str, str], bundled: Definitions | None = None) -> Definitions:
    """The index definitions to resolve with: the config's ``indexes``, and PyPI from uv/pip
    configuration when the config does not name one (a snapshot's PyPI pages are replayed under
    it, so that the lock's PyPI URLs install; the placeholder only when the config asks for it or
    no PyPI is configured at all). ``index_urls`` (the digest's) does not depend on this.
    ``bundled``: the bundled definitions when the caller has read them already."""
    urls = dict(config.indexes)
    if "pypi" not in urls:
        urls["pypi"] = replay_pypi_url(env) if config.snapshot is not None else userconfig.discover_pypi_url(env)
    return (bundled if bundled is not None else load_definitions()).with_index_urls(urls).with_package_indexes(config.package_indexes)


def resolve_request(target: TargetConfig) -> ResolveRequest:
    """The ``ResolveRequest`` for a configured target (a declared target: no interpreter is run)."""
    return S.build_request(target.settings, target=S.declared(target.settings))


def lock_inputs(config: ProjectConfig, target: TargetConfig, bundled: Definitions | None = None) -> dict[str, object]:
    """What a target's lock records as its inputs (and digests): the resolver's inputs under the
    index URLs the config decides (``index_urls``), plus the snapshot it is resolved from (relative
    to the config's folder). Depends on the config and the bundled index definitions only
    (``bundled``: read once by the command that asks for many targets; else read here)."""
    digest_defs = (bundled if bundled is not None else load_definitions()).with_index_urls(index_urls(config)).with_package_indexes(config.package_indexes)
    inputs = dict(resolve_request(target).inputs(digest_defs.recorded_urls()))
    if config.snapshot is not None:
        inputs["snapshot"] = config.relative(config.snapshot)
    return inputs
