"""`resolve-gpu-stack wheelhouse LOCK... --output DIR`: export locks as a static wheelhouse.

Every wheel the locks install is downloaded (verified, resumable, through the wheel cache) into
``DIR/files/``, with PEP 503/691 pages under ``DIR/simple/``, each lock rewritten into ``DIR/``
and the manifest ``DIR/wheelhouse.json`` (``env.wheelhouse``). Any static web server serves the
folder; ``--index NAME=flat:URL/simple/`` makes it a mirror for the resolver.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import SplitResult, urlsplit

from ..env.wheelhouse import export_wheelhouse
from ..errors import UsageError
from ..net.urlpolicy import is_loopback
from ..urls import has_credentials, redact_url
from . import common, render
from . import options as O
from .downloads import download_progress

if TYPE_CHECKING:
    from ..env.wheelhouse import WheelhouseReport
    from .assemble import Session


@dataclass(frozen=True, slots=True, kw_only=True)
class WheelhouseSettings(O.CommandOptions):
    locks: tuple[Path, ...]
    folder: Path  # -o DIR
    base_url: str | None = None
    prune: bool = False
    offline: bool = False


def read(args: argparse.Namespace, env: Mapping[str, str]) -> WheelhouseSettings:
    return WheelhouseSettings(
        **O.command_fields(args, env), locks=tuple(args.locks), folder=args.output, base_url=args.base_url, prune=args.prune, offline=args.offline
    )


def check_base_url(url: str | None) -> str | None:
    """``--base-url``: written into every lock, so an https URL (or plain http to loopback) with a
    host, no credentials, no query or fragment (they would swallow every wheel path after them),
    no whitespace or control characters. Never shown back with a password in it."""
    if url is None:
        return None
    shown = redact_url(url)
    parts, host = _base_url_parts(url)
    if parts.scheme not in ("http", "https") or not host:
        raise UsageError(f"--base-url {shown!r}: not an http(s) URL", hint=_EXAMPLE)
    if parts.scheme == "http" and not is_loopback(host):
        raise UsageError(
            f"--base-url {shown!r}: plain http to a host that is not loopback; nodes would fetch every wheel unencrypted",
            hint="serve the wheelhouse over https (plain http only on 127.0.0.1 / localhost)",
        )
    if "?" in url or "#" in url:  # an empty one too, which urlsplit does not report
        raise UsageError(f"--base-url {shown!r}: a query or fragment would swallow every wheel path after it", hint=_EXAMPLE)
    return url


def _base_url_parts(url: str) -> tuple[SplitResult, str | None]:
    """``--base-url`` split (and its host), when it is one string of a URL with no credentials."""
    shown = redact_url(url)
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        raise UsageError(f"--base-url {shown!r}: whitespace or a control character in a URL", hint=_EXAMPLE)
    if has_credentials(url):
        raise UsageError(
            "--base-url must not carry credentials: it is written into every lock",
            hint="give the bare URL; nodes send credentials from their own netrc or keyring",
        )
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - a port that is not a number, or out of range, raises here
    except ValueError as exc:
        raise UsageError(f"--base-url {shown!r}: not a URL ({exc})", hint=_EXAMPLE) from None
    return parts, host


_EXAMPLE = "e.g. --base-url https://mirror.example/wheelhouse"


def run(settings: WheelhouseSettings, env: Mapping[str, str], session: Session) -> int:
    base_url = check_base_url(settings.base_url)
    output = settings.folder.absolute()
    locks = list(settings.locks)
    missing = [str(p) for p in locks if not p.is_file()]
    if missing:
        raise UsageError(f"no such lock: {', '.join(missing)}", hint="pass pylock.<name>.toml files written by `resolve-gpu-stack lock`")
    if any(p.resolve().parent == output.resolve() for p in locks):
        raise UsageError(
            f"{settings.folder} holds a lock given to export; the wheelhouse rewrites its locks there",
            hint="export the locks CI wrote (elsewhere) into the wheelhouse folder",
        )
    with download_progress(settings.output) as progress:
        report = export_wheelhouse(
            locks,
            output,
            wheel_cache=session.wheel_cache(),
            fetcher=session.download_fetcher(),
            base_url=base_url,
            progress=progress,
            offline=settings.offline,
            prune=settings.prune,
        )
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if not settings.output.quiet:
        print(summary(report), file=sys.stderr)
    emit_report(settings.output, report)
    return 0


def summary(report: WheelhouseReport) -> str:
    mib = report.total_bytes / (1024 * 1024)
    return (
        f"wheelhouse {common.shown(report.output)}: {len(report.files)} wheels ({mib:.1f} MiB), {len(report.fetched)} fetched, "
        f"{len(report.reused)} already there, {len(report.written)} files written" + (f", {len(report.pruned)} pruned" if report.pruned else "")
    )


def emit_report(output: O.OutputOptions, report: WheelhouseReport) -> None:
    if common.output_format(output) == "json":
        render.print_json(report.to_json(), sys.stdout)
        return
    for f in report.files:
        state = "fetched" if f.wheel.filename in report.fetched else "kept"
        print(f"{state:8} {f.wheel.filename}  ({', '.join(f.locks)})", file=sys.stdout)
    for path in report.pruned:
        print(f"pruned   {path}", file=sys.stdout)
