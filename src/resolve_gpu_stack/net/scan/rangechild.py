"""The range process's own side (``net/scan/rangeproc.py`` starts it isolated, ``python -I -c`` with a
fixed import path, and runs ``serve``): its settings, then jobs, on stdin; answers, notes, retries and
log records on stdout, each a pickle framed by length.

Scans run on ``CHILD_THREADS`` threads, each exports read on a thread of its own (the plan waits
for it last: it never queues behind the scans). Its threads are daemons: at its pipe's end the
loop returns and the process ends, whatever reads are in flight (their callers read them in the
parent). It ignores Ctrl-C: the terminal sends it to the whole group, and the parent decides.
Anything printed by accident goes to stderr, never into the pipe.
"""

from __future__ import annotations

import logging
import os
import pickle
import queue
import signal
import sys
import threading
from collections.abc import Callable
from typing import IO

from ...data.rules import AbiRules
from ...urls import without_fragment
from ..metadata import TailMemo
from ..transport import Transport
from .classify import RangeClassifier
from .exports import WheelExports
from .rangeproc import ChildSettings, ExportsJob, Job, ScanJob, receive, send

log = logging.getLogger(__name__)

CHILD_THREADS = 32  # scans run at once: each is a few round trips


class _Forward(logging.Handler):
    """Log records sent to the parent, which logs them as its own: their message and arguments as
    they were (a handler there reads them as it would a record of its own), or the message made
    here when an argument does not pickle."""

    def __init__(self, say: Callable[[object], None]) -> None:
        super().__init__()
        self._say = say

    def emit(self, record: logging.LogRecord) -> None:
        try:
            try:
                self._say(("log", record.levelno, record.name, record.msg, record.args))
            except (pickle.PicklingError, TypeError, AttributeError):
                self._say(("log", record.levelno, record.name, record.getMessage(), ()))
        except (OSError, ValueError):  # the parent is gone
            pass


class _Child:
    """One child's transport and readers, shared by its jobs."""

    def __init__(self, settings: ChildSettings, out: IO[bytes]) -> None:
        self._settings = settings
        self._out = out
        self._pipe = threading.Lock()
        self._lock = threading.Lock()  # the classifiers
        self.transport = Transport(settings.fetch.transport)
        self.transport.on_retry = lambda text: self.say(("retry", text))
        self._tails = TailMemo()
        self._classifiers: dict[AbiRules, RangeClassifier] = {}

    def say(self, message: object) -> None:
        send(self._out, self._pipe, message)

    def _classifier(self, rules: AbiRules) -> RangeClassifier:
        with self._lock:
            if rules not in self._classifiers:
                self._classifiers[rules] = RangeClassifier(
                    self.transport,
                    None,
                    rules,
                    say=lambda text: self.say(("say", text)),
                    connections=self._settings.fetch.connections,
                    tails=self._tails,
                    scan_budget=self._settings.fetch.scan_budget,
                )
            return self._classifiers[rules]

    def run(self, job: Job) -> None:
        """Answer ``job``: its result, or None for a failure of ours (the parent reads it itself,
        and says what fails), with the transport's counts so far."""
        self.transport.credentials.restore(job.credentials)
        work = job.work
        answer: object = None
        try:
            if isinstance(work, ScanJob):
                if work.tail is not None:
                    self._tails.put(without_fragment(work.file.url), *work.tail)
                answer = self._classifier(work.rules).read(work.file)
            else:
                answer = WheelExports(self.transport, None, budget=work.budget).read(work.version, work.file)
        except Exception as exc:
            log.debug("%s: read in the parent instead (%r)", work.file.filename, exc)
        stats = self.transport.stats
        counts = {"requests": stats.requests, "bytes_received": stats.bytes_received, "retries": stats.retries, "full_downloads": stats.full_downloads}
        self.say(("done", job.id, answer, counts))


def serve() -> None:
    """The child's loop (see the module docstring)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    inbox = sys.stdin.buffer
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # nothing printed by accident reaches the pipe
    settings = receive(inbox)
    if not isinstance(settings, ChildSettings):
        return
    child = _Child(settings, out)
    root = logging.getLogger()
    root.addHandler(_Forward(child.say))
    root.setLevel(settings.log_level)
    scans: queue.SimpleQueue[Job] = queue.SimpleQueue()

    def scanning() -> None:
        while True:
            child.run(scans.get())

    for n in range(CHILD_THREADS):
        threading.Thread(target=scanning, name=f"range-child-{n}", daemon=True).start()
    child.say(("ready",))
    while isinstance(job := receive(inbox), Job):
        if isinstance(job.work, ExportsJob):
            threading.Thread(target=child.run, args=(job,), name="range-exports", daemon=True).start()
        else:
            scans.put(job)


if __name__ == "__main__":
    serve()
