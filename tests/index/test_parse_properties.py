"""Property tests: parse.py returns a result or raises its documented error, for any input."""

from __future__ import annotations

import html
import json
from urllib.parse import quote

from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.tags import parse_tag
from packaging.utils import parse_wheel_filename

from resolve_gpu_stack.errors import CrawlError
from resolve_gpu_stack.index.parse import PEP691_JSON, RowFilter, core_metadata_fields, parse_filename, parse_metadata, parse_page
from resolve_gpu_stack.model import IndexFile, IndexPage, ParsedPage, WheelMetadata

FAST = settings(max_examples=100, deadline=None)
JSON_FAST = settings(max_examples=60, deadline=None)  # the recursive strategy is slow to draw
CONTENT_TYPES = st.sampled_from(
    ["text/html", PEP691_JSON, "application/json", "text/html; charset=latin-1", "application/octet-stream", "text/html; charset=nope", ""]
)
PAGE_URLS = st.sampled_from(
    ["https://idx.example/simple/demo/", "http://127.0.0.1:9/whl/cu130/torch/", "https://u:secret@idx.example/a/b", "file:///srv/index/demo/"]
)

# Text that looks like index markup often enough to reach deep into the parser.
HTML_PIECES = st.sampled_from(
    [
        "<a href=",
        "</a>",
        "<a href='demo-1.0.tar.gz'>",
        '<a href="x-1.0-py3-none-any.whl#sha256=',
        "<br>",
        "<br/>",
        "data-yanked",
        'data-core-metadata="sha256=',
        "data-untested=true",
        " (untested)",
        "<!--",
        "-->",
        "<![",
        "<!DOCTYPE html>",
        "<h1>",
        "<title>",
        "</title>",
        "<base href=",
        "%2B",
        "+cu130",
        "&lt;",
        "&#x",
        "/",
        "../",
        "#",
        "=",
        '"',
        "'",
        ">",
        "<",
        "?",
        "https://",
        "//",
        "{",
        "[",
        "\\",
        "\x00",
        "\udc80",
        "<?xml",
        "<Error>",
        '<meta name="pypi:repository-version" content="',
        "2.0",
        "1.1",
    ]
)
HTML_TEXT = st.lists(st.one_of(HTML_PIECES, st.text(max_size=8)), max_size=40).map("".join)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.dictionaries(
            st.sampled_from(
                [
                    "files",
                    "filename",
                    "url",
                    "hashes",
                    "sha256",
                    "yanked",
                    "core-metadata",
                    "dist-info-metadata",
                    "size",
                    "requires-python",
                    "upload-time",
                    "meta",
                    "api-version",
                    "projects",
                    "name",
                ]
            )
            | st.text(max_size=5),
            inner,
            max_size=6,
        )
    ),
    max_leaves=25,
)


def check_page(page: IndexPage) -> None:
    try:
        parsed = parse_page(page, index="prop")
    except CrawlError as err:
        assert "secret" not in str(err)
        return
    assert isinstance(parsed, ParsedPage)
    assert all(isinstance(f, IndexFile) and f.index == "prop" for f in parsed.files)
    assert all(isinstance(s, str) and not s.startswith(".") for s in parsed.subdirs)
    assert "secret" not in repr(parsed)
    for f in parsed.files:
        assert "#" not in f.url and ("/" not in f.filename and "\\" not in f.filename)
        assert f.sha256 is None or (len(f.sha256) == 64 and f.sha256 == f.sha256.lower())
    check_only(page, parsed)
    check_wheel_tags(page, parsed)


def check_wheel_tags(page: IndexPage, full: ParsedPage) -> None:
    """``keep=`` keeps exactly the full read's wheels carrying one of its tags, and its sdists
    when asked for; the directory links all the same."""
    every = frozenset(t for f in full.files for t in f.tags)
    for tags in (frozenset(parse_tag("py3-none-any")), frozenset(), every):
        for sdists in (True, False):
            kept = parse_page(page, index="prop", keep=RowFilter(tags, sdists=sdists))
            assert kept.files == tuple(f for f in full.files if (not f.is_wheel and sdists) or not tags.isdisjoint(f.tags))
            assert kept.subdirs == full.subdirs


def check_only(page: IndexPage, full: ParsedPage) -> None:
    """``only=`` keeps exactly the full read's files that it names (and no subdirs)."""
    names = [f.filename for f in full.files]
    for only in ({"nothing-1.0-py3-none-any.whl"}, set(names[::2]), set(names)):
        kept = parse_page(page, index="prop", only=only)
        assert kept.files == tuple(f for f in full.files if f.filename in only)
        assert kept.subdirs == ()


@FAST
@given(content=st.binary(max_size=400), content_type=CONTENT_TYPES, url=PAGE_URLS)
def test_arbitrary_bytes(content: bytes, content_type: str, url: str) -> None:
    check_page(IndexPage(url=url, content=content, content_type=content_type))


@FAST
@given(text=HTML_TEXT, content_type=CONTENT_TYPES, url=PAGE_URLS)
def test_arbitrary_markup(text: str, content_type: str, url: str) -> None:
    check_page(IndexPage(url=url, content=text.encode("utf-8", "surrogatepass"), content_type=content_type))


@JSON_FAST
@given(value=JSON_VALUES, content_type=CONTENT_TYPES)
def test_arbitrary_json(value: object, content_type: str) -> None:
    check_page(IndexPage(url="https://u:secret@idx.example/simple/demo/", content=json.dumps(value).encode(), content_type=content_type))


@JSON_FAST
@given(files=st.lists(JSON_VALUES, max_size=6))
def test_arbitrary_json_files_list_is_always_a_page(files: list) -> None:
    """An object with a 'files' list is an index page: bad rows become warnings, never an error."""
    parsed = parse_page(
        IndexPage(url="https://idx.example/simple/demo/", content=json.dumps({"files": files}).encode(), content_type=PEP691_JSON), index="prop"
    )
    assert len(parsed.files) + len(parsed.warnings) >= sum(1 for f in files if not isinstance(f, dict))


@FAST
@given(filename=st.one_of(st.text(max_size=60), HTML_TEXT.map(lambda t: t + ".whl"), st.text(max_size=30).map(lambda t: t + "-1.0.tar.gz")))
def test_arbitrary_filenames(filename: str) -> None:
    try:
        name, version, tags, is_wheel = parse_filename(filename)
    except ValueError as err:
        assert str(err)
        return
    assert is_wheel == filename.endswith(".whl") and (bool(tags) == is_wheel)
    assert "/" not in filename and "\\" not in filename


HEADER_LINES = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "Name: demo",
                "Version: 1.0",
                "Requires-Dist: x>=1",
                "Provides-Extra: a",
                "Name:",
                "Version:",
                "Requires-Python: >=3.10",
                "Metadata-Version: 2.1",
                " continued",
                "",
                ":",
                "=?utf-8?q?x?=",
            ]
        ),
        st.text(max_size=30),
    ),
    max_size=8,
).map("\n".join)


@FAST
@given(raw=st.one_of(st.binary(max_size=300), HEADER_LINES.map(lambda t: t.encode("utf-8", "surrogatepass"))))
def test_arbitrary_metadata(raw: bytes) -> None:
    try:
        meta = parse_metadata(raw, source="https://u:secret@idx.example/x.metadata")
    except CrawlError as err:
        assert "secret" not in str(err) and err.url == "https://idx.example/x.metadata"
        return
    assert isinstance(meta, WheelMetadata)


METADATA_LINES = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "Name: demo",
                "name: other",
                "NAME:demo",
                "Version: 1.0",
                "Version: 2",
                "Requires-Dist: x>=1",
                "requires-dist: y; extra == 'a'",
                "Provides-Extra: a",
                "Requires-Python: >=3.10",
                "Requires-Python:",
                "Metadata-Version: 2.1",
                "Metadata-Version: 2.2",
                "Dynamic: Requires-Dist",
                "dynamic: license",
                "From someone",
                "From : x",
                " continued",
                "\tmore",
                "",
                ":",
                ": no name",
                "Name : spaced",
                "Name: d\u00e9mo",
                "Requires-Dist: caf\u00e9",
            ]
        ),
        st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20),
    ),
    max_size=10,
)
ENDINGS = st.sampled_from(["\n", "\r\n", "\r"])


def _packaging_fields(raw: bytes) -> tuple[dict[str, object], set[str]]:
    """What ``packaging.metadata.parse_email`` makes of the fields the resolver reads."""
    from packaging.metadata import parse_email

    parsed, unparsed = parse_email(raw)
    names = {
        "metadata_version": "metadata-version",
        "name": "name",
        "version": "version",
        "requires_python": "requires-python",
        "requires_dist": "requires-dist",
        "provides_extra": "provides-extra",
        "dynamic": "dynamic",
    }
    return {names[k]: v for k, v in parsed.items() if k in names}, {k for k in unparsed if k in names.values()}


@FAST
@given(lines=METADATA_LINES, ending=ENDINGS, latin=st.booleans())
def test_the_metadata_header_reader_answers_as_packaging_does(lines: list[str], ending: str, latin: bool) -> None:
    """Our header reader (no email package) and packaging's ``parse_email`` agree on every field
    the resolver reads: values, repeated fields, and values that are not UTF-8."""
    text = ending.join(lines)
    raw = text.encode("latin-1", "replace") if latin else text.encode("utf-8")
    fields, unusable = core_metadata_fields(raw)
    expected, expected_unusable = _packaging_fields(raw)
    assert fields == expected
    assert set(unusable) == expected_unusable


# -- round trip -------------------------------------------------------------------------------
NAMES = st.from_regex(r"[a-z][a-z0-9]{0,7}(_[a-z0-9]{1,5}){0,2}", fullmatch=True)
VERSIONS = st.builds(
    lambda release, pre, post, dev, local: ".".join(map(str, release)) + pre + post + dev + local,
    st.lists(st.integers(0, 30), min_size=1, max_size=4),
    st.sampled_from(["", "a1", "b2", "rc10"]),
    st.sampled_from(["", ".post1"]),
    st.sampled_from(["", ".dev20260311"]),
    st.sampled_from(["", "+cu130", "+cu124torch2.5", "+git9c288bc5"]),
)
TAGS = st.sampled_from(
    [
        "py3-none-any",
        "cp312-cp312-manylinux_2_28_x86_64",
        "cp39-abi3-manylinux_2_28_aarch64",
        "cp314-cp314t-win_amd64",
        "cp314-cp314-manylinux_2_27_x86_64.manylinux_2_28_x86_64",
    ]
)
WHEELS = st.builds(lambda n, v, t: f"{n}-{v}-{t}.whl", NAMES, VERSIONS, TAGS)


@JSON_FAST
@given(filenames=st.lists(WHEELS, min_size=0, max_size=25, unique=True), absolute=st.booleans(), digests=st.booleans())
def test_pep503_page_round_trip(filenames: list[str], absolute: bool, digests: bool) -> None:
    page_url = "https://idx.example/simple/demo/"
    prefix = "https://files.example/packages/" if absolute else ""
    rows = []
    for i, fn in enumerate(filenames):
        frag = f"#sha256={i:064x}" if digests else ""
        rows.append(f'<a href="{prefix}{quote(fn)}{frag}" data-requires-python="&gt;=3.9">{html.escape(fn)}</a><br/>')
    body = "<!DOCTYPE html>\n<html><body><h1>Links for demo</h1>\n" + "\n".join(rows) + "\n</body></html>"
    parsed = parse_page(IndexPage(url=page_url, content=body.encode()), index="rt")
    assert [f.filename for f in parsed.files] == filenames
    assert parsed.warnings == ()
    for i, (f, fn) in enumerate(zip(parsed.files, filenames)):
        name, version, _build, tags = parse_wheel_filename(fn)
        assert (f.name, f.version, f.tags) == (name, version, tags)
        assert f.url == (prefix or page_url) + quote(fn)  # "+" stays "%2B" as served
        assert f.sha256 == (f"{i:064x}" if digests else None)
        assert f.requires_python == ">=3.9"
