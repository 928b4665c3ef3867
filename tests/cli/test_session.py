"""Issue 31: one ``Session`` per command, typed from the root.

``inspect NAME==VERSION`` gives the same verdict through every kind of source a command can read
through (``net.source.Source``): the live loopback indexes, a snapshot's replay, a snapshot with
``--live-fallback`` fetching what it lacks, and a recording; the README's ``inspect`` of a kept
snapshot gives a verdict (it used to end in a traceback). A command opens one connection pool:
``lock --build`` (a resolve, the build environment's resolve, the downloads) makes one.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from support.abi_world import NIGHTLY, build_abi_world, have_cxx
from support.doors import index_flags, run_cli
from support.output_schemas import validate
from support.paths import REPO
from support.server import IndexServer

from resolve_gpu_stack.cli.assemble import NetworkOptions, Session
from resolve_gpu_stack.data.definitions import RouteContext, load_definitions
from resolve_gpu_stack.model.declared import declared_target
from resolve_gpu_stack.net import client
from resolve_gpu_stack.net.http import HttpFetcher
from resolve_gpu_stack.net.snapshot import FallbackFetcher, RecordingFetcher, SnapshotFetcher

DECLARED = ["--python", "3.12", "--platform", "x86_64-manylinux_2_28", "--installed", f"torch=={NIGHTLY}"]
EXPECTED = {"stable-ext": ("stable", True), "locked-ok": ("locked", True), "locked-bad": ("locked", False), "stable-cu12": ("stable", False)}
needs_cxx = pytest.mark.skipif(not have_cxx(), reason="needs a C++ compiler to build the shared objects")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("session")
    world, _ = build_abi_world(root)
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        yield world, srv


def inspect_verdict(capsys: pytest.CaptureFixture[str], name: str, *flags: str) -> tuple[str | None, bool]:
    code, out, err = run_cli(capsys, "inspect", f"{name}==1.0", *DECLARED, *flags, "--format", "json")
    assert "Traceback" not in err, err
    report = json.loads(out)
    verdict = (report["verdict"]["abi"], report["verdict"]["runs"])
    assert code == (0 if verdict[1] else 1), err
    return verdict


@needs_cxx
def test_inspect_gives_the_same_verdict_live_from_a_snapshot_and_with_live_fallback(served, capsys, tmp_path):
    world, srv = served
    live = [*index_flags(srv.url), "--cache-dir", str(tmp_path / "c")]
    assert {n: inspect_verdict(capsys, n, *live) for n in EXPECTED} == EXPECTED
    snap = tmp_path / "snap"
    recorded = ("stable-ext", "locked-ok")
    withs = [w for n in recorded for w in ("--with", n)]
    code, _, err = run_cli(capsys, "snapshot", "--output", str(snap), *DECLARED, "--flashinfer", "none", *withs, *live, "--format", "json")
    assert code == 0, err
    before = len(srv.log)
    replayed = [*index_flags(srv.url), "--snapshot", str(snap), "--cache-dir", str(tmp_path / "c2")]
    assert {n: inspect_verdict(capsys, n, *replayed) for n in recorded} == {n: EXPECTED[n] for n in recorded}
    assert len(srv.log) == before  # the scans and the torch's exports came from the snapshot
    # a package the snapshot lacks: a miss said as one, no traceback; fetched live with --live-fallback
    code, _, err = run_cli(capsys, "inspect", "locked-bad==1.0", *DECLARED, *replayed, "--format", "json")
    assert code != 0 and "not in snapshot" in err and "Traceback" not in err
    assert inspect_verdict(capsys, "locked-bad", *replayed, "--live-fallback") == EXPECTED["locked-bad"]
    assert len(srv.log) > before


@needs_cxx
def test_inspect_through_a_recording_judges_as_live(served, tmp_path):
    """A recorder (what ``snapshot`` reads through) hands out its live source's classifier: its
    ``inspect`` gives the live verdict, and what the resolve around it read is recorded."""
    world, srv = served
    defs = load_definitions().with_index_urls(world.index_urls(srv.url))
    target = declared_target("3.12", "x86_64-manylinux_2_28", (f"torch=={NIGHTLY}",))
    with Session(NetworkOptions(cache_dir=tmp_path / "c")) as session:
        recorder = session.recording(defs, tmp_path / "rec")
        with session.resolve_parts(defs, source=recorder) as parts:
            for name, (kind, runs) in EXPECTED.items():
                [file] = [o.file for o in parts.finder.offers(name, RouteContext())[0] if str(o.file.version) == "1.0"][:1]
                record, scan = parts.classifier.inspect(file)
                assert scan is not None and record.abi.kind != "unknown" and parts.classifier(file) == record.abi  # judged as inspected
                verdict = parts.judge(name, record.abi, (), parts.kept_torch(target), target)
                assert verdict is not None and (verdict.kind.value if verdict.kind else None, verdict.runs) == (kind, runs), name
    manifest = json.loads((tmp_path / "rec" / "manifest.json").read_text())
    assert any(key.startswith("pypi:locked-bad/") for key in manifest["pages"])
    # the recorder is told what the scan read: each wheel's scan, and the kept torch's exports the locked ones were judged on
    assert len(manifest["scans"]) == len(EXPECTED) and all(entry["kind"] != "unknown" for entry in manifest["scans"].values())
    assert [entry["symbols"] > 0 for entry in manifest["exports"].values()] == [True]


SCAN_PARTS = {"RangeClassifier", "ReplayClassifier", "WheelExports", "ReplayExports"}


def made_in(path: Path) -> set[str]:
    """The scan parts a module constructs (a call of the class by its name)."""
    calls = (node.func for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Call))
    return {func.id for func in calls if isinstance(func, ast.Name) and func.id in SCAN_PARTS}


def test_sources_offer_scan_access_and_one_place_makes_the_classifier_and_exports_reader():
    """Issue 51: no source makes a classifier or an exports reader; each says what a scan reads
    through (``scan_access``), and ``net/scan/readers.py`` alone makes both from that (the range
    child makes its live pair in its own process)."""
    src = REPO / "src" / "resolve_gpu_stack"
    makers = {str(p.relative_to(src)): found for p in sorted(src.rglob("*.py")) if (found := made_in(p))}
    assert makers == {"net/scan/rangechild.py": {"RangeClassifier", "WheelExports"}, "net/scan/readers.py": SCAN_PARTS}
    for kind in (HttpFetcher, SnapshotFetcher, FallbackFetcher, RecordingFetcher):
        assert callable(kind.scan_access) and not {"classifier", "exports_reader"} & set(dir(kind)), kind.__name__


def test_the_readmes_inspect_of_a_kept_snapshot_gives_a_verdict(capsys):
    """The README's ``inspect sgl-kernel==0.3.21`` on the 2026-03-07 snapshot: a verdict (its CUDA 12
    build cannot run on the cu130 nightly), read from the snapshot's recorded scan, no traceback."""
    snapshot = REPO / "indexes" / "snapshots" / "2026-03-07"
    argv = ["inspect", "sgl-kernel==0.3.21", "--python", "3.12", "--platform", "x86_64-manylinux_2_28"]
    code, out, err = run_cli(capsys, *argv, "--installed", "torch==2.12.0.dev20260307+cu130", "--snapshot", str(snapshot), "--format", "json")
    assert code == 1, err
    report = json.loads(out)
    validate(report)
    assert report["kind"] == "torch" and report["bytes_read"] > 0
    assert report["verdict"]["runs"] is False and "needs CUDA 12" in report["verdict"]["refusal"]
    # the members as the snapshot recorded them: the torch-linked ones, each with its CUDA 12 and its C++ imports
    members = {m["name"]: m for m in report["members"]}
    assert "sgl_kernel/flash_ops.abi3.so" in members and all(m["cuda_majors"] == [12] and m["cxx_imports"] > 0 for m in members.values())


class CountedClient(client.Client):
    """The real connection pool, counted as it is made."""

    made = 0

    def __init__(self, *args: object, **kwargs: object) -> None:
        CountedClient.made += 1
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]


@pytest.mark.slow
def test_lock_with_a_build_opens_one_connection_pool(tmp_path, uv_env, capsys, monkeypatch):
    """``lock --build``: the plan's resolve, the build environment's resolve, the kept torch's and
    the sdist's downloads all go through the command's one pool (they were three)."""
    from support.build_world import NIGHTLY as BUILD_NIGHTLY
    from support.build_world import PYTHON, build_world, extension_sdist
    from support.build_world import have_cxx as build_cxx
    from support.building import HERE, UV
    from support.doors import index_flags

    if not (build_cxx() and Path(UV).exists()):
        pytest.skip("needs g++ and uv")
    from resolve_gpu_stack.net import transport

    monkeypatch.setattr(transport, "Client", CountedClient)
    CountedClient.made = 0
    sdist = extension_sdist(tmp_path / "sdists")
    world = build_world(tmp_path, sdists=(sdist,))
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        declared = ["--python", PYTHON, "--platform", HERE, "--installed", f"torch=={BUILD_NIGHTLY}"]
        lock = tmp_path / "pylock.node.toml"
        argv = ["lock", *declared, "--with", sdist.name, "--build", sdist.name, *index_flags(srv.url), "--flashinfer", "none"]
        code, _, err = run_cli(capsys, *argv, "--cache-dir", str(tmp_path / "c"), "-o", str(lock))
        assert code == 0, err
        downloads = [p for m, p, _ in srv.log if m == "GET" and p.endswith((".whl", ".tar.gz")) and "Range" not in p]
    assert downloads and CountedClient.made == 1
