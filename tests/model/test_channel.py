"""One function per channel concept, and the sites that read a channel off a version agree."""

from __future__ import annotations

import pytest
from packaging.version import Version

from resolve_gpu_stack.model.channel import flashinfer_channel, torch_channel
from resolve_gpu_stack.model.request import FlashInferChoice, TorchChoice


@pytest.mark.parametrize(
    ("version", "channel"),
    [
        ("2.12.0.dev20260307+cu130", "nightly"),
        ("2.12.0rc1.dev20260307", "nightly"),
        ("2.11.0rc3+cu130", "test"),
        ("2.11.0+cu130", "stable"),
        ("2.11.0.post1", "stable"),
    ],
)
def test_torch_channel(version: str, channel: str) -> None:
    assert torch_channel(Version(version)) == channel


@pytest.mark.parametrize(
    ("version", "channel"),
    [(None, "stable"), ("0.6.5", "stable"), ("0.7.0rc3", "stable"), ("0.6.5.dev20260301", "nightly")],
)
def test_flashinfer_channel(version: str | None, channel: str) -> None:
    assert flashinfer_channel(Version(version) if version else None) == channel


@pytest.mark.parametrize(
    ("text", "channel"),
    [("2.12.0.dev20260307+cu130", "nightly"), ("2.11.0rc3", "test"), ("==2.11.0", "stable"), (">=2.11,<2.12.0rc1", "test")],
)
def test_torch_specifier_channel(text: str, channel: str) -> None:
    assert TorchChoice.parse(text).channel == channel


def test_installed_torch_release_candidate_reads_the_test_channel() -> None:
    # The lock check routes an rc torch to test/; `--torch installed` must read the same pages.
    choice = TorchChoice.parse("installed")
    assert choice.for_installed(Version("2.11.0rc3+cu130")).channel == "test"
    assert choice.for_installed(Version("2.12.0.dev20260307+cu130")).channel == "nightly"
    assert choice.for_installed(Version("2.11.0+cu130")).channel == "stable"


@pytest.mark.parametrize(
    ("text", "channel"),
    [("nightly", "nightly"), ("latest", "stable"), ("none", "stable"), ("0.6.5", "stable"), ("0.6.5.dev20260301", "nightly")],
)
def test_flashinfer_choice_channel(text: str, channel: str) -> None:
    assert FlashInferChoice.parse(text).channel == channel
