"""What a command reads the indexes through: a ``Source``.

A ``Source`` is a ``finder.Fetcher`` (pages and METADATA) that also says what a scan of a compiled
wheel can read through (``scan_access``: range reads, a snapshot's recorded scans, or both, and a
recorder when it records; ``scan/access.py``); ``close`` releases it. It makes no classifier and no
exports reader: ``scan/readers.py`` alone makes both from its ``ScanAccess``, so a command judges
the same whatever it reads through. Every kind implements it: the live HTTP fetcher
(``http.HttpFetcher``: range reads), a snapshot's replay (``snapshot.SnapshotFetcher``: its
recorded scans), a snapshot extended live (``snapshot.FallbackFetcher``: both) and the recorder of a
snapshot (``snapshot.RecordingFetcher``: its inner source's, itself the recorder).

A new kind of source implements the ``Fetcher`` methods, ``scan_access`` (what of the above it
can offer) and ``close``; nothing of the scan changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ..index.finder import Fetcher

if TYPE_CHECKING:
    from .scan.access import ScanAccess


class Source(Fetcher, Protocol):
    """A fetcher that says what a scan reads through; see the module docstring."""

    def scan_access(self) -> ScanAccess:
        """What a scan of a wheel found through this source reads through (see ``scan/access.py``)."""
        ...

    def close(self) -> None: ...


__all__ = ["Source"]
