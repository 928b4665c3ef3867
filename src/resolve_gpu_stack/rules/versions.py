"""Version order and its wording: public versions, torch series, the jit-cache version aligned with
a flashinfer-python, and a list of versions as a message shows it. Pure."""

from __future__ import annotations

from collections.abc import Iterable

from packaging.version import Version

from ..model.cuda import CudaLabel


def public(version: Version) -> Version:
    """The public part of a version (``0.6.5+cu130`` -> ``0.6.5``)."""
    return Version(version.public)


def torch_series(version: Version) -> str:
    return f"{version.major}.{version.minor}"


def jit_cache_version(python_version: Version, label: str) -> Version:
    """The exact jit-cache version aligned with a flashinfer-python version: ``<public>+<label>``."""
    return Version(f"{python_version.public}+{label}")


def cuda_major(label: str | None) -> int | None:
    parsed = CudaLabel.parse(label)
    return parsed.major if parsed else None


def newest_first(versions: Iterable[Version]) -> list[Version]:
    return sorted(set(versions), reverse=True)


def describe_versions(versions: Iterable[Version], limit: int = 6) -> str:
    vs = newest_first(versions)
    if not vs:
        return "none"
    shown = ", ".join(str(v) for v in vs[:limit])
    return shown + (f" (+{len(vs) - limit} more)" if len(vs) > limit else "")


__all__ = ["cuda_major", "describe_versions", "jit_cache_version", "newest_first", "public", "torch_series"]
