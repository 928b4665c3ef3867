"""Live: the exports of PyPI's torch 2.15.0 (cp312, x86_64) read by range requests, here and in
the second process, are the names the reader has given since it was first checked against the
whole libraries: 103,705 of them, pinned by the digest of their sorted lines. Its aarch64 build
(program headers 419 MB into ``libtorch_cuda.so``, where BOLT moved them) too: 74,253 names, those
``nm -D --defined-only`` lists on its extracted libraries. Skipped offline."""

from __future__ import annotations

import hashlib
import json
import os
import urllib.request
from typing import Any

import pytest
from packaging.version import Version

from resolve_gpu_stack.cli.userconfig import discover_pypi_url
from resolve_gpu_stack.errors import ResolveGpuStackError
from resolve_gpu_stack.model import IndexFile
from resolve_gpu_stack.net.http import HttpFetcher
from resolve_gpu_stack.net.scan import readers
from resolve_gpu_stack.net.settings import FetchSettings

pytestmark = pytest.mark.live

WHEEL = "torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl"
NAMES = 103_705
# sha256 of "\n".join(sorted(names)), as the reader of 2026-12-07 (beecd8c8) read them
DIGEST = "e947c356acc72312349557d0d3987a94e83597b2900ace23be076df3713faefa"
ARM_WHEEL = "torch-2.15.0-cp312-cp312-manylinux_2_28_aarch64.whl"
ARM_NAMES = 74_253
# the same digest of the names `nm -D --defined-only` lists on its nine extracted torch libraries (2026-12-08)
ARM_DIGEST = "55d902efd85b37b64ca7c329dfbe7528756a76e81253fe9ea581013c5dab33f1"


@pytest.fixture(scope="module")
def torch_files() -> list[dict[str, object]]:
    try:
        request = urllib.request.Request(discover_pypi_url(os.environ).rstrip("/") + "/torch/", headers={"Accept": "application/vnd.pypi.simple.v1+json"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            files: list[dict[str, object]] = json.load(answer)["files"]
    except (ResolveGpuStackError, OSError, ValueError) as exc:
        pytest.skip(f"PyPI cannot be reached: {exc}")
    return files


def _wheel(files: list[dict[str, object]], filename: str) -> IndexFile:
    row: dict[str, Any] = next(f for f in files if f["filename"] == filename)
    return IndexFile(filename=filename, url=row["url"], name="torch", version=Version("2.15.0"), sha256=row["hashes"]["sha256"], size=row["size"])


@pytest.fixture(scope="module")
def torch_wheel(torch_files: list[dict[str, object]]) -> IndexFile:
    return _wheel(torch_files, WHEEL)


@pytest.mark.parametrize("where", ["here", "second process"])
def test_torch_2_15_exports_are_the_names_they_always_were(torch_wheel: IndexFile, where: str) -> None:
    with HttpFetcher(FetchSettings(range_process=where != "here"), cache=None) as fetcher:
        found = readers.exports_reader(fetcher.scan_access())("2.15.0", torch_wheel)
        answered = fetcher.range_process.answered if fetcher.range_process is not None else 0
    assert found.symbols is not None, found.source
    assert answered == (where != "here"), f"read {'here' if not answered else 'in the second process'}"
    assert len(found.symbols) == NAMES
    assert hashlib.sha256("\n".join(sorted(found.symbols)).encode()).hexdigest() == DIGEST


@pytest.mark.parametrize("where", ["here", "second process"])
def test_torch_2_15_aarch64_exports_are_the_names_nm_lists(torch_files: list[dict[str, object]], where: str) -> None:
    """Its program headers are not in the first 4 KB: they are read from the libraries' ends."""
    wheel = _wheel(torch_files, ARM_WHEEL)
    with HttpFetcher(FetchSettings(range_process=where != "here"), cache=None) as fetcher:
        found = readers.exports_reader(fetcher.scan_access())("2.15.0", wheel)
        received = fetcher.transport.stats.bytes_received
    assert found.symbols is not None, found.source
    assert len(found.symbols) == ARM_NAMES
    assert hashlib.sha256("\n".join(sorted(found.symbols)).encode()).hexdigest() == ARM_DIGEST
    if where == "here":  # (the second process counts its own bytes)
        assert 0 < received < (wheel.size or 0) // 4, received  # the libraries' ends, not the 484 MB wheel
