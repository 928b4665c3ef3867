"""The program: ``python -m resolve_gpu_stack`` and the ``resolve-gpu-stack`` console script (``run``).

Before anything else is imported, ``keep_bytecode`` makes sure the program is not compiled from
source on every run. An install without bytecode (``uv pip install`` / ``uv tool install`` without
``--compile-bytecode``) where ``PYTHONDONTWRITEBYTECODE=1`` is set (as many container images set
it) would otherwise compile this package and its dependencies at every start: ~1 MB of source,
~0.2 s. There the compiled modules are kept under ``$XDG_CACHE_HOME/resolve-gpu-stack/bytecode``
(``~/.cache/...``), never beside the sources, exactly as ``PYTHONPYCACHEPREFIX`` would keep them;
the first run writes them. A ``PYTHONPYCACHEPREFIX`` of the user's own, an install that compiled
its bytecode, or writing allowed: nothing changes.

The folder is the user's alone, because Python runs what it finds there (a ``.pyc``'s source hash
says nothing about its code, and the folder also holds the standard library's bytecode, ``ssl``
included): it is used only when it and every folder above it up to the cache root
(``$XDG_CACHE_HOME``) are owned by the user and writable by no one else. The folders the program
makes are made 0700 whatever the umask. Anything else (another owner, a group- or world-writable
folder, a file in the way): the program runs from source, with no bytecode kept; ``-v`` says why.

Then ``MethodCode.attach`` keeps what ``@dataclass`` compiles. It writes the source of each model
class's ``__init__``, ``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__`` and ``__delattr__``
and compiles it every time the class is made: at every start, ~130 classes on a resolve's path,
~700 compilations of text that never changes, a third of the imports' CPU (bench/README.md,
"Issue 53, second CPU pass"). While attached, ``dataclasses`` calls an ``exec`` that runs the code
kept for that exact text: one file beside the package's bytecode (where ``__init__``'s ``.pyc``
lies, so under the folder above when it is used), headed by the interpreter's bytecode magic,
read at the start and written again (whole, ``atomic_write``) at the end of a run that compiled a
text it did not hold, only where bytecode is written and into a folder already there. Each class
gets the code ``compile`` gives for that very text with the flags ``exec`` would have used
(``dataclasses`` has no ``__future__`` import), so its methods are the same. ``collections``
likewise gets an ``eval`` for the ``__new__`` that ``namedtuple`` (and ``typing.NamedTuple``) writes
and compiles for each class (~40 on a resolve's path, ~2 ms), kept in the same table under a key no
source text can be (it starts with a NUL). And ``re`` gets a ``compile`` that keeps what its
parser and code generator make of each pattern (~200 patterns before a resolve's first request,
~10 ms of pure-Python parsing): the flags, the engine's code and the group names, which
``_sre.compile`` turns into the pattern the parser would have given, under a key naming the
interpreter's version and the engine's; a pattern is kept only if the pattern made from what is
kept equals (``==``: flags and code) the one ``re`` made. The file is trusted as the ``.pyc`` files
beside it are (Python runs those); one missing, unreadable, of another interpreter or not a table
of code is not read.
"""

from __future__ import annotations

import atexit
import builtins
import collections
import dataclasses
import gc
import importlib
import importlib.util
import marshal
import os
import re
import sys
import threading  # for leave(): loaded by any command anyway (logging imports it)
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .pycache import bytecode_folder  # a ground-floor module of plain os calls, compiled in ~1 ms: the folder keep_bytecode points at

# The collector's first threshold counts container objects made and not yet freed. A cold resolve
# keeps tens of thousands alive (files, tags, candidates) and makes few cycles: at the default
# (700) the collector runs ~120 times (~20 ms) and frees almost nothing; at 100,000 a resolve
# runs it not at all, and a long lock of many targets now and then. Set before the program's
# imports too (~20 collections, ~2-3 ms, while ``cli`` and the command's modules load).
RUN_GC_THRESHOLD = (100_000, 10, 10)
METHODS_STEM = "dataclass-methods"
EVAL_KEY = "\x00eval\x00"  # before an eval text's key: no source holds a NUL, so it never meets an exec text
RE_KEY = "\x00re\x00"  # before a pattern's key (then the interpreter's and the engine's versions)
MOST_KEPT = 4096  # texts; past it a save keeps only what its run used (an old tree's classes go)


def keep_bytecode(environ: Mapping[str, str], argv: Sequence[str] = ()) -> str | None:
    """Point ``sys.pycache_prefix`` at the program's bytecode folder when no bytecode would be
    read or written otherwise and the folder is the user's alone (see the module docstring); the
    folder, or None when left alone. With ``-v``/``--verbose`` in ``argv``, a folder not used says why
    on stderr."""
    tag = sys.implementation.cache_tag
    if not sys.dont_write_bytecode or sys.pycache_prefix is not None or tag is None:
        return None
    here = os.path.dirname(os.path.abspath(__file__))
    if os.path.exists(os.path.join(here, "cli", "__pycache__", f"app.{tag}.pyc")):
        return None  # the installer compiled the package
    folder, why = bytecode_folder(environ)
    if why is not None:
        if "-v" in argv or "--verbose" in argv:
            print(f"resolve-gpu-stack: not keeping bytecode in {folder}: {why}", file=sys.stderr)
        return None
    sys.pycache_prefix = folder
    sys.dont_write_bytecode = False  # into that folder only: a folder the user cannot write is skipped quietly
    return folder


def code_file(package_init: str) -> str | None:
    """Where the code of ``package_init``'s package is kept: beside its ``__init__`` bytecode."""
    tag = sys.implementation.cache_tag
    if tag is None:
        return None
    try:
        pyc = importlib.util.cache_from_source(package_init)
    except (NotImplementedError, ValueError):
        return None
    optimized = f".opt-{sys.flags.optimize}" if sys.flags.optimize else ""  # as a .pyc's name says -O
    return os.path.join(os.path.dirname(pyc), f"{METHODS_STEM}.{tag}{optimized}.marshal")


def _read(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            data = f.read()
        if not data.startswith(importlib.util.MAGIC_NUMBER):
            return {}
        table = marshal.loads(memoryview(data)[len(importlib.util.MAGIC_NUMBER) :])  # whole: marshal.load(f) calls f.readinto per object, ~15 ms more
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    if not isinstance(table, dict):
        return {}
    return {k: v for k, v in table.items() if isinstance(k, str) and (isinstance(v, types.CodeType) or (k.startswith(RE_KEY) and _pattern_parts_shape(v)))}


def _pattern_parts_shape(value: object) -> bool:
    """Whether ``value`` is shaped as ``_sre.compile``'s arguments after the pattern (the engine
    itself refuses code that is not a valid program)."""
    if not (isinstance(value, tuple) and len(value) == 5):
        return False
    flags, code, groups, groupindex, indexgroup = value
    return (
        isinstance(flags, int)
        and isinstance(code, list)
        and all(isinstance(c, int) for c in code)
        and isinstance(groups, int)
        and isinstance(groupindex, dict)
        and isinstance(indexgroup, tuple)
    )


def _hashable(parts: tuple[Any, ...]) -> tuple[Any, ...]:
    flags, code, groups, groupindex, indexgroup = parts
    return flags, tuple(code), groups, tuple(groupindex.items()), indexgroup


class PatternCode:
    """``re``'s internals this start-up needs, where this interpreter has them as 3.11-3.13 do
    (``re._compiler.compile`` parsing a pattern, generating its code, handing both to ``_sre``)."""

    def __init__(self, compiler: Any, parser: Any, sre: Any, engine: int) -> None:
        self.compiler, self.parser, self.sre = compiler, parser, sre
        self.original = compiler.compile
        self.prefix = f"{RE_KEY}{sys.version_info[0]}.{sys.version_info[1]}.{sys.version_info[2]}.{sys.version_info[3]}:{engine}\x00"

    @classmethod
    def find(cls) -> PatternCode | None:
        try:
            compiler = importlib.import_module("re._compiler")
            parser = importlib.import_module("re._parser")
            constants = importlib.import_module("re._constants")
            sre = importlib.import_module("_sre")
        except ImportError:
            return None  # Python 3.10: sre_compile, left alone
        if not all(callable(getattr(m, n, None)) for m, n in ((compiler, "compile"), (compiler, "_code"), (parser, "parse"), (sre, "compile"))):
            return None
        return cls(compiler, parser, sre, int(getattr(constants, "MAGIC", 0)))

    def key(self, pattern: str | bytes, flags: int) -> str:
        text = pattern if isinstance(pattern, str) else pattern.decode("latin-1")  # bytes one for one
        return f"{self.prefix}{type(pattern).__name__}:{int(flags)}\x00{text}"

    def parts(self, pattern: str | bytes, flags: int) -> tuple[int, list[int], int, dict[str, int], tuple[str | None, ...]]:
        """What ``re._compiler.compile`` hands ``_sre.compile`` after the pattern."""
        parsed = self.parser.parse(pattern, flags)
        code = self.compiler._code(parsed, flags)
        groupindex = dict(parsed.state.groupdict)
        indexgroup: list[str | None] = [None] * parsed.state.groups
        for name, i in groupindex.items():
            indexgroup[i] = name
        return (
            int(flags | parsed.state.flags),
            [int(c) for c in code],
            parsed.state.groups - 1,
            groupindex,
            tuple(indexgroup),
        )  # plain ints: opcodes are an int subclass marshal refuses


class MethodCode:
    """The ``exec`` ``dataclasses`` calls, and the ``eval`` ``collections`` calls, while it is
    attached: known texts run their kept code."""

    def __init__(self, path: str, kept: Mapping[str, Any]) -> None:
        self.path = path
        self.kept = dict(kept)
        self.used: dict[str, Any] = {}
        self.compiled = 0  # texts not kept: compiled here, written by ``save``
        self.patterns: PatternCode | None = None  # re's, while attached
        self._parts_kept: set[tuple[Any, ...]] | None = None  # the kept patterns' parts, once a pattern is compiled

    @classmethod
    def attach(cls, package_init: str) -> MethodCode | None:
        """Give ``dataclasses`` this ``exec``, and ``collections`` this ``eval`` (None where it cannot
        be done the same way)."""
        path = code_file(package_init)
        if path is None or "exec" in vars(dataclasses) or hasattr(dataclasses, "annotations"):
            return None  # another hook, or a dataclasses compiled with a __future__ flag exec would inherit
        memo = cls(path, _read(path))
        dataclasses.exec = memo.exec  # type: ignore[attr-defined]  # a module global shadows the builtin
        if "eval" not in vars(collections) and not hasattr(collections, "annotations"):
            collections.eval = memo.eval  # type: ignore[attr-defined]  # namedtuple's __new__, the same way
        memo.patterns = PatternCode.find()
        if memo.patterns is not None:
            memo.patterns.compiler.compile = memo.compile_pattern
        return memo

    def detach(self) -> None:
        if vars(dataclasses).get("exec") == self.exec:
            del dataclasses.exec  # type: ignore[attr-defined]
        if vars(collections).get("eval") == self.eval:
            del collections.eval  # type: ignore[attr-defined]
        if self.patterns is not None and self.patterns.compiler.compile == self.compile_pattern:
            self.patterns.compiler.compile = self.patterns.original

    def exec(self, source: Any, globals: dict[str, Any] | None = None, locals: Mapping[str, object] | None = None, /) -> None:
        if isinstance(source, str):
            source = self._code(source, source, "exec")
        builtins.exec(source, globals, locals)

    def eval(self, source: Any, globals: dict[str, Any] | None = None, locals: Mapping[str, object] | None = None, /) -> Any:
        if isinstance(source, str):
            source = self._code(EVAL_KEY + source, source, "eval")
        return builtins.eval(source, globals, locals)

    def compile_pattern(self, pattern: Any, flags: int = 0) -> Any:
        """``re._compiler.compile``: a pattern kept is made by the engine from its parts, without
        parsing; another is compiled by ``re`` and its parts kept when they make the same pattern."""
        patterns = self.patterns
        assert patterns is not None
        if not isinstance(pattern, (str, bytes)) or flags & re.DEBUG:  # a parsed pattern, or one whose compiling prints
            return patterns.original(pattern, flags)
        key = patterns.key(pattern, flags)
        parts = self.kept.get(key)
        if parts is not None:
            try:
                kept = patterns.sre.compile(pattern, *parts)
            except (RuntimeError, TypeError, ValueError, OverflowError):  # the engine refused it: not a valid program
                kept = None
            if kept is not None:
                self.used[key] = parts
                return kept
        made = patterns.original(pattern, flags)
        try:
            parts = patterns.parts(pattern, flags)
            same = patterns.sre.compile(pattern, *parts) == made
        except Exception:  # noqa: BLE001 - internals not shaped as 3.11-3.13's: the pattern re made, nothing kept
            return made
        if same and not self._kept_already(parts):
            self.used[key] = parts
            self.compiled += 1
        return made

    def _kept_already(self, parts: tuple[Any, ...]) -> bool:
        """Whether a pattern of other text with these very parts is kept: a text that differs from
        run to run only in a character class's order (one joined from a set, whose order follows
        the per-process string hashing, as ``email``'s header parser builds some) makes the same
        code; kept every run, it would grow the file and write it again at every start."""
        if self._parts_kept is None:
            self._parts_kept = {_hashable(v) for k, v in {**self.kept, **self.used}.items() if k.startswith(RE_KEY)}
        found = _hashable(parts) in self._parts_kept
        self._parts_kept.add(_hashable(parts))
        return found

    def _code(self, key: str, source: str, mode: str) -> types.CodeType:
        """The kept code of ``key``, or ``source`` compiled as ``mode`` with no flags inherited."""
        code = self.kept.get(key)
        if code is None:
            code = compile(source, "<string>", mode, dont_inherit=True)
            self.compiled += 1
        self.used[key] = code
        return code

    def save(self) -> bool:
        """Write the table when this run compiled a text it did not hold; whether it was written."""
        if not self.compiled or sys.dont_write_bytecode or not os.path.isdir(os.path.dirname(self.path)):
            return False  # nothing new, no bytecode written, or no bytecode there: nothing is made for this
        from .atomic import atomic_write  # nothing of the package before keep_bytecode: ~200 ms of compiling otherwise

        table = {**self.kept, **self.used} if len(self.kept) + self.compiled <= MOST_KEPT else self.used
        try:
            atomic_write(Path(self.path), importlib.util.MAGIC_NUMBER + marshal.dumps(table), mode=0o600)
        except (OSError, ValueError):
            return False
        return True


def run() -> int:
    """The console script. Once the command has returned (its session closed: every cache entry
    written, every fetcher, thread and child process closed) and the kept code is saved, the
    process ends at once (``leave``)."""
    gc.set_threshold(*RUN_GC_THRESHOLD)
    keep_bytecode(os.environ, sys.argv[1:])
    methods = MethodCode.attach(os.path.join(os.path.dirname(os.path.abspath(__file__)), "__init__.py"))
    from .cli import run as cli_run  # after keep_bytecode: else ~200 ms of compiling at every start (see above)

    try:
        code = cli_run()
    finally:
        if methods is not None:
            methods.save()
    return leave(code)


def leave(code: int) -> int:
    """End the process with ``code`` now, once the ``atexit`` handlers have run and stdout and
    stderr are flushed, without the rest of the interpreter's shutdown (which tears down ~340
    modules: ~7 ms of a cold resolve's wall, bench/README.md, "The tail"), when nothing else runs:
    no other thread is alive (a command's workers, its cache writer and its kept-closure reader
    are joined when its session closes). Otherwise, or when a stream cannot be flushed (a closed
    pipe, a full disk), ``code`` is returned, and the interpreter ends as it always has: it waits
    for the threads, and reports the stream's error."""
    if threading.active_count() > 1 or not _flushed():
        return code
    atexit._run_exitfuncs()  # what the interpreter would run first (logging's handlers closed, a caller's own)
    if not _flushed():
        return code
    os._exit(code)


def _flushed() -> bool:
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # AttributeError: no stream at all (None)
        return False
    return True


if __name__ == "__main__":
    raise SystemExit(run())
