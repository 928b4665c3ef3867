"""Core metadata (METADATA / PKG-INFO) and its Requires-Dist lines, parsed (pure), and the
``ParseMemo`` a crawl keeps across its pages and METADATA files. ``parse_metadata`` raises
``CrawlError(source, cause)`` for anything it cannot use (``parse.py`` states the whole contract)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.tags import Tag
from packaging.utils import InvalidName, NormalizedName, canonicalize_name
from packaging.version import InvalidVersion, Version

from ..errors import CrawlError
from ..model import WheelMetadata
from .coremeta import core_metadata_fields
from .pagejoin import redact
from .pagerows import _clip

MAX_METADATA_BYTES = 5 * 1024 * 1024


def parse_metadata(raw: bytes, *, source: str) -> WheelMetadata:
    """Read a METADATA / PKG-INFO file (email-header format) into ``WheelMetadata``.

    ``requires_dist`` and ``provides_extra`` are kept as written. Raises ``CrawlError(source, ...)``
    for a file over 5 MB, unreadable headers, or a missing, repeated or invalid Name or Version.
    """
    where = redact(source)
    if len(raw) > MAX_METADATA_BYTES:
        raise CrawlError(where, f"METADATA is {len(raw):,} bytes, over the {MAX_METADATA_BYTES:,}-byte limit")
    fields, unparsed = core_metadata_fields(raw)
    name = _single_field(fields, unparsed, "name", "Name", where)
    version_text = _single_field(fields, unparsed, "version", "Version", where)
    try:
        normalized = canonicalize_name(name, validate=True)
    except InvalidName:
        raise CrawlError(where, f"METADATA Name {_clip(name)!r} is not a valid project name") from None
    try:
        version = Version(version_text)
    except InvalidVersion:
        raise CrawlError(where, f"METADATA Version {_clip(version_text)!r} is not a valid version") from None
    requires_python = fields.get("requires-python", "")
    return WheelMetadata(
        name=normalized,
        version=version,
        requires_dist=tuple(r.strip() for r in fields.get("requires-dist", ()) if r.strip()),
        requires_python=(requires_python.strip() if isinstance(requires_python, str) else "") or None,
        provides_extra=tuple(e.strip() for e in fields.get("provides-extra", ()) if e.strip()),
        metadata_version=_text(fields.get("metadata-version")),
        dynamic=tuple(d.strip().lower() for d in fields.get("dynamic", ()) if d.strip()),
    )


def _text(value: str | list[str] | None) -> str | None:
    return (value.strip() or None) if isinstance(value, str) else None


@dataclass(frozen=True, slots=True)
class RequiresDist:
    """One Requires-Dist line, parsed."""

    name: NormalizedName
    specifier: SpecifierSet
    extras: frozenset[str]
    marker: Marker | None
    url: str | None
    text: str  # the requirement without its marker: ``torch==2.9.0``


def parse_requires_dist(line: str) -> RequiresDist | None:
    """A Requires-Dist line, parsed; None when it does not parse."""
    try:
        req = Requirement(line)
    except InvalidRequirement:
        return None
    return RequiresDist(
        name=canonicalize_name(req.name),
        specifier=req.specifier,
        extras=frozenset(canonicalize_name(e) for e in req.extras),
        marker=req.marker,
        url=req.url,
        text=str(req).split(";", 1)[0].strip(),
    )


class ParseMemo:
    """What parsing remembers across the pages and METADATA files of one crawl (a ``Finder``'s:
    every target of a command shares it, and it dies with the command).

    ``tag_sets``: a wheel's tag part -> its tags. The files of every page with the same tags hold
    the same frozenset, so a tag fit's memo (``rules.fit.TargetFit``) matches them by identity, not
    by comparing tags. A few hundred distinct tag parts in practice.
    ``requires_dist``: each Requires-Dist line parsed once (the same lines come back for every
    extra, every wiring and every target; their specifiers are then shared objects too).

    ``versions``: a wheel filename's version part -> its version (the same releases' numbers come
    back on many pages: "1.0.0"); ``specifiers``: a requires-python text -> whether it parses.
    ``rowwise``: a PEP 691 page has been read row by row (``parse.FAST_MIN``): ``msgspec`` is
    imported, so every later JSON page is read so too (the same rows, for less CPU).

    Safe to share between threads: a race computes a value twice, and both are equal.
    """

    __slots__ = ("tag_sets", "versions", "specifiers", "_requires", "rowwise")

    def __init__(self) -> None:
        self.tag_sets: dict[str, frozenset[Tag]] = {}
        self.versions: dict[str, Version] = {}
        self.specifiers: dict[str, bool] = {}
        self.rowwise = False
        self._requires: dict[str, RequiresDist | None] = {}

    def requires_dist(self, line: str) -> RequiresDist | None:
        try:
            return self._requires[line]
        except KeyError:
            parsed = self._requires[line] = parse_requires_dist(line)
            return parsed


def _single_field(fields: Mapping[str, Any], unparsed: Collection[str], key: str, header: str, where: str) -> str:
    value = fields.get(key)
    if isinstance(value, str) and value.strip():
        return value.strip()
    if key in unparsed:
        raise CrawlError(where, f"METADATA {header} is repeated or not valid UTF-8")
    raise CrawlError(where, f"METADATA has no {header} field; this is not a core-metadata file")
