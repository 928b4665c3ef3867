"""The resolver settings' flags: ONE table of rows, and the argparse flags made from it.

Each row is one setting: its field name (the ``ResolveRequest`` field, or a part of the declared
target), its kind, its default, its flag, its config key, its help. ``add_flags`` makes the argparse
flags of ``resolve``/``lock``/``install``/``snapshot`` (and the target flags of
``candidates``/``doctor``) from it; every flag defaults to None, so "not typed" is visible.

What a setting's text means (its parser into the model value, the request built from the values)
is in ``settings.py``, which pairs each row here with its parser: this module imports neither the
model nor packaging, so ``--help`` (which needs the flags, and only them) stays light.

Adding a setting means adding one row here, its parser in ``settings.py`` when its text is more than
a text, and its field in ``ResolveRequest``.

The network settings have a table of their own (``NETWORK``): each row a flag of every command that
reads the network, and the field of the fetcher's frozen settings (``net/settings.py``) it sets;
they are no config keys. Adding one means a row there, its field, and its use.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, TypeAlias
from urllib.parse import urlsplit

from ..errors import UsageError

Kind = Literal["str", "optional", "bool", "list"]

# What a user writes for a setting (a flag's text, a config key's TOML value): a text, a switch, or
# texts (a repeated flag, a TOML array).
Raw: TypeAlias = "str | bool | tuple[str, ...]"

TARGET_GROUP = "target (markers and tags are the target's, never this machine's)"
RESOLVE_GROUP = "what to resolve"
DEFAULT_PLATFORM = "x86_64-manylinux_2_28"


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


@dataclass(frozen=True, slots=True, kw_only=True)
class Flag:
    """One resolver setting's row: how it is typed (a flag, a config key) and shown (help, group)."""

    name: str  # field name: ResolveRequest's, or python/platform/installed for the declared target
    kind: Kind
    default: Raw | None
    flag: str  # for a bool that defaults to True, the negative flag (--no-jit-cache)
    key: str  # config key
    help: str
    group: str  # argparse group
    metavar: str | None = None
    joins: str | None = None  # a list setting whose field this one's parsed items are added to (--overrides FILE)
    names_file: bool = False  # the value is a file to read: a config's is relative to its folder and must lie inside it

    def words(self, raw: Raw) -> list[str]:
        """The command-line words that give ``raw``."""
        if isinstance(raw, bool):
            return [self.flag] if raw != self.default else []
        if isinstance(raw, tuple):
            return [w for item in raw for w in (self.flag, item)]
        return [self.flag, raw]


FLAGS: tuple[Flag, ...] = (
    Flag(
        name="python",
        kind="optional",
        default=None,
        flag="--python",
        key="python",
        group=TARGET_GROUP,
        metavar="PATH|X.Y",
        help="an interpreter to inspect, or a Python version to declare (default: the active virtual environment, else python3)",
    ),
    Flag(
        name="platform",
        kind="str",
        default=DEFAULT_PLATFORM,
        flag="--platform",
        key="platform",
        group=TARGET_GROUP,
        metavar="PLATFORM",
        help="with a declared --python: x86_64-manylinux_2_28 (default) or aarch64-manylinux_2_28, ...",
    ),
    Flag(
        name="installed",
        kind="list",
        default=(),
        flag="--installed",
        key="installed",
        group=TARGET_GROUP,
        metavar="NAME==VERSION",
        help="with a declared --python: a distribution the target already has (repeatable), e.g. torch==2.12.0.dev20260307+cu130",
    ),
    Flag(
        name="cuda",
        kind="optional",
        default=None,
        flag="--cuda",
        key="cuda",
        group=TARGET_GROUP,
        metavar="cuNNN",
        help="CUDA label; default: the installed torch's (+cu130). A different one is an error unless --change-cuda",
    ),
    Flag(
        name="change_cuda",
        kind="bool",
        default=False,
        flag="--change-cuda",
        key="change-cuda",
        group=TARGET_GROUP,
        help="allow --cuda to move torch to another CUDA label",
    ),
    Flag(
        name="torch",
        kind="str",
        default="nightly",
        flag="--torch",
        key="torch",
        group=RESOLVE_GROUP,
        metavar="CHANNEL|SPEC",
        help="nightly (default), test, stable: the channel FlashInfer and the rest follow, and with no torch installed the newest torch of it "
        "with a wheel for this target; an installed torch is kept (a note says when its channel differs or a newer one exists) unless "
        "--upgrade-package torch; installed (keep exactly what is installed); or a version/specifier (an exact version moves torch to it)",
    ),
    Flag(
        name="upgrade_package",
        kind="list",
        default=(),
        flag="--upgrade-package",
        key="upgrade-package",
        group=RESOLVE_GROUP,
        metavar="torch",
        help="move the installed torch to the newest of --torch's channel with a wheel for this target (uv's word; without it an "
        "installed torch is kept; never lower than installed unless --allow-downgrade)",
    ),
    Flag(
        name="allow_downgrade",
        kind="bool",
        default=False,
        flag="--allow-downgrade",
        key="allow-downgrade",
        group=RESOLVE_GROUP,
        help="let --torch pick a torch lower than the installed one (off: such a request fails)",
    ),
    Flag(
        name="flashinfer",
        kind="str",
        default="latest",
        flag="--flashinfer",
        key="flashinfer",
        group=RESOLVE_GROUP,
        metavar="VERSION|latest|installed|nightly|none",
        help="FlashInfer version: latest (default: the newest with every component for this target, an installed one upgraded), "
        "installed (keep an installed FlashInfer that fits, else the newest), nightly, none, or a version",
    ),
    Flag(
        name="jit_cache",
        kind="bool",
        default=True,
        flag="--no-jit-cache",
        key="jit-cache",
        group=RESOLVE_GROUP,
        help="leave out flashinfer-jit-cache (kernels are JIT-compiled; needs nvcc)",
    ),
    Flag(name="cubin", kind="bool", default=True, flag="--no-cubin", key="cubin", group=RESOLVE_GROUP, help="leave out flashinfer-cubin"),
    Flag(
        name="with_",
        kind="list",
        default=(),
        flag="--with",
        key="with",
        group=RESOLVE_GROUP,
        metavar="REQ",
        help="add a package to the plan, e.g. --with torchvision (repeatable)",
    ),
    Flag(
        name="overrides",
        kind="list",
        default=(),
        flag="--override",
        key="overrides",
        group=RESOLVE_GROUP,
        metavar="REQ",
        help="replace every requirement on that package by REQ, as uv's --override (repeatable), e.g. --override 'torch==2.12.0.dev20260307+cu130'",
    ),
    Flag(
        name="overrides_file",
        kind="optional",
        default=None,
        flag="--overrides",
        key="overrides-file",
        group=RESOLVE_GROUP,
        metavar="FILE",
        joins="overrides",
        names_file=True,
        help="a file of overrides, one requirement a line (as --override)",
    ),
    Flag(
        name="auto_torch_override",
        kind="bool",
        default=True,
        flag="--no-auto-torch-override",
        key="auto-torch-override",
        group=RESOLVE_GROUP,
        help="do not override a package's torch pin (or torch-family pin) by the selected torch: a package you named then fails naming the pin (never walked back unasked); a dependency may be walked back",
    ),
    Flag(
        name="without",
        kind="list",
        default=(),
        flag="--without",
        key="without",
        group=RESOLVE_GROUP,
        metavar="NAME",
        help="leave a package out of the plan, with what only it needs (repeatable), e.g. --without sgl-kernel",
    ),
    Flag(
        name="build_packages",
        kind="list",
        default=(),
        flag="--build",
        key="build",
        group=RESOLVE_GROUP,
        metavar="NAME|'NAME @ URL'",
        help="when no wheel of NAME runs on the kept torch, build it from its sdist against that torch (repeatable); or build it from a "
        "source tree: 'NAME @ git+URL@REV#subdirectory=DIR' (a git commit) or 'NAME @ file:///path/to/tree' (a local, patched checkout). "
        "install and lock build it once (the wheel cache keeps it; wheelhouse ships it), with TORCH_CUDA_ARCH_LIST from --gpu and MAX_JOBS from memory",
    ),
    Flag(
        name="build_timeout",
        kind="optional",
        default=None,
        flag="--build-timeout",
        key="build-timeout",
        group=RESOLVE_GROUP,
        metavar="SECONDS",
        help="stop a --build that runs longer than this, with a clear error and nothing stored (default 21600: six hours)",
    ),
    Flag(
        name="abi_mismatch",
        kind="str",
        default="error",
        flag="--abi-mismatch",
        key="abi-mismatch",
        group=RESOLVE_GROUP,
        metavar="{error,warn}",
        help="a torch-ABI wheel built for another torch: error (default: no plan) or warn (plan it, flagged)",
    ),
    Flag(
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
    Flag(
        name="exclude_newer",
        kind="optional",
        default=None,
        flag="--exclude-newer",
        key="exclude-newer",
        group=RESOLVE_GROUP,
        metavar="YYYY-MM-DD",
        help="only files uploaded on or before this day (UTC, PEP 700 upload times); a page without upload times is said, not cut",
    ),
    Flag(
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
    Flag(
        name="gpus",
        kind="list",
        default=(),
        flag="--gpu",
        key="gpus",
        group=RESOLVE_GROUP,
        metavar="SM",
        help="a GPU the target runs, e.g. sm120, sm_90, 12.0 (repeatable or comma-separated; default: what nvidia-smi "
        "lists for a local interpreter, any GPU for a declared --python X.Y)",
    ),
    Flag(
        name="require_api",
        kind="list",
        default=(),
        flag="--require-api",
        key="require-api",
        group=RESOLVE_GROUP,
        metavar="NAME",
        help="a FlashInfer API the plan must have, e.g. mm_mxfp8 or mm_mxfp8:cutlass (repeatable): raises FlashInfer's floor",
    ),
    Flag(
        name="scan_records",
        kind="optional",
        default=None,
        flag="--scan-records",
        key="scan-records",
        group=RESOLVE_GROUP,
        metavar="URL",
        help="a folder of scan records (<sha256>.json, and index.json: all of them in one request) on a web server, e.g. a "
        "wheelhouse's URL/records/: a compiled wheel with a record there is not read by range (its verdict is provisional; "
        "install reads it again); none: not even the records the tool ships",
    ),
    Flag(
        name="all_gpu_archs",
        kind="bool",
        default=False,
        flag="--all-gpu-archs",
        key="all-gpu-archs",
        group=RESOLVE_GROUP,
        help="plan every jit-cache provider the shim lists, not only those the GPUs need",
    ),
)

TARGET_FLAGS = tuple(s.name for s in FLAGS if s.group == TARGET_GROUP)


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


# -- argparse ------------------------------------------------------------------------------------


def add_flags(parser: argparse.ArgumentParser, names: Iterable[str] | None = None, *, help: Mapping[str, str] | None = None) -> None:
    """The flags of the settings ``names`` (all when None), in their groups, in table order. Every
    default is None: ``typed`` tells what the user typed."""
    wanted = {s.name for s in FLAGS} if names is None else set(names)
    groups: dict[str, argparse._ArgumentGroup] = {}
    for s in FLAGS:
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
