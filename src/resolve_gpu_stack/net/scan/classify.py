"""The resolver's wheel classifier over HTTP: a native wheel's ``.so`` members read with range
requests (``scan/wheelscan/``), never the whole wheel; the answer cached by the wheel's sha256.

- ``RangeClassifier``: live. The cache (``HttpCache`` kind ``scans-v1``, entries of the current
  ``SCAN_SCHEMA`` only: an older one is scanned again) first, keyed by the wheel's sha256 (its URL and size when the page gave no hash); else range reads through the
  ``Transport`` (its policy, credentials and retries), at most ``budget(size)`` bytes per wheel:
  2% of the wheel, at least ``floor`` (the zip's tail and directory alone take tens of KB) and
  at most ``cap``. A server that answers a range with the whole file (200) is left at once: the
  wheel is "not scanned", never downloaded to classify it. Every finished scan goes to ``record``
  (a snapshot being recorded). A scan reads several ``.so`` members at once (``WheelScanner``'s
  ``parallel``, up to ``MAX_PARALLEL``): each round's ranges are requested concurrently, so a wheel
  of 40 members costs a few round trips, not 40. A round takes the first member's range, then the
  others' while together they take at most ``ROUND_SHARE`` of the budget left (``within_budget``:
  the largest member, the likeliest to link torch, keeps room to be read on). At most
  ``connections`` range requests of this classifier are in flight together (the transport's).
  Before reading, a scan record of the wheel's sha256 (``records``: ``net/scan/records.py``), when
  one is configured or shipped, answers it, as recorded provenance (install confirms it).
- ``ReplayClassifier``: a snapshot's recorded scans; a wheel the snapshot has no scan of (or a
  scan recorded before imports were read) is ``unknown``, never agnostic, and never an error.

``readers.classifier`` makes the one a source's ``ScanAccess`` calls for (``access.py``: range
reads, recorded scans, or both): what a command judges with follows from where it reads. A scan answers a ``model.abi.WheelAbi``:
what the wheel's shared objects import; ``rules/abi.py`` judges it against a torch.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from ...data.rules import AbiRules
from ...errors import CrawlError
from ...model import IndexFile
from ...model.abi import READ_RECORDED, UNKNOWN, WheelAbi
from ...resolver.coupling import WheelClassifier
from ...scan import zipmeta
from ...scan.wheelscan import WheelScanner, first_tail
from ...urls import redact_url, without_fragment
from ..cache import HttpCache, cache_url
from ..client import Response
from ..metadata import TailMemo
from ..settings import SCAN_BUDGET
from ..transport import Transport, content_range

if TYPE_CHECKING:
    from ...scan.wheelscan import WheelScan
    from .rangeproc import RangeProcess

log = logging.getLogger(__name__)

BUDGET_SHARE = 0.02  # of a wheel's bytes
BUDGET_FLOOR = 4 * 2**20  # a ceiling, not a charge: a wheel of many members (numpy: 22, 2.3 MB of 16.6 MB) may need it
BUDGET_CAP = 16 * 2**20
IGNORED_RANGE = "the server ignored Range"  # in the why of a scan a server's whole-file answer ended
MAX_PARALLEL = 64  # members read at once in one wheel: a wheel's first round asks for their heads together
ROUND_SHARE = 0.5  # of the budget left: what members after the first may take in one round (and what those read by their structure ask for together)
STREAM_PIECE = 512 * 2**10  # bytes of a streamed range fed to the scanner at a time (it is left, its connection closed, once nothing more in it is wanted)


def budget(size: int, *, share: float = BUDGET_SHARE, floor: int = BUDGET_FLOOR, cap: int = BUDGET_CAP) -> int:
    """The most bytes read to classify a wheel of ``size`` bytes: 2% of it, at least ``floor``
    (ranges overlap the tail already read, so a small wheel's budget is not its size), at most ``cap``."""
    return max(1, min(cap, max(floor, int(size * share))))


def scan_key(file: IndexFile) -> str:
    """The cache and snapshot key of a wheel's scan: its sha256, else its URL and size."""
    if file.sha256:
        return f"sha256={file.sha256.lower()}"
    return f"url={cache_url(without_fragment(file.url))} size={file.size if file.size is not None else ''}"


SCAN_SCHEMA = 5  # 1: a coupling kind without imports (read as not scanned); 2: the wheel's imports; 3: read by structure; 4: never entered at a member's end; 5: a guess from names says so (``read = names``)
# A snapshot's records of schemas 2 and 3 replay as recorded (the bundled snapshots); the cache
# scans an older entry again: the reader before structure took "no torch in the first bytes" for an
# answer, and schema 3's may rest on a member entered near its end, which a forged chain of deflate
# blocks fools (issue 48). Schema 4's reader wrote a wheel nothing ties to torch judged by the
# library names in its members' first bytes without ``read = names``: its "cuda" or "none" may be
# such a guess, so the cache scans it again (schema 5 marks the guess) and a scan record of schema
# 4 (``records.py``) reads it as unverified; a snapshot's replays as it always has. (Whatever a
# plan's verdict rests on, install reads it again from the verified file: ``env/confirm.py``.)
OLDER_READERS = (2, 3)  # replayed as recorded (``READ_RECORDED``)
UNMARKED_GUESSES = 4  # its "cuda" or "none" may be a guess from names that does not say so
RECORDED_SCHEMAS = (*OLDER_READERS, UNMARKED_GUESSES, SCAN_SCHEMA)


@dataclass(frozen=True, slots=True, kw_only=True)
class ScanRecord:
    """One wheel's scan as stored (cache, snapshot): what its shared objects import, and what the
    scan cost."""

    abi: WheelAbi
    bytes_read: int = 0
    reads: int = 0
    file_size: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCAN_SCHEMA, **self.abi.to_dict(), "bytes_read": self.bytes_read, "reads": self.reads, "file_size": self.file_size}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], schemas: tuple[int, ...] = (SCAN_SCHEMA,)) -> ScanRecord | None:
        """None when ``data`` is not a scan record of one of ``schemas`` (a corrupt, foreign or older
        entry: scan again, or, replaying, not known)."""
        if not isinstance(data, Mapping) or data.get("schema") not in schemas:
            return None
        try:
            abi = WheelAbi.from_dict(data)
            if data.get("schema") in OLDER_READERS:  # an older reader's: provisional (``model/abi.py``, READS)
                abi = replace(abi, read=READ_RECORDED)
            return cls(
                abi=abi,
                bytes_read=int(data.get("bytes_read", 0)),
                reads=int(data.get("reads", 0)),
                file_size=int(data.get("file_size", 0)),
            )
        except (KeyError, TypeError, ValueError):
            return None


def not_scanned(why: str, **cost: int) -> ScanRecord:
    """The record of a scan that did not finish: kind unknown, with why."""
    return ScanRecord(abi=WheelAbi(kind=UNKNOWN, why=why), **cost)


@dataclass(frozen=True, slots=True)
class ScanStats:
    """What the scans of one run read and cost."""

    wheels: int = 0  # scanned over the network
    cached: int = 0
    bytes_read: int = 0
    wheel_bytes: int = 0  # the scanned wheels' sizes, together
    seconds: float = 0.0
    not_scanned: int = 0  # range ignored, budget reached, unreadable
    recorded: int = 0  # answered by a scan record by the wheel's sha256 (``net/scan/records.py``), nothing read


class _Tally:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.stats = ScanStats()

    def add(self, **counts: float) -> None:
        with self._lock:
            now = asdict(self.stats)
            self.stats = ScanStats(**{k: now[k] + counts.get(k, 0) for k in now})


class RangesUnavailable(Exception):
    """The server will not answer range reads (it ignored or refused Range): a scan, or a torch's
    exports read, ends without an answer (the reason is the message)."""


class RangeClassifier:
    """Classifies native wheels with range reads; see the module docstring. Thread-safe."""

    def __init__(
        self,
        transport: Transport,
        cache: HttpCache | None,
        rules: AbiRules,
        *,
        say: Callable[[str], None] | None = None,
        record: Callable[[str, ScanRecord], None] | None = None,
        budget: Callable[[int], int] = budget,
        connections: int = 96,
        tails: TailMemo | None = None,
        scan_budget: int = SCAN_BUDGET,
        beside: RangeProcess | None = None,
        records: Callable[[str], ScanRecord | None] | None = None,
    ) -> None:
        self._transport = transport
        self._records = records  # scan records by sha256 (``net/scan/records.py``): recorded provenance, install confirms
        self._rules = rules
        self._beside = beside  # scans run in this second process once it is ready (``net/scan/rangeproc.py``)
        self._tails = tails  # tails already read for METADATA: a scan starts from one without a request
        self._cache = cache
        self._say = say
        self._record = record
        self._budget = budget
        self._scan_budget = scan_budget
        self._tally = _Tally()
        self._connections = max(1, connections)
        self._slots = threading.BoundedSemaphore(self._connections)  # range requests in flight, all scans together

    @property
    def stats(self) -> ScanStats:
        return self._tally.stats

    def __call__(self, file: IndexFile) -> WheelAbi:
        return self.scan(file).abi

    def scan(self, file: IndexFile) -> ScanRecord:
        key = scan_key(file)
        if self._cache is not None:
            raw = self._cache.get_scan(key)
            record = _decode(raw) if raw is not None else None
            if record is not None:
                self._tally.add(cached=1)
                self._recorded(key, record)
                return record
        if self._records is not None and file.sha256:  # the sha256 the page or the lock gave: the one a record may answer for
            found = self._records(file.sha256)
            if found is not None:
                self._tally.add(recorded=1)
                log.info("%s: %s from its scan record (nothing read)", file.filename, found.abi.kind)
                self._recorded(key, found)
                return found
        started = time.perf_counter()
        record, final = self.read(file)
        seconds = time.perf_counter() - started
        self._tally.add(wheels=1, bytes_read=record.bytes_read, wheel_bytes=record.file_size, seconds=seconds, not_scanned=0 if final else 1)
        log.info(
            "scanned %s: %s, %d of %d bytes read in %d requests, %.2f s",
            file.filename,
            record.abi.kind,
            record.bytes_read,
            record.file_size,
            record.reads,
            seconds,
        )
        if final:
            if self._cache is not None:
                self._cache.put_scan(key, json.dumps(record.to_dict(), sort_keys=True).encode())
            self._recorded(key, record)
        return record

    def _recorded(self, key: str, record: ScanRecord) -> None:
        if self._record is not None:
            self._record(key, record)

    def read(self, file: IndexFile) -> tuple[ScanRecord, bool]:
        """A fresh scan of ``file`` (no cache): the record, and whether it is final (kept). In the
        second process when it is ready, else here."""
        if self._beside is not None:
            held = self._tails.get(without_fragment(file.url)) if self._tails is not None else None
            answer = self._beside.scan(file, held, self._rules)
            if answer is not None:
                return answer
        record, final, _ = self._scan(file)
        return record, final

    def inspect(self, file: IndexFile) -> tuple[ScanRecord, WheelScan | None]:
        """A fresh scan of ``file`` (no cache) with what every member needs: the record, and the
        finished scan (None when it did not finish; the record says why). For ``inspect``."""
        record, _, result = self._scan(file)
        return record, result

    def _scan(self, file: IndexFile) -> tuple[ScanRecord, bool, WheelScan | None]:
        """(the record, whether it is final: a refused range or a failed read is not cached, the
        finished scan)."""
        url = without_fragment(file.url)
        read = RangeReader(self._transport, url)
        try:
            held = self._tails.get(url) if self._tails is not None else None
            first = first_tail(file.size)  # all of a small wheel at once
            tail_start, tail, size = held or read.tail(min(first, self._budget(file.size)) if file.size else first)
            limit = self._budget(size)
            scanner = WheelScanner(size, parallel=MAX_PARALLEL)
            scanner.feed(tail_start, tail)
            while ranges := scanner.next_ranges(reach=int(max(0, limit - scanner.bytes_read) * ROUND_SHARE)):
                if scanner.tied:  # the evidence it needs: its members' dynamic sections
                    limit = max(limit, self._scan_budget)
                batch = within_budget(ranges, limit - scanner.bytes_read)
                if not batch:
                    grow = "--scan-budget BYTES reads further" if scanner.tied else "nothing ties it to torch"
                    scanner.stop(f"not scanned past the {limit}-byte budget, {scanner.bytes_read} bytes read of {size}; {grow}")
                    break
                self._read_round(read, batch, scanner)
            result = scanner.result()
        except RangesUnavailable as stop:
            self._note(f"{file.filename}: {stop}")
            return not_scanned(str(stop), bytes_read=read.bytes, reads=read.reads, file_size=file.size or 0), False, None
        except zipmeta.ZipError as exc:
            return not_scanned(f"not scanned: not a readable zip ({exc})", bytes_read=read.bytes, reads=read.reads, file_size=file.size or 0), True, None
        except CrawlError as exc:
            self._note(f"{file.filename}: not scanned: {exc}")
            return not_scanned(f"not scanned: {exc.message}", bytes_read=read.bytes, reads=read.reads, file_size=file.size or 0), False, None
        abi = result.abi(self._rules)
        if result.stopped:
            self._note(f"{file.filename}: {result.stopped}")
        # a scan stopped by the budget is not kept: a larger --scan-budget reads it again
        return ScanRecord(abi=abi, bytes_read=read.bytes, reads=read.reads, file_size=size), not (result.stopped and abi.kind == UNKNOWN), result

    def _read_round(self, read: RangeReader, ranges: Sequence[tuple[int, int]], scanner: WheelScanner) -> None:
        """Read a round's ``ranges`` concurrently (one connection slot each) and feed them to
        ``scanner``. Once its directory is read, each range is fed in pieces as it arrives and
        left (its connection closed) as soon as nothing in the rest of it is wanted: a member
        inflated to a dynamic section tens of MB in is one request, not one a chunk."""
        lock = threading.Lock()

        def one(span: tuple[int, int]) -> None:
            with self._slots:
                if not scanner.reading_members:
                    data = read.range(*span)
                    with lock:
                        scanner.feed(span[0], data)
                    return

                def take(at: int, data: bytes) -> bool:
                    with lock:
                        scanner.feed(at, data, continued=at != span[0])
                        return scanner.wanted(at + len(data), span[1])

                read.stream(*span, take)

        if len(ranges) == 1:
            one(ranges[0])
            return
        with ThreadPoolExecutor(max_workers=min(len(ranges), self._connections), thread_name_prefix="classify-range") as pool:
            for done in [pool.submit(one, span) for span in ranges]:
                done.result()

    def _note(self, message: str) -> None:
        log.info("%s", message)
        if self._say is not None:
            self._say(message)


def within_budget(ranges: Sequence[tuple[int, int]], left: int) -> list[tuple[int, int]]:
    """The ranges of a round to read now, in the scanner's order (largest member first): the first
    when it fits in ``left`` (none: the budget is reached), then the next ones while together they
    take at most ``ROUND_SHARE`` of ``left`` (the rest are asked again in the next round)."""
    if not ranges or ranges[0][1] - ranges[0][0] > left:
        return []
    out = [ranges[0]]
    room = int(left * ROUND_SHARE)
    for start, end in ranges[1:]:
        if end - start > room:
            break
        room -= end - start
        out.append((start, end))
    return out


class RangeReader:
    """Range reads of one wheel (from several threads); the first answer's final URL serves the later ranges."""

    def __init__(self, transport: Transport, url: str) -> None:
        self._transport = transport
        self._url = url
        self._via = url
        self._lock = threading.Lock()
        self.bytes = 0
        self.reads = 0

    def tail(self, n: int) -> tuple[int, bytes, int]:
        """(start, bytes, file size) of the last ``n`` bytes."""
        return self._get(f"bytes=-{n}", None)

    def range(self, start: int, end: int) -> bytes:
        return self._get(f"bytes={start}-{end - 1}", start)[1]

    def stream(self, start: int, end: int, take: Callable[[int, bytes], bool], *, piece: int = STREAM_PIECE) -> None:
        """Bytes ``[start, end)`` handed to ``take(offset, bytes)`` as they arrive, in pieces of
        about ``piece`` bytes, until ``take`` answers False (the connection is closed there: the
        rest is never received) or the range ends. A retried failure asks again from the first
        byte not taken: nothing is handed twice."""
        at = start

        def attempt() -> None:
            nonlocal at
            spec = f"bytes={at}-{end - 1}"
            resp, final, (first, last, _) = self._open(spec, at)
            try:
                held = bytearray()
                for chunk in self._transport.iter_body(resp, self._url, "range"):
                    self._took(len(chunk), final)  # received, whether it is taken or a reset cuts its piece
                    held += chunk
                    if len(held) < piece and at + len(held) <= last:
                        continue
                    data, held = bytes(held[: last + 1 - at]), bytearray()
                    at += len(data)
                    if not take(at - len(data), data) or at > last:
                        return
                if at <= last:
                    raise CrawlError(redact_url(self._url), f"range {spec} ended after {at - first} of its {last - first + 1} bytes")
            finally:
                self._transport.finish(resp)

        self._transport.retrying(self._url, attempt)

    def _get(self, spec: str, start: int | None) -> tuple[int, bytes, int]:
        transport = self._transport

        def attempt() -> tuple[int, bytes, int, str]:
            resp, final, (first, last, total) = self._open(spec, start)
            try:
                data = transport.read_body(resp, self._url, last - first + 1, "range")
            finally:
                transport.finish(resp)
            if len(data) != last - first + 1:
                raise CrawlError(redact_url(self._url), f"range {spec} answered {len(data)} bytes, Content-Range says {last - first + 1}")
            return first, data, total, final

        first, data, total, final = transport.retrying(self._url, attempt)
        self._took(len(data), final)
        return first, data, total

    def _open(self, spec: str, start: int | None) -> tuple[Response, str, tuple[int, int, int]]:
        """The open 206 answer to ``spec``, its final URL and its Content-Range; release it with
        the transport's ``finish``. A whole-file or refused answer is ``RangesUnavailable``."""
        transport = self._transport
        resp, final = transport.open(self._via, {"Range": spec, "Accept-Encoding": "identity"})
        with self._lock:  # every byte received counts, the status line and headers too (a refused answer's as well)
            self.bytes += resp.header_bytes
        try:
            if resp.status_code == 200:
                raise RangesUnavailable(f"not scanned: {IGNORED_RANGE} (the wheel is not downloaded to classify it)")
            if resp.status_code == 416 and start is None:
                raise RangesUnavailable("not scanned: the server refused the range")
            transport.check_status(resp, self._url, ok=(206,))
            found = content_range(resp, self._url, spec, start)
        except BaseException:
            transport.finish(resp)
            raise
        with self._lock:
            self.reads += 1
        return resp, final, found

    def _took(self, n: int, final: str) -> None:
        """``n`` bytes of a body received from ``final`` (the URL later ranges go to)."""
        with self._lock:
            self._via = final
            self.bytes += n


def _decode(raw: bytes) -> ScanRecord | None:
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return ScanRecord.from_dict(data) if isinstance(data, dict) else None


class InspectingClassifier(WheelClassifier, Protocol):
    """A wheel classifier that can also show one wheel in full (``inspect``)."""

    def inspect(self, file: IndexFile) -> tuple[ScanRecord, WheelScan | None]:
        """The scan of ``file`` (the record; the finished scan with every member, None when it
        did not finish or only its record is known, as in a snapshot)."""
        ...


class ReplayClassifier:
    """A snapshot's recorded scans (``lookup(key)``: the stored dict or None); offline. A wheel it
    has no scan of is ``unknown`` (said once through ``say``), or scanned live when the snapshot is
    being extended (``live``)."""

    def __init__(
        self,
        lookup: Callable[[str], Mapping[str, Any] | None],
        *,
        say: Callable[[str], None] | None = None,
        live: InspectingClassifier | None = None,
        record: Callable[[str, ScanRecord], None] | None = None,
    ) -> None:
        self._lookup = lookup
        self._say = say
        self._live = live  # a snapshot being extended: scan what it lacks
        self._record = record

    def __call__(self, file: IndexFile) -> WheelAbi:
        key = scan_key(file)
        raw = self._lookup(key)
        record = ScanRecord.from_dict(raw, RECORDED_SCHEMAS) if raw is not None else None
        if record is not None:
            if self._record is not None:
                self._record(key, record)
            return record.abi
        if self._live is not None:
            return self._live(file)
        why = _unrecorded(raw)
        log.info("%s: %s", file.filename, why)
        if self._say is not None:
            self._say(f"{file.filename}: {why}")
        return WheelAbi(kind=UNKNOWN, why=why)

    def inspect(self, file: IndexFile) -> tuple[ScanRecord, WheelScan | None]:
        """The recorded scan of ``file`` (its members' imports as recorded; no finished scan to
        show, the wheel is not read); what the snapshot lacks is scanned live when it is being
        extended, else ``unknown`` saying why."""
        raw = self._lookup(scan_key(file))
        record = ScanRecord.from_dict(raw, RECORDED_SCHEMAS) if raw is not None else None
        if record is not None:
            return record, None
        if self._live is not None:
            return self._live.inspect(file)
        return not_scanned(_unrecorded(raw), file_size=file.size or 0), None


def _unrecorded(raw: Mapping[str, Any] | None) -> str:
    """Why a snapshot has no usable scan of a wheel (``raw``: what it holds under its key)."""
    if raw is not None:
        return "its scan in the snapshot was recorded before imports were read: re-record it"
    return "not in snapshot: its shared objects were not scanned when it was recorded"


__all__ = [
    "IGNORED_RANGE",
    "BUDGET_CAP",
    "BUDGET_FLOOR",
    "BUDGET_SHARE",
    "InspectingClassifier",
    "MAX_PARALLEL",
    "OLDER_READERS",
    "RECORDED_SCHEMAS",
    "SCAN_SCHEMA",
    "UNMARKED_GUESSES",
    "RangeClassifier",
    "ReplayClassifier",
    "ScanRecord",
    "ScanStats",
    "budget",
    "not_scanned",
    "scan_key",
    "within_budget",
]
