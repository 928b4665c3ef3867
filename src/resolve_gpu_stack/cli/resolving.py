"""What a resolve loads once its first requests are on the wire: the resolver (and resolvelib), the
wheel scanner's readers and the scan records, the torch exports read on disk, the ABI judgement.

``cli/assemble.py`` (the composition root) imports this module in one place, ``_resolving``, when
a part first needs it: a live resolve starts its first round (``resolver/roots.py``'s
``read_ahead``) before, so that round trip overlaps these imports (~40 ms of a cold start's CPU,
all of the scanner's and the resolver's modules); a plan reused from the store, ``check``
verifying hashes, ``--help`` never load them. Nothing here keeps state: ``Resolving`` is the set
of calls ``ResolveParts`` and the ``Session`` make into that half.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..env.exports import installed_torch_exports
from ..net.scan import readers
from ..net.scan.records import ScanRecords
from ..resolver.resolve import resolve
from ..rules.abi import AbiPolicy, AbiTorch, ExportsSource, TorchExports, judge, torch_floor

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ..data.definitions import Definitions
    from ..index.finder import Finder
    from ..index.sdist import SdistMetadata
    from ..model import LockPlan
    from ..model.abi import AbiVerdict, WheelAbi
    from ..model.kept import KeptTorch
    from ..model.request import ResolveRequest
    from ..net.http import HttpFetcher
    from ..net.scan.classify import InspectingClassifier
    from ..net.source import Source


class Resolving:
    """The calls into the half of a resolve loaded after its first requests (see the module docstring)."""

    @staticmethod
    def plan(
        request: ResolveRequest,
        finder: Finder,
        defs: Definitions,
        *,
        classifier: InspectingClassifier,
        exports: ExportsSource,
        sdist_metadata: SdistMetadata | None,
    ) -> LockPlan:
        """The plan for ``request``, resolved (``resolver.resolve``)."""
        return resolve(request, finder, defs, classifier=classifier, exports=exports, sdist_metadata=sdist_metadata)

    @staticmethod
    def scan_readers(source: Source, defs: Definitions) -> tuple[InspectingClassifier, ExportsSource]:
        """The wheel classifier and the torch exports reader, made together from ``source``'s ``scan_access``."""
        access = source.scan_access()
        return readers.classifier(access, defs.abi), readers.exports_reader(access)

    @staticmethod
    def disk_exports(site: str, version: str) -> TorchExports:
        """The exports of the torch ``version`` installed in the site folder ``site``."""
        return installed_torch_exports(Path(site), version)

    @staticmethod
    def verdict(name: str, abi: WheelAbi, requires_dist: Sequence[str], kept: KeptTorch, exports: ExportsSource, defs: Definitions) -> AbiVerdict | None:
        """The verdict on wheel ``name`` (what it imports: ``abi``; its ``Requires-Dist``) against
        the kept torch, whose exports ``exports`` reads (``rules/abi.py``)."""
        label = kept.label
        subject = AbiTorch(version=kept.version, cuda_major=label.major if label else None, exports=lambda: exports(kept.version, kept.wheel))
        return judge(name, abi, subject, AbiPolicy.of(defs.abi), requires_floor=torch_floor(requires_dist))

    @staticmethod
    def use_records(live: HttpFetcher, setting: str | None, say: Callable[[str], None] | None) -> None:
        """``live``'s scan records and torch exports records: those of ``setting`` (a records URL,
        ``none``; None: the shipped ones only), before its first scan."""
        records = ScanRecords.configured(setting, live.transport, say=say)
        live.scan_records = records
        live.exports_records = records.exports if records is not None else None


__all__ = ["Resolving"]
