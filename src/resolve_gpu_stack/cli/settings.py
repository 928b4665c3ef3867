"""The resolver settings: ONE table (``flags.py``'s rows, each paired here with its parser), and
everything that is derived from it.

Each row is one setting: its field name (the ``ResolveRequest`` field, or a part of the declared
target), its kind, its default, its flag, its config key, its help (``flags.FLAGS``) and the parser
that turns the text a user wrote into the model value (``PARSERS`` here). From this table, and
nowhere else, come

* the argparse flags (``flags.add_flags``: the rows alone, so ``--help`` imports no model);
* the settings a user typed on the command line, parsed once, here, into their model values, with
  the words that gave them (what a regenerate command repeats): ``typed``;
* the config keys, their TOML types and their validation (``cli/config.py`` reads them through
  ``SETTINGS``);
* the one builder ``values -> ResolveRequest``: ``build_request``.

Adding a setting means adding one row in ``flags.py``, its parser here when its text is more than a
text, and its field in ``ResolveRequest``. This module imports the model at its head: only a
command that runs (its line parsed) loads it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeAlias

from packaging.utils import NormalizedName
from packaging.version import Version

from ..data.toml import read_text
from ..errors import UsageError
from ..model.cuda import CudaLabel
from ..model.declared import NamedInterpreter, Platform, PythonVersion, declared_target, installed_pins, parse_python
from ..model.gpu import GpuArch
from ..model.request import (
    ABI_MISMATCH_CHOICES,
    FlashInferChoice,
    Requested,
    ResolveRequest,
    TorchChoice,
    parse_cuda,
    parse_day,
    parse_gpu_list,
    parse_upgrade_packages,
    requested,
)
from ..model.source import BuildSpec, parse_build_spec
from ..net.settings import FetchSettings, TransportSettings
from .flags import FLAGS, Flag, NetworkSetting, records_url
from .flags import NETWORK as NETWORK  # read here too (the network flags beside the settings)
from .flags import Raw as Raw

if TYPE_CHECKING:
    from ..model.target import Target

# What a row's parser makes of a setting's ``Raw`` text: the model value (``ResolveRequest``'s field,
# or a part of the declared target). None: an optional setting not given.
Value: TypeAlias = (
    "PythonVersion | NamedInterpreter | Platform | Mapping[NormalizedName, Version] | CudaLabel | TorchChoice | FlashInferChoice"
    " | tuple[Requested, ...] | tuple[GpuArch, ...] | tuple[BuildSpec, ...] | tuple[str, ...] | str | bool | float | None"
)


def _python(text: str) -> PythonVersion | NamedInterpreter:
    """``--python``: a version to declare (range-checked) or an interpreter to inspect (found then)."""
    return parse_python(text)


def _declared_python(value: Value) -> Value:
    """A configured target's ``python`` (a config key, or ``--python`` over a configured target): a
    declared version, never an interpreter."""
    if value is not None and not isinstance(value, PythonVersion):
        raise UsageError(
            f"--python {str(value)!r} is not a Python version",
            hint="use 3.<minor>[.<micro>][t], e.g. 3.12; a configured target is declared, never an interpreter path",
        )
    return value


def _platform(text: str) -> Platform:
    return Platform.parse(text)


def _installed(items: Sequence[str]) -> Mapping[NormalizedName, Version]:
    return installed_pins(items)


def _requirements(items: Sequence[str]) -> tuple[Requested, ...]:
    return requested(tuple(items), "--with")


def _build_specs(items: Sequence[str]) -> tuple[BuildSpec, ...]:
    return tuple(parse_build_spec(text) for text in items)


def _build_timeout(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise UsageError(f"--build-timeout {text!r} is not a positive number of seconds", hint="e.g. --build-timeout 7200 (two hours)")
    return value


def _torch(text: str) -> TorchChoice:
    return TorchChoice.parse(text)


def _upgrade_packages(items: Sequence[str]) -> tuple[str, ...]:
    return parse_upgrade_packages(tuple(items))


def _flashinfer(text: str) -> FlashInferChoice:
    return FlashInferChoice.parse(text)


def _cuda(text: str | None) -> CudaLabel | None:
    return parse_cuda(text)


def _overrides(items: Sequence[str]) -> tuple[Requested, ...]:
    return requested(tuple(items), "--override")


MAX_OVERRIDES_BYTES = 1 << 20


def _overrides_file(text: str) -> tuple[Requested, ...]:
    """The requirements of a requirements-style file (parsed once, here: ``Requested`` values as
    ``--override`` gives them): one a line, ``#`` comments and blank lines skipped. A regular file
    of at most ``MAX_OVERRIDES_BYTES``; an error names the file and the line number and never
    quotes the line (a file named by mistake may hold a secret)."""
    path = Path(text).expanduser()
    hint = "name a file with one requirement a line, e.g. torch==2.12.0 (the line is not shown: the file might hold a secret)"
    try:
        lines = read_text(path, error=UsageError, max_bytes=MAX_OVERRIDES_BYTES).splitlines()
    except UsageError as exc:
        raise UsageError(f"--overrides {exc.message}", hint=hint) from None
    items = []
    for n, line in enumerate(lines, start=1):
        item = line.split(" #", 1)[0].strip()
        if not item or item.startswith("#"):
            continue
        if item.startswith("-"):
            raise UsageError(f"--overrides {path}: line {n}: an option; only requirements are read", hint=hint)
        try:
            items.append(Requested(item, flag="--override"))
        except UsageError:
            raise UsageError(f"--overrides {path}: line {n}: not a requirement", hint=hint) from None
    return tuple(items)


def _exclude_newer(text: str) -> str:
    return parse_day(text)


def _abi_mismatch(text: str) -> str:
    value = text.strip()
    if value not in ABI_MISMATCH_CHOICES:
        raise UsageError(f"--abi-mismatch {text!r} is not one of {', '.join(ABI_MISMATCH_CHOICES)}", hint="error (default: no plan) or warn (plan it, flagged)")
    return value


def _gpus(items: Sequence[str]) -> tuple[GpuArch, ...]:
    return parse_gpu_list(tuple(items))


def _apis(items: Sequence[str]) -> tuple[str, ...]:
    if not items:
        return ()  # the GPU table (gpus.toml) is read only when an API is named
    from ..data.gpus import default_gpu_table  # +11 ms on a plain resolve (-X importtime after this module)

    table = default_gpu_table()
    for name in items:
        table.api(name)  # an unknown API is a UsageError listing the known ones
    return tuple(dict.fromkeys(items))


def _same(value: Value) -> Value:
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class Setting(Flag):
    """One resolver setting: its row (``flags.FLAGS``) and what its text means. ``parse`` turns the
    raw value (a str, a bool or a tuple of str) into the model value and raises ``UsageError``
    naming ``flag`` when it cannot; ``configured`` checks a configured target's model value (a
    config key, or a flag over a configured target)."""

    parse: Callable[..., Value] = _same  # Raw -> Value; each row's parser takes its kind's raw value
    configured: Callable[[Value], Value] = _same

    @property
    def on_request(self) -> bool:
        """A field of ``ResolveRequest``, or added to one (the others describe the declared target)."""
        return (self.joins or self.name) in _REQUEST_FIELDS


_REQUEST_FIELDS = frozenset(f.name for f in fields(ResolveRequest) if f.init)

# Each row's parser, by field name (a row not here: its raw value is its model value).
PARSERS: Mapping[str, Callable[..., Value]] = MappingProxyType(
    {
        "python": _python,
        "platform": _platform,
        "installed": _installed,
        "cuda": _cuda,
        "torch": _torch,
        "upgrade_package": _upgrade_packages,
        "flashinfer": _flashinfer,
        "with_": _requirements,
        "overrides": _overrides,
        "overrides_file": _overrides_file,
        "build_packages": _build_specs,
        "build_timeout": _build_timeout,
        "abi_mismatch": _abi_mismatch,
        "exclude_newer": _exclude_newer,
        "gpus": _gpus,
        "require_api": _apis,
        "scan_records": records_url,
    }
)
# A configured target's check of a row's model value, by field name.
CONFIGURED: Mapping[str, Callable[[Value], Value]] = MappingProxyType({"python": _declared_python})

SETTINGS: tuple[Setting, ...] = tuple(
    Setting(**{f.name: getattr(row, f.name) for f in fields(Flag)}, parse=PARSERS.get(row.name, _same), configured=CONFIGURED.get(row.name, _same))
    for row in FLAGS
)
BY_NAME: Mapping[str, Setting] = MappingProxyType({s.name: s for s in SETTINGS})
BY_KEY: Mapping[str, Setting] = MappingProxyType({s.key: s for s in SETTINGS})


def fetch_settings(args: argparse.Namespace) -> FetchSettings:
    """The network flags typed on ``args`` as the fetcher's frozen settings (a command without
    them: the defaults)."""
    typed: dict[NetworkSetting, Any] = {s: tuple(v) if s.kind == "list" else v for s in NETWORK if (v := getattr(args, s.name, None)) is not None}
    transport = replace(TransportSettings(), **{s.name: v for s, v in typed.items() if s.into == "transport"})
    return replace(FetchSettings(transport=transport), **{s.name: v for s, v in typed.items() if s.into == "fetch"})


# -- what was typed ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TypedSettings:
    """The settings the user typed, parsed once at the edge (``typed``) into their model values, by
    field name, in table order: what overrides a config's values; and the words that gave them (what
    a regenerate command repeats). A setting not typed is absent (its default is the table's)."""

    values: Mapping[str, Value] = field(default_factory=lambda: MappingProxyType({}))
    words: tuple[str, ...] = ()

    def __contains__(self, name: str) -> bool:
        return name in self.values

    def value(self, name: str) -> Value:
        """The model value of one setting: what was typed, else the table's default's."""
        return self.values[name] if name in self.values else default(name)

    def replaced(self, name: str, value: Value) -> TypedSettings:
        """These settings with ``value`` typed for ``name`` (``install``: ``--python`` the interpreter it installs into)."""
        return TypedSettings(
            MappingProxyType({s.name: v for s in SETTINGS if (v := value if s.name == name else self.values.get(s.name)) is not None}), self.words
        )

    # -- the rows a command reads by itself (the rest reach it through ``build_request``) --

    @property
    def python(self) -> PythonVersion | NamedInterpreter | None:
        """``--python``: a declared version, an interpreter named, or None (not typed)."""
        value = self.values.get("python")
        return value if isinstance(value, PythonVersion | NamedInterpreter) else None

    @property
    def declares(self) -> bool:
        """Whether ``--python`` declares a version (else the target is a real interpreter, probed)."""
        return isinstance(self.values.get("python"), PythonVersion)

    @property
    def platform(self) -> Platform:
        value = self.value("platform")
        if not isinstance(value, Platform):
            raise TypeError(f"platform: {value!r}")
        return value

    @property
    def installed(self) -> Mapping[NormalizedName, Version]:
        value = self.value("installed")
        if not isinstance(value, Mapping):
            raise TypeError(f"installed: {value!r}")
        return value

    @property
    def cuda(self) -> CudaLabel | None:
        value = self.values.get("cuda")
        return value if isinstance(value, CudaLabel) else None

    @property
    def build_timeout(self) -> float | None:
        value = self.values.get("build_timeout")
        return value if isinstance(value, float) else None

    def names(self, name: str) -> tuple[str, ...]:
        """A list setting of plain texts (``require_api``, ``without``, ...), typed or default."""
        return names_of({name: self.value(name)}, name)


def text_of(values: Mapping[str, Value], name: str) -> str | None:
    """A setting whose model value is a text (``scan_records``, ``exclude_newer``, ...), or None."""
    value = values.get(name)
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{name}: {value!r}")
    return value


def names_of(values: Mapping[str, Value], name: str) -> tuple[str, ...]:
    """A list setting of plain texts (``require_api``, ``without``, ...)."""
    value = values.get(name)
    if not isinstance(value, tuple) or not all(isinstance(v, str) for v in value):
        raise TypeError(f"{name}: {value!r}")
    return tuple(str(v) for v in value)


def typed(args: argparse.Namespace) -> TypedSettings:
    """The settings the user typed on the parsed command line ``args``, parsed (a bad value is a
    ``UsageError`` naming its flag, here, before anything runs), with the words that gave them."""
    raw: dict[str, Raw] = {}
    for s in SETTINGS:
        value = getattr(args, s.name, None)
        if value is not None:
            raw[s.name] = tuple(value) if s.kind == "list" else value
    return TypedSettings(MappingProxyType(parse(raw)), tuple(words(raw)))


def words(raw: Mapping[str, Raw]) -> list[str]:
    """The command-line words that give the settings ``raw`` (field name -> raw value), in table order."""
    return [w for s in SETTINGS if s.name in raw for w in s.words(raw[s.name])]


# -- values and the request ----------------------------------------------------------------------


def parse(raw: Mapping[str, Raw]) -> dict[str, Value]:
    """Model values of the raw settings given (field name -> value)."""
    return {name: BY_NAME[name].parse(value) for name, value in raw.items()}


def default(name: str) -> Value:
    """The model value of one setting's default."""
    s = BY_NAME[name]
    return s.parse(s.default) if s.default is not None else None


def defaults() -> dict[str, Value]:
    """The model value of every setting's default."""
    return {s.name: default(s.name) for s in SETTINGS}


def complete(values: Mapping[str, Value]) -> dict[str, Value]:
    """``values`` (what was typed, parsed) with the model value of every other setting's default
    (a typed one's default is not parsed)."""
    return {s.name: values[s.name] if s.name in values else default(s.name) for s in SETTINGS}


def declared(values: Mapping[str, Value]) -> Target:
    """The declared target of complete settings (``python`` a version, ``platform`` and ``installed`` parsed)."""
    python, platform, installed = values["python"], values["platform"], values["installed"]
    if not isinstance(python, PythonVersion) or not isinstance(platform, Platform) or not isinstance(installed, Mapping):
        raise TypeError(f"not a declared target: {python!r}, {platform!r}, {installed!r}")
    return declared_target(python, platform, installed)


def build_request(values: Mapping[str, Value], *, target: Target, installed_requires: Mapping[NormalizedName, tuple[str, ...]] | None = None) -> ResolveRequest:
    """THE builder: complete model values (``defaults`` overlaid) -> ``ResolveRequest``."""
    on_request = {s.name: values[s.name] for s in SETTINGS if s.on_request and s.joins is None}
    for s in SETTINGS:
        joined, into = values.get(s.name), on_request.get(s.joins or "")
        if s.joins is not None and isinstance(joined, tuple) and joined and isinstance(into, tuple):
            on_request[s.joins] = (*into, *joined)
    # each row's parser gives its field's type (tests/cli/test_cli.py: test_each_rows_model_value_is_its_request_fields
    # checks every row against ResolveRequest's annotations); mypy cannot see it through a mapping keyed by the table
    return ResolveRequest(target=target, installed_requires=dict(installed_requires or {}), **on_request)  # type: ignore[arg-type]
