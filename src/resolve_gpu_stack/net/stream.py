"""Whole files streamed over a ``Transport`` (wheel downloads, resumable with ``Range``).

``open_stream`` answers a ``StreamAnswer``: read its ``chunks()``, then close it. It is run inside
``Transport.retrying`` by ``download.py``: 429/5xx, resets, timeouts and short bodies are retried
there.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..urls import without_fragment
from .client import Response
from .transport import Transport, content_range, declared_length, is_identity, raise_if_gone


class StreamAnswer:
    """An open streamed answer from ``open_stream``: read ``chunks()``, then close.

    ``status`` 200 / 206 / 416; ``offset`` is where the body starts in the file; ``total`` the
    file's size when the server says; ``validator`` the ETag (or Last-Modified) for ``If-Range``.
    """

    def __init__(self, transport: Transport, resp: Response, url: str, *, status: int, offset: int, total: int | None) -> None:
        self._transport = transport
        self._resp = resp
        self.url = url
        self.status = status
        self.offset = offset
        self.total = total
        etag = resp.headers.get("etag")
        strong = etag if etag and not etag.startswith("W/") else None  # If-Range needs a strong validator
        self.validator: str | None = strong or resp.headers.get("last-modified")

    def chunks(self) -> Iterator[bytes]:
        """The body; a reset, a timeout or a body shorter than announced is retryable."""
        return self._transport.iter_body(self._resp, self.url, "download")

    def close(self) -> None:
        self._transport.finish(self._resp)

    def __enter__(self) -> StreamAnswer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_stream(transport: Transport, url: str, *, start: int = 0, if_range: str | None = None) -> StreamAnswer:
    """GET ``url`` (a whole file) by the transport's policy, streamed; close the answer when done.

    ``start > 0`` asks for ``Range: bytes=<start>-`` (with ``If-Range`` when a validator is
    given). The answer says where its body starts: 206 from ``start``, 200 from zero (the
    server ignored the range or the file changed), 416 when ``start`` is past the end.
    """
    url = without_fragment(url)
    headers = {"Accept-Encoding": "identity"}
    if start > 0:
        headers["Range"] = f"bytes={start}-"
        if if_range:
            headers["If-Range"] = if_range
    resp, _ = transport.open(url, headers)
    try:
        status = resp.status_code
        raise_if_gone(resp, url, "file")
        total: int | None = None
        offset = 0
        if status == 416 and start > 0:
            _, _, size = resp.headers.get("content-range", "").partition("/")
            total = int(size) if size.strip().isdigit() else None
            offset = start
        else:
            transport.check_status(resp, url, ok=(200, 206) if start > 0 else (200,))
            if status == 206:
                offset, _, total = content_range(resp, url, f"bytes={start}-", start)
            else:
                declared = declared_length(resp)
                total = declared if is_identity(resp) else None
    except BaseException:
        transport.finish(resp)
        raise
    return StreamAnswer(transport, resp, url, status=status, offset=offset, total=total)


__all__ = ["StreamAnswer", "open_stream"]
