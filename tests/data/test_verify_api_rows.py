"""indexes/verify_api_rows.py: the API rows of gpus.toml against released flashinfer-python wheels.

Offline: a loopback PyPI serving tiny flashinfer-python wheels whose gemm module says which GPUs
each backend's requirement allows (as FlashInfer's ``@supported_compute_capability`` does); the
script reads them by range requests. Live: the same against the PyPI of your uv/pip configuration,
skipped when it cannot be reached.
"""

from __future__ import annotations

import importlib.util
import socket
import sys
import textwrap
from pathlib import Path

import pytest
from support.framework_world import pypi_native
from support.paths import REPO
from support.server import IndexServer
from support.world import World

_spec = importlib.util.spec_from_file_location("verify_api_rows", REPO / "indexes" / "verify_api_rows.py")
assert _spec is not None and _spec.loader is not None
verify_api_rows = importlib.util.module_from_spec(_spec)
sys.modules["verify_api_rows"] = verify_api_rows  # its dataclasses look their module up
_spec.loader.exec_module(verify_api_rows)

# version -> {backend: GPUs its requirement allows}; "cute-dsl" appears in 0.6.6, SM107 in 0.6.18rc10
RELEASES = {
    "0.6.3": None,  # no mm_mxfp8 yet
    "0.6.4": {"cutlass": [100, 103]},
    "0.6.6": {"cutlass": [100, 103], "cute_dsl": [100, 103]},
    "0.6.17": {"cutlass": [100, 103, 107], "cute_dsl": [100, 103]},
    "0.6.18rc10": {"cutlass": [100, 103, 107], "cute_dsl": [100, 103, 107]},
    "0.6.18": {"cutlass": [100, 103, 107], "cute_dsl": [100, 103, 107]},
}


def flashinfer_files(backends: dict[str, list[int]] | None) -> dict[str, bytes]:
    files = {"flashinfer/__init__.py": b"from .gemm import bmm_fp8\n" + (b"from .gemm import mm_mxfp8 as mm_mxfp8\n" if backends else b"")}
    body = "from .gemm_base import bmm_fp8\n" + ("from .gemm_base import mm_mxfp8\n" if backends else "")
    files["flashinfer/gemm/__init__.py"] = body.encode()
    base = "def bmm_fp8(a, b):\n    pass\n"
    if backends:
        literal = ", ".join(f'"{b.replace("_", "-")}"' for b in backends)
        base += f'\ndef mm_mxfp8(a, b, backend: Literal[{literal}, "auto"] = "auto"):\n    pass\n'
        for backend, archs in backends.items():
            base += f"\n@supported_compute_capability({archs})\ndef _{backend}_gemm_mxfp8_requirement(a, b):\n    return True\n"
    files["flashinfer/gemm/gemm_base.py"] = base.encode()
    return files


def gpus_toml(tmp_path: Path, rows: str) -> Path:
    """indexes/gpus.toml with its API rows replaced by ``rows``."""
    text = (REPO / "indexes" / "gpus.toml").read_text()
    path = tmp_path / "gpus.toml"
    path.write_text(text[: text.index("\n[[api]]\n") + 1] + textwrap.dedent(rows))
    return path


ROWS = """\
    [[api]]
    name = "mm_mxfp8"
    symbol = "mm_mxfp8"
    flashinfer = "0.6.4"
    runs-on = ["sm100", "sm103", "sm107"]
    source = "test"

    [[api.gpu]]
    archs = ["sm107"]
    flashinfer = "0.6.17"
    source = "test"

    [[api]]
    name = "mm_mxfp8:cute-dsl"
    symbol = "mm_mxfp8"
    backend = "cute-dsl"
    flashinfer = "0.6.6"
    runs-on = ["sm100", "sm103", "sm107"]
    source = "test"

    [[api.gpu]]
    archs = ["sm107"]
    flashinfer = "0.6.18rc10"
    source = "test"
    """


@pytest.fixture
def pypi(tmp_path: Path):
    w = World(tmp_path / "www")
    for version, backends in RELEASES.items():
        pypi_native(w, "flashinfer-python", version, "py3-none-any", flashinfer_files(backends))
    with IndexServer(w.root) as srv:
        w.write(srv.url)
        yield srv


def run(capsys, *argv: str) -> tuple[int, str]:
    rc = verify_api_rows.main(list(argv))
    return rc, capsys.readouterr().out


def test_rows_that_agree_with_the_released_wheels_pass(pypi, tmp_path, capsys):
    rc, out = run(capsys, "--index", f"{pypi.url}simple/", "--gpus-toml", str(gpus_toml(tmp_path, ROWS)))
    assert rc == 0, out
    assert "6 released flashinfer-python wheels; 2 API rows" in out
    assert "ok   mm_mxfp8:cute-dsl" in out and "every API row agrees" in out
    wheel_gets = [headers for method, path, headers in pypi.log if method == "GET" and path.startswith("/files/")]
    assert wheel_gets and all("range" in {k.lower() for k in headers} for headers in wheel_gets)  # members by ranges, never the whole wheel


def test_a_stale_row_is_named_with_the_release_that_shows_it(pypi, tmp_path, capsys):
    stale = ROWS.replace(
        'runs-on = ["sm100", "sm103", "sm107"]\n    source = "test"\n\n    [[api.gpu]]\n    archs = ["sm107"]\n    flashinfer = "0.6.18rc10"\n    source = "test"\n',
        'runs-on = ["sm100", "sm103"]\n    source = "test"\n',
    )
    assert stale != ROWS
    rc, out = run(
        capsys, "--index", f"{pypi.url}simple/", "--gpus-toml", str(gpus_toml(tmp_path, stale.replace('flashinfer = "0.6.4"', 'flashinfer = "0.6.6"', 1)))
    )
    assert rc == 1
    assert "FAIL mm_mxfp8:cute-dsl\n     mm_mxfp8:cute-dsl: sm107 is supported from 0.6.18rc10 on, but runs-on leaves it out" in out
    assert "mm_mxfp8: 0.6.4 already has it (from 0.6.4 on); the floor 0.6.6 is too high" in out


def test_a_floor_without_the_api_is_named(pypi, tmp_path, capsys):
    rc, out = run(
        capsys, "--index", f"{pypi.url}simple/", "--gpus-toml", str(gpus_toml(tmp_path, ROWS.replace('flashinfer = "0.6.18rc10"', 'flashinfer = "0.6.17"')))
    )
    assert rc == 1
    assert "mm_mxfp8:cute-dsl on sm107: 0.6.17 (at or above the floor 0.6.17) does not; the first release that does is 0.6.18rc10" in out


def test_offline_it_says_nothing_was_verified_and_exits_0(tmp_path, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rc = verify_api_rows.main(["--index", f"http://127.0.0.1:{port}/simple/", "--timeout", "2"])
    err = capsys.readouterr().err
    assert rc == 0 and err.startswith("skipped: the index cannot be reached") and "nothing was verified" in err


@pytest.mark.live
def test_the_real_rows_agree_with_the_released_wheels(capsys):
    """Every API row of indexes/gpus.toml against the real releases (your uv/pip PyPI)."""
    rc = verify_api_rows.main(["--timeout", "20"])
    captured = capsys.readouterr()
    if captured.err.startswith("skipped:"):
        pytest.skip(captured.err.strip())
    assert rc == 0, captured.out
