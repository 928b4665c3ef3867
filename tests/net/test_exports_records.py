"""Issue 53 item 2 for torch itself: a torch wheel's exports are a record keyed by its sha256.

A version-locked wheel's verdict needs the kept torch's exports. Without a record they are read
from torch's wheel by range requests (17 MB of PyPI's torch 2.15.0); an ``exports-record/v1``
file of that wheel's sha256 (``net/scan/records.py``: shipped in ``indexes/records/``, on a
``--scan-records`` URL, in a wheelhouse's ``records/``) answers instead. A full record answers for
every name; a partial one (what the tool ships) only for the names it lists, and a verdict asking
about another name reads the wheel as before. A record of another sha256, or a malformed one, is
passed over: the wheel is read. Counted on the loopback server: the range requests to torch's wheel.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from pathlib import Path
from urllib.parse import quote

import pytest
import tomllib
from support.abi_doors import DECLARED, installed_names, venv_with_the_kept_torch, withs
from support.abi_world import ASSERT_FAIL, CHECK_FAIL, NIGHTLY, build_abi_world, have_cxx
from support.doors import index_flags, run_cli
from support.output_schemas import validate
from support.server import IndexServer

from resolve_gpu_stack.env.confirm import wheel_exports
from resolve_gpu_stack.net.scan.records import (
    EXPORTS_SCHEMA,
    EXPORTS_SUFFIX,
    INDEX_NAME,
    INDEX_SCHEMA,
    ScanRecords,
    exports_document,
    exports_record_name,
    exports_text,
    folder_index,
    parse_exports,
    parse_index_all,
    parse_record,
    shipped_folder,
)
from resolve_gpu_stack.rules.abi import TorchExports

needs_cxx = pytest.mark.skipif(not have_cxx(), reason="needs a C++ compiler to build the shared objects")

SHA = "ab" * 32
NAMES = frozenset({"_ZN3c104HalfC1Ef", "_ZN2at4_ops5empty4callEv", "THPVariableClass"})


# -- the record ---------------------------------------------------------------------------------------


def test_a_full_and_a_partial_record_match_their_schema_and_read_back() -> None:
    full = exports_document(SHA, "torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl", 10, NAMES)
    validate(full)
    assert full["schema"] == EXPORTS_SCHEMA and full["count"] == 3 and exports_record_name(SHA) == SHA + EXPORTS_SUFFIX
    record, why = parse_exports(SHA.upper(), json.dumps(full).encode())
    assert record is not None and why == "" and record.symbols == NAMES and record.universe is None
    universe = frozenset({"_ZN3c104HalfC1Ef", "_ZN3c10missingEv"})
    partial = json.loads(exports_text(SHA, None, 10, NAMES, universe=universe))
    validate(partial)
    assert partial["answers-for"] == sorted(universe) and partial["missing"] == ["_ZN3c10missingEv"] and partial["count"] == 3
    record, why = parse_exports(SHA, json.dumps(partial).encode())
    assert record is not None and record.symbols == {"_ZN3c104HalfC1Ef"} and record.universe == universe, why


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        (lambda d: d.update(sha256="cd" * 32), "another sha256"),
        (lambda d: d.update(schema="resolve-gpu-stack/scan-record/v1"), "not a resolve-gpu-stack/exports-record/v1 record"),
        (lambda d: d.update(exports="not base64!"), "not deflated names"),
        (lambda d: d.update(exports="aGVsbG8="), "not deflated names"),  # base64 of b"hello": not deflated
        (lambda d: (d.pop("exports"), d.update({"answers-for": ["a"], "missing": ["b"]})), "does not answer for"),
        (lambda d: (d.pop("exports"), d.update({"answers-for": "a", "missing": []})), "neither its exports"),
        (lambda d: (d.pop("exports"), d.update({"answers-for": [1], "missing": []})), "neither its exports"),
    ],
)
def test_a_record_of_another_sha256_or_malformed_is_not_used(edit, why: str) -> None:  # type: ignore[no-untyped-def]
    doc = exports_document(SHA, "torch.whl", 10, NAMES)
    edit(doc)
    record, said = parse_exports(SHA, json.dumps(doc).encode())
    assert record is None and why in said, said
    assert parse_exports(SHA, b"<html>login</html>") == (None, "not JSON")
    assert parse_exports(SHA, b"[" * 100_000) == parse_record(SHA, b"[" * 100_000) == (None, "not JSON")  # nesting past the decoder's depth
    with pytest.raises(ValueError):
        exports_document("not a sha", "torch.whl", 1, NAMES)


def test_a_partial_answer_answers_only_for_its_names_and_reads_the_wheel_for_others() -> None:
    """``TorchExports.covering``: the partial answer for names it holds; for any other name, the
    wider answer (the wheel read once), or, with none to be had, not known (never a guess)."""
    reads: list[int] = []

    def wider() -> TorchExports:
        reads.append(1)
        return TorchExports(version="2.15.0", symbols=NAMES | {"_ZN3c10otherEv"}, source="the wheel")

    partial = TorchExports(
        version="2.15.0", symbols=frozenset({"_ZN3c104HalfC1Ef"}), source="record", universe=frozenset({"_ZN3c104HalfC1Ef", "_ZN3c10goneEv"}), wider=wider
    )
    assert partial.covering(["_ZN3c104HalfC1Ef", "_ZN3c10goneEv"]) is partial and reads == []
    assert partial.missing(["_ZN3c104HalfC1Ef", "_ZN3c10goneEv"]) == ("_ZN3c10goneEv",)
    assert partial.missing(["_ZN3c10otherEv"]) == ("_ZN3c10otherEv",)  # not answered for: never said to be exported
    full = partial.covering(["_ZN3c10otherEv"])
    assert reads == [1] and full.missing(["_ZN3c10otherEv"]) == ()
    alone = TorchExports(version="2.15.0", symbols=frozenset(), source="record", universe=frozenset({"x"}))
    assert alone.covering(["y"]).symbols is None and "answers only for 1 names" in alone.covering(["y"]).source


def test_the_shipped_exports_records_are_partial_records_of_pypi_torch_and_small() -> None:
    """What the tool ships for PyPI's torch 2.15.0 (``indexes/scan_records.py --torch``): one record
    per Linux build (x86_64 and aarch64, every CPython), each the answer for the C++ torch imports
    of the shipped scan records."""
    folder = shipped_folder()
    assert folder is not None
    files = sorted(folder.glob("*" + EXPORTS_SUFFIX))
    assert len(files) >= 6, files
    names = set()  # the C++ torch imports of the shipped scan records
    for path in folder.glob("*.json"):
        scan = parse_record(path.name.removesuffix(".json"), path.read_bytes())[0] if not path.name.endswith(EXPORTS_SUFFIX) else None
        names |= {s for m in (scan.abi.members if scan is not None else ()) if m.links_torch for s in m.cxx}
    assert len(names) > 100
    for path in files:
        doc = json.loads(path.read_text())
        validate(doc)
        assert path.name == exports_record_name(doc["sha256"]) and doc["filename"].startswith("torch-2.15.0-")
        record, why = parse_exports(doc["sha256"], path.read_bytes())
        assert record is not None and record.universe == names, why
        assert path.stat().st_size < 32 * 1024 and doc["count"] > (100_000 if doc["filename"].endswith("_x86_64.whl") else 70_000)
    arches = [json.loads(p.read_text())["filename"].endswith("_x86_64.whl") for p in files]
    assert arches.count(False) >= 6 and arches.count(True) >= 6, arches  # the aarch64 builds too: their program headers are read where BOLT moved them
    lookup = ScanRecords(folders=(folder,))
    sha = files[0].name.removesuffix(EXPORTS_SUFFIX)
    assert lookup.exports(sha) is not None and lookup.exports("00" * 32) is None and lookup(sha) is None


def test_a_records_folder_index_holds_its_exports_records(tmp_path: Path) -> None:
    (tmp_path / exports_record_name(SHA)).write_text(exports_text(SHA, "torch.whl", 10, NAMES))
    bad = exports_document("cd" * 32, "torch.whl", 10, NAMES)
    (tmp_path / exports_record_name("ef" * 32)).write_text(json.dumps(bad))  # filed under another sha256: left out
    text, count = folder_index(tmp_path)
    index = json.loads(text)
    validate(index)
    assert count == 1 and [d["sha256"] for d in index["exports"]] == [SHA] and index["records"] == []
    scans, exports, why = parse_index_all(text.encode())
    assert scans == {} and set(exports) == {SHA} and exports[SHA].symbols == NAMES and why == ""


# -- the doors, on the loopback world --------------------------------------------------------------------


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The abi world served, and its kept torch's wheel: path, sha256, full exports."""
    if not have_cxx():
        pytest.skip("needs a C++ compiler")
    root = tmp_path_factory.mktemp("exportsrecords")
    w, _ = build_abi_world(root)
    [torch] = [e.wheel.path for e in w.pages["whl/nightly/cu130/torch/"] if NIGHTLY in e.wheel.filename]
    symbols = wheel_exports(torch, NIGHTLY).symbols
    assert symbols and CHECK_FAIL in symbols and ASSERT_FAIL not in symbols
    sha = hashlib.sha256(torch.read_bytes()).hexdigest()
    with IndexServer(w.root) as srv:
        w.write(srv.url)
        page = w.root / "whl/nightly/cu130/torch/index.html"  # its sha256 on the page, as the PyTorch index's stable pages give it
        href = quote(torch.name)
        assert href + '"' in page.read_text()
        page.write_text(page.read_text().replace(href + '"', f'{href}#sha256={sha}"'))
        yield srv, torch, sha, symbols


def _torch_ranges(srv: IndexServer, torch: Path) -> list[str]:
    """Every request for a byte of torch's wheel (its METADATA is its own file, beside it)."""
    return [path for _, path, _ in srv.log if path.endswith((quote(torch.name), torch.name))]


def _records(tmp_path: Path, name: str, docs: dict[str, str]) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    for leaf, text in docs.items():
        (folder / leaf).write_text(text)
    return folder


def _verdict(out: str, name: str) -> dict:  # type: ignore[type-arg]
    return next(p for p in json.loads(out)["packages"] if p["name"] == name)["abi"]


@needs_cxx
def test_resolve_and_lock_judge_from_an_exports_record_without_reading_torch(world, capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    srv, torch, sha, symbols = world
    flags = [*DECLARED, *index_flags(srv.url), *withs("locked-ok"), "--format", "json"]
    # without a record: torch's libraries are read by range
    srv.log.clear()
    code, out, err = run_cli(capsys, "resolve", *flags, "--cache-dir", str(tmp_path / "a"))
    assert code == 0, err
    assert _torch_ranges(srv, torch), "the kept torch's exports are read from its wheel without a record"
    read = _verdict(out, "locked-ok")
    folder = _records(tmp_path, "full", {exports_record_name(sha): exports_text(sha, torch.name, torch.stat().st_size, symbols)})
    with IndexServer(folder) as records:
        url = ["--scan-records", records.url.rstrip("/") + "/"]
        srv.log.clear()
        code, out, err = run_cli(capsys, "resolve", *flags, *url, "--cache-dir", str(tmp_path / "b"))
        assert code == 0, err
        assert _torch_ranges(srv, torch) == [], _torch_ranges(srv, torch)
        got = _verdict(out, "locked-ok")
        assert read["refusal"] is None and read["kind"] == "locked" and read["read"] is None, read
        assert got == {**read, "read": "recorded"}, got  # resting on a record: provisional (install reads torch's libraries again)
        asked = [p for _, p, _ in records.log]
        assert asked[0] == "/" + INDEX_NAME and asked.count("/" + exports_record_name(sha)) == 1, asked  # no index there (404): record by record
        lock = tmp_path / "pylock.ok.toml"
        code, _, err = run_cli(capsys, "lock", *flags[:-2], *url, "--cache-dir", str(tmp_path / "c"), "-o", str(lock))
        assert code == 0, err
        assert _torch_ranges(srv, torch) == []
        locked = next(p for p in tomllib.loads(lock.read_text())["tool"]["resolve-gpu-stack"]["packages"] if p["name"] == "locked-ok")
        assert locked["abi"] == "locked" and "abi-refusal" not in locked and locked["abi-read"] == "recorded", locked
        code, out, err = run_cli(capsys, "check", str(lock))
        assert "locked-ok" in out + err and "provisional" in out + err, out + err
        # locked-bad imports what torch does not export: refused from the record, still nothing read
        code, out, err = run_cli(capsys, "resolve", *DECLARED, *index_flags(srv.url), *withs("locked-bad"), *url, "--cache-dir", str(tmp_path / "d"))
        assert code == 1 and "torchInternalAssertFail" in err and "does not export" in err, err
        assert _torch_ranges(srv, torch) == []


@needs_cxx
def test_candidates_and_inspect_judge_from_an_exports_record(world, capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    srv, torch, sha, symbols = world
    folder = _records(tmp_path, "full", {exports_record_name(sha): exports_text(sha, torch.name, 0, symbols)})
    with IndexServer(folder) as records:
        flags = [*DECLARED[:6], *index_flags(srv.url), "--scan-records", records.url.rstrip("/") + "/", "--cache-dir", str(tmp_path / "c")]
        srv.log.clear()
        code, out, err = run_cli(capsys, "candidates", "locked-ok", *flags, "--format", "json")
        assert code == 0, err
        [row] = json.loads(out)["files"]
        assert row["fits_target"] is True and row["abi"].startswith("locked"), row
        code, out, err = run_cli(capsys, "inspect", "locked-bad==1.0", *flags, "--format", "json")
        report = json.loads(out)
        assert code == 1 and report["verdict"]["runs"] is False and "torchInternalAssertFail" in report["verdict"]["refusal"], out
        assert _torch_ranges(srv, torch) == [], _torch_ranges(srv, torch)


@needs_cxx
def test_a_partial_record_answers_only_for_its_names(world, capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A record answering for locked-ok's imports only: locked-ok is judged from it (nothing read);
    locked-bad, whose ``torchInternalAssertFail`` it does not answer for, reads torch's wheel and is
    refused as without a record; a record that answers for that name (missing) refuses it unread."""
    srv, torch, sha, symbols = world
    ok_names = frozenset({CHECK_FAIL, "_ZN2at4_ops5empty4callEv"})
    assert ok_names <= symbols
    folder = _records(tmp_path, "partial", {exports_record_name(sha): exports_text(sha, torch.name, 0, symbols, universe=ok_names)})
    with IndexServer(folder) as records:
        url = ["--scan-records", records.url.rstrip("/") + "/"]
        srv.log.clear()
        code, out, err = run_cli(
            capsys, "resolve", *DECLARED, *index_flags(srv.url), *withs("locked-ok"), *url, "--cache-dir", str(tmp_path / "a"), "--format", "json"
        )
        assert code == 0 and _verdict(out, "locked-ok")["refusal"] is None, err
        assert _torch_ranges(srv, torch) == []
        code, out, err = run_cli(
            capsys, "resolve", *DECLARED, *index_flags(srv.url), *withs("locked-bad"), *url, "--cache-dir", str(tmp_path / "b"), "--format", "json"
        )
        assert code == 1 and "torchInternalAssertFail" in err and "does not export" in err, err
        assert _torch_ranges(srv, torch), "a name the record does not answer for: the wheel is read"
    wider = ok_names | {ASSERT_FAIL}
    folder = _records(tmp_path, "wider", {exports_record_name(sha): exports_text(sha, torch.name, 0, symbols, universe=wider)})
    with IndexServer(folder) as records:
        srv.log.clear()
        code, out, err = run_cli(
            capsys,
            "resolve",
            *DECLARED,
            *index_flags(srv.url),
            *withs("locked-bad"),
            "--scan-records",
            records.url.rstrip("/") + "/",
            "--cache-dir",
            str(tmp_path / "c"),
        )
        assert code == 1 and "torchInternalAssertFail" in err and "does not export" in err, err
        assert _torch_ranges(srv, torch) == []


@needs_cxx
def test_a_record_of_another_sha256_or_a_hostile_one_is_passed_over(world, capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A record filed under torch's sha256 that names another, one whose names are not deflated
    names, one claiming torch exports ``torchInternalAssertFail`` under another sha256 in an index:
    each is passed over, torch's wheel read, and locked-bad refused as without records."""
    srv, torch, sha, symbols = world
    lying = exports_document("cd" * 32, torch.name, 0, symbols | {ASSERT_FAIL})
    garbage = exports_document(sha, torch.name, 0, symbols)
    garbage["exports"] = "AAAA" + zlib.compress(b"x").hex()
    cases = {
        "other": {exports_record_name(sha): json.dumps(lying)},
        "garbage": {exports_record_name(sha): json.dumps(garbage)},
        "indexed": {INDEX_NAME: json.dumps({"schema": INDEX_SCHEMA, "records": [], "exports": [lying, {"schema": EXPORTS_SCHEMA}]})},
        "huge": {exports_record_name(sha): "[" * 100_000},
    }
    for n, (name, docs) in enumerate(cases.items()):
        folder = _records(tmp_path, name, docs)
        with IndexServer(folder) as records:
            srv.log.clear()
            argv = [
                *DECLARED,
                *index_flags(srv.url),
                *withs("locked-bad"),
                "--scan-records",
                records.url.rstrip("/") + "/",
                "--cache-dir",
                str(tmp_path / f"c{n}"),
            ]
            code, _, err = run_cli(capsys, "resolve", *argv)
            assert code == 1 and "torchInternalAssertFail" in err and "does not export" in err and "Traceback" not in err, (name, err)
            assert _torch_ranges(srv, torch), name


@needs_cxx
def test_a_wheelhouse_carries_its_torchs_full_record_and_a_node_reads_no_wheel(world, capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``wheelhouse`` writes the full exports record of the torch its lock keeps (served in
    ``files/``, read from its verified file) beside its wheels' scan records; a fleet node resolving
    ``locked-ok`` against it with its records reads no wheel by range, torch included."""
    srv, torch, sha, symbols = world
    lock, house = tmp_path / "pylock.x.toml", tmp_path / "house"
    flags = [*DECLARED, *index_flags(srv.url), "--cache-dir", str(tmp_path / "ci")]
    code, _, err = run_cli(capsys, "lock", *flags, *withs("locked-ok", "stable-ext"), "-o", str(lock))
    assert code == 0, err
    code, _, err = run_cli(capsys, "wheelhouse", str(lock), "--output", str(house), "--cache-dir", str(tmp_path / "ci"))
    assert code == 0, err
    doc = json.loads((house / "records" / exports_record_name(sha)).read_text())
    validate(doc)
    record, why = parse_exports(sha, json.dumps(doc).encode())
    assert record is not None and record.universe is None and record.symbols == symbols, why
    index = json.loads((house / "records" / INDEX_NAME).read_text())
    validate(index)
    assert [d["sha256"] for d in index["exports"]] == [sha] and index["exports"][0] == doc
    with IndexServer(house) as node:
        base = node.url.rstrip("/") + "/"
        flat = [w for n in ("pytorch", "flashinfer", "pypi") for w in ("--index", f"{n}=flat:{base}simple/")]
        argv = [*DECLARED, *flat, *withs("locked-ok", "stable-ext")]
        code, out, err = run_cli(capsys, "resolve", *argv, "--scan-records", base + "records/", "--cache-dir", str(tmp_path / "n"), "--format", "json")
        assert code == 0, err
        ranges = [p for _, p, headers in node.log if any(k.lower() == "range" for k in headers)]
        assert ranges == [], ranges
        assert _verdict(out, "locked-ok")["refusal"] is None
        assert [p for _, p, _ in node.log if "/records/" in p] == ["/records/" + INDEX_NAME], node.log
        # a config lock: the records URL as the config key scan-records
        project = tmp_path / "project"
        project.mkdir()
        (project / "pyproject.toml").write_text(
            f'[tool.resolve-gpu-stack]\n\n[tool.resolve-gpu-stack.defaults]\npython = "3.12"\nflashinfer = "none"\n'
            f'scan-records = "{base}records/"\n\n[[tool.resolve-gpu-stack.target]]\nname = "node"\nplatform = "x86_64-manylinux_2_28"\n'
            f'installed = ["torch=={NIGHTLY}"]\nwith = ["locked-ok", "stable-ext"]\noutput = ["pylock.node.toml"]\n'
        )
        code, _, err = run_cli(capsys, "lock", "--config", str(project / "pyproject.toml"), *flat, "--cache-dir", str(tmp_path / "d"))
        assert code == 0, err
        ranges = [p for _, p, headers in node.log if any(k.lower() == "range" for k in headers)]
        assert ranges == [], ranges
        configured = {p["name"]: p for p in tomllib.loads((project / "pylock.node.toml").read_text())["tool"]["resolve-gpu-stack"]["packages"]}
        assert configured["locked-ok"]["abi"] == "locked" and configured["locked-ok"]["abi-read"] == "recorded", configured["locked-ok"]
        # without the records the node reads torch's libraries (and the wheels) by range
        code, out, err = run_cli(capsys, "resolve", *argv, "--scan-records", "none", "--cache-dir", str(tmp_path / "m"), "--format", "json")
        assert code == 0, err
        assert [p for _, p, headers in node.log if "torch-" in p and any(k.lower() == "range" for k in headers)]


@needs_cxx
@pytest.mark.slow
def test_install_dry_run_and_install_lock_on_a_fleet_node_read_no_wheel_by_range(world, capsys, tmp_path: Path, uv_env) -> None:  # type: ignore[no-untyped-def]
    """On a node whose torch is installed, ``install --dry-run`` judges locked-ok against the torch
    on disk and ``install --lock`` from the served wheelhouse confirms it from the verified file and
    that torch (``env/confirm.py``, unchanged): no range request to any wheel, torch included."""
    srv, torch, sha, _ = world
    lock, house = tmp_path / "pylock.x.toml", tmp_path / "house"
    code, _, err = run_cli(capsys, "lock", *DECLARED, *index_flags(srv.url), "--cache-dir", str(tmp_path / "ci"), *withs("locked-ok"), "-o", str(lock))
    assert code == 0, err
    python, before = venv_with_the_kept_torch(None, srv, tmp_path / "venv", uv_env)
    house.mkdir()
    with IndexServer(house) as node:
        code, _, err = run_cli(capsys, "wheelhouse", str(lock), "--output", str(house), "--base-url", node.url, "--cache-dir", str(tmp_path / "ci"))
        assert code == 0, err
        assert (house / "records" / exports_record_name(sha)).is_file()
        base = node.url.rstrip("/") + "/"
        flat = [w for n in ("pytorch", "flashinfer", "pypi") for w in ("--index", f"{n}=flat:{base}simple/")]
        code, out, err = run_cli(
            capsys,
            "install",
            "--dry-run",
            "--python",
            python,
            "--flashinfer",
            "none",
            *flat,
            *withs("locked-ok"),
            "--scan-records",
            base + "records/",
            "--cache-dir",
            str(tmp_path / "n1"),
            "--format",
            "json",
        )
        assert code == 0, err
        code, out, err = run_cli(
            capsys, "install", "--lock", str(house / lock.name), "--python", python, "--force-target", "--cache-dir", str(tmp_path / "n2"), "--format", "json"
        )
        assert code == 0, err
        ranges = [p for _, p, headers in node.log if any(k.lower() == "range" for k in headers)]
        assert ranges == [], ranges
    assert "locked-ok" in installed_names(python, uv_env)
    assert {p: p.read_bytes() for p in before} == before


@needs_cxx
def test_a_snapshot_recorded_with_a_partial_record_keeps_torchs_whole_exports(world, capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A snapshot replays offline, so while one is recorded no partial record answers: torch's
    exports are read whole and kept in it (though the record answers for locked-ok's imports), and
    its replay judges locked-ok without the server."""
    srv, torch, sha, symbols = world
    ok_names = frozenset({CHECK_FAIL, "_ZN2at4_ops5empty4callEv"})
    folder = _records(tmp_path, "partial", {exports_record_name(sha): exports_text(sha, torch.name, 0, symbols, universe=ok_names)})
    snap = tmp_path / "snap"
    flags = [*DECLARED, *index_flags(srv.url), *withs("locked-ok"), "--format", "json"]
    with IndexServer(folder) as records:
        code, out, err = run_cli(
            capsys, "snapshot", "--output", str(snap), *flags, "--scan-records", records.url.rstrip("/") + "/", "--cache-dir", str(tmp_path / "c")
        )
        assert code == 0, err
    manifest = json.loads((snap / "manifest.json").read_text())
    assert [v["symbols"] for v in manifest["exports"].values()] == [len(symbols)], manifest["exports"]
    before = len(srv.log)
    code, out, err = run_cli(capsys, "resolve", "--snapshot", str(snap), *flags)
    assert code == 0 and _verdict(out, "locked-ok")["refusal"] is None, err
    assert len(srv.log) == before


@needs_cxx
@pytest.mark.slow
def test_a_hostile_exports_record_can_make_a_plan_that_install_refuses(world, capsys, tmp_path: Path, uv_env) -> None:  # type: ignore[no-untyped-def]
    """A records server that says torch exports ``torchInternalAssertFail`` (for torch's own
    sha256): a declared target's lock lets locked-bad in, its verdict recorded (provisional);
    ``install --lock`` on a node with that torch reads the verified file against the torch on disk
    and refuses it, naming both readings; nothing is installed."""
    srv, torch, sha, symbols = world
    folder = _records(tmp_path, "hostile", {exports_record_name(sha): exports_text(sha, torch.name, 0, symbols | {ASSERT_FAIL})})
    lock = tmp_path / "pylock.bad.toml"
    with IndexServer(folder) as records:
        argv = [*DECLARED, *index_flags(srv.url), *withs("locked-bad"), "--scan-records", records.url.rstrip("/") + "/", "--cache-dir", str(tmp_path / "c")]
        code, _, err = run_cli(capsys, "lock", *argv, "-o", str(lock))
        assert code == 0, err
    locked = next(p for p in tomllib.loads(lock.read_text())["tool"]["resolve-gpu-stack"]["packages"] if p["name"] == "locked-bad")
    assert locked["abi"] == "locked" and "abi-refusal" not in locked and locked["abi-read"] == "recorded", locked
    python, before = venv_with_the_kept_torch(None, srv, tmp_path / "venv", uv_env)
    have = installed_names(python, uv_env)
    code, out, err = run_cli(
        capsys, "install", "--lock", str(lock), "--python", python, "--force-target", "--cache-dir", str(tmp_path / "c"), "--format", "json"
    )
    assert code == 1 and out == "" and "Traceback" not in err, err
    assert "locked-bad 1.0: planned as locked, runs" in err and "torchInternalAssertFail" in err and "read from its start" in err, err
    assert installed_names(python, uv_env) == have
    assert {p: p.read_bytes() for p in before} == before
