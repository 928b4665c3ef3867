"""What a plan says: each package, the file that provides it, how it is coupled, and why."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from packaging.utils import NormalizedName
from packaging.version import Version

from .abi import AbiVerdict


class Coupling(str, enum.Enum):
    """How tightly a package is bound to the rest of the stack (see indexes/components.toml)."""

    TORCH = "torch"  # torch itself
    TORCH_ABI = "torch-abi"  # built against one torch (its C++ ABI, or one build per torch), broken on any other
    TORCH_STABLE = "torch-stable"  # the LibTorch stable ABI: runs on every torch at or above its floor
    CUDA = "cuda"  # torch-agnostic, bound to a CUDA major (jit-cache and its providers)
    AGNOSTIC = "agnostic"  # pure or torch-agnostic
    UNKNOWN = "unknown"  # native code whose scan did not finish: never taken for agnostic


class Action(str, enum.Enum):
    KEEP = "keep"  # already installed at exactly this version: nothing to do
    INSTALL = "install"  # not installed yet
    UPGRADE = "upgrade"  # installed at a lower version
    DOWNGRADE = "downgrade"  # installed at a higher version (torch: only with --allow-downgrade)
    CHANGE = "change"  # same public version, other local label (e.g. +cu128 -> +cu130)
    BUILD = "build"  # built from its sdist against the kept torch (--build NAME): no wheel of it runs on that torch


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceOrigin:
    """Where a source tree built by ``--build 'NAME @ URL'`` came from (recorded in the lock):
    a git repository at one commit (``rev`` as the user wrote it, resolved to ``commit``), or a
    local tree. The tree's files are the build's input: their archive's sha256 is the sdist's."""

    kind: str  # "git" | "directory"
    url: str  # the repository URL (no ``git+``, no revision) or the tree's absolute path
    rev: str | None = None  # the revision asked for ("v1.0", "main"); None: the default branch
    commit: str | None = None  # the 40-hex commit ``rev`` named when locked (git)
    subdirectory: str | None = None  # the project's folder inside the repository

    @property
    def reference(self) -> str:
        """The PEP 508 direct URL of exactly this source (git: at its commit)."""
        if self.kind == "git":
            text = f"git+{self.url}@{self.commit or self.rev}" if (self.commit or self.rev) else f"git+{self.url}"
        else:
            text = "file://" + self.url
        return text + (f"#subdirectory={self.subdirectory}" if self.subdirectory else "")


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceDist:
    """The sdist a ``build`` row is built from, as its index lists it (hash-checked like a wheel),
    or the archive of a source tree (``origin``: a git commit or a local tree, ``--build 'NAME @ URL'``)."""

    url: str
    filename: str
    sha256: str | None = None
    size: int | None = None
    origin: SourceOrigin | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildProvenance:
    """Where a built wheel came from: what it was built against, and how (recorded in the lock;
    ``check`` verifies it instead of looking the wheel up on an index)."""

    torch: str  # the kept torch it was built against: "2.12.0.dev20260307+cu130"
    torch_sha256: str | None = None  # that torch's wheel, where known
    cuda: str | None = None  # torch's CUDA label ("cu130"); None for a CPU torch
    nvcc: str | None = None  # the CUDA toolkit the build found ("13.0"); None: none found
    arch_list: str = ""  # TORCH_CUDA_ARCH_LIST ("9.0;12.0"); "": torch's default
    python: str = ""  # "3.12"
    platform: str = ""  # "x86_64-manylinux_2_28"
    command: str = ""  # the build command, with the environment that decides the product


@dataclass(frozen=True, slots=True, kw_only=True)
class LockedPackage:
    """One line of a plan: a package, the file that provides it, and why."""

    name: NormalizedName
    version: Version
    action: Action
    index: str  # pytorch | flashinfer | pypi | installed
    coupling: Coupling
    reason: str = ""
    url: str | None = None  # None for a kept package (nothing to download)
    filename: str | None = None
    sha256: str | None = None
    size: int | None = None
    upload_time: str | None = None
    requires_python: str | None = None
    simple_index: str | None = None  # the simple-API base the file was found under (PEP 751 packages.index)
    installed_version: Version | None = None
    dependencies: tuple[NormalizedName, ...] = ()
    built_for: str | None = None  # the torch it was built for when known: "2.9.1" (a pin), "2.5" (+cu124torch2.5)
    abi_mismatch: bool = False  # refused by the ABI judgement, planned anyway (abi_mismatch="warn")
    abi: AbiVerdict | None = None  # a compiled wheel judged against the plan's torch and CUDA
    sdist: SourceDist | None = None  # a build row: the sdist it is built from
    provenance: BuildProvenance | None = None  # a build row once built: url/filename/sha256/size are the built wheel's


@dataclass(frozen=True, slots=True, kw_only=True)
class Override:
    """A requirement of ``package`` replaced in the plan: by the selected torch, the torch-family
    build that matches it, the user's --override, or the user's --flashinfer version."""

    package: str  # whose requirement it was ("sglang")
    requirement: str  # as the package states it ("torch==2.9.1")
    replaced_by: str  # what the plan has instead ("torch==2.12.0.dev20260307+cu130")
    reason: str  # in words ("the installed torch is kept")


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetSummary:
    """The target a plan was made for, as its output names it."""

    python: str
    platform: str
    cuda: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class LockPlan:
    """What a machine should end up with, from where, and why."""

    target: TargetSummary
    packages: tuple[LockedPackage, ...]
    notes: tuple[str, ...] = ()
    flashinfer_version: Version | None = None  # the FlashInfer group's public version, if any
    cuda_label: str | None = None  # jit-cache label chosen for the group
    inputs: Mapping[str, object] = field(default_factory=dict)  # the resolver inputs (for the digest)
    inputs_digest: str = ""
    indexes: Mapping[str, str] = field(default_factory=dict)  # logical name -> base URL (no credentials)
    overrides: tuple[Override, ...] = ()  # requirements replaced, in package order

    def package(self, name: str) -> LockedPackage | None:
        for pkg in self.packages:
            if pkg.name == name:
                return pkg
        return None

    @property
    def torch(self) -> LockedPackage | None:
        return self.package("torch")
