"""What `doctor` looks at and what it says: the installed stack, found once, and the verdict type.

Pure: stdlib + packaging. The checks themselves are ``doctor.py``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import NormalizedName

from ..data.definitions import Definitions
from ..model.cuda import CudaLabel, TorchCuda
from ..model.kept import KeptTorch
from .probe import Environment, InstalledDistribution

PASS, WARN, SKIP, FAIL = "pass", "warn", "skip", "fail"
STATUSES = (PASS, WARN, SKIP, FAIL)

TORCH = NormalizedName("torch")
TVM_FFI = NormalizedName("apache-tvm-ffi")
LEGACY_FLASHINFER = NormalizedName("flashinfer")  # the pre-rename AOT package (<= 0.2.0)


@dataclass(frozen=True, slots=True)
class Check:
    """One verdict: ``status`` is pass | warn | skip | fail; ``details`` is JSON-ready."""

    name: str
    status: str
    message: str
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"check {self.name!r}: unknown status {self.status!r}")

    @property
    def failed(self) -> bool:
        return self.status == FAIL


@dataclass(frozen=True, slots=True)
class ImportResult:
    """``import flashinfer`` run by the target interpreter."""

    ok: bool
    version: str | None = None  # flashinfer.__version__ as printed
    error: str | None = None  # the exception's last line, or why it could not run
    env_bypass: bool = False  # FLASHINFER_DISABLE_VERSION_CHECK was set (and removed for the check)
    apis: tuple[tuple[str, bool], ...] = ()  # each API asked about (``mm_mxfp8:cutlass``) -> found in the module


# -- the stack as installed --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Stack:
    """The installed distributions the checks look at, found once."""

    env: Environment
    defs: Definitions
    torch: InstalledDistribution | None
    torch_cuda: str | None  # cuNNN by the one rule (model.cuda.kept_torch_cuda): label, runtime pin, version.py
    torch_cuda_from: TorchCuda | None
    python: InstalledDistribution | None
    cubin: InstalledDistribution | None
    shim: InstalledDistribution | None
    providers: tuple[InstalledDistribution, ...]

    @property
    def markers(self) -> dict[str, str]:
        return {**self.env.target.markers, "extra": ""}

    @property
    def any_flashinfer(self) -> bool:
        return any((self.python, self.cubin, self.shim, self.providers))

    @property
    def jit_cache_dists(self) -> tuple[InstalledDistribution, ...]:
        return ((self.shim,) if self.shim else ()) + self.providers


def installed_stack(env: Environment, defs: Definitions) -> Stack:
    """torch, its CUDA label and the FlashInfer components as installed in ``env``."""
    dists = env.distributions
    fi = defs.flashinfer
    torch = dists.get(TORCH)
    kept_torch = KeptTorch.installed(torch.version, env.target, tuple(torch.requires_dist)) if torch else None  # the one value every door reads
    kept = kept_torch.cuda if kept_torch is not None else None
    providers = tuple(sorted((d for n, d in dists.items() if fi.is_provider(n)), key=lambda d: d.name))
    return Stack(
        env=env,
        defs=defs,
        torch=torch,
        torch_cuda=str(kept.label) if kept else None,
        torch_cuda_from=kept,
        python=dists.get(fi.python),
        cubin=dists.get(fi.cubin),
        shim=dists.get(fi.jit_cache),
        providers=providers,
    )


def requirements(dist: InstalledDistribution, markers: Mapping[str, str]) -> Iterator[Requirement]:
    """The dist's Requires-Dist lines that apply to this target (no extras)."""
    for line in dist.requires_dist:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is None or req.marker.evaluate(dict(markers)):
            yield req


def cuda_text(label: str) -> str:
    """``cu130`` -> ``CUDA 13.0`` (anything else as given)."""
    t = CudaLabel.parse(label)
    return f"CUDA {t.major}.{t.minor}" if t else label


def pkg(dist: InstalledDistribution) -> str:
    """``name version``, as messages write a distribution."""
    return f"{dist.name} {dist.version}"


__all__ = [
    "FAIL",
    "LEGACY_FLASHINFER",
    "PASS",
    "SKIP",
    "STATUSES",
    "TORCH",
    "TVM_FFI",
    "WARN",
    "Check",
    "ImportResult",
    "Stack",
    "cuda_text",
    "installed_stack",
    "pkg",
    "requirements",
]
