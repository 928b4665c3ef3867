"""What every command that downloads or installs shares, from the flags: the uv to run, the wheel
cache, THE HTTP fetcher for wheels, the download progress bar, and filling a plan's hashes. Used by
``install``, ``install --lock``, ``lock``, ``wheelhouse`` and ``--build``; imports no command.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UsageError
from . import common

if TYPE_CHECKING:
    from ..model import LockPlan
    from ..net.download import DownloadProgress, WheelCache
    from ..net.http import HttpFetcher


def uv_from_args(args: argparse.Namespace, env: Mapping[str, str]) -> str:
    """``--uv PATH`` (checked now, before anything is downloaded) or the default uv (also for a
    command without ``--uv``)."""
    from ..env.install import find_uv

    uv = getattr(args, "uv", None)
    if uv is None:
        return find_uv(env)
    found = shutil.which(uv, path=env.get("PATH"))
    if found is None:
        raise UsageError(f"--uv {uv}: not an executable", hint="pass the path of the uv executable, or leave --uv out to use the uv installed with this tool")
    return found


def wheel_cache_from_args(args: argparse.Namespace, env: Mapping[str, str]) -> WheelCache:
    from ..net.cache import default_cache_dir
    from ..net.download import WheelCache

    return WheelCache.under(args.cache_dir or default_cache_dir(env))


def download_fetcher(args: argparse.Namespace, defs=None) -> HttpFetcher:
    """THE HTTP fetcher for wheels (install, install --lock, wheelhouse): the network flags, retries
    reported as they happen, and the credentials of the configured indexes (``defs``) when given."""
    from ..net.http import HttpFetcher

    fetcher = HttpFetcher(cache=None, timeout=args.timeout, allow_insecure_hosts=tuple(args.allow_insecure_host), system_certs=args.system_certs)
    fetcher.transport.on_retry = common.retry_printer(args)
    for definition in defs.indexes.values() if defs is not None else ():
        if definition.url:
            fetcher.credentials.remember(definition.url)
    return fetcher


@contextmanager
def download_progress(args: argparse.Namespace) -> Iterator[DownloadProgress | None]:
    """A rich progress bar on a terminal (stderr), nothing otherwise; none for a dry run. The
    display starts with the first wheel reported: a run that downloads nothing shows no bar."""
    if getattr(args, "quiet", False) or getattr(args, "dry_run", False) or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TaskID, TextColumn, TransferSpeedColumn

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


def fill_plan_hashes(args: argparse.Namespace, env: Mapping[str, str], plan: LockPlan, defs) -> LockPlan:
    """``download.fill_hashes`` with the cache, network and progress settings of the flags.

    With ``--snapshot`` nothing is downloaded: only wheels already in the wheel cache count.
    """
    from ..net.download import fill_hashes

    with download_fetcher(args, defs) as fetcher, download_progress(args) as progress:
        return fill_hashes(plan, cache=wheel_cache_from_args(args, env), fetcher=fetcher, progress=progress, offline=args.snapshot is not None)


def check_output_names(paths: list[Path] | tuple[Path, ...]) -> None:
    """Each output is a lock file name (pylock.<name>.toml or *.txt) and not a folder: said up
    front, as a usage error, not after a resolve."""
    from ..lock.files import lock_format

    for path in paths:
        lock_format(path)
        if path.is_dir():
            raise UsageError(f"-o {common.shown(path)}: it is a directory", hint="name a file (pylock.<name>.toml or *.txt)")


__all__ = ["check_output_names", "download_fetcher", "download_progress", "fill_plan_hashes", "uv_from_args", "wheel_cache_from_args"]
