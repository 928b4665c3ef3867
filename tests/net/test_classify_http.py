"""The wheel classifier over HTTP (net/scan/classify.py): range reads of real wheels with ELF members on
a loopback server, the cache by sha256, the byte budget, a range-ignoring server, snapshot record and
replay of scans, and the CLI path (flags, plan JSON, the table) end to end."""

from __future__ import annotations

import json

import pytest
from packaging.utils import canonicalize_name
from packaging.version import Version
from support.elfbuild import have_cc
from support.framework_world import build_framework_world
from support.server import IndexServer

from resolve_gpu_stack.cli.app import main
from resolve_gpu_stack.data.definitions import load_definitions
from resolve_gpu_stack.model import IndexFile
from resolve_gpu_stack.model.abi import WheelAbi
from resolve_gpu_stack.net.cache import HttpCache
from resolve_gpu_stack.net.http import HttpFetcher
from resolve_gpu_stack.net.metadata import TailMemo
from resolve_gpu_stack.net.scan import readers
from resolve_gpu_stack.net.scan.classify import RECORDED_SCHEMAS, SCAN_SCHEMA, RangeClassifier, ReplayClassifier, ScanRecord, budget, scan_key
from resolve_gpu_stack.net.settings import FetchSettings, TransportSettings
from resolve_gpu_stack.net.snapshot import RecordingFetcher, SnapshotFetcher
from resolve_gpu_stack.urls import without_fragment

pytestmark = pytest.mark.skipif(not have_cc(), reason="needs a C compiler to build the ELF objects")

NIGHTLY = "2.12.0.dev20260307+cu130"
DEFS = load_definitions()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory):
    return build_framework_world(tmp_path_factory.mktemp("fwhttp"))


@pytest.fixture
def server(world):
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        yield srv


def wheel_file(world, srv, name: str, *, hashed: bool = True) -> IndexFile:
    entry = next(e for e in world.pages[f"simple/{name}/"])
    w = entry.wheel
    return IndexFile(
        filename=w.filename,
        url=srv.url + entry.rel_path,
        name=canonicalize_name(name),
        version=Version(w.filename.split("-")[1]),
        sha256=w.sha256 if hashed else None,
        size=w.size,
        index="pypi",
    )


def test_range_reads_classify_torch_abi_and_cuda_wheels(world, server, tmp_path):
    fetcher = HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=HttpCache(tmp_path / "cache"))
    try:
        classify = RangeClassifier(fetcher.transport, fetcher.cache, DEFS.abi)
        kernel = wheel_file(world, server, "sgl-kernel")
        found = classify(kernel)
        assert found.kind == "torch" and found.members[0].name == "sgl_kernel/common_ops.abi3.so" and found.cxx  # version-locked: C++ imports
        assert "link torch" in found.why and "C++ torch symbol" in found.why
        helper = classify(wheel_file(world, server, "cuda-helper"))
        assert helper.kind == "cuda" and helper.cuda_majors == (13,) and "libcudart.so.13" in helper.why
        stats = classify.stats
        assert stats.wheels == 2 and stats.cached == 0 and stats.bytes_read > 0
        # cached by sha256: a new classifier over the same cache makes no request
        before = fetcher.stats.requests
        again = RangeClassifier(fetcher.transport, fetcher.cache, DEFS.abi)
        assert again(kernel) == found
        assert fetcher.stats.requests == before and again.stats.cached == 1
        assert (tmp_path / "cache" / "scans-v1").is_dir()
    finally:
        fetcher.close()


def test_a_scan_starts_from_the_tail_read_for_metadata(world, server):
    """The METADATA range read's tail is the scan's first read: no second tail request, same answer."""
    fetcher = HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None)
    try:
        kernel = wheel_file(world, server, "sgl-kernel")
        fetcher.fetch_metadata([kernel])
        asked = len(server.requests_for(kernel.url.removeprefix(server.url.rstrip("/"))))
        found = readers.classifier(fetcher.scan_access(), DEFS.abi)(kernel)
        tails = [h for _, _, h in server.requests_for(kernel.url.removeprefix(server.url.rstrip("/"))) if h.get("Range", "").startswith("bytes=-")]
        assert len(tails) == 1, "the scan asked for the tail again"
        fresh = HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None)
        try:
            assert RangeClassifier(fresh.transport, None, DEFS.abi)(kernel) == found
        finally:
            fresh.close()
        assert found.kind == "torch" and asked >= 1
        assert fetcher.tails.get(without_fragment(kernel.url)) is not None
    finally:
        fetcher.close()


def test_tail_memo_keeps_the_newest_tails_within_its_bytes():
    memo = TailMemo(max_bytes=10)
    memo.put("a", 0, b"1234", 4)
    memo.put("b", 0, b"5678", 4)
    memo.put("c", 0, b"9999", 4)
    assert memo.get("a") is None and memo.get("b") == (0, b"5678", 4) and memo.get("c") == (0, b"9999", 4)
    memo.put("huge", 0, b"x" * 11, 11)
    assert memo.get("huge") is None and memo.get("c") is not None


def test_bytes_read_counts_every_byte_received_headers_included(world, server):
    """Before: only the bodies were counted (4-48% under what crossed the wire)."""
    fetcher = HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None)
    try:
        classify = RangeClassifier(fetcher.transport, None, DEFS.abi)
        record = classify.scan(wheel_file(world, server, "sgl-kernel"))
        body = server.bytes_sent
        status = len("HTTP/1.1 206 Partial Content\r\n\r\n")
        assert record.reads >= 1 and record.bytes_read >= body + record.reads * (status + len("Content-Range: bytes 0-0/0\r\n"))
        assert classify.stats.bytes_read == record.bytes_read
    finally:
        fetcher.close()


def test_the_budget_stops_a_scan_and_says_so(world, server):
    fetcher = HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None)
    try:
        classify = RangeClassifier(fetcher.transport, None, DEFS.abi, budget=lambda size: 100)
        found = classify(wheel_file(world, server, "sgl-kernel"))
        assert found.kind == "unknown" and "budget" in found.why
    finally:
        fetcher.close()


def test_budget_is_a_share_of_the_wheel_with_a_floor_and_a_cap():
    assert budget(500 * 2**20) == int(500 * 2**20 * 0.02)
    assert budget(10 * 2**30) == 16 * 2**20
    assert budget(1000) == 4 * 2**20 and budget(50 * 2**20) == 4 * 2**20


def test_a_range_ignoring_server_is_not_downloaded_and_not_cached(world, server, tmp_path):
    server.ignore_ranges = True
    fetcher = HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=HttpCache(tmp_path / "cache"))
    said: list[str] = []
    try:
        classify = RangeClassifier(fetcher.transport, fetcher.cache, DEFS.abi, say=said.append)
        found = classify(wheel_file(world, server, "sgl-kernel"))
        assert found.kind == "unknown" and "ignored Range" in found.why
        assert any("ignored Range" in s for s in said)
        assert not (tmp_path / "cache" / "scans-v1").exists()
    finally:
        fetcher.close()


def test_scan_key_is_the_sha256_else_url_and_size(world, server):
    hashed = wheel_file(world, server, "sgl-kernel")
    assert scan_key(hashed) == f"sha256={hashed.sha256}"
    bare = wheel_file(world, server, "sgl-kernel", hashed=False)
    assert scan_key(bare).startswith("url=http://") and scan_key(bare).endswith(f"size={bare.size}")


def test_snapshot_records_scans_and_replays_them_offline(world, server, tmp_path):
    bases = world.index_urls(server.url)
    recorder = RecordingFetcher(HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None), tmp_path / "snap", bases)
    classify = readers.classifier(recorder.scan_access(), DEFS.abi)
    kernel = wheel_file(world, server, "sgl-kernel")
    live = classify(kernel)
    recorder.close()
    manifest = json.loads((tmp_path / "snap" / "manifest.json").read_text())
    recorded = manifest["scans"][f"sha256={kernel.sha256}"]
    assert recorded["kind"] == "torch" and recorded["schema"] == SCAN_SCHEMA and recorded["members"][0]["cxx"]
    replay = readers.classifier(SnapshotFetcher(tmp_path / "snap", bases).scan_access(), DEFS.abi)
    assert isinstance(replay, ReplayClassifier)
    assert replay(kernel) == live
    # a wheel the snapshot has no scan of: a note, not a crash
    missing = replay(wheel_file(world, server, "cuda-helper"))
    assert missing.kind == "unknown" and "not in snapshot" in missing.why
    # a scan recorded before imports were read (schema 1) is unknown too, never agnostic
    manifest["scans"][f"sha256={kernel.sha256}"] = {"kind": "agnostic", "evidence": "old"}
    (tmp_path / "snap" / "manifest.json").write_text(json.dumps(manifest))
    old = readers.classifier(SnapshotFetcher(tmp_path / "snap", bases).scan_access(), DEFS.abi)(kernel)
    assert old.kind == "unknown" and "re-record" in old.why


def cli(capsys, world, srv, *argv: str) -> tuple[int, str, str]:
    urls = world.index_urls(srv.url)
    code = main(
        [
            "resolve",
            "--python",
            "3.12",
            "--installed",
            f"torch=={NIGHTLY}",
            *[w for n, u in urls.items() for w in ("--index", f"{n}={u}")],
            "--cache-dir",
            str(srv.root.parent / "cli-cache"),
            *argv,
        ]
    )
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_live_run_scans_and_refuses_the_libtorch_companion(capsys, world, server):
    code, _, err = cli(capsys, world, server, "--with", "sglang", "--format", "json")
    assert code == 1
    assert "sgl-kernel" in err and "C++ symbols of torch" in err and "exports" in err and "--without sgl-kernel" in err


def test_cli_without_and_overrides_in_the_plan_json(capsys, world, server):
    code, out, err = cli(capsys, world, server, "--with", "sglang", "--without", "sgl-kernel", "--format", "json")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["schema"] == "resolve-gpu-stack/plan/v1"
    by_name = {p["name"]: p for p in plan["packages"]}
    assert by_name["sglang"]["version"] == "0.5.9" and "sgl-kernel" not in by_name
    assert {"package": "sglang", "requirement": "torch==2.9.1", "replaced_by": f"torch=={NIGHTLY}"}.items() <= next(
        o for o in plan["overrides"] if o["requirement"] == "torch==2.9.1"
    ).items()
    assert by_name["cuda-helper"]["coupling"] == "cuda"  # scanned over HTTP by the CLI's classifier
    assert all("built_for" in p and p["abi_mismatch"] is False for p in plan["packages"])


def test_cli_abi_mismatch_warn_flags_the_package_in_json_and_table(capsys, world, server):
    code, out, err = cli(capsys, world, server, "--with", "sglang", "--abi-mismatch", "warn", "--format", "json")
    assert code == 0, err
    kernel = next(p for p in json.loads(out)["packages"] if p["name"] == "sgl-kernel")
    assert kernel["abi_mismatch"] is True and kernel["coupling"] == "torch-abi"
    code, out, _ = cli(capsys, world, server, "--with", "sglang", "--abi-mismatch", "warn", "--format", "table")
    assert code == 0
    assert "ABI MISMATCH" in out and "Overrides" in out and "sglang: torch==2.9.1 -> torch==" in out


def test_overrides_file_joins_override_flags(capsys, world, server, tmp_path):
    file = tmp_path / "overrides.txt"
    file.write_text("# pins the user decides\nnumpy==2.2.0  # a comment\n\n")
    code, out, err = cli(capsys, world, server, "--with", "sglang", "--without", "sgl-kernel", "--overrides", str(file), "--format", "json")
    assert code == 0, err
    plan = json.loads(out)
    assert {"package": "sglang", "requirement": "numpy", "replaced_by": "numpy==2.2.0", "reason": "--override"} in plan["overrides"]
    assert next(p["version"] for p in plan["packages"] if p["name"] == "numpy") == "2.2.0"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--abi-mismatch", "maybe"], "--abi-mismatch 'maybe' is not one of error, warn"),
        (["--override", "torch @ https://x.example/t.whl"], "direct URLs are not supported"),
        (["--overrides", "/nonexistent/overrides.txt"], "cannot read /nonexistent/overrides.txt"),
        (["--without", "sgl-kernel>=1"], "is not a package name"),
    ],
)
def test_framework_flag_usage_errors(capsys, world, server, argv, message):
    code, _, err = cli(capsys, world, server, *argv)
    assert code == 2 and message in err


def test_settings_rows_build_the_request(tmp_path):
    from resolve_gpu_stack.cli import settings as S
    from resolve_gpu_stack.model.declared import declared_target

    file = tmp_path / "o.txt"
    file.write_text("torchaudio==2.11.0\n")
    values = {
        **S.defaults(),
        **S.parse({"overrides": ("numpy<3",), "overrides_file": str(file), "without": ("sgl-kernel",), "auto_torch_override": False, "abi_mismatch": "warn"}),
    }
    req = S.build_request(values, target=declared_target("3.12", "x86_64-manylinux_2_28", [f"torch=={NIGHTLY}"]))
    assert req.overrides == ("numpy<3", "torchaudio==2.11.0")
    assert req.without == ("sgl-kernel",) and req.auto_torch_override is False and req.abi_mismatch == "warn"
    assert S.BY_KEY["overrides-file"].on_request and S.BY_KEY["abi-mismatch"].on_request


def test_file_cut_keeps_what_could_serve_the_recorded_targets():
    from resolve_gpu_stack.net.snapshot import FileCut, cut_to_targets

    cut = FileCut(frozenset({"3.12"}), frozenset({"x86_64"}))
    keep = [
        "x-1.0.tar.gz",
        "x-1.0-py3-none-any.whl",
        "x-1.0-py37-none-any.whl",
        "x-1.0-py2.py3-none-any.whl",
        "x-1.0-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        "x-1.0-cp39-abi3-manylinux_2_28_x86_64.whl",
    ]
    drop = [
        "x-1.0-cp312-cp312-win_amd64.whl",
        "x-1.0-cp312-cp312-macosx_11_0_arm64.whl",
        "x-1.0-cp312-cp312-musllinux_1_2_x86_64.whl",
        "x-1.0-cp311-cp311-manylinux_2_28_x86_64.whl",
        "x-1.0-cp312-cp312-manylinux_2_28_aarch64.whl",
        "x-1.0-py313-none-any.whl",
    ]
    assert [f for f in keep + drop if cut.keeps(f)] == keep
    page = json.dumps({"files": [{"filename": f} for f in keep + drop] + [{"filename": "x-2.0-cp312-cp312-win_amd64.whl"}], "versions": ["1.0", "2.0"]})
    cut_page = json.loads(cut_to_targets(page.encode(), "application/vnd.pypi.simple.v1+json", cut))
    assert [f["filename"] for f in cut_page["files"]] == keep and cut_page["versions"] == ["1.0"]
    assert cut.merged(FileCut(frozenset({"3.11"}), frozenset({"aarch64"}))).to_dict() == {"pythons": ["3.11", "3.12"], "machines": ["aarch64", "x86_64"]}


def test_a_scan_made_before_the_structural_reader_is_scanned_again_but_a_snapshots_replays():
    """The cache drops a schema-2 scan (its reader took "no torch in the first bytes" for an
    answer: an agnostic that may be wrong); a snapshot's schema-2 records replay as recorded."""
    old = {"schema": 2, **WheelAbi(kind="none", why="2 shared object(s) need neither torch nor CUDA libraries").to_dict()}
    assert ScanRecord.from_dict(old) is None
    replayed = ScanRecord.from_dict(old, RECORDED_SCHEMAS)
    assert replayed is not None and replayed.abi.kind == "none"


def test_a_scan_cached_before_guesses_were_marked_is_scanned_again_but_a_snapshots_replays_as_it_did() -> None:
    """Scan schema 4 wrote a guess from the names in first bytes without ``read = names``: the
    cache drops such an entry (scanned again); a snapshot's schema-4 scans replay as they always
    have (read from the start), the older readers' (2, 3) as recorded."""
    old = {"schema": 4, **WheelAbi(kind="none", why="1 of 1 shared object(s) not read to their dynamic section").to_dict()}
    assert SCAN_SCHEMA == 5 and "read" not in old
    assert ScanRecord.from_dict(old) is None
    replayed = ScanRecord.from_dict(old, RECORDED_SCHEMAS)
    assert replayed is not None and replayed.abi.read == "start"
    assert [r.abi.read for r in (ScanRecord.from_dict({**old, "schema": n}, RECORDED_SCHEMAS) for n in (2, 3)) if r is not None] == ["recorded"] * 2
    current = ScanRecord(abi=WheelAbi(kind="none", why="guess", read="names")).to_dict()
    back = ScanRecord.from_dict(current)
    assert current["schema"] == SCAN_SCHEMA and back is not None and back.abi.read == "names"
