"""``WheelScanner``: the reads that classify one wheel, in rounds (the zip's tail, its central directory, METADATA, then its shared objects), and the bytes fed back; ``scan_wheel`` and ``scan_file`` drive it."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import IO

from .. import elf
from ..elf import ElfLibraries
from ..elfstream import ElfStream
from ..inflate import INFLATE_ERRORS
from ..zipmeta import (
    DEFLATED,
    LOCAL_HEADER_SIZE,
    STORED,
    TAIL_BYTES,
    EndOfCentralDirectory,
    ZipEntry,
    ZipError,
    find_eocd,
    inflate_member,
    member_span,
    parse_central_directory,
)
from .member import Member, evaluate, member_range, open_member
from .result import (
    DEFAULT_CAP,
    FIRST_CHUNK,
    MAX_CENTRAL_DIRECTORY,
    MAX_CHUNK,
    MAX_INFLATED,
    MAX_MEMBERS,
    MAX_METADATA,
    MERGE_GAP,
    MERGE_MOST,
    METADATA_MEMBER,
    READ_ON,
    READ_THROUGH,
    TIME_LIMIT,
    Evidence,
    MemberScan,
    Stop,
    WheelScan,
    first_tail,
    is_shared_object,
    kind_of,
    may_be_scanned,
    torch_tie,
)


class WheelScanner:
    """Plan the reads that classify one wheel, and evaluate the bytes fed back.

    ``feed`` raises ``ZipError`` when the bytes are not a readable zip; a member that is not a
    readable ELF object makes the wheel ``unknown``, with the error in its ``MemberScan``.
    ``clock`` (seconds) measures the scanner's own work against ``time_limit``: by default the CPU
    time of the calling thread, so that other work on a busy machine is not counted against it.
    ``structural``: every member's libraries are read from its dynamic section, as for a wheel tied
    to torch, never guessed from the names in its first bytes (a guess a forger can steer: install's
    confirmation of a verdict from the verified file, ``env/confirm.py``).
    """

    def __init__(
        self,
        file_size: int,
        *,
        cap: int = DEFAULT_CAP,
        first_chunk: int = FIRST_CHUNK,
        max_chunk: int = MAX_CHUNK,
        parallel: int = 1,
        tail_bytes: int | None = None,
        max_members: int = MAX_MEMBERS,
        max_inflated: int = MAX_INFLATED,
        time_limit: float = TIME_LIMIT,
        clock: Callable[[], float] = time.thread_time,
        structural: bool = False,
    ) -> None:
        if file_size <= 0 or cap <= 0 or first_chunk <= 0 or parallel <= 0 or max_members <= 0 or max_inflated <= 0:
            raise ValueError("file_size, cap, first_chunk, parallel, max_members and max_inflated must be positive")
        self.file_size = file_size
        self.cap = cap
        self.first_chunk = first_chunk
        self.max_chunk = max(max_chunk, first_chunk)
        self.parallel = parallel
        self.max_members = max_members
        self.max_inflated = max_inflated
        self.time_limit = time_limit
        self.bytes_read = 0
        self.reads = 0
        self.inflated = 0  # every member together
        self.spent = 0.0  # seconds of the scanner's own work
        self._clock = clock
        self._tail_bytes = min(first_tail(file_size) if tail_bytes is None else tail_bytes, file_size)
        self._eocd: EndOfCentralDirectory | None = None
        self._held: tuple[int, bytes] | None = None  # the directory-phase blob (tail), reused for members
        self._pending: list[ZipEntry] | None = None
        self._active: list[Member] = []
        self._done: list[MemberScan] = []
        self._evidence: Evidence | None = None
        self._limited: str | None = None
        self._metadata: ZipEntry | None = None  # the wheel's METADATA, while it is not read
        self._metadata_held = bytearray()  # its first bytes, while a streamed read brings the rest
        self.tie: str | None = "its METADATA was not read"  # ``torch_tie``
        self._structural = structural  # every member's libraries from its dynamic section, never a guess from names (a local file's confirmation)
        self._stopped: str | None = None
        self._entries: dict[str, ZipEntry] = {}
        self._reread: set[str] = set()  # members read again by structure, from their start
        self.streamed = 0  # compressed bytes read by structure, every member together
        self._exempt = 0.0  # seconds inflating by structure: bounded by the bytes (the caller's budget), not by time_limit

    @property
    def done(self) -> bool:
        return self._pending is not None and not self._active and not self._pending and self._metadata is None

    @property
    def reading_members(self) -> bool:
        """Whether the zip's directory is read (its members are what is read now): from here a
        range may be fed in pieces as it arrives (``feed(..., continued=True)``)."""
        return self._pending is not None

    @property
    def tied(self) -> bool:
        """Whether the wheel is known to be tied to torch (``torch_tie``, or a member links it):
        its members are read to their dynamic sections, which may take more bytes."""
        return self._tied and (self._metadata is None or self._evidence is not None) and self._pending is not None

    def stop(self, why: str) -> None:
        """End the scan here (the caller's budget is spent): every member not finished is left
        unread (stop "limit"), the METADATA too; ``result`` then says what is known."""
        self._metadata = None
        self._stopped = self._stopped or why
        if self._pending is None:
            self._pending = []
        for m in list(self._active):
            m.stream = None
            self._finish(m, "limit")
        self._done += [MemberScan(name=e.name, size=e.uncompressed_size, stop="limit", libraries=None) for e in self._pending]
        self._pending.clear()

    def next_ranges(self, *, reach: int | None = None) -> list[tuple[int, int]]:
        """The ``(start, end)`` ranges (end exclusive) to read next; empty when the scan is done.

        ``reach``: the compressed bytes the members read by their structure ask for together in
        one round (shared among them), for a reader that streams each range and stops once
        nothing more in it is ``wanted``; by default each asks for ``elfstream.CHUNK``."""
        if self._eocd is None:
            return [(self.file_size - self._tail_bytes, self.file_size)]
        if self._pending is None:
            return [(self._eocd.cd_offset, self._eocd.cd_offset + self._eocd.cd_size)]
        started = self._clock()
        try:
            self._fill()
        finally:
            self._charge(started)
        first = [member_span(self._metadata, self.file_size)] if self._metadata is not None else []
        streams = sum(1 for m in self._active if m.stream is not None)
        each = None if reach is None or not streams else max(self.max_chunk, reach // streams)
        return first + _merged([member_range(m, cap=self.cap, max_chunk=self.max_chunk, file_size=self.file_size, reach=each) for m in self._active])

    def wanted(self, start: int, end: int) -> bool:
        """Whether a byte of ``[start, end)`` is still wanted soon: a member's next byte, or the
        METADATA's, lies there within ``READ_THROUGH`` bytes (a reader streaming a range stops once
        it is not: a member read from its end next asks for that range itself)."""
        end = min(end, start + READ_THROUGH)
        if self._metadata is not None and start <= member_span(self._metadata, self.file_size)[0] + len(self._metadata_held) < end:
            return True
        return any(start <= m.next_offset < end for m in self._active)

    def feed(self, start: int, data: bytes, *, continued: bool = False) -> None:
        """Bytes ``[start, start + len(data))`` of the wheel, as asked by ``next_ranges`` or not;
        ``continued``: they go on from the bytes fed before, in the same read (not counted as one)."""
        self.bytes_read += len(data)
        self.reads += 0 if continued else 1
        if self._pending is None:
            self._feed_directory(start, bytes(data))
            return
        started = self._clock()
        try:
            self._feed_metadata(start, data)
            for member in list(self._active):
                if member in self._active:
                    self._feed_member(member, start, data)
                if self._limited is None and self._clock() - started + self.spent - self._exempt > self.time_limit:
                    self._limit(f"its scan took over {self.time_limit:g} s of work")
        finally:
            self._charge(started)

    def _charge(self, started: float) -> None:
        self.spent += self._clock() - started
        if self._limited is None and self.spent - self._exempt > self.time_limit:
            self._limit(f"its scan took over {self.time_limit:g} s of work")

    def result(self) -> WheelScan:
        if not self.done:
            raise RuntimeError("the scan is not finished: read next_ranges() and feed them first")
        members = tuple(self._done)
        majors = tuple(sorted({v for m in members if m.libraries for v in m.libraries.cuda_majors}))
        scan = WheelScan(
            kind="unknown",
            members=members,
            bytes_read=self.bytes_read,
            reads=self.reads,
            file_size=self.file_size,
            evidence=self._evidence,
            cuda_majors=majors,
            limited=self._limited,
            tie=self.tie,
            stopped=self._stopped,
        )
        return replace(scan, kind=kind_of(scan))

    # -- the zip's directory -------------------------------------------------------------------

    def _feed_directory(self, start: int, data: bytes) -> None:
        eocd = self._eocd or self._feed_tail(start, data)
        if eocd is None:
            return
        for blob_start, blob in ((start, data), self._held or (start, data)):
            lo = eocd.cd_offset - blob_start
            if 0 <= lo and eocd.cd_offset + eocd.cd_size <= blob_start + len(blob):
                self._start_members(parse_central_directory(blob[lo : lo + eocd.cd_size], eocd, names=may_be_scanned))
                return

    def _feed_tail(self, start: int, data: bytes) -> EndOfCentralDirectory | None:
        """The end of the central directory, from the wheel's tail (the blob is held: it may hold
        members too); None when a longer tail is to be read first."""
        end = start + len(data)
        if end != self.file_size:
            raise ValueError(f"expected the wheel's tail (bytes up to {self.file_size}), got {start}-{end}")
        try:
            eocd = find_eocd(data, self.file_size)
        except ZipError:
            if start > 0 and len(data) < TAIL_BYTES:
                self._tail_bytes = min(TAIL_BYTES, self.file_size)
                return None
            raise
        if eocd.cd_size > MAX_CENTRAL_DIRECTORY:
            raise ZipError(f"central directory of {eocd.cd_size} bytes is over the {MAX_CENTRAL_DIRECTORY}-byte cap")
        self._eocd, self._held = eocd, (start, data)
        return eocd

    def _feed_metadata(self, start: int, data: bytes) -> None:
        """The METADATA, when ``data`` holds it: why the wheel may link torch (``torch_tie``)."""
        entry = self._metadata
        if entry is None:
            return
        lo, hi = member_span(entry, self.file_size)
        if start <= lo < start + len(data):  # from its start
            self._metadata_held = bytearray(data[lo - start : hi - start])
        elif self._metadata_held and start == lo + len(self._metadata_held):  # the rest of a read that streams
            self._metadata_held += data[: hi - start]
        else:
            return
        if lo + len(self._metadata_held) < hi and start + len(data) < self.file_size:
            return  # the rest comes with the next bytes of the same read
        blob, self._metadata, self._metadata_held = bytes(self._metadata_held), None, bytearray()
        try:
            text = inflate_member(blob, entry, max_size=MAX_METADATA).decode("utf-8", errors="replace")
        except ZipError:  # unreadable, or cut by the end of the bytes: tied, as for no METADATA
            return
        self.tie = torch_tie(text)
        if self._pending is not None and self.tie is not None:
            self._reopen()

    def _start_members(self, entries: list[ZipEntry]) -> None:
        self._metadata = _metadata_entry(entries)
        if self._held is not None and self._metadata is not None:
            self._feed_metadata(*self._held)
        shared = [e for e in entries if is_shared_object(e.name)]
        self._entries = {e.name: e for e in shared}
        _refuse_overlaps(shared)
        shared.sort(key=lambda e: -e.uncompressed_size)
        if len(shared) > self.max_members:  # unknown whatever the members say: none is read
            self._done = [MemberScan(name=e.name, size=e.uncompressed_size, stop="limit", libraries=None) for e in shared]
            self._limited = f"{len(shared)} shared objects, over the {self.max_members} one scan reads"
            shared = []
        self._pending = shared

    # -- members -------------------------------------------------------------------------------

    def _fill(self) -> None:
        """Activate members up to ``parallel``; feed them from the held tail where it covers them."""
        assert self._pending is not None and self._eocd is not None
        while True:
            self._activate(self._eocd.cd_offset)
            held = self._held
            covered = [m for m in self._active if held and held[0] <= m.next_offset < held[0] + len(held[1])]
            if not held or not covered:
                return
            if not self._fed_from(held, covered):
                return  # the held bytes end too soon for them: read

    def _activate(self, data_end: int) -> None:
        """Members taken from the pending ones until ``parallel`` are read at once (one whose
        local header lies past ``data_end``, the central directory's start, is an error)."""
        assert self._pending is not None
        while self._pending and len(self._active) < self.parallel:
            entry = self._pending.pop(0)
            member = Member(entry=entry, chunk=self.first_chunk, next_offset=entry.header_offset)
            self._active.append(member)
            if entry.header_offset + LOCAL_HEADER_SIZE > data_end:
                self._finish(member, "error", error=f"local header offset {entry.header_offset} is past the members' data")

    def _fed_from(self, held: tuple[int, bytes], covered: list[Member]) -> bool:
        """Feed the ``covered`` members from the ``held`` blob; whether any of them went on."""
        before = [(m, m.next_offset) for m in covered]
        for member in covered:
            if member in self._active:
                self._feed_member(member, *held)
        return not all(m in self._active and m.next_offset == at for m, at in before)

    def _feed_member(self, m: Member, start: int, data: bytes) -> None:
        if not start <= m.next_offset < start + len(data):
            return
        if m.stream is not None:
            self._feed_stream(m, m.stream, start, data)
            return
        piece = memoryview(data)[m.next_offset - start :]
        if m.data_start is None:
            opened = self._open(m, piece, at_end=start + len(data) >= self.file_size)
            if opened is None:
                return
            piece = opened
        assert m.data_end is not None
        compressed = bytes(piece[: m.data_end - m.next_offset])
        m.next_offset += len(compressed)
        m.read += len(compressed)
        m.chunk = min(m.chunk * 2, self.max_chunk)
        if not compressed:
            return
        self._inflate(m, compressed)

    def _open(self, m: Member, piece: memoryview, *, at_end: bool) -> memoryview | None:
        """``m`` opened from its local header at the start of ``piece``: the data after the header
        in ``piece``; None when it is finished (an error), read by its structure from here, or its
        header is not all in ``piece`` (``at_end``: and never will be)."""
        if len(piece) < LOCAL_HEADER_SIZE:
            if at_end:
                self._finish(m, "error", error=f"local header of {m.entry.name} runs past the end of the file")
            return None
        try:
            open_member(m, bytes(piece[:LOCAL_HEADER_SIZE]))
        except ZipError as exc:
            self._finish(m, "error", error=str(exc))
            return None
        assert m.data_start is not None
        piece = piece[m.data_start - m.next_offset :] if m.data_start - m.next_offset < len(piece) else piece[:0]
        m.next_offset = m.data_start
        if m.entry.name not in self._reread:
            return piece
        m.stream, m.inflater = ElfStream(m.entry.method, m.entry.uncompressed_size, m.entry.compressed_size, symbols=_links_torch, seek=False), None
        if piece:
            self._feed_stream(m, m.stream, m.data_start, bytes(piece))
        return None

    def _inflate(self, m: Member, compressed: bytes) -> None:
        room = min(self.cap - len(m.buf), self.max_inflated - self.inflated + 1)
        if m.inflater is None:
            out = compressed[:room]
        else:
            try:
                out = m.inflater.decompress(compressed, room)
            except INFLATE_ERRORS as exc:
                self._finish(m, "error", error=f"bad deflate data: {exc}")
                return
        m.buf += out
        self.inflated += len(out)
        if self.inflated > self.max_inflated:
            self._limit(f"over {self.max_inflated} bytes inflated")
            return
        outcome = evaluate(m, self.cap)
        if outcome is not None:
            self._finish(m, outcome.stop, error=outcome.error)

    def _read_on(self, m: Member, stop: Stop, error: str | None) -> bool:
        """Read ``m`` by its structure instead of stopping at ``stop`` (True: it goes on): a member
        that links torch and lacks its symbols, one whose first bytes (``cap``) did not tell, and
        any member of a wheel tied to torch whose libraries are not read from its dynamic section."""
        if not _can_read_on(m, stop, error):
            return False
        links = bool(m.libraries and m.libraries.torch_libs) or bool(elf.torch_libs(m.names))
        if not links and not self._tied and stop != "cap":  # an untied wheel's member that gave its names is judged by them
            return False
        stream = ElfStream(m.entry.method, m.entry.uncompressed_size, m.entry.compressed_size, symbols=_links_torch, seek=False)
        started = self._clock()
        stream.resume(bytes(m.buf), m.inflater, m.read)
        self._exempt += self._clock() - started
        m.stream, m.buf, m.inflater = stream, bytearray(), None
        if stream.done:
            self._stream_done(m, stream)
        return True

    @property
    def _tied(self) -> bool:
        """Whether the wheel may link torch: its METADATA or name (``torch_tie``), or a member that does."""
        return self._structural or self.tie is not None or self._evidence is not None

    def _reopen(self) -> None:
        """Once the wheel is tied to torch, the members already finished on a guess from their
        names are read again, by their structure, from their start."""
        again = [d for d in self._done if d.stop in READ_ON and d.stop != "error" and not d.links_torch and d.name not in self._reread]
        for d in again:
            self._done.remove(d)
            self._reread.add(d.name)
            assert self._pending is not None
            self._pending.append(self._entries[d.name])

    def _feed_stream(self, m: Member, stream: ElfStream, start: int, data: bytes) -> None:
        assert m.data_start is not None
        span = stream.wanted(stream.compressed_size)  # all of the data from where the stream is
        if span is None:
            return
        lo, hi = m.data_start + span[0], min(m.data_start + span[1], start + len(data))
        if lo < start or hi <= lo:
            return
        piece = bytes(data[lo - start : hi - start])
        m.read += len(piece)
        self.streamed += len(piece)
        started = self._clock()
        stream.feed(span[0], piece)
        self._exempt += self._clock() - started
        after = stream.wanted()
        if after is None:
            self._stream_done(m, stream)
        else:
            m.next_offset = m.data_start + after[0]

    def _stream_done(self, m: Member, stream: ElfStream) -> None:
        found = stream.structure
        if found is None:
            self._finish(m, "error", error=f"reading it by its structure: {stream.error}")
            return
        m.libraries, m.symbols = found.libraries, found.symbols
        self._finish(m, "symbols" if found.libraries.torch_libs else "dynamic", structural=True)

    def _finish(self, m: Member, stop: Stop, *, error: str | None = None, structural: bool = False) -> None:
        if m not in self._active:
            return
        if self._read_on(m, stop, error):
            return
        self._active.remove(m)
        scan = _member_scan(m, stop, error, structural=structural)
        self._done.append(scan)
        libs = scan.libraries
        if libs is not None and libs.torch_libs and self._evidence is None:
            self._evidence = Evidence(member=m.entry.name, library=libs.torch_libs[0])
            self._reopen()
        m.buf = bytearray()
        m.inflater = None
        m.stream = None

    def _limit(self, why: str) -> None:
        """The wheel's limits are reached: every member not finished stops here."""
        if not self._active and not self._pending:
            return  # nothing was left to read
        self._limited = self._limited or why
        for m in list(self._active):
            m.stream = None
            self._finish(m, "limit")
        for entry in self._pending or ():
            self._done.append(MemberScan(name=entry.name, size=entry.uncompressed_size, stop="limit", libraries=None))
        if self._pending:
            self._pending.clear()


def _metadata_entry(entries: list[ZipEntry]) -> ZipEntry | None:
    """The wheel's METADATA, when there is one (and not too large to read)."""
    meta = [e for e in entries if METADATA_MEMBER.match(e.name)]
    return meta[0] if len(meta) == 1 and meta[0].uncompressed_size <= MAX_METADATA else None


def _can_read_on(m: Member, stop: Stop, error: str | None) -> bool:
    """Whether ``m`` could be read on by its structure from where it stopped: a stop a structural
    read may do better, a stored or deflated member whose data start is known, not a broken one."""
    if m.stream is not None or stop not in READ_ON or m.data_start is None or m.entry.method not in (STORED, DEFLATED):
        return False
    if m.entry.method == DEFLATED and m.inflater is None:
        return False
    return error is None or not error.startswith(("bad deflate data", "member data ends", "local header"))


def _member_scan(m: Member, stop: Stop, error: str | None, *, structural: bool) -> MemberScan:
    """What the reading of ``m`` found: its libraries (those its names gave when it stopped
    short), its symbols when it links torch."""
    libs = m.libraries
    if libs is None and stop in ("cap", "error", "limit") and m.names:
        libs = ElfLibraries(needed=tuple(m.names), method="scan", complete=False)
    return MemberScan(
        name=m.entry.name,
        size=m.entry.uncompressed_size,
        stop=stop,
        libraries=libs,
        inflated=len(m.buf),
        read=m.read,
        error=error,
        symbols=m.symbols if libs is not None and libs.torch_libs else None,
        structural=structural or stop in ("dynamic", "end"),
    )


def _links_torch(libs: ElfLibraries) -> bool:
    return bool(libs.torch_libs)


def _refuse_overlaps(entries: list[ZipEntry]) -> None:
    """Shared objects whose data overlap (several entries sharing one deflate stream: a zip bomb's
    layout) are not a wheel: ``ZipError``."""
    spans = sorted((e.header_offset, e.header_offset + LOCAL_HEADER_SIZE + len(e.name.encode("utf-8")) + e.compressed_size, e.name) for e in entries)
    for (_, end, name), (start, _, other) in zip(spans, spans[1:], strict=False):
        if start < end:
            raise ZipError(f"members {name!r} and {other!r} overlap (a zip bomb's layout, not a wheel)")


def _merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """A round's ranges with the near ones joined (a request fewer each): in file order, a range
    joins the span before it when at most ``MERGE_GAP`` bytes lie between them and the span stays
    at most ``MERGE_MOST`` bytes (a wheel of a hundred small members, scipy's, is a few requests,
    not one a member). The bytes between are read, fed and counted like the rest (the budget sees
    them). Largest span first, as the budget takes them."""
    spans: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if spans and start - spans[-1][1] <= MERGE_GAP and max(end, spans[-1][1]) - spans[-1][0] <= MERGE_MOST:
            spans[-1] = (spans[-1][0], max(end, spans[-1][1]))
        else:
            spans.append((start, end))
    return sorted(spans, key=lambda span: span[0] - span[1])


def scan_wheel(read: Callable[[int, int], bytes], file_size: int, **options: object) -> WheelScan:
    """Classify a wheel through ``read(start, end)`` (end exclusive), e.g. HTTP range requests.

    ``options`` are ``WheelScanner``'s (``cap``, ``first_chunk``, ``max_chunk``, ``parallel``,
    ``tail_bytes``, ``max_members``, ``max_inflated``, ``time_limit``, ``clock``). Raises
    ``ZipError`` when the wheel is not a readable zip.
    """
    scanner = WheelScanner(file_size, **options)  # type: ignore[arg-type]
    while ranges := scanner.next_ranges():
        for start, end in ranges:
            data = read(start, end)
            if not data:
                raise ZipError(f"read({start}, {end}) returned no bytes")
            scanner.feed(start, data)
    return scanner.result()


def scan_file(fileobj: IO[bytes], file_size: int, **options: object) -> WheelScan:
    """Classify a whole wheel through an open binary file of ``file_size`` bytes (seek and read,
    never all of it at once): ``scan_wheel`` with the file as its ``read``."""

    def read(start: int, end: int) -> bytes:
        fileobj.seek(start)
        return fileobj.read(end - start)

    return scan_wheel(read, file_size, **options)
