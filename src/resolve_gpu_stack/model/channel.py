"""Which channel a version belongs to: the one place that reads a channel off a version number.

The channel *names* are the vocabulary; where a channel's pages live (its path prefix) is data,
``[channels]`` in ``indexes/pytorch.toml`` and ``indexes/flashinfer.toml``.
"""

from __future__ import annotations

from packaging.version import Version

TORCH_CHANNEL_NAMES = ("nightly", "test", "stable")
FLASHINFER_CHANNEL_NAMES = ("nightly", "stable")
TORCH_ORIGINS = ("pytorch", "pypi")  # where a torch build was published: routing.toml `when = { torch = ... }`


def torch_channel(version: Version) -> str:
    """The PyTorch channel that publishes ``version``: ``nightly`` for a dev build
    (2.12.0.dev20260307), ``test`` for a release candidate (2.11.0rc3), else ``stable``."""
    if version.is_devrelease:
        return "nightly"
    return "test" if version.is_prerelease else "stable"


def torch_origin(version: Version | None) -> str:
    """Where the torch ``version`` was published: ``pypi`` for a release without a local label
    (PyPI's builds carry none: 2.15.0 is the PyTorch index's 2.15.0+cu132), else ``pytorch`` (the
    PyTorch index labels every build of its CUDA folders; a nightly is only there)."""
    return "pypi" if version is not None and version.local is None and not version.is_devrelease else "pytorch"


def flashinfer_channel(version: Version | None) -> str:
    """The FlashInfer channel whose pages carry ``version``: ``nightly`` for a dev build, else
    ``stable`` (release candidates are published beside releases); None is ``stable``."""
    return "nightly" if version is not None and version.is_devrelease else "stable"


__all__ = ["FLASHINFER_CHANNEL_NAMES", "TORCH_CHANNEL_NAMES", "TORCH_ORIGINS", "flashinfer_channel", "torch_channel", "torch_origin"]
