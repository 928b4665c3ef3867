"""The composition root: a command's ``Session`` and the resolve parts it hands out.

A ``Session`` is made once per command from its network settings (``NetworkOptions``): it builds
the command's one HTTP fetcher (one connection pool, one retry policy; no other place in the package
makes one), and hands out every part a command reads the network and the caches through:
resolve parts (live, a snapshot's replay, a snapshot extended live, a recording), the fetcher
downloads go through, the wheel cache. ``app.py`` makes it for each command and hands it to the
command's ``run``, which passes it on to whatever reads through it: nothing finds it ambient. It
closes what it made when the command ends.

``ResolveParts`` are a resolve's parts: the source (``net.source.Source``), the finder, the wheel
classifier, the source of the kept torch's exports and the store of computed plans (``HttpCache``;
none for a snapshot: a replay is as fast as reusing). Every command that resolves (``resolve``, ``lock`` with
flags or a config, ``check --online``, ``install`` and its dry run, ``snapshot``) and every one that
judges a compiled wheel (``candidates``, ``inspect``) gets them from here, so they all judge the
same: a resolve cannot be made without a classifier, and the classifier is the one made from what
its source offers a scan (``net/scan/readers.py``: live range reads, a snapshot's recorded scans,
or both when a snapshot is extended).

What a resolve needs only once its first requests are out (the resolver and resolvelib, the
scanner's readers, the scan records, the ABI judgement) is ``cli/resolving.py``, imported in one
place (``_resolving``): a resolve starts its first round (``resolver/roots.py``'s ``read_ahead``)
before, and the round trip overlaps that import; a reused plan and ``check`` never load it.

The torch exports a version-locked wheel is checked against come from the installed torch's
libraries on disk when the target is a probed interpreter that has that torch, else from the
fetcher (the torch wheel by range reads, or a snapshot's record).
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar, cast

from packaging.utils import canonicalize_name

from ..data.snapshots import bundled_path, bundled_snapshots, offline_hint
from ..errors import CrawlError, WriteError
from ..index.finder import Finder
from ..model.channel import torch_origin
from ..net.cache import HttpCache, cache_write_problem
from ..net.http import HttpFetcher
from ..net.settings import FetchSettings
from ..net.transport import NO_NETWORK_HINT
from ..resolver import reuse
from ..resolver.kept import kept_torch
from ..resolver.roots import read_ahead

if TYPE_CHECKING:
    from packaging.version import Version

    from ..data.definitions import Definitions
    from ..index.sdist import SdistMetadata
    from ..model import IndexFile, LockPlan, Target
    from ..model.abi import AbiVerdict, WheelAbi
    from ..model.cuda import CudaLabel
    from ..model.kept import KeptTorch
    from ..model.request import ResolveRequest
    from ..net.scan.classify import InspectingClassifier
    from ..net.snapshot import FallbackFetcher, FileCut, RecordingFetcher, SnapshotFetcher
    from ..net.source import Source
    from ..net.wheelcache import WheelCache
    from ..resolver.reuse import ResultStore
    from ..rules.abi import ExportsSource, TorchExports
    from .resolving import Resolving

_S = TypeVar("_S", bound="Source")
_T = TypeVar("_T")


@dataclass
class ResolveParts:
    """The parts every resolve of one command shares (one crawl, one classifier, one exports
    reader, one store); ``close`` when done (``with`` works). ``resolve`` may be called from
    several threads at once. The classifier and the exports reader are made by ``net/scan/readers.py``
    from what the source offers a scan (its ``scan_access``), when first asked for (``check``
    verifying hashes never loads the wheel scanner's modules).
    ``owns_source``: whether ``close`` closes the source (not when a ``Session`` holds it)."""

    defs: Definitions
    source: Source
    finder: Finder
    store: ResultStore | None = None
    owns_source: bool = True
    before_scan: Callable[[], None] | None = None  # called before the first scan: the live fetcher's scan records (``Session``)
    _disk: dict[str, TorchExports] = field(default_factory=dict)
    _made: dict[str, object] = field(default_factory=dict)  # what ``_once`` made, by name
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def classifier(self) -> InspectingClassifier:
        return self._scan_readers()[0]

    @property
    def exports(self) -> ExportsSource:
        return self._scan_readers()[1]

    def _scan_readers(self) -> tuple[InspectingClassifier, ExportsSource]:
        """The classifier and the exports reader, made together from the source's ``scan_access``."""

        def make() -> tuple[InspectingClassifier, ExportsSource]:
            if self.before_scan is not None:
                self.before_scan()
            return _resolving().scan_readers(self.source, self.defs)

        return self._once("scan", make)

    def _once(self, what: str, make: Callable[[], _T]) -> _T:
        """``make()``, the first time ``what`` is asked for (by any thread); after that, the same
        (each ``what`` is made by one ``make``: its type)."""
        with self._lock:
            if what not in self._made:
                self._made[what] = make()
            return cast("_T", self._made[what])

    def resolve(self, request: ResolveRequest, *, sdist_metadata: SdistMetadata | None = None) -> LockPlan:
        """The plan for ``request``: the one stored for the same inputs when nothing it came from
        changed (``resolver.reuse``), else resolved (the resolver and resolvelib load only then).
        ``sdist_metadata``: the build backend's word on a ``--build`` sdist whose PKG-INFO is not
        static (``cli/sources.py``'s ``sdist_metadata_of``)."""

        # the first pages, before the store is asked (a reused plan revalidates them too: waited for,
        # not asked again) and while the resolver and the scanner load (``cli/resolving.py``)
        ahead = read_ahead(self.finder, request, self.defs)

        def compute() -> LockPlan:
            resolving = _resolving()
            classifier, exports = self.classifier, self.exports_for(request.target)
            return resolving.plan(request, self.finder, self.defs, classifier=classifier, exports=exports, sdist_metadata=sdist_metadata)

        try:
            plan = reuse.reused_or(self.finder, self.store, request, self.defs, compute)
        except CrawlError as exc:
            kept = request.kept_torch
            raise fitting_offline_hint(exc, kept.version if kept is not None else None) from None
        if ahead is not None:  # done by now (the store's check or the resolver's first round waited for the same pages); never waited for
            ahead.join()  # on an error or Ctrl-C: it may be in a stalled read, and the fetcher's close deals with that
        return plan

    def exports_for(self, target: Target) -> ExportsSource:
        """The exports of a torch: read on disk when ``target`` has that torch installed (a probed
        interpreter), else through the source."""
        torch = canonicalize_name("torch")
        where = target.installed_at.get(torch)
        installed = target.installed.get(torch)

        def source(version: Version, file: IndexFile | None) -> TorchExports:
            if where is not None and installed == version:
                key = f"{where}:{version}"
                if key not in self._disk:
                    self._disk[key] = _resolving().disk_exports(where, str(version))
                return self._disk[key]
            return self.exports(version, file)

        return source

    def kept_torch(self, target: Target, requires: tuple[str, ...] = (), cuda: CudaLabel | None = None) -> KeptTorch | None:
        """``target``'s kept torch (``resolver/kept.py``), made once for these parts: its CUDA by
        the one rule (a declared torch without label: its wheel's METADATA, its runtime pin; else
        ``cuda``), a declared torch's wheel on its index (its exports are read there). None: the
        target has no torch."""
        key = f"kept:{target.interpreter}:{target.platform}:{target.python_full_version}:{sorted(target.installed.items())}:{cuda}"
        # a probed torch is known from its files (its exports read on disk): no index page is read for it here
        finder = self.finder if target.interpreter is None else None
        made: KeptTorch | None = self._once(key, lambda: kept_torch(target, finder, requires=requires, cuda=cuda)[0])
        return made

    def judge(self, name: str, abi: WheelAbi, requires_dist: Sequence[str], kept: KeptTorch | None, target: Target) -> AbiVerdict | None:
        """The verdict on wheel ``name`` (what it imports: ``abi``; its ``Requires-Dist``) against
        the kept torch (None: the target has none): its CUDA, its exports from disk (a probed
        target) or from its wheel (``kept.wheel``: PyPI's, or the PyTorch index's)."""
        if kept is None:
            return None
        return _resolving().verdict(name, abi, requires_dist, kept, self.exports_for(target), self.defs)

    def close(self) -> None:
        if self.owns_source:
            self.source.close()

    def __enter__(self) -> ResolveParts:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def resolve_parts(
    defs: Definitions,
    source: Source,
    *,
    store: ResultStore | None = None,
    finder: Finder | None = None,
    owns_source: bool = True,
    before_scan: Callable[[], None] | None = None,
) -> ResolveParts:
    """The parts around ``source`` (live, recording, a snapshot, or a snapshot extended live),
    keeping computed plans in ``store`` (the live fetcher's cache) when given; ``finder``: one
    already reading through ``source`` (its pages shared), else a new one; ``before_scan``: called
    before the first scan (a session's: the live fetcher's scan records)."""
    finder = finder if finder is not None else Finder(source, defs)
    return ResolveParts(defs=defs, source=source, finder=finder, store=store, owns_source=owns_source, before_scan=before_scan)


# -- the session -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class NetworkOptions:
    """A command's network settings, read once from its flags: what its one HTTP fetcher is made
    with. ``cache_dir``: the HTTP and wheel cache; ``progress``: told what is being fetched;
    ``on_retry``: told each retry as it is scheduled."""

    cache_dir: Path
    fetch: FetchSettings = field(default_factory=FetchSettings)  # the fetcher's, its transport's and the range child's settings
    progress: Callable[[str], None] | None = None
    on_retry: Callable[[str], None] | None = None
    scan_records: str | None = None  # --scan-records / scan-records: a records URL, "none" (None: the shipped records only)


class Session:
    """Every part one command reads indexes, wheels and caches through (see the module docstring).
    Parts are made when first asked for (a command that reads nothing opens nothing); ``close``
    (``with`` works) closes every one of them, last made first."""

    def __init__(self, network: NetworkOptions) -> None:
        self.network = network
        self._live: HttpFetcher | None = None
        self._wheel_cache: WheelCache | None = None
        self._closing: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        self._cache_lock = threading.Lock()
        self._cache_dir: Path | None = None
        self._records_set = False  # the live fetcher's scan records (``_records_before_scan``)

    # -- the cache folder -----------------------------------------------------------------------
    def cache_dir(self) -> Path:
        """The cache folder this command uses: ``--cache-dir`` (else the default) when it can be
        written; else, said in one line, a temporary folder of this command's, removed when it
        ends (the command goes on without caching). Neither: ``WriteError`` (exit 4)."""
        with self._cache_lock:
            if self._cache_dir is None:
                self._cache_dir = self._usable_cache_dir()
            return self._cache_dir

    def _usable_cache_dir(self) -> Path:
        root = self.network.cache_dir
        why = cache_write_problem(root)
        if why is None:
            return root
        try:
            tmp = Path(tempfile.mkdtemp(prefix="resolve-gpu-stack-cache-"))
            also = cache_write_problem(tmp)
        except OSError as exc:
            tmp, also = None, exc.strerror or str(exc)
        if tmp is None or also is not None:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
            raise WriteError(
                f"the cache folder {root} cannot be written ({why}), nor a temporary folder ({also})",
                hint="point --cache-dir (or XDG_CACHE_HOME) at a writable folder with free space, or set TMPDIR to one",
            )
        print(f"warning: the cache folder {root} cannot be written ({why}); this run caches nothing (it uses {tmp}, removed at its end)", file=sys.stderr)
        with self._lock:
            self._closing.insert(0, lambda: shutil.rmtree(tmp, ignore_errors=True))  # closed last
        return tmp

    def use_scan_records(self, setting: str) -> None:
        """A config's ``scan-records`` (the flag, when typed, wins: the caller checks): the records
        the fetcher's classifier reads, whether or not the fetcher is made yet."""
        with self._lock:
            self.network = dataclasses.replace(self.network, scan_records=setting)
            live = self._live if self._records_set else None
            if live is not None:
                self._use_records(live)

    def _records_before_scan(self) -> None:
        """The live fetcher's scan records and torch exports records, set once, before its first
        scan (``ResolveParts.before_scan``): their modules load with the scanner's, after the first requests."""
        with self._lock:
            live = self._live
            if live is not None and not self._records_set:
                self._use_records(live)
                self._records_set = True

    def _use_records(self, live: HttpFetcher) -> None:
        """The fetcher's scan records and torch exports records: the configured ones."""
        n = self.network  # its scan_records parsed at the edge (``options.network_options``, a config's by its table row)
        _resolving().use_records(live, n.scan_records, n.progress)

    # -- the one HTTP fetcher -------------------------------------------------------------------
    def live(self) -> HttpFetcher:
        """The command's HTTP fetcher (its one connection pool), made on first use."""
        root = self.cache_dir()  # not under ``_lock``: a temporary folder's removal is registered under it
        with self._lock:
            if self._live is None:
                n = self.network
                self._live = HttpFetcher(
                    n.fetch,
                    cache=HttpCache(root, write_behind=True),  # written off the fetching threads, flushed at close
                    progress=n.progress,
                    on_retry=n.on_retry,
                )
                self._closing.append(self._live.close)  # its scan records: set before its first scan (``_records_before_scan``)
            return self._live

    def download_fetcher(self, defs: Definitions | None = None) -> HttpFetcher:
        """The fetcher wheels are downloaded through (the same one), knowing the credentials of
        the configured indexes (``defs``) when given. The session closes it."""
        fetcher = self.live()
        for definition in defs.indexes.values() if defs is not None else ():
            if definition.url:
                fetcher.credentials.remember(definition.url)
        return fetcher

    def wheel_cache(self) -> WheelCache:
        """The wheel cache under the cache folder."""
        if self._wheel_cache is None:
            from ..net.wheelcache import WheelCache  # builds and downloads only: +10 M instructions (~2 ms) on a resolve (callgrind)

            self._wheel_cache = WheelCache.under(self.cache_dir())
        return self._wheel_cache

    # -- sources and resolve parts --------------------------------------------------------------
    def replay(self, root: Path, defs: Definitions) -> SnapshotFetcher:
        """A replay of the snapshot at ``root`` (no network)."""
        replay, _, _ = _snapshot_fetchers()
        return self._held(replay(root, {n: d.url for n, d in defs.indexes.items()}))

    def recording(
        self, defs: Definitions, output: Path, *, extend: Path | None = None, exclude_newer: str | None = None, cut: FileCut | None = None
    ) -> RecordingFetcher:
        """A recorder into the snapshot ``output`` of what is read live (``extend``: a snapshot
        replayed first, only what it lacks fetched live)."""
        replay, fallback, recorder = _snapshot_fetchers()
        bases = {n: d.url for n, d in defs.indexes.items()}
        inner: Source = fallback(replay(extend, bases), self.live()) if extend is not None else self.live()
        return self._held(recorder(inner, output, bases, exclude_newer=exclude_newer, cut=cut))

    def resolve_parts(self, defs: Definitions, *, source: Source | None = None, snapshot: Path | None = None, live_fallback: bool = False) -> ResolveParts:
        """A resolve's parts: over ``source`` when given; else the replay of ``snapshot``, what it
        lacks fetched live with ``live_fallback``; else live, the HTTP cache then keeping the
        computed plans (a replay is as fast as reusing). The session closes their source (closing
        the parts does not)."""
        scan = self._records_before_scan
        if source is not None:
            return resolve_parts(defs, source, owns_source=False, before_scan=scan)
        if snapshot is None:
            fetcher = self.live()
            return resolve_parts(defs, fetcher, store=fetcher.cache, owns_source=False, before_scan=scan)

        _, fallback, _ = _snapshot_fetchers()
        replay = self.replay(snapshot, defs)
        return resolve_parts(defs, fallback(replay, self.live()) if live_fallback else replay, owns_source=False, before_scan=scan)

    def _held(self, source: _S) -> _S:
        with self._lock:
            self._closing.append(source.close)
        return source

    # -- closing --------------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            closing, self._closing = self._closing, []
        for close in reversed(closing):
            close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _snapshot_fetchers() -> tuple[type[SnapshotFetcher], type[FallbackFetcher], type[RecordingFetcher]]:
    """The snapshot's fetchers: its replay, a replay extended live, a recorder."""
    from ..net.snapshot import FallbackFetcher, RecordingFetcher, SnapshotFetcher  # a snapshot only: +20 ms on a live resolve

    return SnapshotFetcher, FallbackFetcher, RecordingFetcher


def _resolving() -> type[Resolving]:
    """The half of a resolve loaded once its first requests are out (``cli/resolving.py``)."""
    # the resolver and resolvelib, the wheel scanner, the scan records, the ABI judgement: +40 ms of CPU before a
    # resolve's first request (the import after the modules loaded by then, median of 7)
    from .resolving import Resolving

    return Resolving


__all__ = ["NetworkOptions", "ResolveParts", "Session", "fitting_offline_hint", "offline_hinted", "resolve_parts"]


@contextmanager
def offline_hinted(torch: Version | None) -> Iterator[None]:
    """A ``CrawlError`` raised inside, with ``fitting_offline_hint`` for the target's ``torch``
    (``candidates``, ``inspect``: every door that reads an index names the snapshot that fits)."""
    try:
        yield
    except CrawlError as exc:
        raise fitting_offline_hint(exc, torch) from None


def fitting_offline_hint(exc: CrawlError, torch: Version | None) -> CrawlError:
    """``exc`` with the no-network hint naming the bundled snapshot that fits the kept ``torch``
    (``indexes/snapshots/bundled.toml``; None: the target has none); any other error as it is."""
    if exc.hint != NO_NETWORK_HINT:
        return exc
    path = bundled_path()
    if not path.is_file():  # an installed tool carries no snapshots
        return exc
    hint = offline_hint(bundled_snapshots(path), torch_origin(torch))  # where the kept torch was published: the snapshot of its origin
    if hint is None:
        return exc
    return type(exc)(exc.url, exc.cause, hint=hint, unreachable=exc.unreachable)
