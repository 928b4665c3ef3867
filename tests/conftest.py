"""The fixtures every test folder shares. Test files lie in folders that mirror the floors of src/
(e2e/ for the door tests that cross floors); what they share lives in the support/ package, imported
as ``support.<module>`` with tests/ on sys.path (put there below). Fixtures defined beside their
helpers in support/ are registered here, so any folder may ask for them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from support.abi_doors import forged  # noqa: E402, F401  (the abi world with the forged evilkern, per module)
from support.install_world import exported  # noqa: E402, F401  (a lock exported once as a wheelhouse)
from support.lock_faults import run  # noqa: E402, F401  (the story world served, a cache dir and a lock path)
from support.server import IndexServer  # noqa: E402
from support.uv_world import repo  # noqa: E402, F401  (demo-a/b/c wheels on a loopback index)

import resolve_gpu_stack.cli.render as render  # noqa: E402


@pytest.fixture
def index_server(tmp_path: Path):
    """A loopback HTTP server over an empty tree under tmp_path/'www'."""
    root = tmp_path / "www"
    root.mkdir()
    with IndexServer(root) as srv:
        yield srv


@pytest.fixture
def uv_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The environment real uv and pip run in: a private uv cache, no Python downloads, and none of
    this machine's index configuration (every install must come from the test's own servers)."""
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.setenv("UV_PYTHON_DOWNLOADS", "never")
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    for var in ("VIRTUAL_ENV", "UV_INDEX_URL", "UV_DEFAULT_INDEX", "UV_EXTRA_INDEX_URL", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"):
        monkeypatch.delenv(var, raising=False)
    return dict(os.environ)


@pytest.fixture
def cert(tmp_path: Path) -> tuple[Path, Path]:
    """A throwaway certificate and key for 127.0.0.1 (the openssl command makes them; skipped without it)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("needs the openssl command to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    made = subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        capture_output=True,
    )
    if made.returncode != 0:
        pytest.skip(f"openssl cannot make a test certificate: {made.stderr.decode(errors='replace')[-200:]}")
    return cert, key


@pytest.fixture(autouse=True)
def every_json_output_is_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every JSON object a command prints (``render.print_json``) matches its schema in schemas/."""
    from support.output_schemas import validate

    printed = render.print_json

    def checked(data, out):
        if isinstance(data, dict) and "schema" in data:
            validate(data)
        printed(data, out)

    monkeypatch.setattr(render, "print_json", checked)


@pytest.fixture
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries without the exponential wait (Retry-After is still honoured: it does not use this)."""
    from resolve_gpu_stack.net.transport import Transport

    monkeypatch.setattr(Transport, "backoff", lambda self, attempt: 0.01)
