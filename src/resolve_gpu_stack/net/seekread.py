"""A deflated library's dynamic structure read from its two ends by range requests: its first
bytes inflated from the start, its last bytes entered in the middle of the stream
(``index/deflateseek.py``). This is how a released torch is read. ``libtorch_cpu.so`` has its
``PT_DYNAMIC`` 351 MB into 448 MB, and its string table in a segment patchelf added at the end.
Its symbol and hash tables stay in the first segment. So a few MB from the end and from the start
hold all of them, not the 121 MB before them.

``read_entered`` answers the structure, or None when the data does not allow it this way: the
tables lie elsewhere, the bytes before the entry point fill a region, no block start inflates
to the end, or the budget would be passed. The caller then inflates the member from its start,
which always works. A byte is never guessed: only bytes the window cannot change are used.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..index import deflateseek, elf, zipmeta
from ..index.elf import ElfLayout, Need, Structure
from ..index.elfstream import READ_PAST, dynamic_windows
from ..index.inflate import INFLATE_ERRORS, raw_inflater
from .classify import RangeReader

log = logging.getLogger(__name__)

SEEK_MIN = 8 * 2**20  # compressed bytes: a smaller member is inflated from its start (it costs less than a search)
TAIL_SHARE = 0.5  # of the member's compressed bytes in proportion to what is wanted of its end: the first guess at the tail to read
TAIL_MIN = 4 * 2**20  # compressed bytes: the least tail read
MARGIN = 2**20  # inflated bytes the entry point must lie before what is wanted
SEARCH = 256 * 2**10  # compressed bytes from the tail's start searched for a block start (zlib writes one every few tens of KB)
PREFIX_LIMIT = 32 * 2**20  # inflated bytes of the member's start read for the tables there
PREFIX_PIECE = 2**20  # compressed bytes per read of the member's start
HEAD_PIECE = 64 * 2**10  # compressed bytes read first: they hold the ELF and program headers


class _Prefix:
    """The member's first bytes, inflated as far as asked."""

    def __init__(self, read: RangeReader, entry: zipmeta.ZipEntry, at: int) -> None:
        self._read, self._entry, self._at = read, entry, at
        self._inflater = raw_inflater()
        self.data = bytearray()
        self.consumed = 0

    def extend(self, n: int, within: Callable[[int], bool]) -> bool:
        """Inflate until ``n`` bytes are held; False when the member or the budget ends first."""
        while len(self.data) < n:
            end = min(self._entry.compressed_size, self.consumed + (HEAD_PIECE if not self.consumed else PREFIX_PIECE))
            if end <= self.consumed or self._inflater.eof or not within(end - self.consumed):
                return False
            piece = self._read.range(self._at + self.consumed, self._at + end)
            self.consumed = end
            try:
                self.data += self._inflater.decompress(piece)
            except INFLATE_ERRORS as exc:
                raise zipmeta.ZipError(f"{self._entry.name}: bad deflate data: {exc}") from exc
        return True


def read_entered(read: RangeReader, entry: zipmeta.ZipEntry, at: int, *, within: Callable[[int], bool]) -> Structure | None:
    """``entry``'s structure with its exports (its data at ``at`` in the wheel) read from its two
    ends (see the module docstring); None when it cannot be read so. ``within(n)``: whether ``n`` more bytes
    stay in the budget."""
    if entry.method != zipmeta.DEFLATED or entry.compressed_size < SEEK_MIN:
        return None
    prefix = _Prefix(read, entry, at)
    found = _layout(prefix, entry, within)
    if found is None:
        return None
    layout, regions = found
    tail = _enter(read, entry, at, min(start for start, _ in regions) - MARGIN, within)
    if tail is None:
        return None
    runs = deflateseek.exact_regions(tail, regions)
    while True:
        read_so_far = elf.read_structure(layout, lambda offset, n: _held(prefix.data, runs, offset, n), entry.uncompressed_size, exports=True)
        if isinstance(read_so_far, Structure):
            log.debug("%s: read from its first %d and its last %d compressed bytes", entry.name, prefix.consumed, len(tail.data))
            return read_so_far
        if not _in_prefix(read_so_far, tail.out_start) or not prefix.extend(read_so_far.end + READ_PAST, within):
            return None


def _layout(prefix: _Prefix, entry: zipmeta.ZipEntry, within: Callable[[int], bool]) -> tuple[ElfLayout, list[tuple[int, int]]] | None:
    """The member's layout and the regions of its end to read: the segment of ``PT_DYNAMIC`` and
    those after it; None when ``PT_DYNAMIC`` is in its first half (its start is the way)."""
    if not prefix.extend(elf.HEAD_BYTES, within):
        return None
    layout = elf.read_layout(bytes(prefix.data[: elf.HEAD_BYTES]))
    dyn = layout.dynamic
    if dyn is None or dyn.offset < entry.uncompressed_size // 2:
        return None
    return layout, [(w.start, w.end) for w in dynamic_windows(layout)]


def _held(prefix: bytearray, runs: list[tuple[int, bytes]], offset: int, n: int) -> bytes | None:
    """The member's bytes ``[offset, offset + n)`` from its first bytes or a run of its last."""
    if offset + n <= len(prefix):
        return bytes(prefix[offset : offset + n])
    return next((data[offset - start : offset - start + n] for start, data in runs if start <= offset and offset + n <= start + len(data)), None)


def _in_prefix(need: Need, tail_start: int) -> bool:
    return need.end <= min(PREFIX_LIMIT, tail_start)


def _enter(read: RangeReader, entry: zipmeta.ZipEntry, at: int, want: int, within: Callable[[int], bool]) -> deflateseek.Entry | None:
    """The member's last compressed bytes entered at a block start whose output begins at or
    before ``want``: a first guess at how many, then twice as many until they do."""
    csize, size = entry.compressed_size, entry.uncompressed_size
    take = min(csize, max(TAIL_MIN, int(csize * (size - want) / size * TAIL_SHARE)))
    data = b""
    while True:
        if not within(take - len(data)):
            return None
        data = read.range(at + csize - take, at + csize - len(data)) + data
        found = deflateseek.enter(data, size, search=SEARCH)
        if found is not None and found.out_start <= want:
            return found
        if take >= csize // 2:  # half the member and not there: the stream from the start costs as much
            return None
        take = min(csize, 2 * take)


__all__ = ["read_entered"]
