"""Wheel URLs: below their index, over https (or an allowed host), with no credentials written into the lock."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlsplit

from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from ...model import LockedPackage
from ...net.urlpolicy import is_loopback
from ...urls import origin, strip_credentials
from ..locked import LockedFile
from .finding import Finding, error_at


def wheel_url_problem(url: str, base: str, hosts: Iterable[str]) -> str | None:
    """Why a locked wheel URL is not one its index (at ``base``, sending files to ``hosts``) gives,
    or None: https on the index's own origin or a listed host; plain http only on loopback or on
    the index's own (plain http) origin."""
    try:
        parts = urlsplit(url)
        here, own = origin(url), origin(base)
    except ValueError:
        return "is not a URL"
    if parts.scheme not in ("http", "https"):
        return f"is a {parts.scheme or 'relative'} URL, not https"
    if parts.scheme == "http" and here != own and not is_loopback(here[1]):
        return "is plain http to a host that is not loopback"
    if here == own or _sent_to(here[1], hosts, https=parts.scheme == "https"):
        return None
    return f"is on {here[1]}:{here[2]}, which the index does not send files to"


def _sent_to(host: str, hosts: Iterable[str], *, https: bool) -> bool:
    """Whether the index sends files to ``host`` (any host with ``*``; a listed one over https)."""
    return "*" in hosts or (host in hosts and https)


def is_below(url: str, base: str) -> bool:
    """``url`` is ``base`` or a folder under it (a simple-API base below the logical index)."""
    return url == base or (url.startswith(base.rstrip("/") + "/") and "?" not in url and "#" not in url)


def credential_findings(path: Path, locked: LockedFile) -> list[Finding]:
    """Any URL in the file with a user:password part (the message never repeats the secret)."""
    out: list[Finding] = []

    def look(text: str | None, package: str | None, what: str) -> None:
        if text and strip_credentials(text) != text:
            out.append(
                error_at(
                    path,
                    f"{what} carries credentials: {strip_credentials(text)}",
                    package=package,
                    hint="credentials never belong in a lock file; rotate them if this was committed",
                )
            )

    for entry in locked.entries:
        look(entry.simple_index, entry.name, "[[packages]] index URL")
        for wheel in entry.wheels:
            look(wheel.url, entry.name, "wheel URL")
    for pin in locked.pins:
        look(pin.planned.url if pin.planned else None, pin.name, "wheel URL")
    for name, url in locked.indexes.items():
        look(url, None, f"index {name!r}")
    look(locked.command, None, "the recorded command")
    for note in locked.notes:
        look(note, None, "a note")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return out
    if not out and strip_credentials(text) != text:
        out.append(error_at(path, "a URL in the file carries credentials", hint="credentials never belong in a lock file; rotate them if this was committed"))
    return out


def wheel_problem(pkg: LockedPackage) -> tuple[str | None, frozenset[Tag]]:
    """(what is wrong with the name of the package's wheel file: not a wheel's, or another
    package's or version's; its tags, none when it is not a wheel's name)."""
    if not pkg.filename:
        return None, frozenset()
    try:
        name, version, _, tags = parse_wheel_filename(pkg.filename)
    except InvalidWheelFilename:
        return f"{pkg.filename!r} is not a wheel file name", frozenset()
    if name != pkg.name or version != pkg.version:
        return f"the lock says {pkg.version}, but its wheel {pkg.filename} is {name} {version}", tags
    return None, tags
