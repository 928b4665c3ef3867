"""CUDA labels (``cu130``): the one implementation of parsing, comparing and reading them off torch."""

from __future__ import annotations

import re
from dataclasses import dataclass

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


def cuda_label_text(version: Version | str | None) -> str | None:
    """``str(CudaLabel.of_torch(version))`` or None."""
    label = CudaLabel.of_torch(version)
    return None if label is None else str(label)
