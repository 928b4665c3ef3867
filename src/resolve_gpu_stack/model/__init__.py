"""The domain values every floor above shares: pure, frozen, stdlib + packaging only.

- ``index``: what an index offers (``IndexPage``, ``IndexFile``, ``ParsedPage``, ``WheelMetadata``)
- ``target``: the interpreter a plan is for (``Target``)
- ``cuda``: CUDA labels (``CudaLabel``), the one implementation
- ``request``: what the user asks for (``TorchChoice``, ``FlashInferChoice``, ``ResolveRequest``)
- ``abi``: what a compiled wheel imports (``WheelAbi``) and its judgement against a torch (``AbiVerdict``)
- ``plan``: what a plan says (``LockPlan``, ``LockedPackage``, ``Coupling``, ``Action``)
- ``inputs``: the recorded inputs of a plan and their digest
"""

from .abi import AbiKind, AbiVerdict, MemberAbi, WheelAbi
from .cuda import CudaLabel
from .index import IndexFile, IndexPage, PageResponse, ParsedPage, VariantRef, WheelMetadata, index_file
from .plan import Action, BuildProvenance, Coupling, LockedPackage, LockPlan, Override, SourceDist, SourceOrigin, TargetSummary
from .target import Target

__all__ = [
    "AbiKind",
    "AbiVerdict",
    "MemberAbi",
    "WheelAbi",
    "Action",
    "BuildProvenance",
    "Coupling",
    "CudaLabel",
    "IndexFile",
    "IndexPage",
    "LockPlan",
    "LockedPackage",
    "Override",
    "PageResponse",
    "ParsedPage",
    "SourceDist",
    "SourceOrigin",
    "Target",
    "TargetSummary",
    "VariantRef",
    "WheelMetadata",
    "index_file",
]
