"""The interpreter a plan is for."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from packaging.tags import Tag
from packaging.utils import NormalizedName
from packaging.version import Version

from .cuda import TorchCuda


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """The interpreter a plan is for. Markers and tags are always the target's, never the host's."""

    python_version: str  # "3.12"
    python_full_version: str  # "3.12.3"
    platform: str  # e.g. "x86_64-manylinux_2_28"
    tags: tuple[Tag, ...]  # most preferred first
    markers: Mapping[str, str]
    installed: Mapping[NormalizedName, Version] = field(default_factory=dict)
    interpreter: str | None = None  # path when the target is a real interpreter
    installed_at: Mapping[NormalizedName, str] = field(default_factory=dict)  # probed: the folder holding each distribution
    torch_cuda: TorchCuda | None = None  # the installed torch's CUDA by the one rule (``model.cuda.kept_torch_cuda``)

    @property
    def machine(self) -> str:
        return self.platform.split("-", 1)[0]

    def describe(self) -> str:
        return f"Python {self.python_version} on {self.platform}"
