"""GPUs and FlashInfer's architecture variants: parsing, coverage and provider scoring.

A GPU is its compute capability (``GpuArch``: ``sm120`` = 12.0). A variant is a SASS target
FlashInfer compiles for (``ArchVariant``: ``sm120f``): no suffix is baseline SASS, ``a`` is
architecture-specific ("exact"), ``f`` is family-specific. Which variant runs where is the CUDA
binary-compatibility rule (sources in ``indexes/gpus.toml``):

- exact ``smXYa`` runs only on X.Y;
- family ``smXYf`` and baseline ``smXY`` run on X.Z for every Z >= Y of the same major.

Jit-cache builds and providers carry no PTX, so nothing else runs a kernel ahead of time.
FlashInfer 0.7 picks, per GPU, the best-scoring provider that serves it (exact > family > baseline);
the order itself is data (``Scoring``, loaded by ``data/gpus.py``). Pure: stdlib + packaging.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass

from packaging.utils import canonicalize_name

from ..errors import UsageError

PROVIDER_PREFIX = "flashinfer-jit-cache-"

# patterns compiled where first used (re's cache): only --gpu, --require-api and doctor read these
_DOTTED_RE = r"^([1-9]\d?)\.(\d)([af]?)$"
_PREFIXED_RE = r"^(?:sm|compute)_?([1-9]\d?)(\d)([af]?)$"
_SEPARATORS_RE = r"[,\s]+"
_PROVIDER_TAG_RE = r"^sm([1-9]\d?)(\d)([af]?)$"

GPU_FORMS = "sm120, sm_120, 12.0 or sm120a (the compute capability `nvidia-smi --query-gpu=compute_cap` prints)"
VARIANT_FORMS = "sm120f, sm90a, sm80 or 12.0f"


class MatchKind(enum.Enum):
    """How a variant serves a GPU."""

    EXACT = "exact"
    FAMILY = "family"
    BASELINE = "baseline"


_KIND_OF_SUFFIX = {"a": MatchKind.EXACT, "f": MatchKind.FAMILY, "": MatchKind.BASELINE}


def _split(text: str) -> tuple[int, int, str] | None:
    """``"sm_120f"`` / ``"12.0f"`` / ``"compute_90a"`` -> (12, 0, "f"); None when not of that form."""
    cleaned = text.strip().lower()
    m = re.match(_DOTTED_RE, cleaned) or re.match(_PREFIXED_RE, cleaned)
    return (int(m.group(1)), int(m.group(2)), m.group(3)) if m else None


@dataclass(frozen=True, slots=True, order=True)
class GpuArch:
    """A GPU by compute capability: ``GpuArch(12, 0)`` is ``sm120``. Ordered by (major, minor)."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str, *, what: str = "GPU") -> GpuArch:
        """``sm120``, ``sm_120``, ``12.0``, ``SM120``; a variant suffix (``sm120a``, ``sm100f``) names
        the GPU it is built for and is dropped. Anything else raises ``UsageError`` naming ``what``."""
        parts = _split(text) if isinstance(text, str) else None
        if parts is None:
            raise UsageError(f"{what} {text!r} is not a GPU architecture", hint=f"write it as {GPU_FORMS}")
        return cls(parts[0], parts[1])

    @property
    def capability(self) -> str:
        """``"12.0"``, as nvidia-smi prints it."""
        return f"{self.major}.{self.minor}"

    def __str__(self) -> str:
        return f"sm{self.major}{self.minor}"


@dataclass(frozen=True, slots=True, order=True)
class ArchVariant:
    """A SASS target: ``ArchVariant(12, 0, "f")`` is ``sm120f`` (``12.0f`` in an arch list)."""

    major: int
    minor: int
    suffix: str = ""

    def __post_init__(self) -> None:
        if self.suffix not in _KIND_OF_SUFFIX:
            raise ValueError(f"variant suffix must be '', 'a' or 'f', not {self.suffix!r}")

    @classmethod
    def parse(cls, text: str, *, what: str = "architecture") -> ArchVariant:
        """``sm120f``, ``sm_90a``, ``12.0f``, ``compute_100a``, ``8.0``; otherwise ``UsageError``."""
        parts = _split(text) if isinstance(text, str) else None
        if parts is None:
            raise UsageError(f"{what} {text!r} is not an architecture variant", hint=f"write it as {VARIANT_FORMS}")
        return cls(*parts)

    @property
    def kind(self) -> MatchKind:
        return _KIND_OF_SUFFIX[self.suffix]

    @property
    def gpu(self) -> GpuArch:
        """The GPU this variant is compiled for."""
        return GpuArch(self.major, self.minor)

    @property
    def sass(self) -> str:
        """``"12.0f"``: how ``FLASHINFER_CUDA_ARCH_LIST`` and ``[[jit-cache-archs]]`` write it."""
        return f"{self.major}.{self.minor}{self.suffix}"

    def serves(self, gpu: GpuArch) -> bool:
        """Whether this SASS runs on ``gpu`` (the CUDA binary-compatibility rule, module docstring)."""
        if self.kind is MatchKind.EXACT:
            return (gpu.major, gpu.minor) == (self.major, self.minor)
        return gpu.major == self.major and gpu.minor >= self.minor

    def match(self, gpu: GpuArch) -> MatchKind | None:
        """This variant's kind when it serves ``gpu``, else None."""
        return self.kind if self.serves(gpu) else None

    def provider_name(self, prefix: str = PROVIDER_PREFIX) -> str:
        """``flashinfer-jit-cache-sm120f``."""
        return f"{prefix}{self}"

    def __str__(self) -> str:
        return f"sm{self.major}{self.minor}{self.suffix}"


def _items(values: str | Iterable[str]) -> list[str]:
    """Comma- or space-separated entries of one string or of each string in ``values``."""
    texts = [values] if isinstance(values, str) else list(values)
    out: list[str] = []
    for text in texts:
        if not isinstance(text, str):
            raise UsageError(f"{text!r} is not a GPU architecture", hint=f"write it as {GPU_FORMS}")
        out.extend(part for part in re.split(_SEPARATORS_RE, text) if part)
    return out


def parse_gpus(values: str | Iterable[str], *, what: str = "--gpu") -> tuple[GpuArch, ...]:
    """GPUs from ``"sm120,sm90"`` or ``["sm120", "12.0", "sm_90"]``: deduplicated, in first-seen
    order. An empty list or a bad entry raises ``UsageError`` naming ``what`` and the entry."""
    items = _items(values)
    if not items:
        raise UsageError(f"{what}: no GPU architecture given", hint=f"write it as {GPU_FORMS}")
    seen: dict[GpuArch, None] = {}
    for item in items:
        seen.setdefault(GpuArch.parse(item, what=what), None)
    return tuple(seen)


def parse_variants(values: str | Iterable[str], *, what: str = "architecture list") -> tuple[ArchVariant, ...]:
    """Variants from an arch list such as ``"9.0a 10.0a 12.0f"`` (spaces or commas), in order."""
    return tuple(ArchVariant.parse(item, what=what) for item in _items(values))


def covers(targets: str | Iterable[str | ArchVariant], gpu: GpuArch) -> bool:
    """Whether a SASS target list (``"9.0a 10.0a 12.0f"``, or variants) has code that runs on ``gpu``."""
    if isinstance(targets, str):
        variants: Iterable[ArchVariant] = parse_variants(targets)
    else:
        variants = (t if isinstance(t, ArchVariant) else ArchVariant.parse(t) for t in targets)
    return any(v.serves(gpu) for v in variants)


def variant_of_provider(name: str, prefix: str = PROVIDER_PREFIX) -> ArchVariant | None:
    """``flashinfer-jit-cache-sm120f`` (any spelling PEP 503 normalizes to it) -> sm120f; a name that
    is not a provider (the shim ``flashinfer-jit-cache`` included) -> None."""
    normalized = canonicalize_name(name)
    base = canonicalize_name(prefix.rstrip("-_."))
    if not normalized.startswith(base + "-"):
        return None
    m = re.match(_PROVIDER_TAG_RE, normalized[len(base) + 1 :])
    return ArchVariant(int(m.group(1)), int(m.group(2)), m.group(3)) if m else None


@dataclass(frozen=True, slots=True)
class ScoredVariant:
    """A variant that serves a GPU, with how (``kind``) and its rank (0 is best)."""

    variant: ArchVariant
    kind: MatchKind
    rank: int


@dataclass(frozen=True, slots=True)
class Scoring:
    """The order FlashInfer prefers variants in, best first (``indexes/gpus.toml``)."""

    order: tuple[MatchKind, ...] = (MatchKind.EXACT, MatchKind.FAMILY, MatchKind.BASELINE)

    def __post_init__(self) -> None:
        if sorted(k.value for k in self.order) != sorted(k.value for k in MatchKind):
            raise ValueError(f"scoring order must name each of {', '.join(k.value for k in MatchKind)} once")

    def rank(self, variants: Iterable[ArchVariant], gpu: GpuArch) -> tuple[ScoredVariant, ...]:
        """The variants that serve ``gpu``, best first: by kind in ``order``, then the closest
        (highest) compute capability, so ``sm89`` beats ``sm80`` on an 8.9 GPU."""
        scored = [(v, kind) for v in set(variants) if (kind := v.match(gpu)) is not None]
        scored.sort(key=lambda vk: (self.order.index(vk[1]), -vk[0].major, -vk[0].minor))
        return tuple(ScoredVariant(v, kind, self.order.index(kind)) for v, kind in scored)

    def best(self, variants: Iterable[ArchVariant], gpu: GpuArch) -> ScoredVariant | None:
        ranked = self.rank(variants, gpu)
        return ranked[0] if ranked else None


@dataclass(frozen=True, slots=True)
class ProviderChoice:
    """The provider picked for one GPU; ``provider`` is None when no provider serves it (that GPU
    falls back to JIT compilation)."""

    gpu: GpuArch
    provider: str | None
    variant: ArchVariant | None
    kind: MatchKind | None


def select_providers(
    gpus: Iterable[GpuArch], providers: Iterable[str], scoring: Scoring = Scoring(), prefix: str = PROVIDER_PREFIX
) -> tuple[ProviderChoice, ...]:
    """For each GPU, the best-scoring provider among ``providers`` (names as a shim's Requires-Dist
    or an index lists them; names that are not providers are ignored)."""
    by_variant: dict[ArchVariant, str] = {}
    for name in providers:
        variant = variant_of_provider(name, prefix)
        if variant is not None:
            by_variant.setdefault(variant, name)
    choices = []
    for gpu in gpus:
        best = scoring.best(by_variant, gpu)
        if best is None:
            choices.append(ProviderChoice(gpu, None, None, None))
        else:
            choices.append(ProviderChoice(gpu, by_variant[best.variant], best.variant, best.kind))
    return tuple(choices)


def needed_providers(choices: Iterable[ProviderChoice]) -> tuple[str, ...]:
    """The distinct providers ``choices`` picked, sorted."""
    return tuple(sorted({c.provider for c in choices if c.provider is not None}))


__all__ = [
    "PROVIDER_PREFIX",
    "ArchVariant",
    "GpuArch",
    "MatchKind",
    "ProviderChoice",
    "ScoredVariant",
    "Scoring",
    "covers",
    "needed_providers",
    "parse_gpus",
    "parse_variants",
    "select_providers",
    "variant_of_provider",
]
