"""`doctor`: the pure checks on hand-built environments, then the real thing in real venvs."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from support.doctor_venvs import DEFS, NIGHTLY, TVM_RANGE_061, _doctor, _script, _uv, _venv_with, checks_of, dist, environment, smi, stack

from resolve_gpu_stack.cli import app as cli
from resolve_gpu_stack.cli.cmd_doctor import probe_import, query_gpus
from resolve_gpu_stack.env.doctor import (
    SCHEMA,
    Check,
    Gpu,
    GpuQuery,
    ImportResult,
    doctor_ok,
    parse_nvidia_smi,
    provider_arch,
    report_json,
    run_checks,
    sass_covers,
)
from resolve_gpu_stack.env.probe import Environment, InstalledDistribution

RTX_PRO = ("NVIDIA RTX PRO 6000 Blackwell Server Edition", (12, 0))

# -- the whole report ---------------------------------------------------------------------------


def test_aligned_stack_passes_every_check() -> None:
    checks = checks_of(stack(), gpus=smi(RTX_PRO, RTX_PRO))
    assert list(checks) == ["torch", "flashinfer-components", "flashinfer-alignment", "apache-tvm-ffi", "torch-abi", "flashinfer-import", "gpu-arch"]
    assert {n: c.status for n, c in checks.items()} == dict.fromkeys(checks, "pass")
    assert doctor_ok(checks.values())
    assert "CUDA 13.0" in checks["torch"].message
    assert "sm_120 (2x NVIDIA RTX PRO 6000" in checks["gpu-arch"].message and "12.0f" in checks["gpu-arch"].message


def test_without_nvidia_smi_the_gpu_is_skipped_and_says_so() -> None:
    checks = checks_of(stack(), gpus=None)
    gpu = checks["gpu-arch"]
    assert gpu.status == "skip" and gpu.message == "no nvidia-smi: GPU architecture not checked"
    assert doctor_ok(checks.values())
    missing = checks_of(stack(), gpus=GpuQuery(tool="/opt/nvidia-smi", found=False))["gpu-arch"]
    assert missing.status == "skip" and "/opt/nvidia-smi" in missing.message and "not checked" in missing.message


def test_report_json_shape() -> None:
    checks = run_checks(stack(cubin="0.6.4"), DEFS, import_result=None, gpus=None)
    report = report_json("/venv/bin/python", checks)
    assert report["schema"] == SCHEMA == "resolve-gpu-stack/doctor/v1"
    assert report["python"] == "/venv/bin/python" and report["ok"] is False
    assert [set(c) for c in report["checks"]] == [{"name", "status", "message", "details"}] * 7
    json.dumps(report)  # JSON-ready all the way down


def test_check_refuses_an_unknown_status() -> None:
    with pytest.raises(ValueError, match="unknown status 'ok'"):
        Check("x", "ok", "")


def test_no_flashinfer_at_all_skips_the_flashinfer_checks() -> None:
    checks = checks_of(environment(dist("torch", NIGHTLY)), imported=None, gpus=smi(RTX_PRO))
    for name in ("flashinfer-components", "flashinfer-alignment", "apache-tvm-ffi", "flashinfer-import", "gpu-arch"):
        assert checks[name].status == "skip", name
    assert checks["flashinfer-components"].message == "FlashInfer is not installed"
    assert checks["gpu-arch"].message.startswith("GPUs sm_120")
    assert doctor_ok(checks.values())


# -- torch ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("torch", "requires", "status", "words"),
    [
        (NIGHTLY, (), "pass", ["2.12.0.dev20260307+cu130", "CUDA 13.0"]),
        ("2.9.1+cu128", (), "pass", ["CUDA 12.8"]),
        ("2.9.1+cpu", (), "fail", ["CPU-only", "+cuNNN"]),
        ("2.9.1+rocm6.4", (), "fail", ["ROCm"]),
        (
            "2.9.1",
            ('nvidia-cuda-runtime-cu12==12.8.90; platform_system == "Linux" and platform_machine == "x86_64"',),
            "pass",
            ["no +cuNNN label", "nvidia-cuda-runtime-cu12==12.8.90", "CUDA 12.8, cu128"],
        ),
        ("2.9.1", ('nvidia-cuda-runtime-cu12==12.8.90; platform_machine == "aarch64"',), "warn", ["unknown"]),
        # torch 2.11.0 from PyPI, as installed on a real H200 machine: no +cuNNN, cuda-toolkit pinned
        (
            "2.11.0",
            ('cuda-toolkit[cublas,cudart,cufft,cufile,cupti,curand,cusolver,cusparse,nvjitlink,nvrtc,nvtx]==13.0.2; platform_system == "Linux"',),
            "pass",
            ["no +cuNNN label", "cuda-toolkit", "==13.0.2", "CUDA 13.0, cu130"],
        ),
        ("2.6.0a0+ecf3bae40a.nv25.01", (), "warn", ["no +cuNNN label", "CUDA version is unknown"]),
    ],
)
def test_torch_build(torch: str, requires: tuple[str, ...], status: str, words: list[str]) -> None:
    check = checks_of(environment(dist("torch", torch, *requires)), imported=None)["torch"]
    assert check.status == status, check.message
    for word in words:
        assert word in check.message


def test_missing_torch_fails() -> None:
    check = checks_of(environment(), imported=None)["torch"]
    assert check.status == "fail" and "torch is not installed in /venv/bin/python" == check.message


def test_cuda_inferred_from_a_pypi_torch_is_used_for_the_labels() -> None:
    env = stack(torch="2.9.1", extra=())
    torch = dist("torch", "2.9.1", "nvidia-cuda-runtime-cu12==12.8.90")
    env = replace(env, distributions={**env.distributions, torch.name: torch})
    check = checks_of(env)["flashinfer-alignment"]
    assert check.status == "fail" and "libcudart.so.13" in check.message


# -- components and alignment ------------------------------------------------------------------------

ALIGNMENT_CASES = [
    # (id, environment, failing check, words in its message)
    (
        "cubin 0.6.8.post1 vs python 0.6.10",
        stack(fi="0.6.10", cubin="0.6.8.post1"),
        "flashinfer-alignment",
        ["flashinfer-cubin 0.6.8.post1", "flashinfer-python 0.6.10", "exact"],
    ),
    (
        "0.6.10+cu129 jit-cache for python 0.6.1",
        stack(fi="0.6.1", torch="2.9.1+cu129", jit="0.6.10+cu129"),
        "flashinfer-alignment",
        ["flashinfer-jit-cache 0.6.10+cu129", "0.6.1+cuNNN", "startswith"],
    ),
    ("0.6.5.post1 jit-cache for python 0.6.5", stack(jit="0.6.5.post1+cu130"), "flashinfer-alignment", ["0.6.5.post1+cu130", "0.6.5+cuNNN"]),
    (
        "cu130 jit-cache with cu128 torch",
        stack(torch="2.9.1+cu128"),
        "flashinfer-alignment",
        ["0.6.5+cu130", "CUDA 13.0", "torch 2.9.1+cu128", "libcudart.so.13", "will not be there"],
    ),
    ("cu129 jit-cache with cu128 torch", stack(label="cu129", torch="2.9.1+cu128"), "flashinfer-alignment", ["CUDA 12.9", "newer than torch's CUDA 12.8"]),
    ("jit-cache without a CUDA label", stack(jit="0.6.5"), "flashinfer-alignment", ["no +cuNNN label"]),
    ("nightly dates differ", stack(fi="0.6.6.dev20260301", cubin="0.6.6.dev20260302"), "flashinfer-alignment", ["0.6.6.dev20260302", "0.6.6.dev20260301"]),
    (
        "cubin without python",
        environment(dist("torch", NIGHTLY), dist("flashinfer-cubin", "0.6.5")),
        "flashinfer-components",
        ["flashinfer-cubin 0.6.5", "without flashinfer-python"],
    ),
    (
        "0.7 shim without providers",
        stack(fi="0.7.1", tvm="0.1.11"),
        "flashinfer-components",
        ["flashinfer-jit-cache 0.7.1+cu130", "without any flashinfer-jit-cache-sm* provider"],
    ),
    (
        "0.7 provider without its shim",
        stack(fi="0.7.1", tvm="0.1.11", jit=None, extra=(dist("flashinfer-jit-cache-sm120f", "0.7.1+cu130"),)),
        "flashinfer-components",
        ["flashinfer-jit-cache-sm120f", "without the flashinfer-jit-cache shim"],
    ),
    (
        "0.7 provider from another build",
        stack(fi="0.7.1", tvm="0.1.11", extra=(dist("flashinfer-jit-cache-sm120f", "0.7.1+cu129"),)),
        "flashinfer-alignment",
        ["flashinfer-jit-cache-sm120f 0.7.1+cu129", "!= the shim flashinfer-jit-cache 0.7.1+cu130"],
    ),
]


@pytest.mark.parametrize(("env", "name", "words"), [c[1:] for c in ALIGNMENT_CASES], ids=[c[0] for c in ALIGNMENT_CASES])
def test_misaligned_components_fail(env: Environment, name: str, words: list[str]) -> None:
    checks = checks_of(env)
    assert checks[name].status == "fail", checks[name].message
    for word in words:
        assert word in checks[name].message
    assert not doctor_ok(checks.values())


def test_aligned_nightly_and_post_releases_and_07_providers_pass() -> None:
    assert checks_of(stack(fi="0.6.6.dev20260301"))["flashinfer-alignment"].status == "pass"
    assert checks_of(stack(fi="0.6.8.post1"))["flashinfer-alignment"].status == "pass"
    env = stack(fi="0.7.1", tvm="0.1.11", extra=(dist("flashinfer-jit-cache-sm120f", "0.7.1+cu130"), dist("flashinfer-jit-cache-sm90a", "0.7.1+cu130")))
    checks = checks_of(env)
    assert checks["flashinfer-components"].status == "pass"
    assert checks["flashinfer-alignment"].status == "pass", checks["flashinfer-alignment"].message


@pytest.mark.parametrize(
    ("cubin", "jit", "words"),
    [
        (None, "same", ["flashinfer-cubin is not installed", "downloaded on first use"]),
        ("same", None, ["flashinfer-jit-cache is not installed", "JIT-compiled", "nvcc"]),
    ],
)
def test_a_missing_optional_component_warns_with_what_is_lost(cubin: str | None, jit: str | None, words: list[str]) -> None:
    checks = checks_of(stack(cubin=cubin, jit=jit))
    check = checks["flashinfer-components"]
    assert check.status == "warn"
    for word in words:
        assert word in check.message
    assert doctor_ok(checks.values())


def test_old_flashinfer_has_no_cubin_or_jit_cache_to_miss() -> None:
    env = environment(dist("torch", "2.8.0+cu128"), dist("flashinfer-python", "0.3.1", "torch"))
    assert checks_of(env, imported=ImportResult(ok=True, version="0.3.1"))["flashinfer-components"].status == "pass"


def test_torch_with_unknown_cuda_cannot_confirm_the_label() -> None:
    check = checks_of(stack(torch="2.6.0a0+ecf3bae40a.nv25.01"))["flashinfer-alignment"]
    assert check.status == "warn" and "torch's CUDA is unknown" in check.message


# -- apache-tvm-ffi ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fi", "tvm", "status", "words"),
    [
        ("0.6.5", "0.1.9", "pass", ["apache-tvm-ffi 0.1.9 within"]),
        ("0.6.1", "0.1.8", "fail", ["apache-tvm-ffi 0.1.8 is outside", "!=0.1.8"]),
        ("0.6.1", "0.1.8.post0", "fail", ["0.1.8.post0"]),
        ("0.6.5", "0.2.0", "fail", ["<0.2"]),
        ("0.6.5", None, "fail", ["apache-tvm-ffi is not installed", ">=0.1.6"]),
    ],
)
def test_tvm_ffi_range(fi: str, tvm: str | None, status: str, words: list[str]) -> None:
    check = checks_of(stack(fi=fi, tvm=tvm))["apache-tvm-ffi"]
    assert check.status == status, check.message
    for word in words:
        assert word in check.message


def test_tvm_ffi_range_comes_from_the_installed_metadata() -> None:
    env = stack(fi="0.7.1", tvm="0.1.10", extra=(dist("flashinfer-jit-cache-sm120f", "0.7.1+cu130"),))
    python = dist("flashinfer-python", "0.7.1", "torch", "apache-tvm-ffi<0.2,>=0.1.11", 'torch>=2.8; extra == "sm107"')
    env = replace(env, distributions={**env.distributions, python.name: python})
    check = checks_of(env)["apache-tvm-ffi"]
    assert check.status == "fail" and ">=0.1.11" in check.message
    assert checks_of(environment(dist("torch", "2.8.0+cu128"), dist("flashinfer-python", "0.3.1")))["apache-tvm-ffi"].status == "skip"


# -- torch-ABI-bound packages ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("torch", "other", "status", "words"),
    [
        (NIGHTLY, dist("flashinfer-python", "0.2.5+cu124torch2.5", "torch==2.5.*"), "fail", ["flashinfer-python 0.2.5+cu124torch2.5", "not a torch nightly"]),
        ("2.6.0+cu124", dist("flashinfer-python", "0.2.5+cu124torch2.5", "torch==2.5.*"), "fail", ["built for torch 2.5", "2.6.0+cu124"]),
        ("2.5.1+cu124", dist("flashinfer-python", "0.2.5+cu124torch2.5", "torch==2.5.*"), "pass", ["fit torch 2.5.1+cu124"]),
        (NIGHTLY, dist("flashinfer", "0.1.6+cu121torch2.4"), "fail", ["flashinfer 0.1.6+cu121torch2.4"]),
        (
            NIGHTLY,
            dist("torchvision", "0.27.0.dev20260307+cu130", "torch==2.12.0.dev20260306"),
            "fail",
            ["torchvision 0.27.0.dev20260307+cu130 requires torch==2.12.0.dev20260306", NIGHTLY],
        ),
        (NIGHTLY, dist("torchvision", "0.27.0.dev20260307+cu130", "torch==2.12.0.dev20260307"), "pass", ["torchvision"]),
        (NIGHTLY, dist("torchaudio", "2.11.0+cu130", "torch==2.11.0"), "fail", ["torchaudio 2.11.0+cu130 requires torch==2.11.0"]),
        ("2.8.0+cu128", dist("flashinfer-python", "0.3.1", "torch"), "warn", ["libtorch", "stale"]),
    ],
)
def test_torch_abi_bound_packages(torch: str, other: InstalledDistribution, status: str, words: list[str]) -> None:
    check = checks_of(environment(dist("torch", torch), other))["torch-abi"]
    assert check.status == status, check.message
    for word in words:
        assert word in check.message


def test_torchvision_without_torch_fails() -> None:
    check = checks_of(environment(dist("torchvision", "0.24.0", "torch==2.9.0")), imported=None)["torch-abi"]
    assert check.status == "fail" and "torch is not installed" in check.message


# -- import ----------------------------------------------------------------------------------------


def test_import_result_is_reported() -> None:
    err = "RuntimeError: flashinfer-cubin version (0.6.4) does not match flashinfer version (0.6.5)"
    failed = checks_of(stack(), imported=ImportResult(ok=False, error=err, env_bypass=True))["flashinfer-import"]
    assert failed.status == "fail" and err in failed.message and "FLASHINFER_DISABLE_VERSION_CHECK" in failed.message
    shadowed = checks_of(stack(), imported=ImportResult(ok=True, version="0.6.6"))["flashinfer-import"]
    assert shadowed.status == "warn" and "0.6.6" in shadowed.message and "0.6.5" in shadowed.message
    assert checks_of(stack(), imported=None)["flashinfer-import"].status == "skip"


# -- GPU architecture -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "cap", "covered"),
    [
        ("8.0", (8, 0), True),
        ("8.0", (8, 6), True),
        ("8.0", (8, 9), True),
        ("8.9", (8, 6), False),
        ("8.0", (9, 0), False),
        ("7.5", (7, 0), False),
        ("9.0a", (9, 0), True),
        ("9.0a", (10, 0), False),
        ("10.0a", (10, 3), False),
        ("12.0a", (12, 1), False),
        ("12.0f", (12, 1), True),
        ("12.0f", (12, 0), True),
        ("12.0f", (10, 0), False),
        ("10.3a", (10, 3), True),
    ],
)
def test_sass_compatibility_rule(target: str, cap: tuple[int, int], covered: bool) -> None:
    assert sass_covers(target, cap) is covered


def test_sass_target_and_provider_names() -> None:
    with pytest.raises(ValueError, match="not a SASS target"):
        sass_covers("sm_90", (9, 0))
    assert provider_arch("flashinfer-jit-cache-sm120f") == "12.0f"
    assert provider_arch("flashinfer_jit_cache_sm90a") == "9.0a"
    assert provider_arch("flashinfer-jit-cache-sm100") == "10.0"
    assert provider_arch("flashinfer-jit-cache") is None


GPU_CASES = [
    # (id, environment, GPU (name, cap), status, words)
    ("H100 on 0.6.5+cu130", stack(), ("NVIDIA H100 80GB HBM3", (9, 0)), "pass", ["sm_90", "SASS 9.0a"]),
    ("RTX PRO 6000 on 0.6.5+cu130", stack(), RTX_PRO, "pass", ["sm_120", "SASS 12.0f"]),
    ("A10 on 0.6.5+cu130", stack(), ("NVIDIA A10", (8, 6)), "pass", ["sm_86", "SASS 8.0"]),
    (
        "V100 on 0.6.5+cu130",
        stack(),
        ("Tesla V100-SXM2-32GB", (7, 0)),
        "fail",
        ["no kernels for sm_70", "flashinfer-jit-cache 0.6.5+cu130", "JIT-compiled, which needs nvcc"],
    ),
    ("RTX PRO 6000 on 0.6.5+cu128", stack(torch="2.9.1+cu128", label="cu128"), RTX_PRO, "pass", ["SASS 12.0a"]),
    (
        "GB10 on 0.6.5+cu128",
        stack(torch="2.9.1+cu128", label="cu128", machine="aarch64"),
        ("NVIDIA GB10", (12, 1)),
        "fail",
        ["no kernels for sm_121", "0.6.5+cu128", "12.0a"],
    ),
    ("B300 on 0.6.5+cu128", stack(torch="2.9.1+cu128", label="cu128"), ("NVIDIA B300", (10, 3)), "fail", ["sm_103"]),
    ("B300 on 0.6.5+cu130", stack(), ("NVIDIA B300", (10, 3)), "pass", ["SASS 10.3a"]),
    ("Thor on 0.6.12+cu130 x86_64", stack(fi="0.6.12"), ("NVIDIA Thor", (11, 0)), "fail", ["sm_110"]),
    ("Thor on 0.6.12+cu130 aarch64", stack(fi="0.6.12", machine="aarch64"), ("NVIDIA Thor", (11, 0)), "pass", ["SASS 11.0a"]),
    (
        "0.7 providers cover sm_90",
        stack(fi="0.7.1", tvm="0.1.11", extra=(dist("flashinfer-jit-cache-sm90a", "0.7.1+cu130"),)),
        ("NVIDIA H200", (9, 0)),
        "pass",
        ["SASS 9.0a", "providers: sm90a"],
    ),
    (
        "0.7 providers miss sm_120",
        stack(fi="0.7.1", tvm="0.1.11", extra=(dist("flashinfer-jit-cache-sm90a", "0.7.1+cu130"),)),
        RTX_PRO,
        "fail",
        ["no kernels for sm_120", "providers: sm90a"],
    ),
    (
        "version missing from the arch table",
        stack(fi="0.7.0rc1", tvm="0.1.11"),
        RTX_PRO,
        "warn",
        ["arch coverage unknown for flashinfer-jit-cache 0.7.0rc1+cu130"],
    ),
    ("compute capability not reported", stack(), ("Tesla K80", None), "warn", ["no compute capability for Tesla K80"]),
]


@pytest.mark.parametrize(("env", "gpu", "status", "words"), [c[1:] for c in GPU_CASES], ids=[c[0] for c in GPU_CASES])
def test_gpu_arch_coverage(env: Environment, gpu: tuple[str, tuple[int, int] | None], status: str, words: list[str]) -> None:
    check = checks_of(env, gpus=smi(gpu))["gpu-arch"]
    assert check.status == status, check.message
    for word in words:
        assert word in check.message


def test_mixed_gpus_name_only_the_uncovered_one() -> None:
    check = checks_of(stack(), gpus=smi(RTX_PRO, ("Tesla V100-SXM2-32GB", (7, 0)), RTX_PRO))["gpu-arch"]
    assert check.status == "fail"
    assert "no kernels for sm_70 (Tesla V100" in check.message and "sm_120" not in check.message
    assert [g["compute_cap"] for g in check.details["gpus"]] == ["12.0", "7.0", "12.0"]


def test_nvidia_smi_failure_is_not_a_claim() -> None:
    failed = GpuQuery(tool="/usr/bin/nvidia-smi", error="NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver")
    check = checks_of(stack(), gpus=failed)["gpu-arch"]
    assert check.status == "warn" and "couldn't communicate" in check.message and "not checked" in check.message
    empty = checks_of(stack(), gpus=GpuQuery(tool="/usr/bin/nvidia-smi"))["gpu-arch"]
    assert empty.status == "warn" and "lists no GPUs" in empty.message


def test_parse_nvidia_smi() -> None:
    text = "NVIDIA RTX PRO 6000 Blackwell, 12.0\nNVIDIA A100-SXM4-80GB, 8.0\n\nTesla K80, [N/A]\n"
    assert parse_nvidia_smi(text) == (
        Gpu("NVIDIA RTX PRO 6000 Blackwell", (12, 0)),
        Gpu("NVIDIA A100-SXM4-80GB", (8, 0)),
        Gpu("Tesla K80", None),
    )
    with pytest.raises(ValueError, match="unexpected nvidia-smi row 'No devices were found'"):
        parse_nvidia_smi("No devices were found\n")


# -- the edge: nvidia-smi and the import subprocess ------------------------------------------------------


@pytest.mark.skipif(sys.platform == "win32", reason="shell scripts")
def test_query_gpus_runs_nvidia_smi(tmp_path: Path) -> None:
    ok = _script(tmp_path / "nvidia-smi", 'test "$1" = "--query-gpu=name,compute_cap" || exit 9\necho "NVIDIA RTX PRO 6000 Blackwell, 12.0"\n')
    assert query_gpus(str(ok), {}) == GpuQuery(tool=str(ok), gpus=(Gpu("NVIDIA RTX PRO 6000 Blackwell", (12, 0)),))
    assert query_gpus(None, {"PATH": str(tmp_path)}).gpus[0].compute_cap == (12, 0)
    assert query_gpus(None, {"PATH": str(tmp_path / "empty")}) is None
    assert query_gpus(str(tmp_path / "missing"), {}) == GpuQuery(tool=str(tmp_path / "missing"), found=False)
    broken = _script(tmp_path / "broken", 'echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver"\nexit 9\n')
    assert "couldn't communicate" in (query_gpus(str(broken), {}).error or "")


def _fake_flashinfer(root: Path, body: str) -> dict[str, str]:
    (root / "flashinfer").mkdir(parents=True)
    (root / "flashinfer" / "__init__.py").write_text(body)
    return {**os.environ, "PYTHONPATH": str(root)}


def test_probe_import_removes_the_version_check_bypass(tmp_path: Path) -> None:
    body = (
        "import os\n__version__ = '0.6.5'\n"
        "if not os.environ.get('FLASHINFER_DISABLE_VERSION_CHECK'):\n"
        "    raise RuntimeError('flashinfer-cubin version (0.6.4) does not match flashinfer version (0.6.5)')\n"
    )
    env = _fake_flashinfer(tmp_path, body)
    assert probe_import(sys.executable, env, 60) == ImportResult(
        ok=False, error="RuntimeError: flashinfer-cubin version (0.6.4) does not match flashinfer version (0.6.5)"
    )
    bypassed = probe_import(sys.executable, {**env, "FLASHINFER_DISABLE_VERSION_CHECK": "1"}, 60)
    assert not bypassed.ok and bypassed.env_bypass


def test_probe_import_reports_the_version_and_a_timeout(tmp_path: Path) -> None:
    env = _fake_flashinfer(tmp_path / "ok", "print('noise')\n__version__ = '0.6.5'\n")
    assert probe_import(sys.executable, env, 60) == ImportResult(ok=True, version="0.6.5")
    slow = _fake_flashinfer(tmp_path / "slow", "import time\ntime.sleep(30)\n")
    result = probe_import(sys.executable, slow, 0.5)
    assert not result.ok and result.error == "did not finish within 0.5s"
    assert probe_import(str(tmp_path / "no-python"), env, 5).error.startswith("cannot run")


def test_doctor_refuses_a_declared_python(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["doctor", "--python", "3.12"]) == 2
    assert "--python 3.12 is a version" in capsys.readouterr().err


# -- real venvs, real wheels, real uv ------------------------------------------------------------------------

FLASHINFER_INIT = """\
import os
import torch  # noqa: F401  (FlashInfer imports torch first)
__version__ = "{version}"
if not os.environ.get("FLASHINFER_DISABLE_VERSION_CHECK"):
    try:
        import flashinfer_cubin
    except ImportError:
        flashinfer_cubin = None
    if flashinfer_cubin is not None and flashinfer_cubin.__version__ != __version__:
        raise RuntimeError(
            f"flashinfer-cubin version ({{flashinfer_cubin.__version__}}) does not match "
            f"flashinfer version ({{__version__}})"
        )
"""


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from support.wheels import build_wheel

    d = tmp_path_factory.mktemp("wheels")
    return {
        "torch": build_wheel(d, "torch", NIGHTLY, files={"torch/__init__.py": f'__version__ = "{NIGHTLY}"\n'.encode()}).path,
        "python": build_wheel(
            d,
            "flashinfer-python",
            "0.6.5",
            requires=["torch", TVM_RANGE_061],
            files={"flashinfer/__init__.py": FLASHINFER_INIT.format(version="0.6.5").encode()},
        ).path,
        "cubin": build_wheel(d, "flashinfer-cubin", "0.6.5").path,
        "cubin-old": build_wheel(d, "flashinfer-cubin", "0.6.4").path,
        "jit": build_wheel(d, "flashinfer-jit-cache", "0.6.5+cu130").path,
        "tvm": build_wheel(d, "apache-tvm-ffi", "0.1.9", files={"tvm_ffi/__init__.py": b'__version__ = "0.1.9"\n'}).path,
    }


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX venv layout and shell scripts")
def test_doctor_on_a_real_venv(tmp_path: Path, wheelhouse: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    python = _venv_with(tmp_path, [wheelhouse[k] for k in ("torch", "python", "cubin", "jit", "tvm")])
    monkeypatch.setenv("FLASHINFER_DISABLE_VERSION_CHECK", "1")  # the doctor must not be fooled by it

    code, checks, report = _doctor(capsys, "--python", str(python), "--nvidia-smi", str(tmp_path / "no-nvidia-smi"))
    assert code == 0 and report["ok"] is True, checks
    assert report["python"] == str(python)
    assert {n: c["status"] for n, c in checks.items()} == {
        "torch": "pass",
        "flashinfer-components": "pass",
        "flashinfer-alignment": "pass",
        "apache-tvm-ffi": "pass",
        "torch-abi": "pass",
        "torch-abi-symbols": "pass",
        "torch-abi-import": "pass",
        "flashinfer-import": "pass",
        "gpu-arch": "skip",
    }
    assert checks["flashinfer-import"]["details"]["version"] == "0.6.5"
    assert "not checked" in checks["gpu-arch"]["message"]

    (tmp_path / "bin").mkdir()
    smi = _script(tmp_path / "bin" / "nvidia-smi", 'echo "NVIDIA RTX PRO 6000 Blackwell, 12.0"\necho "NVIDIA RTX PRO 6000 Blackwell, 12.0"\n')
    monkeypatch.setenv("PATH", f"{smi.parent}{os.pathsep}{os.environ['PATH']}")
    code, checks, _ = _doctor(capsys, "--python", str(python))
    assert code == 0 and checks["gpu-arch"]["status"] == "pass"
    assert "sm_120 (2x NVIDIA RTX PRO 6000 Blackwell) covered by flashinfer-jit-cache 0.6.5+cu130 (SASS 12.0f)" == checks["gpu-arch"]["message"]

    v100 = _script(tmp_path / "v100-smi", 'echo "Tesla V100-SXM2-32GB, 7.0"\n')
    code, checks, _ = _doctor(capsys, "--python", str(python), "--nvidia-smi", str(v100))
    assert code == 1 and checks["gpu-arch"]["status"] == "fail"
    assert "no kernels for sm_70" in checks["gpu-arch"]["message"]

    # Story 3's trap: a cubin one release behind. Both our alignment check and FlashInfer's own fail.
    _uv(["pip", "install", "--python", str(python), "--offline", "--no-index", str(wheelhouse["cubin-old"])], tmp_path)
    code, checks, report = _doctor(capsys, "--python", str(python), "--nvidia-smi", str(tmp_path / "no-nvidia-smi"))
    assert code == 1 and report["ok"] is False
    assert checks["flashinfer-alignment"]["status"] == "fail"
    assert "flashinfer-cubin 0.6.4 != flashinfer-python 0.6.5" in checks["flashinfer-alignment"]["message"]
    assert checks["flashinfer-import"]["status"] == "fail"
    assert checks["flashinfer-import"]["message"].startswith(
        "import flashinfer failed: RuntimeError: flashinfer-cubin version (0.6.4) does not match flashinfer version (0.6.5)"
    )
    assert "FLASHINFER_DISABLE_VERSION_CHECK is set" in checks["flashinfer-import"]["message"]


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX venv layout")
def test_doctor_table_output(tmp_path: Path, wheelhouse: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    python = _venv_with(tmp_path, [wheelhouse["torch"]])
    capsys.readouterr()
    code = cli.main(["doctor", "--python", str(python), "--format", "table", "--nvidia-smi", str(tmp_path / "none")])
    out = capsys.readouterr().out
    assert code == 0
    assert "torch" in out and "2.12.0.dev20260307+cu130" in out and "FlashInfer is not installed" in out
    assert "ok: 4 pass, 5 skip" in out


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX venv layout")
def test_doctor_takes_a_relative_interpreter_path(
    tmp_path: Path, wheelhouse: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`doctor --python venv/bin/python`, as its own hint writes it: the import check (run in an empty
    temporary folder) must find the same interpreter, not report a false import failure."""
    _venv_with(tmp_path, [wheelhouse[k] for k in ("torch", "python", "cubin", "jit", "tvm")])
    monkeypatch.chdir(tmp_path)
    code, checks, report = _doctor(capsys, "--python", "venv/bin/python", "--nvidia-smi", str(tmp_path / "none"))
    assert checks["flashinfer-import"]["status"] == "pass", checks["flashinfer-import"]
    assert code == 0 and report["python"] == str(tmp_path / "venv" / "bin" / "python")
