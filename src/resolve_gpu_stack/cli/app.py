"""The command line: the parser and ``main``. The only place that reads flags, the environment and
config files is this floor (``cli/``).

Each command's flags are ``commands.register_<command>(subparsers)``; the rest of it lives in its
own module, ``cmd_<command>``: ``read(args, env)`` (the parsed flags read once into the command's
frozen settings value, see ``options``: the only code that reads the ``argparse.Namespace``) and
``run(settings, env, session) -> int``. ``COMMANDS`` is the static table of them. A command's module
is imported once its command line is parsed (``Command``): ``--help`` and ``COMMAND --help`` load no
command module (so none of http.client and ssl, resolvelib, packaging, rich), and a resolve does
not load ``doctor``'s or ``install``'s.
"""

from __future__ import annotations

import argparse
import difflib
import errno
import logging
import os
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING

from .. import __version__
from ..errors import ResolveGpuStackError, UsageError, WriteError
from ..urls import redact_url
from . import commands as C

if TYPE_CHECKING:
    from .options import CommandOptions, OutputOptions


class Command:
    """A command of the table: its flags (``commands.register_<command>``) and its module
    (``cmd_<command>``: ``read``, ``run``), imported once its command line is parsed."""

    __slots__ = ("_load", "_module", "register")

    def __init__(self, register: Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None], load: Callable[[], ModuleType]) -> None:
        self.register = register
        self._load = load
        self._module: ModuleType | None = None

    @property
    def module(self) -> ModuleType:
        if self._module is None:
            self._module = self._load()
        return self._module

    def read(self, args: argparse.Namespace, env: Mapping[str, str]) -> CommandOptions:
        """The command's settings value: the one read of its parsed flags."""
        settings: CommandOptions = self.module.read(args, env)
        return settings

    def run(self, settings: CommandOptions, env: Mapping[str, str]) -> int:
        """Run the command in its session (``assemble.Session``: every part it reads the network
        and the caches through), made with its network settings, handed to it, and closed when it ends."""
        from .assemble import Session  # the network and resolve parts: +710 ms on --help

        with Session(settings.network) as session:
            code: int = self.module.run(settings, env, session)
        return code


# Each command's module is imported only once its command line is parsed: `--help` and `COMMAND --help`
# parse with the flags alone (``commands``), and a run loads its own command's dependencies, no other's.
# The figure on each line: what importing that module would add to `resolve-gpu-stack --help` (timed in
# a fresh process after the modules --help loads; median of 5, a loaded 2-core machine; see
# docs/internals/performance.md, "Start-up").


def _resolve() -> ModuleType:
    from . import cmd_resolve  # +204 ms on --help

    return cmd_resolve


def _candidates() -> ModuleType:
    from . import cmd_candidates  # +217 ms on --help

    return cmd_candidates


def _inspect() -> ModuleType:
    from . import cmd_inspect  # +510 ms on --help

    return cmd_inspect


def _snapshot() -> ModuleType:
    from . import cmd_snapshot  # +522 ms on --help

    return cmd_snapshot


def _lock() -> ModuleType:
    from . import cmd_lock  # +1171 ms on --help

    return cmd_lock


def _export() -> ModuleType:
    from . import cmd_export  # +534 ms on --help

    return cmd_export


def _install() -> ModuleType:
    from . import cmd_install  # +1000 ms on --help

    return cmd_install


def _wheelhouse() -> ModuleType:
    from . import cmd_wheelhouse  # +1205 ms on --help

    return cmd_wheelhouse


def _doctor() -> ModuleType:
    from . import cmd_doctor  # +808 ms on --help

    return cmd_doctor


def _check() -> ModuleType:
    from . import cmd_check  # +440 ms on --help

    return cmd_check


def _cache() -> ModuleType:
    from . import cmd_cache  # +269 ms on --help

    return cmd_cache


# command name -> its flags and its module, loaded once its command line is parsed; the order is the order of --help
COMMANDS: dict[str, Command] = {
    "resolve": Command(C.register_resolve, _resolve),
    "candidates": Command(C.register_candidates, _candidates),
    "inspect": Command(C.register_inspect, _inspect),
    "snapshot": Command(C.register_snapshot, _snapshot),
    "lock": Command(C.register_lock, _lock),
    "export": Command(C.register_export, _export),
    "install": Command(C.register_install, _install),
    "wheelhouse": Command(C.register_wheelhouse, _wheelhouse),
    "doctor": Command(C.register_doctor, _doctor),
    "check": Command(C.register_check, _check),
    "cache": Command(C.register_cache, _cache),
}

DESCRIPTION = """\
Resolve a PyTorch + FlashInfer GPU stack that fits the torch already installed, and never
downgrade that torch. Each package comes only from the index that owns it (torch from the PyTorch
index and its family with it, or from PyPI with PyPI's torch kept; flashinfer-jit-cache from
flashinfer.ai; the rest from PyPI).

  resolve-gpu-stack --torch nightly                     plan for the active environment
  resolve-gpu-stack --python 3.12 --platform x86_64-manylinux_2_28 \\
      --installed torch==2.12.0.dev20260307+cu130 --snapshot indexes/snapshots/2026-03-07
  resolve-gpu-stack lock --torch nightly -o pylock.gpu.toml
  resolve-gpu-stack candidates flashinfer-jit-cache --cuda cu130

Exit codes: 0 plan found (or check passed), 1 no plan exists / check failed (a refused torch
downgrade included), 2 usage error, 3 an index could not be reached or answered garbage,
4 an output file could not be written (then none of the outputs was written), 5 doctor: nothing
failed, but this host has no NVIDIA driver and what needs it was judged from its symbols only,
130 Ctrl-C, 143 SIGTERM (no half-written file left either way).
"""


_TOP_LEVEL = ("-h", "--help", "-V", "--version")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of ``command`` alone (what parsing its command line needs)."""
    parser = argparse.ArgumentParser(prog="resolve-gpu-stack", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-V", "--version", action="version", version=f"resolve-gpu-stack {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, entry in COMMANDS.items():
        if command is None or name == command:
            entry.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    as_program = argv is None  # the console script: Ctrl-C may end the process at once
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and not argv[0].startswith("-") and argv[0] not in COMMANDS:
        return _unknown_command(argv[0])
    args = _parse(argv)
    if isinstance(args, int):
        return args
    command = COMMANDS[args.command]
    try:
        refuse_long_numbers_in(argv)  # before any word is parsed
        settings = command.read(args, os.environ)  # every setting parsed once, here: a bad value is a usage error now
    except ResolveGpuStackError as err:
        _print_error(err)
        return err.exit_code
    configure_logging(settings.output)
    if as_program:
        _catch_interrupts()
    try:
        return command.run(settings, os.environ)
    except ResolveGpuStackError as err:
        _print_error(err)
        return err.exit_code
    except OSError as exc:
        if exc.errno not in _WRITE_FAULTS:
            raise
        fault = _write_fault(exc)
        _print_error(fault)
        return fault.exit_code
    except Terminated:
        print("terminated (SIGTERM): nothing half-written was kept", file=sys.stderr)
        _exit_now(143)
        return 143
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        if as_program:
            _exit_now(130)
        return 130


def refuse_long_numbers_in(argv: Sequence[str]) -> None:
    """A command-line word holding an absurdly long number (``--python 3.<5000 digits>``) is a
    usage error before anything parses it."""
    from ..data.toml import refuse_long_numbers  # the model and packaging: +94 ms on --help

    for word in argv:
        refuse_long_numbers(word, f"argument {redact_url(word)[:40]!r}...", error=UsageError)


def configure_logging(output: OutputOptions) -> None:
    level = logging.DEBUG if output.verbose else (logging.ERROR if output.quiet else logging.WARNING)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)


_WRITE_FAULTS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG})  # only ever a write: a full disk, a read-only file system


def _write_fault(exc: OSError) -> WriteError:
    """A file that could not be written (a full disk, a read-only file system) that no module
    said more about: exit 4, naming the file, never a traceback."""
    where = str(exc.filename) if exc.filename else "a file"
    return WriteError(
        f"cannot write {where}: {exc.strerror or exc}",
        hint="free space on (or choose another) output folder, cache folder (--cache-dir, XDG_CACHE_HOME) or TMPDIR, and run it again",
    )


def _parse(argv: list[str]) -> argparse.Namespace | int:
    """The flags of ``argv`` (``resolve`` when no command is named), or the exit status argparse
    ended with (``--help``, ``--version``, a usage error). Only the named command's parser is built."""
    if argv in (["-V"], ["--version"]):  # what argparse's version action prints, without building every parser
        print(f"resolve-gpu-stack {__version__}")
        return 0
    if not argv or (argv[0] not in COMMANDS and argv[0] not in _TOP_LEVEL):
        argv = ["resolve", *argv]
    parser = build_parser(argv[0] if argv[0] in COMMANDS else None)
    try:
        args, unknown = parser.parse_known_args(argv)
        if unknown:
            _subparser(parser, args.command).error(unrecognized_message(unknown, _subparser(parser, args.command)))
    except SystemExit as exc:
        return int(exc.code or 0)
    return args


class Terminated(KeyboardInterrupt):
    """SIGTERM reached the program (``timeout``, a CI cancel, systemd, ``kill``): raised in the
    main thread so that it unwinds as Ctrl-C does (a ``KeyboardInterrupt``: no worker stuck in a
    stalled read is waited for), each atomic write removing its temporary file
    (``.pylock.NAME.toml.NNNNNNNN.tmp`` beside a lock) on the way; then exit 143."""


def _catch_interrupts() -> None:
    """Ctrl-C through ``_on_interrupt`` (not where SIGINT is ignored), SIGTERM through
    ``_on_terminate`` (where it has its default action)."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_interrupt)
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_terminate)


def _on_terminate(signum: int, frame: object) -> None:
    """SIGTERM: as Ctrl-C, but ``Terminated`` (exit 143)."""
    http = sys.modules.get("resolve_gpu_stack.net.http")
    if http is not None:
        http.INTERRUPTED.set()
    raise Terminated


def _on_interrupt(signum: int, frame: object) -> None:
    """Ctrl-C: tell open fetchers not to wait for their workers, then unwind as usual."""
    http = sys.modules.get("resolve_gpu_stack.net.http")  # imported only if something fetched
    if http is not None:
        http.INTERRUPTED.set()
    raise KeyboardInterrupt


def _exit_now(code: int) -> None:
    """End the process now, without joining worker threads.

    By the time Ctrl-C reaches ``main`` the main thread has unwound (atomic writes removed their
    temporary files; nothing was renamed into place); a worker blocked in a stalled read would
    otherwise hold the interpreter's exit for up to the read timeout.
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _unknown_command(word: str) -> int:
    """A first word that is no command (``chek``): say so, suggest the nearest, list them all."""
    close = difflib.get_close_matches(word, list(COMMANDS), n=1)
    print(f"resolve-gpu-stack: error: unknown command {word!r}" + (f"; did you mean {close[0]!r}?" if close else ""), file=sys.stderr)
    print(f"commands: {', '.join(COMMANDS)} (no command: resolve); see resolve-gpu-stack --help", file=sys.stderr)
    return 2


def _subparser(parser: argparse.ArgumentParser, command: str | None) -> argparse.ArgumentParser:
    for action in parser._subparsers._group_actions if parser._subparsers else ():
        chosen = action.choices.get(command) if command is not None and isinstance(action, argparse._SubParsersAction) else None
        if isinstance(chosen, argparse.ArgumentParser):
            return chosen
    return parser


def unrecognized_message(unknown: Sequence[str], parser: argparse.ArgumentParser) -> str:
    """argparse's "unrecognized arguments", with the nearest real flag for each mistyped one."""
    flags = [opt for action in parser._actions for opt in action.option_strings if opt.startswith("--")]
    hints = []
    for arg in unknown:
        if arg.startswith("--"):
            close = difflib.get_close_matches(arg.split("=", 1)[0], flags, n=1)
            if close:
                hints.append(f"{arg.split('=', 1)[0]}: did you mean {close[0]}?")
    return f"unrecognized arguments: {' '.join(unknown)}" + ("; " + "; ".join(hints) if hints else "")


def _print_error(err: ResolveGpuStackError) -> None:
    print(f"error: {err}", file=sys.stderr)
    if err.hint:
        print(f"hint: {err.hint}", file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
