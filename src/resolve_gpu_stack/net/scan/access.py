"""What a source offers the scan: the wheels' bytes by range reads, a snapshot's recorded scans, a
recorder of scans, or what a composition of sources offers together (``ScanAccess``).

A ``net.source.Source`` knows pages and METADATA; the scan is not its business. It says only what a
scan can read through, as small typed values, and ``readers.py`` alone makes the wheel classifier
and the torch exports reader from them:

- ``RangeAccess`` (a live source): range requests through its transport, with its cache (scans
  and exports by a wheel's sha256), the zip tails its METADATA reads left, its connection count
  and scan budget, its second process (``rangeproc.py``) and the scan records by sha256
  (``records.py``: shipped, ``--scan-records``, a wheelhouse's ``records/``);
- ``RecordedScans`` (a snapshot's replay): the stored scan and stored exports under a wheel's scan
  key (``classify.scan_key``), as they were recorded (a dict, deflated names), or None;
- ``ScanRecorder`` (a snapshot being recorded): told each finished scan and each torch's exports,
  in the same stored forms.

A snapshot extended live offers its recorded scans and its live source's ranges: what the snapshot
lacks is read live. A recording offers its inner source's access with itself as the recorder.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..settings import SCAN_BUDGET

if TYPE_CHECKING:
    from ..cache import HttpCache
    from ..metadata import TailMemo
    from ..transport import Transport
    from .classify import ScanRecord
    from .exports import ExportsRecord
    from .rangeproc import RangeProcess


@dataclass(frozen=True, slots=True, kw_only=True)
class RangeAccess:
    """A live source's way to a wheel's bytes (see the module docstring). ``say``: told what a scan
    or an exports read is doing; ``beside``: the source's second process (None: scans run here)."""

    transport: Transport
    cache: HttpCache | None
    tails: TailMemo | None = None
    connections: int = 32
    scan_budget: int = SCAN_BUDGET  # bytes a torch-tied wheel's scan may read (``--scan-budget``)
    say: Callable[[str], None] | None = None
    beside: RangeProcess | None = None
    records: Callable[[str], ScanRecord | None] | None = None  # scan records by sha256
    exports_records: Callable[[str], ExportsRecord | None] | None = None  # torch wheels' exports records by sha256


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedScans:
    """A snapshot's records by scan key: ``scans(key)``, the stored scan (a ``ScanRecord``'s dict);
    ``exports(key)``, a torch wheel's stored exports (``exports.encode_exports``); None where it has none."""

    scans: Callable[[str], Mapping[str, Any] | None]
    exports: Callable[[str], bytes | None]


class ScanRecorder(Protocol):
    """Where a recording source keeps what the scan found (called from the scan's threads)."""

    def record_scan(self, key: str, entry: Mapping[str, Any]) -> None:
        """A wheel's scan under its scan key, as stored (``ScanRecord.to_dict``)."""
        ...

    def record_exports(self, key: str, data: bytes, *, symbols: int) -> None:
        """A torch wheel's exports under its scan key, as stored (``exports.encode_exports``: ``symbols`` names)."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ScanAccess:
    """What a source offers a scan: range reads, recorded scans, or both (recorded first, the rest
    read live), and a recorder when it records. At least one way to an answer."""

    ranges: RangeAccess | None = None
    recorded: RecordedScans | None = None
    recorder: ScanRecorder | None = None

    def __post_init__(self) -> None:
        if self.ranges is None and self.recorded is None:
            raise ValueError("a source offers a scan range reads, recorded scans or both")


__all__ = ["RangeAccess", "RecordedScans", "ScanAccess", "ScanRecorder"]
