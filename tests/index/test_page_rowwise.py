"""A PEP 691 page read row by row (``jsonrows``: each row's filename first, in one pass; the rows a
target keeps decoded then) gives exactly what the page read whole by ``json`` gives: the same files
in the same order, the same warnings, variants and status, for real-shaped pages and hostile ones
(variants, sdists, yanked rows, bad rows, escapes in filenames, duplicated keys, rows that are not
objects, numbers beyond msgspec's range); ``RowFilter.kept`` keeps exactly the rows
``passes_over`` keeps; and a crawl through the finder over loopback HTTP gives a target the very
files of the whole page that carry its tags."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.tags import Tag, parse_tag
from support.server import IndexServer

from resolve_gpu_stack.data.definitions import load_definitions
from resolve_gpu_stack.data.rules import RouteContext
from resolve_gpu_stack.index.finder import Finder
from resolve_gpu_stack.index.parse import FAST_MIN, PEP691_JSON, ParseMemo, RowFilter, parse_page
from resolve_gpu_stack.model import IndexPage, ParsedPage
from resolve_gpu_stack.net.http import HttpFetcher
from resolve_gpu_stack.net.settings import FetchSettings, TransportSettings

URL = "https://idx.example/simple/demo/"
CP312 = frozenset(parse_tag("cp312-cp312-manylinux_2_28_x86_64") | parse_tag("py3-none-any"))
FILTERS = [None, RowFilter(CP312, sdists=False), RowFilter(CP312), RowFilter(frozenset(parse_tag("py3-none-any")), sdists=False), RowFilter(frozenset())]

FILENAMES = [
    "demo-1.0-py3-none-any.whl",
    "demo-1.0-cp312-cp312-manylinux_2_28_x86_64.whl",
    "demo-1.0-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
    "demo-1.0-cp311-cp311-win_amd64.whl",
    "demo-1.0-cp312-cp312-musllinux_1_2_aarch64.whl",
    "demo-1.0-1-cp312-cp312-manylinux_2_28_x86_64.whl",  # a build tag
    "demo-1.0-py3-none-any-cu12.whl",  # a variant wheel (PEP 825)
    "demo-1.0-cp312-cp312-win_amd64-cu12.whl",
    "demo-1.0-variants.json",
    "demo-1.0.tar.gz",
    "demo-1.0.zip",
    "demo-1.0.win32.exe",
    "demo-1.0-py3-none-any.WHL",
    "demo-1.0-py3-none-any",
    "demo-1.0-py3-NONE-ANY.whl",
    "demo-1.0-py36+-none-any.whl",  # a tag packaging refuses
    "demo-not.a.version-py3-none-any.whl",
    "demo__x-1.0-py3-none-any.whl",
    "demo-1.0-py3-none-any.whl/../x.whl",
    "demo 1.0-py3-none-any.whl",
    "demo-1.0-py3--any.whl",
    "a-b-c-d-e-f-g.whl",
    "",
    "demo.whl",
    "caf\u00e9-1.0-py3-none-any.whl",
]


def _text(value: str) -> str:
    """A JSON string, its characters sometimes escaped as \\uXXXX (as any encoder may write them)."""
    return json.dumps(value)


ROW_VALUES = {
    "url": st.sampled_from(["https://files.example/p/{f}", "{f}", "../../p/{f}#sha256=" + "ab" * 32, "", "  ", "mailto:x", "https://u:pw@files.example/{f}"]),
    "hashes": st.sampled_from(['{"sha256":"' + "cd" * 32 + '"}', '{"sha256":"nothex"}', "{}", "null", '"x"', '{"sha256":"' + "CD" * 32 + '"}']),
    "size": st.sampled_from(["10", "-1", "true", '"12"', "1e400", "1.5", "null", "123456789012345678901234567890"]),
    "requires-python": st.sampled_from(['">=3.8"', '">=3.8,<4"', '"not a specifier"', '""', "7", "null"]),
    "yanked": st.sampled_from(["false", "true", '"broken"', '""', "null", "1"]),
    "core-metadata": st.sampled_from(["false", "true", '{"sha256":"' + "ef" * 32 + '"}', '{"sha256":"bad"}', '"x"', "null"]),
    "dist-info-metadata": st.sampled_from(["false", "true", '{"sha256":"' + "ef" * 32 + '"}']),
    "upload-time": st.sampled_from(['"2024-05-29T15:37:47.000000Z"', '"  "', "3", "null"]),
}


@st.composite
def rows(draw: st.DrawFn) -> str:
    """One row's JSON text: mostly an object with a filename, a URL and some of the other keys
    (a key now and then twice: the last one counts), at times a value that is not an object."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from(["7", "null", '"demo-1.0-py3-none-any.whl"', "[]", '[{"filename": "demo-1.0-py3-none-any.whl"}]', "1e400"]))
    filename = draw(st.sampled_from(FILENAMES))
    escaped = draw(st.booleans())
    name_text = _text(filename) if not escaped else '"' + "".join(f"\\u{ord(c):04x}" if c in "-.é" else c for c in filename) + '"'
    parts = [f'"filename":{name_text}'] if draw(st.integers(0, 12)) else ['"filename":12'] if draw(st.booleans()) else []
    for key in draw(st.lists(st.sampled_from(sorted(ROW_VALUES)), unique=True)):
        value = draw(ROW_VALUES[key])
        parts.append(f"{_text(key)}:{value.replace('{f}', filename) if key != 'url' else _text(value.replace('{f}', filename))}")
    if draw(st.integers(0, 7)) == 0:  # a duplicated key: the last one counts
        parts.append(f'"filename":{_text(draw(st.sampled_from(FILENAMES)))}')
    if draw(st.integers(0, 7)) == 0:
        parts.append(f'"url":{_text("https://files.example/other/" + draw(st.sampled_from(FILENAMES)))}')
    if draw(st.integers(0, 9)) == 0:
        parts.append('"provenance":{"filename":"demo-9.9-py3-none-any.whl","nested":[1,{"a":null}]}')
    return "{" + ",".join(draw(st.permutations(parts))) + "}"


def _page(files: list[str], *, extra: str = "") -> IndexPage:
    text = '{"meta":{"api-version":"1.1"},"name":"demo","project-status":{"status":"archived","reason":"old"},"files":[' + ",".join(files) + "]" + extra + "}"
    return IndexPage(url=URL, content=text.encode(), content_type=PEP691_JSON)


def _read(page: IndexPage, keep: RowFilter | None, *, rowwise: bool, only: frozenset[str] | None = None) -> ParsedPage | str:
    memo = ParseMemo()
    memo.rowwise = rowwise  # a large page was read before: msgspec is in, every JSON page is read row by row
    try:
        return parse_page(page, index="pypi", keep=keep, only=only, memo=memo)
    except Exception as exc:  # noqa: BLE001 - compared: the same refusal either way
        return f"{type(exc).__name__}: {exc}"


@settings(max_examples=300, deadline=None)
@given(files=st.lists(rows(), max_size=14), only=st.sets(st.sampled_from(FILENAMES), max_size=4))
def test_a_page_read_row_by_row_reads_as_the_whole_page_does(files: list[str], only: set[str]) -> None:
    page = _page(files)
    full = _read(page, None, rowwise=False)
    for keep in FILTERS:
        whole = _read(page, keep, rowwise=False)
        assert _read(page, keep, rowwise=True) == whole, keep and (sorted(map(str, keep.tags))[:3], keep.sdists)
        if keep is not None and isinstance(full, ParsedPage) and isinstance(whole, ParsedPage):  # the rows kept: the full read's that the filter keeps
            assert whole.files == tuple(f for f in full.files if not keep.passes_over(f.filename))
            assert whole.variants == tuple(f for f in full.variants if not keep.passes_over(f.filename))
        assert _read(page, keep, rowwise=True, only=frozenset(only)) == _read(page, keep, rowwise=False, only=frozenset(only))


@settings(max_examples=300, deadline=None)
@given(names=st.lists(st.sampled_from(FILENAMES) | st.none() | st.text(alphabet="ab-.whlcp3", max_size=12), max_size=40))
def test_row_filter_kept_keeps_what_passes_over_keeps(names: list[str | None]) -> None:
    for keep in FILTERS[1:]:
        assert keep is not None
        expected = [i for i, name in enumerate(names) if not keep.passes_over(name)]
        assert keep.kept(names) == expected
        assert keep.kept(names) == expected  # from its memo of tails


def _real_shaped_rows(releases: int) -> list[str]:
    """A popular project's page as PyPI serves it: every release with wheels for many platforms and
    Pythons, an sdist, now and then a yanked release, a variant wheel and its variants.json."""
    platforms = ["manylinux_2_17_x86_64.manylinux2014_x86_64", "manylinux_2_28_aarch64", "musllinux_1_2_x86_64", "macosx_11_0_arm64", "win_amd64"]
    out = []
    for r in range(releases):
        version = f"1.{r // 10}.{r % 10}"
        names = [f"demo-{version}-cp{py}-cp{py}-{plat}.whl" for py in (310, 311, 312, 313) for plat in platforms]
        names += [f"demo-{version}-py3-none-any.whl", f"demo-{version}.tar.gz"]
        if r % 50 == 0:
            names += [f"demo-{version}-py3-none-any-cu12.whl", f"demo-{version}-variants.json"]
        for n, filename in enumerate(names):
            row = {
                "core-metadata": {"sha256": f"{r:08x}" * 8} if n % 3 else False,
                "filename": filename,
                "hashes": {"sha256": f"{r:04x}{n:04x}" * 8},
                "requires-python": ">=3.10" if r % 2 else ">=3.9",
                "size": 1000 + n,
                "upload-time": f"2026-01-{1 + r % 28:02d}T00:00:00.000000Z",
                "url": f"/packages/{r:02x}/{n:02x}/{filename}",
                "yanked": "broken build" if r % 97 == 5 else False,
            }
            out.append(json.dumps(row))
    return out


def test_a_real_shaped_page_over_the_crawl_gives_a_target_the_whole_pages_files_for_it(tmp_path) -> None:
    """Served over loopback HTTP and read by the finder as a resolve reads it (the target's tags),
    a page of 1 MiB and more (row by row), and a small page read after it (row by row too), offer
    the target exactly the files the whole page offers it; the page read row by row gives the files
    and the warnings that page read whole by ``json`` gives; a hostile row the target keeps
    (``size: 1e400``, which msgspec does not decode) spoils nothing."""
    hostile = [
        "7",
        '{"filename":"demo-0.1-py3-none-any.whl","url":"/packages/x/demo-0.1-py3-none-any.whl","size":1e400}',
        '{"filename":"demo-0.2-py3-none-any.whl","url":"","hashes":{"sha256":"bad"}}',
        '{"filename":"demo\\u002d0.3-py3-none-any.whl","url":"/packages/y/demo-0.3-py3-none-any.whl","hashes":{"sha256":"bad"}}',
        '{"filename":"demo-0.4-cp312-cp312-win_amd64.whl","url":"/packages/z/w.whl","hashes":{"sha256":"bad"}}',
    ]
    big = ('{"meta":{"api-version":"1.1"},"name":"demo","files":[' + ",".join(_real_shaped_rows(320) + hostile) + "]}").encode()
    small = ('{"meta":{"api-version":"1.1"},"name":"tiny","files":[' + ",".join(_real_shaped_rows(3)).replace("demo", "tiny") + "]}").encode()
    assert len(big) >= FAST_MIN > len(small)
    for name, body in (("demo", big), ("tiny", small)):
        (tmp_path / "simple" / name).mkdir(parents=True)
        (tmp_path / "simple" / name / "index.json").write_bytes(body)
    tags = frozenset(parse_tag("cp312-cp312-manylinux_2_17_x86_64") | {Tag("py3", "none", "any")})
    keep = RowFilter(tags, sdists=False)
    with IndexServer(tmp_path) as srv:
        defs = load_definitions().with_index_urls({"pypi": srv.url + "simple/"})
        with HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None) as fetcher:
            target, whole = Finder(fetcher, defs), Finder(fetcher, defs)
            for name, body in (("demo", big), ("tiny", small)):  # the large page first: the small one is then read row by row
                offered = [o.file for o in target.offers(name, RouteContext(), tags=tags, sdists=False)[0]]
                assert offered == [o.file for o in whole.offers(name, RouteContext())[0] if not keep.passes_over(o.file.filename)]
                assert all(f.is_wheel and not tags.isdisjoint(f.tags) for f in offered)
                page = IndexPage(url=f"{srv.url}simple/{name}/", content=body, content_type=PEP691_JSON)
                by_json = IndexPage(url=page.url, content=body[:-1] + b',"x":NaN}', content_type=PEP691_JSON)  # msgspec refuses NaN: json reads it whole
                assert _read(page, keep, rowwise=True) == _read(by_json, keep, rowwise=False)
            assert target.memo.rowwise
    demo = [o.file for o in target.offers("demo", RouteContext(), tags=tags, sdists=False)[0]]
    assert any(f.filename == "demo-0.1-py3-none-any.whl" and f.size is None for f in demo)
    assert any(f.filename == "demo-0.3-py3-none-any.whl" and f.sha256 is None for f in demo)  # an escaped filename
    assert any(f.yanked == "broken build" for f in demo)
    assert not any("win_amd64" in f.filename for f in demo)
    read = _read(IndexPage(url=URL, content=big, content_type=PEP691_JSON), keep, rowwise=False)
    assert isinstance(read, ParsedPage) and read.variants and all(v.variant and v.variant.json_url for v in read.variants)
    assert any("files[" in w and "not an object" in w for w in read.warnings) and not any("win_amd64" in w for w in read.warnings)
