"""`install --dry-run` (issue 12 item 5, issue 13 item 8): installed -> planned per package, why, and
the bytes an install would download, with no download at all: offline, with an empty cache, on the
bundled snapshot. The target is a stand-in interpreter: a script that answers the probe as a
Python 3.12 on x86_64 glibc 2.28 with the story's torch nightly installed."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
from support.install_world import fake_python
from support.paths import SNAPSHOT

from resolve_gpu_stack.cli.app import main

NIGHTLY = "2.12.0.dev20260307+cu130"


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    def refuse(self, address):
        raise AssertionError(f"network access to {address} during a dry run")

    monkeypatch.setattr(socket.socket, "connect", refuse)


def dry_run(capsys, tmp_path: Path, python: Path, *flags: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(
        ["install", "--dry-run", "--python", str(python), "--snapshot", str(SNAPSHOT), "--cache-dir", str(tmp_path / "cache"), "--uv", "/bin/true", *flags]
    )
    out, err = capsys.readouterr()
    return code, out, err


def test_dry_run_downloads_nothing_and_says_what_would_change(tmp_path, capsys):
    python = fake_python(tmp_path / "venv", {"torch": NIGHTLY, "flashinfer-cubin": "0.6.4", "numpy": "2.4.2"})
    code, out, err = dry_run(capsys, tmp_path, python, "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["schema"] == "resolve-gpu-stack/install/v1" and report["dry_run"] is True
    rows = {p["name"]: p for p in report["packages"]}
    assert (rows["torch"]["action"], rows["torch"]["before"], rows["torch"]["version"]) == ("keep", NIGHTLY, NIGHTLY)
    assert (rows["flashinfer-cubin"]["action"], rows["flashinfer-cubin"]["before"], rows["flashinfer-cubin"]["version"]) == ("upgrade", "0.6.4", "0.6.5")
    assert (rows["flashinfer-python"]["action"], rows["flashinfer-python"]["before"]) == ("install", None)
    assert rows["numpy"]["action"] == "keep"
    assert rows["flashinfer-cubin"]["reason"].startswith("== flashinfer-python")
    assert "newest FlashInfer" in rows["flashinfer-python"]["reason"]
    download = report["download"]
    sized = sum(p["size"] or 0 for p in report["packages"] if p["action"] != "keep")
    assert download["bytes"] == sized > 2_000_000_000 and download["cached"] == 0
    assert download["files"] == sum(1 for p in report["packages"] if p["action"] != "keep")
    assert "flashinfer-jit-cache" in download["unknown_size"]  # the snapshot's page gives no size for it
    # nothing was downloaded or written: the cache holds no wheel, no partial file
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file() and "wheels" in p.parts]


def test_dry_run_table_names_each_move_and_the_total(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    python = fake_python(tmp_path / "venv", {"torch": NIGHTLY, "flashinfer-cubin": "0.6.4"})
    code, out, err = dry_run(capsys, tmp_path, python, "--format", "table")
    assert code == 0, err
    assert "Would change in" in out
    lines = out.splitlines()
    [fi] = [line for line in lines if line.startswith("│") and line.strip("│ ").startswith("flashinfer-cubin ")]
    assert "upgrade" in fi and "0.6.4" in fi and "0.6.5" in fi
    assert any("2.12.0.dev20260307+cu130" in line for line in lines)  # never cut at 80 columns
    assert any("0.6.5+cu130" in line for line in lines)
    assert "  flashinfer-cubin upgrade 0.6.4 -> 0.6.5: == flashinfer-python" in out  # why it moves
    assert "  flashinfer-jit-cache install 0.6.5+cu130: == flashinfer-python public version + CUDA label" in out
    assert "would download " in out and " GB (" in out and "of a size the index does not give" in out
    assert "dry run, nothing changed:" in out


def test_dry_run_with_a_lock_output_is_refused(tmp_path, capsys):
    python = fake_python(tmp_path / "venv", {"torch": NIGHTLY})
    code, out, err = dry_run(capsys, tmp_path, python, "-o", str(tmp_path / "pylock.toml"))
    assert code == 2 and "--dry-run writes nothing" in err and not (tmp_path / "pylock.toml").exists()


def test_install_without_a_venv_is_refused_unless_system(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    python = fake_python(tmp_path / "sys", {"torch": NIGHTLY})
    (python.parent / "python3").symlink_to(python)
    monkeypatch.setenv("PATH", f"{python.parent}{os.pathsep}{os.environ['PATH']}")
    capsys.readouterr()
    base = ["install", "--dry-run", "--snapshot", str(SNAPSHOT), "--cache-dir", str(tmp_path / "cache"), "--uv", "/bin/true", "--format", "json"]
    assert main(base) == 2
    err = capsys.readouterr().err
    assert "no virtual environment is active" in err and "--system" in err
    assert main([*base, "--system"]) == 0
    assert json.loads(capsys.readouterr().out)["python"] == str(python.parent / "python3")
