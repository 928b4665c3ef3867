"""What a command reads the indexes through: a ``Source``.

A ``Source`` is a ``finder.Fetcher`` (pages and METADATA) that also supplies what a resolve judges
compiled wheels with: its wheel ``classifier`` (which can ``inspect`` one wheel) and its reader of a
torch wheel's exports; ``close`` releases it. Every kind implements it: the live HTTP fetcher
(``http.HttpFetcher``), a snapshot's replay (``snapshot.SnapshotFetcher``), a snapshot extended live
(``snapshot.FallbackFetcher``) and the recorder of a snapshot (``snapshot.RecordingFetcher``), so a
command judges the same whatever it reads through.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from ..index.finder import Fetcher

if TYPE_CHECKING:
    from ..data.definitions import Definitions
    from ..rules.abi import ExportsSource
    from .scan.classify import InspectingClassifier, ScanRecord


class Source(Fetcher, Protocol):
    """A fetcher with the parts a resolve judges with; see the module docstring."""

    def classifier(self, defs: Definitions, *, record: Callable[[str, ScanRecord], None] | None = None) -> InspectingClassifier:
        """The classifier of native wheels read through this source (each scan also to ``record``)."""
        ...

    def exports_reader(self, *, record: Callable[[str, frozenset[str]], None] | None = None) -> ExportsSource:
        """What a torch wheel exports, read through this source (each read also to ``record``)."""
        ...

    def close(self) -> None: ...


__all__ = ["Source"]
