"""What every command that downloads or installs shares, on its settings values: the uv to run, the
download progress bar, and filling a plan's hashes through the command's session (its wheel cache
and its one HTTP fetcher, ``assemble.Session``). Used by ``install``, ``install --lock``, ``lock``,
``wheelhouse`` and ``--build``; imports no command.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TaskID, TextColumn, TransferSpeedColumn

from ..errors import LockFileError, ResolveGpuStackError, UsageError
from ..lock.files import lock_format
from ..net.download import fill_hashes
from ..net.snapshot import synthetic_digests
from ..rules.invariants import synthetic_rows
from . import common
from .buildenv import find_uv as find_uv  # its home is buildenv.py (which imports no module that imports common)

if TYPE_CHECKING:
    from ..data.definitions import Definitions
    from ..model import LockedPackage, LockPlan
    from ..net.download import DownloadProgress
    from .assemble import Session
    from .options import OutputOptions, ResolveOptions


@contextmanager
def download_progress(output: OutputOptions, *, dry_run: bool = False) -> Iterator[DownloadProgress | None]:
    """A rich progress bar on a terminal (stderr), nothing otherwise; none for a dry run. The
    display starts with the first wheel reported: a run that downloads nothing shows no bar."""
    if output.quiet or dry_run or not sys.stderr.isatty():
        yield None
        return

    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn())
    bar = Progress(*columns, console=Console(file=sys.stderr), transient=False)
    tasks: dict[str, TaskID] = {}
    lock = threading.Lock()

    def report(name: str, done: int, total: int | None) -> None:
        with lock:
            if not tasks:
                bar.start()
            task = tasks.get(name)
            if task is None:
                label = name if len(name) <= 48 else name[:47] + "…"
                task = tasks[name] = bar.add_task(label, total=total)
        bar.update(task, completed=done, total=total)

    try:
        yield report
    finally:
        if tasks:
            bar.stop()


def fill_plan_hashes(options: ResolveOptions, session: Session, plan: LockPlan, defs: Definitions) -> LockPlan:
    """``download.fill_hashes`` through the ``session``'s wheel cache and download fetcher, with the progress settings of ``options``.

    With ``--snapshot`` (and no ``--live-fallback``) nothing is downloaded: only wheels already in the wheel cache count.
    """
    with download_progress(options.output) as progress:
        return fill_hashes(plan, cache=session.wheel_cache(), fetcher=session.download_fetcher(defs), progress=progress, offline=options.sources.downloads_off)


def check_output_names(paths: list[Path] | tuple[Path, ...]) -> None:
    """Each output is a lock file name (pylock.<name>.toml or *.txt) and not a folder: said up
    front, as a usage error, not after a resolve."""
    for path in paths:
        lock_format(path)
        if path.is_dir():
            raise UsageError(f"-o {common.shown(path)}: it is a directory", hint="name a file (pylock.<name>.toml or *.txt)")


__all__ = ["check_output_names", "download_progress", "fill_plan_hashes", "find_uv"]


def refuse_synthetic(packages: Iterable[LockedPackage], snapshot: Path | None, *, doing: str) -> None:
    """A lock must not pin, and an install must not download, a stand-in digest of a reconstructed
    snapshot (no real wheel can match it); exit 1 naming the rows, before anything is downloaded or
    written (``doing``: "lock" or "install")."""
    rows = synthetic_rows(packages, synthetic_digests(snapshot))
    if not rows:
        return
    names = ", ".join(f"{p.name} {p.version}" for p in rows)
    if doing == "lock":
        raise LockFileError(
            f"refusing to lock {names}: the sha256 comes from the reconstructed (synthetic) part of the snapshot, not from the real file",
            hint=(
                "pick a version whose rows were recorded for real (e.g. --flashinfer 0.6.5), resolve online without --snapshot, "
                "write a constraints file (-o NAME.txt: exact pins, no sha256), or pass --allow-synthetic for a test or demo lock"
            ),
        )
    raise ResolveGpuStackError(
        f"refusing to install {names}: the sha256 comes from the reconstructed (synthetic) part of the snapshot, so no real wheel can match it",
        hint="pick a version whose rows were recorded for real (e.g. --flashinfer 0.6.5), or install online without --snapshot",
    )
