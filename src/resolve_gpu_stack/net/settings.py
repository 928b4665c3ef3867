"""The network settings, typed from the flag to the socket: what a command's fetcher, its transport
and the range child (``rangeproc.py``) are made from.

``cli/options.py`` reads the network flags once into a ``FetchSettings`` (its ``transport`` a
``TransportSettings``); ``http.HttpFetcher`` is made from it, hands ``transport`` to its
``transport.Transport``, and the range child gets the same ``TransportSettings`` value, pickled
over its pipe as that type. A new setting is one field here (its default the one default), one
row of the network flags (``cli/options.py``'s ``NETWORK_FLAGS``) and its use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .. import __version__
from ..index.parse import MAX_METADATA_BYTES
from .deadline import MIN_TRANSFER_RATE

USER_AGENT = f"resolve-gpu-stack/{__version__}"
SCAN_BUDGET = 256 * 2**20  # a wheel tied to torch (its METADATA, name or a member): its members are read to their dynamic sections
MAX_PAGE_BYTES = 64 * 2**20  # an index page's body, at most


@dataclass(frozen=True, slots=True, kw_only=True)
class TransportSettings:
    """What one ``transport.Transport`` is made from (in this process and in the range child)."""

    timeout: float = 30.0  # --timeout: seconds per read; the deadline per request is a multiple (``deadline.py``)
    retries: int = 4
    # uv uses 50; 16 made a 50-page round four waves at WAN latency, 32 a 215-package closure 19 round trips where 96 makes 15 (bench/README.md)
    max_connections: int = 96
    allow_insecure_hosts: tuple[str, ...] = ()  # --allow-insecure-host: plain http:// allowed there
    netrc_path: Path | None = None  # None: $NETRC, else ~/.netrc
    user_agent: str = USER_AGENT
    backoff_base: float = 0.2
    max_backoff: float = 10.0
    max_retry_after: float = 60.0  # a server's Retry-After is honoured up to this many seconds
    trust_env: bool = True  # proxies and trust stores from the environment
    system_certs: bool = False  # --system-certs: the system trust store (truststore) instead of certifi's
    min_transfer_rate: float = MIN_TRANSFER_RATE  # bytes per second a body earns a second more of its deadline by


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchSettings:
    """What one ``http.HttpFetcher`` is made from: its transport's settings, its body caps, the
    scan budget and whether scans run in a second process."""

    transport: TransportSettings = field(default_factory=TransportSettings)
    max_page_bytes: int = MAX_PAGE_BYTES
    max_metadata_bytes: int = MAX_METADATA_BYTES
    scan_budget: int = SCAN_BUDGET  # --scan-budget: most bytes read to scan one torch-tied wheel
    range_process: bool = True  # scans and exports reads in a second process (``rangeproc.py``)

    @property
    def connections(self) -> int:
        """Requests in flight at once (the pool's threads, the range reads of all scans together)."""
        return max(1, self.transport.max_connections)


__all__ = ["MAX_PAGE_BYTES", "SCAN_BUDGET", "USER_AGENT", "FetchSettings", "TransportSettings"]
