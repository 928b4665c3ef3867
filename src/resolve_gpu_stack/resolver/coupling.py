"""How each planned package is bound to torch, found with evidence rather than only listed.

In order: the data (``indexes/components.toml``) wins; a METADATA that pins torch exactly (or to
one minor series) makes the package torch-bound (``torch-abi`` when the wheel also ships native
code); a native wheel (tags other than ``none-any``) the data does not cover is classified by an
injected ``WheelClassifier`` (the net layer reads its ``.so`` members' first bytes with range
requests, ``index/wheelscan.py``); a pure wheel is ``agnostic``.

A torch-ABI-bound package built for another torch (its pin, its ``+cuNNNtorchA.B`` label, or a
scan that found libtorch with nothing saying which torch) is a *mismatch*: no plan by default.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from ..data.definitions import Definitions
from ..model import Coupling, IndexFile
from ..model.request import TORCH
from .requirement import Cand, Req, contains

if TYPE_CHECKING:
    from ..index.wheelscan import WheelScan  # a scan is made (and its module loaded) only when a wheel is scanned


@dataclass(frozen=True, slots=True, kw_only=True)
class Classification:
    """What a wheel's shared objects say: its coupling, the evidence, the torch it was built for."""

    coupling: Coupling | None  # None: could not tell
    evidence: str
    built_for: str | None = None


class WheelClassifier(Protocol):
    """Classifies a native wheel from its bytes (the net layer: range reads, cached by sha256)."""

    def __call__(self, file: IndexFile) -> Classification: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Found:
    """A package's coupling with its evidence, and the ABI mismatch when there is one."""

    coupling: Coupling
    evidence: str
    built_for: str | None = None
    mismatch: str | None = None  # why it cannot run with the plan's torch


CLASSIFY_THREADS = 32  # each scan is a few sequential round trips: as many at once as the transport has connections

_KINDS = {"torch-abi": Coupling.TORCH_ABI, "cuda": Coupling.CUDA, "agnostic": Coupling.AGNOSTIC}


def classification_of(scan: WheelScan) -> Classification:
    """A ``wheelscan`` result as the resolver's ``Classification`` (``unknown``: coupling None)."""
    return Classification(coupling=_KINDS.get(scan.kind), evidence=scan.reason)


_LOCAL_TORCH = re.compile(r"torch(\d+(?:\.\d+)*)")


def is_native(file: IndexFile) -> bool:
    """A wheel whose tags carry an ABI or a platform: it may ship shared objects."""
    return any(t.abi != "none" or t.platform != "any" for t in file.tags)


def torch_pin(reqs: Sequence[Req]) -> SpecifierSet | None:
    """The torch requirement among ``reqs`` when it pins one version or one minor series."""
    for req in reqs:
        if req.name == TORCH and _pins_one(req.specifier):
            return req.specifier
    return None


def _pins_one(spec: SpecifierSet) -> bool:
    specs = list(spec)
    return len(specs) == 1 and specs[0].operator in ("==", "===")


def classify_all(files: Sequence[IndexFile], classifier: WheelClassifier | None) -> dict[str, Classification]:
    """``classifier`` over ``files`` concurrently (each is a few range reads), by URL."""
    if classifier is None or not files:
        return {}
    with ThreadPoolExecutor(max_workers=min(CLASSIFY_THREADS, len(files))) as pool:
        return dict(zip((f.url for f in files), pool.map(classifier, files), strict=True))


class ScanAhead:
    """Scans started before the plan is known: the closure crawl ``start``s each likely native
    wheel's scan as it meets it (``framework.scan_early``); called as a ``WheelClassifier`` it
    answers a started scan when it ends, any other wheel by scanning it then. Each wheel is scanned
    at most once. ``close`` drops the scans not begun and waits for the ones running."""

    def __init__(self, classifier: WheelClassifier, *, threads: int = CLASSIFY_THREADS) -> None:
        self._classifier = classifier
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="scan-ahead")
        self._lock = threading.Lock()
        self._futures: dict[str, Future[Classification]] = {}
        self._closed = False

    @property
    def stats(self) -> object:
        """The wrapped classifier's ``stats`` (None when it keeps none)."""
        return getattr(self._classifier, "stats", None)

    @property
    def started(self) -> int:
        """How many scans were started ahead."""
        with self._lock:
            return len(self._futures)

    def start(self, file: IndexFile) -> None:
        with self._lock:
            if not self._closed and file.url not in self._futures:
                self._futures[file.url] = self._pool.submit(self._classifier, file)

    def __call__(self, file: IndexFile) -> Classification:
        with self._lock:
            future = self._futures.get(file.url)
        return future.result() if future is not None else self._classifier(file)

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> ScanAhead:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def wants_scan(cand: Cand, reqs: Sequence[Req], defs: Definitions) -> bool:
    """Whether ``cand``'s coupling is left to a scan of its wheel: a native wheel the data does not
    cover, whose METADATA does not pin torch."""
    return cand.file is not None and is_native(cand.file) and defs.coupling_rule(cand.name, cand.version) is None and torch_pin(reqs) is None


def find_coupling(cand: Cand, reqs: Sequence[Req], defs: Definitions, torch: Version | None, scan: Classification | None) -> Found:
    """The coupling of ``cand`` (``reqs``: its own base requirements, before any override)."""
    pin = torch_pin(reqs)
    local = _local_torch(cand.version)
    built_for = local or (_pin_text(pin) if pin is not None else None)
    data = defs.coupling_rule(cand.name, cand.version)
    if data is not None:
        coupling, why = data
        mismatch = _pin_mismatch(pin, torch) if coupling is Coupling.TORCH_ABI else None
        return Found(coupling=coupling, evidence=why, built_for=built_for, mismatch=mismatch)
    f = cand.file
    native = f is not None and is_native(f)
    if pin is not None:
        if not native:
            return Found(coupling=Coupling.AGNOSTIC, evidence=f"METADATA pins torch{pin}, but the wheel is pure Python (no torch ABI)", built_for=built_for)
        why = f"METADATA pins torch{pin} and the wheel ships native code"
        return Found(coupling=Coupling.TORCH_ABI, evidence=why, built_for=built_for, mismatch=_local_mismatch(local, torch) or _pin_mismatch(pin, torch))
    if f is None:
        return Found(coupling=Coupling.AGNOSTIC, evidence="installed; its files were not read")
    if not native:
        return Found(coupling=Coupling.AGNOSTIC, evidence="pure Python wheel")
    if scan is None:
        return Found(coupling=Coupling.AGNOSTIC, evidence="native wheel, not scanned")
    return _scanned(scan, local, torch)


def _scanned(scan: Classification, local: str | None, torch: Version | None) -> Found:
    """A native wheel's coupling from its scan; torch-ABI with nothing saying which torch is a
    mismatch (it cannot be shown to be built for this one)."""
    if scan.coupling is None:
        return Found(coupling=Coupling.AGNOSTIC, evidence=f"native wheel; {scan.evidence}")
    built_for = local or scan.built_for
    if scan.coupling is not Coupling.TORCH_ABI:
        return Found(coupling=scan.coupling, evidence=scan.evidence, built_for=built_for)
    if built_for is None:
        return Found(coupling=Coupling.TORCH_ABI, evidence=scan.evidence, mismatch=f"{scan.evidence}; nothing says which torch it was built for")
    other = _local_mismatch(built_for, torch)
    return Found(coupling=Coupling.TORCH_ABI, evidence=scan.evidence, built_for=built_for, mismatch=f"{scan.evidence}; {other}" if other else None)


def _local_torch(version: Version) -> str | None:
    m = _LOCAL_TORCH.search(version.local or "")
    return m.group(1) if m else None


def _pin_text(pin: SpecifierSet) -> str:
    return next(iter(pin)).version


def _pin_mismatch(pin: SpecifierSet | None, torch: Version | None) -> str | None:
    if pin is None or torch is None or contains(pin, torch):
        return None
    return f"built for torch{pin}, torch is {torch}"


def _local_mismatch(series: str | None, torch: Version | None) -> str | None:
    """A ``+cuNNNtorchA.B`` build fits only a released torch of series A.B."""
    if series is None or torch is None:
        return None
    if torch.is_devrelease or torch.is_prerelease:
        return f"built for torch {series}, torch is the pre-release {torch}"
    if ".".join(str(p) for p in torch.release[: series.count(".") + 1]) != series:
        return f"built for torch {series}, torch is {torch}"
    return None
