"""One place that assembles a resolve's parts: the fetcher, the finder, the wheel classifier, the
source of the kept torch's exports and the store of computed plans (``HttpCache``; none for a
snapshot: a replay is as fast as reusing). Every command that resolves (``resolve``, ``lock`` with
flags or a config, ``check --online``, ``install`` and its dry run, ``snapshot``) and every one that
judges a compiled wheel (``candidates``, ``inspect``) gets them from here, so they all judge the
same: a resolve cannot be made without a classifier, and the classifier is the one its fetcher
supplies (live range reads, a snapshot's recorded scans, or both when a snapshot is extended).

The torch exports a version-locked wheel is checked against come from the installed torch's
libraries on disk when the target is a probed interpreter that has that torch, else from the
fetcher (the torch wheel by range reads, or a snapshot's record).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from packaging.version import Version

    from ..data.definitions import Definitions
    from ..index.finder import Finder
    from ..model import IndexFile, LockPlan, Target
    from ..model.abi import AbiVerdict, WheelAbi
    from ..model.cuda import CudaLabel
    from ..model.request import ResolveRequest
    from ..resolver.coupling import WheelClassifier
    from ..resolver.reuse import ResultStore
    from ..rules.abi import ExportsSource, TorchExports


@dataclass
class ResolveParts:
    """The parts every resolve of one command shares (one crawl, one classifier, one exports
    reader, one store); ``close`` when done (``with`` works). ``resolve`` may be called from
    several threads at once. The classifier and the exports reader are the fetcher's, made when
    first asked for (``check`` verifying hashes never loads the wheel scanner's modules)."""

    defs: Definitions
    fetcher: Any  # index.finder.Fetcher with classifier() and exports_reader() (net/)
    finder: Finder
    store: ResultStore | None = None
    _disk: dict[str, TorchExports] = field(default_factory=dict)
    _made: dict[str, Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def classifier(self) -> WheelClassifier:
        made: WheelClassifier = self._once("classifier", lambda: self.fetcher.classifier(self.defs))
        return made

    @property
    def exports(self) -> ExportsSource:
        made: ExportsSource = self._once("exports", lambda: self.fetcher.exports_reader())
        return made

    def _once(self, what: str, make: Callable[[], Any]) -> Any:
        """``make()``, the first time ``what`` is asked for (by any thread); after that, the same."""
        with self._lock:
            if what not in self._made:
                self._made[what] = make()
            return self._made[what]

    def resolve(self, request: ResolveRequest) -> LockPlan:
        """The plan for ``request``: the one stored for the same inputs when nothing it came from
        changed (``resolver.reuse``), else resolved (the resolver and resolvelib load only then)."""
        from ..resolver import reuse

        def compute() -> LockPlan:
            from ..resolver.resolve import resolve

            return resolve(request, self.finder, self.defs, classifier=self.classifier, exports=self.exports_for(request.target), store=None)

        return reuse.reused_or(self.finder, self.store, request, self.defs, compute)

    def exports_for(self, target: Target) -> ExportsSource:
        """The exports of a torch: read on disk when ``target`` has that torch installed (a probed
        interpreter), else through the fetcher."""
        from packaging.utils import canonicalize_name

        torch = canonicalize_name("torch")
        where = target.installed_at.get(torch)
        installed = target.installed.get(torch)

        def source(version: Any, file: IndexFile | None) -> TorchExports:
            if where is not None and installed == version:
                from ..env.exports import installed_torch_exports  # the ELF reader: only when a torch on disk is read

                key = f"{where}:{version}"
                if key not in self._disk:
                    self._disk[key] = installed_torch_exports(Path(where), str(version))
                return self._disk[key]
            return self.exports(version, file)

        return source

    def judge(self, name: str, abi: WheelAbi, requires_dist: Sequence[str], target: Target, cuda: CudaLabel | None = None) -> AbiVerdict | None:
        """The verdict on wheel ``name`` (what it imports: ``abi``; its ``Requires-Dist``) against
        ``target``'s installed torch (None: the target has none): its CUDA from its label (else
        ``cuda``), its exports from disk (a probed target) or its wheel on the PyTorch index."""
        from packaging.utils import canonicalize_name

        from ..model.cuda import CudaLabel
        from ..rules.abi import AbiPolicy, AbiTorch, judge, torch_floor

        torch = target.installed.get(canonicalize_name("torch"))
        if torch is None:
            return None
        label = target.torch_cuda.label if target.torch_cuda else CudaLabel.of_torch(torch) or cuda  # the one rule (a probed torch)
        exports = self.exports_for(target)
        subject = AbiTorch(version=torch, cuda_major=label.major if label else None, exports=lambda: exports(torch, self._torch_file(target, torch, label)))
        return judge(name, abi, subject, AbiPolicy.of(self.defs.abi), requires_floor=torch_floor(requires_dist))

    def _torch_file(self, target: Target, torch: Version, label: CudaLabel | None) -> IndexFile | None:
        """The installed torch's wheel on the PyTorch index (a declared target reads its exports there)."""
        from ..data.definitions import RouteContext
        from ..errors import ResolveGpuStackError
        from ..model.request import TorchChoice
        from ..rules.fit import TargetFit

        if target.interpreter is not None:
            return None
        ctx = RouteContext(torch_channel=TorchChoice.parse("installed").for_installed(torch).channel, cuda=str(label) if label else None)
        try:
            offers, _ = self.finder.offers("torch", ctx)
        except ResolveGpuStackError:
            return None
        fit = TargetFit(target)
        twin = torch.local is None and label is not None  # a torch from PyPI: its labelled twin on the index is the same build
        return next(
            (
                o.file
                for o in offers
                if (o.file.version == torch or twin and o.file.version.public == torch.public and o.file.version.local == str(label)) and fit(o.file) is None
            ),
            None,
        )

    def close(self) -> None:
        self.fetcher.close()

    def __enter__(self) -> ResolveParts:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def resolve_parts(defs: Definitions, fetcher: Any, *, store: ResultStore | None = None, finder: Finder | None = None) -> ResolveParts:
    """The parts around ``fetcher`` (live, recording, a snapshot, or a snapshot extended live),
    keeping computed plans in ``store`` (the live fetcher's cache) when given; ``finder``: one
    already reading through ``fetcher`` (its pages shared), else a new one."""
    from ..index.finder import Finder

    finder = finder if finder is not None else Finder(fetcher, defs)
    return ResolveParts(defs=defs, fetcher=fetcher, finder=finder, store=store)


def parts_of(fetcher: Any, defs: Definitions) -> dict[str, Any]:
    """``resolve()``'s judging arguments for ``fetcher`` (its classifier and its exports reader),
    for callers that hold a finder of their own."""
    return {"classifier": fetcher.classifier(defs), "exports": fetcher.exports_reader()}


__all__ = ["ResolveParts", "parts_of", "resolve_parts"]
