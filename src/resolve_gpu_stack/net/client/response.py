"""An answer: its headers by name, its body streamed as sent or with its ``Content-Encoding`` (gzip, deflate) undone in bounded steps."""

from __future__ import annotations

import http.client
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol, overload

from ...scan.inflate import INFLATE_ERRORS, inflater
from .connection import CHUNK
from .errors import DecodingError, ReadError, Timeout, TransportError

if TYPE_CHECKING:
    from ..deadline import Deadline


# -- answers -------------------------------------------------------------------------------------
@contextmanager
def _read_errors() -> Iterator[None]:
    """A failure reading a body, as ``TransportError``: ``Timeout`` or ``ReadError``."""
    try:
        yield
    except TransportError:
        raise
    except TimeoutError as exc:
        raise Timeout(str(exc) or "timed out") from None
    except (OSError, http.client.HTTPException, ValueError) as exc:
        raise ReadError(str(exc) or type(exc).__name__) from None


class Headers:
    """An answer's headers by name, in any case (repeated ones joined with ", ")."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self._values: dict[str, str] = {}
        for name, value in pairs:
            key = name.lower()
            self._values[key] = f"{self._values[key]}, {value}" if key in self._values else value

    @overload
    def get(self, name: str) -> str | None: ...

    @overload
    def get(self, name: str, default: str) -> str: ...

    def get(self, name: str, default: str | None = None) -> str | None:
        return self._values.get(name.lower(), default)

    def __contains__(self, name: str) -> bool:
        return name.lower() in self._values


DECODE_STEP = 1 << 20  # at most this many decoded bytes from one inflate step


class _Inflater(Protocol):
    """What a decoder of a ``Content-Encoding`` offers (a ``zlib`` decompressor's API)."""

    @property
    def unconsumed_tail(self) -> bytes: ...

    def decompress(self, data: bytes, max_length: int = ..., /) -> bytes: ...

    def flush(self, length: int = ..., /) -> bytes: ...


class _Deflate:
    """``deflate`` as servers send it: zlib-wrapped, or raw (tried when the first bytes are not zlib's)."""

    def __init__(self) -> None:
        self.inflater: _Inflater = inflater(zlib.MAX_WBITS)
        self.first = True

    def decompress(self, data: bytes, max_length: int = 0, /) -> bytes:
        first, self.first = self.first, False
        try:
            return self.inflater.decompress(data, max_length)
        except INFLATE_ERRORS:
            if not first:
                raise
            self.inflater = inflater(-zlib.MAX_WBITS)
            return self.inflater.decompress(data, max_length)

    @property
    def unconsumed_tail(self) -> bytes:
        return self.inflater.unconsumed_tail

    def flush(self, length: int = zlib.DEF_BUF_SIZE, /) -> bytes:
        return self.inflater.flush(length)


def _decoders(encoding: str | None) -> list[_Inflater]:
    """The decoders of a ``Content-Encoding``, in the order to apply them (the last coding first)."""
    out: list[_Inflater] = []
    for value in reversed((encoding or "").split(",")):
        coding = value.strip().lower()
        if coding in ("gzip", "x-gzip"):
            out.append(inflater(zlib.MAX_WBITS | 16))
        elif coding == "deflate":
            out.append(_Deflate())
    return out


def _decode(decoders: list[_Inflater], data: bytes) -> Iterator[bytes]:
    if not decoders:
        if data:
            yield data
        return
    first, rest = decoders[0], decoders[1:]
    out = first.decompress(data, DECODE_STEP)
    yield from _decode(rest, out)
    while first.unconsumed_tail:
        yield from _decode(rest, first.decompress(first.unconsumed_tail, DECODE_STEP))


def _flush(decoders: list[_Inflater]) -> Iterator[bytes]:
    for i, d in enumerate(decoders):
        yield from _decode(decoders[i + 1 :], d.flush())


class Response:
    """An open streamed answer: read ``iter_bytes`` (or ``iter_raw``), then ``close`` it."""

    def __init__(self, raw: http.client.HTTPResponse, release: Callable[[bool], None], deadline: Deadline | None = None) -> None:
        self.status_code = raw.status
        self.deadline = deadline  # the request's (``deadline.py``): its body is read under it too
        self.reason_phrase = raw.reason
        pairs = raw.getheaders()  # each value passes email's header policy: asked once
        self.headers = Headers(pairs)
        self.num_bytes_downloaded = 0  # body bytes as sent (before Content-Encoding is undone)
        # the status line and headers as received: "HTTP/1.1 206 Partial Content\r\n", "Name: value\r\n" each, "\r\n"
        self.header_bytes = len(f"HTTP/1.1 {raw.status} {raw.reason}\r\n") + sum(len(k) + len(v) + 4 for k, v in pairs) + 2
        self.is_stream_consumed = False
        self.is_closed = False
        self._raw = raw
        self._release = release

    def iter_raw(self) -> Iterator[bytes]:
        """The body as sent, in chunks."""
        with _read_errors():
            while True:
                data = self._raw.read1(CHUNK)
                if not data:
                    break
                self.num_bytes_downloaded += len(data)
                yield data
        self.is_stream_consumed = True

    @property
    def sized(self) -> int | None:
        """The bytes of the body still to come as sent, when the answer declared them
        (``Content-Length``, not chunked); else None."""
        raw = self._raw
        return None if raw.chunked else raw.length

    def read_sized(self) -> bytes:
        """The rest of a ``sized`` body as sent, in one buffer of that size: the buffered reader
        fills it straight from the socket, a TLS record at a time, with no chunks to copy into a
        joined whole (half the memory written, and no Python step per record above the socket's).
        A body the server cut short comes back short: the caller compares ``num_bytes_downloaded``
        with what was declared."""
        want = self.sized
        if want is None:
            raise ValueError("the body's size was not declared")
        data = b""
        if want:
            before = self.deadline.received if self.deadline is not None else 0
            try:
                with _read_errors():
                    data = self._raw.read(want)
            except TransportError:
                # what was read is lost with the buffer: count what the socket gave meanwhile (the
                # body's bytes but those read ahead with the headers) for "truncated: N of M"
                if self.deadline is not None:
                    self.num_bytes_downloaded += min(want, max(0, self.deadline.received - before))
                raise
        self.num_bytes_downloaded += len(data)
        if len(data) == want:
            self.is_stream_consumed = True
        return data

    def iter_bytes(self) -> Iterator[bytes]:
        """The body with its ``Content-Encoding`` undone (gzip, deflate), in chunks."""
        decoders = _decoders(self.headers.get("content-encoding"))
        if not decoders:
            yield from self.iter_raw()
            return
        try:
            for data in self.iter_raw():
                yield from _decode(decoders, data)
            yield from _flush(decoders)
        except INFLATE_ERRORS as exc:
            raise DecodingError(str(exc)) from None

    def close(self, *, reuse: bool = True) -> None:
        """Release the connection: back to the pool when the answer was read to its end (and
        ``reuse``), else closed."""
        if self.is_closed:
            return
        self.is_closed = True
        raw = self._raw
        complete = self.is_stream_consumed or (not raw.chunked and raw.length == 0)
        self._release(reuse and complete)
