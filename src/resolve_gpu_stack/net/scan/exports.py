"""What a torch exports, read from its wheel by range requests (a declared target has no torch on
disk): the defined dynamic symbols of the wheel's ``torch/lib/libtorch*.so`` / ``libc10*.so``.

Each library is read by its structure (``scan/elfstream.py``): its dynamic section, string, hash
and symbol tables where its program headers say they are. In a released torch, ``PT_DYNAMIC`` is
in the last fifth of a 448 MB ``libtorch_cpu.so`` and the string table in its last 6 MB (patchelf
rewrote it), its symbol table in its first MBs. So the library is read from its end (entered in
the middle of the deflate stream, in one read), then from its start up to that table (a streamed
range). Its end is read from the section header table patchelf wrote beside the string table,
when the headers agree with the program headers (``elf.read_by_sections``), else from
``PT_DYNAMIC``'s segment: torch 2.15.0's exports cost 17 MB of its wheel (60 MB from
``PT_DYNAMIC``), not the 510 MB of inflating both large libraries up to their ends. Its aarch64
builds have their program headers near the end too (``libtorch_cuda.so``'s 94 MB before its end):
they are read in the same entered read as the section headers (83 MB of the 484 MB wheel). The cost is
what the data needs (by default at most the libraries' own compressed bytes, ``budget`` bounds it
further), paid once per torch build: the answer is cached by the wheel's sha256 (its URL and size
without one) and, while a snapshot is recorded, recorded in it; a snapshot replays it offline. A
wheel that cannot be read answers ``symbols=None`` with why, never a guess.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...errors import CrawlError
from ...model import IndexFile
from ...rules.abi import TorchExports
from ...scan import elf, zipmeta
from ...scan.elfstream import ElfStream
from ...urls import without_fragment
from ..cache import HttpCache
from ..transport import Transport
from .classify import STREAM_PIECE, RangeReader, RangesUnavailable, scan_key

if TYPE_CHECKING:
    from .rangeproc import RangeProcess

log = logging.getLogger(__name__)

# libraries read at once: the two largest side by side (their round trips overlap); the read is
# mostly Python holding the GIL, so more threads only add connections and switches (torch 2.15.0
# alone, 4 runs each: 1 thread 0.76 s / 0.67 s CPU, 2: 0.74 s / 0.68 s, 4: 0.74 s / 0.73 s)
LIBRARY_THREADS = 2
TORCH_LIB_DIR = "torch/lib/"
_TORCH_LIB = TORCH_LIB_DIR.encode()  # as a central directory spells it (ASCII: the same in UTF-8 and cp437)


class _OverBudget(Exception):
    pass


def encode_exports(symbols: frozenset[str]) -> bytes:
    """The stored form: sorted names, one a line, deflated."""
    return zlib.compress("\n".join(sorted(symbols)).encode("utf-8"), 6)


def decode_exports(data: bytes, *, limit: int = 512 * 2**20) -> frozenset[str] | None:
    """The names of ``encode_exports``; None when ``data`` is not such a record."""
    try:
        inflater = zlib.decompressobj()
        text = inflater.decompress(data, limit)
        if inflater.unconsumed_tail:
            return None
        return frozenset(filter(None, text.decode("utf-8").split("\n")))
    except (zlib.error, UnicodeDecodeError):
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportsRecord:
    """A torch wheel's exports as a record holds them: ``symbols``, the names it exports among
    ``universe`` (None: among all names, a full record); ``filename``: for messages."""

    symbols: frozenset[str]
    universe: frozenset[str] | None
    filename: str | None = None


class WheelExports:
    """``ExportsSource`` over HTTP: a torch wheel's exports by range reads, cached. Thread-safe;
    each wheel is read at most once per process."""

    def __init__(
        self,
        transport: Transport,
        cache: HttpCache | None,
        *,
        record: Callable[[str, frozenset[str]], None] | None = None,
        say: Callable[[str], None] | None = None,
        budget: int | None = None,
        beside: RangeProcess | None = None,
        records: Callable[[str], ExportsRecord | None] | None = None,
    ) -> None:
        self._records = records  # exports records by the torch wheel's sha256 (``records.py``)
        self._beside = beside  # reads run in this second process once it is ready
        self._transport = transport
        self._cache = cache
        self._record = record
        self._say = say
        self._budget = budget
        self._lock = threading.Lock()
        self._memo: dict[str, TorchExports] = {}

    def __call__(self, version: Any, file: IndexFile | None) -> TorchExports:
        if file is None:
            return TorchExports(version=str(version), symbols=None, source=f"no wheel of torch {version} on its index to read them from")
        key = scan_key(file)
        with self._lock:
            if key not in self._memo:
                self._memo[key] = self._read(str(version), file, key)
            return self._memo[key]

    def _read(self, version: str, file: IndexFile, key: str) -> TorchExports:
        if self._cache is not None:
            raw = self._cache.get_exports(key)
            symbols = decode_exports(raw) if raw is not None else None
            if symbols is not None:
                self._recorded(key, symbols)
                return TorchExports(version=version, symbols=symbols, source=f"{file.filename} (cached)")
        found = self._records(file.sha256) if self._records is not None and file.sha256 else None
        if found is not None and found.universe is None:
            log.info("%s: %d exports from its exports record", file.filename, len(found.symbols))
            self._recorded(key, found.symbols)
            return TorchExports(version=version, symbols=found.symbols, source=f"{file.filename} (its exports record, by its sha256)", recorded=True)
        if found is not None:  # the answer for the names it holds; every other name read from the wheel, once asked
            wider = functools.cache(lambda: self._wheel(version, file, key))
            source = f"{file.filename} (its exports record for {len(found.universe or ())} names, by its sha256)"
            return TorchExports(version=version, symbols=found.symbols, source=source, universe=found.universe, wider=wider, recorded=True)
        return self._wheel(version, file, key)

    def _wheel(self, version: str, file: IndexFile, key: str) -> TorchExports:
        """``file``'s exports read from its libraries, cached (and recorded) by ``key``."""
        if self._say is not None:
            self._say(f"reading the exports of {file.filename} (its libraries' symbol tables, by range requests)")
        found = self.read(version, file)
        if found.symbols is not None:
            if self._cache is not None:
                self._cache.put_exports(key, encode_exports(found.symbols))
            self._recorded(key, found.symbols)
        return found

    def read(self, version: str, file: IndexFile) -> TorchExports:
        """A fresh read of ``file``'s exports (no cache): in the second process when it is ready
        (``net/scan/rangeproc.py``), else here."""
        answer = self._beside.exports(version, file, self._budget) if self._beside is not None else None
        return answer if answer is not None else self._fresh(version, file)

    def _fresh(self, version: str, file: IndexFile) -> TorchExports:
        started = time.perf_counter()
        try:
            symbols, read = self._read_wheel(file)
        except (_OverBudget, zipmeta.ZipError, elf.ElfError, RangesUnavailable) as exc:
            return TorchExports(version=version, symbols=None, source=f"{file.filename}: {exc}")
        except CrawlError as exc:
            return TorchExports(version=version, symbols=None, source=f"{file.filename}: {exc.message}")
        seconds = time.perf_counter() - started
        log.info("%s: %d exports, %d bytes read in %.1f s", file.filename, len(symbols), read, seconds)
        return TorchExports(version=version, symbols=symbols, source=f"{file.filename} ({read} bytes read in {seconds:.1f} s)")

    def _recorded(self, key: str, symbols: frozenset[str]) -> None:
        if self._record is not None:
            self._record(key, symbols)

    def _read_wheel(self, file: IndexFile) -> tuple[frozenset[str], int]:
        read = RangeReader(self._transport, without_fragment(file.url))
        start, tail, size = read.tail(min(zipmeta.TAIL_BYTES, file.size) if file.size else zipmeta.TAIL_BYTES)
        eocd = zipmeta.find_eocd(tail, size)
        if eocd.cd_offset >= start:
            directory = tail[eocd.cd_offset - start : eocd.cd_offset - start + eocd.cd_size]
        else:
            directory = read.range(eocd.cd_offset, eocd.cd_offset + eocd.cd_size)
        entries = zipmeta.parse_central_directory(directory, eocd, names=lambda raw: raw.startswith(_TORCH_LIB))

        libraries = [e for e in entries if e.name.startswith(TORCH_LIB_DIR) and elf.torch_libs([e.name[len(TORCH_LIB_DIR) :]])]
        if not libraries:
            raise zipmeta.ZipError("no torch/lib/libtorch*.so or libc10*.so in the wheel")
        libraries.sort(key=lambda e: -e.compressed_size)  # the longest first: ~360 MB of libtorch_cuda, ~120 MB of libtorch_cpu
        with ThreadPoolExecutor(max_workers=min(LIBRARY_THREADS, len(libraries)), thread_name_prefix="torch-exports") as pool:
            found = list(pool.map(lambda e: self._member_exports(read, e, eocd.cd_offset), libraries))
        return frozenset(s for names in found for s in names), read.bytes

    def _spend(self, read: RangeReader, more: int) -> None:
        """Raise ``_OverBudget`` unless reading ``more`` bytes on top of what ``read`` has read stays
        in the budget."""
        if self._budget is not None and read.bytes + more > self._budget:
            raise _OverBudget(f"its symbol tables are past the {self._budget}-byte budget ({read.bytes} bytes read)")

    def _feed(self, stream: ElfStream, read: RangeReader, at: int) -> None:
        """Feed ``stream`` the member's bytes (its data at ``at`` in the wheel) as it asks for them:
        its end in one read, and each span from its start as one streamed range, fed as it
        arrives and left once the stream wants bytes elsewhere or nothing more."""
        while (span := stream.wanted(stream.compressed_size)) is not None:
            if stream.reading_end:  # all of it is used, at once: one read, not pieces
                self._spend(read, span[1] - span[0])
                stream.feed(span[0], read.range(at + span[0], at + span[1]))
                continue

            def take(offset: int, data: bytes, span: tuple[int, int] = span) -> bool:
                self._spend(read, 0)
                stream.feed(offset - at, data)
                after = stream.wanted()
                return after is not None and after[0] == offset - at + len(data) < span[1]

            self._spend(read, min(span[1] - span[0], STREAM_PIECE))
            read.stream(at + span[0], at + span[1], take)

    def _member_exports(self, read: RangeReader, entry: zipmeta.ZipEntry, data_limit: int) -> tuple[str, ...]:
        """The defined dynamic symbols of ``entry``, read by its structure (see the module docstring)."""
        head = read.range(entry.header_offset, min(entry.header_offset + zipmeta.LOCAL_HEADER_SIZE + 2 * zipmeta.LOCAL_EXTRA_SLACK, data_limit))
        data_start = zipmeta.local_data_start(head)
        if data_start is None:
            raise zipmeta.ZipError(f"no local file header for {entry.name}")
        at = entry.header_offset + data_start
        stream = ElfStream(entry.method, entry.uncompressed_size, entry.compressed_size, exports=True, sections=True)
        self._feed(stream, read, at)
        if stream.structure is None or stream.structure.symbols is None:
            raise elf.ElfError(f"{entry.name}: {stream.error or 'its dynamic symbol table could not be read'}")
        return stream.structure.symbols.exports


class ReplayExports:
    """A snapshot's recorded exports (``lookup(key)``: the stored bytes or None); offline, or live
    for what it lacks while it is extended."""

    def __init__(
        self,
        lookup: Callable[[str], bytes | None],
        *,
        live: Callable[[Any, IndexFile | None], TorchExports] | None = None,
        record: Callable[[str, frozenset[str]], None] | None = None,
    ) -> None:
        self._lookup = lookup
        self._live = live
        self._record = record

    def __call__(self, version: Any, file: IndexFile | None) -> TorchExports:
        if file is not None:
            key = scan_key(file)
            raw = self._lookup(key)
            symbols = decode_exports(raw) if raw is not None else None
            if symbols is not None:
                if self._record is not None:
                    self._record(key, symbols)
                return TorchExports(version=str(version), symbols=symbols, source=f"{file.filename} (recorded in the snapshot)")
        if self._live is not None:
            return self._live(version, file)
        what = file.filename if file is not None else f"torch {version}"
        return TorchExports(version=str(version), symbols=None, source=f"the exports of {what} are not in the snapshot")


__all__ = ["ExportsRecord", "ReplayExports", "WheelExports", "decode_exports", "encode_exports"]
