"""How each planned package is bound to torch, found with evidence rather than only listed.

In order: the data (``indexes/components.toml``) wins; a METADATA that pins torch exactly (or to
one minor series) makes the package torch-bound (``torch-abi`` when the wheel also ships native
code); a native wheel (tags other than ``none-any``) the data does not cover is scanned by an
injected ``WheelClassifier`` (the net layer reads its ``.so`` members' first bytes with range
requests, ``scan/wheelscan/``) and judged against the plan's torch by what its shared objects
import (``rules/abi.py``: stable ABI, version-locked, per-torch builds, CUDA major); a pure wheel
is ``agnostic``. A scan that did not finish is ``unknown``, never ``agnostic``.

A package that cannot run with the plan's torch (a pin or ``+cuNNNtorchA.B`` label naming another
torch, a verdict's refusal) is a *mismatch*: no plan by default.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from ..data.definitions import Definitions
from ..model import Coupling, IndexFile
from ..model.abi import CUDA, UNKNOWN, AbiKind, AbiVerdict, WheelAbi
from ..model.request import TORCH
from ..rules.abi import AbiPolicy, AbiTorch, judge, requires_floor, ties_to_torch
from ..rules.versions import torch_series
from .requirement import Cand, Req, contains


class WheelClassifier(Protocol):
    """Tells what a native wheel's shared objects import (the net layer: range reads, cached by
    sha256; a snapshot's recorded scans). A scan that does not finish answers kind ``unknown``."""

    def __call__(self, file: IndexFile) -> WheelAbi: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Found:
    """A package's coupling with its evidence, its ABI verdict, and why it cannot run with the
    plan's torch when it cannot (``mismatch``)."""

    coupling: Coupling
    evidence: str
    built_for: str | None = None
    mismatch: str | None = None  # why it cannot run with the plan's torch
    abi: AbiVerdict | None = None
    torch_tie: bool = True  # its name or METADATA ties it to torch (``rules.abi.ties_to_torch``): a build from its sdist may help


CLASSIFY_THREADS = 96  # each scan is a few sequential round trips: as many at once as the transport has connections

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


def classify_all(files: Sequence[IndexFile], classifier: WheelClassifier) -> dict[str, WheelAbi]:
    """``classifier`` over ``files`` concurrently (each is a few range reads), by URL: on the pool of
    a ``ScanAhead`` (the resolve's: the scans it started are collected, not repeated), else on one
    made for this call. No other pool scans."""
    if not files:
        return {}
    if isinstance(classifier, ScanAhead):
        return classifier.scan_all(files)
    with ScanAhead(classifier, threads=min(CLASSIFY_THREADS, len(files))) as pool:
        return pool.scan_all(files)


class ScanAhead:
    """Scans started before the plan is known: the closure crawl ``start``s each likely native
    wheel's scan as it meets it (``framework.scan_early``); called as a ``WheelClassifier`` it
    answers a started scan when it ends, any other wheel by scanning it then. Each wheel is scanned
    at most once. ``close`` drops the scans not begun and waits for the ones running."""

    def __init__(self, classifier: WheelClassifier, *, threads: int = CLASSIFY_THREADS) -> None:
        self._classifier = classifier
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="scan-ahead")
        self._lock = threading.Lock()
        self._futures: dict[str, Future[WheelAbi]] = {}
        self._closed = False
        self._watch: Callable[[IndexFile, WheelAbi], Callable[[], object] | None] | None = None
        self._followed = False
        self._job: threading.Thread | None = None

    def follow(self, watch: Callable[[IndexFile, WheelAbi], Callable[[], object] | None]) -> None:
        """After each scan started ahead, ask ``watch`` whether its result calls for more work (the
        kept torch's exports, when a wheel imports its C++ symbols): the first job it returns runs on
        a thread of its own at once (not queued behind the scans: the plan waits for it),
        overlapping the crawl like the scans (``close`` waits for it)."""
        self._watch = watch

    def _scan(self, file: IndexFile) -> WheelAbi:
        abi = self._classifier(file)
        watch = self._watch
        if watch is not None and not self._followed:
            job = watch(file, abi)
            if job is not None:
                with self._lock:  # (close takes it before it shuts the pool down)
                    if not (self._followed or self._closed):
                        self._job = threading.Thread(target=job, name="scan-ahead-job", daemon=True)
                        self._job.start()
                    self._followed = True
        return abi

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
                self._futures[file.url] = self._pool.submit(self._scan, file)

    def __call__(self, file: IndexFile) -> WheelAbi:
        with self._lock:
            future = self._futures.get(file.url)
        return future.result() if future is not None else self._classifier(file)

    def scan_all(self, files: Sequence[IndexFile]) -> dict[str, WheelAbi]:
        """Each file's scan, by URL, all at once on this pool: a scan started ahead is collected,
        the others start now (after ``close``: one after another on the calling thread)."""
        pending: dict[str, Future[WheelAbi] | IndexFile] = {}
        with self._lock:
            for f in files:
                if f.url not in pending:
                    pending[f.url] = self._futures.get(f.url) or (f if self._closed else self._pool.submit(self._classifier, f))
        return {url: job.result() if isinstance(job, Future) else self._classifier(job) for url, job in pending.items()}

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self._job is not None:
            self._job.join()

    def __enter__(self) -> ScanAhead:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def wants_scan(cand: Cand, defs: Definitions) -> bool:
    """Whether ``cand``'s coupling is left to a scan of its wheel: a native wheel the data does not
    cover, whether or not its METADATA pins torch (binaries decide, pins do not): known from the
    page's row alone, before the METADATA is read."""
    return cand.file is not None and is_native(cand.file) and defs.coupling_rule(cand.name, cand.version) is None


def find_coupling(cand: Cand, reqs: Sequence[Req], defs: Definitions, torch: AbiTorch | None, scan: WheelAbi | None, policy: AbiPolicy) -> Found:
    """The coupling of ``cand`` (``reqs``: its own base requirements, before any override) and,
    for a scanned native wheel, its ABI verdict against ``torch`` (``rules/abi.py``)."""
    version = torch.version if torch is not None else None
    pin = torch_pin(reqs)
    local = _local_torch(cand.version, defs)
    built_for = local or (_pin_text(pin) if pin is not None else None)
    data = defs.coupling_rule(cand.name, cand.version)
    if data is not None:
        coupling, why = data
        return Found(coupling=coupling, evidence=why, built_for=built_for, mismatch=_pin_mismatch(pin, version) if coupling is Coupling.TORCH_ABI else None)
    if pin is not None and (cand.file is None or not is_native(cand.file)):
        return _pinned(cand, pin, local, version)
    if cand.file is None:
        return Found(coupling=Coupling.AGNOSTIC, evidence="installed; its files were not read")
    if not is_native(cand.file):
        return Found(coupling=Coupling.AGNOSTIC, evidence="pure Python wheel")
    return _judged(cand, reqs, torch, scan or NOT_SCANNED, policy, local=local, built_for=built_for)


def _judged(cand: Cand, reqs: Sequence[Req], torch: AbiTorch | None, scan: WheelAbi, policy: AbiPolicy, *, local: str | None, built_for: str | None) -> Found:
    """A native wheel the data and its METADATA leave open: its scan judged against ``torch``."""
    verdict = judge(cand.name, scan, torch, policy, version=cand.version, requires_floor=_requires_floor(reqs), declared_series=local)
    # nothing to record for a wheel needing neither, unless that rests on a guess (unverified: said in the plan and the lock)
    recorded = verdict if verdict.kind is not None or verdict.cuda_majors or verdict.refusal or verdict.unverified else None
    evidence, mismatch = _evidence(scan, verdict), verdict.refusal
    if mismatch is not None and local is not None and torch is not None and _local_mismatch(local, torch.version) is None:
        # the label names the kept torch's series, the symbols refuse it: the label lied
        mismatch = f"its label +{cand.version.local} says torch {local}, but its symbols refuse it (the label lied): {mismatch}"
    pin = torch_pin(reqs)
    if pin is not None:  # binaries decide, pins do not: the pin is reported, the verdict decides
        version = torch.version if torch is not None else None
        off = _local_mismatch(local, version) or _pin_mismatch(pin, version)
        if mismatch is not None and off is not None:
            mismatch = f"{off}; {mismatch}"
        elif mismatch is None and off is not None and torch is not None:
            evidence = f"{cand.name} pins torch{pin}; kept {torch.version}: {_runs_because(scan, verdict, torch.version)}; {evidence}"
        elif mismatch is None and off is None:
            evidence = f"METADATA pins torch{pin}; {evidence}"
    tie = ties_to_torch(cand.name, [r.name for r in reqs])
    return Found(coupling=_coupling(scan, verdict), evidence=evidence, built_for=built_for, mismatch=mismatch, abi=recorded, torch_tie=tie)


def _runs_because(scan: WheelAbi, verdict: AbiVerdict, torch: Version) -> str:
    """Why a wheel pinning another torch runs on ``torch`` anyway, from its own symbols."""
    if verdict.kind is AbiKind.STABLE:
        return f"its compiled parts import only the C shim (stable ABI, torch >= {verdict.floor})"
    if verdict.kind is AbiKind.LOCKED:
        return f"its compiled parts import only symbols {torch} exports"
    if verdict.kind is AbiKind.BUILDS:
        return f"it has a build for torch {torch_series(torch)}"
    return "its compiled parts do not link torch"


NOT_SCANNED = WheelAbi(kind=UNKNOWN, why="its shared objects were not scanned")


def _pinned(cand: Cand, pin: SpecifierSet, local: str | None, torch: Version | None) -> Found:
    """A package whose METADATA pins torch: torch-bound when its wheel ships native code."""
    built_for = local or _pin_text(pin)
    if cand.file is None or not is_native(cand.file):
        return Found(coupling=Coupling.AGNOSTIC, evidence=f"METADATA pins torch{pin}, but the wheel is pure Python (no torch ABI)", built_for=built_for)
    why = f"METADATA pins torch{pin} and the wheel ships native code"
    return Found(coupling=Coupling.TORCH_ABI, evidence=why, built_for=built_for, mismatch=_local_mismatch(local, torch) or _pin_mismatch(pin, torch))


_COUPLING = {AbiKind.STABLE: Coupling.TORCH_STABLE, AbiKind.LOCKED: Coupling.TORCH_ABI, AbiKind.BUILDS: Coupling.TORCH_ABI, AbiKind.UNKNOWN: Coupling.UNKNOWN}


def _coupling(scan: WheelAbi, verdict: AbiVerdict) -> Coupling:
    if verdict.kind is None:
        return Coupling.CUDA if scan.kind == CUDA else Coupling.AGNOSTIC
    return _COUPLING[verdict.kind]


def _evidence(scan: WheelAbi, verdict: AbiVerdict) -> str:
    """The coupling's reason in words: what the shared objects import, and the verdict's note."""
    words = scan.why
    if verdict.kind is AbiKind.STABLE:
        words = f"LibTorch stable ABI (C-shim imports only), torch >= {verdict.floor}; {scan.why}"
    elif verdict.kind is AbiKind.LOCKED:
        words = f"version-locked: imports {len(scan.cxx)} C++ symbols of torch; {scan.why}"
    elif verdict.kind is AbiKind.BUILDS:
        words = f"one build per torch ({', '.join(verdict.builds)}); {scan.why}"
    return words


def _requires_floor(reqs: Sequence[Req]) -> str | None:
    """The lowest torch the wheel's own (unconditional) torch requirement admits."""
    return requires_floor((s.operator, s.version) for r in reqs if r.name == TORCH for s in r.specifier)


def _local_torch(version: Version, defs: Definitions) -> str | None:
    """The torch series a build's local label names, in any dialect of components.toml
    ``[per-torch]`` (``+cu12torch2.9cxx11abiTRUE``, ``+cu.12.8.torch.2.11``, ``+pt29cu128``)."""
    said = defs.per_torch.built_for(version.local) if defs.per_torch is not None else None
    if said is not None:
        return said.torch
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
