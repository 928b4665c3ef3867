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

    [tool.resolve-gpu-stack.defaults]          # shared by all targets; a target's own keys win
    torch = "nightly"        # nightly | test | stable | installed | a version or specifier
    cuda = "cu130"           # CUDA label (default: the installed torch's)
    change-cuda = false      # allow cuda to move torch to another label
    flashinfer = "latest"    # latest | nightly | none | a version
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

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ..data.definitions import INDEX_NAMES, read_toml
from ..errors import UsageError

TOOL = "resolve-gpu-stack"
PYPROJECT = "pyproject.toml"
GPU_STACK_TOML = "gpu-stack.toml"
DEFAULT_PLATFORM = "x86_64-manylinux_2_28"

# config key -> TargetConfig field, for the keys a target (or the defaults table) may set
_SETTING_KEYS = {
    "python": "python",
    "platform": "platform",
    "installed": "installed",
    "torch": "torch",
    "cuda": "cuda",
    "change-cuda": "change_cuda",
    "flashinfer": "flashinfer",
    "jit-cache": "jit_cache",
    "cubin": "cubin",
    "with": "with_",
    "allow-downgrade": "allow_downgrade",
}
_TARGET_ONLY_KEYS = ("name", "output")
_TOP_KEYS = ("snapshot", "indexes", "defaults", "target")
_BOOL_KEYS = ("change-cuda", "jit-cache", "cubin", "allow-downgrade")
_LIST_KEYS = ("installed", "with")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
_TOML_TYPES = {str: "a string", int: "an integer", float: "a number", bool: "a boolean", dict: "a table", list: "an array"}


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetConfig:
    """One lock target: the resolver's inputs and where its lock files go."""

    name: str
    python: str
    platform: str = DEFAULT_PLATFORM
    installed: tuple[str, ...] = ()
    torch: str = "nightly"
    cuda: str | None = None
    change_cuda: bool = False
    flashinfer: str = "latest"
    jit_cache: bool = True
    cubin: bool = True
    with_: tuple[str, ...] = ()
    allow_downgrade: bool = False
    outputs: tuple[Path, ...] = ()  # absolute


@dataclass(frozen=True, slots=True, kw_only=True)
class ProjectConfig:
    path: Path  # the config file (absolute)
    table: str | None  # "tool.resolve-gpu-stack" in a pyproject.toml, None for top-level keys
    snapshot: Path | None = None  # absolute
    indexes: Mapping[str, str] = field(default_factory=dict)
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

    def regenerate_command(self, target: TargetConfig) -> str:
        """The command, run in the config file's folder, that rewrites ``target``'s locks."""
        config = "" if self.path.name in (PYPROJECT, GPU_STACK_TOML) else f" --config {_quote(self.path.name)}"
        return f"resolve-gpu-stack lock{config} --target {target.name}"

    def relative(self, path: Path) -> str:
        """``path`` relative to the config's folder (POSIX), as recorded in lock inputs."""
        import os

        return Path(os.path.relpath(path, self.root)).as_posix()


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


# -- finding the file ----------------------------------------------------------------------------

def _read_toml(path: Path) -> dict[str, Any]:
    return read_toml(path, error=UsageError)


def _pyproject_table(path: Path) -> dict[str, Any] | None:
    doc = _read_toml(path)
    tool = doc.get("tool")
    if not isinstance(tool, dict) or TOOL not in tool:
        return None
    table = tool[TOOL]
    if not isinstance(table, dict):
        raise UsageError(f"{path}: [tool.{TOOL}] must be a table")
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


class _Where:
    """Builds error messages that name the file, the table and the key."""

    def __init__(self, path: Path, table: str | None) -> None:
        self.path = path
        self.table = table

    def section(self, sub: str | None = None) -> str:
        parts = [p for p in (self.table, sub) if p]
        return f"[{'.'.join(parts)}]" if parts else "top level"

    def error(self, section: str, message: str, hint: str | None = None) -> UsageError:
        return UsageError(f"{self.path}: {section}: {message}", hint=hint)


def _type_name(value: Any) -> str:
    return _TOML_TYPES.get(type(value), type(value).__name__)


def _unknown_keys(w: _Where, section: str, table: Mapping[str, Any], allowed: Iterable[str]) -> None:
    allowed = list(allowed)
    for key in table:
        if key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(allowed)}"
            raise w.error(section, f"unknown key {key!r}", hint=hint)


def _expect(w: _Where, section: str, key: str, value: Any, kind: type) -> Any:
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise w.error(section, f"{key!r} must be {_TOML_TYPES.get(kind, kind.__name__)}, not {_type_name(value)}")
    return value


def _string_list(w: _Where, section: str, key: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise w.error(section, f"{key!r} must be an array of strings, not {_type_name(value)}")
    return tuple(value)


def _settings(w: _Where, section: str, raw: Mapping[str, Any]) -> dict[str, Any]:
    """The resolver settings of a target or of the defaults table, type-checked, as field names."""
    out: dict[str, Any] = {}
    for key, attr in _SETTING_KEYS.items():
        if key not in raw:
            continue
        value = raw[key]
        if key in _BOOL_KEYS:
            out[attr] = _expect(w, section, key, value, bool)
        elif key in _LIST_KEYS:
            out[attr] = _string_list(w, section, key, value)
        else:
            out[attr] = _expect(w, section, key, value, str).strip()
    return out


def _validate_settings(w: _Where, section: str, target: TargetConfig) -> None:
    """Semantic checks with the resolver's own parsers, re-worded to name the file and the key."""
    from packaging.requirements import InvalidRequirement, Requirement

    from ..env.target import declared_target, parse_installed, parse_python_flag
    from ..model.cuda import CudaLabel

    def check(key: str, call) -> None:
        try:
            call()
        except UsageError as exc:
            raise w.error(section, f"{key}: {exc.message}", hint=exc.hint) from None

    check("python", lambda: _declared_python(target.python, parse_python_flag))
    check("platform", lambda: declared_target(target.python, target.platform))
    check("installed", lambda: parse_installed(target.installed))
    if target.cuda is not None and CudaLabel.parse(target.cuda) is None:
        raise w.error(section, f"cuda {target.cuda!r} is not a CUDA label", hint="use the form cu130, cu129, cu128")
    for req in target.with_:
        try:
            Requirement(req)
        except InvalidRequirement as exc:
            raise w.error(section, f"with: {req!r} is not a requirement: {exc}") from None
    for key, value in (("torch", target.torch), ("flashinfer", target.flashinfer)):
        if not value:
            raise w.error(section, f"{key!r} must not be empty")


def _declared_python(python: str, parse_python_flag) -> None:
    from ..env.target import _VERSION_RE

    if not _VERSION_RE.match(python.strip()):
        raise UsageError(f"{python!r} is not a Python version", hint="use 3.<minor>[.<micro>][t], e.g. 3.12; a configured target is declared, never an interpreter path")
    parse_python_flag(python, search_path="")  # range checks: too old, free-threaded before 3.13


def _outputs(w: _Where, section: str, raw: Any, root: Path) -> tuple[Path, ...]:
    from ..lock.files import lock_format

    items = _string_list(w, section, "output", [raw] if isinstance(raw, str) else raw)
    if not items:
        raise w.error(section, "'output' names no file", hint="e.g. output = [\"constraints/pylock.NAME.toml\"]")
    out: list[Path] = []
    for item in items:
        path = (root / item).resolve()
        try:
            lock_format(path)
        except UsageError as exc:
            raise w.error(section, f"output {item!r}: {exc.message}", hint=exc.hint) from None
        if path in out:
            raise w.error(section, f"output {item!r} is listed twice")
        out.append(path)
    return tuple(out)


def _indexes(w: _Where, raw: Any) -> dict[str, str]:
    from urllib.parse import urlsplit

    from ..errors import IndexDefinitionError
    from ..urls import normalize_base_url

    section = w.section()
    table = _expect(w, section, "indexes", raw, dict)
    out = {}
    for name, url in table.items():
        if name not in INDEX_NAMES:
            raise w.error(section, f"indexes: unknown index {name!r}", hint=f"known indexes: {', '.join(INDEX_NAMES)}")
        _expect(w, section, f"indexes.{name}", url, str)
        parts = urlsplit(url.strip())
        if parts.username or parts.password:
            raise w.error(section, f"indexes.{name}: the URL carries credentials; a config file is committed", hint="put credentials in netrc, a keyring or UV_INDEX_* environment variables, never in the config")
        try:
            out[name] = normalize_base_url(url)
        except IndexDefinitionError as exc:
            raise w.error(section, f"indexes.{name}: {exc.message}", hint=exc.hint) from None
    return out


def _parse(path: Path, doc: Mapping[str, Any], table: str | None) -> ProjectConfig:
    w = _Where(path, table)
    root = path.parent
    _unknown_keys(w, w.section(), doc, _TOP_KEYS)
    snapshot = None
    if "snapshot" in doc:
        snapshot = (root / _expect(w, w.section(), "snapshot", doc["snapshot"], str)).resolve()
    indexes = _indexes(w, doc["indexes"]) if "indexes" in doc else {}
    defaults_raw = doc.get("defaults", {})
    dsec = w.section("defaults")
    _expect(w, w.section(), "defaults", defaults_raw, dict)
    _unknown_keys(w, dsec, defaults_raw, _SETTING_KEYS)
    defaults = _settings(w, dsec, defaults_raw)

    raw_targets = doc.get("target")
    if raw_targets is None:
        raise w.error(w.section(), "no [[target]] tables: nothing to lock", hint=f"add [[{'.'.join(p for p in (table, 'target') if p)}]] with name, python and output")
    if not isinstance(raw_targets, list) or not all(isinstance(t, dict) for t in raw_targets):
        raise w.error(w.section(), "'target' must be an array of tables ([[target]])")
    targets: list[TargetConfig] = []
    owners: dict[Path, str] = {}
    for n, raw in enumerate(raw_targets, start=1):
        target = _parse_target(w, n, raw, defaults, root)
        if any(t.name == target.name for t in targets):
            raise w.error(w.section("target"), f"two targets are named {target.name!r}", hint="target names must be unique")
        for out in target.outputs:
            if out in owners:
                raise w.error(w.section("target"), f"targets {owners[out]!r} and {target.name!r} both write {out}", hint="each lock file belongs to one target")
            owners[out] = target.name
        targets.append(target)
    return ProjectConfig(path=path, table=table, snapshot=snapshot, indexes=indexes, targets=tuple(targets))


def _parse_target(w: _Where, n: int, raw: Mapping[str, Any], defaults: Mapping[str, Any], root: Path) -> TargetConfig:
    section = w.section("target") + f" #{n}"
    name = raw.get("name")
    if name is None:
        raise w.error(section, "missing 'name'")
    _expect(w, section, "name", name, str)
    if not _NAME_RE.match(name):
        raise w.error(section, f"name {name!r}: use letters, digits, '-' and '_' (it names pylock.<name>.toml)")
    section = w.section("target") + f" {name!r}"
    _unknown_keys(w, section, raw, (*_TARGET_ONLY_KEYS, *_SETTING_KEYS))
    settings = {**defaults, **_settings(w, section, raw)}
    if "python" not in settings:
        raise w.error(section, "missing 'python' (here or in [defaults])", hint='e.g. python = "3.12"')
    if "output" not in raw:
        raise w.error(section, "missing 'output'", hint=f'e.g. output = ["constraints/pylock.{name}.toml"]')
    target = TargetConfig(name=name, outputs=_outputs(w, section, raw["output"], root), **settings)
    _validate_settings(w, section, target)
    return target


# -- overrides from the command line ---------------------------------------------------------------

OVERRIDABLE = tuple(f.name for f in fields(TargetConfig) if f.name not in ("name", "outputs"))


def with_overrides(target: TargetConfig, overrides: Mapping[str, Any]) -> TargetConfig:
    """``target`` with the values the command line gave (field names of ``TargetConfig``)."""
    unknown = set(overrides) - set(OVERRIDABLE)
    if unknown:
        raise ValueError(f"not overridable: {sorted(unknown)}")
    return replace(target, **{k: (tuple(v) if isinstance(v, list) else v) for k, v in overrides.items()})


# -- what a target's lock is made from ------------------------------------------------------------

def effective(config: ProjectConfig, *, snapshot: Path | None = None, indexes: Mapping[str, str] | None = None) -> ProjectConfig:
    """The config with ``--snapshot`` / ``--index`` from the command line applied over it."""
    return replace(
        config,
        snapshot=snapshot.resolve() if snapshot is not None else config.snapshot,
        indexes={**config.indexes, **(indexes or {})},
    )


def index_urls(config: ProjectConfig) -> dict[str, str]:
    """The base URLs the config decides: its ``indexes``, plus the snapshot's placeholder PyPI.

    A PyPI URL that comes from this machine's uv/pip configuration is deliberately not here: it is
    per machine, so it must not make a lock look stale on another machine.
    """
    urls = dict(config.indexes)
    if config.snapshot is not None and "pypi" not in urls:
        from ..net.snapshot import PLACEHOLDER_BASE

        urls["pypi"] = PLACEHOLDER_BASE.format(name="pypi")
    return urls


def resolve_definitions(config: ProjectConfig, env: Mapping[str, str]):
    """The index definitions to resolve with: ``index_urls``, and PyPI from uv/pip configuration
    when neither the config nor a snapshot decides it."""
    from ..data.definitions import load_definitions

    urls = index_urls(config)
    if "pypi" not in urls:
        from .userconfig import discover_pypi_url

        urls["pypi"] = discover_pypi_url(env)
    return load_definitions().with_index_urls(urls)


def resolve_request(target: TargetConfig):
    """The ``ResolveRequest`` for a configured target (a declared target: no interpreter is run)."""
    from ..env.target import declared_target
    from ..model.request import ResolveRequest

    return ResolveRequest.build(
        target=declared_target(target.python, target.platform, target.installed),
        torch=target.torch,
        cuda=target.cuda,
        change_cuda=target.change_cuda,
        flashinfer=target.flashinfer,
        jit_cache=target.jit_cache,
        cubin=target.cubin,
        with_=target.with_,
        allow_downgrade=target.allow_downgrade,
    )


_BUNDLED: list = []


def bundled_definitions():
    """The bundled index definitions, read once per process (they never change under it)."""
    if not _BUNDLED:
        from ..data.definitions import load_definitions

        _BUNDLED.append(load_definitions())
    return _BUNDLED[0]


def lock_inputs(config: ProjectConfig, target: TargetConfig) -> dict[str, object]:
    """What a target's lock records as its inputs (and digests): the resolver's inputs under the
    index URLs the config decides (``index_urls``), plus the snapshot it is resolved from (relative
    to the config's folder). Depends on the config and the bundled index definitions only."""
    digest_defs = bundled_definitions().with_index_urls(index_urls(config))
    inputs = dict(resolve_request(target).inputs(digest_defs.recorded_urls()))
    if config.snapshot is not None:
        inputs["snapshot"] = config.relative(config.snapshot)
    return inputs
