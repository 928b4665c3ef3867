"""Which channel a version belongs to: the one place that reads a channel off a version number.

The channel *names* are the vocabulary; where a channel's pages live (its path prefix) is data,
``[channels]`` in ``indexes/pytorch.toml`` and ``indexes/flashinfer.toml``.
"""

from __future__ import annotations

from packaging.version import Version

TORCH_CHANNEL_NAMES = ("nightly", "test", "stable")
FLASHINFER_CHANNEL_NAMES = ("nightly", "stable")


def torch_channel(version: Version) -> str:
    """The PyTorch channel that publishes ``version``: ``nightly`` for a dev build
    (2.12.0.dev20260307), ``test`` for a release candidate (2.11.0rc3), else ``stable``."""
    if version.is_devrelease:
        return "nightly"
    return "test" if version.is_prerelease else "stable"


def flashinfer_channel(version: Version | None) -> str:
    """The FlashInfer channel whose pages carry ``version``: ``nightly`` for a dev build, else
    ``stable`` (release candidates are published beside releases); None is ``stable``."""
    return "nightly" if version is not None and version.is_devrelease else "stable"


__all__ = ["FLASHINFER_CHANNEL_NAMES", "TORCH_CHANNEL_NAMES", "flashinfer_channel", "torch_channel"]
