"""A raw deflate stream entered in its middle: a zip member's last bytes inflated without the
bytes before them. Pure: the caller reads the compressed bytes.

A deflate stream is a run of blocks, and a block's bits do not depend on the blocks before it.
What does is its output: a back-reference copies up to 32 KiB of output from behind, the window,
which a reader entering at a block has not got. So:

- ``block_starts``: where a block may start in compressed bytes: a stored block's ``LEN``/``NLEN``
  pair, or a dynamic Huffman header whose code-length code is complete; either must inflate a
  first piece without an error. The stream's last block is looked for apart, after the others:
  in any tail longer than a block it lies far past where the search stops, and a header's final
  bit halves the candidates each pass tries (a tail's search is most of the CPU of entering it).
- ``enter``: the first of them from which the bytes inflate to the end of the stream, ending
  exactly where the bytes end. Its output's length, which no window changes, places every byte of
  it: the member's size minus what is left. A position that is not a block start fails on the way
  (bad codes, no end, bytes after the end) and the next is tried.
- ``exact_regions``: the regions asked for, inflated twice, once after a window of ``0x00`` bytes
  and once after one of ``0xFF``: a byte copied, however indirectly, from the unknown window
  differs between the two, so a byte equal in both is the member's own. Only such bytes are
  given; a region that depends on the window has a gap there (the caller reads it another way).
  Once a whole window of output is equal in both, the two inflaters differ in nothing and the
  rest is the output ``enter`` kept when it followed the entry to the end (``keep_from``), or
  else inflated once more (torch 2.15.0's ``libtorch_cuda.so``: the two agree 4.7 MB into the
  29 MB its tail inflates to, 6 MB before the section headers).
"""

from __future__ import annotations

import collections
import itertools
import re
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass

from .inflate import INFLATE_ERRORS, Inflater, raw_inflater

WINDOW = 32 * 2**10  # the farthest a back-reference reaches
_WINDOWS = (bytes(WINDOW), b"\xff" * WINDOW)
TRIAL = 64 * 2**10  # compressed bytes a candidate must inflate without an error before it is followed to the end
STEP = 4 * 2**20  # inflated bytes per call into an inflater
BLOCK = 4096  # the unit in which the two inflations are compared: a block of them that differs is left out
MIN_STORED = 1024  # a stored block shorter than this is not taken as a place to enter (zlib writes long ones)
MAX_FOLLOWED = 16  # candidates followed to the end before giving up
PIECE = 2**20  # compressed bytes handed to an inflater at a time
SEARCH_STEP = 2 * 2**10  # (zlib writes a block every few tens of KB: the first one is found without checking much past it)
_BOTH_FF = re.compile(b"(?=\\xff\\xff)")


@dataclass(frozen=True, slots=True)
class BlockStart:
    """Where a block may start: ``offset`` is the byte holding its first bit and ``bit`` that bit
    (0: the least significant); a ``stored`` block's ``offset`` is its ``LEN`` field."""

    offset: int
    bit: int = 0
    stored: bool = False


@dataclass(frozen=True, slots=True)
class Entry:
    """``data`` (a member's last compressed bytes) entered at ``start``; its output is the
    member's bytes from ``out_start`` to its end."""

    data: bytes
    start: BlockStart
    out_start: int
    witness: BlockStart | None = None  # a later block start that inflates to the end too
    witness_out: int = 0  # where its output begins in the member
    # the last bytes of each one's output (after a window of 0x00), from ``keep_from`` to the
    # member's end ``size``, kept while ``enter`` followed it: ``exact_regions`` inflates no
    # further than where the two windows agree
    tail: bytes = b""
    witness_tail: bytes = b""
    size: int = 0


class _NotAStream(Exception):
    pass


# Empty blocks of fixed Huffman codes, in the order an inflater reads bits: a header (not final,
# fixed codes) and the end-of-block code. One of them may hold a literal of a 9-bit code (its
# byte is the lead's output, then dropped), so that the lead's length has any remainder mod 8.
_EMPTY = (0, 1, 0) + (0,) * 7
_LITERALS = (0x90, 0xFF)  # the lead's literal in the two inflations: it is window too, and differs as the windows do


def _lead(data: bytes, start: BlockStart, literal: int) -> tuple[bytes, int, int]:
    """Bytes to inflate before ``data[resume:]`` that bring the inflater to ``start``'s bit with
    the data's bytes still on byte boundaries (a stored block later in the stream is aligned to
    them): ``(lead, resume, output bytes the lead gives)``. The bits of ``start``'s byte before
    it (the end of a block not read) are replaced by the lead's last ones."""
    if start.stored:
        return b"\x00", start.offset, 0  # a stored block's header: not final, stored, padding; its LEN follows
    k = start.bit
    if k == 0:
        return b"", start.offset, 0
    bits: list[int] = []
    if k % 2:
        code = 0x190 + literal - 144  # literals 144-255 have the 9-bit codes from 110010000, read from the top bit
        bits += [0, 1, 0, *((code >> (8 - j)) & 1 for j in range(9)), *(0,) * 7]
    while len(bits) % 8 != k:
        bits += _EMPTY
    packed = bytearray(len(bits) // 8 + 1)
    for j, b in enumerate(bits):
        packed[j // 8] |= b << (j % 8)
    packed[-1] |= data[start.offset] & (0xFF << k) & 0xFF
    return bytes(packed), start.offset + 1, k % 2


def _outputs(data: bytes, start: BlockStart, which: int, *, end: int | None = None) -> Generator[bytes, None, None]:
    """The output of ``data`` (up to ``end``) inflated from ``start`` after window ``which`` (0:
    of 0x00, 1: of 0xFF), in pieces, the lead's own bytes left out. Raises ``_NotAStream`` on bad
    data and, without an ``end``, unless the stream ends exactly where ``data`` does."""
    lead, resume, skip = _lead(data, start, _LITERALS[which])
    inflater = raw_inflater(_WINDOWS[which])
    view = memoryview(data)
    stop = len(data) if end is None else min(end, len(data))
    pieces: list[bytes | memoryview] = [lead, *(view[at : min(stop, at + PIECE)] for at in range(resume, stop, PIECE))]
    for out in _inflated(inflater, pieces):
        if skip:
            out, skip = out[skip:], max(0, skip - len(out))
        if out:
            yield out
    if end is None and (not inflater.eof or inflater.unused_data):
        raise _NotAStream("not a stream to the end of the bytes")


def _inflated(inflater: Inflater, pieces: Sequence[bytes | memoryview]) -> Iterator[bytes]:
    """``pieces`` inflated in order, ``STEP`` bytes of output at most at a time."""
    try:
        for piece in pieces:
            pending: bytes | memoryview = piece
            while pending:
                if inflater.eof:
                    raise _NotAStream("bytes after the stream's end")
                yield inflater.decompress(pending, STEP)
                pending = inflater.unconsumed_tail
    except INFLATE_ERRORS as exc:
        raise _NotAStream(str(exc)) from exc


def _complete_code_lengths(bits: int) -> bool:
    """Whether a dynamic header's first bits (after its 3-bit block header) declare counts in
    range and a complete code-length code, as an inflater requires."""
    if bits & 31 > 29 or (bits >> 5) & 31 > 29:
        return False
    hclen = ((bits >> 10) & 15) + 4
    lengths = (bits >> 14) & ((1 << (3 * hclen)) - 1)
    return (
        _KRAFT[lengths & 0xFFF] + _KRAFT[lengths >> 12 & 0xFFF] + _KRAFT[lengths >> 24 & 0xFFF] + _KRAFT[lengths >> 36 & 0xFFF] + _KRAFT[lengths >> 48] == 128
    )


# four 3-bit code lengths -> their share of a complete code, in 128ths (a length of 0: no code)
_SHARE = [0, *(128 >> n for n in range(1, 8))]  # one 3-bit code length's share
_PAIRS = [low + high for high in _SHARE for low in _SHARE]  # two lengths (6 bits), the first in the low bits
_KRAFT = [low + high for high in _PAIRS for low in _PAIRS]  # four (12 bits): a sum of two pairs' shares, not four lookups a word (~0.5 ms at import)


def _trial(data: bytes, start: BlockStart) -> bool:
    try:
        for _ in _outputs(data, start, 0, end=start.offset + TRIAL):
            pass
    except _NotAStream:
        return False
    return True


def _dynamic_header(k: int, last: bool) -> bytes:
    """The pattern (DOTALL) of two bytes whose bits from ``k`` on begin a block of dynamic codes
    (bit ``k``: whether it is the stream's last block, ``last``; then its type bits, 0 then 1)."""
    head = 5 if last else 4
    low = min(3, 8 - k)  # the condition is one on each byte: the header's first ``low`` bits in the first, the rest in the second
    fixed = (head & ((1 << low) - 1)) << k
    first = bytes(above << (k + low) | fixed | below for above in range(256 >> (k + low)) for below in range(1 << k))
    rest = 3 - low  # the header's bits in the second byte: its lowest
    second = b"." if not rest else b"[" + re.escape(bytes(above << rest | head >> low for above in range(256 >> rest))) + b"]"
    return b"(?=[" + re.escape(first) + b"]" + second + b")"  # "." for any byte: a class of 256 bytes costs its compile ~1 ms


# the patterns' texts, compiled where a search begins (``re``'s cache keeps them): a resolve imports
# this module and may never enter a stream, and the 16 compilations cost ~1 ms
_DYNAMIC_HEADERS = {last: tuple(_dynamic_header(k, last) for k in range(8)) for last in (False, True)}


def block_starts(data: bytes, *, search: int, last: bool = False) -> Iterator[BlockStart]:
    """Candidate block starts in the first ``search`` bytes of ``data``, in order (see the module
    docstring); each inflates its first ``TRIAL`` bytes without an error. Looked for
    ``SEARCH_STEP`` bytes at a time: the first start is found without looking far past it.
    ``last``: where the stream's last block may start (of dynamic codes) instead."""
    end = max(0, min(search, len(data) - 16))
    headers = [re.compile(text, re.DOTALL) for text in _DYNAMIC_HEADERS[last]]
    for lo in range(0, end, SEARCH_STEP):
        hi = min(end, lo + SEARCH_STEP)
        found = [] if last else [BlockStart(i, stored=True) for i in _stored_lengths(data, lo, hi)]
        for k, first in enumerate(headers):
            for m in first.finditer(data, lo, hi):
                i = m.start()
                if _complete_code_lengths(int.from_bytes(data[i : i + 11], "little") >> (k + 3)):
                    found.append(BlockStart(i, k))
        for start in sorted(found, key=lambda b: (b.offset, b.bit)):
            if _trial(data, start):
                yield start


def _stored_lengths(data: bytes, lo: int, hi: int) -> list[int]:
    """Offsets in ``[lo, hi)`` of a ``LEN``/``NLEN`` pair (``NLEN`` the complement of ``LEN``) of
    at least ``MIN_STORED``."""
    n = hi - lo
    xor = (int.from_bytes(data[lo : lo + n], "little") ^ int.from_bytes(data[lo + 2 : lo + 2 + n], "little")).to_bytes(n, "little")
    hits = (lo + m.start() for m in _BOTH_FF.finditer(xor))
    return [i for i in hits if data[i] | data[i + 1] << 8 >= MIN_STORED]


def enter(data: bytes, size: int, *, search: int, keep_from: int | None = None) -> Entry | None:
    """``data`` (a member's last compressed bytes; ``size``: its inflated size) entered at the
    first block start in its first ``search`` bytes from which it inflates to its end; None when
    none does. ``keep_from``: the first member offset ``exact_regions`` will be asked for (the
    output from there on is kept as it is followed)."""
    # the blocks before the last first: the last one begins far into any tail longer than a block
    # (zlib's are at most about 100 KB), and looking for both at once costs twice the search
    candidates = itertools.chain(block_starts(data, search=search), block_starts(data, search=search, last=True))
    keep = max(0, size - keep_from) if keep_from is not None else 0
    found: list[tuple[BlockStart, int, bytes]] = []
    for followed, start in enumerate(candidates):
        try:
            length, tail = _followed(data, start, keep)
        except _NotAStream:
            length, tail = None, b""
        if length is not None and length <= size and (not found or length < size - found[0][1]):
            found.append((start, size - length, tail))
            if len(found) == 2:
                break
        if followed + 1 >= MAX_FOLLOWED:
            break
    if not found:
        return None
    (start, out_start, tail), *witness = found
    if not witness:
        return Entry(data, start, out_start, tail=tail, size=size)
    return Entry(data, start, out_start, witness[0][0], witness[0][1], tail=tail, witness_tail=witness[0][2], size=size)


def _followed(data: bytes, start: BlockStart, keep: int) -> tuple[int, bytes]:
    """(the length of ``data``'s output from ``start`` to its end after a window of 0x00, its last
    ``keep`` bytes); ``_NotAStream`` as ``_outputs``."""
    length = held = 0
    pieces: collections.deque[bytes] = collections.deque()
    for out in _outputs(data, start, 0):
        length += len(out)
        if keep:
            pieces.append(out)
            held += len(out)
            while held - len(pieces[0]) >= keep:
                held -= len(pieces.popleft())
    if held > keep:  # the first piece's start is not kept
        pieces[0] = pieces[0][held - keep :]
    return length, b"".join(pieces)


def exact_regions(entry: Entry, regions: Sequence[tuple[int, int]]) -> list[tuple[int, bytes]]:
    """The bytes of ``regions`` (``(start, end)`` offsets in the member) that ``entry``'s output
    holds, that do not depend on the window before it, and that its witness (a later block start,
    inflated on its own) gives too, as ``(offset, bytes)`` runs in order (see the module docstring).

    The witness: bits that are no block start can inflate without an error to the stream's end,
    their first codes garbage and the rest in step with the true blocks (Huffman codes fall back
    into step; fixed codes almost at once), so an entry alone cannot tell its first bytes from
    the member's. Two entries at different bits that inflate to the same bytes at the same offsets
    are both in step there: only those bytes are given (none without a witness)."""
    if entry.witness is None:
        return []
    mine = _window_free(entry.data, entry.start, entry.out_start, regions, (entry.size - len(entry.tail), entry.tail))
    theirs = dict(_window_free(entry.data, entry.witness, entry.witness_out, regions, (entry.size - len(entry.witness_tail), entry.witness_tail)))
    agreed: list[tuple[int, bytearray]] = []
    for at, buf in mine:
        for their_at, their_buf in theirs.items():
            lo, hi = max(at, their_at), min(at + len(buf), their_at + len(their_buf))
            if lo < hi:  # compared as the two windows are: BLOCK bytes at a time, on the member's offsets
                _keep_equal(agreed, [(lo, hi)], lo, buf[lo - at : hi - at], their_buf[lo - their_at : hi - their_at])
    return [(at, bytes(buf)) for at, buf in agreed]


def _window_free(
    data: bytes, start: BlockStart, out_start: int, regions: Sequence[tuple[int, int]], kept: tuple[int, bytes] = (0, b"")
) -> list[tuple[int, bytes]]:
    """The bytes of ``regions`` that ``data`` inflated from ``start`` (its output placed at
    ``out_start``) gives alike after a window of ``0x00`` and one of ``0xFF``. ``kept``: (where
    they begin, the output's last bytes after a window of 0x00, as ``enter`` kept them): once
    the two agree, the rest is taken from them (when they hold every byte of ``regions`` from
    there on) instead of inflated again."""
    entry = Entry(data, start, out_start)
    wanted = _merged(regions, entry.out_start)
    runs: list[tuple[int, bytearray]] = []
    pos = entry.out_start
    zeros_out, ones_out = _outputs(entry.data, entry.start, 0), _outputs(entry.data, entry.start, 1)
    converged = False
    try:
        for zeros in zeros_out:
            if not wanted or pos >= wanted[-1][1]:
                break
            ones = zeros if converged else next(ones_out)
            if len(zeros) != len(ones):
                break
            _keep_equal(runs, wanted, pos, zeros, ones)
            pos += len(zeros)
            # once a whole window of output is the same in both, so is every byte after it (the
            # inflaters' states differ only in their windows): the rest is inflated once
            converged = converged or (len(zeros) >= WINDOW and zeros[-WINDOW:] == ones[-WINDOW:])
            if converged and _rest_kept(runs, wanted, pos, kept):
                break
    except (_NotAStream, ValueError, StopIteration):
        pass  # (enter followed it to the end once: it does not fail the same way twice)
    finally:
        ones_out.close()
    return [(at, bytes(buf)) for at, buf in runs]


def _rest_kept(runs: list[tuple[int, bytearray]], wanted: Sequence[tuple[int, int]], pos: int, kept: tuple[int, bytes]) -> bool:
    """Add to ``runs`` the bytes of ``wanted`` from ``pos`` on out of ``kept`` (``(where its bytes
    begin, the bytes)``, ending where the output ends), as inflating on would have: whether it
    held them (else nothing is added)."""
    at, tail = kept
    if not tail or any(at > max(lo, pos) for lo, hi in wanted if hi > pos):
        return False
    start = max(pos, at)
    _keep_equal(runs, wanted, start, tail[start - at :], tail[start - at :])
    return True


def _merged(regions: Sequence[tuple[int, int]], start: int) -> list[tuple[int, int]]:
    """``regions`` from ``start`` on, sorted, overlapping ones joined."""
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted((max(lo, start), hi) for lo, hi in regions if hi > max(lo, start)):
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((lo, hi))
    return merged


def _keep_equal(runs: list[tuple[int, bytearray]], wanted: Sequence[tuple[int, int]], pos: int, a: bytes, b: bytes) -> None:
    """Add to ``runs`` the bytes of ``a`` (output at ``pos``) within ``wanted`` that ``b`` has too,
    compared ``BLOCK`` bytes at a time (aligned to the member's offsets)."""
    end = pos + len(a)
    for lo, hi in wanted:
        at = max(lo, pos)
        while at < min(hi, end):
            stop = min(hi, end, (at // BLOCK + 1) * BLOCK)
            piece = a[at - pos : stop - pos]
            if piece == b[at - pos : stop - pos]:
                if runs and runs[-1][0] + len(runs[-1][1]) == at:
                    runs[-1][1].extend(piece)
                else:
                    runs.append((at, bytearray(piece)))
            at = stop


__all__ = ["BlockStart", "Entry", "block_starts", "enter", "exact_regions"]
