"""`doctor` and the GPUs: --require-api in a real venv with fake FlashInfer packages, arch floors, and
a minimal 0.7 install (the shim plus the providers the GPUs need) accepted as complete."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from support.doctor_venvs import NIGHTLY, TVM_RANGE_061, _doctor, _script, _venv_with, checks_of, dist, smi, stack

from resolve_gpu_stack.cli import app as cli
from resolve_gpu_stack.env.doctor import ImportResult

RTX_PRO = ("NVIDIA RTX PRO 6000 Blackwell", (12, 0))
MM_MXFP8 = """
def mm_mxfp8(a, b, a_descale, b_descale, out=None, out_dtype=None, backend: "Literal['cutlass', 'auto']" = "auto"):
    return None
"""


def test_minimal_07_install_is_complete_for_its_gpus() -> None:
    env = stack(
        fi="0.7.0",
        jit=None,
        extra=(
            dist("flashinfer-jit-cache", "0.7.0+cu130", "flashinfer-jit-cache-sm90a==0.7.0+cu130", "flashinfer-jit-cache-sm120a==0.7.0+cu130"),
            dist("flashinfer-jit-cache-sm120a", "0.7.0+cu130"),
        ),
    )
    checks = checks_of(env, imported=ImportResult(ok=True, version="0.7.0"), gpus=smi(RTX_PRO, RTX_PRO))
    assert checks["flashinfer-components"].status == "pass", checks["flashinfer-components"].message
    assert checks["flashinfer-alignment"].status == "pass"
    assert checks["gpu-arch"].status == "pass" and "SASS 12.0a" in checks["gpu-arch"].message
    # the same install on an H100: no provider for sm90 installed, kernels would be JIT-compiled
    h100 = checks_of(env, imported=ImportResult(ok=True, version="0.7.0"), gpus=smi(("NVIDIA H100", (9, 0))))["gpu-arch"]
    assert h100.status == "fail" and "no kernels for sm_90" in h100.message and "JIT-compiled" in h100.message


def test_gpu_older_than_its_first_flashinfer_fails() -> None:
    check = checks_of(stack(), gpus=smi(("NVIDIA Rubin", (10, 7))))["gpu-arch"]
    assert check.status == "fail" and "sm107 needs flashinfer >= 0.6.16rc1, 0.6.5 is installed" in check.message


def test_api_check_is_only_there_when_asked() -> None:
    from resolve_gpu_stack.data.definitions import load_definitions
    from resolve_gpu_stack.env.doctor import run_checks

    defs = load_definitions()
    plain = run_checks(stack(), defs, import_result=ImportResult(ok=True, version="0.6.5"), gpus=None)
    assert "flashinfer-api" not in {c.name for c in plain}
    asked = run_checks(
        stack(), defs, import_result=ImportResult(ok=True, version="0.6.5", apis=(("mm_mxfp8", True),)), gpus=smi(RTX_PRO), require_api=("mm_mxfp8",)
    )
    api = {c.name: c for c in asked}["flashinfer-api"]
    assert api.status == "fail" and "mm_mxfp8 on sm120 needs flashinfer >= 0.6.8rc1" in api.message
    failed_import = run_checks(stack(), defs, import_result=ImportResult(ok=False, error="boom"), gpus=None, require_api=("mm_mxfp8",))
    assert {c.name: c for c in failed_import}["flashinfer-api"].status == "fail"


def test_unknown_api_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["doctor", "--require-api", "mm_mxfp9"]) == 2
    assert "did you mean 'mm_mxfp8'" in capsys.readouterr().err


@pytest.fixture(scope="module")
def fake_wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from support.wheels import build_wheel

    d = tmp_path_factory.mktemp("fake-fi")
    out = {
        "torch": build_wheel(d, "torch", NIGHTLY, files={"torch/__init__.py": f'__version__ = "{NIGHTLY}"\n'.encode()}).path,
        "tvm": build_wheel(d, "apache-tvm-ffi", "0.1.9").path,
    }
    for version, body in (("0.6.3", ""), ("0.6.5", MM_MXFP8)):
        init = f"import torch  # noqa: F401\n__version__ = '{version}'\n{body}"
        out[version] = build_wheel(d, "flashinfer-python", version, requires=["torch", TVM_RANGE_061], files={"flashinfer/__init__.py": init.encode()}).path
    return out


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX venv layout and shell scripts")
@pytest.mark.parametrize(("version", "code"), [("0.6.3", 1), ("0.6.5", 0)])
def test_doctor_require_api_in_a_real_venv(
    tmp_path: Path, fake_wheels: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, version: str, code: int
) -> None:
    python = _venv_with(tmp_path, [fake_wheels[k] for k in ("torch", "tvm", version)])
    got, checks, _ = _doctor(
        capsys, "--python", str(python), "--require-api", "mm_mxfp8", "--require-api", "mm_mxfp8:cutlass", "--nvidia-smi", str(tmp_path / "no-nvidia-smi")
    )
    api = checks["flashinfer-api"]
    assert got == code, checks
    assert checks["gpu-arch"]["status"] == "skip"
    if code:
        assert api["status"] == "fail" and "flashinfer 0.6.3 has no mm_mxfp8" in api["message"] and "from 0.6.4" in api["message"]
    else:
        assert api["status"] == "pass" and api["details"]["found"] == {"mm_mxfp8": True, "mm_mxfp8:cutlass": True}
        # a backend the signature does not list is missing
        got, checks, _ = _doctor(capsys, "--python", str(python), "--require-api", "mm_mxfp8:trtllm", "--nvidia-smi", str(tmp_path / "none"))
        assert got == 1 and "no mm_mxfp8 with backend='trtllm'" in checks["flashinfer-api"]["message"]
        # on an RTX PRO 6000 (fake nvidia-smi on PATH), 0.6.5 is below mm_mxfp8's sm120 floor
        (tmp_path / "bin").mkdir()
        _script(tmp_path / "bin" / "nvidia-smi", 'echo "NVIDIA RTX PRO 6000 Blackwell, 12.0"\n')
        monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
        got, checks, _ = _doctor(capsys, "--python", str(python), "--require-api", "mm_mxfp8")
        assert got == 1 and "mm_mxfp8 on sm120 needs flashinfer >= 0.6.8rc1" in checks["flashinfer-api"]["message"]
