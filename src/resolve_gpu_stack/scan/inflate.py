"""Raw deflate streams (a zip member's data), inflated by ISA-L where the ``isal`` wheel is
installed and by the standard library's zlib otherwise: the same API, one error tuple.

ISA-L's inflater gives the same bytes about twice as fast as zlib's (bench/README.md, "The
inflater"); both release the GIL while they inflate. The scans and the kept torch's exports
inflate hundreds of MB of a cold plan: much of its CPU is here.
"""

from __future__ import annotations

import zlib
from types import ModuleType
from typing import Protocol


def _load_isal() -> ModuleType | None:
    try:
        from isal import isal_zlib  # optional: no isal wheel on some platforms
    except ImportError:  # a platform without an isal wheel: zlib, the same bytes, slower
        return None
    return isal_zlib


_isal = _load_isal()


class Inflater(Protocol):
    """What the readers use of a ``zlib`` decompressor."""

    def decompress(self, data: bytes | memoryview, max_length: int = 0, /) -> bytes: ...

    def flush(self, length: int = ..., /) -> bytes: ...

    @property
    def unconsumed_tail(self) -> bytes: ...

    @property
    def unused_data(self) -> bytes: ...

    @property
    def eof(self) -> bool: ...


BACKEND = "zlib" if _isal is None else "isal"
INFLATE_ERRORS: tuple[type[Exception], ...] = (zlib.error,) if _isal is None else (zlib.error, _isal.error)


def raw_inflater(window: bytes | None = None) -> Inflater:
    """A decompressor of raw deflate data (no zlib or gzip header), as zip members hold it, by
    ``BACKEND`` (a test sets it to "zlib" to read the same member both ways). ``window``: the
    output taken to precede the data (a stream entered in its middle, ``deflateseek.py``)."""
    return inflater(-zlib.MAX_WBITS, window)


def inflater(wbits: int, window: bytes | None = None) -> Inflater:
    """A decompressor of ``wbits``' format, as ``zlib.decompressobj`` reads it (``-15``: raw,
    ``15``: zlib-wrapped, ``31``: gzip; an HTTP body's ``Content-Encoding``), by ``BACKEND``."""
    extra = {} if window is None else {"zdict": window}
    if BACKEND == "isal" and _isal is not None:
        found: Inflater = _isal.decompressobj(wbits, **extra)
        return found
    return zlib.decompressobj(wbits, **extra)
