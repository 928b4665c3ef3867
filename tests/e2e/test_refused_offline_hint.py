"""A host that refuses the connection (nothing listens on the index's port, or the machine is
offline) is "cannot reach an index" as much as a name that does not resolve: every door that
reads an index names the offline way out, the bundled snapshot that fits the target's torch
(``indexes/snapshots/bundled.toml``), as it does for a DNS failure.

Real loopback sockets: a port bound then closed, so connections to it are refused.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from resolve_gpu_stack.cli.app import main

pytestmark = pytest.mark.usefixtures("fast_backoff")  # the retries without their waits: the hint is what is tested

PLATFORM = ["--platform", "x86_64-manylinux_2_28"]
NIGHTLY_TARGET = ["--python", "3.12", *PLATFORM, "--installed", "torch==2.15.0+cu130"]  # a PyTorch-index build
PYPI_TARGET = ["--python", "3.12", *PLATFORM, "--installed", "torch==2.15.0", "--cuda", "cu132"]  # PyPI's torch
FITS_PYTORCH = "replay a recorded snapshot with --snapshot DIR: a checkout has indexes/snapshots/2026-03-07"
FITS_PYPI = "replay a recorded snapshot with --snapshot DIR: a checkout has indexes/snapshots/2026-12-07"


@pytest.fixture
def dead(tmp_path: Path) -> list[str]:
    """Index flags whose every URL is a loopback port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    return ["--index", f"pytorch={base}/whl/", "--index", f"flashinfer={base}/fi/", "--index", f"pypi={base}/simple/", "--cache-dir", str(tmp_path / "c")]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def hint_of(err: str) -> str:
    hints = [line for line in err.splitlines() if line.startswith("hint: ")]
    assert len(hints) == 1, err
    return hints[0]


DOORS = {
    "resolve": ["resolve"],
    "lock -o": ["lock", "-o", "pylock.dead.toml"],
    "candidates": ["candidates", "numpy"],
    "inspect": ["inspect", "numpy==2.2.0"],
}


CASES = [(door, NIGHTLY_TARGET, FITS_PYTORCH) for door in sorted(DOORS)] + [(door, PYPI_TARGET, FITS_PYPI) for door in ("candidates", "resolve")]


@pytest.mark.parametrize(("door", "target", "fits"), CASES, ids=[f"{d}-{'pypi' if t is PYPI_TARGET else 'pytorch'}-torch" for d, t, _ in CASES])
def test_a_refused_connection_names_the_snapshot_that_fits(capsys, tmp_path, monkeypatch, dead, door, target, fits) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, *DOORS[door], *target, *dead, "--format", "json")
    assert code != 0 and out == "" and "Traceback" not in err, err
    assert "connection refused" in err, err
    hint = hint_of(err)
    assert fits in hint and "check the index URL" in hint, hint
    assert not (tmp_path / "pylock.dead.toml").exists()


def test_install_dry_run_names_it_too(capsys, tmp_path, dead) -> None:  # type: ignore[no-untyped-def]
    """A real interpreter (this one: no torch, so the newest nightly for --cuda is looked up)."""
    code, out, err = run(capsys, "install", "--dry-run", "--python", sys.executable, "--cuda", "cu130", *dead, "--format", "json")
    assert code != 0 and out == "" and "Traceback" not in err, err
    assert "connection refused" in err and FITS_PYTORCH in hint_of(err), err


def test_a_dns_failure_and_a_refused_connection_give_the_same_way_out(capsys, tmp_path, dead) -> None:  # type: ignore[no-untyped-def]
    """The hint does not depend on how the host could not be reached."""
    code, _, refused = run(capsys, "resolve", *NIGHTLY_TARGET, *dead)
    assert code != 0
    flags = [f.replace(f.split("/")[2], "nohost.invalid") if f.startswith(("pytorch=", "flashinfer=", "pypi=")) else f for f in dead]
    flags = [f.replace("http://", "https://") for f in flags]
    code, _, dns = run(capsys, "resolve", *NIGHTLY_TARGET, *flags)
    assert code != 0 and "cannot resolve nohost.invalid" in dns, dns
    assert hint_of(refused) == hint_of(dns)
