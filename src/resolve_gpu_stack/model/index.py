"""What an index offers: pages as served, the files they link, a wheel's METADATA."""

from __future__ import annotations

from dataclasses import dataclass

from packaging.tags import Tag
from packaging.utils import NormalizedName
from packaging.version import Version


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexPage:
    """The raw bytes of one index page as served (or replayed)."""

    url: str
    content: bytes
    content_type: str = "text/html"


@dataclass(frozen=True, slots=True, kw_only=True)
class VariantRef:
    """What makes a file a variant wheel (PEP 825, a draft): its label, and the release's
    ``{name}-{version}-variants.json`` linked on the same page (None when the page links none)."""

    label: str
    json_url: str | None = None
    json_sha256: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexFile:
    """One distribution file linked from an index page.

    ``url`` is absolute and keeps the server's spelling (``%2B`` or ``+``); credentials are never
    part of it. ``version`` and ``tags`` come from the filename via ``packaging.utils``.
    """

    filename: str
    url: str
    name: NormalizedName
    version: Version
    tags: frozenset[Tag] = frozenset()  # empty for sdists
    is_wheel: bool = True
    index: str = ""  # logical index name: pytorch | flashinfer | pypi
    sha256: str | None = None
    size: int | None = None
    requires_python: str | None = None
    yanked: str | None = None  # None = not yanked; "" = yanked without a reason
    metadata_sha256: str | None = None  # PEP 658/714 digest of <url>.metadata
    has_metadata: bool = False  # the page advertises a <url>.metadata sidecar
    upload_time: str | None = None  # RFC 3339 as served
    untested: bool = False  # FlashInfer nightly "(untested)" marker
    variant: VariantRef | None = None  # a variant wheel (PEP 825): its label; None for every other file

    @property
    def is_yanked(self) -> bool:
        return self.yanked is not None


_NEW = object.__new__
_SET = object.__setattr__


def index_file(
    filename: str,
    url: str,
    name: NormalizedName,
    version: Version,
    tags: frozenset[Tag],
    is_wheel: bool,
    index: str,
    sha256: str | None,
    size: int | None,
    requires_python: str | None,
    yanked: str | None,
    metadata_sha256: str | None,
    has_metadata: bool,
    upload_time: str | None,
    untested: bool,
    variant: VariantRef | None,
) -> IndexFile:
    """``IndexFile(...)`` of every field, given in order: the same value, for a page parser's loop
    over its rows (1.7 us against the keyword ``__init__``'s 2.8 us, which looks ``__setattr__`` up
    anew for each of the 16 fields; ``tests/model/test_index.py`` holds it to ``IndexFile``'s fields)."""
    file = _NEW(IndexFile)
    _SET(file, "filename", filename)
    _SET(file, "url", url)
    _SET(file, "name", name)
    _SET(file, "version", version)
    _SET(file, "tags", tags)
    _SET(file, "is_wheel", is_wheel)
    _SET(file, "index", index)
    _SET(file, "sha256", sha256)
    _SET(file, "size", size)
    _SET(file, "requires_python", requires_python)
    _SET(file, "yanked", yanked)
    _SET(file, "metadata_sha256", metadata_sha256)
    _SET(file, "has_metadata", has_metadata)
    _SET(file, "upload_time", upload_time)
    _SET(file, "untested", untested)
    _SET(file, "variant", variant)
    return file


@dataclass(frozen=True, slots=True, kw_only=True)
class WheelMetadata:
    """The parts of a wheel's METADATA the resolver needs (requirements kept as strings)."""

    name: NormalizedName
    version: Version
    requires_dist: tuple[str, ...] = ()
    requires_python: str | None = None
    provides_extra: tuple[str, ...] = ()
    # Metadata-Version and Dynamic (PEP 643, core metadata 2.2): what an sdist's PKG-INFO may leave
    # to its build backend (``index/sdist.py``'s ``pkg_info_is_static``)
    metadata_version: str | None = None
    dynamic: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ParsedPage:
    """An index page after parsing: its files, the sub-directories it lists, and what was skipped."""

    url: str
    files: tuple[IndexFile, ...] = ()
    subdirs: tuple[str, ...] = ()  # directory listings ("cu130/", "torch2.5")
    variants: tuple[IndexFile, ...] = ()  # variant wheels (PEP 825, a draft), each with its release's variants.json
    warnings: tuple[str, ...] = ()
    title: str | None = None
    status: str | None = None  # PEP 792 project status ("archived", "quarantined", "deprecated"); None: active
    status_reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PageResponse:
    """What a fetcher returns for a page: the page, or ``page is None`` for a 404."""

    url: str
    page: IndexPage | None
    from_cache: bool = False

    @property
    def found(self) -> bool:
        return self.page is not None
