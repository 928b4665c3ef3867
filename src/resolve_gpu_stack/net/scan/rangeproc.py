"""Range reads in a second process: wheel scans and a torch's exports, whose Python (zip and ELF
structure, the HTTP client's work per range, deflate block searches) would otherwise take turns
with the resolve's for one interpreter lock, run beside it on another core.

``RangeProcess`` starts ``resolve_gpu_stack.net.scan.rangechild`` (the child's side; isolated, see
``child_command``: a ``queue.py`` in the current folder never runs) at
``start``, or once the wheels asked to read add up to ``START_AFTER`` bytes: the scans' cost
follows what they inflate, and a plan of small wheels (the loopback worlds: the 215-package one's
29 scans in 0.4 s) reads them here sooner than a child would start and pay for itself; today's
SGLang closure passes it within its first scans (a 91 MB wheel among them). Until the child says it is ready
(0.1-0.2 s alone, with the bytecode this process keeps), each scan answers None and the caller
reads in this process, so a small scan never waits for the child to start. A wheel of at least
``START_AFTER`` bytes (the one whose scan starts the child, in today's SGLang closure) waits for it
up to ``EXPORTS_WAIT`` seconds: read here, sglang 0.5.23's 18.8 MB took 1.7 s beside the crawl (0.24 s
alone), and its verdict is what asks for the kept torch's exports. A torch's exports, asked for
once and ~0.9 s of CPU, wait for it up to ``EXPORTS_WAIT`` seconds (where scan records answer every
scan and none holds that torch's exports, a nightly's or a private build's, they are the first read a
resolve asks for, before any scan has started the child). Once ready, each job goes
to the child over a pipe (pickles framed by length; the child is our own, started from our own
interpreter, and nothing else writes to the pipe): ``scan`` answers the scan's ``ScanRecord`` and
whether it is final, ``exports`` a ``TorchExports``. The cache, a snapshot's record and the
progress stay here; the child has no cache.

- What the child says (a scan's notes, retries, log records at this process's level) comes back on
  the pipe and is said, counted (its requests and bytes join this transport's ``FetchStats``) and
  logged here.
- The child builds its transport from this one's ``TransportSettings`` (timeouts, retries, TLS, proxies from
  the environment, the netrc file); each job carries the credentials remembered for URLs, by
  origin, and they only ever cross the pipe.
- A child that cannot start, dies or answers what cannot be read answers None from then on: its
  jobs in flight and every later one are read in this process. Never a wrong answer, at worst
  the speed of one process.
- The child ignores Ctrl-C (the terminal sends it to the whole group) and ends when its pipe does:
  at ``close``, or when this process ends however it ends.

This module is this process's side and the messages both sides read; it imports no reader.
"""

from __future__ import annotations

import logging
import os
import pickle
import struct
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ...data.rules import AbiRules
from ...model import IndexFile
from ...rules.abi import TorchExports
from .. import process
from ..settings import FetchSettings
from ..transport import FetchStats
from ..urlpolicy import Credentials, OriginCredentials

log = logging.getLogger(__name__)

_FRAME = struct.Struct("!I")
CHILD = "resolve_gpu_stack.net.scan.rangechild"  # the child's module (its ``serve`` is what ``_CHILD_MAIN`` runs)
PACKAGE_ROOT = Path(__file__).resolve().parents[3]  # the folder holding resolve_gpu_stack: the child imports the same code
# the child's start: its import path set before anything is imported (``sys.argv[1:]``), then its loop
_CHILD_MAIN = f"import sys; sys.path[:] = sys.argv[1:]; from {CHILD} import serve; serve()"
START_AFTER = 16 * 2**20  # bytes of wheels asked to read before the child starts: less is read here sooner than it starts
# seconds a torch's exports wait for the child to get ready (0.1-0.2 s alone): their read is ~0.9 s of
# CPU, most of it Python holding this process's lock for that long while the crawl needs it
# (torch 2.15.0 read here in a live resolve: 1.7-2.3 s, and the crawl slowed by as much); a child
# not ready by then, or gone, leaves them to this process. A wheel of START_AFTER bytes or more waits as long.
EXPORTS_WAIT = 3.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildSettings:
    """What the child builds its transport and readers from: this process's own."""

    fetch: FetchSettings  # its transport's settings, connections and scan budget: this process's fetcher's
    log_level: int


@dataclass(frozen=True, slots=True)
class ScanJob:
    """A wheel's ABI scan, for the range child."""

    file: IndexFile
    tail: tuple[int, bytes, int] | None  # the zip tail a METADATA read left, when there was one
    rules: AbiRules


@dataclass(frozen=True, slots=True)
class ExportsJob:
    """A torch wheel's exports read, for the range child."""

    version: str
    file: IndexFile
    budget: int | None


@dataclass(frozen=True, slots=True)
class Job:
    """A job handed to the range child, with the credentials of its origin."""

    id: int
    work: ScanJob | ExportsJob
    credentials: OriginCredentials


def lowest_log_level() -> int:
    """The lowest level at which any logger of this package logs here (the root's, or one a caller
    set lower): what the child forwards, for this process's loggers to filter as their own."""
    package = __name__.partition(".")[0]
    loggers = [lg for name, lg in logging.Logger.manager.loggerDict.items() if name.startswith(package) and isinstance(lg, logging.Logger)]
    return min([logging.getLogger(package).getEffectiveLevel(), *(lg.getEffectiveLevel() for lg in loggers)])


def send(stream: IO[bytes], lock: threading.Lock, message: object) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    with lock:
        stream.write(_FRAME.pack(len(data)) + data)
        stream.flush()


def receive(stream: IO[bytes]) -> object | None:
    """The next message, or None at the pipe's end."""
    head = stream.read(_FRAME.size)
    if len(head) < _FRAME.size:
        return None
    (n,) = _FRAME.unpack(head)
    data = stream.read(n)
    return pickle.loads(data) if len(data) == n else None


class RangeProcess:
    """This process's end; see the module docstring. Thread-safe."""

    def __init__(
        self,
        settings: ChildSettings,
        *,
        credentials: Credentials,
        stats: FetchStats,
        say: Callable[[str], None] | None = None,
        on_retry: Callable[[str], None] | None = None,
    ) -> None:
        self._settings = settings
        self._credentials = credentials
        self._stats = stats
        self._say = say
        self._on_retry = on_retry
        self._lock = threading.Lock()
        self._pipe_lock = threading.Lock()
        self._child: process.Popen[bytes] | None = None
        self._ready = threading.Event()
        self._settled = threading.Event()  # ready, or gone: what a job waiting for it waits for
        self._gone = False
        self._jobs: dict[int, Future[Any]] = {}
        self._next = 0
        self._counted: dict[str, int] = {}
        self._answered = 0
        self._asked = 0  # bytes of the wheels asked to read, here or there

    def scan(self, file: IndexFile, tail: tuple[int, bytes, int] | None, rules: AbiRules) -> tuple[Any, bool] | None:
        """(the ``ScanRecord``, whether it is final) of a fresh scan of ``file`` in the child; None:
        scan it here (the child is not ready, or gone). A wheel of at least ``START_AFTER`` bytes
        waits for a child that is starting (see the module docstring)."""
        wait = EXPORTS_WAIT if (file.size or 0) >= START_AFTER else 0.0
        answer = self._run(ScanJob(file, tail, rules), wait=wait)
        return (answer[0], answer[1]) if isinstance(answer, tuple) else None

    def exports(self, version: str, file: IndexFile, budget: int | None) -> TorchExports | None:
        """A fresh read of the exports of torch ``version``'s wheel ``file`` in the child; None: read them here."""
        answer = self._run(ExportsJob(version, file, budget), wait=EXPORTS_WAIT)
        return answer if isinstance(answer, TorchExports) else None

    def start(self, *, wait: float = 0.0) -> bool:
        """Start the child if it was not, and wait up to ``wait`` seconds for it to be ready:
        whether it is (jobs go to it from then on)."""
        with self._lock:
            started = self._start() is not None
        return started and self._settled.wait(wait) and self._ready.is_set()

    @property
    def pid(self) -> int | None:
        """The child's process id, once started."""
        child = self._child
        return child.pid if child is not None else None

    @property
    def answered(self) -> int:
        """How many jobs the child answered."""
        return self._answered

    def _run(self, work: ScanJob | ExportsJob, *, wait: float = 0.0) -> Any:
        """``work``'s answer from the child; None: read it here. ``wait``: seconds to wait for a
        child that is starting (a small scan waits for none: it is read here sooner)."""
        with self._lock:
            self._asked += work.file.size or 0
            if self._child is None and self._asked < START_AFTER:
                return None
            child = self._start()
            if child is None:
                return None
        if not self._ready.is_set() and not (wait > 0 and self._settled.wait(wait) and self._ready.is_set()):
            return None
        with self._lock:
            if self._gone:
                return None
            self._next += 1
            job = Job(self._next, work, self._credentials.remembered())
            future: Future[Any] = Future()
            self._jobs[job.id] = future
        try:
            assert child.stdin is not None
            send(child.stdin, self._pipe_lock, job)
        except (OSError, ValueError):
            self._end()
        try:
            return future.result()
        except _Gone:
            return None

    def _start(self) -> process.Popen[bytes] | None:
        """The child, started now if it was not (under ``_lock``); None once it is gone."""
        if self._gone:
            return None
        if self._child is None:
            try:
                argv = child_command(os.getcwd())
                self._child = process.start(argv, stdin=process.PIPE, stdout=process.PIPE, cwd=PACKAGE_ROOT)
                assert self._child.stdin is not None
                send(self._child.stdin, self._pipe_lock, self._settings)
            except (OSError, ValueError) as exc:
                log.info("range reads stay in this process: the second process did not start (%s)", exc)
                self._gone = True
                self._settled.set()
                return None
            threading.Thread(target=self._listen, args=(self._child,), name="range-process", daemon=True).start()
        return self._child

    def _listen(self, child: process.Popen[bytes]) -> None:
        assert child.stdout is not None
        try:
            while (message := receive(child.stdout)) is not None:
                self._take(message)
        except Exception as exc:  # an answer that cannot be read: the child is trusted no further
            log.info("range reads back in this process: the second process answered what cannot be read (%s)", exc)
        self._end()

    def _take(self, message: object) -> None:
        kind, *rest = message if isinstance(message, tuple) else (None,)
        if kind == "done":
            job_id, answer, counts = rest
            self._count(counts)
            with self._lock:
                future = self._jobs.pop(job_id, None)
                self._answered += answer is not None
            if future is not None:
                future.set_result(answer)
        elif kind == "ready":
            self._ready.set()
            self._settled.set()
        elif kind == "say" and self._say is not None:
            self._say(rest[0])
        elif kind == "retry" and self._on_retry is not None:
            self._on_retry(rest[0])
        elif kind == "log":
            level, name, msg, args = rest
            logging.getLogger(name).log(level, msg, *(args if isinstance(args, tuple) else (args,)))

    def _count(self, counts: dict[str, int]) -> None:
        """Add what the child's transport counted since its last answer to this process's stats.
        Its counts only grow, but two answers may come in another order than they were taken: the
        highest of each is what it has counted."""
        with self._lock:
            more = {key: max(0, value - self._counted.get(key, 0)) for key, value in counts.items()}
            self._counted = {key: max(value, self._counted.get(key, 0)) for key, value in counts.items()}
        self._stats.add(**more)

    def _end(self) -> None:
        with self._lock:
            self._gone = True
            jobs, self._jobs = self._jobs, {}
        self._settled.set()
        for future in jobs.values():
            future.set_exception(_Gone())

    def close(self) -> None:
        """End the child (its jobs in flight are dropped: their callers read them here)."""
        with self._lock:
            child, self._child = self._child, None
            self._gone = True
        self._settled.set()
        if child is None:
            return
        if not self._ready.is_set():  # still starting: it has read nothing, there is nothing to end cleanly
            child.kill()
        try:
            assert child.stdin is not None
            child.stdin.close()  # the child ends at its pipe's end
        except OSError:
            pass
        try:
            child.wait(timeout=2)
        except process.TimeoutExpired:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()


def child_command(cwd: str) -> list[str]:
    """How the child starts: isolated (``-I``: no ``PYTHON*`` variable, no user site, neither the
    current folder nor the script's on ``sys.path``), from ``PACKAGE_ROOT`` (its working folder),
    its import path this process's less the current folder ``cwd`` and relative entries (this
    package's folder first), keeping the bytecode this process keeps (``-X pycache_prefix``, as
    ``__main__.keep_bytecode`` chose; ``-B`` where this process writes none)."""
    path = [str(PACKAGE_ROOT), *(p for p in sys.path if p and os.path.isabs(p) and os.path.realpath(p) != os.path.realpath(cwd))]
    bytecode = ["-X", f"pycache_prefix={sys.pycache_prefix}"] if sys.pycache_prefix is not None and not sys.dont_write_bytecode else []
    if sys.dont_write_bytecode:
        bytecode = ["-B"]
    return [sys.executable, "-I", *bytecode, "-c", _CHILD_MAIN, *dict.fromkeys(path)]


class _Gone(Exception):
    pass
