"""The first hour, fifth pass (issue 52 item 7): each miss a new user met walking the guides, through
the command line the page shows."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import REPO


def cli(home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache")}
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run([sys.executable, "-m", "resolve_gpu_stack", *argv], capture_output=True, text=True, env=env, timeout=120, check=False)


@pytest.mark.parametrize("argv", [["doctor"], ["resolve", "--torch", "installed", "--with", "sglang"], ["install", "--dry-run"]])
def test_a_quoted_home_path_names_the_target_the_page_means(tmp_path: Path, argv: list[str]):
    """README and the serving guide write `--python ~/gpu/bin/python`; a newcomer who quotes it (or
    writes `--python=~/...`, where no shell expands it) got "no such file" for a folder named `~`
    under the current one. A leading `~` is the home folder, as the shell reads it unquoted."""
    target = tmp_path / "home" / "gpu" / "bin" / "python"
    target.parent.mkdir(parents=True)
    target.symlink_to(sys.executable)
    done = cli(tmp_path / "home", argv[0], "--python", "~/gpu/bin/python", *argv[1:], "--format", "json")
    assert "no such file" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert str(target) in done.stdout + done.stderr  # the interpreter it read (a torch-less one: said so)
    docs = (REPO / "README.md").read_text(encoding="utf-8") + (REPO / "docs/guides/serving-frameworks.md").read_text(encoding="utf-8")
    assert "--python ~/gpu/bin/python" in docs  # the target the pages name


def test_an_unreachable_index_names_the_snapshot_to_replay(tmp_path: Path):
    """Troubleshooting's `cannot resolve HOST` section: with no network, the hint names the snapshot
    bundled.toml lists first for PyPI's torch (2026-12-07), as the page says; a torch whose CUDA
    could not be read says its page may not have answered, and names the same way out."""
    indexes = [f"{name}=https://{name}.invalid/simple/" for name in ("pypi", "pytorch", "flashinfer")]
    target = ["--python", "3.12", "--platform", "x86_64-manylinux_2_34", "--installed", "torch==2.15.0", *(w for i in indexes for w in ("--index", i))]
    done = cli(tmp_path, *target, "--cuda", "cu132")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "indexes/snapshots/2026-12-07" in done.stderr, done.stderr
    page = (REPO / "docs/guides/troubleshooting.md").read_text(encoding="utf-8")
    assert "`2026-12-07` for PyPI's torch" in page
    done = cli(tmp_path, *target)
    assert done.returncode == 2 and "did not answer" in done.stderr and "--snapshot" in done.stderr, done.stderr


def test_the_installing_guide_names_every_exit_of_doctor():
    """The installing guide said doctor exits 0 or 1; a host without the NVIDIA driver exits 5
    (``NO_DRIVER_EXIT``, held end to end by tests/env/test_doctor_abi_imports.py): the page names it."""
    from resolve_gpu_stack.env.doctor import NO_DRIVER_EXIT

    page = (REPO / "docs/guides/installing.md").read_text(encoding="utf-8")
    doctor = page[page.index("## Doctor") :]
    assert f"; {NO_DRIVER_EXIT} when nothing failed but the host has no NVIDIA driver" in " ".join(doctor.split())


def test_the_readme_says_the_overrides_file_a_constraints_lock_writes(tmp_path: Path):
    """README's `lock ... -o constraints.txt` writes overrides.txt beside it (the kept torch over a
    framework's pin reaches uv as an override): a file the page did not name appeared."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    line = next(line for line in readme.splitlines() if "-o constraints.txt" in line)
    assert "overrides.txt" in line
    snap = REPO / "indexes/snapshots/2026-03-07"
    argv = ["lock", "--python", "3.12", "--platform", "x86_64-manylinux_2_28", "--installed", "torch==2.12.0.dev20260307+cu130", "--snapshot", str(snap)]
    done = subprocess.run(
        [sys.executable, "-m", "resolve_gpu_stack", *argv, "-o", "constraints.txt"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")},
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "overrides.txt").is_file() and "wrote overrides.txt" in done.stderr + done.stdout


@pytest.mark.parametrize("door", [[], ["lock", "-o", "pylock.gpu.toml"]])
def test_a_kept_nightly_under_stable_names_the_downgrade_word(tmp_path: Path, door: list[str]):
    """The kept-torch page's table: `--torch stable` keeps an installed nightly, with a note naming the
    move. The note said `--upgrade-package torch` moves it; a newcomer who ran that was refused (a
    stable 2.10.0 is lower than the 2.12 nightly). The note names --allow-downgrade for that case."""
    snap = REPO / "indexes/snapshots/2026-03-07"
    target = ["--python", "3.12", "--platform", "x86_64-manylinux_2_28", "--installed", "torch==2.12.0.dev20260307+cu130", "--snapshot", str(snap)]
    done = subprocess.run(
        [sys.executable, "-m", "resolve_gpu_stack", *door[:1], *target, "--torch", "stable", *door[1:], "--format", "json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")},
    )
    assert done.returncode == 0, done.stderr
    written = (tmp_path / "pylock.gpu.toml").read_text(encoding="utf-8") if door else ""  # lock -o records the plan's notes in the lock
    said = " ".join((done.stdout + done.stderr + written).split())
    assert "(a nightly build) is kept: --torch stable" in said and "--upgrade-package torch moves it to the newest stable build (with --allow-downgrade" in said
    refused = subprocess.run(
        [sys.executable, "-m", "resolve_gpu_stack", *target, "--torch", "stable", "--upgrade-package", "torch"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")},
    )
    assert refused.returncode == 1 and "would downgrade torch" in refused.stderr and "--allow-downgrade" in refused.stderr, refused.stderr
