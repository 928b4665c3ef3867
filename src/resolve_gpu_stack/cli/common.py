"""What the commands share: the non-setting flags, index definitions, fetchers, the target and the
request from the flags, the output format and the command line as typed.

Light at import time (``--help`` imports it): the fetchers, the resolver and rich are imported by
the functions that use them.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import shlex
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import IndexDefinitionError, UsageError
from ..urls import normalize_base_url, redact_url
from . import settings as S

if TYPE_CHECKING:
    from ..data.definitions import Definitions
    from ..env.probe import ProbeRun
    from ..model import LockPlan
    from ..model.request import ResolveRequest
    from ..model.target import Target
    from ..net.source import Source
    from .assemble import NetworkOptions, ResolveParts, Session


# -- flags -----------------------------------------------------------------------------------------


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
    """The cache and HTTP flags every command that downloads shares."""
    g.add_argument("--cache-dir", metavar="DIR", type=directory_path, help="the HTTP and wheel cache (default: $XDG_CACHE_HOME/resolve-gpu-stack)")
    g.add_argument("--allow-insecure-host", metavar="HOST", action="append", default=[], help="allow plain http:// to HOST (loopback is always allowed)")
    g.add_argument("--timeout", type=positive_seconds, default=30.0, metavar="SECONDS", help="per-request timeout (default 30)")
    g.add_argument(
        "--system-certs",
        action="store_true",
        help="verify https against the system trust store (the distribution's CA bundle on Linux, the OS verifier elsewhere) instead of certifi's bundle (SSL_CERT_FILE / SSL_CERT_DIR win over both)",
    )
    g.add_argument(
        "--scan-budget",
        type=byte_count,
        default=None,
        metavar="BYTES",
        help="most bytes read to scan one compiled wheel tied to torch, to its members' dynamic sections (default 256M; K, M, G suffixes)",
    )


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


def positive_seconds(text: str) -> float:
    """``--timeout``: a positive number of seconds (a usage error otherwise, exit 2)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text}: must be a positive number of seconds")
    return value


def add_resolve_flags(p: argparse.ArgumentParser) -> None:
    """Every resolver setting (from the settings table), then the index flags."""
    S.add_flags(p)
    add_index_flags(p)


def add_output_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("table", "json"), help="output format (default: table on a terminal, json otherwise)")
    p.add_argument("-v", "--verbose", action="store_true", help="log requests and decisions to stderr")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress messages")


def refuse_long_numbers_in(argv: Sequence[str]) -> None:
    """A command-line word holding an absurdly long number (``--python 3.<5000 digits>``) is a
    usage error before anything parses it."""
    from ..data.toml import refuse_long_numbers

    for word in argv:
        refuse_long_numbers(word, f"argument {redact_url(word)[:40]!r}...", error=UsageError)


def configure_logging(args: argparse.Namespace) -> None:
    level = logging.DEBUG if getattr(args, "verbose", False) else (logging.ERROR if getattr(args, "quiet", False) else logging.WARNING)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)


# -- indexes and fetchers --------------------------------------------------------------------------


def package_index_overrides(args: argparse.Namespace) -> dict[str, str]:
    """``--package-index NAME=URL`` as {package: url} (the definitions check the name and the URL)."""
    out = {}
    for item in getattr(args, "package_index", None) or ():
        name, sep, url = item.partition("=")
        if not sep or not name.strip() or not url.strip():
            raise UsageError(f"--package-index {redact_url(item)!r}: expected NAME=URL", hint="e.g. --package-index flash-attn=https://wheels.example/simple/")
        out[name.strip()] = url.strip()
    return out


def index_overrides(args: argparse.Namespace) -> dict[str, str]:
    """``--index NAME=URL`` as {name: url}."""
    out = {}
    for item in args.index:
        name, sep, url = item.partition("=")
        if not sep or not name or not url:
            raise UsageError(f"--index {redact_url(item)!r}: expected NAME=URL", hint="e.g. --index pypi=https://mirror.example/simple/")
        # a layout prefix (``flat:URL``) is the definitions' to check; the URL after it is checked here
        layout, colon, rest = url.partition(":")
        prefix = layout + colon if colon and "://" in rest and "://" not in layout and "/" not in layout else ""
        try:
            out[name.strip()] = prefix + normalize_base_url(url[len(prefix) :])
        except IndexDefinitionError as exc:
            raise UsageError(f"--index {name.strip()}: {exc.message}", hint=exc.hint) from None
    return out


def definitions(args: argparse.Namespace, env: Mapping[str, str], *, need_pypi: bool = True, replay: bool = True) -> Definitions:
    """Index definitions with --index overrides; PyPI's URL from uv/pip configuration (a snapshot
    replays its PyPI pages under it: see ``replay_pypi_url``)."""
    from ..data.definitions import load_definitions
    from .userconfig import discover_pypi_url

    overrides = index_overrides(args)
    if "pypi" not in overrides:
        if args.snapshot is not None and replay:
            overrides["pypi"] = replay_pypi_url(env)
        elif need_pypi:
            overrides["pypi"] = discover_pypi_url(env)
    return load_definitions().with_index_urls(overrides).with_package_indexes(package_index_overrides(args))


def replay_pypi_url(env: Mapping[str, str]) -> str:
    """The PyPI base a snapshot's PyPI pages are replayed under: the user's PyPI (uv/pip
    configuration, else uv's default), so that the recorded relative file URLs become URLs that
    install; the snapshot's placeholder only when no PyPI can be found at all (then said on stderr)."""
    from ..net.snapshot import PLACEHOLDER_BASE
    from .userconfig import discover_pypi_url

    try:
        return discover_pypi_url(env)
    except UsageError:
        placeholder = PLACEHOLDER_BASE.format(name="pypi")
        print(
            f"warning: no PyPI index is configured (uv/pip): PyPI files from the snapshot get the placeholder base {placeholder}, "
            "which does not install; pass --index pypi=URL",
            file=sys.stderr,
        )
        return placeholder


_PRINT_LOCK = threading.Lock()  # progress lines from several threads never share a line


def say(message: str) -> None:
    """One whole line on stderr, under the one printing lock."""
    with _PRINT_LOCK:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()


def progress_printer(args: argparse.Namespace) -> Callable[[str], None] | None:
    if getattr(args, "quiet", False) or not sys.stderr.isatty():
        return None
    return say


def network_options(args: argparse.Namespace, env: Mapping[str, str]) -> NetworkOptions:
    """The network flags (``add_network_flags``) as one value; a command without them gets the defaults."""
    from ..net.cache import default_cache_dir
    from .assemble import NetworkOptions

    return NetworkOptions(
        cache_dir=getattr(args, "cache_dir", None) or default_cache_dir(env),
        timeout=getattr(args, "timeout", 30.0),
        allow_insecure_hosts=tuple(getattr(args, "allow_insecure_host", None) or ()),
        progress=progress_printer(args),
        on_retry=retry_printer(args),
        system_certs=getattr(args, "system_certs", False),
        scan_budget=getattr(args, "scan_budget", None),
    )


def new_session(args: argparse.Namespace, env: Mapping[str, str]) -> Session:
    """A command's session (``assemble.Session``) from its flags."""
    from .assemble import Session

    return Session(network_options(args, env))


def command_session(args: argparse.Namespace, env: Mapping[str, str]) -> AbstractContextManager[Session]:
    """The session of the command being run (``app.py`` opens one per command); outside a command,
    one made from the flags for the block, closed when it ends."""
    from .assemble import command_session as current_or

    return current_or(lambda: new_session(args, env))


def retry_printer(args: argparse.Namespace) -> Callable[[str], None] | None:
    """Each retry as it happens, on stderr (terminal or not); nothing with -q."""
    return None if getattr(args, "quiet", False) else say


@contextmanager
def make_parts(
    args: argparse.Namespace, env: Mapping[str, str], defs: Definitions, *, snapshot: Path | None = None, fetcher: Source | None = None, live: bool = False
) -> Iterator[ResolveParts]:
    """A resolve's parts (``assemble.ResolveParts``) from the command's session: over ``fetcher``
    when given; live when ``live``; else the replay of ``snapshot`` (else ``--snapshot``), with what
    it lacks fetched live under ``--live-fallback``; else live, the HTTP cache then keeping the
    computed plans (a replay is as fast as reusing). Use it in a ``with`` block."""
    if snapshot is None and not live:
        snapshot = getattr(args, "snapshot", None)
    live_fallback = getattr(args, "live_fallback", False)
    with command_session(args, env) as session, session.resolve_parts(defs, source=fetcher, snapshot=snapshot, live_fallback=live_fallback) as parts:
        yield parts


# -- the target and the request --------------------------------------------------------------------


def target_from_args(args: argparse.Namespace, env: Mapping[str, str], probe: Any = None) -> tuple[Target, dict[Any, tuple[str, ...]]]:
    """(Target, installed requirements by name) from --python/--platform/--installed.

    ``probe``: an ``env.probe.ProbeRun`` of exactly the interpreter ``--python`` names, already
    started by the caller (``install`` probes once, and installs against that same environment)."""
    from ..env.probe import default_interpreter, inspect_environment, parse_python_flag
    from ..model.declared import declared_target

    if args.python is not None:
        kind, value = parse_python_flag(args.python, search_path=env.get("PATH"))
    else:
        kind, value = "interpreter", default_interpreter(env)
    if kind == "version":
        return declared_target(value, S.raw_of(args, "platform"), S.raw_of(args, "installed")), {}
    if args.platform or args.installed:
        raise UsageError("--platform and --installed describe a declared target", hint="use them with --python X.Y, not with an interpreter path")
    environment = probe.result() if probe is not None else inspect_environment(value)
    requires = {name: tuple(d.requires_dist) for name, d in environment.distributions.items()}
    return environment.target, requires


def request_from_args(args: argparse.Namespace, env: Mapping[str, str], probe: Any = None) -> ResolveRequest:
    """The request of the flags typed, the table's defaults for the rest (``probe``: see ``target_from_args``)."""
    typed = {name: raw for name, raw in S.typed(args).items() if S.BY_NAME[name].on_request}
    values = {**S.defaults(), **S.parse(typed)}
    target, requires = target_from_args(args, env, probe)
    if "gpus" not in typed and not is_declared(args, env):
        values["gpus"] = S.parse({"gpus": local_gpus(env)})["gpus"]
    request = S.build_request(values, target=target, installed_requires=requires)
    if "flashinfer" in typed:  # typed, `latest` means the newest, not "what is installed, if it fits"
        request = dataclasses.replace(request, flashinfer=dataclasses.replace(request.flashinfer, typed=True))
    from .sources import with_sources  # --build 'NAME @ URL': the trees fetched (nothing without one)

    return with_sources(request, args, env, say)


def is_declared(args: argparse.Namespace, env: Mapping[str, str]) -> bool:
    """Whether ``--python`` declares a version (else the target is a real interpreter, probed)."""
    from ..env.probe import parse_python_flag

    return args.python is not None and parse_python_flag(args.python, search_path=env.get("PATH"))[0] == "version"


def local_gpus(env: Mapping[str, str]) -> tuple[str, ...]:
    """A probed target's default GPUs: the compute capabilities nvidia-smi lists (none without it)."""
    from ..env.gpu import query_nvidia_smi, visible_archs

    return visible_archs(query_nvidia_smi(None, env))


def run_resolve(
    args: argparse.Namespace, env: Mapping[str, str], fetcher: Source | None = None, defs: Definitions | None = None, probe: ProbeRun | None = None
) -> tuple[LockPlan, Definitions]:
    """(plan, definitions) for the flags, through the command's session (``fetcher``: a source it
    made, e.g. a recorder; ``probe``: see ``target_from_args``)."""
    defs = defs or definitions(args, env)
    request = request_from_args(args, env, probe)
    with make_parts(args, env, defs, fetcher=fetcher) as parts:
        plan = parts.resolve(request)
    _warn_unused_without(args, request, plan)
    return plan, defs


def _warn_unused_without(args: argparse.Namespace, request: ResolveRequest, plan: LockPlan) -> None:
    """A ``--without`` that left nothing out is said on stderr too (a misspelt name would otherwise go unseen)."""
    from ..resolver.resolve import unused_without_note

    if getattr(args, "quiet", False):
        return
    for name in sorted(request.without_names):
        if unused_without_note(name) in plan.notes:
            say(f"warning: {unused_without_note(name)}")


# -- output ----------------------------------------------------------------------------------------


def output_format(args: argparse.Namespace) -> str:
    return args.format or ("table" if sys.stdout.isatty() else "json")


def emit_plan(args: argparse.Namespace, plan: LockPlan) -> None:
    from .render import plan_to_json, print_json, print_plan_table

    if output_format(args) == "json":
        print_json(plan_to_json(plan), sys.stdout)
    else:
        print_plan_table(plan, sys.stdout)


def command_line(argv: Sequence[str]) -> str:
    """The command as a user would retype it, with any credentials removed."""
    return "resolve-gpu-stack " + " ".join(shlex.quote(redact_url(a) if "://" in a else a) for a in argv)


def shown(path: Path) -> str:
    """``path`` relative to the current directory when it is below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
