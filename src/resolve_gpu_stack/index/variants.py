"""Wheel variants (PEP 817 / PEP 825, drafts): their file names and index metadata, read and judged.

A variant wheel's name carries one more part than a plain wheel's, its *variant label*
(``{name}-{version}(-{build})?-{python}-{abi}-{platform}-{label}.whl``; a label is 1 to 16 of
``[0-9a-z._]``; ``null`` is the variant without properties), and each release with variant wheels
links a ``{name}-{version}-variants.json`` beside them that maps each label to its properties
(PEP 825 as of its 2026-05-11 clarifications; PEP 850 for the providers and ``abi_dependency``).

The parser keeps variant wheels apart from the plain files (``ParsedPage.variants``), each with
its release's variants.json; the finder offers them; the resolver judges them (``judge_variant``,
by the data rules of components.toml ``[variants]``) only behind ``--wheel-variants``, and refuses
them otherwise. Installers that do not implement the drafts (pip; uv without its preview) cannot
install a variant wheel: ``is_variant_filename`` is how the doors that hand a plan or a lock to one
know it. docs/reference/wheel-variants.md says what is read and what is not yet.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, NormalizedName, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from ..data.rules import VariantRules
from ..errors import ResolveGpuStackError, UvError
from ..model.cuda import CudaLabel
from ..model.gpu import GpuArch

# PEP 825: "1 to 16 characters ... lowercase ASCII letters, digits, underscores and dots"
_LABEL = re.compile(r"[0-9a-z._]{1,16}")
_VARIANTS_JSON = re.compile(r"[^-/]+-[^-/]+-variants\.json")
# what a door that hands a plan to uv or a lock to a plain installer says of a variant wheel
NOT_INSTALLABLE = "uv (without its wheel-variants preview, which this tool does not drive) and pip cannot install a variant wheel (PEP 825, a draft)"
# a lock is read by any PEP 751 installer, and PEP 751 (as packaging reads it) names plain wheels only
NOT_LOCKABLE = f"a lock names plain wheels only (PEP 751, as packaging validates it), and {NOT_INSTALLABLE}"
WAY_OUT = "drop --wheel-variants (config: wheel-variants = false) to plan the release's plain wheel, or install the variant wheel by hand with an installer that implements PEP 825"


@dataclass(frozen=True)
class VariantWheel:
    """A variant wheel's name, read: the plain wheel's parts and its variant label."""

    name: NormalizedName
    version: Version
    tags: frozenset[Tag]
    label: str


def variant_wheel(filename: str) -> VariantWheel | None:
    """The parts of ``filename`` when it names a variant wheel (PEP 825), else None."""
    if not filename.endswith(".whl"):
        return None
    stem, _, label = filename[: -len(".whl")].rpartition("-")
    if stem.count("-") not in (4, 5) or not _LABEL.fullmatch(label):
        return None
    try:
        name, version, _build, tags = parse_wheel_filename(stem + ".whl")
    except (InvalidWheelFilename, ValueError):
        return None
    return VariantWheel(name=name, version=version, tags=tags, label=label)


def is_variants_json(filename: str) -> bool:
    """Whether ``filename`` is a release's variant metadata (``{name}-{version}-variants.json``)."""
    return _VARIANTS_JSON.fullmatch(filename) is not None


def variants_json_release(filename: str) -> tuple[NormalizedName, Version] | None:
    """The (name, version) whose variant metadata ``filename`` is (``{name}-{version}-variants.json``)."""
    if not is_variants_json(filename):
        return None
    name, version, _ = filename.split("-", 2)
    try:
        return canonicalize_name(name, validate=True), Version(version)
    except (InvalidVersion, ValueError):
        return None


def is_variant_filename(filename: str) -> bool:
    """Whether ``filename`` names a variant wheel: not a plain wheel's name, and one by PEP 825."""
    try:
        parse_wheel_filename(filename)
    except (InvalidWheelFilename, ValueError):
        return variant_wheel(filename) is not None
    return False


# label -> namespace -> feature -> the values (alternatives), as {name}-{version}-variants.json says
Properties = Mapping[str, Mapping[str, tuple[str, ...]]]


class VariantsJsonError(ValueError):
    """A ``{name}-{version}-variants.json`` that is not PEP 825's shape."""


def read_variants_json(text: str | bytes) -> dict[str, Properties]:
    """Each variant label's properties from a release's ``variants.json`` (PEP 825: a top-level
    ``variants`` object, label -> namespace -> feature -> list of values). Anything else raises
    ``VariantsJsonError`` saying what is wrong; nothing else of the file is needed to judge."""
    try:
        doc = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise VariantsJsonError(f"not JSON: {exc}") from None
    variants = doc.get("variants") if isinstance(doc, dict) else None
    if not isinstance(variants, dict):
        raise VariantsJsonError("no 'variants' object")
    out: dict[str, Properties] = {}
    for label, namespaces in variants.items():
        if not isinstance(label, str) or not _LABEL.fullmatch(label) or not isinstance(namespaces, dict):
            raise VariantsJsonError(f"variant {label!r}: a label of 1 to 16 of [0-9a-z._] mapping to an object is needed")
        props: dict[str, dict[str, tuple[str, ...]]] = {}
        for namespace, features in namespaces.items():
            if not isinstance(features, dict):
                raise VariantsJsonError(f"variant {label!r}: namespace {namespace!r} is not an object")
            for feature, values in features.items():
                if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
                    raise VariantsJsonError(f"variant {label!r}: {namespace} :: {feature} is not a non-empty list of strings")
                props.setdefault(namespace, {})[feature] = tuple(values)
        out[label] = props
    return out


@dataclass(frozen=True)
class VariantTarget:
    """What a variant is judged against: the target's CUDA, its ``--gpu`` set and the kept torch."""

    cuda: CudaLabel | None
    gpus: tuple[GpuArch, ...]
    torch: Version | None


def judge_variant(properties: Mapping[str, Mapping[str, tuple[str, ...]]], target: VariantTarget, rules: VariantRules) -> str | None:
    """None when every property of a variant holds for ``target`` by ``rules`` (components.toml
    ``[variants]``), else why not. A feature's values are alternatives: one that holds suffices."""
    for namespace, features in sorted(properties.items()):
        for feature, values in sorted(features.items()):
            why = _judge_property(namespace, feature, values, target, rules)
            if why is not None:
                return why
    return None


def _judge_property(namespace: str, feature: str, values: tuple[str, ...], target: VariantTarget, rules: VariantRules) -> str | None:
    """None when one of a feature's ``values`` holds for ``target`` by its rule, else why not."""
    prop = f"{namespace} :: {feature}"
    rule = rules.rule(namespace, feature)
    if rule is None:
        return f"{prop} is a property the tool does not judge"
    reads = [rule.value.fullmatch(v) for v in values]
    if not all(reads):
        return f"{prop} :: {', '.join(values)}: not read as {rule.judge} expects"
    judge = _JUDGES.get(rule.judge)
    return judge(prop, values, [m for m in reads if m is not None], target) if judge is not None else None


def _judge_cuda_at_least(prop: str, values: tuple[str, ...], read: list[re.Match[str]], target: VariantTarget) -> str | None:
    return _judge_cuda(prop, values, read, target, at_least=True)


def _judge_cuda_at_most(prop: str, values: tuple[str, ...], read: list[re.Match[str]], target: VariantTarget) -> str | None:
    return _judge_cuda(prop, values, read, target, at_least=False)


def _judge_cuda(prop: str, values: tuple[str, ...], read: list[re.Match[str]], target: VariantTarget, *, at_least: bool) -> str | None:
    """``cuda-at-least`` / ``cuda-at-most``: the target's CUDA is at least (most) one of the bounds."""
    if target.cuda is None:
        return f"{prop}: the target's CUDA is not known"
    bounds = [CudaLabel(int(m["major"]), int(m["minor"])) for m in read]
    if not any(target.cuda >= b if at_least else target.cuda <= b for b in bounds):
        return f"{prop} :: {', '.join(values)}: not the target's CUDA {target.cuda.major}.{target.cuda.minor}"
    return None


def _judge_gpu_served(prop: str, values: tuple[str, ...], read: list[re.Match[str]], target: VariantTarget) -> str | None:
    """``gpu-served``: every ``--gpu`` is among the architectures the variant serves."""
    if not target.gpus:
        return f"{prop}: no --gpu given to judge it"
    archs = {GpuArch(int(m["major"]), int(m["minor"])) for m in read}
    missing = [str(g) for g in target.gpus if g not in archs]
    if missing:
        return f"{prop} :: {', '.join(values)}: does not serve {', '.join(missing)}"
    return None


def _judge_torch_series(prop: str, values: tuple[str, ...], read: list[re.Match[str]], target: VariantTarget) -> str | None:
    """``torch-series``: the kept torch is of one of the variant's release series."""
    if target.torch is None:
        return f"{prop}: no torch is kept"
    if not any(_in_series(target.torch, m["release"]) for m in read):
        return f"{prop} :: {', '.join(values)}: not the kept torch {target.torch}"
    return None


# each judge components.toml [variants] may name (``VARIANT_JUDGES``), by that name
_JUDGES: Mapping[str, Callable[[str, tuple[str, ...], list[re.Match[str]], VariantTarget], str | None]] = {
    "cuda-at-least": _judge_cuda_at_least,
    "cuda-at-most": _judge_cuda_at_most,
    "gpu-served": _judge_gpu_served,
    "torch-series": _judge_torch_series,
}


def _in_series(torch: Version, release: str) -> bool:
    try:
        wanted = Version(release).release
    except InvalidVersion:
        return False
    return torch.release[: len(wanted)] == wanted


def variant_refusal(
    rows: Iterable[tuple[str, str | None]], *, doing: str, because: str = NOT_INSTALLABLE, error: type[ResolveGpuStackError] = UvError
) -> ResolveGpuStackError | None:
    """The error for a plan that holds variant wheels (``rows``: each package's name and wheel file
    name) when ``doing`` (install, export uv, write a lock) would hand them to an installer that
    cannot install one (``because``); None when it holds none. Raised before anything changes."""
    found = sorted(f"{name} ({filename})" for name, filename in rows if filename and is_variant_filename(filename))
    if not found:
        return None
    return error(f"cannot {doing}: the plan holds variant wheel{'s' * (len(found) != 1)}: {', '.join(found)}; {because}", hint=WAY_OUT)


def specificity(properties: Properties) -> int:
    """How specific a variant is: the number of its features (``null``: 0). The most specific
    matching variant is planned."""
    return sum(len(features) for features in properties.values())


def properties_text(properties: Properties) -> str:
    """A variant's properties as PEP 825 writes them, ``namespace :: feature :: value``, joined by
    ``; `` (a feature's alternatives by ``, ``); ``(none)`` for the null variant."""
    rows = [f"{ns} :: {feature} :: {', '.join(values)}" for ns, features in sorted(properties.items()) for feature, values in sorted(features.items())]
    return "; ".join(rows) or "(none)"


def pick_variant(variants: Mapping[str, Properties], target: VariantTarget, rules: VariantRules) -> tuple[str | None, dict[str, str]]:
    """The label of the variant to plan among ``variants`` (one release's), and why each other is
    not: the matching variant with the most properties (the most specific build) wins, ``null``
    (no properties) last; ties go to the label's order. ``(None, reasons)`` when none matches."""
    reasons = {label: why for label, props in variants.items() if (why := judge_variant(props, target, rules)) is not None}
    fits = [label for label in variants if label not in reasons]
    if not fits:
        return None, reasons
    best = max(fits, key=lambda label: (specificity(variants[label]), [-ord(c) for c in label]))
    for label in fits:
        if label != best:
            reasons[label] = f"matches, but {best!r} is more specific"
    return best, reasons


__all__ = [
    "NOT_INSTALLABLE",
    "NOT_LOCKABLE",
    "WAY_OUT",
    "Properties",
    "VariantTarget",
    "VariantWheel",
    "VariantsJsonError",
    "is_variants_json",
    "judge_variant",
    "pick_variant",
    "is_variant_filename",
    "properties_text",
    "read_variants_json",
    "specificity",
    "variant_refusal",
    "variant_wheel",
    "variants_json_release",
]
