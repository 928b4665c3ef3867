"""parse.py against the reference samples (tests/support/data/samples, verbatim copies) and bad input."""

from __future__ import annotations

import hashlib
import json
import sys
from urllib.parse import urljoin

import pytest
from packaging.tags import Tag
from packaging.version import Version
from support.paths import DATA

from resolve_gpu_stack.errors import CrawlError
from resolve_gpu_stack.index.parse import MAX_WARNINGS, PEP691_JSON, parse_filename, parse_metadata, parse_page
from resolve_gpu_stack.model import IndexPage, ParsedPage

SAMPLES = DATA / "samples"
R2 = "https://download-r2.pytorch.org/whl"
GH = "https://github.com/flashinfer-ai/flashinfer/releases/download"


def body(name: str, version: str | None = None) -> bytes:
    """A sample's page bytes: the leading provenance comment stripped; one version of two-version files."""
    raw = (SAMPLES / name).read_bytes()
    if name.endswith(".html"):
        raw = raw.split(b"-->\n", 1)[1]
        if version is not None:
            first, _, second = raw.partition(b"<!-- ===== version B")
            raw = first if version == "A" else second.split(b"-->\n", 1)[1]
    return raw


def parse(name: str, url: str, *, version: str | None = None, content_type: str = "text/html", index: str = "test") -> ParsedPage:
    return parse_page(IndexPage(url=url, content=body(name, version), content_type=content_type), index=index)


def html(rows: str, url: str = "https://idx.example/simple/demo/", **kw: str) -> ParsedPage:
    page = f"<!DOCTYPE html>\n<html><body>\n{rows}\n</body></html>\n".encode()
    return parse_page(IndexPage(url=url, content=page, **kw), index="test")


def json_page(data: object, url: str = "https://pypi.example/simple/demo/", content_type: str = PEP691_JSON) -> ParsedPage:
    return parse_page(IndexPage(url=url, content=json.dumps(data).encode(), content_type=content_type), index="pypi")


def by_name(page: ParsedPage) -> dict:
    return {f.filename: f for f in page.files}


# -- PyTorch ------------------------------------------------------------------------------------
def test_pytorch_nightly_torch_page() -> None:
    page = parse("pytorch-nightly-cu130-torch.html", "https://download.pytorch.org/whl/nightly/cu130/torch/", index="pytorch")
    assert len(page.files) == 33
    assert page.title == "Links for torch" and page.warnings == () and page.subdirs == ()
    first = page.files[0]
    assert first.filename == "torch-2.12.0.dev20260311+cu130-cp310-cp310-manylinux_2_28_aarch64.whl"
    assert first.url == f"{R2}/nightly/cu130/torch-2.12.0.dev20260311%2Bcu130-cp310-cp310-manylinux_2_28_aarch64.whl"
    assert first.name == "torch" and first.version == Version("2.12.0.dev20260311+cu130")
    assert first.tags == frozenset({Tag("cp310", "cp310", "manylinux_2_28_aarch64")})
    assert first.index == "pytorch" and first.is_wheel
    assert first.sha256 is None  # nightly rows carry no #sha256 fragment
    assert first.has_metadata and first.metadata_sha256 == "1a804920d42f83ff7dd1ce9ac1301187da50c85a86e405ccaf941fb5b695540d"
    assert first.upload_time is None and not first.untested and not first.is_yanked
    # the one row the generator wrote without PEP 658 attributes
    bare = by_name(page)["torch-2.12.0.dev20260311+cu130-cp314-cp314-win_amd64.whl"]
    assert not bare.has_metadata and bare.metadata_sha256 is None
    assert sum(f.has_metadata for f in page.files) == 32
    assert {t.abi for f in page.files for t in f.tags} >= {"cp313t", "cp314t"}
    assert all(f.name == "torch" and f.sha256 is None for f in page.files)


def test_pytorch_nightly_late2026_upload_times() -> None:
    page = parse("pytorch-nightly-cu130-torch-late2026.html", "https://download.pytorch.org/whl/nightly/cu130/torch/")
    assert len(page.files) == 16
    first = page.files[0]
    assert first.version == Version("2.15.0.dev20260927+cu130")
    assert first.upload_time == "2026-09-27T08:14:51Z"
    assert first.metadata_sha256 == "1f3b0aa8cd535a129f8cde5776013865c5c53204ec9e846bb758e5f634f9a5e6"
    assert all(f.upload_time for f in page.files)


def test_pytorch_nightly_triton_lives_at_the_channel_root() -> None:
    page = parse("pytorch-nightly-cu130-triton.html", "https://download.pytorch.org/whl/nightly/cu130/triton/")
    assert len(page.files) == 24
    assert {f.name for f in page.files} == {"triton"}
    assert all(f.url.startswith(f"{R2}/nightly/triton-") for f in page.files)
    real = by_name(page)["triton-3.7.0+git9c288bc5-cp314-cp314-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"]
    assert real.metadata_sha256 == "15be25c2c8ced19d19fad33dc94ce3fab99254f0546bb0a8b4f7496ea5c091db"
    assert real.tags == frozenset({Tag("cp314", "cp314", "manylinux_2_27_x86_64"), Tag("cp314", "cp314", "manylinux_2_28_x86_64")})
    assert {str(f.version) for f in page.files} == {"3.6.0+git9844da95", "3.7.0+git282c8251", "3.7.0+git9c288bc5"}


def test_pytorch_stable_rows_have_wheel_and_metadata_digests() -> None:
    page = parse("pytorch-stable-cu130-torch.html", "https://download.pytorch.org/whl/cu130/torch/")
    assert len(page.files) == 9
    row = by_name(page)["torch-2.10.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl"]
    assert row.url == f"{R2}/cu130/torch-2.10.0%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl"  # no fragment
    assert row.sha256 == "858f0cbcc78d726fea9499eb3464faa98392fa093845a3262209bd226b7844d6"
    assert row.metadata_sha256 == "b53ff7e4379b3184d919da60ba30167b3387657202ad333413f1c5a021e83a81"
    assert row.upload_time == "2026-06-17T21:04:33Z"
    aarch = by_name(page)["torch-2.11.0+cu130-cp312-cp312-manylinux_2_28_aarch64.whl"]
    assert aarch.metadata_sha256 == "3f58d2a0bbf02637643e6bb9b9d5926a0e577b38b37bf82ca930145529e3aafe"
    assert all(f.sha256 and len(f.sha256) == 64 for f in page.files)
    assert by_name(page)["torch-2.9.1+cu130-cp312-cp312-manylinux_2_28_x86_64.whl"].version == Version("2.9.1+cu130")


def test_pytorch_test_channel_root_relative_hrefs() -> None:
    page = parse("pytorch-test-cu130-torch.html", "https://download.pytorch.org/whl/test/cu130/torch/")
    assert len(page.files) == 4
    first = page.files[0]
    assert first.url == ("https://download.pytorch.org/whl/test/cu130/torch-2.14.0%2Bcu130-cp312-cp312-manylinux_2_28_aarch64.whl")
    assert first.sha256 == "66433df745a1d036498abbc448151d2a636911dfce0ef80daf94acdf7e5264c3"
    assert first.metadata_sha256 == "bed059e18a94393c3ac6dcc43faee9dab67dbea27a7c9aace7a3a768089f2f3b"
    # the same bytes served from a local mirror resolve against the mirror
    local = parse("pytorch-test-cu130-torch.html", "http://127.0.0.1:8123/whl/test/cu130/torch/")
    assert local.files[0].url.startswith("http://127.0.0.1:8123/whl/test/cu130/torch-2.14.0%2Bcu130-")


def test_pytorch_variant_root_lists_packages_as_subdirs() -> None:
    page = parse("pytorch-nightly-cu130-root.html", "https://download.pytorch.org/whl/nightly/cu130/")
    assert page.files == () and page.warnings == ()
    assert len(page.subdirs) == 34
    assert page.subdirs[0] == "cuda-bindings/" and "torch/" in page.subdirs and "nvidia-nccl-cu13/" in page.subdirs
    assert page.title is None  # the root template has no h1 and no title


# -- FlashInfer ---------------------------------------------------------------------------------
def test_flashinfer_root_directory_listing_drops_dot_git() -> None:
    page = parse("flashinfer-root.html", "https://flashinfer.ai/whl/")
    assert page.subdirs == ("cu118/", "cu121/", "cu124/", "cu126/", "cu128/", "cu129/", "cu130/", "flashinfer-cubin/", "flashinfer-python/", "nightly/")
    assert page.title == "Index of flashinfer-whl" and page.files == ()


def test_flashinfer_cu130_index_lists_jit_cache_providers() -> None:
    page = parse("flashinfer-cu130-index.html", "https://flashinfer.ai/whl/cu130/")
    assert len(page.subdirs) == 9
    assert "flashinfer-jit-cache-sm110a/" in page.subdirs and page.subdirs[0] == "flashinfer-jit-cache/"


def test_flashinfer_legacy_slashless_directories() -> None:
    page = parse("flashinfer-cu124-index.html", "https://flashinfer.ai/whl/cu124/")
    assert page.subdirs == ("torch2.4", "torch2.5", "torch2.6")
    assert urljoin(page.url, page.subdirs[1]) == "https://flashinfer.ai/whl/cu124/torch2.5"
    assert page.title == "FlashInfer Python Wheels for CUDA 12.4"


def test_flashinfer_nightly_index_both_versions() -> None:
    a = parse("flashinfer-nightly-index.html", "https://flashinfer.ai/whl/nightly/", version="A")
    assert a.subdirs == ("cu121/", "cu124/", "cu126/", "cu128/", "cu129/", "cu130/", "flashinfer-cubin/")
    b = parse("flashinfer-nightly-index.html", "https://flashinfer.ai/whl/nightly/", version="B")
    assert b.subdirs == ("cu121/", "cu124/", "cu126/")  # link text "cu121" differs from the href
    assert b.title == "FlashInfer Nightly Python Wheels"


def test_flashinfer_legacy_aot_page_without_html_element() -> None:
    url = "https://flashinfer.ai/whl/cu124/torch2.5/flashinfer-python/"
    page = parse("flashinfer-cu124-torch2.5-flashinfer-python.html", url)
    assert len(page.files) == 11 and page.warnings == ()
    first = page.files[0]
    assert first.filename == "flashinfer_python-0.2.0.post2+cu124torch2.5-cp310-cp310-linux_x86_64.whl"
    assert first.name == "flashinfer-python" and first.version == Version("0.2.0.post2+cu124torch2.5")
    assert first.sha256 == "5092c850b4005e1e8973eab28f4221756928c032f49dd4153bb9db495d84e9bb"
    assert first.url == f"{GH}/v0.2.0.post2/{first.filename}"  # literal "+" kept
    abi3 = by_name(page)["flashinfer_python-0.2.1.post1+cu124torch2.5-cp38-abi3-linux_x86_64.whl"]
    assert abi3.tags == frozenset({Tag("cp38", "abi3", "linux_x86_64")})
    assert [f.version.public for f in page.files] == [  # order as served
        "0.2.0.post2",
        "0.2.0.post2",
        "0.2.0.post2",
        "0.2.0.post2",
        "0.2.1.post1",
        "0.2.1.post2",
        "0.2.2",
        "0.2.2.post1",
        "0.2.3",
        "0.2.4",
        "0.2.5",
    ]


def test_flashinfer_header_only_page_has_zero_rows() -> None:
    url = "https://flashinfer.ai/whl/cu126/torch2.6/flashinfer-python/"
    empty = parse("flashinfer-cu126-torch2.6-flashinfer-python.html", url, version="A")
    assert empty.files == () and empty.subdirs == () and empty.warnings == ()
    assert empty.title == "FlashInfer Python Wheels for CUDA 12.6 + torch 2.6"
    one = parse("flashinfer-cu126-torch2.6-flashinfer-python.html", url, version="B")
    assert [f.sha256 for f in one.files] == ["d3c1c897644850124eb45fedc1d68ac2f05175c3d330d71f0370bb231c3ef0d3"]


def test_flashinfer_2024_package_was_named_flashinfer() -> None:
    page = parse("flashinfer-cu121-torch2.2-flashinfer-2024.html", "https://flashinfer.ai/whl/cu121/torch2.2/flashinfer/")
    assert [f.name for f in page.files] == ["flashinfer"] * 3
    assert page.files[0].version == Version("0.0.2+cu121torch2.2")
    assert page.files[0].sha256 == "b1ade690fb4fbbeb9ed961277ec46ec40b02f795ad936e33f61aa8be95b1bfbc"


@pytest.mark.parametrize(
    ("sample", "url", "rows", "name"),
    [
        ("flashinfer-cu130-jit-cache.html", "https://flashinfer.ai/whl/cu130/flashinfer-jit-cache/", 28, "flashinfer-jit-cache"),
        ("flashinfer-cu129-jit-cache.html", "https://flashinfer.ai/whl/cu129/flashinfer-jit-cache/", 12, "flashinfer-jit-cache"),
        ("flashinfer-cu128-jit-cache.html", "https://flashinfer.ai/whl/cu128/flashinfer-jit-cache/", 14, "flashinfer-jit-cache"),
        ("flashinfer-cu130-jit-cache-sm90a.html", "https://flashinfer.ai/whl/cu130/flashinfer-jit-cache-sm90a/", 10, "flashinfer-jit-cache-sm90a"),
        ("flashinfer-cu130-jit-cache-sm110a.html", "https://flashinfer.ai/whl/cu130/flashinfer-jit-cache-sm110a/", 5, "flashinfer-jit-cache-sm110a"),
        ("flashinfer-flashinfer-python.html", "https://flashinfer.ai/whl/flashinfer-python/", 25, "flashinfer-python"),
        ("flashinfer-flashinfer-cubin.html", "https://flashinfer.ai/whl/flashinfer-cubin/", 17, "flashinfer-cubin"),
        ("flashinfer-nightly-cu130-jit-cache.html", "https://flashinfer.ai/whl/nightly/cu130/flashinfer-jit-cache/", 20, "flashinfer-jit-cache"),
    ],
)
def test_flashinfer_modern_package_pages(sample: str, url: str, rows: int, name: str) -> None:
    page = parse(sample, url, index="flashinfer")
    assert len(page.files) == rows and page.warnings == ()
    assert {f.name for f in page.files} == {name}
    assert page.title == f"Links for {name}"
    assert all(f.sha256 and f.url.startswith(GH) and "#" not in f.url for f in page.files)
    assert not any(f.has_metadata or f.untested for f in page.files)


def test_flashinfer_jit_cache_facts() -> None:
    page = parse("flashinfer-cu130-jit-cache-sm110a.html", "https://flashinfer.ai/whl/cu130/flashinfer-jit-cache-sm110a/")
    assert all(t.platform == "manylinux_2_28_aarch64" for f in page.files for t in f.tags)
    assert page.files[0].version == Version("0.7.0.post1+cu130")
    assert page.files[0].sha256 == "a77273cb80cb81a98b827f495ca0204e8db83a3aabbbacdc576ecd4808fbd92f"
    cu130 = parse("flashinfer-cu130-jit-cache.html", "https://flashinfer.ai/whl/cu130/flashinfer-jit-cache/")
    assert {f.version.local for f in cu130.files} == {"cu130"}


def test_flashinfer_nightly_python_row_from_the_whl_repo() -> None:
    page = parse("flashinfer-nightly-flashinfer-python.html", "https://flashinfer.ai/whl/nightly/flashinfer-python/")
    assert len(page.files) == 10
    last = page.files[-1]
    assert last.url == ("https://github.com/flashinfer-ai/whl/releases/download/nightly-v0.7.2-20261008/flashinfer_python-0.7.2.dev20261008-py3-none-any.whl")
    assert last.version == Version("0.7.2.dev20261008")
    assert last.sha256 == "35b41bb54be1531de35b41a4668c97c9955fb8676eb66ac857ec44334fc60b84"


def test_flashinfer_untested_marker() -> None:
    page = parse("flashinfer-nightly-untested-row.html", "https://flashinfer.ai/whl/nightly/flashinfer-python/")
    assert [(str(f.version), f.untested) for f in page.files] == [("0.6.17.dev20260914", False), ("0.6.18.dev20260915", True)]
    assert page.files[0].sha256 == "0" * 64
    wheel = "flashinfer_python-1.0.dev1-py3-none-any.whl"
    text_only = html(f'<a href="{wheel}">{wheel}</a> (untested)<br>')
    attr_only = html(f'<a href="{wheel}" data-untested="true">{wheel}</a><br>')
    attr_false = html(f'<a href="{wheel}" data-untested="false">{wheel}</a><br>')
    next_row = html(f'<a href="{wheel}">{wheel}</a><br>\n<a href="b-1.0.tar.gz">b</a> (untested)<br>')
    assert text_only.files[0].untested and attr_only.files[0].untested
    assert not attr_false.files[0].untested
    assert [f.untested for f in next_row.files] == [False, True]


# -- PyPI ---------------------------------------------------------------------------------------
def test_pypi_html_requires_python_is_unescaped() -> None:
    page = parse("pypi-flashinfer-python-simple.html", "https://pypi.example/simple/flashinfer-python/", index="pypi")
    assert len(page.files) == 8 and page.warnings == ()
    sdist = page.files[0]
    assert sdist.filename == "flashinfer_python-0.2.0.post1.tar.gz" and not sdist.is_wheel and sdist.tags == frozenset()
    assert sdist.requires_python == "<4.0,>=3.8"
    assert sdist.sha256 == "4c7e318862e033286c567ba2b0f50358fda46bee36ac98eda41983ef1c1a4b82"
    assert sdist.url.startswith("https://files.pypi.example/packages/6c/e9/") and "#" not in sdist.url
    wheel = by_name(page)["flashinfer_python-0.7.4-py3-none-any.whl"]
    assert wheel.requires_python == "<4.0,>=3.10" and wheel.version == Version("0.7.4")
    assert not any(f.has_metadata for f in page.files)


def test_pypi_json_project_page() -> None:
    page = parse("pypi-flashinfer-python-simple.json", "https://pypi.example/simple/flashinfer-python/", content_type=PEP691_JSON, index="pypi")
    assert len(page.files) == 10 and page.warnings == () and page.title == "flashinfer-python"
    sdist = page.files[0]
    assert sdist.filename == "flashinfer_python-0.2.0.post1.tar.gz"
    assert sdist.size == 1729392 and sdist.upload_time == "2025-01-09T09:32:35.800829Z"
    assert sdist.requires_python == "<4.0,>=3.8" and sdist.yanked is None and not sdist.has_metadata
    wheel = by_name(page)["flashinfer_python-0.7.2rc3-py3-none-any.whl"]
    assert wheel.sha256 == "2d888b47db9da2c41a4c547fa0f5d16762c417e4b76f5235d575a8e7f4805d81"
    assert wheel.size == 65194234 and wheel.index == "pypi"
    cubin = parse("pypi-flashinfer-cubin-simple.json", "https://pypi.example/simple/flashinfer-cubin/", content_type=PEP691_JSON)
    assert len(cubin.files) == 8 and cubin.files[0].size == 90613331


@pytest.mark.parametrize("sample", ["pypi-flashinfer-python-json-api.json", "pypi-flashinfer-cubin-json-api.json"])
def test_pypi_json_api_document_is_not_an_index_page(sample: str) -> None:
    with pytest.raises(CrawlError) as err:
        parse(sample, "https://pypi.example/pypi/flashinfer-python/json", content_type="application/json")
    assert err.value.url == "https://pypi.example/pypi/flashinfer-python/json"
    assert "no 'files' list" in err.value.cause and err.value.hint


def test_json_relative_urls_resolve_against_the_page() -> None:
    page = json_page(
        {
            "meta": {"api-version": "1.1"},
            "name": "demo",
            "files": [
                {"filename": "demo-1.0-py3-none-any.whl", "url": "../../packages/aa/demo-1.0-py3-none-any.whl", "hashes": {"sha256": "AB" * 32}},
            ],
        }
    )
    assert page.files[0].url == "https://pypi.example/packages/aa/demo-1.0-py3-none-any.whl"
    assert page.files[0].sha256 == "ab" * 32


def test_json_yanked_and_core_metadata_forms() -> None:
    base = {"hashes": {}, "url": "x"}
    files = [
        {"filename": "demo-1.0.tar.gz", "yanked": True, "core-metadata": True},
        {"filename": "demo-1.1.tar.gz", "yanked": "broken build", "core-metadata": {"sha256": "cd" * 32}},
        {"filename": "demo-1.2.tar.gz", "yanked": False, "dist-info-metadata": {"sha256": "ef" * 32}},
        {"filename": "demo-1.3.tar.gz", "core-metadata": False, "dist-info-metadata": True},
        {"filename": "demo-1.4.tar.gz", "core-metadata": {"md5": "00"}},
    ]
    page = json_page({"files": [{**base, **f, "url": f["filename"]} for f in files]})
    got = [(f.yanked, f.has_metadata, f.metadata_sha256) for f in page.files]
    assert got == [("", True, None), ("broken build", True, "cd" * 32), (None, True, "ef" * 32), (None, False, None), (None, True, None)]
    assert page.files[0].is_yanked and not page.files[2].is_yanked


def test_json_yanked_empty_string_is_not_yanked() -> None:
    """PEP 691: yanked when truthy. pip and unearth agree: ``"yanked": ""`` is not yanked."""
    files = [
        {"filename": "demo-1.0.tar.gz", "yanked": ""},
        {"filename": "demo-1.1.tar.gz", "yanked": "reason"},
        {"filename": "demo-1.2.tar.gz", "yanked": True},
        {"filename": "demo-1.3.tar.gz", "yanked": 0},
    ]
    page = json_page({"files": [{**f, "url": f["filename"], "hashes": {}} for f in files]})
    assert [(f.yanked, f.is_yanked) for f in page.files] == [(None, False), ("reason", True), ("", True), (None, False)]


def test_hash_fragment_with_other_parameters_keeps_the_hash() -> None:
    """``#sha256=<hex>&subdirectory=x`` and the reverse order keep the hash, as pip does."""
    digest = "ab" * 32
    page = html(
        f'<a href="a-1.0.tar.gz#sha256={digest}&amp;subdirectory=x">a</a>'
        f'<a href="a-1.1.tar.gz#subdirectory=x&amp;sha256={digest.upper()}">a</a>'
        f'<a href="a-1.2.tar.gz#subdirectory=x">a</a>'
    )
    assert [(f.url.rsplit("/", 1)[-1], f.sha256) for f in page.files] == [("a-1.0.tar.gz", digest), ("a-1.1.tar.gz", digest), ("a-1.2.tar.gz", None)]
    assert not page.warnings
    jpage = json_page({"files": [{"filename": "demo-1.0.tar.gz", "url": f"demo-1.0.tar.gz#subdirectory=x&sha256={digest}"}]})
    assert jpage.files[0].sha256 == digest and jpage.files[0].url.endswith("demo-1.0.tar.gz")


def test_json_bad_rows_are_skipped_with_warnings() -> None:
    page = json_page(
        {
            "files": [
                "not an object",
                {"filename": "demo-1.0-py3-none-any.whl"},
                {"filename": "demo-1.0.egg", "url": "demo-1.0.egg"},
                {"filename": "../../evil-1.0-py3-none-any.whl", "url": "evil"},
                {"filename": "demo-1.0-py3-none-any.whl", "url": "javascript:alert(1)"},
                {
                    "filename": "demo-2.0-py3-none-any.whl",
                    "url": "demo-2.0-py3-none-any.whl",
                    "hashes": {"sha256": "xyz"},
                    "size": -1,
                    "requires-python": "=>3.10",
                    "upload-time": 5,
                },
            ]
        }
    )
    assert [f.filename for f in page.files] == ["demo-2.0-py3-none-any.whl"]
    kept = page.files[0]
    assert kept.sha256 is None and kept.size is None and kept.requires_python is None and kept.upload_time is None
    text = "\n".join(page.warnings)
    for needle in (
        "files[0] is not an object",
        "files[1] lacks",
        "demo-1.0.egg",
        "path traversal",
        "unusable url",
        "not 64 hex digits",
        "invalid requires-python",
    ):
        assert needle in text


def test_json_root_index_lists_projects_as_subdirs() -> None:
    page = json_page({"meta": {"api-version": "1.0"}, "projects": [{"name": "Flashinfer_Python"}, {"name": "torch"}]})
    assert page.subdirs == ("flashinfer-python/", "torch/") and page.files == ()


# -- HTML attribute details ---------------------------------------------------------------------
def test_html_yanked_forms() -> None:
    page = html(
        '<a href="a-1.0.tar.gz" data-yanked="bad &amp; broken">a</a>'
        '<a href="a-1.1.tar.gz" data-yanked>a</a>'
        '<a href="a-1.2.tar.gz" data-yanked="">a</a>'
        '<a href="a-1.3.tar.gz">a</a>'
    )
    assert [f.yanked for f in page.files] == ["bad & broken", "", "", None]


def test_html_metadata_attribute_forms() -> None:
    digest = "AB" * 32
    page = html(
        f'<a href="a-1.0.tar.gz" data-core-metadata="true">x</a>'
        f'<a href="a-1.1.tar.gz" data-dist-info-metadata="sha256={digest}">x</a>'
        f'<a href="a-1.2.tar.gz" data-core-metadata="sha256={"cd" * 32}" '
        f'data-dist-info-metadata="sha256={"ef" * 32}">x</a>'
        f'<a href="a-1.3.tar.gz" data-core-metadata="sha256=nothex">x</a>'
    )
    assert [(f.has_metadata, f.metadata_sha256) for f in page.files] == [(True, None), (True, digest.lower()), (True, "cd" * 32), (True, None)]
    assert any("nothex" in w and "not 64 hex digits" in w for w in page.warnings)


def test_html_bad_fragment_digest_is_ignored_with_a_warning() -> None:
    page = html('<a href="a-1.0.tar.gz#sha256=1234">a</a><a href="a-1.1.tar.gz#md5=abcd">a</a>')
    assert [f.sha256 for f in page.files] == [None, None]
    assert len(page.warnings) == 1 and "1234" in page.warnings[0]


def test_html_non_distributions_and_bad_names_are_skipped() -> None:
    page = html(
        '<a href="torch-2.0-cp312-cp312-linux_x86_64.whl.metadata">m</a>'
        '<a href="demo-1.0-py3.12.egg">egg</a><a href="demo-1.0.win32.exe">exe</a>'
        '<a href="not_a_wheel.whl">bad</a><a href="demo-1.0-py3-none-any.whl">ok</a>'
        '<a href="demo-1.0-py3-none-any.WHL">upper</a>'
        '<a href="mailto:someone@example.org">mail</a><a href="#top">top</a><a>no href</a>'
    )
    assert [f.filename for f in page.files] == ["demo-1.0-py3-none-any.whl"]
    assert page.subdirs == ()
    text = "\n".join(page.warnings)
    assert len(page.warnings) == 5 and "py3-none-any.WHL" in text
    assert ".metadata: not a wheel or sdist" in text and "egg" in text and "exe" in text and "not_a_wheel" in text


def test_html_path_traversal_is_refused() -> None:
    page = html(
        '<a href="..%2F..%2Fevil-1.0-py3-none-any.whl">x</a>'
        '<a href="download?id=3">../../evil-1.0-py3-none-any.whl</a>'
        '<a href="dl?id=4">good-1.0-py3-none-any.whl</a>'
    )
    assert [f.filename for f in page.files] == ["good-1.0-py3-none-any.whl"]
    assert page.files[0].url == "https://idx.example/simple/demo/dl?id=4"  # link text names the file
    assert sum("path traversal" in w for w in page.warnings) == 2


def test_credentials_never_reach_models_or_warnings() -> None:
    page = html(
        '<a href="demo-1.0-py3-none-any.whl">ok</a><a href="https://u:hunter2@cdn.example/x/bad.egg">e</a>'
        '<a href="https://u:hunter2@cdn.example/x/demo-2.0.tar.gz">s</a>',
        url="https://alice:s3cret@idx.example/simple/demo/",
    )
    assert page.url == "https://idx.example/simple/demo/"
    assert [f.url for f in page.files] == ["https://idx.example/simple/demo/demo-1.0-py3-none-any.whl", "https://cdn.example/x/demo-2.0.tar.gz"]
    blob = repr(page)
    assert "s3cret" not in blob and "hunter2" not in blob and "alice" not in blob


def test_html_base_tag_and_api_version() -> None:
    page = html('<head><base href="https://mirror.example/files/"></head><a href="demo-1.0.tar.gz">d</a>')
    assert page.files[0].url == "https://mirror.example/files/demo-1.0.tar.gz"
    ok = html('<meta name="pypi:repository-version" content="1.3"><a href="demo-1.0.tar.gz">d</a>')
    assert len(ok.files) == 1
    with pytest.raises(CrawlError, match="simple-API version 2.0"):
        html('<meta name="pypi:repository-version" content="2.0"><a href="demo-1.0.tar.gz">d</a>')


def test_html_duplicate_rows_collapse_and_subdir_rules() -> None:
    page = html(
        '<a href="demo-1.0.tar.gz">d</a><a href="demo-1.0.tar.gz">d</a>'
        '<a href="../">up</a><a href=".git/">git</a><a href="https://other.example/x/">x</a>'
        '<a href="/simple/demo/sub/">sub</a><a href="sub/">sub again</a>'
    )
    assert len(page.files) == 1
    assert page.subdirs == ("sub/",)


def test_warnings_are_capped() -> None:
    rows = "".join(f'<a href="bad{i}.egg">x</a>' for i in range(MAX_WARNINGS + 30))
    page = html(rows)
    assert len(page.warnings) == MAX_WARNINGS + 1
    assert page.warnings[-1] == "... and 30 more warnings like these"


# -- content sniffing and malformed pages -------------------------------------------------------
def test_json_served_as_html_is_sniffed() -> None:
    raw = body("pypi-flashinfer-cubin-simple.json")
    page = parse_page(IndexPage(url="https://pypi.example/simple/flashinfer-cubin/", content=raw, content_type="text/html"), index="pypi")
    assert len(page.files) == 8


def test_html_served_as_json_is_sniffed() -> None:
    page = parse_page(
        IndexPage(url="https://flashinfer.ai/whl/cu130/", content=body("flashinfer-cu130-index.html"), content_type="application/json"), index="flashinfer"
    )
    assert len(page.subdirs) == 9


def test_none_page_is_empty() -> None:
    assert parse_page(None, index="pypi") == ParsedPage(url="")


def test_invalid_utf8_is_replaced_with_a_warning() -> None:
    raw = b'<a href="demo-1.0.tar.gz">d\xff\xfe</a><a href="caf\xe9-1.0.tar.gz">x</a>'
    page = parse_page(IndexPage(url="https://idx.example/demo/", content=raw), index="t")
    assert [f.filename for f in page.files] == ["demo-1.0.tar.gz"]
    assert "not valid utf-8" in page.warnings[0]


def test_declared_charset_is_honoured() -> None:
    raw = '<h1>Caf\u00e9</h1><a href="demo-1.0.tar.gz">d</a>'.encode("latin-1")
    page = parse_page(IndexPage(url="https://idx.example/demo/", content=raw, content_type="text/html; charset=ISO-8859-1"), index="t")
    assert page.title == "Caf\u00e9" and page.warnings == ()
    bogus = parse_page(IndexPage(url="https://idx.example/demo/", content=b"<a href='a-1.0.tar.gz'>a</a>", content_type="text/html; charset=rot13"), index="t")
    assert len(bogus.files) == 1 and "rot13" in bogus.warnings[0]


@pytest.mark.parametrize(
    ("content", "content_type", "cause"),
    [
        (b"%PDF-1.7\n...", "text/html", "a PDF document"),
        (b"\x1f\x8b\x08\x00rest", "text/html", "gzip-compressed"),
        (b"<html>\x00\x01\x02</html>", "text/html", "NUL bytes"),
        (
            b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>',
            "application/xml",
            "XML error document (AccessDenied)",
        ),
        (b'{"files": [', PEP691_JSON, "does not parse"),
        (b"[1, 2, 3]", PEP691_JSON, "a list, not a PEP 691 object"),
        (b'{"name": "x"}', PEP691_JSON, "no 'files' list"),
        (b'{"meta": {"api-version": "2.0"}, "files": []}', PEP691_JSON, "simple-API version 2.0"),
        (b"[" * 100_000, PEP691_JSON, "does not parse"),
    ],
)
def test_not_an_index_page(content: bytes, content_type: str, cause: str) -> None:
    url = "https://u:pw@idx.example/simple/demo/"
    with pytest.raises(CrawlError) as err:
        parse_page(IndexPage(url=url, content=content, content_type=content_type), index="t")
    assert cause in err.value.cause
    assert err.value.url == "https://idx.example/simple/demo/" and "pw" not in str(err.value)


@pytest.mark.parametrize(
    "soup",
    [
        b"<<<a href=x-1.0.tar.gz>>>",
        b"<![if foo]><a href='a-1.0.tar.gz'>a</a><![endif]>",
        b"<a href='a-1.0.tar.gz'><a href='b-1.0.tar.gz'>",
        b'</a></a><a href="http://[::1/x-1.0.tar.gz">bad host</a>',
        b"<!-- <a href='hidden-1.0.tar.gz'>x</a> -->",
        b"<script><a href='s-1.0.tar.gz'></a></script>",
        b"just some text",
        b"",
    ],
)
def test_html_soup_never_crashes(soup: bytes) -> None:
    page = parse_page(IndexPage(url="https://idx.example/demo/", content=soup), index="t")
    assert isinstance(page, ParsedPage)
    assert all(f.filename not in ("hidden-1.0.tar.gz", "s-1.0.tar.gz") for f in page.files)


def test_unclosed_anchors_each_count() -> None:
    page = html("<a href='a-1.0.tar.gz'><a href='b-1.0.tar.gz'>")
    assert [f.filename for f in page.files] == ["a-1.0.tar.gz", "b-1.0.tar.gz"]


# -- large pages (speed is measured by bench/run.py, not asserted here) --------------------------------------------------------------------------------------
def _pytorch_page(rows: int) -> bytes:
    pys = ["cp310-cp310", "cp311-cp311", "cp312-cp312", "cp313-cp313", "cp313-cp313t", "cp314-cp314", "cp314-cp314t"]
    plats = ["manylinux_2_28_x86_64", "manylinux_2_28_aarch64", "win_amd64"]
    lines = ["<!DOCTYPE html>", "<html>", "  <body>", "    <h1>Links for torch</h1>"]
    for i in range(rows):
        fn = f"torch-2.12.0.dev{20260101 + i // 21}+cu130-{pys[i % 7]}-{plats[(i // 7) % 3]}.whl"
        digest = hashlib.sha256(fn.encode()).hexdigest()
        lines.append(
            f'    <a href="{R2}/nightly/cu130/{fn.replace("+", "%2B")}" data-dist-info-metadata="sha256={digest}"'
            f' data-core-metadata="sha256={digest}" data-upload-time="2026-03-01T08:00:00Z">{fn}</a><br/>'
        )
    lines += ["  </body>", "</html>", "<!--TIMESTAMP 1773342000-->"]
    return "\n".join(lines).encode()


def test_large_pytorch_page_parses_every_row() -> None:
    raw = _pytorch_page(1300)
    assert len(raw) > 500_000
    page = parse_page(IndexPage(url="https://download.pytorch.org/whl/nightly/cu130/torch/", content=raw), index="pytorch")
    assert len(page.files) == 1300 and page.warnings == ()


def test_large_json_page_parses_every_file() -> None:
    files = [
        {
            "filename": f"pkg-1.{i}-py3-none-any.whl",
            "url": f"../../packages/pkg-1.{i}-py3-none-any.whl",
            "hashes": {"sha256": hashlib.sha256(str(i).encode()).hexdigest()},
            "requires-python": ">=3.9",
            "size": 1000 + i,
            "upload-time": "2025-01-01T00:00:00Z",
            "yanked": False,
        }
        for i in range(5000)
    ]
    page = json_page({"meta": {"api-version": "1.1"}, "name": "pkg", "files": files})
    assert len(page.files) == 5000 and page.files[-1].size == 5999


# -- filenames ----------------------------------------------------------------------------------
def test_parse_filename_wheel_and_sdists() -> None:
    name, version, tags, is_wheel = parse_filename("flashinfer_jit_cache-0.7.0+cu130-cp39-abi3-manylinux_2_28_x86_64.whl")
    assert (name, version, is_wheel) == ("flashinfer-jit-cache", Version("0.7.0+cu130"), True)
    assert tags == frozenset({Tag("cp39", "abi3", "manylinux_2_28_x86_64")})
    assert parse_filename("Flashinfer_Python-0.2.0.post1.tar.gz") == ("flashinfer-python", Version("0.2.0.post1"), frozenset(), False)
    assert parse_filename("demo-1.0.zip")[1] == Version("1.0")
    assert parse_filename("demo-1.0-1build-py3-none-any.whl")[1] == Version("1.0")  # build tag accepted


@pytest.mark.parametrize(
    ("filename", "message"),
    [
        ("demo-1.0.egg", "not a wheel or sdist"),
        ("demo-1.0.tar.bz2", "not a wheel or sdist"),
        ("demo-notaversion-py3-none-any.whl", "not a valid distribution filename"),
        ("demo.whl", "not a valid distribution filename"),
        ("demo.tar.gz", "not a valid distribution filename"),
        ("../demo-1.0.tar.gz", "path traversal"),
        ("..\\demo-1.0.tar.gz", "path traversal"),
        ("..", "path traversal"),
        ("demo-1.0 -py3-none-any.whl", "whitespace or control"),
        ("", "not a wheel or sdist"),
    ],
)
def test_parse_filename_rejects(filename: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_filename(filename)


# -- METADATA -----------------------------------------------------------------------------------
TORCH_METADATA = b"""Metadata-Version: 2.4
Name: Torch
Version: 2.12.0.dev20260311+cu130
Requires-Python: >=3.10
Requires-Dist: filelock
Requires-Dist: nvidia-cublas==13.1.0.3; platform_system == "Linux"
Requires-Dist: triton==3.7.0+git9c288bc5; platform_system == "Linux"
Requires-Dist: opt-einsum>=3.3; extra == "opt-einsum"
Provides-Extra: opt-einsum
Provides-Extra: optree

Long description here. Name: not-a-header
"""


def test_parse_metadata_reads_the_fields_the_resolver_needs() -> None:
    meta = parse_metadata(TORCH_METADATA, source="https://download.pytorch.org/whl/x.whl.metadata")
    assert meta.name == "torch" and meta.version == Version("2.12.0.dev20260311+cu130")
    assert meta.requires_python == ">=3.10"
    assert meta.requires_dist == (
        "filelock",
        'nvidia-cublas==13.1.0.3; platform_system == "Linux"',
        'triton==3.7.0+git9c288bc5; platform_system == "Linux"',
        'opt-einsum>=3.3; extra == "opt-einsum"',
    )
    assert meta.provides_extra == ("opt-einsum", "optree")


def test_parse_metadata_minimal_and_crlf() -> None:
    meta = parse_metadata(b"Name: flashinfer_cubin\r\nVersion: 0.6.13\r\n\r\n", source="x")
    assert (meta.name, meta.version, meta.requires_dist, meta.requires_python) == ("flashinfer-cubin", Version("0.6.13"), (), None)


@pytest.mark.parametrize(
    ("raw", "cause"),
    [
        (b"", "no Name field"),
        (b"\x89PNG\r\n\x1a\n\x00\x00garbage", "no Name field"),
        (b"Version: 1.0\n", "no Name field"),
        (b"Name: demo\n", "no Version field"),
        (b"Name: demo\nVersion: one point oh\n", "'one point oh' is not a valid version"),
        (b"Name: -demo-\nVersion: 1.0\n", "not a valid project name"),
        (b"Name: demo\nName: other\nVersion: 1.0\n", "Name is repeated"),
        (b"Name: d\xe9mo\nVersion: 1.0\n", "Name is repeated or not valid UTF-8"),
        (b"Name: demo\nVersion: 1.0\n" + b"X" * (5 * 1024 * 1024), "over the 5,242,880-byte limit"),
    ],
)
def test_parse_metadata_rejects(raw: bytes, cause: str) -> None:
    with pytest.raises(CrawlError) as err:
        parse_metadata(raw, source="https://user:tok@idx.example/demo-1.0-py3-none-any.whl.metadata")
    assert cause in err.value.cause
    assert err.value.url == "https://idx.example/demo-1.0-py3-none-any.whl.metadata"


def test_a_row_filter_passes_over_what_the_target_cannot_use_unread_and_keeps_the_rest() -> None:
    """``keep``: the wheels a target cannot install (and sdists, unless asked for) are skipped
    before any work (no warning: a popular page has thousands); this target's wheels, sdists when
    asked for, and the broken rows it could use are read as always, in the same order."""
    from resolve_gpu_stack.index.parse import RowFilter

    tags = frozenset({Tag("cp312", "cp312", "manylinux_2_28_x86_64"), Tag("py3", "none", "any")})
    digest = "ab" * 32
    rows = [
        ("demo-2.0-cp312-cp312-win_amd64.whl", digest),
        ("demo-2.0-cp312-cp312-manylinux_2_28_x86_64.whl", digest),
        ("demo-2.0-cp311-cp311-manylinux_2_28_x86_64.whl", "not-hex"),  # another Python: its bad digest is never read
        ("demo-2.0.tar.gz", digest),
        ("demo-1.0-py3-none-any.whl", "not-hex"),  # this target's: its bad digest is said
        ("demo-1.0-1-cp312-cp312-macosx_11_0_arm64.whl", digest),  # a build tag
        ("demo-0.1.win32.exe", digest),  # not a distribution: said only when sdists are read
    ]
    json_page = json.dumps({"meta": {"api-version": "1.1"}, "files": [{"filename": f, "url": f, "hashes": {"sha256": d}} for f, d in rows]})
    html_page = "".join(f'<a href="{f}#sha256={d}">{f}</a><br>' for f, d in rows) + '<a href="cu130/">cu130/</a>'
    for content, content_type in ((json_page.encode(), PEP691_JSON), (f"<html><body>{html_page}</body></html>".encode(), "text/html")):
        page = IndexPage(url="https://idx.example/simple/demo/", content=content, content_type=content_type)
        full = parse_page(page, index="test")
        with_sdists = parse_page(page, index="test", keep=RowFilter(tags))
        wheels_only = parse_page(page, index="test", keep=RowFilter(tags, sdists=False))
        assert [f.filename for f in with_sdists.files] == ["demo-2.0-cp312-cp312-manylinux_2_28_x86_64.whl", "demo-2.0.tar.gz", "demo-1.0-py3-none-any.whl"]
        assert [f.filename for f in wheels_only.files] == ["demo-2.0-cp312-cp312-manylinux_2_28_x86_64.whl", "demo-1.0-py3-none-any.whl"]
        assert with_sdists.files == tuple(f for f in full.files if f in with_sdists.files)
        assert len(full.warnings) == 3 and len(with_sdists.warnings) == 2 and len(wheels_only.warnings) == 1
        assert "demo-1.0-py3-none-any.whl" in wheels_only.warnings[0]
        assert with_sdists.subdirs == wheels_only.subdirs == full.subdirs


def test_a_json_page_reads_the_same_whether_its_rows_are_decoded_one_by_one_or_the_page_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """A large PEP 691 page's rows are decoded only once the row filter keeps them (``jsonrows``,
    imported for the first such page, never for small ones); a page that decoder refuses
    (``NaN``, which the standard library reads) is read whole: the same files and the same warnings
    either way, rows that are not objects or lack a string filename included."""
    import resolve_gpu_stack.index as index_package
    from resolve_gpu_stack.index.parse import FAST_MIN, RowFilter

    monkeypatch.delitem(sys.modules, "resolve_gpu_stack.index.jsonrows", raising=False)
    monkeypatch.delattr(index_package, "jsonrows", raising=False)
    tags = frozenset({Tag("cp312", "cp312", "manylinux_2_28_x86_64")})
    digest = "cd" * 32
    rows: list[object] = [
        {"filename": "demo-2.0-cp312-cp312-manylinux_2_28_x86_64.whl", "url": "demo-2.0-cp312-cp312-manylinux_2_28_x86_64.whl", "hashes": {"sha256": digest}},
        {"filename": "demo-2.0-cp312-cp312-win_amd64.whl", "url": "w.whl", "hashes": {"sha256": "bad"}},  # passed over: its bad digest is never read
        7,  # not an object: said
        {"filename": 12, "url": "x.whl"},  # no string filename: said
        {"filename": "demo-1.0-cp312-cp312-manylinux_2_28_x86_64.whl", "url": "demo-1.0-cp312-cp312-manylinux_2_28_x86_64.whl", "size": 10},
    ]
    old = [
        {"filename": f"demo-0.{n}-cp312-cp312-win_amd64.whl", "url": f"demo-0.{n}-cp312-cp312-win_amd64.whl", "hashes": {"sha256": digest}} for n in range(8000)
    ]

    def read(text: str) -> ParsedPage:
        return parse_page(
            IndexPage(url="https://idx.example/simple/demo/", content=text.encode(), content_type=PEP691_JSON), index="test", keep=RowFilter(tags, sdists=False)
        )

    small = read(json.dumps({"meta": {"api-version": "1.1"}, "files": rows}))
    assert "resolve_gpu_stack.index.jsonrows" not in sys.modules  # a small page: json, no msgspec import
    strict = json.dumps({"meta": {"api-version": "1.1"}, "files": rows + old})
    assert len(strict) >= FAST_MIN
    lenient = strict[:-1] + ', "extra": NaN}'  # json reads it, msgspec does not
    fast, whole = read(strict), read(lenient)
    assert "resolve_gpu_stack.index.jsonrows" in sys.modules
    assert fast == whole and fast.files == small.files and fast.warnings == small.warnings
    assert [f.filename for f in fast.files] == ["demo-2.0-cp312-cp312-manylinux_2_28_x86_64.whl", "demo-1.0-cp312-cp312-manylinux_2_28_x86_64.whl"]
    assert fast.files[0].sha256 == digest and fast.files[1].size == 10
    assert len(fast.warnings) == 2 and "files[2] is not an object" in fast.warnings[0] and "files[3]" in fast.warnings[1]
