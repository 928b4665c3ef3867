"""What the user asks the resolver for, parsed once at the edge into frozen values.

``TorchChoice`` and ``FlashInferChoice`` are built from the text of ``--torch`` /
``--flashinfer`` (or the config's ``torch`` / ``flashinfer``) and keep that text: it is what the
lock records as an input and what a message quotes. Nothing downstream parses it again.
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import InvalidVersion, Version

from ..errors import UsageError
from .channel import flashinfer_channel, torch_channel
from .cuda import CudaLabel, TorchCuda
from .gpu import parse_gpus
from .kept import KeptTorch
from .source import parse_build_spec
from .target import Target

if TYPE_CHECKING:
    from .gpu import GpuArch  # model.gpu loads only when --gpu names GPUs
    from .source import BuildSpec, SourceTree

TORCH = NormalizedName("torch")
TORCH_CHANNELS = ("nightly", "test", "stable", "installed")
UPGRADABLE = (TORCH,)  # --upgrade-package NAME: the packages a plan keeps as installed unless named
FLASHINFER_CHOICES = ("latest", "installed", "nightly", "none")
ABI_MISMATCH_CHOICES = ("error", "warn")


class TorchKind(str, enum.Enum):
    CHANNEL = "channel"  # nightly | test | stable: the newest of that channel
    INSTALLED = "installed"  # exactly the installed torch
    SPECIFIER = "specifier"  # a version or a specifier


@dataclass(frozen=True, slots=True)
class TorchChoice:
    """``--torch``: a channel, ``installed``, or a version / specifier."""

    text: str
    kind: TorchKind
    channel: str = "stable"  # nightly | test | stable (for INSTALLED: decided by the installed torch)
    specifier: SpecifierSet = field(default_factory=SpecifierSet)

    @classmethod
    def parse(cls, text: str) -> TorchChoice:
        choice = text.strip()
        if choice in ("nightly", "test", "stable"):
            return cls(text=choice, kind=TorchKind.CHANNEL, channel=choice)
        if choice == "installed":
            return cls(text=choice, kind=TorchKind.INSTALLED)
        spec = _torch_specifier(choice)
        pinned = [v for s in spec if (v := _version(s.version.rstrip(".*"))) is not None]
        channels = {torch_channel(v) for v in pinned}
        channel = next((c for c in ("test", "nightly") if c in channels), "stable")
        return cls(text=choice, kind=TorchKind.SPECIFIER, channel=channel, specifier=spec)

    def for_installed(self, installed: Version | None, *, where: str | None = None) -> TorchChoice:
        """The choice with ``installed`` made concrete: that exact version, on its channel
        (``where``: the target interpreter's path, named when it has no torch)."""
        if self.kind is not TorchKind.INSTALLED:
            return self
        if installed is None:
            target = f"the target {where}" if where else "the target"
            raise UsageError(
                f"--torch installed, but {target} has no torch installed",
                hint="install the torch you keep there, or use --torch nightly|stable|VERSION, or declare --installed torch==VERSION",
            )
        return TorchChoice(text=self.text, kind=self.kind, channel=torch_channel(installed), specifier=SpecifierSet(f"=={installed}"))

    def for_kept(self, installed: Version | None, *, upgrade: bool = False, where: str | None = None) -> TorchChoice:
        """The choice a plan is made with when the target has torch ``installed``: torch moves only
        when the user names the move. An exact version (``--torch 2.13.0``) or a specifier the
        installed torch does not meet names it; a channel (``nightly``, the default) with
        ``upgrade`` (``--upgrade-package torch``) asks for its newest. Otherwise the installed torch
        is kept, on its own channel (the channel then decides nothing of torch: FlashInfer and the
        rest follow the torch kept)."""
        if installed is None or self.kind is TorchKind.INSTALLED:
            return self.for_installed(installed, where=where)
        if self.kind is TorchKind.CHANNEL and upgrade:
            return self
        if self.kind is TorchKind.SPECIFIER and (upgrade or _exact(self.specifier) or not self.specifier.contains(installed, prereleases=True)):
            return self  # named: that version, or a range the installed torch is outside of (never lower, still)
        return TorchChoice(text=self.text, kind=TorchKind.INSTALLED, channel=torch_channel(installed), specifier=SpecifierSet(f"=={installed}"))

    @property
    def allows_prereleases(self) -> bool:
        return self.channel in ("nightly", "test") or bool(self.specifier.prereleases)

    def __str__(self) -> str:
        return self.text


def _exact(spec: SpecifierSet) -> bool:
    """One ``==`` version without a wildcard: the user named the torch."""
    items = list(spec)
    return len(items) == 1 and items[0].operator in ("==", "===") and not items[0].version.endswith(".*")


@dataclass(frozen=True, slots=True)
class FlashInferChoice:
    """``--flashinfer``: ``latest`` (the default: the newest, an installed FlashInfer upgraded),
    ``installed`` (keep an installed FlashInfer that fits, as uv keeps a bare requirement; the
    newest when none is), ``nightly``, ``none`` or an exact version."""

    text: str
    version: Version | None = None

    @classmethod
    def parse(cls, text: str) -> FlashInferChoice:
        choice = text.strip()
        if choice in FLASHINFER_CHOICES:
            return cls(text=choice)
        version = _version(choice)
        if version is None:
            raise UsageError(f"--flashinfer {choice!r} is not a version", hint="use latest, installed, nightly, none, or a version like 0.6.5")
        return cls(text=choice, version=version)

    @property
    def wanted(self) -> bool:
        return self.text != "none"

    @property
    def channel(self) -> str:
        """The FlashInfer channel whose pages are read: ``nightly`` or ``stable`` (an exact version:
        the channel that publishes it)."""
        return "nightly" if self.text == "nightly" else flashinfer_channel(self.version)

    @property
    def allows_prereleases(self) -> bool:
        return self.text == "nightly" or (self.version is not None and self.version.is_prerelease)

    def __str__(self) -> str:
        return self.text


def parse_cuda(text: str | None) -> CudaLabel | None:
    """``--cuda``: None when not given, else a label (``UsageError`` for anything else)."""
    if text is None:
        return None
    label = CudaLabel.parse(text)
    if label is None:
        raise UsageError(f"--cuda {text!r} is not a CUDA label", hint="use the form cu130, cu129, cu128")
    return label


def parse_with(text: str, *, flag: str = "--with") -> Requirement:
    """One ``--with`` (or ``--override``) requirement (``UsageError`` when it is not one, or is a
    direct URL)."""
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        raise UsageError(f"{flag} {text!r}: {exc}") from None
    if req.url:
        raise UsageError(f"{flag} {text!r}: direct URLs are not supported", hint="name a package and a version range")
    return req


class Requested(str):
    """A requirement the user typed (``--with``, ``--override``): the text as written (what a lock
    records and a message quotes; it is that string) with what it parses to, parsed once at the edge."""

    requirement: Requirement

    def __new__(cls, text: str, *, flag: str = "--with") -> Requested:
        self = super().__new__(cls, text)
        self.requirement = parse_with(text, flag=flag)
        return self

    @property
    def name(self) -> NormalizedName:
        return canonicalize_name(self.requirement.name)


def requested(items: tuple[str, ...], flag: str) -> tuple[Requested, ...]:
    """``items`` as ``Requested`` values: a plain text is parsed (once: a value the edge parsed is kept)."""
    return tuple(i if isinstance(i, Requested) else Requested(i, flag=flag) for i in items)


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolveRequest:
    """Everything the resolver is asked, parsed and validated."""

    target: Target
    torch: TorchChoice = field(default_factory=lambda: TorchChoice.parse("nightly"))
    cuda: CudaLabel | None = None
    change_cuda: bool = False
    flashinfer: FlashInferChoice = field(default_factory=lambda: FlashInferChoice.parse("latest"))
    jit_cache: bool = True
    cubin: bool = True
    with_: tuple[Requested, ...] = ()  # --with (texts given here are parsed once, in __post_init__)
    allow_downgrade: bool = False
    upgrade_package: tuple[str, ...] = ()  # --upgrade-package torch: the user's word to move the kept torch to its channel's newest
    installed_requires: Mapping[NormalizedName, tuple[str, ...]] = field(default_factory=dict)
    overrides: tuple[Requested, ...] = ()  # --override REQ (uv's meaning: replaces every requirement on that name)
    auto_torch_override: bool = True  # a torch pin the selected torch cannot meet is overridden by it
    without: tuple[str, ...] = ()  # package names left out of the plan, with what only they need
    abi_mismatch: str = "error"  # a torch-ABI wheel built for another torch: "error" (no plan) | "warn"
    keep_broken: tuple[str, ...] = ()  # installed packages known not to work with the plan, kept as they are by the user's word
    gpus: tuple[GpuArch, ...] = ()  # the GPUs the target runs on; () = any GPU
    require_api: tuple[str, ...] = ()  # FlashInfer APIs the user needs (``mm_mxfp8``, ``mm_mxfp8:cutlass``)
    all_gpu_archs: bool = False  # plan every provider a jit-cache shim lists, whatever the GPUs
    build_packages: tuple[
        BuildSpec, ...
    ] = ()  # --build NAME (from its sdist) or --build 'NAME @ URL' (from a source tree); texts given here are parsed once, in __post_init__
    build_sources: tuple[SourceTree, ...] = ()  # the --build 'NAME @ URL' trees, fetched at the edge (``env/sources.py``)
    exclude_newer: str | None = None  # --exclude-newer YYYY-MM-DD: only files uploaded on or before that day (PEP 700)
    wheel_variants: bool = False  # --wheel-variants: variant wheels (PEP 825, a draft) judged and the matching one planned
    kept: KeptTorch | None = None  # the target's torch, made once at the edge (``resolver/kept.py``); None: what the target alone says

    def __post_init__(self) -> None:
        object.__setattr__(self, "with_", requested(self.with_, "--with"))
        object.__setattr__(self, "overrides", requested(self.overrides, "--override"))
        if any(isinstance(b, str) for b in self.build_packages):  # the edge gives BuildSpec values (cli/settings.py); a text is parsed here, once
            object.__setattr__(self, "build_packages", tuple(parse_build_spec(b) if isinstance(b, str) else b for b in self.build_packages))
        for name in self.without:
            if not name.strip() or any(c in name for c in "<>=!~;[ "):
                raise UsageError(f"--without {name!r} is not a package name", hint="name the package only, e.g. --without sgl-kernel")
        left_out = self.build_names & self.without_names  # every --build value parses
        if left_out:
            name = sorted(left_out)[0]
            raise UsageError(f"--build {name} and --without {name}: a package cannot be both built and left out", hint="drop one of them")
        for name in self.keep_broken:
            if not name.strip() or any(c in name for c in "<>=!~;[ "):
                raise UsageError(f"--keep-broken {name!r} is not a package name", hint="name the installed package only, e.g. --keep-broken flashinfer-cubin")
        if self.exclude_newer is not None:
            object.__setattr__(self, "exclude_newer", parse_day(self.exclude_newer))
        object.__setattr__(self, "upgrade_package", parse_upgrade_packages(self.upgrade_package))
        if self.abi_mismatch not in ABI_MISMATCH_CHOICES:
            raise UsageError(
                f"--abi-mismatch {self.abi_mismatch!r} is not one of {', '.join(ABI_MISMATCH_CHOICES)}", hint="use error (no plan) or warn (plan it, flagged)"
            )

    @property
    def override_requirements(self) -> tuple[Requirement, ...]:
        return tuple(r.requirement for r in self.overrides)

    @property
    def keep_broken_names(self) -> frozenset[NormalizedName]:
        return frozenset(canonicalize_name(n.strip()) for n in self.keep_broken)

    @property
    def without_names(self) -> frozenset[NormalizedName]:
        return frozenset(canonicalize_name(n.strip()) for n in self.without)

    @property
    def build_specs(self) -> tuple[BuildSpec, ...]:
        return self.build_packages

    @property
    def build_names(self) -> frozenset[NormalizedName]:
        return frozenset(s.name for s in self.build_specs)

    @property
    def build_roots(self) -> tuple[NormalizedName, ...]:
        """The ``--build`` names no ``--with`` names: each is a requirement of the plan of its own
        (``--build NAME`` implies the package; never a silent no-op)."""
        asked = {r.name for r in self.with_}
        return tuple(sorted(n for n in self.build_names if n not in asked))

    @classmethod
    def build(
        cls,
        *,
        target: Target,
        torch: str = "nightly",
        cuda: str | None = None,
        flashinfer: str = "latest",
        **rest: object,
    ) -> ResolveRequest:
        """A request from the texts a user types (``--torch``, ``--cuda``, ``--flashinfer``)."""
        return cls(target=target, torch=TorchChoice.parse(torch), cuda=parse_cuda(cuda), flashinfer=FlashInferChoice.parse(flashinfer), **rest)  # type: ignore[arg-type]

    @property
    def installed_torch(self) -> Version | None:
        return self.target.installed.get(TORCH)

    @property
    def kept_torch(self) -> KeptTorch | None:
        """The target's torch: the one made at the edge, else what the target alone says of it."""
        if self.kept is not None and self.kept.version == self.installed_torch:
            return self.kept
        return KeptTorch.of_target(self.target, self.installed_requires.get(TORCH, ()))

    @property
    def installed_torch_cuda(self) -> TorchCuda | None:
        """The kept torch's CUDA by the one rule (``model.cuda.kept_torch_cuda``): its label, its
        runtime pin, its ``version.py``."""
        kept = self.kept_torch
        return kept.cuda if kept is not None else None

    @property
    def upgrade_torch(self) -> bool:
        """``--upgrade-package torch``: the user's word to move the kept torch to the newest of ``--torch``'s channel."""
        return TORCH in self.upgrade_package

    @property
    def moves_torch(self) -> bool:
        """Whether the command line has a word that lets a ``--torch`` channel move the installed
        torch: ``--upgrade-package torch``, or ``--change-cuda`` (another CUDA build is another
        torch). ``--allow-downgrade`` only lets a named move go lower."""
        return self.upgrade_torch or self.change_cuda

    @property
    def torch_choice(self) -> TorchChoice:
        """``--torch`` as the plan is made with it: the installed torch kept unless the command
        line names a move (``TorchChoice.for_kept``)."""
        return self.torch.for_kept(self.installed_torch, upgrade=self.moves_torch, where=self.target.interpreter)

    @property
    def keeps_torch_by_default(self) -> bool:
        """A channel (``--torch nightly``, the default) with a torch installed and no word to move
        it: torch is kept, and the channel says nothing of torch."""
        return self.installed_torch is not None and self.torch.kind is TorchKind.CHANNEL and not self.moves_torch

    def components(self) -> list[str]:
        """The FlashInfer components asked for, in install order."""
        if not self.flashinfer.wanted:
            return []
        out = ["flashinfer-python"]
        if self.cubin:
            out.append("flashinfer-cubin")
        if self.jit_cache:
            out.append("flashinfer-jit-cache")
        return out

    def inputs(self, index_urls: Mapping[str, str | None]) -> dict[str, object]:
        """Everything that decides the plan, for the lock's inputs digest (``index_urls``: each
        logical index's base URL without credentials, or None)."""
        installed = self.installed_torch
        return {
            "python": self.target.python_version,
            "platform": self.target.platform,
            "torch": self.torch.text,
            "installed-torch": str(installed) if installed is not None else None,
            "cuda": str(self.cuda) if self.cuda is not None else None,
            "flashinfer": self.flashinfer.text,
            "components": self.components(),
            "with": sorted(self.with_),
            "allow-downgrade": self.allow_downgrade,
            **({"upgrade-package": list(self.upgrade_package)} if self.upgrade_package else {}),
            "indexes": dict(sorted(index_urls.items())),
            **self._framework_inputs(),
            **self._gpu_inputs(),
        }

    def _framework_inputs(self) -> dict[str, object]:
        """The framework switches, only when not at their default (a lock made before they
        existed keeps its digest)."""
        out: dict[str, object] = {}
        if self.overrides:
            out["overrides"] = sorted(self.overrides)
        if not self.auto_torch_override:
            out["auto-torch-override"] = False
        if self.without:
            out["without"] = sorted(self.without_names)
        if self.abi_mismatch != "error":
            out["abi-mismatch"] = self.abi_mismatch
        if self.keep_broken:
            out["keep-broken"] = sorted(self.keep_broken_names)
        if self.build_packages:
            out["build"] = sorted(self.build_names)
        if self.exclude_newer is not None:
            out["exclude-newer"] = self.exclude_newer
        if self.wheel_variants:
            out["wheel-variants"] = True
        if self.build_sources:  # the tree built (its commit, its files' digest): a patch is another plan
            out["build-sources"] = {t.name: {"source": t.origin.reference, "sha256": t.sha256} for t in sorted(self.build_sources, key=lambda t: t.name)}
        return out

    def _gpu_inputs(self) -> dict[str, object]:
        """The GPU settings, only where they differ from the defaults: a lock written before they
        existed keeps its digest."""
        out: dict[str, object] = {}
        if self.gpus:
            out["gpus"] = [str(g) for g in self.gpus]
        if self.require_api:
            out["require-api"] = sorted(self.require_api)
        if self.all_gpu_archs:
            out["all-gpu-archs"] = True
        return out


def parse_day(text: str) -> str:
    """``--exclude-newer``'s day, ``YYYY-MM-DD``; ``UsageError`` otherwise."""
    try:
        return datetime.date.fromisoformat(text.strip()).isoformat() if len(text.strip()) == 10 else _not_a_day(text)
    except ValueError:
        return _not_a_day(text)


def _not_a_day(text: str) -> str:
    raise UsageError(f"--exclude-newer {text!r} is not a day (YYYY-MM-DD)", hint="e.g. --exclude-newer 2026-12-01: files uploaded on or before that day (UTC)")


def recorded_torch_choice(inputs: Mapping[str, object]) -> TorchChoice | None:
    """The torch choice a plan was made with, from its recorded ``inputs``
    (``ResolveRequest.inputs``: ``torch``, ``installed-torch`` and the words that move it), as
    ``ResolveRequest.torch_choice`` made it; None when they do not say (or this version cannot read them)."""
    text = inputs.get("torch")
    recorded = inputs.get("installed-torch")
    upgrade = inputs.get("upgrade-package")
    if not isinstance(text, str):
        return None
    try:
        installed = Version(recorded) if isinstance(recorded, str) else None
        choice = TorchChoice.parse(text)
    except (UsageError, InvalidVersion):
        return None
    # a --cuda other than the installed torch's label was accepted only with --change-cuda: that word
    asked = inputs.get("cuda")
    cuda = CudaLabel.parse(asked) if isinstance(asked, str) else None
    moved_cuda = cuda is not None and installed is not None and CudaLabel.of_torch(installed) not in (None, cuda)
    return choice.for_kept(installed, upgrade=(isinstance(upgrade, (list, tuple)) and TORCH in upgrade) or moved_cuda)


def torch_move_named(inputs: Mapping[str, object], installed: Version) -> bool:
    """Whether a plan's recorded ``inputs`` name a move of the installed torch ``installed``: the
    check ``install`` makes before anything reaches uv (no inputs recorded: nothing named)."""
    choice = recorded_torch_choice({"torch": "nightly", **inputs, "installed-torch": str(installed)})
    return choice is not None and choice.kind is not TorchKind.INSTALLED


def parse_upgrade_packages(items: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """``--upgrade-package NAME`` (uv's word; repeatable): the canonical names, each one a plan
    keeps as installed unless named (only ``torch``: every other package already takes its newest
    fitting release unless pinned)."""
    out: list[str] = []
    for text in items:
        name = canonicalize_name(text.strip()) if text.strip() and not any(c in text for c in "<>=!~;[ @") else None
        if name not in UPGRADABLE:
            raise UsageError(
                f"--upgrade-package {text!r}: only torch is kept as installed unless named",
                hint="--upgrade-package torch moves the kept torch to the newest of --torch's channel; other packages: --with 'NAME>=VERSION'",
            )
        if name not in out:
            out.append(name)
    return tuple(out)


def parse_gpu_list(items: tuple[str, ...] | list[str] | str) -> tuple[GpuArch, ...]:
    """``--gpu`` (repeatable, comma-separated) / config ``gpus``: () when none given."""
    if isinstance(items, str):
        items = [items]
    if not any(i.strip() for i in items):
        return ()

    return parse_gpus(items)


def _torch_specifier(choice: str) -> SpecifierSet:
    """``--torch`` as a version (``2.12.0``: ``==2.12.0``) or a specifier; ``UsageError`` otherwise."""
    try:
        spec = SpecifierSet(f"=={choice}") if choice[:1].isdigit() else SpecifierSet(choice)
    except InvalidSpecifier:
        spec = None
    if not choice or spec is None or not len(spec):
        raise UsageError(
            f"--torch {choice!r} is neither a channel nor a version",
            hint=f"use one of {', '.join(TORCH_CHANNELS)}, a version like 2.12.0.dev20260307+cu130, or a specifier like '>=2.11'",
        )
    return spec


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None
