"""The per-page fast paths of parse.py give exactly what the general path gives.

``_join_redacted`` must equal ``redact(urljoin(base, href))`` (or None where that fails), and
``_filename`` must equal ``parse_filename`` (value or ValueError), for any input, including the
second and later rows of a page, which take the memoized path.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resolve_gpu_stack.index.parse import _Context, _filename, _join, _join_redacted, parse_filename, redact

BASES = [
    "https://pypi.example/simple/numpy/",
    "http://127.0.0.1:8080/whl/nightly/cu130/torch/",
    "https://download.pytorch.example/whl/nightly/cu130/torch/index.html",
    "https://user:tok@mirror.example/a/b/?page=2",
    "https://host.example",
    "http://[::1]:9/x/",
    "HTTPS://upper.example/simple/x/",
    "file:///srv/simple/x/",
]
PIECES = [
    "", "/", "//", "./", "../", ".", "..", "a", "b/", "files/", "whl/nightly/", "torch-2.12.0%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl",
    "x.whl", "#sha256=00ff", "#", "?q=1", ";p", "https://", "http://", "HTTPS://", "//cdn.example/", "u:p@", "h.example",
    "h.example:8", "[::1]", "[bad", "mailto:", "file:///", ":", "@", "%2B", "+", " ", "\t", "\n", "\x00", "\\", "é", "~", "=",
]


def _reference(base: str, href: str) -> str | None:
    joined = _join(base, href)
    return None if joined is None else redact(joined)


@settings(max_examples=2000, deadline=None)
@given(st.sampled_from(BASES), st.lists(st.sampled_from(PIECES), max_size=6), st.lists(st.sampled_from(PIECES), max_size=6))
def test_join_redacted_equals_urljoin(base, first, second):
    ctx = _Context(redact(base), "pypi")
    # two rows per page: the second may reuse what the first cached
    for href in ("".join(first), "".join(second), "".join(first)):
        assert _join_redacted(base, href, ctx) == _reference(base, href), (base, href)


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("href", [
    "/whl/nightly/cu130/torch-2.12.0.dev20260307%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl",
    "../../files/numpy-2.3.4-cp312-cp312-manylinux_2_17_x86_64.whl#sha256=" + "a" * 64,
    "https://files.pypi.example/packages/ab/cd/ef/numpy-2.3.4.tar.gz",
    "https://u:p@files.example/x/y.whl",
    "HTTPS://files.example/x/y.whl",
    "https://files.example/x/./y.whl",
    "https://files.example/x/../y.whl",
    "y.whl",
    "./y.whl",
    "sub/dir/",
    "torch2.5",
])
def test_join_redacted_on_real_shapes(base, href):
    ctx = _Context(redact(base), "pytorch")
    assert _join_redacted(base, href, ctx) == _reference(base, href)
    assert _join_redacted(base, href, ctx) == _reference(base, href)  # from the page's memo


NAMES = ["torch", "flashinfer_jit_cache", "a__b", "Foo.Bar", "", "x y", "caf\u00e9", "n-m"]
VERSIONS = ["2.12.0.dev20260307+cu130", "0.6.5", "1.0", "not.a.version", "", "1.0-1"]
TAGS = ["py3-none-any", "cp312-cp312-manylinux_2_28_x86_64", "cp39-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64", "py3-none", "bad tag-x-y", "cp312-cp312-", "-none-any"]


def _outcome(fn, *args):
    try:
        return fn(*args)
    except ValueError as exc:
        return ("error", str(exc))


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(NAMES), st.sampled_from(VERSIONS), st.sampled_from(TAGS), st.sampled_from([".whl", ".tar.gz", ".WHL", "/x.whl"])), min_size=1, max_size=8))
def test_filename_memo_equals_parse_filename(rows):
    ctx = _Context("https://pypi.example/simple/x/", "pypi")
    for name, version, tag, suffix in rows:
        filename = f"{name}-{version}-{tag}{suffix}" if suffix != ".tar.gz" else f"{name}-{version}{suffix}"
        assert _outcome(_filename, filename, ctx) == _outcome(parse_filename, filename)
