"""CUDA labels (``cu130``): the one implementation of parsing, comparing and reading them off torch."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

_LABEL_RE = re.compile(r"^cu(\d+)(\d)$")


@dataclass(frozen=True, slots=True, order=True)
class CudaLabel:
    """A CUDA build label: ``cu130`` is CUDA 13.0, ``cu128`` is 12.8. Ordered by (major, minor)."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str | None) -> CudaLabel | None:
        """``"cu130"`` -> CudaLabel(13, 0); anything that is not a label -> None."""
        if not text:
            return None
        m = _LABEL_RE.match(text.strip().lower())
        return cls(int(m.group(1)), int(m.group(2))) if m else None

    @classmethod
    def of_torch(cls, version: Version | str | None) -> CudaLabel | None:
        """The label in a torch build's local version: ``2.12.0.dev20260307+cu130`` -> cu130;
        ``+cpu`` or no local label -> None."""
        if version is None:
            return None
        if not isinstance(version, Version):
            try:
                version = Version(version)
            except InvalidVersion:
                return None
        for part in (version.local or "").split("."):
            label = cls.parse(part)
            if label is not None:
                return label
        return None

    def serves(self, torch: CudaLabel) -> bool:
        """Whether a build with this label runs under torch's CUDA: the same major, not newer."""
        return self.major == torch.major and self <= torch

    def __str__(self) -> str:
        return f"cu{self.major}{self.minor}"


# Packages whose exact pin in a torch build's Requires-Dist names its CUDA runtime: a torch from
# PyPI carries no +cuNNN label (2.9 pins nvidia-cuda-runtime-cu12==12.8.90; 2.11 pins
# cuda-toolkit[...]==13.0.2, as seen on a real H200 machine's torch 2.11.0).
_RUNTIME_PINS = re.compile(r"^(?:nvidia-cuda-runtime(?:-cu\d+)?|cuda-toolkit)$")
_RUNTIME_VERSION = re.compile(r"^(\d+)\.(\d)\b")


def cuda_of_runtime_pin(name: str, operator: str, version: str) -> CudaLabel | None:
    """The CUDA label an exact pin on the CUDA runtime names (``nvidia-cuda-runtime-cu12==12.8.90``
    -> cu128, ``cuda-toolkit==13.0.2`` -> cu130), or None for anything else."""
    if operator not in ("==", "===") or not _RUNTIME_PINS.match(name):
        return None
    m = _RUNTIME_VERSION.match(version)
    return CudaLabel(int(m.group(1)), int(m.group(2))) if m else None


def cuda_of_runtime(text: str | None) -> CudaLabel | None:
    """``torch.version.cuda`` (``"13.2"``) as a label (cu132); None for None, ``""`` or anything else."""
    m = _RUNTIME_VERSION.match((text or "").strip())
    return CudaLabel(int(m.group(1)), int(m.group(2))) if m else None


def cuda_of_requires(requires_dist: Iterable[str], markers: Mapping[str, str]) -> tuple[CudaLabel, str] | None:
    """(label, the requirement) of the first exact runtime pin among ``requires_dist`` whose marker
    holds on ``markers`` (``cuda-toolkit[cudart]==13.2.2`` -> cu132), or None."""
    env = {**markers, "extra": ""}
    for line in requires_dist:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        for spec in req.specifier:
            label = cuda_of_runtime_pin(canonicalize_name(req.name), spec.operator, spec.version)
            if label is not None:
                return label, str(req)
    return None


@dataclass(frozen=True, slots=True)
class TorchCuda:
    """A kept torch's CUDA and where it was read: ``label`` (its ``+cuNNN``), ``pin`` (its METADATA
    pins the CUDA runtime: ``evidence`` is that requirement), ``version.py`` (``torch.version.cuda``
    of the installed files), ``declared`` (``--cuda`` names a declared torch's build)."""

    label: CudaLabel
    source: str  # "label" | "pin" | "version.py" | "declared"
    evidence: str = ""

    def words(self) -> str:
        """How a message says where the CUDA came from."""
        if self.source == "label":
            return f"its +{self.label} label"
        if self.source == "pin":
            return f"its METADATA pins {self.evidence}"
        if self.source == "declared":
            return f"--cuda {self.label}"
        return f"its torch/version.py says cuda = '{self.label.major}.{self.label.minor}'"


def kept_torch_cuda(
    version: Version | str | None, requires_dist: Iterable[str] = (), markers: Mapping[str, str] | None = None, runtime: str | None = None
) -> TorchCuda | None:
    """The one rule for the CUDA of a torch that is kept: its local label; else the exact pin of
    its METADATA on the CUDA runtime (a PyPI torch: ``cuda-toolkit[...]==13.2.2`` -> cu132); else
    ``runtime``, ``torch.version.cuda`` read from an installed torch's ``version.py``. None when
    none of them says (a CPU build, or a declared torch whose METADATA is not at hand)."""
    label = CudaLabel.of_torch(version)
    if label is not None:
        return TorchCuda(label, "label")
    pinned = cuda_of_requires(requires_dist, markers or {})
    if pinned is not None:
        return TorchCuda(pinned[0], "pin", pinned[1])
    read = cuda_of_runtime(runtime)
    return TorchCuda(read, "version.py") if read is not None else None


def cuda_label_text(version: Version | str | None) -> str | None:
    """``str(CudaLabel.of_torch(version))`` or None."""
    label = CudaLabel.of_torch(version)
    return None if label is None else str(label)
