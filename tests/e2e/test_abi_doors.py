"""Issue 19: every door judges a compiled wheel the same way, by what it imports, and never plans
what the scan could not judge.

One loopback world (``abi_world``: a kept torch nightly whose libraries are real stubs, six compiled
packages) is driven through every command that reaches the judgement: ``resolve``, ``lock -o``, a
config ``lock``, ``check`` (offline and ``--online``), ``install --dry-run`` and ``install`` into a
real venv (exports read from the installed torch on disk), ``candidates``, ``snapshot`` and its
replay, ``inspect``, ``doctor``, and the fleet's ``wheelhouse`` and ``install --lock``. Each must give
the same verdict per package:

- stable-ext (C-shim imports only, ``torch>=2.10``, libcudart.so.13): planned, ``torch >= 2.10``;
- locked-ok (C++ imports the kept torch exports): planned, with the note that layouts are not checked;
- pinned-ok (the same, pinning torch==2.11.0): planned, its pin listed as overridden (binaries decide);
- builds-ext (builds for torch 2.7-2.9): planned, its builds named, not "built for another torch";
- stable-cu12: refused naming CUDA 12 and 13; cuda-only: refused naming CUDA 12;
- locked-bad: refused naming ``c10::detail::torchInternalAssertFail(...)``.

Then the scans that do not finish (503 on range reads, a snapshot without the scan, a zip directory
past the budget): coupling ``unknown``, refused by default, never ``agnostic``.
"""

from __future__ import annotations

import io
import json
import logging
import zipfile
from pathlib import Path

import pytest
import tomllib
from support.abi_doors import DECLARED, GOOD, installed_names, uv, venv_with_the_kept_torch, withs
from support.abi_world import NIGHTLY, TAG, build_abi_world, have_cxx
from support.doors import index_flags, run_cli
from support.elfbuild import move_dynamic, patchelf_layout
from support.server import Fault, IndexServer
from support.wheels import build_wheel
from support.world import _Entry

from resolve_gpu_stack.net.scan.classify import SCAN_SCHEMA

pytestmark = pytest.mark.skipif(not have_cxx(), reason="needs a C++ compiler to build the shared objects")

BAD = ("stable-cu12", "locked-bad", "cuda-only")
EXPECTED = {  # name -> (abi kind, runs)
    "stable-ext": ("stable", True),
    "locked-ok": ("locked", True),
    "pinned-ok": ("locked", True),
    "builds-ext": ("builds", True),
    "stable-cu12": ("stable", False),
    "locked-bad": ("locked", False),
    "cuda-only": (None, False),
}
WHY = {"stable-cu12": ("CUDA 12", "CUDA 13"), "locked-bad": ("c10::detail::torchInternalAssertFail(", "does not export"), "cuda-only": ("CUDA 12",)}


END_FIRST = 8 * 2**20  # incompressible bytes before the kept torch's moved tables: its libtorch_cpu.so is read from its end


LAYOUTS = {
    "stubs": None,
    "read from its end": lambda data: move_dynamic(data, pad=END_FIRST, seed=19),
    # as released: the section headers beside the moved tables, .dynamic 8 MB before them
    "through its section headers": lambda data: patchelf_layout(data, before=END_FIRST, gap=END_FIRST, seed=19),
}


@pytest.fixture(scope="module", params=list(LAYOUTS))
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """The world, and the same world whose kept torch has patchelf's layout behind 8 MB of data
    (its section headers stripped, or beside the tables as in a released torch): every door reads
    that torch's exports from the library's end (``scan/elfstream.py``)."""
    root = tmp_path_factory.mktemp("abidoors")
    torch_lib = LAYOUTS[request.param]
    world, _ = build_abi_world(root, torch_lib=torch_lib)
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        yield world, srv, root


def plan_verdicts(plan: dict) -> dict[str, tuple[str | None, bool]]:
    return {p["name"]: (p["abi"]["kind"], p["abi"]["refusal"] is None) for p in plan["packages"] if p["name"] in EXPECTED}


def lock_verdicts(path: Path) -> dict[str, tuple[str | None, bool]]:
    packages = tomllib.loads(path.read_text())["tool"]["resolve-gpu-stack"]["packages"]
    return {p["name"]: (p.get("abi"), "abi-refusal" not in p) for p in packages if p["name"] in EXPECTED}


def assert_refused(err: str, name: str) -> None:
    line = next((ln for ln in err.splitlines() if ln.startswith(f"  - {name} 1.0 ")), "")
    assert line and all(w in line for w in WHY[name]), err


# -- the doors -------------------------------------------------------------------------------------


def test_resolve_plans_the_runnable_and_refuses_the_rest_with_why(served, capsys, tmp_path):
    world, srv, _ = served
    base = ["resolve", *DECLARED, *index_flags(srv.url), "--cache-dir", str(tmp_path / "c"), "--format", "json"]
    code, out, err = run_cli(capsys, *base, *withs(*GOOD))
    assert code == 0, err
    plan = json.loads(out)
    assert plan_verdicts(plan) == {n: EXPECTED[n] for n in GOOD}
    rows = {p["name"]: p for p in plan["packages"]}
    assert rows["stable-ext"]["coupling"] == "torch-stable" and rows["stable-ext"]["abi"]["floor"] == "2.10"
    assert rows["stable-ext"]["abi"]["cuda_majors"] == [13]
    assert "layouts are not checked" in rows["locked-ok"]["abi"]["note"]
    assert rows["builds-ext"]["abi"]["builds"] == ["2.7", "2.8", "2.9"] and "none for 2.12" in rows["builds-ext"]["abi"]["note"]
    assert rows["builds-ext"]["abi_mismatch"] is False and "built for another torch" not in rows["builds-ext"]["reason"]
    # a pin on another torch is reported as overridden; its binary decides (issue 28)
    assert "pinned-ok pins torch==2.11.0; kept " + NIGHTLY in rows["pinned-ok"]["reason"]
    assert ("pinned-ok", "torch==2.11.0") in {(o["package"], o["requirement"]) for o in plan["overrides"]}
    for name in BAD:
        code, out, err = run_cli(capsys, *base, *withs(name))
        assert code == 1 and out == "", err
        assert_refused(err, name)
    # --abi-mismatch warn keeps its meaning: planned, flagged in JSON and the table
    code, out, err = run_cli(capsys, *base, *withs(*BAD), "--abi-mismatch", "warn")
    assert code == 0, err
    plan = json.loads(out)
    assert plan_verdicts(plan) == {n: EXPECTED[n] for n in BAD}
    assert all(p["abi_mismatch"] for p in plan["packages"] if p["name"] in BAD)


def test_the_kept_torchs_exports_are_read_from_the_librarys_end_when_its_tables_are_there(served, capsys, caplog, tmp_path):
    world, srv, _ = served
    argv = ["resolve", *DECLARED, *index_flags(srv.url), "--cache-dir", str(tmp_path / "c"), "--format", "json", *withs("locked-ok")]
    with caplog.at_level(logging.INFO, logger="resolve_gpu_stack.net.scan.exports"):
        code, _, err = run_cli(capsys, *argv)
    assert code == 0, err
    read = next(int(r.args[2]) for r in caplog.records if r.name == "resolve_gpu_stack.net.scan.exports" and "bytes read" in r.msg)
    # the stubs are a few KB; behind 8 MB of data, a read from the start would take all of it
    assert read < END_FIRST // 2, read


def test_lock_o_and_a_config_lock_record_the_same_verdicts_and_check_holds_them(served, capsys, tmp_path, monkeypatch):
    world, srv, _ = served
    urls = world.index_urls(srv.url)
    monkeypatch.chdir(tmp_path)
    cache = ["--cache-dir", str(tmp_path / "c")]
    code, _, err = run_cli(capsys, "lock", *DECLARED, *index_flags(srv.url), *cache, *withs(*GOOD), "-o", "pylock.flags.toml")
    assert code == 0, err
    by_flags = lock_verdicts(tmp_path / "pylock.flags.toml")
    assert by_flags == {n: EXPECTED[n] for n in GOOD}
    indexes = ", ".join(f'{n} = "{u}"' for n, u in urls.items())
    (tmp_path / "pyproject.toml").write_text(
        f'[tool.resolve-gpu-stack]\nindexes = {{ {indexes} }}\n\n[tool.resolve-gpu-stack.defaults]\npython = "3.12"\nflashinfer = "none"\n\n'
        f'[[tool.resolve-gpu-stack.target]]\nname = "good"\nplatform = "x86_64-manylinux_2_28"\ninstalled = ["torch=={NIGHTLY}"]\n'
        f'with = {json.dumps(list(GOOD))}\noutput = ["pylock.good.toml"]\n\n'
        f'[[tool.resolve-gpu-stack.target]]\nname = "bad"\nplatform = "x86_64-manylinux_2_28"\ninstalled = ["torch=={NIGHTLY}"]\n'
        f'with = ["locked-bad"]\noutput = ["pylock.bad.toml"]\n'
    )
    code, _, err = run_cli(capsys, "lock", *cache)
    assert code == 1, err  # one target has no plan: its lock is not written, the other's is
    assert_refused(err, "locked-bad")
    assert not (tmp_path / "pylock.bad.toml").exists()
    assert lock_verdicts(tmp_path / "pylock.good.toml") == by_flags
    code, _, err = run_cli(capsys, "check", "--target", "good")
    assert code == 0, err
    code, _, err = run_cli(capsys, "check", "--target", "good", "--online", *cache)
    assert code == 0, err
    # a verdict edited to hold for another torch fails the check, naming the package
    lock = tmp_path / "pylock.good.toml"
    lock.write_text(lock.read_text().replace(f'abi-torch = "{NIGHTLY}"', 'abi-torch = "2.11.0+cu130"', 1))
    code, _, err = run_cli(capsys, "check", "--target", "good")
    assert code == 1 and "made against torch 2.11.0+cu130" in err


def test_candidates_and_inspect_judge_as_the_resolver_does(served, capsys, tmp_path):
    world, srv, _ = served
    flags = [*DECLARED[:6], *index_flags(srv.url), "--cache-dir", str(tmp_path / "c")]
    for name, (kind, runs) in EXPECTED.items():
        code, out, err = run_cli(capsys, "candidates", name, *flags, "--format", "json")
        assert code == 0, err
        [row] = json.loads(out)["files"]
        assert row["fits_target"] is runs, row
        assert (row["abi"] or "").startswith(kind or "cuda"), row
        code, out, err = run_cli(capsys, "inspect", f"{name}==1.0", *flags, "--format", "json")
        report = json.loads(out)
        assert code == (0 if runs else 1), err
        assert report["schema"] == "resolve-gpu-stack/inspect/v1" and (report["verdict"]["abi"], report["verdict"]["runs"]) == (kind, runs)
        if not runs:
            assert all(w in report["verdict"]["refusal"] for w in WHY[name])
    code, out, _ = run_cli(capsys, "inspect", "locked-bad==1.0", *flags, "--format", "table")
    assert (
        "c10::detail::torchCheckFail(char const*, char const*, unsigned int, std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > const&)"
        in out
    )
    assert "cannot run (locked)" in out


def test_a_snapshot_records_scans_and_exports_and_replays_the_same_verdicts_offline(served, capsys, tmp_path):
    world, srv, _ = served
    snap = tmp_path / "snap"
    flags = [*DECLARED, *index_flags(srv.url), *withs(*GOOD), "--format", "json"]
    code, out, err = run_cli(capsys, "snapshot", "--output", str(snap), *flags, "--cache-dir", str(tmp_path / "c"))
    assert code == 0, err
    live = plan_verdicts(json.loads(out))
    manifest = json.loads((snap / "manifest.json").read_text())
    assert manifest["exports"] and all(v["schema"] == SCAN_SCHEMA for v in manifest["scans"].values())
    before = len(srv.log)
    code, out, err = run_cli(capsys, "resolve", "--snapshot", str(snap), *flags)
    assert code == 0, err
    assert plan_verdicts(json.loads(out)) == live == {n: EXPECTED[n] for n in GOOD}
    assert len(srv.log) == before  # replayed: nothing was asked of the server
    # the kept torch's exports not in the snapshot: a version-locked wheel cannot be shown to run
    manifest["exports"] = {}
    (snap / "manifest.json").write_text(json.dumps(manifest))
    code, _, err = run_cli(capsys, "resolve", "--snapshot", str(snap), *flags)
    assert code == 1 and "locked-ok 1.0" in err and "not in the snapshot" in err


@pytest.mark.slow
def test_install_dry_run_install_and_doctor_judge_against_the_torch_on_disk(served, capsys, tmp_path, uv_env):
    world, srv, _ = served
    python, before = venv_with_the_kept_torch(world, srv, tmp_path / "venv", uv_env)
    torch_files = sorted(before)
    flags = ["--python", python, "--flashinfer", "none", *index_flags(srv.url), "--cache-dir", str(tmp_path / "c")]
    code, out, err = run_cli(capsys, "install", "--dry-run", *flags, *withs(*GOOD), "--format", "json")
    assert code == 0, err
    code, _, err = run_cli(capsys, "install", *flags, *withs("locked-bad"), "--format", "json")
    assert code == 1
    assert_refused(err, "locked-bad")
    code, out, err = run_cli(capsys, "install", *flags, *withs(*GOOD), "--format", "json")
    assert code == 0, err
    assert {p: p.read_bytes() for p in torch_files} == before
    # locked-bad installed behind the tool's back: doctor refuses it from its symbols, never imports it
    uv("pip", "install", "-q", "--python", python, "--no-deps", "--index-url", f"{srv.url}simple/", "locked-bad==1.0", env=uv_env)
    code, out, err = run_cli(capsys, "doctor", "--python", python, "--format", "json")
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    symbols = checks["torch-abi-symbols"]
    assert symbols["status"] == "fail" and "locked-bad 1.0" in symbols["message"] and "torchInternalAssertFail" in symbols["message"]
    judged = {p["package"]: p["abi"] for p in symbols["details"]["packages"]}
    assert judged["locked-ok 1.0"]["abi"] == "locked" and judged["stable-ext 1.0"]["abi"] == "stable"
    imported = {i["package"] for i in checks.get("torch-abi-import", {"details": {"imports": []}})["details"]["imports"]}
    assert "locked-bad 1.0" not in imported


@pytest.mark.slow
def test_wheelhouse_publishes_the_verdicts_and_install_lock_holds_a_node_to_them(served, capsys, tmp_path, uv_env):
    """The fleet's doors: `wheelhouse` keeps every package's verdict in the lock it publishes, and
    `install --lock` holds a node to the verdicts as `check` does: a lock whose verdict was made
    against another torch is refused before anything is installed; the published lock installs the
    runnable wheels and leaves torch's libraries byte-identical."""
    world, srv, _ = served
    python, before = venv_with_the_kept_torch(world, srv, tmp_path / "node", uv_env)
    cache = ["--cache-dir", str(tmp_path / "c")]
    lock = tmp_path / "pylock.node.toml"
    code, _, err = run_cli(capsys, "lock", "--python", python, "--flashinfer", "none", *index_flags(srv.url), *cache, *withs(*GOOD), "-o", str(lock))
    assert code == 0, err
    code, _, err = run_cli(capsys, "wheelhouse", str(lock), "--output", str(tmp_path / "house"), *cache, "--format", "json")
    assert code == 0, err
    published = tmp_path / "house" / lock.name
    assert lock_verdicts(published) == lock_verdicts(lock) == {n: EXPECTED[n] for n in GOOD}
    (tmp_path / "edited").mkdir()
    edited = tmp_path / "edited" / lock.name
    edited.write_text(published.read_text().replace(f'abi-torch = "{NIGHTLY}"', 'abi-torch = "2.11.0+cu130"', 1))
    node_cache = ["--cache-dir", str(tmp_path / "node-cache")]
    have = installed_names(python, uv_env)
    code, out, err = run_cli(capsys, "install", "--lock", str(edited), "--python", python, *node_cache, "--format", "json")
    assert code == 1 and out == "" and "made against torch 2.11.0+cu130" in err, err
    assert installed_names(python, uv_env) == have
    code, out, err = run_cli(capsys, "install", "--lock", str(published), "--python", python, *node_cache, "--format", "json")
    assert code == 0, err
    assert set(GOOD) <= installed_names(python, uv_env)
    assert {p: p.read_bytes() for p in before} == before


# -- scans that do not finish: unknown, refused, never agnostic ----------------------------------


def _one_wheel_world(root: Path, name: str, files: dict[str, bytes], *, sidecar: bool) -> tuple[object, str]:
    from support.stack_world import build_story_world

    w = build_story_world(root / "www", hostile=False)
    wheel = build_wheel(w.root / "files", name, "1.0", TAG, (), files=files)
    if sidecar:
        (w.root / "files" / (wheel.filename + ".metadata")).write_bytes(wheel.metadata)
    w._add(f"simple/{name}/", "pypi", _Entry(wheel, "files/" + wheel.filename, sidecar=sidecar, upload_time="2026-01-01T00:00:00Z"))
    return w, "/files/" + wheel.filename


def test_range_reads_answering_503_leave_the_wheel_unknown_and_refused(tmp_path, capsys):
    from support.abi_world import compile_objects

    objects = compile_objects(tmp_path / "o")
    world, path = _one_wheel_world(tmp_path, "flaky-ext", {"flaky_ext/__init__.py": b"", "flaky_ext/_C.so": objects["locked_ok.so"]}, sidecar=True)
    with IndexServer(world.root) as srv:  # type: ignore[attr-defined]
        world.write(srv.url)  # type: ignore[attr-defined]
        srv.script(path, [Fault(status=503, headers={"Retry-After": "0"}) for _ in range(50)])
        code, out, err = run_cli(
            capsys, "resolve", *DECLARED, *index_flags(srv.url), "--cache-dir", str(tmp_path / "c"), *withs("flaky-ext"), "--format", "json"
        )
        assert code == 1 and out == "", err
        assert "flaky-ext 1.0" in err and "scan did not finish" in err and "503" in err
        code, out, err = run_cli(
            capsys,
            "resolve",
            *DECLARED,
            *index_flags(srv.url),
            "--cache-dir",
            str(tmp_path / "c"),
            *withs("flaky-ext"),
            "--format",
            "json",
            "--abi-mismatch",
            "warn",
        )
    row = next(p for p in json.loads(out)["packages"] if p["name"] == "flaky-ext")
    assert row["coupling"] == "unknown" and row["abi"]["kind"] == "unknown" and row["abi_mismatch"] is True


def test_a_torch_whose_server_ignores_range_leaves_a_locked_wheel_unshown_not_a_traceback(tmp_path, capsys):
    """The kept torch's exports are read by range requests; a server that answers them with the
    whole file (200) gives no exports: the version-locked wheel cannot be shown to run and is
    refused, naming why (before: the range reader's stop escaped as a traceback)."""
    world, _ = build_abi_world(tmp_path / "w")
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        torch = next(e for e in world.pages["whl/nightly/cu130/torch/"] if NIGHTLY in e.wheel.filename)
        srv.script("/" + torch.rel_path, [Fault(ignore_range=True) for _ in range(20)])
        code, out, err = run_cli(
            capsys, "resolve", *DECLARED, *index_flags(srv.url), "--cache-dir", str(tmp_path / "c"), *withs("locked-ok"), "--format", "json"
        )
    assert code == 1 and out == "" and "Traceback" not in err, err
    assert "locked-ok 1.0" in err and "exports could not be read" in err and "ignored Range" in err


def test_a_snapshot_without_the_scan_is_unknown_and_refused(served, capsys, tmp_path):
    world, srv, _ = served
    snap = tmp_path / "snap"
    flags = [*DECLARED, *index_flags(srv.url), *withs("stable-ext"), "--format", "json"]
    assert run_cli(capsys, "snapshot", "--output", str(snap), *flags, "--cache-dir", str(tmp_path / "c"))[0] == 0
    manifest = json.loads((snap / "manifest.json").read_text())
    manifest["scans"] = {}
    (snap / "manifest.json").write_text(json.dumps(manifest))
    code, _, err = run_cli(capsys, "resolve", "--snapshot", str(snap), *flags)
    assert code == 1 and "stable-ext 1.0" in err and "not in snapshot" in err and "agnostic" not in err


def test_a_zip_directory_past_the_budget_is_unknown_and_refused(tmp_path, capsys):
    from support.abi_world import compile_objects

    objects = compile_objects(tmp_path / "o")
    members = {"many_ext/__init__.py": b"", "many_ext/_C.so": objects["stable.so"]}
    members.update({f"many_ext/data/{'x' * 80}{i:06d}.txt": b"" for i in range(50_000)})  # a central directory of ~6 MB
    world, _ = _one_wheel_world(tmp_path, "many-ext", members, sidecar=True)
    with IndexServer(world.root) as srv:  # type: ignore[attr-defined]
        world.write(srv.url)  # type: ignore[attr-defined]
        code, _, err = run_cli(capsys, "resolve", *DECLARED, *index_flags(srv.url), "--cache-dir", str(tmp_path / "c"), *withs("many-ext"), "--format", "json")
    assert code == 1 and "many-ext 1.0" in err and "budget" in err and "scan did not finish" in err


def test_the_two_so_wheel_and_the_hostile_wheel_give_verdicts_not_tracebacks(served, capsys, tmp_path):
    """A wheel of two small .so members of which one links libtorch (a traceback before), and one
    of 4,000 members sharing a deflate stream (27 s before): verdicts, through the CLI, quickly."""
    import time

    from support.abi_world import compile_objects
    from support.elfbuild import hostile_wheels

    objects = compile_objects(tmp_path / "o")
    two = {"two_ext/__init__.py": b"", "two_ext/a.so": objects["locked_ok.so"], "two_ext/b.so": objects["libcudart.so.13"]}
    world, _ = _one_wheel_world(tmp_path / "two", "two-ext", two, sidecar=True)
    with IndexServer(world.root) as srv:  # type: ignore[attr-defined]
        world.write(srv.url)  # type: ignore[attr-defined]
        code, out, err = run_cli(capsys, "resolve", *DECLARED, *index_flags(srv.url), "--cache-dir", str(tmp_path / "c"), *withs("two-ext"), "--format", "json")
    assert code == 1 and "Traceback" not in err and "two-ext 1.0" in err  # locked, and the story's torch wheel here has no libraries
    hostile = next(iter(hostile_wheels().values()))
    path = tmp_path / "hostile-1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    path.write_bytes(_with_metadata(hostile, "hostile"))
    started = time.monotonic()
    code, out, err = run_cli(capsys, "inspect", str(path), *DECLARED[:6], "--format", "json")
    assert time.monotonic() - started < 5 and "Traceback" not in err
    assert json.loads(out)["kind"] == "unknown"


def _with_metadata(data: bytes, name: str) -> bytes:
    """``data`` (a zip) with a dist-info appended, so the CLI can read its METADATA."""
    buf = io.BytesIO(data)
    with zipfile.ZipFile(buf, "a") as zf:
        zf.writestr(f"{name}-1.0.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    return buf.getvalue()
