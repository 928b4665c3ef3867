"""Snapshot storage rules: keys follow the index a URL came through; recorded METADATA without a
digest keeps only what resolving reads."""

from __future__ import annotations

from support.paths import SNAPSHOT

from resolve_gpu_stack.index.parse import parse_metadata
from resolve_gpu_stack.net.snapshot import RESOLVER_FIELDS, reduce_metadata, snapshot_key

RAW = b"""Metadata-Version: 2.4
Name: numpy
Version: 2.4.2
Summary: Fundamental package for array computing in Python
Project-URL: download, https://registry.example/project/numpy/#files
Requires-Python: >=3.11
Provides-Extra: test
Requires-Dist: pytest; extra == "test"
Requires-Dist: typing-extensions>=4.10;
 python_version < "3.13"
Description-Content-Type: text/markdown

See https://registry.example/project/numpy/ for more.
"""


def test_reduce_metadata_keeps_exactly_what_the_resolver_reads():
    small = reduce_metadata(RAW)
    assert b"registry.example" not in small and b"Summary" not in small
    assert [line.split(":", 1)[0] for line in small.decode().splitlines()] == [
        "Metadata-Version",
        "Name",
        "Version",
        "Requires-Python",
        "Provides-Extra",
        "Requires-Dist",
        "Requires-Dist",
    ]
    full, reduced = parse_metadata(RAW, source="x"), parse_metadata(small, source="x")
    assert (full.name, full.version, full.requires_python, full.provides_extra) == (
        reduced.name,
        reduced.version,
        reduced.requires_python,
        reduced.provides_extra,
    )
    assert reduced.requires_dist == ('pytest; extra == "test"', 'typing-extensions>=4.10; python_version < "3.13"')


def test_bundled_pypi_metadata_is_reduced():
    files = list((SNAPSHOT / "metadata" / "pypi").rglob("*.metadata"))
    assert files
    for path in files:
        fields = {line.split(":", 1)[0] for line in path.read_text().splitlines() if line}
        assert fields <= set(RESOLVER_FIELDS), path


def test_keys_follow_the_index_a_url_came_through_when_indexes_share_a_host():
    bases = {"pytorch": "http://h:1/whl/", "flashinfer": "http://h:1/fi/", "pypi": "http://h:1/simple/"}
    assert snapshot_key("http://h:1/simple/numpy/", bases, index="pypi") == "pypi:numpy/"
    assert snapshot_key("http://h:1/files/numpy-2.whl", bases, index="pypi") == "pypi:../files/numpy-2.whl"
    assert snapshot_key("http://h:1/fi/cu130/flashinfer-jit-cache/", bases) == "flashinfer:cu130/flashinfer-jit-cache/"
    assert snapshot_key("https://other.example/x.whl#sha256=ab", bases) == "https://other.example/x.whl"


def _cut(times: list[object], day: str = "2026-03-07") -> list[str]:
    import json

    from resolve_gpu_stack.net.snapshot import cut_newer

    files = [{"filename": f"demo-1.{i}-py3-none-any.whl", "url": "x", "upload-time": t} for i, t in enumerate(times)]
    body = json.dumps({"meta": {"api-version": "1.1"}, "files": files}).encode()
    kept = json.loads(cut_newer(body, "application/vnd.pypi.simple.v1+json", day))["files"]
    return [f["upload-time"] for f in kept]


def test_exclude_newer_compares_times_not_strings():
    """`...59Z` and `...59.5Z` are both on the day (as strings, "Z" sorts after "." and was cut)."""
    on_day = [
        "2026-03-07T23:59:59Z",
        "2026-03-07T23:59:59.5Z",
        "2026-03-07T00:00:00Z",
        "2026-03-08T00:30:00+01:00",
        "2026-03-07T23:59:59.999999999Z",
        "2026-03-06T12:00:00",
    ]
    after = ["2026-03-08T00:00:00Z", "2026-03-07T23:30:00-01:00", "2026-03-08T00:00:00.000001Z"]
    assert _cut(on_day + after) == on_day
    assert _cut([None, "", "not a time", 5]) == [None, "", "not a time", 5]  # no usable time: kept, as before


def test_exclude_newer_refuses_a_bad_day():
    import pytest

    from resolve_gpu_stack.errors import UsageError

    with pytest.raises(UsageError, match="not a day"):
        _cut(["2026-03-07T23:59:59Z"], day="2026-13-01")
