"""The per-page fast paths of parse.py give exactly what the general path gives.

``_join_redacted`` must equal ``redact(urljoin(base, href))`` (or None where that fails), and
``_filename`` must equal ``parse_filename`` (value or ValueError), for any input, including the
second and later rows of a page, which take the memoized path.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resolve_gpu_stack.index.pagejoin import join as _join
from resolve_gpu_stack.index.pagejoin import redact
from resolve_gpu_stack.index.pagerows import _Context, _filename, _join_redacted, parse_filename

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
    "",
    "/",
    "//",
    "./",
    "../",
    ".",
    "..",
    "a",
    "b/",
    "files/",
    "whl/nightly/",
    "torch-2.12.0%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl",
    "x.whl",
    "#sha256=00ff",
    "#",
    "?q=1",
    ";p",
    "https://",
    "http://",
    "HTTPS://",
    "//cdn.example/",
    "u:p@",
    "h.example",
    "h.example:8",
    "[::1]",
    "[bad",
    "mailto:",
    "file:///",
    ":",
    "@",
    "%2B",
    "+",
    " ",
    "\t",
    "\n",
    "\x00",
    "\\",
    "é",
    "~",
    "=",
    "packages/",
    "9d/",
    "a_b",
    "_",
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
@pytest.mark.parametrize(
    "href",
    [
        "/whl/nightly/cu130/torch-2.12.0.dev20260307%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl",
        "../../files/numpy-2.3.4-cp312-cp312-manylinux_2_17_x86_64.whl#sha256=" + "a" * 64,
        "https://files.pypi.example/packages/ab/cd/ef/numpy-2.3.4.tar.gz",
        "https://u:p@files.example/x/y.whl",
        "HTTPS://files.example/x/y.whl",
        "https://files.example/x/./y.whl",
        "https://files.example/x/../y.whl",
        "/packages/ab/cd/0123abcd/x-1.0-py3-none-any.whl#sha256=" + "b" * 64,  # root-relative, a directory per file
        "/a//b.whl",
        "/a/./b.whl",
        "/a/../b.whl",
        "/a/b.whl/.",
        "/_ext/files.example:443/x.whl",
        "../../packages/9d/13/4a93/regex-0.1.tar.gz",
        "./../a_b/c.whl",
        "../../a//b.whl",
        "../../a/./b.whl",
        "../x/../b.whl",  # relative, a directory per file
        "y.whl",
        "./y.whl",
        "sub/dir/",
        "torch2.5",
    ],
)
def test_join_redacted_on_real_shapes(base, href):
    ctx = _Context(redact(base), "pytorch")
    assert _join_redacted(base, href, ctx) == _reference(base, href)
    assert _join_redacted(base, href, ctx) == _reference(base, href)  # from the page's memo


NAMES = ["torch", "flashinfer_jit_cache", "a__b", "Foo.Bar", "", "x y", "caf\u00e9", "n-m"]
VERSIONS = ["2.12.0.dev20260307+cu130", "0.6.5", "1.0", "not.a.version", "", "1.0-1"]
TAGS = [
    "py3-none-any",
    "cp312-cp312-manylinux_2_28_x86_64",
    "cp39-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64",
    "py3-none",
    "bad tag-x-y",
    "cp312-cp312-",
    "-none-any",
]


def _outcome(fn, *args):
    try:
        return fn(*args)
    except ValueError as exc:
        return ("error", str(exc))


@settings(max_examples=2000, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(NAMES), st.sampled_from(VERSIONS), st.sampled_from(TAGS), st.sampled_from([".whl", ".tar.gz", ".WHL", "/x.whl"])),
        min_size=1,
        max_size=8,
    )
)
def test_filename_memo_equals_parse_filename(rows):
    ctx = _Context("https://pypi.example/simple/x/", "pypi")
    for name, version, tag, suffix in rows:
        filename = f"{name}-{version}-{tag}{suffix}" if suffix != ".tar.gz" else f"{name}-{version}{suffix}"
        assert _outcome(_filename, filename, ctx) == _outcome(parse_filename, filename)


# -- plain HTML: htmlfast.tokens read into the collector == html.parser ------------------------------
from resolve_gpu_stack.index import htmlfast  # noqa: E402
from resolve_gpu_stack.index.parse import _AnchorCollector, _collect, read_with_html_parser  # noqa: E402

HTML_PIECES = [
    '<a href="/whl/torch-2.12.0%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl#sha256=' + "a" * 64 + '">torch.whl</a>',
    '<a href="x.whl" data-core-metadata="sha256=' + "b" * 64 + '" data-requires-python="&gt;=3.10">x.whl</a>',
    '<a href="y.whl" data-yanked>y</a>',
    '<a HREF="Z.whl" Data-Yanked="">z</a>',
    "<a href='q.whl'>q</a>",
    "<a href=unquoted.whl>u</a>",
    '<a href="s.whl"/>',
    '<a href="t.whl" >t</a >',
    '<A href="u.whl">U</A>',
    "<br/>",
    "<br />",
    "<br>",
    "</br>",
    "<p>",
    "</p>",
    "<h1>Links for x</h1>",
    "<title>Links</title>",
    "<title>a<b>c</b></title>",
    '<base href="https://cdn.example/files/">',
    '<meta name="pypi:repository-version" content="1.1">',
    "<!DOCTYPE html>",
    "<!doctype html public>",
    "<!--SERIAL 123-->",
    "<!-- a -- b -->",
    "<!-->",
    '<?xml version="1.0"?>',
    "<script>var a = '<a href=\"no.whl\">';</script>",
    "<style>a{}</style>",
    '<textarea><a href="t.whl"></textarea>',
    '<![CDATA[<a href="c.whl">]]>',
    "(untested)",
    " (untested) ",
    "\n    ",
    "text",
    "a < b",
    "a > b",
    "&amp;",
    "&",
    '<a href="n.whl"><b>bold</b></a>',
    '<a href="m.whl">',
    "</a>",
    "<",
    "<>",
    "</>",
    '<a\nhref="nl.whl"\n>nl</a>',
    '<a href="x.whl"data-x="1">',
    "é",
    "\x00",
    "<html>",
    "<body>",
    "</body></html>",
]


def _by_html_parser(text: str) -> _AnchorCollector:
    collector = _AnchorCollector()
    try:
        read_with_html_parser(collector, text)
    except Exception:  # noqa: BLE001 - as _collect: soup may stop html.parser
        pass
    return collector


def _view(c: _AnchorCollector):
    anchors = [(a.attrs, "".join(a.text), "".join(a.tail)) for a in c.anchors]
    return anchors, {k: "".join(v) for k, v in c.headings.items()}, c.base, c.api_version


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(HTML_PIECES), max_size=12))
def test_plain_html_reads_as_html_parser_reads_it(pieces):
    text = "".join(pieces)
    assert _view(_collect(text, _Context("https://idx.example/simple/x/", "pypi"))) == _view(_by_html_parser(text)), text


def test_plain_pages_take_the_fast_path_and_others_do_not():
    row = '<a href="/x/a-1.0-py3-none-any.whl#sha256=' + "c" * 64 + '" data-core-metadata="sha256=' + "d" * 64 + '">a-1.0-py3-none-any.whl</a><br/>\n'
    page = "<!DOCTYPE html>\n<html><head><title>Links for a</title></head><body><h1>Links for a</h1>\n" + row * 3 + "</body></html>\n"
    assert htmlfast.tokens(page) is not None
    assert htmlfast.tokens("<!--SERIAL 7-->\n" + page) is not None
    for odd in ("&amp;", "<a href=x>", "<script>x</script>", "<!-- a-b -->", "<?php ?>", "a < b", "<title>a<b>c</b></title>"):
        assert htmlfast.tokens(page + odd) is None, odd
