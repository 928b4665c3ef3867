"""The one place a wheel classifier and a torch exports reader are made: from what a source offers
a scan (``access.ScanAccess``), whatever kind of source it is.

- range reads alone (live): ``classify.RangeClassifier`` and ``exports.WheelExports`` through them;
- recorded scans alone (a snapshot's replay): ``classify.ReplayClassifier`` and
  ``exports.ReplayExports``, offline (what the snapshot lacks is ``unknown``, never read);
- both (a snapshot extended live): the replay first, the range readers for what it lacks;
- a recorder (a snapshot being recorded): every finished scan and every torch's exports, replayed or
  read, also go to it, in their stored forms.

A new kind of source offers a ``ScanAccess`` (``net/source.py``) and gets the same judgement as
every other: nothing here knows which kind it is.
"""

from __future__ import annotations

from collections.abc import Callable

from ...data.rules import AbiRules
from ...rules.abi import ExportsSource
from .access import ScanAccess, ScanRecorder
from .classify import InspectingClassifier, RangeClassifier, ReplayClassifier, ScanRecord
from .exports import ReplayExports, WheelExports, encode_exports


def classifier(access: ScanAccess, rules: AbiRules) -> InspectingClassifier:
    """The classifier of native wheels read through ``access`` (judged by ``rules``: components.toml [abi])."""
    if access.recorded is None:
        return range_classifier(access, rules)
    live = range_classifier(access, rules) if access.ranges is not None else None
    return ReplayClassifier(access.recorded.scans, live=live, record=_scans_to(access.recorder))


def range_classifier(access: ScanAccess, rules: AbiRules) -> RangeClassifier:
    """The live classifier of ``access`` alone (its range reads; the bench and the snapshot tools
    read its stats and scan records); ``ValueError`` when ``access`` reads nothing live."""
    ranges = access.ranges
    if ranges is None:
        raise ValueError("this source reads no wheel by range requests")
    return RangeClassifier(
        ranges.transport,
        ranges.cache,
        rules,
        say=ranges.say,
        record=_scans_to(access.recorder),
        connections=ranges.connections,
        tails=ranges.tails,
        scan_budget=ranges.scan_budget,
        beside=ranges.beside,
        records=ranges.records,
    )


def exports_reader(access: ScanAccess) -> ExportsSource:
    """What a torch wheel exports, read through ``access``."""
    if access.recorded is None:
        return _wheel_exports(access)
    live = _wheel_exports(access) if access.ranges is not None else None
    return ReplayExports(access.recorded.exports, live=live, record=_exports_to(access.recorder))


def _wheel_exports(access: ScanAccess) -> WheelExports:
    ranges = access.ranges
    if ranges is None:
        raise ValueError("this source reads no wheel by range requests")
    # a snapshot being recorded keeps every torch's whole exports (its replay reads nothing): no partial record answers there
    records = ranges.exports_records if access.recorder is None else None
    return WheelExports(ranges.transport, ranges.cache, record=_exports_to(access.recorder), say=ranges.say, beside=ranges.beside, records=records)


def _scans_to(recorder: ScanRecorder | None) -> Callable[[str, ScanRecord], None] | None:
    """Each scan to ``recorder`` in its stored form (None: nothing records)."""
    if recorder is None:
        return None
    keep = recorder

    def record(key: str, found: ScanRecord) -> None:
        keep.record_scan(key, found.to_dict())

    return record


def _exports_to(recorder: ScanRecorder | None) -> Callable[[str, frozenset[str]], None] | None:
    """Each torch's exports to ``recorder`` in their stored form (None: nothing records)."""
    if recorder is None:
        return None
    keep = recorder

    def record(key: str, symbols: frozenset[str]) -> None:
        keep.record_exports(key, encode_exports(symbols), symbols=len(symbols))

    return record


__all__ = ["classifier", "exports_reader", "range_classifier"]
