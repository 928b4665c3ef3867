"""The rows of one index page (pure): distribution filenames, digests and requires-python read
for ``parse.py``'s dialects, each page's ``_Context`` (its warnings and per-page memos) and the
``RowFilter`` that skips the rows a target cannot use. ``parse_filename`` raises ``ValueError``
naming the filename and what is wrong with it (``parse.py`` states the whole contract)."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import replace
from typing import Protocol

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import Tag, parse_tag
from packaging.utils import (
    InvalidName,
    InvalidSdistFilename,
    InvalidWheelFilename,
    NormalizedName,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from ..model import IndexFile, VariantRef
from .pagejoin import UNSAFE_CHARS
from .pagejoin import join_redacted as _join_redact
from .variants import is_variants_json, variant_wheel, variants_json_release

MAX_WARNINGS = 50  # per page; the rest are counted in one last line


_DIST_SUFFIXES = (".whl", ".tar.gz", ".zip")
_SDIST_SUFFIXES = (".tar.gz", ".zip")


# Files that are not distributions we install: a link to one is skipped with a warning.
_OTHER_FILE_SUFFIXES = (
    ".metadata",
    ".egg",
    ".exe",
    ".msi",
    ".tar.bz2",
    ".tar.xz",
    ".tgz",
    ".tar",
    ".rpm",
    ".deb",
    ".dmg",
    ".asc",
    ".sig",
    ".html",
    ".htm",
    ".json",
    ".txt",
)


def parse_filename(filename: str) -> tuple[NormalizedName, Version, frozenset[Tag], bool]:
    """``(name, version, tags, is_wheel)`` of a wheel (``.whl``) or sdist (``.tar.gz``/``.zip``).

    Tags are empty for an sdist. Raises ``ValueError`` naming the file and the problem.
    """
    if "/" in filename or "\\" in filename or filename in (".", ".."):
        raise ValueError(f"{_clip(filename)!r} is a path, not a file name (path traversal refused)")
    if UNSAFE_CHARS.search(filename):
        raise ValueError(f"{_clip(filename)!r} contains whitespace or control characters")
    try:
        if filename.endswith(".whl"):
            name, version, _build, tags = parse_wheel_filename(filename)
            return name, version, tags, True
        if filename.endswith(_DIST_SUFFIXES):
            name, version = parse_sdist_filename(filename)
            canonicalize_name(filename.rpartition("-")[0], validate=True)  # packaging lets "caf\u00e9" pass
            return name, version, frozenset(), False
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion, InvalidName, ValueError) as exc:
        raise ValueError(f"{_clip(filename)!r} is not a valid distribution filename: {exc}") from None
    raise ValueError(f"{_clip(filename)!r} is not a wheel or sdist (expected .whl, .tar.gz or .zip)")


def _file_kind(name: str) -> str | None:
    """ "dist" (wheel/sdist suffix), "other" (a file we do not install), or None (not a file name)."""
    lower = name.lower()
    if lower.endswith(_DIST_SUFFIXES):
        return "dist"
    return "other" if lower.endswith(_OTHER_FILE_SUFFIXES) else None


_SCHEMES = ("http", "https", "file")


_SHA256_HEX = re.compile(r"[0-9a-fA-F]{64}")


class RowFilter:
    """``parse_page``'s ``keep`` for a target: the rows worth reading are the wheels carrying one
    of ``tags`` (compressed tag sets included; each filename's tag part judged once, a page repeats
    a few) and, with ``sdists``, the other distribution files. A wheel filename whose tag part does
    not parse is kept: the full read says what is wrong with it."""

    __slots__ = ("tags", "sdists", "_known", "_tails")

    def __init__(self, tags: frozenset[Tag], *, sdists: bool = True) -> None:
        self.tags = tags
        self.sdists = sdists
        self._known: dict[str, bool] = {}  # a tag part -> whether it fits
        self._tails: dict[str, bool | None] = {}  # a filename's tail -> ``_tail_kept``

    def passes_over(self, filename: str | None) -> bool:
        """Whether the row of ``filename`` (an href's last segment, a JSON row's ``filename``) is
        skipped unread. A name that is not a file's (a directory link) never is."""
        if filename is None:
            return False
        if not filename.endswith(".whl"):
            return not self.sdists and _file_kind(filename) is not None and not is_variants_json(filename)
        parts = filename[:-4].split("-")
        if len(parts) not in (5, 6) or self._fits("-".join(parts[-3:])):
            return False
        variant = variant_wheel(filename) if len(parts) == 6 else None  # its tags are one part further left
        return variant is None or self.tags.isdisjoint(variant.tags)

    def kept(self, filenames: Sequence[str | None]) -> list[int]:
        """The positions in ``filenames`` (a page's rows' filenames, in order) of the rows
        ``passes_over`` does not skip. A name's tail after its second "-" is judged once
        (``_tail_kept``); a name whose tail says nothing on its own, by ``passes_over``."""
        tails = [name.split("-", 2)[-1] if name is not None else "" for name in filenames]
        verdicts = self._tails
        for tail in set(tails).difference(verdicts):
            verdicts[tail] = self._tail_kept(tail)
        return [i for i, tail in enumerate(tails) if (kept := verdicts[tail]) or (kept is None and not self.passes_over(filenames[i]))]

    def _tail_kept(self, tail: str) -> bool | None:
        """``not passes_over(name)`` for every name with this tail after its second "-": a plain
        wheel's (its tag part and ".whl": ``_fits``), an sdist's (a version and its suffix:
        ``sdists``); None for any other tail (the whole name decides)."""
        if tail.endswith(".whl"):
            return self._fits(tail[:-4]) if tail.count("-") == 2 else None
        return self.sdists if tail.endswith(_SDIST_SUFFIXES) else None

    def _fits(self, part: str) -> bool:
        known = self._known.get(part)
        if known is None:
            try:
                known = not self.tags.isdisjoint(parse_tag(part))
            except ValueError:
                known = True
            self._known[part] = known
        return known


class _Memos(Protocol):
    """What a crawl remembers across its pages (``metadata.ParseMemo``)."""

    tag_sets: dict[str, frozenset[Tag]]
    versions: dict[str, Version]
    specifiers: dict[str, bool]


class _Context:
    """Per-call state: the page URL, the index name, warnings (at most ``MAX_WARNINGS``), memos
    (``tag_sets``, ``versions``, ``specifiers``: the caller's ``ParseMemo``'s, or this page's own)."""

    def __init__(self, url: str, index: str, only: Collection[str] | None = None, *, keep: RowFilter | None = None, memo: _Memos | None = None) -> None:
        self.url = url
        self.keep = keep
        self.tag_sets: dict[str, frozenset[Tag]] = {} if memo is None else memo.tag_sets
        self.versions: dict[str, Version] = {} if memo is None else memo.versions  # a wheel's version part -> its version
        self.specifiers: dict[str, bool] = {} if memo is None else memo.specifiers  # requires-python text -> valid (rows repeat it)
        self.index = index
        self.only = None if only is None else frozenset(only)
        self.lines: list[str] = []
        self.dropped = 0
        # Rows of one page share a link directory, a name, versions and tags: each is joined or
        # parsed once per page (see _join_redacted and _filename).
        self.joins: dict[tuple[str, str], str] = {}  # (base, link directory) -> redacted join, "" if none
        self.names: dict[str, NormalizedName] = {}  # a wheel's name part -> its name
        # PEP 825: each release's {name}-{version}-variants.json linked here -> (its URL, its sha256)
        self.variants_json: dict[tuple[NormalizedName, Version], tuple[str, str | None]] = {}
        self.has_variants = False  # a variant wheel was read (``_split_variants`` has work)

    def warn(self, line: str) -> None:
        if len(self.lines) < MAX_WARNINGS:
            self.lines.append(line)
        else:
            self.dropped += 1

    def warnings(self) -> tuple[str, ...]:
        more = (f"... and {self.dropped} more warnings like these",) if self.dropped else ()
        return tuple(self.lines) + more


def _join_redacted(base: str, href: str, ctx: _Context) -> str | None:
    """``redact(urljoin(base, href))`` (``pagejoin.join_redacted``, with the page's joins), or None
    when the href cannot be joined."""
    return _join_redact(base, href, ctx.joins)


def _filename(filename: str, ctx: _Context) -> tuple[NormalizedName, Version, frozenset[Tag], bool]:
    """``parse_filename``, with a wheel's name part parsed once per page, its version part and its
    tag part once per ``ParseMemo`` (``ctx.versions``, ``ctx.tag_sets``).

    A wheel filename without a build tag is ``name-version-tags.whl``; each part is checked on
    its own by ``parse_wheel_filename``, so a filename whose parts were each seen (valid, in the
    same position) before gives the same answer without parsing them again.
    """
    plain = filename.endswith(".whl") and filename.count("-") == 4 and "/" not in filename and "\\" not in filename
    if plain and not UNSAFE_CHARS.search(filename):
        name_part, version_part, tag_part = filename[:-4].split("-", 2)
        known = ctx.names.get(name_part)
        tags = ctx.tag_sets.get(tag_part)
        if known is not None and tags is not None:
            version = ctx.versions.get(version_part) or _version(version_part, ctx)
            if version is not None:
                return known, version, tags, True
    name, version, tags, is_wheel = parse_filename(filename)
    if plain and is_wheel:
        tags = _remember(filename, name, version, tags, ctx)
    return name, version, tags, is_wheel


def _version(part: str, ctx: _Context) -> Version | None:
    """A wheel's version part parsed as ``parse_wheel_filename`` parses it, and kept for the page;
    None when it does not parse (the full parse then says why)."""
    try:
        version = ctx.versions[part] = Version(part)
    except InvalidVersion:
        return None
    return version


def _dist_filename(filename: str, ctx: _Context) -> tuple[NormalizedName, Version, frozenset[Tag], bool, VariantRef | None]:
    """``_filename``, or a variant wheel's parts (PEP 825: one part more, its label) with its
    label; ``ValueError`` for a name that is neither."""
    try:
        return _filename(filename, ctx) + (None,)
    except ValueError:
        found = variant_wheel(filename)
        if found is None:
            raise
        ctx.has_variants = True
        return found.name, found.version, found.tags, True, VariantRef(label=found.label)


def _remember_variants_json(filename: str, link: str, sha256: str | None, ctx: _Context) -> None:
    """A release's ``variants.json`` linked on this page, for its variant wheels (``_split_variants``)."""
    release = variants_json_release(filename)
    if release is None:
        ctx.warn(f"{_clip(filename)}: not a variants.json name (PEP 825: NAME-VERSION-variants.json); skipped")
        return
    digest = sha256 if sha256 is not None and _SHA256_HEX.fullmatch(sha256) else None
    ctx.variants_json.setdefault(release, (link, digest.lower() if digest else None))


def _unique(files: list[IndexFile]) -> Iterable[IndexFile]:
    """The files, each once, in order (a page may link one file twice). Equal files have the same
    URL, so a page whose URLs all differ (nearly every page) has none to drop: no file is hashed."""
    return files if len({f.url for f in files}) == len(files) else dict.fromkeys(files)


def _split_variants(files: Iterable[IndexFile], ctx: _Context) -> tuple[tuple[IndexFile, ...], tuple[IndexFile, ...]]:
    """(the plain files, the variant wheels, each given its release's variants.json linked here);
    a page without variant wheels (nearly all) as it is."""
    if not ctx.has_variants:
        return tuple(files), ()
    plain: list[IndexFile] = []
    variants: list[IndexFile] = []
    for f in files:
        if f.variant is None:
            plain.append(f)
            continue
        url, digest = ctx.variants_json.get((f.name, f.version), (None, None))
        variants.append(replace(f, variant=VariantRef(label=f.variant.label, json_url=url, json_sha256=digest)))
    return tuple(plain), tuple(variants)


def _remember(filename: str, name: NormalizedName, version: Version, tags: frozenset[Tag], ctx: _Context) -> frozenset[Tag]:
    """Keep a plain wheel filename's parsed parts for the rows after it; the shared tag set."""
    name_part, version_part, tag_part = filename[:-4].split("-", 2)
    ctx.names[name_part] = name
    ctx.versions[version_part] = version
    return ctx.tag_sets.setdefault(tag_part, tags)


def _download_path(link: str) -> str | None:
    """The path of an http(s)/file URL (no query), None for other schemes; cheaper than urlsplit."""
    scheme, sep, rest = link.partition("://")
    if not sep or scheme.lower() not in _SCHEMES:
        return None
    return rest.partition("#")[0].partition("?")[0].partition("/")[2]


def _fragment_sha256(fragment: str) -> str | None:
    """The ``sha256=<hex>`` parameter of a URL fragment, among others (``&subdirectory=x``), or None."""
    for param in fragment.split("&"):
        algo, sep, digest = param.partition("=")
        if sep and algo.strip().lower() == "sha256":
            return digest
    return None


def _sha256(value: object, filename: str, what: str, ctx: _Context) -> str | None:
    if isinstance(value, str) and len(digest := value.strip()) == 64 and _SHA256_HEX.fullmatch(digest):
        return digest.lower()
    ctx.warn(f"{_clip(filename)}: {what} {_clip(str(value))!r} is not 64 hex digits; ignored")
    return None


def _requires_python(value: str | None, filename: str, ctx: _Context) -> str | None:
    """The specifier as written, or None (with a warning) when it does not parse, as pip does."""
    value = (value or "").strip()
    if not value:
        return None
    if value not in ctx.specifiers:
        try:
            SpecifierSet(value)
            ctx.specifiers[value] = True
        except InvalidSpecifier:
            ctx.specifiers[value] = False
    if not ctx.specifiers[value]:
        ctx.warn(f"{_clip(filename)}: invalid requires-python {_clip(value)!r}; ignored")
        return None
    return value


def _clip(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
