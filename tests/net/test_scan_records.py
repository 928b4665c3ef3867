"""Issue 53 item 2: a compiled wheel is scanned once for the world.

A scan is a fact about a wheel's bytes, kept as a ``scan-record/v1`` file named by its sha256
(``net/scan/records.py``). ``wheelhouse`` writes its wheels' records to ``records/``; a fleet node that
resolves against the served wheelhouse with ``--scan-records URL/records/`` reads no wheel by
range (counted on the loopback server), and ``install --lock`` from it reads none either. A hostile
records server that says "runs" for a wheel that does not (the forged ``evilkern`` of issue 48)
can make a plan, whose verdict is said to be recorded (provisional), and nothing more: install
reads the verified file from its start and refuses it, naming both readings.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest
import tomllib
from support.abi_doors import DECLARED, WHY, _assert_refused, _end_first_abi, installed_names, venv_with_the_kept_torch, withs
from support.abi_doors import forged as forged
from support.abi_world import build_abi_world, have_cxx
from support.doors import index_flags, run_cli
from support.output_schemas import validate
from support.paths import REPO
from support.server import IndexServer

from resolve_gpu_stack.model.abi import READ_NAMES, READ_RECORDED, MemberAbi, WheelAbi
from resolve_gpu_stack.net.scan.classify import ScanRecord
from resolve_gpu_stack.net.scan.records import (
    INDEX_NAME,
    INDEX_SCHEMA,
    RECORD_SCHEMA,
    ScanRecords,
    cached_records,
    index_text,
    parse_index,
    parse_record,
    record_document,
    record_name,
    record_text,
    shipped_folder,
)

needs_cxx = pytest.mark.skipif(not have_cxx(), reason="needs a C++ compiler to build the shared objects")

SHA = "ab" * 32
ABI = WheelAbi(kind="none", why="no shared object links torch or CUDA")


def _ranges(srv: IndexServer) -> list[str]:
    return [path for _, path, headers in srv.log if any(k.lower() == "range" for k in headers)]


def _flat(base: str) -> list[str]:
    return [w for name in ("pytorch", "flashinfer", "pypi") for w in ("--index", f"{name}=flat:{base}simple/")]


# -- the record and its schema ----------------------------------------------------------------------


def test_a_record_matches_its_schema_and_is_read_back_as_recorded() -> None:
    doc = record_document(SHA, "demo-1.0-cp312-cp312-manylinux_2_28_x86_64.whl", 10, ScanRecord(abi=ABI, file_size=10))
    validate(doc)
    assert doc["schema"] == RECORD_SCHEMA and record_name(SHA) == SHA + ".json"
    record, why = parse_record(SHA.upper(), json.dumps(doc).encode())
    assert record is not None and why == "" and record.abi.kind == "none" and record.abi.read == READ_RECORDED


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        (lambda d: d.update(sha256="cd" * 32), "another sha256"),
        (lambda d: d["scan"].update(read="recorded"), "not read from the members' starts"),
        (lambda d: d["scan"].update(schema=3), "not of schema"),
        (lambda d: d["scan"].update(kind="unknown"), "did not finish"),
        (lambda d: d.update(schema="resolve-gpu-stack/plan/v1"), "not a resolve-gpu-stack/scan-record/v1 record"),
    ],
)
def test_a_record_is_used_only_for_its_sha256_and_only_when_read_from_the_start(edit, why: str) -> None:  # type: ignore[no-untyped-def]
    doc = record_document(SHA, "demo-1.0-cp312-cp312-manylinux_2_28_x86_64.whl", 10, ScanRecord(abi=ABI))
    edit(doc)
    record, said = parse_record(SHA, json.dumps(doc).encode())
    assert record is None and why in said, said
    assert parse_record(SHA, b"<html>login</html>") == (None, "not JSON")


def test_records_are_not_written_for_a_scan_not_read_from_the_start_or_unfinished() -> None:
    for abi in (WheelAbi(kind="none", why="x", read=READ_RECORDED), WheelAbi(kind="unknown", why="budget")):
        with pytest.raises(ValueError):
            record_text(SHA, "demo.whl", 1, ScanRecord(abi=abi))


def test_the_shipped_records_are_real_records_of_their_sha256() -> None:
    folder = shipped_folder()
    assert folder is not None
    files = sorted(p for p in folder.glob("*.json") if not p.name.endswith(".exports.json"))  # torch's exports: test_exports_records.py
    assert files, "the tool ships records (indexes/records/)"
    for path in files:
        doc = json.loads(path.read_text())
        validate(doc)
        assert path.name == record_name(doc["sha256"])
        record, why = parse_record(doc["sha256"], path.read_bytes())
        assert record is not None, (path.name, why)
    lookup = ScanRecords(folders=(folder,))
    sha = files[0].name.removesuffix(".json")
    assert lookup(sha) is not None and lookup("00" * 32) is None and lookup.hits == 1


def _schema_4(doc: dict) -> dict:  # type: ignore[type-arg]
    """``doc`` as the reader before ``read = names`` wrote it (scan schema 4)."""
    doc["scan"]["schema"] = 4
    return doc


def test_a_schema_4_record_of_no_torch_is_unverified_for_its_reader_did_not_mark_a_guess() -> None:
    """Scan schema 4's reader wrote a wheel nothing ties to torch, judged by the library names in
    its members' first bytes, with no ``read`` key: its "none" or "cuda" may be that guess, so it
    is read as unverified (names); its "torch" (read by structure) and schema 5's stay recorded."""
    torch = WheelAbi(kind="torch", why="x.so needs libc10.so", members=(MemberAbi(name="x.so", torch_libs=("libc10.so",), shim=1),))
    cuda = WheelAbi(kind="cuda", why="needs CUDA", members=(MemberAbi(name="x.so", cuda_majors=(12,)),), cuda_majors=(12,))
    for abi, old, new in ((ABI, READ_NAMES, READ_RECORDED), (cuda, READ_NAMES, READ_RECORDED), (torch, READ_RECORDED, READ_RECORDED)):
        doc = record_document(SHA, "demo.whl", 10, ScanRecord(abi=abi))
        validate(doc)
        assert doc["scan"]["schema"] == 5 and "read" not in doc["scan"]
        record, why = parse_record(SHA, json.dumps(doc).encode())
        assert record is not None and record.abi.read == new, why
        validate(_schema_4(doc))
        record, why = parse_record(SHA, json.dumps(doc).encode())
        assert record is not None and record.abi.kind == abi.kind and record.abi.read == old, why


def test_no_shipped_record_is_a_guess() -> None:
    """The shipped records made before guesses were marked (scan schema 4) that were guesses (a
    "none" or "cuda" whose why said a member was not read to its dynamic section) were read again
    from their whole files (``indexes/scan_records.py --guesses``): every shipped record is read as
    recorded, none as unverified, and none says a member was not read."""
    folder = shipped_folder()
    assert folder is not None
    for path in sorted(p for p in folder.glob("*.json") if not p.name.endswith(".exports.json")):
        doc = json.loads(path.read_text())
        record, why = parse_record(doc["sha256"], path.read_bytes())
        assert record is not None, (path.name, why)
        assert "nothing ties it to torch" not in doc["scan"]["why"], (path.name, doc["scan"]["why"])
        assert record.abi.read == READ_RECORDED, (path.name, doc["scan"]["schema"], record.abi)
        assert doc["scan"]["schema"] == 5 or doc["scan"]["kind"] == "torch", path.name  # schema 4's "torch" was read by structure


@needs_cxx
def test_a_schema_4_record_of_an_untied_wheel_plans_it_unverified_without_reading_it(forged, capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A records folder (a wheelhouse or a team's, made before guesses were marked) holds
    evilguess's "no torch" as scan schema 4: resolve and lock -o use it (its members are not read
    by range, as they are without it) and mark the verdict unverified, as a fresh scan of the guess does."""
    world, srv, _, _ = forged
    [wheel] = sorted((world.root / "files").glob("evilguess-1.0-*.whl"))
    data = wheel.read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    abi = WheelAbi(kind="none", why="1 shared object(s) need neither torch nor CUDA libraries; 1 of 1 shared object(s) not read to their dynamic section")
    folder = tmp_path / "records"
    folder.mkdir()
    (folder / record_name(sha)).write_text(json.dumps(_schema_4(record_document(sha, wheel.name, len(data), ScanRecord(abi=abi)))))
    with IndexServer(folder) as records:
        flags = [*DECLARED, *index_flags(srv.url), "--cache-dir", str(tmp_path / "c"), "--scan-records", records.url.rstrip("/") + "/"]
        before = [p for p in _ranges(srv) if p.endswith(wheel.name)]
        code, out, err = run_cli(capsys, "resolve", *flags, "--with", "evilguess", "--format", "json")
        assert code == 0, err
        row = next(p for p in json.loads(out)["packages"] if p["name"] == "evilguess")
        assert row["abi"] is not None and row["abi"]["read"] == "names", row
        lock = tmp_path / "pylock.guess.toml"
        code, _, err = run_cli(capsys, "lock", *flags, "--with", "evilguess", "-o", str(lock))
        assert code == 0, err
        locked = next(p for p in tomllib.loads(lock.read_text())["tool"]["resolve-gpu-stack"]["packages"] if p["name"] == "evilguess")
        assert locked["abi-read"] == "names", locked
        answered = [p for p in _ranges(srv) if p.endswith(wheel.name)][len(before) :]  # its METADATA's tail, nothing more
        assert any(p.endswith(record_name(sha)) for _, p, _ in records.log), records.log
    code, _, err = run_cli(capsys, "resolve", *DECLARED, *index_flags(srv.url), "--cache-dir", str(tmp_path / "c2"), "--with", "evilguess", "--format", "json")
    assert code == 0, err
    scanned = [p for p in _ranges(srv) if p.endswith(wheel.name)][len(before) + len(answered) :]  # without the record: its tail, then its members
    assert len(answered) < len(scanned), (answered, scanned)


def test_a_bad_records_url_is_a_usage_error(capsys) -> None:  # type: ignore[no-untyped-def]
    code, out, err = run_cli(capsys, "resolve", *DECLARED, "--scan-records", "file:///etc/", "--format", "json")
    assert code == 2 and "--scan-records" in err and "http(s) URL" in err and "Traceback" not in err


# -- the fleet: a wheelhouse's records ----------------------------------------------------------


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The abi world locked (stable-ext, builds-ext) and exported as a wheelhouse with its records."""
    if not have_cxx():
        pytest.skip("needs a C++ compiler")
    root = tmp_path_factory.mktemp("fleet")
    world, _ = build_abi_world(root / "www")
    lock, house = root / "pylock.x.toml", root / "house"
    import contextlib
    import io

    from resolve_gpu_stack.cli.app import main

    with IndexServer(world.root) as srv, contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
        world.write(srv.url)
        flags = [*DECLARED, *index_flags(srv.url), "--cache-dir", str(root / "ci-cache")]
        assert main(["lock", *flags, *withs("stable-ext", "builds-ext"), "-o", str(lock)]) == 0, err.getvalue()
        assert main(["wheelhouse", str(lock), "--output", str(house), "--cache-dir", str(root / "ci-cache")]) == 0, err.getvalue()
    return world, lock, house, root / "ci-cache"


@needs_cxx
def test_wheelhouse_writes_the_records_of_its_compiled_wheels(fleet) -> None:  # type: ignore[no-untyped-def]
    _, _, house, _ = fleet
    manifest = json.loads((house / "wheelhouse.json").read_text())
    compiled = {f["filename"]: f["sha256"] for f in manifest["files"] if not f["filename"].endswith("-none-any.whl")}
    assert {"stable-ext", "builds-ext"} <= {name.split("-")[0].replace("_", "-") for name in compiled}
    for filename, sha in compiled.items():
        if not filename.startswith(("stable_ext", "builds_ext")):
            continue
        doc = json.loads((house / "records" / record_name(sha)).read_text())
        validate(doc)
        assert doc["filename"] == filename and doc["sha256"] == sha == hashlib.sha256((house / "files" / filename).read_bytes()).hexdigest()
        assert doc["scan"]["kind"] == "torch" and "read" not in doc["scan"]
    # and all of them in one file, each record under the sha256 it names (a node reads it with one request)
    index = json.loads((house / "records" / INDEX_NAME).read_text())
    validate(index)
    written = sorted(sha for sha in compiled.values() if (house / "records" / record_name(sha)).is_file())
    assert [r["sha256"] for r in index["records"]] == written and written
    for doc in index["records"]:
        validate(doc)
        assert doc == json.loads((house / "records" / record_name(doc["sha256"])).read_text())


@needs_cxx
def test_a_fleet_node_resolving_with_the_wheelhouse_records_reads_no_wheel_by_range(fleet, capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, lock, house, _ = fleet
    want = {p["name"]: (p.get("abi"), p["version"]) for p in tomllib.loads(lock.read_text())["tool"]["resolve-gpu-stack"]["packages"]}
    with IndexServer(house) as srv:
        base = srv.url.rstrip("/") + "/"
        argv = [*DECLARED, *_flat(base), *withs("stable-ext", "builds-ext"), "--format", "json"]
        # without the records: the node scans the wheels by range (what the records save)
        code, out, err = run_cli(capsys, "resolve", *argv, "--cache-dir", str(tmp_path / "a"))
        assert code == 0, err
        assert _ranges(srv), "the wheels are read by range without records"
        # what a team exports from its own scan cache: the same records the wheelhouse wrote
        exported = {sha: record for sha, record in cached_records(tmp_path / "a")}
        scans = {p.name.removesuffix(".json") for p in (house / "records").glob("*.json") if p.name != INDEX_NAME and not p.name.endswith(".exports.json")}
        assert scans <= set(exported)  # (and the kept torch's exports record: test_exports_records.py)
        assert all(r.abi.read == "start" for r in exported.values())
        srv.log.clear()
        records = ["--scan-records", base + "records/"]
        with pytest.MonkeyPatch.context() as mp:  # progress lines go to a terminal
            mp.setattr(sys.stderr, "isatty", lambda: True)
            code, out, err = run_cli(capsys, "resolve", *argv[:-2], *records, "--cache-dir", str(tmp_path / "t"))
        assert code == 0 and "judged from it, by their sha256" in err and "provisional" in err, err  # said once, on stderr
        srv.log.clear()
        code, out, err = run_cli(capsys, "resolve", *argv, *records, "--cache-dir", str(tmp_path / "b"))
        assert code == 0, err
        assert _ranges(srv) == [], _ranges(srv)
        # the folder's records in one request (its index.json), not one request per compiled wheel
        assert [p for _, p, _ in srv.log if "/records/" in p] == ["/records/" + INDEX_NAME], srv.log
        plan = {p["name"]: p for p in json.loads(out)["packages"]}
        node_lock = tmp_path / "pylock.node.toml"
        code, _, err = run_cli(capsys, "lock", *argv, *records, "--cache-dir", str(tmp_path / "c"), "-o", str(node_lock))
        assert code == 0, err
        assert _ranges(srv) == [], _ranges(srv)
        assert any(p.endswith(INDEX_NAME) and "/records/" in p for _, p, _ in srv.log)
        # a config lock: the records URL as the config key scan-records
        project = tmp_path / "project"
        project.mkdir()
        (project / "pyproject.toml").write_text(
            f'[tool.resolve-gpu-stack]\n\n[tool.resolve-gpu-stack.defaults]\npython = "3.12"\nflashinfer = "none"\n'
            f'scan-records = "{base}records/"\n\n[[tool.resolve-gpu-stack.target]]\nname = "node"\nplatform = "x86_64-manylinux_2_28"\n'
            f'installed = ["torch=={DECLARED[5].split("==")[1]}"]\nwith = ["stable-ext", "builds-ext"]\noutput = ["pylock.node.toml"]\n'
        )
        code, _, err = run_cli(capsys, "lock", "--config", str(project / "pyproject.toml"), *_flat(base), "--cache-dir", str(tmp_path / "d"))
        assert code == 0, err
        assert _ranges(srv) == [], _ranges(srv)
        configured = {p["name"]: p for p in tomllib.loads((project / "pylock.node.toml").read_text())["tool"]["resolve-gpu-stack"]["packages"]}
        assert configured["stable-ext"]["abi-read"] == "recorded"
    node = {p["name"]: p for p in tomllib.loads(node_lock.read_text())["tool"]["resolve-gpu-stack"]["packages"]}
    for name in ("stable-ext", "builds-ext"):
        assert (node[name].get("abi"), node[name]["version"]) == want[name]
        assert node[name]["abi-read"] == plan[name]["abi"]["read"] == "recorded", node[name]  # provisional: install reads the file again


@needs_cxx
@pytest.mark.slow
def test_install_lock_on_a_fleet_node_reads_no_wheel_by_range(fleet, capsys, tmp_path: Path, uv_env) -> None:  # type: ignore[no-untyped-def]
    """``install --lock`` from a served wheelhouse downloads each compiled wheel whole, verifies it
    and reads it from its start (``env/confirm.py``): no range request, and the stack installs."""
    world, lock, _, ci_cache = fleet
    with IndexServer(world.root) as origin:
        world.write(origin.url)
        python, before = venv_with_the_kept_torch(world, origin, tmp_path / "venv", uv_env)
    house = tmp_path / "house"
    house.mkdir()
    with IndexServer(house) as srv:
        code, _, err = run_cli(capsys, "wheelhouse", str(lock), "--output", str(house), "--base-url", srv.url, "--offline", "--cache-dir", str(ci_cache))
        assert code == 0, err
        assert list((house / "records").glob("*.json"))
        code, out, err = run_cli(
            capsys, "install", "--lock", str(house / lock.name), "--python", python, "--force-target", "--cache-dir", str(tmp_path / "node"), "--format", "json"
        )
        assert code == 0, err
        assert _ranges(srv) == [], _ranges(srv)
        assert any(p.startswith("/files/stable_ext") for _, p, _ in srv.log)
    assert {"stable-ext", "builds-ext"} <= installed_names(python, uv_env)
    assert {p: p.read_bytes() for p in before} == before


# -- a hostile records server ---------------------------------------------------------------------------


@needs_cxx
@pytest.mark.slow
def test_a_hostile_records_server_can_make_a_plan_that_install_refuses(forged, capsys, tmp_path: Path, uv_env) -> None:  # type: ignore[no-untyped-def]
    """The records say "runs" for evilkern (the end-first reading of the forged member): resolve
    plans it, its verdict recorded; install and install --lock read the verified file and refuse."""
    world, srv, path, _ = forged
    data = path.read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    hostile = tmp_path / "hostile"
    hostile.mkdir()
    (hostile / record_name(sha)).write_text(record_text(sha, path.name, len(data), ScanRecord(abi=_end_first_abi(path))))
    python, before = venv_with_the_kept_torch(world, srv, tmp_path / "venv", uv_env)
    with IndexServer(hostile) as records:
        flags = ["--python", python, "--flashinfer", "none", *index_flags(srv.url), "--cache-dir", str(tmp_path / "c")]
        flags += ["--scan-records", records.url.rstrip("/") + "/"]
        code, out, err = run_cli(capsys, "resolve", *flags, "--with", "evilkern", "--format", "json")
        assert code == 0, err
        row = next(p for p in json.loads(out)["packages"] if p["name"] == "evilkern")
        assert row["abi"]["kind"] == "locked" and row["abi"]["refusal"] is None and row["abi"]["read"] == "recorded", row
        lock = tmp_path / "pylock.evil.toml"
        code, _, err = run_cli(capsys, "lock", *flags, "--with", "evilkern", "-o", str(lock))
        assert code == 0, err
        code, out, err = run_cli(capsys, "check", str(lock))
        assert "evilkern" in out + err and "provisional" in out + err
        have = installed_names(python, uv_env)
        for argv in (["install", *flags, "--with", "evilkern"], ["install", "--lock", str(lock), "--python", python, "--cache-dir", str(tmp_path / "c")]):
            code, out, err = run_cli(capsys, *argv, "--format", "json")
            assert code == 1 and out == "" and "Traceback" not in err, err
            assert "evilkern 1.0: planned as locked, runs" in err and WHY in err and "read from its start" in err, err
            assert installed_names(python, uv_env) == have
    assert {p: p.read_bytes() for p in before} == before


@needs_cxx
def test_records_from_a_server_that_is_down_or_lies_about_the_sha256_are_passed_over(forged, capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A record naming another sha256, or a records URL nobody answers: the wheel is scanned, and
    the forged member is refused as without records."""
    world, srv, path, _ = forged
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    liar = tmp_path / "liar"
    liar.mkdir()
    doc = record_document("0" * 64, path.name, 1, ScanRecord(abi=_end_first_abi(path)))
    (liar / record_name(sha)).write_text(json.dumps(doc))
    (liar / INDEX_NAME).write_text("<html>login</html>")  # not an index: the records are read one by one
    indexed = tmp_path / "indexed"  # an index holding the lying record: used only for the sha256 it names
    indexed.mkdir()
    (indexed / INDEX_NAME).write_text(json.dumps({"schema": INDEX_SCHEMA, "records": [doc]}))
    with IndexServer(liar) as records, IndexServer(indexed) as index_only:
        for n, url in enumerate((records.url.rstrip("/") + "/", index_only.url.rstrip("/") + "/", "http://127.0.0.1:9/records/")):
            flags = [*DECLARED, *index_flags(srv.url), "--cache-dir", str(tmp_path / f"c{n}"), "--scan-records", url]  # each scans (no cached scan)
            code, out, err = run_cli(capsys, "resolve", *flags, "--with", "evilkern", "--format", "json")
            _assert_refused(code, err)
        assert [p for _, p, _ in records.log] == ["/" + INDEX_NAME, "/" + record_name(sha)], records.log
        assert [p for _, p, _ in index_only.log] == ["/" + INDEX_NAME], index_only.log


def test_a_records_folder_is_indexed_for_hosting_with_only_the_records_it_would_use(tmp_path: Path) -> None:
    """``indexes/scan_records.py --index DIR`` (a team hosting its records): DIR/index.json holds
    DIR's records that a node would use, each under the sha256 it names; a record filed under
    another sha256, or not read from its start, is left out. Read back, each answers only for its own."""
    import subprocess

    good = record_document(SHA, "demo-1.0-cp312-cp312-manylinux_2_28_x86_64.whl", 10, ScanRecord(abi=ABI))
    (tmp_path / record_name(SHA)).write_text(json.dumps(good))
    (tmp_path / record_name("cd" * 32)).write_text(json.dumps(good))  # names another sha256 than its file's
    partial = json.loads(json.dumps(good).replace(SHA, "ef" * 32))
    partial["scan"]["read"] = "recorded"
    (tmp_path / record_name("ef" * 32)).write_text(json.dumps(partial))
    done = subprocess.run([sys.executable, str(REPO / "indexes" / "scan_records.py"), "--index", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "1 records in" in done.stdout, done.stdout + done.stderr
    index = json.loads((tmp_path / INDEX_NAME).read_text())
    validate(index)
    assert index["records"] == [good] and (tmp_path / INDEX_NAME).read_text() == index_text([good])
    found, why = parse_index((tmp_path / INDEX_NAME).read_bytes())
    assert found is not None and why == "" and set(found) == {SHA} and found[SHA].abi.read == READ_RECORDED
    assert parse_index(b"<html>login</html>") == (None, "not JSON")
    assert parse_index(json.dumps(good).encode())[0] is None
