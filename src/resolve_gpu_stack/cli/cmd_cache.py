"""`resolve-gpu-stack cache [info|prune|clean]`: where the cache is, how big, and tidying it.

``info`` (the default) lists files and bytes per kind: pages, metadata, results, scans (wheel
ABI classifications), wheels, partial downloads, wheel records, wheel checks, download locks, temp
files. ``prune [--older-than DAYS]`` removes what can be fetched or
computed again and was not used for DAYS (default 7): abandoned temp files, partial downloads and
stored results by age, wheels by last access; pages, METADATA and scans stay (small, and pages
are revalidated on every use). ``clean`` removes every entry. Wheels and partial downloads a
running command uses are left alone (``in_use``). A kind folder that is a symbolic link is refused
(exit 2): nothing is counted or deleted through it. ``--format json`` prints
``{"schema": "resolve-gpu-stack/cache/v1", "cache_dir", "action", "kinds": [{"kind", "files",
"bytes", "in_use"}], "total_bytes"}``: for ``info`` what is there, for ``prune``/``clean`` what was removed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UsageError
from ..net import cache
from ..net.cache import CACHE_SCHEMA
from . import common, render
from . import options as O
from .commands import DEFAULT_DAYS

if TYPE_CHECKING:
    from ..net.cache import Usage
    from .assemble import Session


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheSettings(O.CommandOptions):
    """``network.cache_dir``: the cache (``--cache-dir``, else the default folder)."""

    action: str = "info"
    older_than: float = DEFAULT_DAYS


def read(args: argparse.Namespace, env: Mapping[str, str]) -> CacheSettings:
    return CacheSettings(**O.command_fields(args, env), action=args.action, older_than=args.older_than)


def run(settings: CacheSettings, env: Mapping[str, str], session: Session) -> int:
    root, action = settings.network.cache_dir, settings.action
    if root.exists() and not root.is_dir():
        raise UsageError(f"{root} is not a directory", hint="pass --cache-dir DIR")
    if action == "prune":
        kinds = cache.prune(root, older_than_days=settings.older_than)
    elif action == "clean":
        kinds = cache.clean(root)
    else:
        kinds = cache.cache_usage(root)
    if common.output_format(settings.output) == "json":
        render.print_json(cache_json(root, action, kinds), sys.stdout)
    else:
        _print_table(root, action, kinds)
    return 0


def cache_json(root: Path, action: str, kinds: Sequence[Usage]) -> dict[str, object]:
    return {
        "schema": CACHE_SCHEMA,
        "cache_dir": str(root),
        "action": action,
        "kinds": [{"kind": k.kind, "files": k.files, "bytes": k.bytes, "in_use": k.in_use} for k in kinds],
        "total_bytes": sum(k.bytes for k in kinds),
    }


def _print_table(root: Path, action: str, kinds: Sequence[Usage]) -> None:
    verb = {"info": "", "prune": "removed ", "clean": "removed "}[action]
    print(f"cache: {root}")
    for k in kinds:
        left = "  (in use by a running command: left alone)" if k.in_use else ""
        print(f"  {verb}{k.kind:<18} {k.files:>8} files  {_size(k.bytes):>10}{left}")
    print(f"  {verb}{'total':<18} {sum(k.files for k in kinds):>8} files  {_size(sum(k.bytes for k in kinds)):>10}")


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"
