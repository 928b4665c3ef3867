"""One zip member's ELF structure, read where the loader reads it (``elf.read_structure``), from
the member's compressed bytes: pure, the caller does the reading.

- A **stored** member is a range read per region: the header (first ``elf.HEAD_BYTES``), then
  ``PT_DYNAMIC``, the string table, the hash table, the symbol table, wherever they lie.
- A **deflated** member is inflated as a stream from its start, in pieces of ``STEP`` inflated
  bytes, and only the regions wanted are kept: the first loadable segment (where linkers put the
  tables; at most ``KEEP_PREFIX`` bytes of it), the loadable segment holding ``PT_DYNAMIC`` and
  every loadable segment after it (where patchelf puts the tables it rewrites; at most
  ``KEEP_SEGMENT`` bytes each), a member of at most ``KEEP_WHOLE`` bytes whole (one piece may
  inflate all of it before its structure is read), and every region the structure asks for ahead
  of the stream. A region asked for behind the stream that was not kept costs one more pass from
  the start (at most ``MAX_PASSES``). The stream stops where the last region ends: the cost is
  what the data needs, the memory held is the regions.
- With ``seek`` (the kept torch's exports; never a wheel's verdict, which a forged chain of
  blocks hidden in stored data would fool: issue 48), a deflated member of at least ``SEEK_MIN``
  compressed bytes whose ``PT_DYNAMIC`` lies in its second half (a linker puts ``.dynamic`` in the last segment; patchelf puts torch's string table
  after it) is read from its end first. Its last compressed bytes (at most ``MAX_TAIL``) are
  entered in the middle of the stream at a block start (``deflateseek.py``) and give the segment
  of ``PT_DYNAMIC`` and those after it, where no byte depends on the window the entry point
  lacks. The stream from the start then reads only what lies before (the tables in the first
  segment). When the tail does not hold them (no block start inflates to the end, or a byte
  depends on the window), the stream from the start reads them as above.
- With ``sections`` (a library's exports: torch's own), a member whose section header table lies
  in its second half, inside a loadable segment (patchelf writes it at the start of the segment it
  adds for the tables it moves), has its symbols read through it (``elf.read_by_sections``, which
  checks it against the program headers): its end is read from the headers on, not from
  ``PT_DYNAMIC``'s segment (91 MB before them in torch 2.15.0's ``libtorch_cpu.so``). Headers
  that disagree send the member back to ``PT_DYNAMIC``, as above.
- The program headers are read where the ELF header says (``elf.layout_from``): a linker puts them
  in the first bytes; BOLT moved torch 2.15.0's aarch64 builds' into the segment it adds, 419 MB
  into the 514 MB ``libtorch_cuda.so``. A stored member reads them by range; a deflated one with
  ``seek`` whose headers lie in its second half reads its end first for them and, with
  ``sections``, the section headers (one entered read, what the end holds is kept; once the
  headers are known the end may be read once more for what they point to); else the stream keeps
  them as it passes.

    reader = ElfStream(entry.method, entry.uncompressed_size, entry.compressed_size)
    while (span := reader.wanted()) is not None:   # compressed offsets in the member's data
        reader.feed(span[0], fetch(*span))
    reader.structure or reader.error
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from . import deflateseek, elf
from .elf import ElfError, ElfLayout, ElfLibraries, Need, Structure
from .inflate import INFLATE_ERRORS, Inflater, raw_inflater
from .zipmeta import DEFLATED, STORED

STEP = 4 * 2**20  # inflated bytes produced per call into the inflater (bounds the memory of one piece)
KEEP_PREFIX = 32 * 2**20  # of the first loadable segment, kept while streaming
KEEP_SEGMENT = 64 * 2**20  # of the loadable segment holding PT_DYNAMIC (and of each after it), kept while streaming
KEEP_WHOLE = 16 * 2**20  # a member this small is kept whole while streaming
MIN_RANGE = 64 * 2**10  # a stored member's region is read with at least this many bytes
CHUNK = 2**20  # compressed bytes of a deflated member per read
MAX_PASSES = 3
READ_PAST = elf.CHAIN_STEP  # kept past a segment's end: the structure reads its hash chains a step at a time, which may run past it (else one more pass)
SEEK_MIN = 4 * 2**20  # compressed bytes: a smaller member is inflated from its start (it costs about what a tail does)
TAIL_MIN = 2 * 2**20  # compressed bytes: the least tail read
TAIL_SHARE = 0.5  # of the member's compressed bytes in proportion to the inflated bytes wanted from its end: the first tail read
MARGIN = 2**20  # inflated bytes the entry point must lie before what is wanted of the end
MAX_TAIL = 64 * 2**20  # compressed bytes of a member's end read at most (they are held until entered)
SEARCH = 128 * 2**10  # compressed bytes from a tail's start searched for a block start (zlib writes one every few tens of KB, a stored one every 64 KB)


@dataclass(slots=True)
class _Window:
    """Inflated bytes of a member kept from ``start``."""

    start: int
    end: int
    buf: bytearray = field(default_factory=bytearray)

    def covers(self, offset: int, size: int) -> bool:
        return self.start <= offset and offset + size <= self.start + len(self.buf)


@dataclass(slots=True)
class _Tail:
    """The member's end being read: ``piece`` is its compressed bytes from ``start`` (up to
    ``end``, where ``held``, read before, begins); an entry must begin by ``want``."""

    regions: list[tuple[int, int]]
    want: int
    start: int
    end: int
    held: bytes = b""
    piece: bytearray = field(default_factory=bytearray)

    @property
    def next(self) -> int:
        return self.start + len(self.piece)


class ElfStream:
    """See the module docstring. ``symbols``: whether (or, given the libraries, whether) to read the
    dynamic symbol table; ``exports``: keep the defined names too. ``chunk``: compressed bytes per
    read of a deflated member. ``seek``: whether a member may be read from its end first (see the
    module docstring). A verdict that lets a wheel in never rests on such a read: an entry point
    that inflates cleanly to the member's end is not proven a real block boundary (a forger hides
    a second, self-consistent chain of blocks in stored data), so the wheel scan passes False;
    the kept torch's exports are read so."""

    def __init__(
        self,
        method: int,
        size: int,
        compressed_size: int,
        *,
        symbols: bool | Callable[[ElfLibraries], bool] = True,
        exports: bool = False,
        sections: bool = False,
        chunk: int = CHUNK,
        seek: bool = True,
    ) -> None:
        if method not in (STORED, DEFLATED):
            raise ElfError(f"compression method {method} is not supported for range reads")
        self.method = method
        self.size = size
        self.compressed_size = compressed_size
        self._symbols = symbols
        self._exports = exports
        self._sections = sections  # the symbols through section headers at the end, while they may be read so
        self._chunk = chunk
        self.layout: ElfLayout | None = None
        self.structure: Structure | None = None
        self.error: str | None = None
        self.inflated = 0  # inflated bytes produced, every pass together
        self.consumed = 0  # compressed bytes fed, every pass together
        self.passes = 1
        # before the layout is known, a deflated stream keeps its first bytes (the layout trims it)
        self._windows: list[_Window] = [] if method == STORED else [_Window(0, min(size, KEEP_PREFIX))]
        self._need: Need | None = Need(0, min(size, elf.HEAD_BYTES))
        self._inflater = raw_inflater() if method == DEFLATED else None
        self._pos = 0  # inflated offset of the stream
        self._cpos = 0  # compressed offset of the stream
        self._tail: _Tail | None = None  # the member's end being read (see the module docstring)
        self._seek = seek
        self._tail_tried = not seek or method != DEFLATED or compressed_size < SEEK_MIN
        self._headers_at_end = False  # the end was read first for the program headers (``_wait_for_headers``)

    @property
    def done(self) -> bool:
        return self.structure is not None or self.error is not None

    @property
    def reading_end(self) -> bool:
        """Whether ``wanted`` asks for the member's end (all of it is used: a reader takes it at once)."""
        return self._tail is not None

    @property
    def held(self) -> int:
        """Bytes of the member kept in memory."""
        return sum(len(w.buf) for w in self._windows)

    def wanted(self, reach: int | None = None) -> tuple[int, int] | None:
        """The compressed bytes ``(start, end)`` (end exclusive, offsets in the member's data) to
        read next; None when done. ``reach``: how many bytes of a deflated member to ask for at
        once (the stream's ``chunk`` by default; a reader that streams a range and stops once
        nothing more is wanted asks for more)."""
        if self.done or self._need is None:
            return None
        if self._tail is not None:
            return self._tail.next, self._tail.end
        if self._inflater is None:
            need = self._need
            end = min(self.size, max(need.end, need.offset + MIN_RANGE))
            return need.offset, end
        return self._cpos, min(self.compressed_size, self._cpos + (self._chunk if reach is None else max(1, reach)))

    def feed(self, start: int, data: bytes) -> None:
        """The member's compressed bytes ``[start, start + len(data))``, as ``wanted`` asked."""
        if self.done:
            return
        self.consumed += len(data)
        if self._tail is not None:
            if start != self._tail.next:
                raise ValueError(f"expected the member's bytes from {self._tail.next}, got {start}")
            self._tail.piece += data
            if self._tail.next >= self._tail.end:
                self._enter_tail(self._tail)
            return
        if self._inflater is None:
            self._windows.append(_Window(start, start + len(data), bytearray(data)))
            self._advance()
            return
        if start != self._cpos:
            raise ValueError(f"expected the member's bytes from {self._cpos}, got {start}")
        self._cpos += len(data)
        self._pump(data)

    def resume(self, prefix: bytes, inflater: Inflater | None = None, consumed: int = 0) -> None:
        """Go on from a reader of the member's first bytes: ``prefix`` (its first inflated bytes),
        and for a deflated member the ``inflater`` that gave them after ``consumed`` compressed
        bytes (its unconsumed tail is inflated first)."""
        self._windows = [_Window(0, max(len(prefix), self._windows[0].end if self._windows else 0), bytearray(prefix))]
        if self._inflater is not None and inflater is not None:
            self._inflater, self._pos, self._cpos = inflater, len(prefix), consumed
            self.consumed, self.inflated = consumed, len(prefix)
        self._advance()
        if self._inflater is not None and not self.done and inflater is not None and inflater.unconsumed_tail:
            self._pump(inflater.unconsumed_tail)

    def _pump(self, data: bytes) -> None:
        """Inflate ``data`` (the next compressed bytes of the stream), keeping what is wanted."""
        pending = self._inflate(data)
        if pending is None:
            return
        if not self.done and self._inflater is not None and self._cpos and (self._inflater.eof or (self._cpos >= self.compressed_size and not pending)):
            self._advance()
            if not self.done:
                self._restart_or_fail()

    def _inflate(self, data: bytes) -> bytes | None:
        """Inflate ``data`` in steps until it is used up, the stream is done or ended, or it starts
        again; what is left of it (None: bad deflate data, ``error`` says so)."""
        assert self._inflater is not None
        pending = data
        while pending and not self.done:
            try:
                out = self._inflater.decompress(pending, STEP)
            except INFLATE_ERRORS as exc:
                self.error = f"bad deflate data: {exc}"
                return None
            pending = self._inflater.unconsumed_tail
            self._keep(self._pos, memoryview(out))
            self._pos += len(out)
            self.inflated += len(out)
            if self._need is not None and self._pos >= self._need.end:
                self._advance()
            if self._inflater is None or self._inflater.eof or self._cpos == 0:
                break  # done, the stream ended, or it starts again (a region behind it was not kept)
        return pending

    def _keep(self, at: int, out: memoryview) -> None:
        end = at + len(out)
        for w in self._windows:
            lo, hi = max(at, w.start + len(w.buf)), min(end, w.end)
            if lo < hi and lo == w.start + len(w.buf):
                w.buf += out[lo - at : hi - at]

    def _get(self, offset: int, size: int) -> bytes | None:
        for w in self._windows:
            if w.covers(offset, size):
                return bytes(w.buf[offset - w.start : offset - w.start + size])
        return None

    def _advance(self) -> None:
        """Read the structure as far as the bytes at hand go; want what it needs next."""
        try:
            if self.layout is None:
                layout = elf.layout_from(self._get, self.size)
                if isinstance(layout, Need):
                    self._wait_for_headers(layout)
                    return
                self.layout = layout
                if self._headers_at_end:  # the end was read for the headers: it may be read once more for what they point to
                    self._tail_tried, self._headers_at_end = False, False
                self._plan_windows(layout)
            found = self._read_structure(self.layout)
        except ElfError as exc:
            self.error = str(exc)
            return
        if isinstance(found, Structure):
            self.structure, self._need = found, None
            self._windows = []
            self._inflater = None
            return
        self._need = found
        if self._inflater is None:
            return  # a stored member: the next range read fetches it
        self._want_tables(self.layout, found)
        if not self._tail_tried and found.offset >= self.size // 2:
            self._start_tail([(w.start, w.end) for w in self._end_windows(self.layout)])
        elif found.offset < self._pos and not self._keeping(found):  # behind the stream, and not kept
            self._restart_or_fail()

    def _wait_for_headers(self, need: Need) -> None:
        """Want the program headers (``need``) where the ELF header says they are: past the first
        bytes, a tool moved them (BOLT, near the end: the aarch64 builds of torch). A stored member
        reads them by range; a deflated one keeps them as the stream passes, or reads its end
        first (``seek``), keeping the section headers there too when ``sections``, as
        ``_end_windows`` would (what else the end holds is known once the headers are)."""
        self._need = need
        if self._inflater is None or need.offset == 0:
            return  # a stored member reads it by range; or the first bytes are not in yet
        self._want(need)
        if not self._tail_tried and need.offset >= self.size // 2:
            regions = [(need.offset, need.end)]
            head = self._get(0, min(self.size, elf.HEAD_BYTES))
            shoff, length = elf.section_header_table(head) if head is not None and self._sections else (0, 0)
            if length and self.size // 2 <= shoff and shoff + length <= self.size:
                regions.append((shoff, min(self.size, shoff + KEEP_SEGMENT) + READ_PAST))
            self._start_tail(regions)
            self._headers_at_end = True
        elif need.offset < self._pos and not self._keeping(need):
            self._restart_or_fail()

    def _keeping(self, need: Need) -> bool:
        """Whether a window will hold ``need`` once the stream reaches its end (it has kept every
        byte up to where the stream is, or starts ahead of it)."""
        return any(w.start <= need.offset and need.end <= w.end and (w.start >= self._pos or w.start + len(w.buf) == self._pos) for w in self._windows)

    def _read_structure(self, layout: ElfLayout) -> Structure | Need:
        """The structure from the bytes at hand, or what it needs next: through the section headers
        while ``sections`` (``elf.read_by_sections``); when they cannot tell (none at the end, or
        they disagree with the program headers), by ``PT_DYNAMIC`` from then on, the windows it
        needs kept and the end read for them if it was not."""
        found = elf.read_by_sections(layout, self._get, self.size, exports=self._exports) if self._sections else None
        if found is not None:
            return found
        if self._sections:
            self._sections = False
            if self._inflater is not None:
                self._windows += _dynamic_windows(layout)
                self._tail_tried = not self._seek or self.compressed_size < SEEK_MIN
        return elf.read_structure(layout, self._get, self.size, symbols=self._symbols, exports=self._exports)

    def _want_tables(self, layout: ElfLayout, need: Need) -> None:
        """Keep ``need`` and, once ``.dynamic`` is at hand, every table it points to, at once (one
        more pass at most)."""
        self._want(need)
        dyn = layout.dynamic
        raw = self._get(dyn.offset, dyn.filesz) if dyn is not None else None
        if raw is not None:
            for at in elf.table_offsets(layout, raw):
                self._want(Need(at, 0))

    def _start_tail(self, regions: list[tuple[int, int]]) -> None:
        """Read the member's end first, for ``regions`` (what ``_end_windows`` keeps, or the
        program headers: see the module docstring); a first guess at the compressed bytes it takes."""
        self._tail_tried = True
        first = min((a for a, _ in regions), default=0)
        if first < self.size // 2:
            return
        want = first - MARGIN
        take = max(TAIL_MIN, int(self.compressed_size * (self.size - want) / self.size * TAIL_SHARE))
        self._tail = _Tail(regions, want, self.compressed_size - min(take, self.compressed_size, MAX_TAIL), self.compressed_size)

    def _enter_tail(self, tail: _Tail) -> None:
        """The tail is in: enter it, keep what it holds of the regions, and go on with the stream
        from where it is; or read twice as much of the end, while that is less than half of the
        member and at most ``MAX_TAIL`` (the compressed tail is held while it is read)."""
        data = bytes(tail.piece) + tail.held
        first = min((a for a, _ in tail.regions), default=self.size)
        # the output from the first region on is held while an entry is followed, as long as it is
        # no more than one window holds (a member's size is its zip entry's word: no more memory for a larger claim)
        keep_from = first if self.size - first <= KEEP_SEGMENT + READ_PAST else None
        found = deflateseek.enter(data, self.size, search=SEARCH, keep_from=keep_from)
        self._tail = None
        if found is None:  # no block start inflates to the end: not a deflate stream to enter (more of it will not be)
            return
        if found.out_start > tail.want:
            more = 2 * len(data)
            if more < self.compressed_size // 2 and more <= MAX_TAIL:
                self._tail = _Tail(tail.regions, tail.want, self.compressed_size - more, tail.start, held=data)
            return
        self.inflated += 2 * (self.size - found.out_start)  # followed to the end, then again to compare (twice, until the windows agree)
        self._windows += [_Window(at, at + len(buf), bytearray(buf)) for at, buf in deflateseek.exact_regions(found, tail.regions)]
        self._advance()

    def _want(self, need: Need) -> None:
        """Keep ``need`` (and the rest of its segment) when the stream passes it."""
        if not any(w.start <= need.offset and need.end <= w.end for w in self._windows):
            self._windows.append(_Window(need.offset, need.end + self._extra(need)))

    def _extra(self, need: Need) -> int:
        """Bytes to keep past a region asked for: the rest of its loadable segment, within bounds
        (the tables the structure asks for next sit beside it)."""
        if self.layout is None:
            return 0
        seg = next((s for s in self.layout.loads if s.offset <= need.offset < s.end), None)
        return 0 if seg is None else max(0, min(seg.end, need.offset + KEEP_SEGMENT) + READ_PAST - need.end)

    def _plan_windows(self, layout: ElfLayout) -> None:
        """What a deflated stream keeps before the structure says more: the first loadable
        segment (a small member whole), the one holding ``PT_DYNAMIC`` and those after it (see the
        module docstring)."""
        if self._inflater is None:
            return
        loads = layout.loads
        self._sections = self._sections and elf.sections_at_end(layout, self.size)
        first = self._windows[0]  # what is held already stays; the first segment's rest is kept
        first.end = max(len(first.buf), self.size if self.size <= KEEP_WHOLE else min(loads[0].end if loads else 0, KEEP_PREFIX))
        self._windows += self._end_windows(layout)

    def _end_windows(self, layout: ElfLayout) -> list[_Window]:
        """What is kept of the member's second half: the section headers at its end and what
        follows them, while they may be read for the symbols (``sections``), else the segments of
        ``PT_DYNAMIC`` and after."""
        if self._sections:
            return [_Window(layout.shoff, min(self.size, layout.shoff + KEEP_SEGMENT) + READ_PAST)]
        return _dynamic_windows(layout)

    def _restart_or_fail(self) -> None:
        """The stream ended without what the structure needs: from the start once more, keeping
        the regions now known, or an error."""
        need = self._need
        if need is None or need.end > self.size:
            self.error = f"the member ends before the {need.size if need else 0} bytes at {need.offset if need else 0} its structure points to"
            return
        if self.passes >= MAX_PASSES:
            self.error = f"its structure was not read in {MAX_PASSES} passes over the member"
            return
        self.passes += 1
        self._inflater = raw_inflater()
        self._pos = self._cpos = 0
        for w in self._windows:
            if w.start >= 0 and not w.covers(w.start, w.end - w.start):
                w.buf = bytearray()


def _dynamic_windows(layout: ElfLayout) -> list[_Window]:
    """The loadable segment holding ``PT_DYNAMIC`` (around it) and every one after it, where
    patchelf puts the tables it rewrites (at most ``KEEP_SEGMENT`` bytes each)."""
    dyn = layout.dynamic
    home = next((s for s in layout.loads if dyn is not None and s.offset <= dyn.offset < s.end), None)
    if dyn is None or home is None:
        return []
    start = max(home.offset, dyn.offset - KEEP_SEGMENT)
    around = _Window(start, min(home.end, max(dyn.end, start + KEEP_SEGMENT)) + READ_PAST)
    return [around] + [_Window(s.offset, min(s.end, s.offset + KEEP_SEGMENT) + READ_PAST) for s in layout.loads if s.offset >= home.end]


__all__ = ["CHUNK", "KEEP_PREFIX", "KEEP_SEGMENT", "KEEP_WHOLE", "SEEK_MIN", "ElfStream"]
