"""The bundled snapshot indexes/snapshots/2026-03-07 (user story 1's world) is whole and coherent.

Everything is read back through ``resolve_gpu_stack.net.snapshot.SnapshotFetcher``, the code a
``--snapshot`` run uses. The pages are checked with a small stdlib HTML reader of our own, so these
tests do not lean on ``parse.py``; where ``parse_page`` is importable it is checked as well.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import shutil
import sys
from html.parser import HTMLParser
from pathlib import Path
from types import ModuleType
from urllib.parse import unquote, urljoin, urlsplit

import pytest
from packaging.metadata import parse_email
from packaging.requirements import Requirement
from packaging.tags import Tag
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version
from support.paths import REPO

from resolve_gpu_stack.data.definitions import RouteContext, load_definitions
from resolve_gpu_stack.errors import IntegrityError, SnapshotMiss
from resolve_gpu_stack.model import IndexFile
from resolve_gpu_stack.net.snapshot import SnapshotFetcher, snapshot_key

SNAPSHOT = REPO / "indexes" / "snapshots" / "2026-03-07"
GENERATOR = REPO / "indexes" / "snapshots" / "tools" / "reconstruct_2026_03_07.py"
PYTORCH = "https://download.pytorch.org/whl/"
FLASHINFER = "https://flashinfer.ai/whl/"
BASES = {"pytorch": PYTORCH, "flashinfer": FLASHINFER}
DEFS = load_definitions()
STORY_TORCH = "2.12.0.dev20260307"
NIGHTLY_PAGES = ("nightly/cu130/torch/", "nightly/cu130/torchvision/", "nightly/cu130/torchaudio/")


# -- helpers ----------------------------------------------------------------------------------


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.anchors: list[tuple[dict[str, str], str]] = []
        self._attrs: dict[str, str] | None = None
        self._text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._attrs, self._text = {k: v or "" for k, v in attrs}, ""

    def handle_data(self, data: str) -> None:
        if self._attrs is not None:
            self._text += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._attrs is not None:
            self.anchors.append((self._attrs, self._text))
            self._attrs = None


class Row:
    def __init__(self, page_url: str, attrs: dict[str, str], text: str) -> None:
        self.href = attrs["href"]
        self.url, _, self.fragment = urljoin(page_url, self.href).partition("#")
        self.filename = text
        self.core = attrs.get("data-core-metadata")
        self.dist_info = attrs.get("data-dist-info-metadata")
        self.attrs = attrs

    @property
    def name(self) -> str:
        return parse_wheel_filename(self.filename)[0]

    @property
    def version(self) -> Version:
        return parse_wheel_filename(self.filename)[1]

    @property
    def tags(self) -> frozenset[Tag]:
        return parse_wheel_filename(self.filename)[3]

    @property
    def metadata_digest(self) -> str | None:
        return self.core.split("=", 1)[1] if self.core else None

    def index_file(self) -> IndexFile:
        name, version, _, tags = parse_wheel_filename(self.filename)
        return IndexFile(
            filename=self.filename,
            url=self.url,
            name=name,
            version=version,
            tags=tags,
            metadata_sha256=self.metadata_digest,
            has_metadata=self.core is not None,
        )


@pytest.fixture(scope="module")
def fetcher() -> SnapshotFetcher:
    return SnapshotFetcher(SNAPSHOT, BASES)


@pytest.fixture(scope="module")
def manifest() -> dict:
    return json.loads((SNAPSHOT / "manifest.json").read_text(encoding="utf-8"))


def body(fetcher: SnapshotFetcher, index: str, path: str) -> bytes | None:
    url = BASES[index] + path
    page = fetcher.fetch_pages([url], index=DEFS.indexes[index])[url].page
    return None if page is None else page.content


def rows(fetcher: SnapshotFetcher, index: str, path: str) -> list[Row]:
    content = body(fetcher, index, path)
    assert content is not None, f"{index}:{path} is a 404 in the snapshot"
    reader = _Anchors()
    reader.feed(content.decode("utf-8"))
    return [Row(BASES[index] + path, a, t) for a, t in reader.anchors]


def metadata(fetcher: SnapshotFetcher, row: Row) -> dict:
    raw = fetcher.fetch_metadata([row.index_file()])[row.url]
    parsed, unparsed = parse_email(raw)
    assert not unparsed, f"{row.filename}: unparsable METADATA fields {sorted(unparsed)}"
    return parsed


def page_keys(manifest: dict) -> list[tuple[str, str, dict]]:
    out = []
    for key, entry in manifest["pages"].items():
        index, _, rel = key.partition(":")
        if index in BASES:
            out.append((index, "" if rel == "./" else rel, entry))
    return out


def date_of(row: Row) -> str:
    return re.search(r"\.dev(\d{8})", str(row.version)).group(1)


def python_arch(row: Row) -> set[tuple[str, str, str]]:
    """(python, abi, machine) of a wheel: manylinux_2_27_x86_64 and manylinux_2_28_x86_64 agree."""
    return {(t.interpreter, t.abi, "x86_64" if t.platform.endswith("x86_64") else t.platform.rsplit("_", 1)[-1]) for t in row.tags}


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("reconstruct_2026_03_07", GENERATOR)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


# -- the manifest and the files behind it ------------------------------------------------------


def test_manifest_names_the_indexes_and_every_file_exists(manifest: dict) -> None:
    assert manifest["indexes"]["pytorch"] == PYTORCH
    assert manifest["indexes"]["flashinfer"] == FLASHINFER
    assert "pypi" in manifest["indexes"] and manifest["indexes"]["pypi"] is None
    for key, entry in manifest["pages"].items():
        assert entry["status"] in (200, 404), key
        if entry["status"] == 200:
            assert (SNAPSHOT / entry["file"]).is_file(), key
    for key, entry in manifest["metadata"].items():
        data = (SNAPSHOT / entry["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], key


def test_every_recorded_page_replays_byte_for_byte(fetcher: SnapshotFetcher, manifest: dict) -> None:
    served = 0
    for index, rel, entry in page_keys(manifest):
        content = body(fetcher, index, rel)
        if entry["status"] == 404:
            assert content is None
            continue
        assert content == (SNAPSHOT / entry["file"]).read_bytes()
        served += 1
    assert served >= 20


def test_story_404_pages_are_recorded(fetcher: SnapshotFetcher) -> None:
    for path in ("cu130/torch2.12/flashinfer-python/", "cu130/torch2.11/flashinfer-python/", "cu130/torch2.12/", "cu130/torch2.11/"):
        assert body(fetcher, "flashinfer", path) is None, path
    assert body(fetcher, "flashinfer", "cu130/flashinfer-jit-cache/") is not None


def test_the_snapshot_answers_every_page_story_1_routes_to(fetcher: SnapshotFetcher) -> None:
    defs = DEFS.with_index_urls({"pypi": "https://pypi.snapshot.invalid/simple/"})
    names = ("torch", "torchvision", "torchaudio", "triton", "pytorch-triton", "flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache")
    for channel in ("stable", "nightly"):
        ctx = RouteContext(torch_channel="nightly", cuda="cu130", flashinfer_channel=channel, torch_series="2.12")
        for name in names:
            for loc in defs.pages_for(name, ctx):
                if loc.index in BASES:
                    fetcher.fetch_pages([loc.url], index=DEFS.indexes[loc.index])  # a miss raises


def test_a_page_the_snapshot_lacks_is_a_miss_naming_the_url(fetcher: SnapshotFetcher) -> None:
    url = PYTORCH + "nightly/cu126/torch/"
    with pytest.raises(SnapshotMiss) as err:
        fetcher.fetch_pages([url], index=DEFS.indexes["pytorch"])
    assert url in str(err.value)


# -- PEP 658 digests -----------------------------------------------------------------------------


def test_advertised_metadata_digests_match_the_stored_files(fetcher: SnapshotFetcher, manifest: dict) -> None:
    checked = 0
    for index, rel, entry in page_keys(manifest):
        if index != "pytorch" or entry["status"] != 200 or rel.endswith("cu130/"):
            continue
        for row in rows(fetcher, index, rel):
            assert row.core == row.dist_info, row.filename  # legacy twin carries the same value
            if row.core is None:
                continue
            assert re.fullmatch(r"sha256=[0-9a-f]{64}", row.core), row.filename
            if snapshot_key(row.url, BASES) not in manifest["metadata"]:
                continue
            raw = fetcher.fetch_metadata([row.index_file()])[row.url]  # verifies the digest too
            assert hashlib.sha256(raw).hexdigest() == row.metadata_digest
            checked += 1
    assert checked > 600


def test_a_metadata_file_that_does_not_match_the_page_is_refused(fetcher: SnapshotFetcher) -> None:
    row = next(r for r in rows(fetcher, "pytorch", "nightly/cu130/torch/") if r.filename.startswith(f"torch-{STORY_TORCH}+"))
    bad = IndexFile(filename=row.filename, url=row.url, name=row.name, version=row.version, metadata_sha256="0" * 64)
    with pytest.raises(IntegrityError):
        fetcher.fetch_metadata([bad])


@pytest.mark.parametrize("path", NIGHTLY_PAGES)
def test_nightly_metadata_is_stored_for_the_14_newest_dates_only(fetcher: SnapshotFetcher, manifest: dict, path: str) -> None:
    all_rows = rows(fetcher, "pytorch", path)
    dates = sorted({date_of(r) for r in all_rows})
    newest = set(dates[-14:])
    for row in all_rows:
        linux = "manylinux" in row.filename
        assert (row.core is not None) == linux, row.filename  # Windows rows carry no PEP 658 attributes
        stored = snapshot_key(row.url, BASES) in manifest["metadata"]
        assert stored == (linux and date_of(row) in newest), row.filename
        if linux and not stored:
            with pytest.raises(SnapshotMiss):
                fetcher.fetch_metadata([row.index_file()])


# -- user story 1 -------------------------------------------------------------------------------


def test_the_story_torch_exists_for_x86_64_and_not_for_aarch64(fetcher: SnapshotFetcher) -> None:
    torch = rows(fetcher, "pytorch", "nightly/cu130/torch/")
    wanted = f"torch-{STORY_TORCH}+cu130-cp312-cp312-manylinux_2_28_x86_64.whl"
    [row] = [r for r in torch if r.filename == wanted]
    assert row.href == f"/whl/nightly/cu130/torch-{STORY_TORCH}%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl"
    assert row.url == PYTORCH + f"nightly/cu130/torch-{STORY_TORCH}%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl"
    assert not [r for r in torch if STORY_TORCH in r.filename and "aarch64" in r.filename]
    assert max(date_of(r) for r in torch if "aarch64" in r.filename) == "20260306"
    assert max(r.version for r in torch) == Version(f"{STORY_TORCH}+cu130")
    assert len({date_of(r) for r in torch}) <= 60  # the index keeps the 60 newest nightlies
    # dates are per build: one date has Windows wheels only
    by_date: dict[str, set[str]] = {}
    for r in torch:
        by_date.setdefault(date_of(r), set()).add("win" if "win_amd64" in r.filename else "linux")
    assert any(kinds == {"win"} for kinds in by_date.values())


def test_each_torch_triton_pin_names_a_wheel_on_the_triton_page(fetcher: SnapshotFetcher, manifest: dict) -> None:
    triton = rows(fetcher, "pytorch", "nightly/cu130/triton/")
    assert all(r.href.startswith("/whl/nightly/triton-") for r in triton)  # channel-root objects
    pins = set()
    for row in rows(fetcher, "pytorch", "nightly/cu130/torch/"):
        if snapshot_key(row.url, BASES) not in manifest["metadata"]:
            continue
        reqs = [Requirement(r) for r in metadata(fetcher, row)["requires_dist"]]
        [pin] = [r for r in reqs if r.name == "triton"]
        [spec] = list(pin.specifier)
        assert spec.operator == "==" and "+git" in spec.version, pin
        assert pin.marker is not None and pin.marker.evaluate({"platform_system": "Linux"})
        matches = [t for t in triton if t.version == Version(spec.version) and python_arch(t) & python_arch(row)]
        assert matches, f"{row.filename} pins {pin} but the triton page has no wheel for it"
        pins.add(spec.version)
    assert len(pins) >= 2


def test_exactly_one_torchvision_build_pins_the_story_torch(fetcher: SnapshotFetcher, manifest: dict) -> None:
    torch_versions = {r.version.public for r in rows(fetcher, "pytorch", "nightly/cu130/torch/")}
    pinning = []
    for row in rows(fetcher, "pytorch", "nightly/cu130/torchvision/"):
        assert row.href.startswith("https://download-r2.pytorch.org/whl/nightly/cu130/torchvision-")
        if snapshot_key(row.url, BASES) not in manifest["metadata"]:
            continue
        [pin] = [Requirement(r) for r in metadata(fetcher, row)["requires_dist"] if Requirement(r).name == "torch"]
        [spec] = list(pin.specifier)
        assert spec.operator == "==" and "+" not in spec.version  # public version, no local label
        assert spec.version in torch_versions or Version(spec.version) < min(Version(v) for v in torch_versions)
        assert spec.version.rsplit("dev", 1)[1] <= date_of(row)  # built against that day's torch or an older one
        if spec.version == STORY_TORCH:
            pinning.append(row.filename)
    assert pinning == ["torchvision-0.26.0.dev20260307+cu130-cp312-cp312-manylinux_2_28_x86_64.whl"]


def test_torchaudio_pins_torch_only_and_one_build_pins_the_story_torch(fetcher: SnapshotFetcher, manifest: dict) -> None:
    """Like torchvision, one torchaudio wheel is a re-run against the story torch: the build a serving
    framework's torchaudio pin is replaced by (issue 11); every other one pins an older torch."""
    seen = 0
    pinning = []
    for row in rows(fetcher, "pytorch", "nightly/cu130/torchaudio/"):
        if snapshot_key(row.url, BASES) in manifest["metadata"]:
            reqs = [Requirement(r) for r in metadata(fetcher, row)["requires_dist"]]
            assert [r.name for r in reqs] == ["torch"]
            if str(reqs[0].specifier) == f"=={STORY_TORCH}":
                pinning.append(row.filename)
            seen += 1
    assert seen > 100
    assert pinning == ["torchaudio-2.11.0.dev20260307+cu130-cp312-cp312-manylinux_2_28_x86_64.whl"]


def test_every_exact_pypi_pin_is_documented_with_an_upload_date_before_the_snapshot(fetcher: SnapshotFetcher, manifest: dict) -> None:
    documented = load_generator().PYPI_PINS
    assert all(day <= "2026-03-07" for day in documented.values())
    found = set()
    for key, entry in manifest["metadata"].items():
        if not key.startswith("pytorch:") or "/torch-" not in key:
            continue
        parsed, _ = parse_email((SNAPSHOT / entry["file"]).read_bytes())
        for text in parsed.get("requires_dist", []):
            req = Requirement(text)
            if req.name in ("triton",) and "+git" in str(req.specifier):
                continue  # nightly triton comes from the PyTorch index, checked above
            for spec in req.specifier:
                if spec.operator in ("==", "~="):
                    found.add(f"{canonicalize_name(req.name)}{spec.operator}{spec.version}")
    assert found, "no pinned dependency found"
    assert found <= set(documented), sorted(found - set(documented))


# -- the two HTML dialects ----------------------------------------------------------------------

_PT_ROW = re.compile(
    r'    <a href="(?P<href>[^"#]+)(?:#sha256=[0-9a-f]{64})?"'
    r'(?: data-dist-info-metadata="sha256=(?P<d1>[0-9a-f]{64})" data-core-metadata="sha256=(?P<d2>[0-9a-f]{64})")?'
    r">(?P<text>[^<]+)</a><br/>"
)


def test_pytorch_pages_follow_the_manage_v2_template(fetcher: SnapshotFetcher, manifest: dict) -> None:
    for index, rel, entry in page_keys(manifest):
        if index != "pytorch" or entry["status"] != 200:
            continue
        text = body(fetcher, index, rel).decode()
        lines = text.split("\n")
        assert lines[:3] == ["<!DOCTYPE html>", "<html>", "  <body>"], rel
        assert lines[-3:-1] == ["  </body>", "</html>"] and re.fullmatch(r"<!--TIMESTAMP \d+-->", lines[-1]), rel
        assert "data-upload-time" not in text and "<head>" not in text
        if rel.endswith("cu130/"):
            assert all(re.fullmatch(r'    <a href="([a-z0-9-]+)/">\1</a><br/>', ln) for ln in lines[3:-3]), rel
            continue
        assert lines[3] == f"    <h1>Links for {rel.rstrip('/').rsplit('/', 1)[1]}</h1>"
        keys = []
        for ln in lines[4:-3]:
            m = _PT_ROW.fullmatch(ln)
            assert m, f"{rel}: {ln}"
            href = m["href"]
            assert "+" not in href and "%2B" in href and m["text"] == unquote(href.rsplit("/", 1)[1])
            assert m["d1"] == m["d2"]
            keys.append(unquote(urlsplit(href).path.lstrip("/")))
            assert ("#sha256=" in ln) == (not rel.startswith("nightly/")), ln  # never on nightly rows
        assert keys == sorted(keys), f"{rel}: rows not sorted by S3 key"


def test_flashinfer_package_pages_follow_update_whl_index(fetcher: SnapshotFetcher, manifest: dict) -> None:
    for index, rel, entry in page_keys(manifest):
        if index != "flashinfer" or entry["status"] != 200 or "torch2." in rel or rel in ("", "cu124/"):
            continue
        text = body(fetcher, index, rel).decode()
        assert text.endswith("</body>\n</html>\n")
        lines = text.split("\n")[:-1]
        kind = "Index of" if lines[2].startswith("<head><title>Index of") else "Links for"
        assert lines[:2] == ["<!DOCTYPE html>", "<html>"]
        anchors = lines[5:-2]
        assert anchors == sorted(anchors), rel
        for ln in anchors:
            if kind == "Index of":
                assert re.fullmatch(r'<a href="([^"/]+)/">\1/</a><br>', ln), ln
                continue
            m = re.fullmatch(r'<a href="(https://github\.com/flashinfer-ai/flashinfer/releases/download/[^/]+/([^/#]+))#sha256=[0-9a-f]{64}">\2</a><br>', ln)
            assert m, ln
            assert "%2B" not in ln


def test_flashinfer_release_pages_stop_at_0_6_5(fetcher: SnapshotFetcher, manifest: dict) -> None:
    for label in ("cu128", "cu129", "cu130"):
        jit = rows(fetcher, "flashinfer", f"{label}/flashinfer-jit-cache/")
        assert max(r.version for r in jit) == Version(f"0.6.5+{label}")
        for arch in ("x86_64", "aarch64"):
            assert f"flashinfer_jit_cache-0.6.5+{label}-cp39-abi3-manylinux_2_28_{arch}.whl" in {r.filename for r in jit}
        for row in jit:
            stored = snapshot_key(row.url, BASES) in manifest["metadata"]
            assert stored == (row.version >= Version("0.6.0")), row.filename
            if stored:
                meta = metadata(fetcher, row)
                assert (meta["name"], Version(meta["version"])) == ("flashinfer-jit-cache", row.version)
                assert meta["requires_python"] == ">=3.9" and "requires_dist" not in meta
    for package in ("flashinfer-python", "flashinfer-cubin"):
        assert max(r.version for r in rows(fetcher, "flashinfer", f"{package}/")) == Version("0.6.5")


def test_flashinfer_nightlies_share_dates_except_one_jit_cache_gap(fetcher: SnapshotFetcher, manifest: dict) -> None:
    def dates(path: str) -> set[str]:
        return {date_of(r) for r in rows(fetcher, "flashinfer", path)}

    python, cubin = dates("nightly/flashinfer-python/"), dates("nightly/flashinfer-cubin/")
    jit = dates("nightly/cu130/flashinfer-jit-cache/")
    assert python == cubin and python - jit == {"20260307"} and jit <= python
    assert max(python) == "20260307"
    newest = {r.filename for r in rows(fetcher, "flashinfer", "nightly/flashinfer-python/")}
    assert "flashinfer_python-0.6.6.dev20260307-py3-none-any.whl" in newest
    for row in rows(fetcher, "flashinfer", "nightly/flashinfer-python/"):
        assert row.href.split("/")[-2] == f"nightly-v{row.version.base_version}-{date_of(row)}"
        if snapshot_key(row.url, BASES) in manifest["metadata"]:
            reqs = {Requirement(r).name for r in metadata(fetcher, row)["requires_dist"]}
            assert {"torch", "apache-tvm-ffi", "nvidia-cutlass-dsl"} <= reqs


# -- the generator ------------------------------------------------------------------------------


def test_generator_is_byte_identical_on_rerun_and_keeps_other_indexes(tmp_path: Path) -> None:
    copy = tmp_path / "snap"
    shutil.copytree(SNAPSHOT, copy)
    data = json.loads((copy / "manifest.json").read_text())
    # what another recorder may have added: a PyPI page, and a stale entry of ours
    (copy / "pages/pypi/zz-recorded-later").mkdir(parents=True)
    (copy / "pages/pypi/zz-recorded-later/index.json").write_bytes(b'{"files":[]}')
    data["pages"]["pypi:zz-recorded-later/"] = {
        "status": 200,
        "content_type": "application/vnd.pypi.simple.v1+json",
        "file": "pages/pypi/zz-recorded-later/index.json",
    }
    (copy / "pages/pytorch/stale").mkdir()
    (copy / "pages/pytorch/stale/index.html").write_bytes(b"stale")
    data["pages"]["pytorch:stale/"] = {"status": 200, "content_type": "text/html", "file": "pages/pytorch/stale/index.html"}
    data["metadata"]["https://download-r2.pytorch.org/whl/old.whl"] = {"file": "metadata/_external/old.metadata", "sha256": "0" * 64}
    (copy / "metadata/_external/old.metadata").write_bytes(b"old")
    (copy / "manifest.json").write_text(json.dumps(data))
    readme = (copy / "README.md").read_text()
    (copy / "README.md").write_text(readme + "\n## PyPI part\n\nrecorded later\n")

    assert load_generator().main(["--output", str(copy)]) == 0

    merged = json.loads((copy / "manifest.json").read_text())
    assert merged["pages"]["pypi:zz-recorded-later/"]["file"] == "pages/pypi/zz-recorded-later/index.json"
    assert (copy / "pages/pypi/zz-recorded-later/index.json").read_bytes() == b'{"files":[]}'
    assert "pytorch:stale/" not in merged["pages"] and not (copy / "pages/pytorch/stale").exists()
    assert not (copy / "metadata/_external/old.metadata").exists()
    del merged["pages"]["pypi:zz-recorded-later/"]
    assert merged == json.loads((SNAPSHOT / "manifest.json").read_text())
    assert "## PyPI part\n\nrecorded later\n" in (copy / "README.md").read_text()
    for path in SNAPSHOT.rglob("*"):
        if path.is_file() and path.name not in ("manifest.json", "README.md"):
            assert (copy / path.relative_to(SNAPSHOT)).read_bytes() == path.read_bytes(), path


def test_snapshot_stays_small() -> None:
    # ~3 MB reconstructed + ~10 MB of PyPI pages recorded as served: a guard against a runaway recording
    total = sum(p.stat().st_size for p in SNAPSHOT.rglob("*") if p.is_file())
    assert total < 20_000_000


# -- through the project's own parser, when it is there ------------------------------------------


def test_parse_page_reads_every_page_without_warnings(fetcher: SnapshotFetcher, manifest: dict) -> None:
    parse = pytest.importorskip("resolve_gpu_stack.index.parse")
    for index, rel, entry in page_keys(manifest):
        if entry["status"] != 200:
            continue
        url = BASES[index] + rel
        page = fetcher.fetch_pages([url], index=DEFS.indexes[index])[url].page
        parsed = parse.parse_page(page, index=index)
        assert not parsed.warnings, (url, parsed.warnings[:3])
        ours = [r for r in rows(fetcher, index, rel) if r.filename.endswith(".whl")]
        assert [f.url for f in parsed.files] == [r.url for r in ours]
        for f, r in zip(parsed.files, ours):
            assert f.metadata_sha256 == r.metadata_digest
            assert f.sha256 == (r.fragment.split("=", 1)[1] if r.fragment else None)
