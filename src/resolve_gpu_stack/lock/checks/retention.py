"""Retention: a nightly past the index's retention window (a warning: it may no longer be served)."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlsplit

from packaging.version import Version

from ...data.definitions import Definitions
from ...model import Action, LockedPackage
from .finding import WARNING, Expected, Finding, regenerate_hint

_DEV_DATE_RE = re.compile(r"^(\d{4})(\d{2})(\d{2})$")


def build_date(version: Version, upload_time: str | None) -> dt.date | None:
    """When a nightly was built: ``devYYYYMMDD`` in its version, else its upload time."""
    if version.dev is not None and (m := _DEV_DATE_RE.match(str(version.dev))):
        try:
            return dt.date(int(m[1]), int(m[2]), int(m[3]))
        except ValueError:
            pass
    if upload_time:
        try:
            return dt.date.fromisoformat(upload_time[:10])
        except ValueError:
            return None
    return None


def _is_nightly(pkg: LockedPackage) -> bool:
    """A dev release, or a file under a ``nightly/`` folder (triton's ``3.7.0+git...`` wheels)."""
    return pkg.version.is_devrelease or (pkg.url is not None and "/nightly/" in urlsplit(pkg.url).path)


def retention_findings(path: Path, packages: Iterable[LockedPackage], defs: Definitions, today: dt.date, expected: Expected | None = None) -> list[Finding]:
    """A warning for each wheel to download that its index has (or soon will have) deleted."""
    out: list[Finding] = []
    for pkg in packages:
        if pkg.action is Action.KEEP:
            continue  # nothing to download
        index = defs.indexes.get(pkg.index)
        if index is None or index.retention_days <= 0 or not _is_nightly(pkg):
            continue
        built = build_date(pkg.version, pkg.upload_time)
        if built is None:
            continue
        age = (today - built).days
        if age > index.retention_days:
            out.append(
                Finding(
                    level=WARNING,
                    path=path,
                    package=pkg.name,
                    message=f"{pkg.version} was built on {built} ({age} days ago); the {index.name} index deletes nightlies after about {index.retention_days} days, so its URL will stop working (if it has not already)",
                    hint=(regenerate_hint(expected) or "regenerate:").replace("regenerate:", "relock onto a current nightly:", 1).rstrip(":"),
                )
            )
    return out
