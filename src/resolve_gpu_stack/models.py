"""Pure domain models: what an index offers, what a target is, what a plan says.

Stdlib + packaging only. Everything is frozen: nothing mutates a model after it is built.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Mapping

from packaging.tags import Tag
from packaging.utils import NormalizedName
from packaging.version import Version


class Coupling(str, enum.Enum):
    """How tightly a package is bound to the rest of the stack (see indexes/components.toml)."""

    TORCH = "torch"  # torch itself
    TORCH_ABI = "torch-abi"  # built against one torch, broken on any other
    CUDA = "cuda"  # torch-agnostic, bound to a CUDA major (jit-cache and its providers)
    AGNOSTIC = "agnostic"  # pure or torch-agnostic


class Action(str, enum.Enum):
    KEEP = "keep"  # already installed at exactly this version: nothing to do
    INSTALL = "install"  # not installed yet
    UPGRADE = "upgrade"  # installed at a lower version
    DOWNGRADE = "downgrade"  # installed at a higher version (torch: only with --allow-downgrade)
    CHANGE = "change"  # same public version, other local label (e.g. +cu128 -> +cu130)


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexPage:
    """The raw bytes of one index page as served (or replayed)."""

    url: str
    content: bytes
    content_type: str = "text/html"


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexFile:
    """One distribution file linked from an index page.

    ``url`` is absolute and keeps the server's spelling (``%2B`` or ``+``); credentials are never
    part of it. ``version`` and ``tags`` come from the filename via ``packaging.utils``.
    """

    filename: str
    url: str
    name: NormalizedName
    version: Version
    tags: frozenset[Tag] = frozenset()  # empty for sdists
    is_wheel: bool = True
    index: str = ""  # logical index name: pytorch | flashinfer | pypi
    sha256: str | None = None
    size: int | None = None
    requires_python: str | None = None
    yanked: str | None = None  # None = not yanked; "" = yanked without a reason
    metadata_sha256: str | None = None  # PEP 658/714 digest of <url>.metadata
    has_metadata: bool = False  # the page advertises a <url>.metadata sidecar
    upload_time: str | None = None  # RFC 3339 as served
    untested: bool = False  # FlashInfer nightly "(untested)" marker

    @property
    def is_yanked(self) -> bool:
        return self.yanked is not None


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

    @property
    def machine(self) -> str:
        return self.platform.split("-", 1)[0]


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
    installed_version: Version | None = None
    dependencies: tuple[NormalizedName, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetSummary:
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

    def package(self, name: str) -> LockedPackage | None:
        for pkg in self.packages:
            if pkg.name == name:
                return pkg
        return None

    @property
    def torch(self) -> LockedPackage | None:
        return self.package("torch")


@dataclass(frozen=True, slots=True, kw_only=True)
class WheelMetadata:
    """The parts of a wheel's METADATA the resolver needs (requirements kept as strings)."""

    name: NormalizedName
    version: Version
    requires_dist: tuple[str, ...] = ()
    requires_python: str | None = None
    provides_extra: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ParsedPage:
    """An index page after parsing: its files, the sub-directories it lists, and what was skipped."""

    url: str
    files: tuple[IndexFile, ...] = ()
    subdirs: tuple[str, ...] = ()  # directory listings ("cu130/", "torch2.5")
    warnings: tuple[str, ...] = ()
    title: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PageResponse:
    """What a fetcher returns for a page: the page, or ``page is None`` for a 404."""

    url: str
    page: IndexPage | None
    from_cache: bool = False

    @property
    def found(self) -> bool:
        return self.page is not None
