"""Live: the exports of PyPI's torch 2.15.0 (cp312, x86_64) read by range requests, here and in
the second process, are the names the reader has given since it was first checked against the
whole libraries: 103,705 of them, pinned by the digest of their sorted lines. Skipped offline."""

from __future__ import annotations

import hashlib
import json
import os
import urllib.request

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


@pytest.fixture(scope="module")
def torch_wheel() -> IndexFile:
    try:
        request = urllib.request.Request(discover_pypi_url(os.environ).rstrip("/") + "/torch/", headers={"Accept": "application/vnd.pypi.simple.v1+json"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            files = json.load(answer)["files"]
    except (ResolveGpuStackError, OSError, ValueError) as exc:
        pytest.skip(f"PyPI cannot be reached: {exc}")
    row = next(f for f in files if f["filename"] == WHEEL)
    return IndexFile(filename=WHEEL, url=row["url"], name="torch", version=Version("2.15.0"), sha256=row["hashes"]["sha256"], size=row["size"])


@pytest.mark.parametrize("where", ["here", "second process"])
def test_torch_2_15_exports_are_the_names_they_always_were(torch_wheel: IndexFile, where: str) -> None:
    with HttpFetcher(FetchSettings(range_process=where != "here"), cache=None) as fetcher:
        found = readers.exports_reader(fetcher.scan_access())("2.15.0", torch_wheel)
        answered = fetcher.range_process.answered if fetcher.range_process is not None else 0
    assert found.symbols is not None, found.source
    assert answered == (where != "here"), f"read {'here' if not answered else 'in the second process'}"
    assert len(found.symbols) == NAMES
    assert hashlib.sha256("\n".join(sorted(found.symbols)).encode()).hexdigest() == DIGEST
