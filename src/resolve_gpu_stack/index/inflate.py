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
        from isal import isal_zlib
    except ImportError:  # a platform without an isal wheel: zlib, the same bytes, slower
        return None
    return isal_zlib


_isal = _load_isal()


class Inflater(Protocol):
    """What the readers use of a ``zlib`` decompressor."""

    def decompress(self, data: bytes | memoryview, max_length: int = 0, /) -> bytes: ...

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
    extra = {} if window is None else {"zdict": window}
    if BACKEND == "isal" and _isal is not None:
        inflater: Inflater = _isal.decompressobj(-zlib.MAX_WBITS, **extra)
        return inflater
    return zlib.decompressobj(-zlib.MAX_WBITS, **extra)
