"""Issue 15 item 16: the stand-in digests of a reconstructed snapshot never reach a lock unnoticed.

The bundled snapshot lists them (``synthetic_sha256`` in its manifest, written by its generator);
the scheme (``sha256("RECONSTRUCTED-NOT-REAL:" + filename)``) is recognised without it. `lock`
refuses such a row (exit 1, naming the package, with a hint) unless ``--allow-synthetic``;
`resolve` plans it with a note; `check` flags it."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from support.lock_project import build_lock_world, config_text, record_snapshot, serve_world
from support.paths import REPO

from resolve_gpu_stack.cli import app as cli
from resolve_gpu_stack.net.snapshot import synthetic_digests

ROOT = REPO
BUNDLED = ROOT / "indexes" / "snapshots" / "2026-03-07"
JIT = "flashinfer_jit_cache-0.6.5+cu130-cp39-abi3-manylinux_2_28_x86_64.whl"


def stand_in(filename: str) -> str:
    return hashlib.sha256(f"RECONSTRUCTED-NOT-REAL:{filename}".encode()).hexdigest()


def _set_digest(www: Path, filename: str, digest: str | None = None) -> str:
    """Give ``filename``'s row on its FlashInfer page another #sha256 (the stand-in by default);
    returns the digest the row had."""
    for page in www.rglob("index.html"):
        text = page.read_text()
        m = re.search(r"#sha256=([0-9a-f]{64})\">" + re.escape(filename), text)
        if m:
            page.write_text(text.replace(m.group(1), digest or stand_in(filename)))
            return m.group(1)
    raise AssertionError(f"{filename} on no page")


@pytest.fixture
def project(tmp_path, monkeypatch):
    world = build_lock_world(tmp_path / "www")
    with serve_world(world) as (_, urls):
        proj = tmp_path / "project"
        proj.mkdir()
        (proj / "pyproject.toml").write_text(config_text(urls))
        monkeypatch.chdir(proj)
        yield proj, tmp_path / "www"


def lock(*argv: str) -> int:
    return cli.main(["lock", "--cache-dir", "cache", *argv])


def test_lock_refuses_a_stand_in_digest_naming_the_package(project, capsys):
    proj, www = project
    _set_digest(www, JIT)
    assert lock() == 1
    err = capsys.readouterr().err
    assert "flashinfer-jit-cache 0.6.5+cu130" in err and "synthetic" in err and "--allow-synthetic" in err
    assert not (proj / "constraints/pylock.x86_64-py312.toml").exists()
    assert (proj / "constraints/pylock.aarch64-py312.toml").exists()  # the other target's rows are real


def test_allow_synthetic_writes_it_and_check_flags_it(project, capsys):
    proj, www = project
    _set_digest(www, JIT)
    assert lock("--allow-synthetic") == 0
    assert stand_in(JIT) in (proj / "constraints/pylock.x86_64-py312.toml").read_text()
    capsys.readouterr()
    assert cli.main(["check", "constraints/pylock.x86_64-py312.toml"]) == 1
    out = capsys.readouterr()
    assert "flashinfer-jit-cache" in out.out + out.err and "stand-in" in out.out + out.err


def test_a_digest_the_snapshot_lists_as_synthetic_is_refused(project, tmp_path, capsys):
    """Not the scheme: a row the snapshot's manifest marks (as the bundled generator does)."""
    proj, www = project
    snap = tmp_path / "snap"
    record_snapshot(proj, snap)
    real = _set_digest(www, JIT, digest="0" * 64)
    _set_digest(www, JIT, digest=real)  # put back: the page stays as recorded, its digest real
    manifest = json.loads((snap / "manifest.json").read_text())
    manifest["synthetic_sha256"] = [real]
    (snap / "manifest.json").write_text(json.dumps(manifest))
    assert synthetic_digests(snap) == {real}
    assert lock("--snapshot", str(snap), "--target", "x86_64-py312") == 1
    assert "flashinfer-jit-cache 0.6.5+cu130" in capsys.readouterr().err


def test_the_bundled_snapshot_lists_its_stand_ins_and_no_real_digest():
    listed = synthetic_digests(BUNDLED)
    assert stand_in("flashinfer_jit_cache-0.6.4+cu130-cp39-abi3-manylinux_2_28_x86_64.whl") in listed
    assert len(listed) == 378  # the README's page table: the synthetic column, summed
    for lock_file in (ROOT / "constraints").glob("pylock.*.toml"):  # the repository's own locks are real
        assert not listed & set(re.findall(r'sha256 = "([0-9a-f]{64})"', lock_file.read_text())), lock_file


def test_resolve_from_the_bundled_snapshot_notes_stand_ins(tmp_path, capsys):
    rc = cli.main(
        [
            "resolve",
            "--snapshot",
            str(BUNDLED),
            "--cache-dir",
            str(tmp_path),
            "--python",
            "3.12",
            "--platform",
            "x86_64-manylinux_2_28",
            "--installed",
            "torch==2.12.0.dev20260307+cu130",
            "--flashinfer",
            "nightly",
            "--format",
            "json",
        ]
    )
    assert rc == 0
    plan = json.loads(capsys.readouterr().out)
    notes = [n for n in plan["notes"] if "stand-in" in n]
    assert any(n.startswith("flashinfer-jit-cache 0.6.6.dev20260306+cu130") for n in notes), plan["notes"]
