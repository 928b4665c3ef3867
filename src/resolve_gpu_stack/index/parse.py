"""Pure parsers: index pages (PEP 503 HTML, PEP 691 JSON, PyTorch's and FlashInfer's dialects),
wheel/sdist filenames, core metadata and its Requires-Dist lines. No I/O, no global caches: what
is worth remembering across pages (a wheel tag part's tags, a Requires-Dist line) goes in a
``ParseMemo`` its caller owns (the ``Finder``).

Error contract (the same for every call):

* ``parse_page`` returns a ``ParsedPage`` for anything that is, or could be, an HTML index page,
  however broken: rows it cannot use (bad filename, not a distribution, bad digest, unsafe path,
  ...) are skipped with a line in ``ParsedPage.warnings``, and undecodable bytes are replaced
  (with a warning). It raises ``CrawlError(page.url, cause)`` only for bodies that are clearly not
  an index page: binary content (NUL bytes; PDF, zip, gzip or PNG signatures), an XML error
  document (S3's ``<Error>``), and JSON (declared or sniffed) that does not parse, is not an
  object with a ``files`` (or ``projects``) list, or declares an API major version other than 1.
* ``parse_metadata`` raises ``CrawlError(source, cause)`` for anything it cannot use.
* ``parse_filename`` raises ``ValueError`` naming the filename and what is wrong with it.
* ``ParseMemo.requires_dist`` returns None for a line that does not parse.

No other exception escapes. URLs in results and messages never carry ``user:password@``.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple
from urllib.parse import unquote

from packaging.utils import canonicalize_name

from ..errors import CrawlError
from ..model import IndexFile, IndexPage, ParsedPage, index_file
from . import htmlfast
from .coremeta import core_metadata_fields as core_metadata_fields
from .metadata import MAX_METADATA_BYTES as MAX_METADATA_BYTES
from .metadata import ParseMemo as ParseMemo
from .metadata import RequiresDist as RequiresDist
from .metadata import parse_metadata as parse_metadata
from .metadata import parse_requires_dist as parse_requires_dist
from .pagejoin import join, redact
from .pagerows import MAX_WARNINGS as MAX_WARNINGS
from .pagerows import RowFilter as RowFilter
from .pagerows import (
    _clip,
    _Context,
    _dist_filename,
    _download_path,
    _file_kind,
    _fragment_sha256,
    _join_redacted,
    _remember_variants_json,
    _requires_python,
    _sha256,
    _split_variants,
    _unique,
)
from .pagerows import parse_filename as parse_filename
from .variants import is_variants_json

PEP691_JSON = "application/vnd.pypi.simple.v1+json"

_BINARY_SIGNATURES = {
    b"%PDF-": "a PDF document",
    b"PK\x03\x04": "a zip archive",
    b"\x1f\x8b": "gzip-compressed data",
    b"\x89PNG": "a PNG image",
}
_UNTESTED = re.compile(r"\(\s*untested\s*\)", re.I)
_XML_ERROR = re.compile(r"\s*(?:<\?xml[^>]{0,200}>\s*)?<Error>(?:.{0,2000}?<Code>([^<]{0,100})</Code>)?", re.S)


# -- public API ---------------------------------------------------------------------------------
def parse_page(
    page: IndexPage | None,
    *,
    index: str,
    only: Collection[str] | None = None,
    keep: RowFilter | None = None,
    memo: ParseMemo | None = None,
) -> ParsedPage:
    """Parse one index page into the files it offers and the sub-directories it lists.

    ``page is None`` (the index answered 404) gives an empty page with ``url == ""``. The body
    is read as PEP 691 JSON when the content type mentions ``json`` or the body starts with
    ``{``; a body declared as JSON that starts with ``<`` is read as HTML. Every href is resolved
    with ``urljoin(page.url, href)`` and keeps the server's spelling (``%2B`` or ``+``); the
    ``#sha256=`` fragment moves to ``IndexFile.sha256``. ``subdirs`` are directory links below the
    page, relative to it (``urljoin(page.url, subdir)`` gives the directory's URL); ``../`` and
    hidden entries such as ``.git/`` are left out. See the module docstring for errors.

    ``only`` (filenames): keep just the files named there, and no ``subdirs``. Every other row is
    skipped before any per-row work (no URL join, no filename parse, no warning), so looking a
    few files up on a page of thousands costs little more than reading the page; the rows kept
    are read exactly as without ``only``.

    ``keep`` (a target's ``RowFilter``): the rows it passes over (wheels for other platforms and
    Pythons; sdists, unless asked for) are skipped the same way, before any per-row work and
    without a warning: a popular page's rows are mostly of no use to one target. Directory links
    and filenames without a plain tag part are read as always.

    ``memo``: the tags of each wheel tag part seen on earlier pages (files with the same tags then
    hold the same frozenset: a tag fit's memo matches them by identity); without one, per page.
    """
    if page is None:
        return ParsedPage(url="")
    ctx = _Context(redact(page.url), index, only, keep=keep, memo=memo)
    text = _decode(page, ctx)
    if _reads_as_json(text.lstrip("\ufeff \t\r\n")[:1], page.content_type):
        return _parse_json(text, ctx, memo)
    return _parse_html(text, ctx)


def is_json_page(page: IndexPage) -> bool:
    """Whether ``page`` reads as PEP 691 JSON: ``parse_page``'s rule, on its first raw bytes."""
    return _reads_as_json(page.content[:64].lstrip(b"\xef\xbb\xbf \t\r\n")[:1].decode("latin-1"), page.content_type)


def _reads_as_json(head: str, content_type: str) -> bool:
    """A body whose first character is ``head`` is JSON when that is ``{``, or when its content type
    says JSON and it does not start with ``<``."""
    mime = content_type.partition(";")[0].strip().lower()
    return head == "{" or ("json" in mime and head != "<")


# -- decoding -----------------------------------------------------------------------------------


def _decode(page: IndexPage, ctx: _Context) -> str:
    raw = page.content
    for signature, what in _BINARY_SIGNATURES.items():
        if raw.startswith(signature):
            raise CrawlError(ctx.url, f"the server answered {what}, not an index page")
    charset = _charset(page.content_type, raw)
    try:
        text = raw.decode(charset)
    except (UnicodeError, LookupError):
        text = raw.decode("utf-8", "replace")
        ctx.warn(f"the page is not valid {_clip(charset, 40)}; undecodable bytes were replaced")
    if "\x00" in text:
        raise CrawlError(ctx.url, "the server answered binary content (NUL bytes), not an index page")
    return text


def _charset(content_type: str, raw: bytes) -> str:
    if raw.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    for param in content_type.split(";")[1:]:
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset" and value.strip(" \"'"):
            return value.strip(" \"'")
    return "utf-8"


# -- HTML ---------------------------------------------------------------------------------------
@dataclass(slots=True)
class _Anchor:
    """An ``<a>`` of an HTML page being read: its attributes, its text and the text after it."""

    attrs: dict[str, str | None]
    text: list[str] = field(default_factory=list)
    tail: list[str] = field(default_factory=list)  # text between </a> and the next tag


class _AnchorCollector:
    """Collects ``<a>`` tags (attributes, text, the text right after them), title, h1, base, meta,
    from the handler calls of ``htmlfast`` or ``html.parser``."""

    def __init__(self) -> None:
        self.anchors: list[_Anchor] = []
        self.headings: dict[str, list[str]] = {}
        self.base: str | None = None
        self.api_version: str | None = None
        self.status: str | None = None  # PEP 792: <meta name="pypi:project-status">
        self.status_reason: str | None = None
        self._open: _Anchor | None = None
        self._after: _Anchor | None = None
        self._heading: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._after = None
        if tag == "a":
            self._open = _Anchor(dict(attrs))
            self.anchors.append(self._open)
        elif tag in ("title", "h1") and tag not in self.headings:
            self._heading = tag
            self.headings[tag] = []
        elif tag == "base" and self.base is None:
            self.base = dict(attrs).get("href")
        elif tag == "meta":
            values = dict(attrs)
            if values.get("name") == "pypi:repository-version":
                self.api_version = values.get("content")
            elif values.get("name") == "pypi:project-status":
                self.status = values.get("content")
            elif values.get("name") == "pypi:project-status-reason":
                self.status_reason = values.get("content")

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._open is not None:
            self._after, self._open = self._open, None
        elif tag == self._heading:
            self._heading = None

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._open.text.append(data)
        elif self._after is not None:
            self._after.tail.append(data)
        if self._heading is not None:
            self.headings[self._heading].append(data)


def _collect(text: str, ctx: _Context) -> _AnchorCollector:
    """The page's anchors, headings, base and meta: plain HTML read by ``htmlfast``, the rest by
    ``html.parser`` (the same handler calls either way)."""
    collector = _AnchorCollector()
    plain = htmlfast.tokens(text)
    if plain is not None:
        for kind, value, attrs in plain:
            if kind == "data":
                collector.handle_data(value)
            elif kind == "start":
                collector.handle_starttag(value, attrs or [])
            else:
                collector.handle_endtag(value)
        return collector
    try:
        read_with_html_parser(collector, text)
    except Exception as exc:  # noqa: BLE001 - html.parser raises AssertionError & co. on some soup
        ctx.warn(f"the HTML could not be read to the end ({type(exc).__name__}); later links are missing")
    return collector


def read_with_html_parser(collector: _AnchorCollector, text: str) -> None:
    """Feed ``text`` to ``html.parser`` with ``collector``'s handlers (what ``htmlfast`` leaves:
    imported then, not on the hot path). Soup may make it raise."""
    from html.parser import HTMLParser  # soup only (htmlfast reads the rest): +7 ms on a plain resolve

    parser = HTMLParser(convert_charrefs=True)
    parser.handle_starttag = collector.handle_starttag  # type: ignore[method-assign]
    parser.handle_endtag = collector.handle_endtag  # type: ignore[method-assign]
    parser.handle_data = collector.handle_data  # type: ignore[method-assign]
    parser.feed(text)
    parser.close()


def _parse_html(text: str, ctx: _Context) -> ParsedPage:
    _refuse_xml_error(text, ctx)
    collector = _collect(text, ctx)
    _check_api_version(collector.api_version, ctx.url)
    if text.strip() and "<" not in text:
        ctx.warn("the page has no HTML markup; no links found")
    base = redact(join(ctx.url, collector.base) or ctx.url) if collector.base else ctx.url
    files, subdirs = _anchors_read(collector.anchors, base, ctx)
    title_parts = collector.headings.get("title") or collector.headings.get("h1") or []
    plain, variants = _split_variants(_unique(files), ctx)
    return ParsedPage(
        url=ctx.url,
        files=plain,
        variants=variants,
        subdirs=tuple(dict.fromkeys(subdirs)),
        warnings=ctx.warnings(),
        title=" ".join("".join(title_parts).split()) or None,
        status=_status(collector.status),
        status_reason=_reason(collector.status, collector.status_reason),
    )


def _refuse_xml_error(text: str, ctx: _Context) -> None:
    """An S3-style ``<Error>`` document is an error, not an empty page."""
    error = _XML_ERROR.match(text)
    if error:
        code = f" ({error.group(1).strip()})" if error.group(1) else ""
        raise CrawlError(ctx.url, f"the server answered an XML error document{code}, not an index page", hint="index URLs end with a slash; check the URL")


def _anchors_read(anchors: list[_Anchor], base: str, ctx: _Context) -> tuple[list[IndexFile], list[str]]:
    """(the files, the sub-directories) the anchors link to; with ``ctx.only``, its files alone;
    with ``ctx.keep``, the anchors it passes over left unread."""
    if ctx.only is not None:
        return _named_files(anchors, base, ctx, ctx.only), []
    files: list[IndexFile] = []
    subdirs: list[str] = []
    keep = ctx.keep
    for anchor in anchors:
        if keep is not None and keep.passes_over(_href_name(anchor)):
            continue
        found = _read_anchor(anchor, base, ctx)
        if isinstance(found, IndexFile):
            files.append(found)
        elif found is not None:
            subdirs.append(found)
    return files, subdirs


def _named_files(anchors: list[_Anchor], base: str, ctx: _Context, only: frozenset[str]) -> list[IndexFile]:
    """The files among ``only`` the anchors link to; the other anchors are not read."""
    return [found for a in anchors if _may_name(a, only) and isinstance(found := _read_anchor(a, base, ctx), IndexFile) and found.filename in only]


_URL_TAB_NEWLINE = {ord("\t"): None, ord("\r"): None, ord("\n"): None}


def _may_name(a: _Anchor, only: frozenset[str]) -> bool:
    """Whether an anchor may be a file in ``only``: its href's last segment, or its text (the
    filename ``_read_anchor`` would take), names one. Never false for a row that does."""
    last = _href_name(a)
    if last is None:
        return True  # "?query": the page's own last segment; let the full read decide
    return last in only or "".join(a.text).strip() in only


def _href_name(a: _Anchor) -> str | None:
    """The last segment of an anchor's href, unquoted (the filename ``_read_anchor`` takes first);
    None when the href has no path."""
    href = (a.attrs.get("href") or "").strip().translate(_URL_TAB_NEWLINE)  # as urljoin drops them
    path = href.partition("#")[0].partition("?")[0]
    return unquote(path.rpartition("/")[2]) if path else None


def _read_anchor(a: _Anchor, base: str, ctx: _Context) -> IndexFile | str | None:
    """An ``IndexFile``, a sub-directory, or None (not a link we use; warned when worth it)."""
    href = (a.attrs.get("href") or "").strip()
    if not href or href.startswith("#"):
        return None
    joined = _join_redacted(base, href, ctx)
    if joined is None:
        ctx.warn(f"unreadable link {_clip(redact(href))!r}; skipped")
        return None
    link, _, fragment = joined.partition("#")
    path = _download_path(link)
    if path is None:
        return None  # mailto:, javascript:, ... are not downloads
    last = path.rpartition("/")[2]
    if not last:
        return _subdir(ctx.url, link.partition("?")[0])
    filename = unquote(last)
    kind = _file_kind(filename)
    if kind is None:
        text = "".join(a.text).strip()
        if _file_kind(text) != "dist":
            return _subdir(ctx.url, link.partition("?")[0])  # slash-less directory ("torch2.5")
        filename, kind = text, "dist"  # e.g. /download?id=3 with the filename as the link text
    if kind != "dist":
        if is_variants_json(filename):
            _remember_variants_json(filename, link, _fragment_sha256(fragment), ctx)
        else:
            ctx.warn(f"{_clip(filename)}: not a wheel or sdist; skipped")
        return None
    return _html_file(a, filename, link, fragment, ctx)


def _subdir(page_url: str, link: str) -> str | None:
    """``link`` relative to the page's directory, when it is below it and not hidden (``.git/``)."""
    here = page_url.partition("#")[0].partition("?")[0].rpartition("/")[0] + "/"
    if not link.startswith(here) or link == here:
        return None  # "../", another site, the page itself
    rel = link[len(here) :]
    return None if rel.startswith(".") else rel


def _html_file(a: _Anchor, filename: str, link: str, fragment: str, ctx: _Context) -> IndexFile | None:
    try:
        name, version, tags, is_wheel, variant = _dist_filename(filename, ctx)
    except ValueError as exc:
        ctx.warn(f"{exc}; skipped")
        return None
    attrs = a.attrs
    digest = _fragment_sha256(fragment)
    has_metadata, metadata_sha256 = _html_metadata(attrs, filename, ctx)
    return index_file(
        filename,
        link,
        name,
        version,
        tags,
        is_wheel,
        ctx.index,
        _sha256(digest, filename, "sha256", ctx) if digest is not None else None,
        None,  # size: not in the HTML dialect
        _requires_python(attrs.get("data-requires-python"), filename, ctx),
        (attrs["data-yanked"] or "") if "data-yanked" in attrs else None,
        metadata_sha256,
        has_metadata,
        (attrs.get("data-upload-time") or "").strip() or None,
        _is_untested(attrs, a.tail),
        variant,
    )


def _html_metadata(attrs: dict[str, str | None], filename: str, ctx: _Context) -> tuple[bool, str | None]:
    """PEP 658/714: ``data-core-metadata`` wins over the legacy ``data-dist-info-metadata``."""
    for key in ("data-core-metadata", "data-dist-info-metadata"):
        if key in attrs:
            value = (attrs[key] or "true").strip()
            if value.lower() == "false":
                return False, None
            algo, sep, digest = value.partition("=")
            if sep and algo.lower() == "sha256":
                return True, _sha256(digest, filename, f"{key} sha256", ctx)
            return True, None
    return False, None


def _is_untested(attrs: dict[str, str | None], tail: list[str]) -> bool:
    """FlashInfer nightly ``--untested`` rows: ``data-untested="true"`` and/or ``(untested)``."""
    if "data-untested" in attrs and (attrs["data-untested"] or "true").strip().lower() != "false":
        return True
    return bool(tail) and _UNTESTED.search("".join(tail)) is not None


# -- JSON (PEP 691) -----------------------------------------------------------------------------
def _parse_json(text: str, ctx: _Context, memo: ParseMemo | None) -> ParsedPage:
    data = _json_object(text, ctx, memo)
    if data.files is None and isinstance(data.projects, list):  # PEP 691 root: a directory listing
        return ParsedPage(url=ctx.url, subdirs=_json_projects(data.projects) if ctx.only is None else (), warnings=ctx.warnings())
    if data.files is None:
        raise CrawlError(
            ctx.url, "the JSON has no 'files' list; it is not a PEP 691 project page", hint="the URL may be a JSON API endpoint rather than the simple index"
        )
    rows = _json_rows(data, ctx.only, ctx.keep)
    if rows is None:  # a row kept that msgspec does not decode (a number beyond its range): the page read whole
        rows = _json_rows(_json_whole(text, ctx), ctx.only, ctx.keep) or []
    found = (_json_file(entry, i, ctx) for i, entry in rows)
    status = data.project_status if isinstance(data.project_status, dict) else {}
    plain, variants = _split_variants(_unique([f for f in found if f is not None]), ctx)
    return ParsedPage(
        url=ctx.url,
        files=plain,
        variants=variants,
        warnings=ctx.warnings(),
        title=_json_text(data.name),
        status=_status(_json_text(status.get("status"))),
        status_reason=_reason(_json_text(status.get("status")), _json_text(status.get("reason"))),
    )


PROJECT_STATUSES = ("active", "archived", "quarantined", "deprecated")  # PEP 792


def _status(status: str | None) -> str | None:
    """A page's PEP 792 status, lower case; ``active`` and none are None. A status the PEP does not
    name is kept as given (an index may add one: said, never acted on)."""
    text = (status or "").strip().lower()
    return None if not text or text == "active" else text[:40]


def _reason(status: str | None, reason: str | None) -> str | None:
    """The status's reason, on one line, clipped; None without a status."""
    return (" ".join((reason or "").split())[:300] or None) if _status(status) is not None else None


def _json_projects(projects: list[Any]) -> tuple[str, ...]:
    """A PEP 691 root's projects as sub-directories (``name/``)."""
    names = (p.get("name") for p in projects if isinstance(p, dict))
    return tuple(dict.fromkeys(canonicalize_name(n) + "/" for n in names if isinstance(n, str) and n.strip()))


def _json_rows(data: _JsonTop, only: Collection[str] | None, keep: RowFilter | None) -> list[tuple[int, object]] | None:
    """The rows to read, numbered and decoded; with ``only`` (or ``keep``), every other row (every
    row it passes over) is skipped on its filename alone, before it is decoded. None when a row
    left raw does not decode on its own (``jsonrows.decode_rows``)."""
    files = data.files
    if files is None:
        return []
    positions: Sequence[int] = range(len(files))
    if only is not None or keep is not None:
        names = data.filenames if data.filenames is not None else [_text_or_none(data.filename(row)) for row in files]
        if keep is not None:
            positions = keep.kept(names)
        if only is not None:
            positions = [i for i in positions if names[i] in only]
    return data.decode(files, positions)


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _json_text(value: object) -> str | None:
    """A JSON string value, stripped; None for anything else or an empty one."""
    return (value.strip() or None) if isinstance(value, str) else None


def _decoded_filename(row: object) -> object:
    return row.get("filename") if isinstance(row, dict) else None


def _decoded(rows: list[Any], positions: Sequence[int]) -> list[tuple[int, object]]:
    return [(i, rows[i]) for i in positions]


class _JsonTop(NamedTuple):
    """A PEP 691 page's top level; its rows, and how to read a row's filename and the rows kept
    (decoded already, or left raw by ``jsonrows`` until the filter keeps them)."""

    meta: object
    name: object
    files: list[Any] | None
    projects: object
    project_status: object = None
    filenames: list[str | None] | None = None  # each row's filename, read ahead (``jsonrows``)
    filename: Callable[[Any], object] = _decoded_filename
    decode: Callable[[list[Any], Sequence[int]], list[tuple[int, object]] | None] = _decoded


FAST_MIN = 2**20  # bytes: a page this large is decoded row by row (``jsonrows``; 67% of today's SGLang closure's 76 MB of pages)


def _json_object(text: str, ctx: _Context, memo: ParseMemo | None) -> _JsonTop:
    """The page's JSON object, its API version checked. A page of ``FAST_MIN`` bytes or more is
    decoded row by row (``jsonrows``), and so is every page after one such in the crawl (``memo``:
    ``msgspec`` is imported then); the rest and what that refuses whole by ``json``, whose errors
    say what is wrong."""
    rowwise = len(text) >= FAST_MIN or (memo is not None and memo.rowwise)
    data = _json_rowwise(text) if rowwise else None
    if rowwise and memo is not None:
        memo.rowwise = True
    if data is None:
        data = _json_whole(text, ctx)
    meta = data.meta
    _check_api_version(meta.get("api-version") if isinstance(meta, dict) else None, ctx.url)
    return data


def _json_rowwise(text: str) -> _JsonTop | None:
    from . import jsonrows  # msgspec: imported with the first large page, not at start-up (+13 ms on a plain resolve)

    top = jsonrows.decode_page(text)
    if top is None:
        return None
    filenames = jsonrows.row_filenames(text) if top[2] is not None else None
    return _JsonTop(*top, filenames=filenames, filename=jsonrows.row_filename, decode=jsonrows.decode_rows)


def _json_whole(text: str, ctx: _Context) -> _JsonTop:
    try:
        whole = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise CrawlError(ctx.url, f"the page is JSON but does not parse: {_clip(str(exc))}") from None
    if not isinstance(whole, dict):
        raise CrawlError(ctx.url, f"the JSON is a {type(whole).__name__}, not a PEP 691 object with 'files'")
    files = whole.get("files")
    return _JsonTop(whole.get("meta"), whole.get("name"), files if isinstance(files, list) else None, whole.get("projects"), whole.get("project-status"))


def _json_file(entry: object, i: int, ctx: _Context) -> IndexFile | None:
    located = _json_location(entry, i, ctx)
    if located is None:
        return None
    entry, filename, joined = located
    get = entry.get
    link, _, fragment = joined.partition("#")
    hashes = get("hashes")
    digest = hashes.get("sha256") if isinstance(hashes, dict) else None
    if digest is None and fragment:
        digest = _fragment_sha256(fragment)
    if filename.endswith(".json") and is_variants_json(filename):
        _remember_variants_json(filename, link, digest if isinstance(digest, str) else None, ctx)
        return None
    try:
        name, version, tags, is_wheel, variant = _dist_filename(filename, ctx)
    except ValueError as exc:
        ctx.warn(f"{exc}; skipped")
        return None
    has_metadata, metadata_sha256 = _json_metadata(entry, filename, ctx)
    size, requires_python = get("size"), get("requires-python")
    return index_file(
        filename,
        link,
        name,
        version,
        tags,
        is_wheel,
        ctx.index,
        _sha256(digest, filename, "sha256", ctx) if digest is not None else None,
        size if type(size) is int and size >= 0 else None,  # not a bool
        _requires_python(requires_python if isinstance(requires_python, str) else None, filename, ctx),
        _json_yanked(get("yanked")),
        metadata_sha256,
        has_metadata,
        _json_text(get("upload-time")),
        False,  # untested: FlashInfer's HTML only
        variant,
    )


def _json_location(entry: object, i: int, ctx: _Context) -> tuple[dict[str, Any], str, str] | None:
    """(the row, its filename, its URL joined and redacted), or None (warned) for a row without them."""
    if not isinstance(entry, dict):
        ctx.warn(f"files[{i}] is not an object; skipped")
        return None
    filename, href = entry.get("filename"), entry.get("url")
    if not isinstance(filename, str) or not isinstance(href, str) or not (stripped := href.strip()):
        ctx.warn(f"files[{i}] lacks a 'filename' or 'url' string; skipped")
        return None
    joined = _join_redacted(ctx.url, stripped, ctx)
    if joined is None or (not joined.startswith("https://") and _download_path(joined) is None):
        ctx.warn(f"{_clip(filename)}: unusable url {_clip(redact(href))!r}; skipped")
        return None
    return entry, filename, joined


def _json_yanked(value: object) -> str | None:
    """PEP 691: a yanked file has a truthy ``yanked`` (``true`` or a reason); ``""`` is not yanked."""
    if isinstance(value, str):
        return value or None
    return "" if value is True else None


def _json_metadata(entry: dict[str, Any], filename: str, ctx: _Context) -> tuple[bool, str | None]:
    """PEP 691/714: ``core-metadata`` (or legacy ``dist-info-metadata``) is a bool or a hash map."""
    for key in ("core-metadata", "dist-info-metadata"):
        value = entry.get(key)
        if value is None:
            continue
        if isinstance(value, bool):
            return value, None
        if isinstance(value, dict):
            digest = value.get("sha256")
            return True, (_sha256(digest, filename, f"{key} sha256", ctx) if digest is not None else None)
        ctx.warn(f"{_clip(filename)}: '{key}' is neither a boolean nor a hash map; ignored")
    return False, None


# -- shared helpers -----------------------------------------------------------------------------


def _check_api_version(value: object, url: str) -> None:
    """PEP 629: refuse a major version we do not know; anything unreadable is ignored."""
    if not isinstance(value, str):
        return
    major = value.strip().partition(".")[0]
    if major.isdigit() and major != "1":
        raise CrawlError(url, f"the index speaks simple-API version {_clip(value, 20)}; only 1.x is supported")
