"""The finder: what each index offers for a package, and what each wheel's metadata says.

It talks to a ``Fetcher`` (HTTP, or a recorded snapshot) and never to HTTP directly, so the
resolver above it can be driven by any source of pages.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from packaging.tags import Tag
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

from ..data.definitions import Definitions, IndexDefinition, PageLocation, RouteContext
from ..errors import CrawlError
from ..model import IndexFile, PageResponse, ParsedPage, WheelMetadata
from .parse import ParseMemo, RequiresDist, RowFilter, is_json_page, parse_metadata, parse_page
from .variants import Properties, VariantsJsonError, read_variants_json

log = logging.getLogger(__name__)


class Fetcher(Protocol):
    """The I/O edge. Implementations: ``net.http.HttpFetcher`` and ``net.snapshot.SnapshotFetcher``.

    ``concurrent_calls``: whether its methods may be called from several threads at once.
    """

    concurrent_calls: bool

    def fetch_pages(self, urls: Sequence[str], *, index: IndexDefinition) -> dict[str, PageResponse]:
        """Fetch index pages (concurrently where possible).

        A 404 is an answer: ``PageResponse(page=None)``. Anything else that is not a usable page
        (unreachable, timeouts after retries, 5xx after retries, a body that is too large) raises
        ``CrawlError`` naming the URL and the cause.
        """
        ...

    def fetch_page_round(self, batches: Sequence[tuple[Sequence[str], IndexDefinition]]) -> dict[str, PageResponse]:
        """The pages of several indexes ((URLs, their index) each) in one round of concurrent
        requests, as ``fetch_pages`` answers each. Asked only of a fetcher with ``concurrent_calls``."""
        ...

    def fetch_metadata(self, files: Sequence[IndexFile]) -> dict[str, bytes]:
        """The ``*.dist-info/METADATA`` bytes of each wheel, keyed by ``file.url``.

        PEP 658 sidecar when the page advertised one (digest verified), else HTTP range reads of
        the zip's central directory and METADATA member, else (server ignores ranges) the whole
        file, said in a warning. Raises ``CrawlError`` / ``IntegrityError``.
        """
        ...

    def close(self) -> None: ...


# A fetcher whose class sets ``concurrent_calls = True`` may be called from several threads at
# once, and reads the pages of several indexes in one round (``fetch_page_round``, on its own
# connections); the provider may then crawl a closure from several threads (the finder is safe for
# that: a page or METADATA file asked for twice at once is fetched once). Other fetchers are only
# ever called from one thread. The finder itself makes no thread (see the README's concurrency model).


def index_by_index(fetcher: Fetcher, batches: Sequence[tuple[Sequence[str], IndexDefinition]]) -> dict[str, PageResponse]:
    """``fetch_page_round`` of a fetcher called from one thread only: one index after another."""
    return {url: resp for urls, index in batches for url, resp in fetcher.fetch_pages(urls, index=index).items()}


@dataclass(frozen=True, slots=True, kw_only=True)
class Offer:
    """A file some index offers for a package, with the page it came from."""

    file: IndexFile
    location: PageLocation


@dataclass(frozen=True, slots=True, kw_only=True)
class PageVisit:
    """What reading one page of a package told us (for notes and the `candidates` command)."""

    location: PageLocation
    found: bool
    files: int = 0
    warnings: tuple[str, ...] = ()
    status: str | None = None  # PEP 792 project status the page gives ("archived", "quarantined", "deprecated")
    status_reason: str | None = None


UNREACHABLE = "unreachable"  # a page's digest in a stored plan made while its optional host was down


class Finder:
    """Reads pages through a fetcher, parses them, applies routing, and memoizes everything: what
    it read, and what parsing it learned (``memo``: wheel tag parts, Requires-Dist lines). One per
    command; the targets it resolves share it (and may be resolved from several threads)."""

    def __init__(self, fetcher: Fetcher, definitions: Definitions) -> None:
        self.fetcher = fetcher
        self.definitions = definitions
        self.memo = ParseMemo()
        self._pages: dict[str, ParsedPage | None] = {}
        self._metadata: dict[str, WheelMetadata] = {}
        self._metadata_errors: dict[str, CrawlError] = {}  # wheel URL -> the error its retries ended in
        self._failed: dict[str, CrawlError] = {}  # page URL -> why it could not be read
        self._failed_on: dict[str, str] = {}  # page URL -> the index it was read from
        self._offers: dict[tuple[NormalizedName, RouteContext, frozenset[Tag] | None, bool], tuple[list[Offer], list[PageVisit]]] = {}
        self._row_filters: dict[tuple[frozenset[Tag], bool], RowFilter] = {}  # (a target's tags, sdists) -> its rows (no target is held)
        self._first_filter: dict[str, tuple[frozenset[Tag], bool]] = {}  # page URL -> the filter it was first read with
        self._page_offer_memo: dict[tuple[NormalizedName, PageLocation], tuple[ParsedPage, list[Offer], list[str]]] = {}
        self._kept: dict[tuple[NormalizedName, Version, tuple[PageLocation, ...]], list[Offer]] = {}  # kept_release's answers, by the pages read
        self._lock = threading.Lock()
        self._inflight: dict[str, threading.Event] = {}  # page or wheel URL being fetched now
        self._answers: dict[str, tuple[PageResponse, str]] = {}  # every page read (and its index), parsed when asked for
        self.page_digests: dict[str, tuple[str, str | None]] = {}  # page URL -> (index, body sha256 | None for 404)
        self.metadata_digests: dict[str, tuple[IndexFile, str]] = {}  # wheel URL -> (file, METADATA sha256)
        self._releases: dict[tuple[str, Version], WheelMetadata] = {}  # (name, version) -> a wheel's METADATA
        # (page URL, file names or a wheel tag filter) -> the rows of it they keep (``listed``, ``offers``)
        self._subsets: dict[tuple[str, tuple[str, frozenset[str] | tuple[frozenset[Tag], bool]]], ParsedPage | None] = {}
        self._sources: dict[NormalizedName, IndexFile] = {}  # --build 'NAME @ URL': the tree's archive, the package's only file
        self._variant_docs: dict[tuple[str, str], dict[str, Properties] | str] = {}  # (variants.json URL, sha256) -> labels' properties, or why not

    def add_source(self, file: IndexFile, metadata: WheelMetadata) -> None:
        """A source tree fetched at the edge (``--build 'NAME @ URL'``): from now on the only file
        offered for its package, with the metadata read from the tree (no index is asked)."""
        with self._lock:
            self._sources[file.name] = file
            self._metadata[file.url] = metadata
            self._offers = {k: v for k, v in self._offers.items() if k[0] != file.name}

    # -- pages -------------------------------------------------------------------------------
    def prefetch(self, names: Iterable[str], ctx: RouteContext) -> None:
        """Fetch the pages of several packages at once: one round of concurrent requests, every
        index at once when the fetcher allows it (``concurrent_calls``). Prefetching only warms up:
        a page that cannot be read is remembered and raises (without another attempt) when it is
        asked for, where the caller knows whether that page is required."""
        try:
            self._prefetch(names, ctx)
        except CrawlError as exc:
            log.debug("prefetch: %s", exc)

    def _prefetch(self, names: Iterable[str], ctx: RouteContext) -> None:
        by_index: dict[str, list[str]] = {}
        for name in names:
            for loc in self.definitions.pages_for(name, ctx):
                if loc.url not in self._answers:
                    by_index.setdefault(loc.index, []).append(loc.url)
        self._read_all([(sorted(set(urls)), self.definitions.indexes[index]) for index, urls in by_index.items()])

    def _read_all(self, batches: Sequence[tuple[Sequence[str], IndexDefinition]]) -> None:
        """Read the pages of several indexes: in one round when the fetcher takes calls from several
        threads (it runs them on its own connections: the finder makes no thread), else one index
        after another."""
        if len(batches) > 1 and self.fetcher.concurrent_calls:
            self._read(batches)
            return
        for batch in batches:
            self._read([batch])

    def _read(self, batches: Sequence[tuple[Sequence[str], IndexDefinition]]) -> None:
        """Read the pages of ``batches`` ((URLs, their index) each) not read yet; a page another
        thread is reading is waited for, not asked again. A page is kept as read and parsed when
        asked for (``page``): then only the rows its asker can use."""
        index_of = {url: index for urls, index in batches for url in urls if url not in self._answers}
        self._raise_failed(index_of)
        mine, others = self._claim("page ", index_of, self._answers)
        try:
            if mine:
                wanted = {url: index_of[url] for url in mine}
                self._keep(self._fetch(wanted), wanted)
        finally:
            self._release("page ", mine)
        for event in others:
            event.wait()
        missing = self._unread(batches) if others else []
        if missing:  # another thread's read failed: read them here, for the real error
            self._read(missing)

    def _raise_failed(self, urls: Iterable[str]) -> None:
        """The error a page of ``urls`` already ended in (its retries are spent), raised again."""
        failed = next((self._failed[url] for url in urls if url in self._failed), None)
        if failed is not None:
            raise failed.with_traceback(None)  # an old traceback holds an earlier target's frames

    def _unread(self, batches: Sequence[tuple[Sequence[str], IndexDefinition]]) -> list[tuple[Sequence[str], IndexDefinition]]:
        """``batches`` less the pages read (parsed or not)."""
        out: list[tuple[Sequence[str], IndexDefinition]] = []
        for urls, index in batches:
            left = [u for u in urls if u not in self._answers]
            if left:
                out.append((left, index))
        return out

    def _fetch(self, wanted: Mapping[str, IndexDefinition]) -> dict[str, PageResponse]:
        """The fetcher's answers for ``wanted`` (URL -> index): one call, or one round of several
        indexes (``Fetcher.fetch_page_round``). A page that cannot be read is remembered."""
        by_index: dict[str, tuple[list[str], IndexDefinition]] = {}
        for url, index in wanted.items():
            by_index.setdefault(index.name, ([], index))[0].append(url)
        try:
            if len(by_index) > 1:
                return self.fetcher.fetch_page_round(list(by_index.values()))
            urls, index = next(iter(by_index.values()))
            return self.fetcher.fetch_pages(urls, index=index)
        except CrawlError as exc:
            if exc.url in wanted:
                self._failed[exc.url] = exc
                self._failed_on[exc.url] = wanted[exc.url].name
            raise

    def _keep(self, responses: Mapping[str, PageResponse], wanted: Mapping[str, IndexDefinition]) -> None:
        """Digest each answer and keep it, to compare and to parse when asked for."""
        for url, index in wanted.items():
            resp = responses.get(url)
            if resp is None:
                raise CrawlError(url, "the fetcher returned no answer for this page")
            digest = hashlib.sha256(resp.page.content).hexdigest() if resp.page is not None else None
            self.page_digests[url] = (index.name, digest)
            self._answers[url] = (resp, index.name)

    def _claim(self, kind: str, keys: Iterable[str], done: Mapping[str, object]) -> tuple[list[str], list[threading.Event]]:
        """Split ``keys`` into those this thread fetches and events of those another thread is fetching."""
        mine: list[str] = []
        others: list[threading.Event] = []
        with self._lock:
            for key in dict.fromkeys(keys):
                if key in done:
                    continue
                event = self._inflight.get(kind + key)
                if event is None:
                    self._inflight[kind + key] = threading.Event()
                    mine.append(key)
                else:
                    others.append(event)
        return mine, others

    def _release(self, kind: str, keys: Iterable[str]) -> None:
        with self._lock:
            for key in keys:
                event = self._inflight.pop(kind + key, None)
                if event is not None:
                    event.set()

    def page(self, location: PageLocation, *, tags: frozenset[Tag] | None = None, sdists: bool = True) -> ParsedPage | None:
        """The parsed page, or None when the index answered 404. ``tags`` (``offers``): of a JSON page,
        only the wheels carrying one of them, and its sdists unless not ``sdists`` (PyPI's pages of
        popular packages are mostly other platforms' rows, and decoding the JSON is the cheap part).
        The page is read whole instead, once, when it is HTML (tokenizing its markup is most of its
        cost) or a second filter asks for it (a fleet's targets): later targets share that read and
        its offers."""
        url = location.url
        if tags is not None and url not in self._pages:
            resp, _ = self._answer(location)
            key = (tags, sdists)
            if resp.page is not None and is_json_page(resp.page) and self._first_filter.setdefault(url, key) == key:
                keep = self._row_filters.get(key) or self._row_filters.setdefault(key, RowFilter(tags, sdists=sdists))
                return self._subset(location, ("rows", key), keep=keep)
        if url not in self._pages:
            resp, index = self._answer(location)
            self._pages[url] = parse_page(resp.page, index=index, memo=self.memo) if resp.page is not None else None
        return self._pages[url]

    def _answer(self, location: PageLocation) -> tuple[PageResponse, str]:
        """The answer read for the page at ``location`` (read now if it was not), and its index."""
        if location.url not in self._answers:
            self._read([([location.url], self.definitions.indexes[location.index])])
        return self._answers[location.url]

    def _subset(
        self,
        location: PageLocation,
        key: tuple[str, frozenset[str] | tuple[frozenset[Tag], bool]],
        *,
        only: frozenset[str] | None = None,
        keep: RowFilter | None = None,
    ) -> ParsedPage | None:
        """The rows of the page at ``location`` that ``only`` / ``keep`` keep (``key``: which,
        and its value), parsed once per key; all of it when it was parsed whole. None for a 404."""
        if location.url in self._pages:
            return self._pages[location.url]
        subset = (location.url, key)
        if subset not in self._subsets:
            resp, index = self._answer(location)
            self._subsets[subset] = parse_page(resp.page, index=index, only=only, keep=keep, memo=self.memo) if resp.page is not None else None
        return self._subsets[subset]

    def unchanged(self, pages: Iterable[tuple[str, str, str | None]], metadata: Iterable[tuple[IndexFile, str]]) -> bool:
        """Whether every page ``(index, url, sha256 or None for 404)`` still has that body, asking
        the index again (conditional requests, one round for all), and every wheel's METADATA
        still has that sha256 (from the fetcher's cache, verified there). What is read here is
        kept: parsed later if the resolver asks for it."""
        wanted: dict[str, str | None] = {}
        by_index: dict[str, list[str]] = {}
        down: list[tuple[str, str]] = []
        for index, url, digest in pages:
            if index not in self.definitions.indexes:
                return False
            if digest == UNREACHABLE:
                down.append((index, url))
                continue
            wanted[url] = digest
            if url not in self.page_digests:
                by_index.setdefault(index, []).append(url)
        for index, url in down:  # still down: the plan made without it holds; answering now: it does not
            try:
                self._read_all([([url], self.definitions.indexes[index])])
            except CrawlError as exc:
                if not exc.unreachable:
                    return False
                continue
            return False
        self._read_all([(urls, self.definitions.indexes[index]) for index, urls in by_index.items()])
        if any(self.page_digests[url][1] != digest for url, digest in wanted.items()):
            return False
        files = list(metadata)
        self.prefetch_metadata(f for f, _ in files)
        return all(self.metadata_digests.get(f.url, (f, None))[1] == digest for f, digest in files)

    def offers(self, name: str, ctx: RouteContext, *, tags: frozenset[Tag] | None = None, sdists: bool = True) -> tuple[list[Offer], list[PageVisit]]:
        """Every file the owning index(es) offer for ``name``, and what each page said. ``tags``
        (a target's): wheels carrying none of them, and sdists unless ``sdists``, may be left out
        unread (``page``; ``parse_page``'s ``keep``: a popular page's rows are mostly of no use to
        one target); the caller judges every file it is given as before.

        Memoized per (name, context, filter): several targets locked through one finder share it,
        and what a page said is logged once."""
        wanted = canonicalize_name(name)
        key = (wanted, ctx, tags, sdists)
        known = self._offers.get(key)
        if known is None:
            known = self._offers[key] = self._read_offers(wanted, ctx, tags, sdists)
        return list(known[0]), list(known[1])

    def kept_release(self, name: str, version: Version, ctx: RouteContext) -> list[Offer]:
        """The files of release ``version`` of ``name`` where its ``kept`` routes say it was
        published (PyPI's torch, which has no +cuNNN label): read to know a kept release (its
        METADATA, its exports), never offered as a candidate. Empty when no route says so, or when
        the page cannot be read (said in the log: the kept release is then known only as declared)."""
        wanted = canonicalize_name(name)
        # by the pages read, not the context: the kept torch is known (resolver/kept.py) and planned
        # (resolver/resolve.py) under two contexts that route to the same page, read and warned of once
        locations = tuple(self.definitions.pages_for(wanted, ctx, kept=True))
        key = (wanted, version, locations)
        known = self._kept.get(key)
        if known is None:
            known = self._kept[key] = self._read_kept(wanted, version, locations)
        return list(known)

    def _read_kept(self, wanted: NormalizedName, version: Version, locations: tuple[PageLocation, ...]) -> list[Offer]:
        out: list[Offer] = []
        for loc in locations:
            try:
                parsed = self.page(loc)
            except CrawlError as exc:
                log.warning("%s: %s (the kept %s %s is known only as declared)", loc.url, exc.cause, wanted, version)
                continue
            if parsed is not None:
                # a variant wheel is not the kept release as installed (its label is a build of its own)
                out += [o for o in self._page_offers(wanted, loc, parsed)[0] if o.file.version == version and o.file.variant is None]
        return out

    def unreachable_pages(self) -> list[tuple[str, str]] | None:
        """``(index, URL)`` of every page not read because an optional index's host did not answer
        (a plan made without them holds as long as that host stays down); None when a page could not
        be read for another reason, or on an index the plan cannot do without."""
        with self._lock:
            failed = [(self._failed_on.get(url), url, exc) for url, exc in self._failed.items()]
        out: list[tuple[str, str]] = []
        for index, url, exc in failed:
            if index is None or index not in self.definitions.indexes or not self.definitions.indexes[index].optional or not exc.unreachable:
                return None
            out.append((index, url))
        return sorted(out)

    def unreadable(self, name: str, ctx: RouteContext) -> list[tuple[PageLocation, CrawlError]]:
        """The pages of ``name`` on an optional index (``IndexDefinition.optional``) whose host could
        not be reached (``CrawlError.unreachable``: refused, timed out, 5xx after retries, not in
        the snapshot replayed), each with its error; legacy pages are not counted (optional anyway).
        A page whose host answered wrongly (403, garbage) raises. Each page is read once."""
        out: list[tuple[PageLocation, CrawlError]] = []
        for loc in self.definitions.pages_for(name, ctx):
            if loc.route.legacy or not self.definitions.indexes[loc.index].optional:
                continue
            try:
                self._answer(loc)
            except CrawlError as exc:
                if not exc.unreachable:  # the host answered, wrongly (403, garbage): that is an error, said where the page is read
                    raise
                out.append((loc, exc))
        return out

    def _read_offers(self, wanted: NormalizedName, ctx: RouteContext, tags: frozenset[Tag] | None, sdists: bool) -> tuple[list[Offer], list[PageVisit]]:
        locations = self.definitions.pages_for(wanted, ctx)
        source = self._sources.get(wanted)
        if source is not None:
            loc = replace(locations[0], index=source.index, url=source.url)
            return [Offer(file=source, location=loc)], [PageVisit(location=loc, found=True, files=1)]
        self.prefetch([wanted], ctx)
        offers: list[Offer] = []
        visits: list[PageVisit] = []
        for loc in locations:
            try:
                parsed = self.page(loc, tags=tags, sdists=sdists)
            except CrawlError as exc:
                # A legacy page is optional: a mirror on S3-style storage answers 403 for a missing
                # object, so 401/403 there is "not here"; a host that cannot be reached (or a
                # snapshot without the page) says nothing of it either. Both are said as a warning;
                # the plan's note names no cause that differs between a live run and its replay.
                # Required pages raise.
                if exc.unreachable and self.definitions.indexes[loc.index].optional and not loc.route.legacy:
                    # an optional index (flashinfer.toml ``optional``) that cannot be read: what it
                    # alone has is absent; the resolver says so once (resolver/reachability.py)
                    log.info("%s: %s (an optional index; treated as absent)", loc.url, exc.cause)
                    visits.append(PageVisit(location=loc, found=False, warnings=(f"could not be read: {exc.cause}",)))
                    continue
                if not loc.route.legacy:
                    raise
                denied = exc.cause.startswith(("401", "403"))
                (log.warning if denied else log.info)("%s: %s (an optional legacy page; treated as absent)", loc.url, exc.cause)
                answer = f"answered {exc.cause}" if denied else "could not be read"
                visits.append(PageVisit(location=loc, found=False, warnings=(answer,)))
                continue
            if parsed is None:
                visits.append(PageVisit(location=loc, found=False))
                continue
            found, refused = self._page_offers(wanted, loc, parsed)
            offers += found
            warnings = tuple(parsed.warnings) + tuple(refused)
            visits.append(PageVisit(location=loc, found=True, files=len(found), warnings=warnings, status=parsed.status, status_reason=parsed.status_reason))
        return offers, visits

    def _page_offers(self, wanted: NormalizedName, loc: PageLocation, parsed: ParsedPage) -> tuple[list[Offer], list[str]]:
        """What one page offers for ``wanted`` (its route's versions, from hosts its index uses), and
        the files refused (another package's wheel, a foreign host), each said once as a warning.
        Unparsable legacy filenames (old PyPI uploads: .exe, py2.5 sdists) are routine: logged at
        INFO, once per page with a count (an old PyPI page has hundreds). Worked out once per
        (name, page location, parsed page): the targets reading one page whole share it."""
        key = (wanted, loc)
        known = self._page_offer_memo.get(key)
        if known is not None and known[0] is parsed:
            return list(known[1]), list(known[2])
        found, refused = self._offers_of(wanted, loc, parsed)
        self._page_offer_memo[key] = (parsed, found, refused)
        return list(found), list(refused)

    def _offers_of(self, wanted: NormalizedName, loc: PageLocation, parsed: ParsedPage) -> tuple[list[Offer], list[str]]:
        _log_skipped(loc, parsed)
        index = self.definitions.indexes[loc.index]
        versions = loc.route.versions
        offers: list[Offer] = []
        refused: list[str] = []
        hosts: dict[str, bool] = {}  # origin -> allowed (a page's files share one or two)
        for f in (*parsed.files, *parsed.variants):
            if f.name != wanted:
                if f.is_wheel:  # an sdist name is ambiguous ("mpmath-all-0.17.tar.gz"); a wheel's is not
                    refused.append(f"{f.filename}: names package {f.name!r}, not {wanted!r}; ignored")
            elif not _allowed(hosts, index, f.url):
                refused.append(f"{f.filename}: hosted on a host {index.name} does not use; ignored")
            elif versions is None or f.version in versions:
                offers.append(Offer(file=f if f.index == loc.index else replace(f, index=loc.index), location=loc))
        for w in refused:
            log.warning("%s: %s", loc.url, w)
        return offers, refused

    def listed(self, name: str, ctx: RouteContext, filenames: Collection[str]) -> list[Offer]:
        """The offers among ``filenames`` only, filtered as ``offers`` filters (the package's own
        files, from hosts its index uses, in its route's versions). A popular package's page lists
        thousands of files and ``check`` looks a lock's two or three up on it: each page is read
        once and only the rows naming ``filenames`` are parsed (a page parsed whole already is
        filtered instead)."""
        wanted = canonicalize_name(name)
        only = frozenset(filenames)
        out: list[Offer] = []
        for loc in self.definitions.pages_for(wanted, ctx):
            parsed = self._subset(loc, ("only", only), only=only)
            if parsed is not None:
                out += [o for o in self._page_offers(wanted, loc, parsed)[0] if o.file.filename in only]
        return out

    # -- wheel variants (PEP 825, a draft) ----------------------------------------------------
    def variant_properties(self, file: IndexFile) -> Properties | str:
        """The properties of the variant wheel ``file`` by its release's ``variants.json`` (the one
        its page links), or why they cannot be known: no variants.json linked, none with a sha256,
        one that cannot be read, does not match its sha256, is not PEP 825's shape, or does not
        list the label. Each variants.json is read once (a few hundred bytes)."""
        ref = file.variant
        if ref is None:
            return f"{file.filename} is not a variant wheel"
        meta = f"{file.name}-{file.version}-variants.json"
        if ref.json_url is None:
            return f"its release links no {meta} (PEP 825): its properties are not known"
        if ref.json_sha256 is None:
            return f"{meta} is linked without a sha256: not trusted"
        key = (ref.json_url, ref.json_sha256)
        doc = self._variant_docs.get(key)
        if doc is None:
            doc = self._variant_docs[key] = self._read_variants_json(ref.json_url, ref.json_sha256, meta, file.index)
        if isinstance(doc, str):
            return doc
        props = doc.get(ref.label)
        if props is None:
            return f"{meta} does not list the label {ref.label!r}"
        return props

    def _read_variants_json(self, url: str, sha256: str, meta: str, index: str) -> dict[str, Properties] | str:
        try:
            answer = self.fetcher.fetch_pages([url], index=self.definitions.indexes[index]).get(url)
        except CrawlError as exc:
            return f"{meta} could not be read: {exc.cause}"
        if answer is None or answer.page is None:
            return f"{meta} is linked but not served (404)"
        got = hashlib.sha256(answer.page.content).hexdigest()
        if got != sha256:
            return f"{meta} does not match the sha256 its page gives (got {got[:12]}..., expected {sha256[:12]}...): not trusted"
        try:
            return read_variants_json(answer.page.content)
        except VariantsJsonError as exc:
            return f"{meta} is not PEP 825's shape: {exc}"

    # -- metadata ----------------------------------------------------------------------------
    def prefetch_metadata(self, files: Iterable[IndexFile]) -> None:
        todo = {f.url: f for f in files if not self._metadata_known(f.url)}
        if not todo:
            return
        mine, others = self._claim("metadata ", todo, self._metadata)
        try:
            if mine:
                self._read_metadata([todo[url] for url in mine])
        finally:
            self._release("metadata ", mine)
        for event in others:
            event.wait()
        if others:  # another thread's attempt failed: try here, for the real error
            self.prefetch_metadata(_except(todo, mine))

    def _metadata_known(self, url: str) -> bool:
        """Whether the METADATA of the wheel at ``url`` was read, or its reading failed for good."""
        return url in self._metadata or url in self._metadata_errors

    def _read_metadata(self, files: list[IndexFile]) -> None:
        try:
            raw = self.fetcher.fetch_metadata(files)
            for f in files:
                if f.url in raw:
                    meta = self._metadata[f.url] = self._checked(f, raw[f.url])
                    self._releases.setdefault((meta.name, meta.version), meta)
                    self.metadata_digests[f.url] = (f, hashlib.sha256(raw[f.url]).hexdigest())
        except CrawlError as exc:
            # Remember which wheel failed (its retries are spent): asking again would only
            # repeat them. The other wheels of the batch are tried again on their own.
            failed = next((f.url for f in files if exc.url.startswith(f.url)), None)
            if failed is not None:
                self._metadata_errors[failed] = exc
            raise

    def has_metadata(self, file: IndexFile) -> bool:
        return file.url in self._metadata

    def release_metadata(self, name: str, version: Version) -> WheelMetadata | None:
        """The METADATA of some wheel of this release already read (wheels of one release
        almost always declare the same requirements): a guess for prefetching, never an answer."""
        return self._releases.get((name, version))

    def requires_dist(self, line: str) -> RequiresDist | None:
        """A Requires-Dist line parsed (once per finder); None when it does not parse."""
        return self.memo.requires_dist(line)

    def metadata(self, file: IndexFile) -> WheelMetadata:
        if file.url in self._metadata_errors:
            raise self._metadata_errors[file.url].with_traceback(None)  # an old traceback holds an earlier target's frames
        if file.url not in self._metadata:
            self.prefetch_metadata([file])
        if file.url not in self._metadata:
            raise CrawlError(file.url, "the fetcher returned no metadata for this wheel")
        return self._metadata[file.url]

    @staticmethod
    def _checked(file: IndexFile, raw: bytes) -> WheelMetadata:
        meta = parse_metadata(raw, source=file.url)
        if meta.name != file.name or meta.version != file.version:
            raise CrawlError(
                file.url,
                f"METADATA says {meta.name} {meta.version} but the filename says {file.name} {file.version}",
                hint="the index serves a mislabelled wheel; it is not used",
            )
        return meta


def _except(files: Mapping[str, IndexFile], urls: Sequence[str]) -> list[IndexFile]:
    left = set(files) - set(urls)
    return [f for url, f in files.items() if url in left]


def _log_skipped(loc: PageLocation, parsed: ParsedPage) -> None:
    if parsed.warnings:
        more = len(parsed.warnings) - 1
        log.info("%s: %s%s", loc.url, parsed.warnings[0], f" (and {more} more link{'s' * (more != 1)} skipped)" if more else "")


def _allowed(hosts: dict[str, bool], index: IndexDefinition, url: str) -> bool:
    """Whether ``index`` uses the host of ``url``, asked once per origin (``hosts``)."""
    origin = _origin(url)
    allowed = hosts.get(origin)
    if allowed is None:
        allowed = hosts[origin] = index.allows_host(url)
    return allowed


def _origin(url: str) -> str:
    """``scheme://netloc`` of a URL: every URL with the same origin has the same host."""
    start = url.find("://")
    end = url.find("/", start + 3) if start >= 0 else -1
    return url if end < 0 else url[:end]
