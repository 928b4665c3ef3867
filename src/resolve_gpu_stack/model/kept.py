"""The kept torch: the one value every door knows the target's torch by.

A target with a torch (a probed interpreter, or ``--installed torch==...`` declared) keeps it: the
plan is built around it and ``install`` leaves its files byte-identical, unless the command line
names a change (an exact ``--torch VERSION``, or ``--upgrade-package torch``). ``KeptTorch`` is
made once per request at the edge (``resolver/kept.py`` reads what an index says of a declared
torch; a probe reads an interpreter's) and handed to every door, which read its version, channel,
CUDA, index, wheel and exports from it instead of deriving them again.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.utils import NormalizedName
from packaging.version import Version

from .channel import torch_channel, torch_origin
from .cuda import CudaLabel, TorchCuda, kept_torch_cuda
from .index import IndexFile
from .target import Target

TORCH = NormalizedName("torch")


@dataclass(frozen=True, slots=True)
class ClosurePin:
    """One package the kept torch pins, directly or through a pinned package's extras."""

    name: NormalizedName
    version: Version  # the version held
    pin: str  # the requirement as its pinner wrote it: ``nvidia-cuda-runtime==13.2.86.*``
    pinned_by: str  # ``torch 2.15.0``, ``torch 2.15.0's cuda-toolkit 13.2.2``
    extras: frozenset[str] = frozenset()
    found: bool = True  # its version was found (installed, or on its index) and meets the pin: held; False: not held
    named: bool = False  # its version came from the target (installed, or on its index), not from the pin's text

    def words(self) -> str:
        """``torch 2.15.0's cuda-toolkit 13.2.2 pins 13.2.86``."""
        return f"{self.pinned_by} pins {self.version}"


@dataclass(frozen=True, slots=True)
class KeptClosure:
    """The kept torch's closure: every package it pins exactly, in the order they were met."""

    torch: Version
    pins: tuple[ClosurePin, ...] = ()
    unread: tuple[str, ...] = ()  # what could not be followed, in words (a note each)

    def get(self, name: NormalizedName) -> ClosurePin | None:
        return next((p for p in self.pins if p.name == name), None)

    def versions(self) -> dict[NormalizedName, Version]:
        return {p.name: p.version for p in self.pins}


@dataclass(frozen=True, slots=True, kw_only=True)
class KeptTorch:
    """The torch a target has (and a plan keeps unless asked to move it).

    ``version``: as installed or declared (``2.12.0.dev20260305+cu130``, ``2.15.0``).
    ``cuda``: its CUDA by the one rule (its ``+cuNNN`` label, its METADATA's runtime pin, its
    ``torch/version.py``), with where that was read; None when nothing says (a CPU build, or a
    declared release whose METADATA is not at hand).
    ``wheel``: its own wheel on its index for this target (URL, index, sha256 and size where the
    index gives them); None for a probed torch (its files are on disk) or when no index has it.
    ``requires_dist``: its METADATA's ``Requires-Dist`` (installed, or its wheel's).
    ``installed_at``: a probed interpreter's folder holding its distribution (its exports are read
    from its libraries there); None for a declared torch (read from ``wheel``).
    ``closure``: what it pins exactly, its extras followed (``nvidia-cuda-runtime 13.2.86``), held
    as it is: attached once per request by the resolver (``resolver/kept.py`` for a probed torch,
    from its installed dists; ``resolver/torch_pins.py`` for a declared one, from its index, after
    the crawl); None when not (yet) read. Every reader of the closure reads it here.
    """

    version: Version
    cuda: TorchCuda | None = None
    wheel: IndexFile | None = None
    requires_dist: tuple[str, ...] = ()
    installed_at: str | None = None
    closure: KeptClosure | None = None

    @property
    def label(self) -> CudaLabel | None:
        """Its CUDA label (``cu130``), or None."""
        return self.cuda.label if self.cuda is not None else None

    @property
    def channel(self) -> str:
        """The PyTorch channel its version belongs to: ``nightly``, ``test`` or ``stable``."""
        return torch_channel(self.version)

    @property
    def origin(self) -> str:
        """Where it was published: ``pypi`` (a release without a local label) or ``pytorch``."""
        return torch_origin(self.version)

    @property
    def series(self) -> str:
        """``2.12``."""
        return f"{self.version.major}.{self.version.minor}"

    @property
    def index(self) -> str | None:
        """The logical index its wheel was found on (``pytorch``, ``pypi``), or None."""
        return self.wheel.index or None if self.wheel is not None else None

    @property
    def sha256(self) -> str | None:
        """Its wheel's sha256 where its index gives one."""
        return self.wheel.sha256 if self.wheel is not None else None

    @property
    def exports_from(self) -> str:
        """Where its C++ exports are read: ``disk`` (a probed torch's libraries), ``wheel`` (its
        wheel by range reads, or a snapshot's record of them), or ``none``."""
        if self.installed_at is not None:
            return "disk"
        return "wheel" if self.wheel is not None else "none"

    def words(self) -> str:
        """How a message names it: ``torch 2.15.0 (cu132: its METADATA pins cuda-toolkit[...]==13.2.2)``."""
        if self.cuda is None:
            return f"torch {self.version}"
        return f"torch {self.version} ({self.cuda.label}: {self.cuda.words()})"

    @classmethod
    def of_target(cls, target: Target, requires_dist: tuple[str, ...] = ()) -> KeptTorch | None:
        """What ``target`` alone says of its torch (None: it has none): a probed interpreter's
        CUDA (read by the probe) and folder, or a declared version's label. A declared torch
        without a label learns its CUDA and wheel from its index (``resolver/kept.py``)."""
        version = target.installed.get(TORCH)
        return None if version is None else cls.installed(version, target, requires_dist)

    @classmethod
    def installed(cls, version: Version, target: Target, requires_dist: tuple[str, ...] = ()) -> KeptTorch:
        """Torch ``version`` as ``target`` has it installed (its distribution, read by a probe):
        its CUDA by the one rule."""
        cuda = target.torch_cuda or kept_torch_cuda(version, requires_dist, target.markers)
        return cls(version=version, cuda=cuda, requires_dist=requires_dist, installed_at=target.installed_at.get(TORCH))


__all__ = ["ClosurePin", "KeptClosure", "KeptTorch"]
