"""The resolver settings: ONE table, and everything that is derived from it.

Each row is one setting: its field name (the ``ResolveRequest`` field, or a part of the declared
target), its kind, its default, its flag, its config key, its help and the parser that turns the
text a user wrote into the model value. From this table, and nowhere else, come

* the argparse flags of ``resolve``/``lock``/``install``/``snapshot`` (and the target flags of
  ``candidates``/``doctor``): ``add_flags``; every flag defaults to None, so "not typed" is visible;
* the settings a user typed on the command line, parsed once, here, into their model values, with
  the words that gave them (what a regenerate command repeats): ``typed``;
* the config keys, their TOML types and their validation (``cli/config.py`` reads them through
  ``SETTINGS``);
* the one builder ``values -> ResolveRequest``: ``build_request``.

Adding a setting means adding one row here (and its field in ``ResolveRequest``).

The network settings have a table of their own (``NETWORK``): each row a flag of every command that
reads the network, and the field of the fetcher's frozen settings (``net/settings.py``) it sets;
they are no config keys. Adding one means a row there, its field, and its use.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, TypeAlias
from urllib.parse import urlsplit

from ..errors import UsageError

if TYPE_CHECKING:
    from packaging.utils import NormalizedName
    from packaging.version import Version

    from ..model.cuda import CudaLabel
    from ..model.declared import NamedInterpreter, Platform, PythonVersion
    from ..model.gpu import GpuArch
    from ..model.request import FlashInferChoice, Requested, ResolveRequest, TorchChoice
    from ..model.source import BuildSpec
    from ..model.target import Target
    from ..net.settings import FetchSettings

Kind = Literal["str", "optional", "bool", "list"]

# What a user writes for a setting (a flag's text, a config key's TOML value): a text, a switch, or
# texts (a repeated flag, a TOML array).
Raw: TypeAlias = "str | bool | tuple[str, ...]"
# What a row's parser makes of it: the model value (``ResolveRequest``'s field, or a part of the
# declared target). None: an optional setting not given.
Value: TypeAlias = (
    "PythonVersion | NamedInterpreter | Platform | Mapping[NormalizedName, Version] | CudaLabel | TorchChoice | FlashInferChoice"
    " | tuple[Requested, ...] | tuple[GpuArch, ...] | tuple[BuildSpec, ...] | tuple[str, ...] | str | bool | float | None"
)

TARGET_GROUP = "target (markers and tags are the target's, never this machine's)"
RESOLVE_GROUP = "what to resolve"
DEFAULT_PLATFORM = "x86_64-manylinux_2_28"


# The parsers import the model when called: --help builds the flags from this table and stays light
# (each figure: what that import would add to --help; see app.py's command table for how it was timed).


def _python(text: str) -> PythonVersion | NamedInterpreter:
    """``--python``: a version to declare (range-checked) or an interpreter to inspect (found then)."""
    from ..model.declared import parse_python  # +73 ms on --help

    return parse_python(text)


def _declared_python(value: Value) -> Value:
    """A configured target's ``python`` (a config key, or ``--python`` over a configured target): a
    declared version, never an interpreter."""
    from ..model.declared import PythonVersion  # +73 ms on --help

    if value is not None and not isinstance(value, PythonVersion):
        raise UsageError(
            f"--python {str(value)!r} is not a Python version",
            hint="use 3.<minor>[.<micro>][t], e.g. 3.12; a configured target is declared, never an interpreter path",
        )
    return value


def _platform(text: str) -> Platform:
    from ..model.declared import Platform  # +73 ms on --help

    return Platform.parse(text)


def _installed(items: Sequence[str]) -> Mapping[NormalizedName, Version]:
    from ..model.declared import installed_pins  # +73 ms on --help

    return installed_pins(items)


def _requirements(items: Sequence[str]) -> tuple[Requested, ...]:
    from ..model.request import requested  # +111 ms on --help

    return requested(tuple(items), "--with")


def _build_specs(items: Sequence[str]) -> tuple[BuildSpec, ...]:
    from ..model.source import parse_build_spec  # +82 ms on --help

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
    from ..model.request import TorchChoice  # +111 ms on --help

    return TorchChoice.parse(text)


def _upgrade_packages(items: Sequence[str]) -> tuple[str, ...]:
    from ..model.request import parse_upgrade_packages  # +111 ms on --help

    return parse_upgrade_packages(tuple(items))


def _flashinfer(text: str) -> FlashInferChoice:
    from ..model.request import FlashInferChoice  # +111 ms on --help

    return FlashInferChoice.parse(text)


def _cuda(text: str | None) -> CudaLabel | None:
    from ..model.request import parse_cuda  # +111 ms on --help

    return parse_cuda(text)


def _overrides(items: Sequence[str]) -> tuple[Requested, ...]:
    from ..model.request import requested  # +111 ms on --help

    return requested(tuple(items), "--override")


MAX_OVERRIDES_BYTES = 1 << 20


def _overrides_file(text: str) -> tuple[Requested, ...]:
    """The requirements of a requirements-style file (parsed once, here: ``Requested`` values as
    ``--override`` gives them): one a line, ``#`` comments and blank lines skipped. A regular file
    of at most ``MAX_OVERRIDES_BYTES``; an error names the file and the line number and never
    quotes the line (a file named by mistake may hold a secret)."""
    from ..data.toml import read_text  # +94 ms on --help
    from ..model.request import Requested  # +111 ms on --help

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
    from ..model.request import parse_day  # +111 ms on --help

    return parse_day(text)


def _abi_mismatch(text: str) -> str:
    from ..model.request import ABI_MISMATCH_CHOICES  # +111 ms on --help

    value = text.strip()
    if value not in ABI_MISMATCH_CHOICES:
        raise UsageError(f"--abi-mismatch {text!r} is not one of {', '.join(ABI_MISMATCH_CHOICES)}", hint="error (default: no plan) or warn (plan it, flagged)")
    return value


def _gpus(items: Sequence[str]) -> tuple[GpuArch, ...]:
    from ..model.request import parse_gpu_list  # +111 ms on --help

    return parse_gpu_list(tuple(items))


def _apis(items: Sequence[str]) -> tuple[str, ...]:
    if not items:
        return ()  # the GPU table (gpus.toml) is read only when an API is named
    from ..data.gpus import default_gpu_table  # +124 ms on --help

    table = default_gpu_table()
    for name in items:
        table.api(name)  # an unknown API is a UsageError listing the known ones
    return tuple(dict.fromkeys(items))


def records_url(text: str) -> str:
    """``--scan-records``: an http(s) URL of a folder of scan records, or ``none``."""
    value = text.strip()
    if value == "none":
        return value
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(
            f"--scan-records {text!r} is not an http(s) URL", hint="the URL of a folder of <sha256>.json scan records (a wheelhouse's records/), or none"
        )
    return value


def _same(value: Value) -> Value:
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class Setting:
    """One resolver setting. ``parse`` turns the raw value (a str, a bool or a tuple of str) into
    the model value and raises ``UsageError`` naming ``flag`` when it cannot; ``configured`` checks
    a configured target's model value (a config key, or a flag over a configured target)."""

    name: str  # field name: ResolveRequest's, or python/platform/installed for the declared target
    kind: Kind
    default: Raw | None
    flag: str  # for a bool that defaults to True, the negative flag (--no-jit-cache)
    key: str  # config key
    help: str
    group: str  # argparse group
    parse: Callable[..., Value] = _same  # Raw -> Value; each row's parser takes its kind's raw value
    configured: Callable[[Value], Value] = _same
    metavar: str | None = None
    joins: str | None = None  # a list setting whose field this one's parsed items are added to (--overrides FILE)
    names_file: bool = False  # the value is a file to read: a config's is relative to its folder and must lie inside it

    @property
    def on_request(self) -> bool:
        """A field of ``ResolveRequest``, or added to one (the others describe the declared target)."""
        return (self.joins or self.name) in _request_fields()

    def words(self, raw: Raw) -> list[str]:
        """The command-line words that give ``raw``."""
        if isinstance(raw, bool):
            return [self.flag] if raw != self.default else []
        if isinstance(raw, tuple):
            return [w for item in raw for w in (self.flag, item)]
        return [self.flag, raw]


def _request_fields() -> frozenset[str]:
    from ..model.request import ResolveRequest  # +111 ms on --help

    return frozenset(f.name for f in fields(ResolveRequest) if f.init)


SETTINGS: tuple[Setting, ...] = (
    Setting(
        name="python",
        kind="optional",
        default=None,
        flag="--python",
        key="python",
        group=TARGET_GROUP,
        parse=_python,
        configured=_declared_python,
        metavar="PATH|X.Y",
        help="an interpreter to inspect, or a Python version to declare (default: the active virtual environment, else python3)",
    ),
    Setting(
        name="platform",
        kind="str",
        default=DEFAULT_PLATFORM,
        flag="--platform",
        key="platform",
        group=TARGET_GROUP,
        parse=_platform,
        metavar="PLATFORM",
        help="with a declared --python: x86_64-manylinux_2_28 (default) or aarch64-manylinux_2_28, ...",
    ),
    Setting(
        name="installed",
        kind="list",
        default=(),
        flag="--installed",
        key="installed",
        group=TARGET_GROUP,
        parse=_installed,
        metavar="NAME==VERSION",
        help="with a declared --python: a distribution the target already has (repeatable), e.g. torch==2.12.0.dev20260307+cu130",
    ),
    Setting(
        name="cuda",
        kind="optional",
        default=None,
        flag="--cuda",
        key="cuda",
        group=TARGET_GROUP,
        parse=_cuda,
        metavar="cuNNN",
        help="CUDA label; default: the installed torch's (+cu130). A different one is an error unless --change-cuda",
    ),
    Setting(
        name="change_cuda",
        kind="bool",
        default=False,
        flag="--change-cuda",
        key="change-cuda",
        group=TARGET_GROUP,
        help="allow --cuda to move torch to another CUDA label",
    ),
    Setting(
        name="torch",
        kind="str",
        default="nightly",
        flag="--torch",
        key="torch",
        group=RESOLVE_GROUP,
        parse=_torch,
        metavar="CHANNEL|SPEC",
        help="nightly (default), test, stable: the channel FlashInfer and the rest follow, and with no torch installed the newest torch of it "
        "with a wheel for this target; an installed torch is kept (a note says when its channel differs or a newer one exists) unless "
        "--upgrade-package torch; installed (keep exactly what is installed); or a version/specifier (an exact version moves torch to it)",
    ),
    Setting(
        name="upgrade_package",
        kind="list",
        default=(),
        flag="--upgrade-package",
        key="upgrade-package",
        group=RESOLVE_GROUP,
        parse=_upgrade_packages,
        metavar="torch",
        help="move the installed torch to the newest of --torch's channel with a wheel for this target (uv's word; without it an "
        "installed torch is kept; never lower than installed unless --allow-downgrade)",
    ),
    Setting(
        name="allow_downgrade",
        kind="bool",
        default=False,
        flag="--allow-downgrade",
        key="allow-downgrade",
        group=RESOLVE_GROUP,
        help="let --torch pick a torch lower than the installed one (off: such a request fails)",
    ),
    Setting(
        name="flashinfer",
        kind="str",
        default="latest",
        flag="--flashinfer",
        key="flashinfer",
        group=RESOLVE_GROUP,
        parse=_flashinfer,
        metavar="VERSION|latest|installed|nightly|none",
        help="FlashInfer version: latest (default: the newest with every component for this target, an installed one upgraded), "
        "installed (keep an installed FlashInfer that fits, else the newest), nightly, none, or a version",
    ),
    Setting(
        name="jit_cache",
        kind="bool",
        default=True,
        flag="--no-jit-cache",
        key="jit-cache",
        group=RESOLVE_GROUP,
        help="leave out flashinfer-jit-cache (kernels are JIT-compiled; needs nvcc)",
    ),
    Setting(name="cubin", kind="bool", default=True, flag="--no-cubin", key="cubin", group=RESOLVE_GROUP, help="leave out flashinfer-cubin"),
    Setting(
        name="with_",
        kind="list",
        default=(),
        flag="--with",
        key="with",
        group=RESOLVE_GROUP,
        parse=_requirements,
        metavar="REQ",
        help="add a package to the plan, e.g. --with torchvision (repeatable)",
    ),
    Setting(
        name="overrides",
        kind="list",
        default=(),
        flag="--override",
        key="overrides",
        group=RESOLVE_GROUP,
        parse=_overrides,
        metavar="REQ",
        help="replace every requirement on that package by REQ, as uv's --override (repeatable), e.g. --override 'torch==2.12.0.dev20260307+cu130'",
    ),
    Setting(
        name="overrides_file",
        kind="optional",
        default=None,
        flag="--overrides",
        key="overrides-file",
        group=RESOLVE_GROUP,
        parse=_overrides_file,
        metavar="FILE",
        joins="overrides",
        names_file=True,
        help="a file of overrides, one requirement a line (as --override)",
    ),
    Setting(
        name="auto_torch_override",
        kind="bool",
        default=True,
        flag="--no-auto-torch-override",
        key="auto-torch-override",
        group=RESOLVE_GROUP,
        help="do not override a package's torch pin (or torch-family pin) by the selected torch: a package you named then fails naming the pin (never walked back unasked); a dependency may be walked back",
    ),
    Setting(
        name="without",
        kind="list",
        default=(),
        flag="--without",
        key="without",
        group=RESOLVE_GROUP,
        metavar="NAME",
        help="leave a package out of the plan, with what only it needs (repeatable), e.g. --without sgl-kernel",
    ),
    Setting(
        name="build_packages",
        kind="list",
        default=(),
        flag="--build",
        key="build",
        group=RESOLVE_GROUP,
        parse=_build_specs,
        metavar="NAME|'NAME @ URL'",
        help="when no wheel of NAME runs on the kept torch, build it from its sdist against that torch (repeatable); or build it from a "
        "source tree: 'NAME @ git+URL@REV#subdirectory=DIR' (a git commit) or 'NAME @ file:///path/to/tree' (a local, patched checkout). "
        "install and lock build it once (the wheel cache keeps it; wheelhouse ships it), with TORCH_CUDA_ARCH_LIST from --gpu and MAX_JOBS from memory",
    ),
    Setting(
        name="build_timeout",
        kind="optional",
        default=None,
        flag="--build-timeout",
        key="build-timeout",
        group=RESOLVE_GROUP,
        parse=_build_timeout,
        metavar="SECONDS",
        help="stop a --build that runs longer than this, with a clear error and nothing stored (default 21600: six hours)",
    ),
    Setting(
        name="abi_mismatch",
        kind="str",
        default="error",
        flag="--abi-mismatch",
        key="abi-mismatch",
        group=RESOLVE_GROUP,
        parse=_abi_mismatch,
        metavar="{error,warn}",
        help="a torch-ABI wheel built for another torch: error (default: no plan) or warn (plan it, flagged)",
    ),
    Setting(
        name="keep_broken",
        kind="list",
        default=(),
        flag="--keep-broken",
        key="keep-broken",
        group=RESOLVE_GROUP,
        metavar="NAME",
        help="an installed package the plan knows will not work beside it (a FlashInfer component out of line with flashinfer-python, "
        "a compiled package whose imports the kept torch lacks) stops the command before anything is installed; "
        "--keep-broken NAME keeps it as it is, said in a note (repeatable)",
    ),
    Setting(
        name="exclude_newer",
        kind="optional",
        default=None,
        flag="--exclude-newer",
        key="exclude-newer",
        group=RESOLVE_GROUP,
        parse=_exclude_newer,
        metavar="YYYY-MM-DD",
        help="only files uploaded on or before this day (UTC, PEP 700 upload times); a page without upload times is said, not cut",
    ),
    Setting(
        name="wheel_variants",
        kind="bool",
        default=False,
        flag="--wheel-variants",
        key="wheel-variants",
        group=RESOLVE_GROUP,
        help="judge variant wheels (PEP 817/825/850, drafts) by their release's variants.json against the target's CUDA, "
        "--gpu set and kept torch, and plan the most specific that matches (off: a plain wheel is planned); uv cannot "
        "install one, so install, export uv and a lock refuse a plan holding one (docs/reference/wheel-variants.md)",
    ),
    Setting(
        name="gpus",
        kind="list",
        default=(),
        flag="--gpu",
        key="gpus",
        group=RESOLVE_GROUP,
        parse=_gpus,
        metavar="SM",
        help="a GPU the target runs, e.g. sm120, sm_90, 12.0 (repeatable or comma-separated; default: what nvidia-smi "
        "lists for a local interpreter, any GPU for a declared --python X.Y)",
    ),
    Setting(
        name="require_api",
        kind="list",
        default=(),
        flag="--require-api",
        key="require-api",
        group=RESOLVE_GROUP,
        parse=_apis,
        metavar="NAME",
        help="a FlashInfer API the plan must have, e.g. mm_mxfp8 or mm_mxfp8:cutlass (repeatable): raises FlashInfer's floor",
    ),
    Setting(
        name="scan_records",
        kind="optional",
        default=None,
        flag="--scan-records",
        key="scan-records",
        group=RESOLVE_GROUP,
        parse=records_url,
        metavar="URL",
        help="a folder of scan records (<sha256>.json, and index.json: all of them in one request) on a web server, e.g. a "
        "wheelhouse's URL/records/: a compiled wheel with a record there is not read by range (its verdict is provisional; "
        "install reads it again); none: not even the records the tool ships",
    ),
    Setting(
        name="all_gpu_archs",
        kind="bool",
        default=False,
        flag="--all-gpu-archs",
        key="all-gpu-archs",
        group=RESOLVE_GROUP,
        help="plan every jit-cache provider the shim lists, not only those the GPUs need",
    ),
)

BY_NAME: Mapping[str, Setting] = MappingProxyType({s.name: s for s in SETTINGS})
BY_KEY: Mapping[str, Setting] = MappingProxyType({s.key: s for s in SETTINGS})
TARGET_FLAGS = tuple(s.name for s in SETTINGS if s.group == TARGET_GROUP)


# -- the network settings: what a command's fetcher, its transport and the range child are made of --


def positive_seconds(text: str) -> float:
    """``--timeout``: a positive number of seconds (a usage error otherwise, exit 2)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text}: must be a positive number of seconds")
    return value


def byte_count(text: str) -> int:
    """``--scan-budget``: a positive number of bytes, with an optional K, M or G (binary) suffix."""
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    number, unit = (text[:-1], units[text[-1].upper()]) if text[-1:].upper() in units else (text, 1)
    try:
        value = int(number) * unit
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of bytes (e.g. 268435456 or 256M)") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text}: must be a positive number of bytes")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class NetworkSetting:
    """One network flag and the field of the fetcher's frozen settings it sets (``net/settings.py``):
    a ``TransportSettings`` field (``into="transport"``: the range child gets it too) or a
    ``FetchSettings`` one. Not typed: that value's default."""

    name: str  # the field's name
    into: Literal["transport", "fetch"]
    flag: str
    help: str
    kind: Literal["value", "bool", "list"] = "value"
    parse: Callable[[str], str | float | int] = str  # argparse's ``type``: a bad value is a usage error (exit 2)
    metavar: str | None = None


NETWORK: tuple[NetworkSetting, ...] = (
    NetworkSetting(
        name="allow_insecure_hosts",
        into="transport",
        flag="--allow-insecure-host",
        kind="list",
        metavar="HOST",
        help="allow plain http:// to HOST (loopback is always allowed)",
    ),
    NetworkSetting(name="timeout", into="transport", flag="--timeout", parse=positive_seconds, metavar="SECONDS", help="per-request timeout (default 30)"),
    NetworkSetting(
        name="system_certs",
        into="transport",
        flag="--system-certs",
        kind="bool",
        help="verify https against the system trust store (the distribution's CA bundle on Linux, the OS verifier elsewhere) instead of certifi's bundle (SSL_CERT_FILE / SSL_CERT_DIR win over both)",
    ),
    NetworkSetting(
        name="scan_budget",
        into="fetch",
        flag="--scan-budget",
        parse=byte_count,
        metavar="BYTES",
        help="most bytes read to scan one compiled wheel tied to torch, to its members' dynamic sections (default 256M; K, M, G suffixes)",
    ),
)


def add_network_flags(group: argparse._ArgumentGroup) -> None:
    """The flags of the network settings table; every default is None (not typed: the settings' default)."""
    for s in NETWORK:
        if s.kind == "bool":
            group.add_argument(s.flag, dest=s.name, action="store_const", const=True, default=None, help=s.help)
        elif s.kind == "list":
            group.add_argument(s.flag, dest=s.name, action="append", default=None, type=s.parse, metavar=s.metavar, help=s.help)
        else:
            group.add_argument(s.flag, dest=s.name, default=None, type=s.parse, metavar=s.metavar, help=s.help)


def fetch_settings(args: argparse.Namespace) -> FetchSettings:
    """The network flags typed on ``args`` as the fetcher's frozen settings (a command without
    them: the defaults)."""
    from ..net.settings import FetchSettings, TransportSettings  # +147 ms on --help

    typed: dict[NetworkSetting, Any] = {s: tuple(v) if s.kind == "list" else v for s in NETWORK if (v := getattr(args, s.name, None)) is not None}
    transport = replace(TransportSettings(), **{s.name: v for s, v in typed.items() if s.into == "transport"})
    return replace(FetchSettings(transport=transport), **{s.name: v for s, v in typed.items() if s.into == "fetch"})


# -- argparse ------------------------------------------------------------------------------------


def add_flags(parser: argparse.ArgumentParser, names: Iterable[str] | None = None, *, help: Mapping[str, str] | None = None) -> None:
    """The flags of the settings ``names`` (all when None), in their groups, in table order. Every
    default is None: ``typed`` tells what the user typed."""
    wanted = set(BY_NAME if names is None else names)
    groups: dict[str, argparse._ArgumentGroup] = {}
    for s in SETTINGS:
        if s.name not in wanted:
            continue
        group = groups.get(s.group) or groups.setdefault(s.group, parser.add_argument_group(s.group))
        text = (help or {}).get(s.name, s.help)
        if s.kind == "bool":
            group.add_argument(s.flag, dest=s.name, action="store_const", const=not s.default, default=None, help=text)
        elif s.kind == "list":
            group.add_argument(s.flag, dest=s.name, action="append", default=None, metavar=s.metavar, help=text)
        else:
            group.add_argument(s.flag, dest=s.name, default=None, metavar=s.metavar, help=text)


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
        from ..model.declared import NamedInterpreter, PythonVersion  # +73 ms on --help

        value = self.values.get("python")
        return value if isinstance(value, PythonVersion | NamedInterpreter) else None

    @property
    def declares(self) -> bool:
        """Whether ``--python`` declares a version (else the target is a real interpreter, probed)."""
        from ..model.declared import PythonVersion  # +73 ms on --help

        return isinstance(self.values.get("python"), PythonVersion)

    @property
    def platform(self) -> Platform:
        from ..model.declared import Platform  # +73 ms on --help

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
        from ..model.cuda import CudaLabel  # +73 ms on --help (the model package, as model.declared)

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
    from ..model.declared import Platform, PythonVersion, declared_target  # +73 ms on --help

    python, platform, installed = values["python"], values["platform"], values["installed"]
    if not isinstance(python, PythonVersion) or not isinstance(platform, Platform) or not isinstance(installed, Mapping):
        raise TypeError(f"not a declared target: {python!r}, {platform!r}, {installed!r}")
    return declared_target(python, platform, installed)


def build_request(values: Mapping[str, Value], *, target: Target, installed_requires: Mapping[NormalizedName, tuple[str, ...]] | None = None) -> ResolveRequest:
    """THE builder: complete model values (``defaults`` overlaid) -> ``ResolveRequest``."""
    from ..model.request import ResolveRequest  # +111 ms on --help

    on_request = {s.name: values[s.name] for s in SETTINGS if s.on_request and s.joins is None}
    for s in SETTINGS:
        joined, into = values.get(s.name), on_request.get(s.joins or "")
        if s.joins is not None and isinstance(joined, tuple) and joined and isinstance(into, tuple):
            on_request[s.joins] = (*into, *joined)
    # each row's parser gives its field's type (tests/cli/test_cli.py: test_each_rows_model_value_is_its_request_fields
    # checks every row against ResolveRequest's annotations); mypy cannot see it through a mapping keyed by the table
    return ResolveRequest(target=target, installed_requires=dict(installed_requires or {}), **on_request)  # type: ignore[arg-type]
