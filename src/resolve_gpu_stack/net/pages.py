"""Index pages over a ``Transport``, revalidated against the on-disk cache.

A cached page is asked for again with ``If-None-Match`` / ``If-Modified-Since``; a 304 serves the
cached body. A 404/410 is an answer (``PageResponse(page=None)``) and drops a cached copy. A page
served with a generic content type is sniffed (``urlpolicy.page_content_type``); a body that is no
index page is a ``CrawlError``. Only pages with an ETag or Last-Modified are stored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import CrawlError
from ..model import IndexPage, PageResponse
from ..urls import redact_url
from .cache import HttpCache
from .transport import Transport
from .urlpolicy import page_content_type

if TYPE_CHECKING:
    from ..data.definitions import IndexDefinition

JSON_ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
HTML_ACCEPT = "text/html"


class PageReader:
    """Reads one index page at a time (call it from several threads at once if you like)."""

    def __init__(self, transport: Transport, cache: HttpCache | None, *, max_bytes: int) -> None:
        self._transport = transport
        self._cache = cache
        self._max_bytes = max_bytes

    def fetch(self, url: str, index: IndexDefinition) -> PageResponse:
        """The page at ``url`` of ``index`` (its credentials, its dialect), retried on failures."""
        transport = self._transport
        transport.check_allowed(url)
        transport.credentials.remember(index.url)
        transport.credentials.remember(url)
        variant = "json" if index.dialect == "json-or-html" else "html"
        cached = self._cache.get_page(url, variant=variant) if self._cache else None
        headers = {"Accept": JSON_ACCEPT if variant == "json" else HTML_ACCEPT}
        if cached and cached.etag:
            headers["If-None-Match"] = cached.etag
        if cached and cached.last_modified:
            headers["If-Modified-Since"] = cached.last_modified

        def attempt() -> PageResponse:
            resp, final = transport.open(url, headers)
            try:
                if resp.status_code == 304 and cached is not None:
                    transport.stats.add(cache_hits=1)
                    page = IndexPage(url=cached.url, content=cached.content, content_type=cached.content_type)
                    return PageResponse(url=url, page=page, from_cache=True)
                if resp.status_code in (404, 410):
                    if cached is not None and self._cache:
                        self._cache.drop_page(url, variant=variant)
                    return PageResponse(url=url, page=None)
                transport.check_status(resp, url, ok=(200, 203))
                body = transport.read_body(resp, url, self._max_bytes, "index page")
            finally:
                transport.finish(resp)
            try:
                ctype = page_content_type(resp.headers.get("content-type"), body)
            except ValueError as exc:
                raise CrawlError(redact_url(url), str(exc)) from None
            etag, modified = resp.headers.get("etag"), resp.headers.get("last-modified")
            if self._cache and (etag or modified):
                self._cache.put_page(url, body, variant=variant, final_url=final, content_type=ctype, etag=etag, last_modified=modified)
            return PageResponse(url=url, page=IndexPage(url=final, content=body, content_type=ctype))

        return transport.retrying(url, attempt)


__all__ = ["HTML_ACCEPT", "JSON_ACCEPT", "PageReader"]
