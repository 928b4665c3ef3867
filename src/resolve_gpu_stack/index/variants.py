"""Wheel variants (PEP 817 / PEP 825, drafts): their file names and index metadata, recognised.

A variant wheel's name carries one more part than a plain wheel's, its *variant label*
(``{name}-{version}(-{build})?-{python}-{abi}-{platform}-{label}.whl``; a label is 1 to 16 of
``[0-9a-z._]``; ``null`` is the variant without properties), and each release with variant wheels
links a ``{name}-{version}-variants.json`` beside them that maps each label to its properties
(PEP 825 as of its 2026-05-11 clarifications; PEP 850 for the providers and ``abi_dependency``).

Installers that do not implement the drafts (pip; uv without its ``wheel-variants`` preview) cannot
install a variant wheel: its name does not parse as a wheel's. So a plan names none: each is set
aside with the reason (``SET_ASIDE`` in the page's warnings), and a release's plain wheels are taken
where it has them. docs/reference/wheel-variants.md says what is read and what is not yet.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, NormalizedName, parse_wheel_filename
from packaging.version import Version

# PEP 825: "1 to 16 characters ... lowercase ASCII letters, digits, underscores and dots"
_LABEL = re.compile(r"[0-9a-z._]{1,16}")
_VARIANTS_JSON = re.compile(r"[^-/]+-[^-/]+-variants\.json")
SET_ASIDE = "set aside: pip and uv without its wheel-variants preview cannot install a variant wheel"


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


def set_aside(filename: str) -> str | None:
    """The page warning for a variant wheel or a release's variant metadata, else None."""
    if len(filename) > 255:
        return None
    found = variant_wheel(filename)
    if found is not None:
        return f"{filename}: a variant wheel (label {found.label!r}; PEP 825, a draft): {SET_ASIDE}"
    if is_variants_json(filename):
        return f"{filename}: the variant metadata of a release (PEP 825, a draft): not read; its variant wheels are {SET_ASIDE}"
    return None


__all__ = ["SET_ASIDE", "VariantWheel", "is_variants_json", "set_aside", "variant_wheel"]
