"""The option groups the commands share: their flags, their frozen values, and the one reader of
each from the parsed command line.

A command's flags are defined once: the resolver settings by the settings table
(``settings.add_flags``), the groups here (``add_output_flags``, ``add_index_flags``,
``add_network_flags``), the rest by the command's ``register``. Right after parsing, the command's
``read(args, env)`` turns the ``argparse.Namespace`` into the command's one frozen settings
value: these groups (read by ``output_options``, ``source_options``, ``config_options``,
``network_options`` and the table's ``settings.typed``), composed in ``CommandOptions`` /
``ResolveOptions``, plus the command's own fields. Nothing after that reads the Namespace: the
shared helpers (``common``, ``downloads``, ``building``, ``sources``) take these values.

The resolver settings are parsed here, once, into their model values (``settings.typed``: a bad
value is a usage error before the command runs); nothing downstream parses a setting again. The
other readers copy what was typed. Light at import time (``--help`` imports it).
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from ..urls import redact_url
from . import flags

if TYPE_CHECKING:
    from .assemble import NetworkOptions
    from .settings import TypedSettings


# -- flags -----------------------------------------------------------------------------------------


def add_resolve_flags(p: argparse.ArgumentParser) -> None:
    """Every resolver setting (from the settings table), then the index flags."""
    flags.add_flags(p)
    add_index_flags(p)


def add_index_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("indexes")
    g.add_argument(
        "--index",
        metavar="NAME=URL",
        action="append",
        default=[],
        help="base URL of a logical index: pytorch, flashinfer or pypi (a mirror keeps the same paths). The PyPI URL otherwise comes from uv/pip configuration",
    )
    g.add_argument(
        "--package-index",
        metavar="NAME=URL",
        action="append",
        default=[],
        help="an index (PEP 503/691 simple API) that alone serves package NAME, e.g. per-torch builds "
        "(flash-attn=https://wheels.example/simple/): builds whose local label names the kept torch "
        "(+cu12torch2.9cxx11abiTRUE) are chosen from it (repeatable; config package-indexes)",
    )
    g.add_argument("--snapshot", metavar="DIR", type=Path, help="replay a recorded snapshot, with no network at all (unless --live-fallback)")
    g.add_argument(
        "--live-fallback",
        action="store_true",
        help="with --snapshot (or a config's snapshot): fetch what the snapshot lacks from the live indexes (default: a miss is an error)",
    )
    add_network_flags(g)


def add_network_flags(g: argparse._ArgumentGroup) -> None:
    """The cache and HTTP flags every command that downloads shares: the cache folder, then the
    rows of the network settings table (``settings.NETWORK``)."""
    g.add_argument("--cache-dir", metavar="DIR", type=directory_path, help="the HTTP and wheel cache (default: $XDG_CACHE_HOME/resolve-gpu-stack)")
    flags.add_network_flags(g)


def add_output_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("table", "json"), help="output format (default: table on a terminal, json otherwise)")
    p.add_argument("-v", "--verbose", action="store_true", help="log requests and decisions to stderr")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress messages")


def absolute_path(text: str) -> Path:
    """A path flag, made absolute once, here: every path handed on (to uv above all, which runs
    elsewhere and follows links from a temporary folder) names the same file from anywhere."""
    return Path(text).expanduser().absolute()


def directory_path(text: str) -> Path:
    """A folder flag (``--cache-dir``): absolute; an existing file there is a usage error (exit 2), never silently ignored."""
    path = absolute_path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a file, not a directory (pass a folder, or a path that does not exist yet)")
    return path


def local_file(text: str) -> Path:
    """A file flag that takes no URL (``install --lock``): a URL is said to be one, not read as a path."""
    if "://" in text:
        raise argparse.ArgumentTypeError(f"{redact_url(text)} is a URL; a local file is needed (download it first, e.g. `curl -fO URL`)")
    return absolute_path(text)


# -- the groups ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputOptions:
    """``--format``, ``-v``, ``-q`` (``add_output_flags``; ``check`` and ``export`` have their own
    variants). ``format``: as typed, None for the default (table on a terminal, json otherwise)."""

    format: str | None = None
    verbose: bool = False
    quiet: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceOptions:
    """Where the index pages come from (``add_index_flags`` but the network flags): ``--index`` and
    ``--package-index`` as typed (``NAME=URL``, checked by ``common.index_overrides``), ``--snapshot``,
    ``--live-fallback``."""

    indexes: tuple[str, ...] = ()
    package_indexes: tuple[str, ...] = ()
    snapshot: Path | None = None
    live_fallback: bool = False

    @property
    def downloads_off(self) -> bool:
        """``--snapshot`` replays with no network: no wheel is downloaded either, unless ``--live-fallback``
        lets what the snapshot (and the wheel cache) lacks come from the live indexes."""
        return self.snapshot is not None and not self.live_fallback


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigOptions:
    """``--config FILE`` and ``--target NAME...``: which project config, which of its targets (``lock``, ``export``, ``check``)."""

    config: Path | None = None
    targets: tuple[str, ...] = ()

    @property
    def asked(self) -> bool:
        """--config or --target: the configured targets are asked for (``lock``, ``export``)."""
        return self.config is not None or bool(self.targets)


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandOptions:
    """What every command's settings value holds: its output options and the network options its
    session is made with (``app.py``)."""

    output: OutputOptions
    network: NetworkOptions


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolveOptions(CommandOptions):
    """A command that reads indexes for a target of the flags (``resolve``, ``snapshot``, ``lock``,
    ``export``, ``install``, ``candidates``, ``inspect``): where pages come from, and the resolver
    settings typed (the settings table's; a command registers those it takes)."""

    sources: SourceOptions = field(default_factory=SourceOptions)
    typed: TypedSettings


# -- the readers: the only code that reads a parsed command line ----------------------------------


def output_options(args: argparse.Namespace) -> OutputOptions:
    return OutputOptions(format=getattr(args, "format", None), verbose=getattr(args, "verbose", False), quiet=getattr(args, "quiet", False))


def source_options(args: argparse.Namespace) -> SourceOptions:
    return SourceOptions(
        indexes=tuple(getattr(args, "index", None) or ()),
        package_indexes=tuple(getattr(args, "package_index", None) or ()),
        snapshot=getattr(args, "snapshot", None),
        live_fallback=getattr(args, "live_fallback", False),
    )


def config_options(args: argparse.Namespace) -> ConfigOptions:
    return ConfigOptions(config=args.config, targets=tuple(args.target))


def network_options(args: argparse.Namespace, env: Mapping[str, str]) -> NetworkOptions:
    """The network flags (``add_network_flags``) as one value; a command without them gets the defaults."""
    # the cache and the network parts: +36 ms (net.cache), +710 ms (assemble) and +182 ms (settings: the model) on --help
    from ..net.cache import default_cache_dir
    from .assemble import NetworkOptions
    from .settings import fetch_settings

    output = output_options(args)
    return NetworkOptions(
        cache_dir=getattr(args, "cache_dir", None) or default_cache_dir(env),
        fetch=fetch_settings(args),
        progress=progress_printer(output),
        on_retry=retry_printer(output),
        scan_records=flags.records_url(records) if (records := getattr(args, "scan_records", None)) is not None else None,  # a bad one: exit 2
    )


class CommandFields(TypedDict):
    """The fields of ``CommandOptions``, for a command's ``read``: ``Mine(**command_fields(args, env), ...)``."""

    output: OutputOptions
    network: NetworkOptions


class ResolveFields(CommandFields):
    """The fields of ``ResolveOptions``."""

    sources: SourceOptions
    typed: TypedSettings


def command_fields(args: argparse.Namespace, env: Mapping[str, str]) -> CommandFields:
    return {"output": output_options(args), "network": network_options(args, env)}


def resolve_fields(args: argparse.Namespace, env: Mapping[str, str]) -> ResolveFields:
    from .settings import typed  # the settings' parsers, the model: +182 ms on --help

    return {"output": output_options(args), "network": network_options(args, env), "sources": source_options(args), "typed": typed(args)}


# -- printing --------------------------------------------------------------------------------------

_PRINT_LOCK = threading.Lock()  # progress lines from several threads never share a line


def say(message: str) -> None:
    """One whole line on stderr, under the one printing lock."""
    with _PRINT_LOCK:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()


def progress_printer(output: OutputOptions) -> Callable[[str], None] | None:
    """What is being fetched, on a terminal (stderr); nothing with -q."""
    if output.quiet or not sys.stderr.isatty():
        return None
    return say


def retry_printer(output: OutputOptions) -> Callable[[str], None] | None:
    """A retry as it happens, on stderr (terminal or not), once per URL in a command: the transport
    says the first retry of a request (``retrying URL in ..., attempt 2 of 5``) and any long wait;
    a URL requested again later does not say its first retry again. Nothing with -q."""
    if output.quiet:
        return None
    seen: set[str] = set()

    def once(text: str) -> None:
        url = text.split(" ", 2)[1] if text.startswith("retrying ") and ", attempt 2 of " in text else text
        if url not in seen:
            seen.add(url)
            say(text)

    return once
