"""The wheelhouse's pure parts: pages, manifest, lock rewriting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.utils import NormalizedName
from packaging.version import Version

from resolve_gpu_stack.env.lockinstall import local_wheel_path
from resolve_gpu_stack.errors import LockFileError
from resolve_gpu_stack.index.parse import parse_page
from resolve_gpu_stack.lock.wheelhouse import house_file, manifest_json, project_html, project_json, read_manifest, rewrite_lock_text, root_json
from resolve_gpu_stack.model import IndexPage

SHA = "a" * 64
META = "b" * 64
FILE = house_file(
    filename="foo-1.0+cu130-py3-none-any.whl",
    name=NormalizedName("foo"),
    version=Version("1.0+cu130"),
    sha256=SHA,
    size=10,
    metadata_sha256=META,
    requires_python=">=3.10,<4",
    locks=("pylock.a.toml",),
)

LOCK = """lock-version = "1.0"
created-by = "resolve-gpu-stack"

[[packages]]
name = "foo"
version = "1.0"

[[packages.wheels]]
name = "foo-1.0-py3-none-any.whl"
url = "http://127.0.0.1:9/files/foo-1.0-py3-none-any.whl"
hashes = { sha256 = "SHA" }

[tool.resolve-gpu-stack]
url = "http://127.0.0.1:9/keep/me"
""".replace("SHA", SHA)


def test_project_pages_escape_requires_python_and_carry_hashes_and_metadata():
    page = project_html("foo", [FILE])
    assert 'data-requires-python="&gt;=3.10,&lt;4"' in page
    assert f'href="../../files/foo-1.0%2Bcu130-py3-none-any.whl#sha256={SHA}"' in page
    assert f'data-core-metadata="sha256={META}"' in page and f'data-dist-info-metadata="sha256={META}"' in page
    url = "https://mirror.example/house/simple/foo/"
    for text, ctype in ((page, "text/html"), (project_json("foo", [FILE]), "application/vnd.pypi.simple.v1+json")):
        parsed = parse_page(IndexPage(url=url, content=text.encode(), content_type=ctype), index="pypi")
        [f] = parsed.files
        assert (f.sha256, f.requires_python, f.has_metadata, f.metadata_sha256) == (SHA, ">=3.10,<4", True, META)
        assert f.url.startswith("https://mirror.example/house/files/foo-1.0")
    assert json.loads(root_json(["foo"]))["projects"] == [{"name": "foo"}]


def test_manifest_round_trips_and_foreign_json_is_ignored():
    text = manifest_json([FILE], ["pylock.a.toml"])
    doc = json.loads(text)
    assert doc["total-bytes"] == 10 and doc["files"][0]["locks"] == ["pylock.a.toml"]
    assert read_manifest(text) == {FILE.wheel.filename: FILE}
    assert read_manifest("{}") == {} and read_manifest("not json") == {} and read_manifest('{"schema": "resolve-gpu-stack/wheelhouse/v1", "files": [{}]}') == {}


def test_lock_rewrite_touches_only_wheel_locations():
    old = "http://127.0.0.1:9/files/foo-1.0-py3-none-any.whl"
    as_path = rewrite_lock_text(LOCK, {old: "files/foo-1.0-py3-none-any.whl"}, as_path=True, source="x")
    assert 'path = "files/foo-1.0-py3-none-any.whl"' in as_path and old not in as_path
    assert 'url = "http://127.0.0.1:9/keep/me"' in as_path  # not a wheel table
    assert as_path.replace('path = "files/foo-1.0-py3-none-any.whl"', f'url = "{old}"') == LOCK
    as_url = rewrite_lock_text(as_path, {"files/foo-1.0-py3-none-any.whl": "https://m.example/files/foo-1.0-py3-none-any.whl"}, as_path=False, source="x")
    assert 'url = "https://m.example/files/foo-1.0-py3-none-any.whl"' in as_url
    with pytest.raises(LockFileError, match="no wheelhouse file"):
        rewrite_lock_text(LOCK, {}, as_path=True, source="x")


def test_local_wheel_paths_are_relative_to_the_lock(tmp_path: Path):
    assert local_wheel_path("files/a.whl", tmp_path) == (tmp_path / "files" / "a.whl").resolve()
    assert local_wheel_path("file:///srv/house/a%2Bb.whl", tmp_path) == Path("/srv/house/a+b.whl")
    assert local_wheel_path("https://m.example/a.whl", tmp_path) is None
