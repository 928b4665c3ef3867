"""Live: today's SGLang and vLLM on PyPI's torch, resolved against today's PyPI (the user's uv/pip
configuration names it). Skipped offline. The same stories, recorded, replay offline in
``tests/e2e/test_snapshot_today.py``."""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from support.paths import REPO

from resolve_gpu_stack.cli.app import main
from resolve_gpu_stack.cli.userconfig import discover_pypi_url
from resolve_gpu_stack.errors import ResolveGpuStackError

pytestmark = pytest.mark.live

TARGET = ["--python", "3.12", "--platform", "x86_64-manylinux_2_34", "--installed", "torch==2.15.0", "--torch", "installed", "--no-cubin", "--no-jit-cache"]


@pytest.fixture(scope="module")
def pypi() -> str:
    try:
        url = discover_pypi_url(os.environ)
        with urllib.request.urlopen(url.rstrip("/") + "/sglang/", timeout=10):
            pass
    except (ResolveGpuStackError, OSError) as exc:
        pytest.skip(f"PyPI cannot be reached: {exc}")
    return url


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for the module: torch 2.15.0's exports (515 MB of its wheel inflated) are read once."""
    return tmp_path_factory.mktemp("live-cache")


def rows(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in plan["packages"]}


@pytest.mark.parametrize(("framework", "asked", "companions"), [("sglang", "sglang", ("sglang-kernel", "torch-memory-saver")), ("vllm", "vllm==0.33.0", ())])
def test_today_the_framework_plans_on_pypis_torch_its_pin_overridden(
    pypi: str, framework: str, asked: str, companions: tuple[str, ...], capsys: pytest.CaptureFixture[str], cache: Path
) -> None:
    code = main(["resolve", *TARGET, "--with", asked, "--index", f"pypi={pypi}", "--cache-dir", str(cache), "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    plan = json.loads(out)
    got = rows(plan)
    assert plan["target"]["cuda"] == "cu132"
    assert (got["torch"]["version"], got["torch"]["action"]) == ("2.15.0", "keep")
    assert f"{framework} pins torch==" in got[framework]["reason"] and "kept 2.15.0" in got[framework]["reason"], got[framework]
    for name in companions:
        assert got[name]["abi"] is None or got[name]["abi"]["refusal"] is None, got[name]
    assert all(r["index"] != "pytorch" for r in plan["packages"])


def newest(pypi: str, name: str) -> str:
    """The newest final release of ``name`` on the live index, read by the test itself (PEP 691)."""
    from packaging.version import Version

    request = urllib.request.Request(f"{pypi.rstrip('/')}/{name}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        versions = [Version(v) for v in json.load(answer)["versions"]]
    return str(max(v for v in versions if not v.is_prerelease))


def test_today_plain_vllm_is_its_newest_release_or_a_named_stop(pypi: str, capsys: pytest.CaptureFixture[str], cache: Path) -> None:
    """No walk-back in silence: vllm 0.34.0 pins flashinfer-python==0.7.3, which no index served on
    2026-12-07; the plan is the newest vllm or a non-zero exit that names it, the cause and a way out."""
    code = main(["resolve", *TARGET, "--with", "vllm", "--index", f"pypi={pypi}", "--cache-dir", str(cache), "--format", "json"])
    out, err = capsys.readouterr()
    top = newest(pypi, "vllm")
    if code == 0:
        assert rows(json.loads(out))["vllm"]["version"] == top, out
    else:
        assert code == 1 and f"vllm {top}" in err and "--with 'vllm==" in err, err


def test_inspect_reads_the_exports_of_pypis_torch_and_runs_sglang_kernel(pypi: str, capsys: pytest.CaptureFixture[str], cache: Path) -> None:
    """A declared target (no torch on this machine): sglang-kernel 0.4.10's 122 C++ imports are
    checked against the exports of PyPI's torch 2.15.0 wheel itself (its dynamic table at ~443 MB)."""
    code = main(["inspect", "sglang-kernel==0.4.10", *TARGET[:6], "--index", f"pypi={pypi}", "--cache-dir", str(cache), "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    verdict = json.loads(out)["verdict"]
    assert verdict["runs"] is True and "C++ imports of torch are all exported by torch 2.15.0" in verdict["note"], verdict


def test_today_pypis_torch_keeps_its_cuda_runtime_under_vllm(pypi: str, capsys: pytest.CaptureFixture[str], cache: Path) -> None:
    """The kept torch's closure, live: torch 2.15.0's cuda-toolkit 13.2.2 pins nvidia-cuda-runtime and
    -nvrtc at 13.2.86.*; vLLM's closure (humming-kernels, nvidia-cuda-nvcc 13.5) never moves them."""
    code = main(["resolve", *TARGET, "--with", "vllm==0.33.0", "--index", f"pypi={pypi}", "--cache-dir", str(cache), "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    got = rows(json.loads(out))
    assert (got["cuda-toolkit"]["version"], got["cuda-toolkit"]["action"]) == ("13.2.2", "keep")
    for name in ("nvidia-cuda-runtime", "nvidia-cuda-nvrtc"):
        assert got[name]["version"].startswith("13.2.86") and got[name]["action"] == "keep", got[name]
        assert "torch 2.15.0's cuda-toolkit 13.2.2 pins" in got[name]["reason"], got[name]


def test_story_2_on_sm100_never_walks_sglang_back_in_silence(pypi: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """User story 2 (mm_mxfp8 on sm100, the March nightly kept) with --with sglang: sglang 0.5.9
    pins flashinfer_python==0.6.3, below the API's floor (0.6.4); the command stops naming 0.5.9, both
    requirements and the way out, never a plan of sglang 0.5.2 with exit 0."""
    snapshot = REPO / "indexes" / "snapshots" / "2026-03-07"
    argv = ["resolve", "--python", "3.12", "--platform", "x86_64-manylinux_2_28", "--installed", "torch==2.12.0.dev20260307+cu130"]
    argv += ["--snapshot", str(snapshot), "--live-fallback", "--index", f"pypi={pypi}", "--cache-dir", str(tmp_path / "c")]
    code = main([*argv, "--require-api", "mm_mxfp8", "--gpu", "sm100", "--with", "sglang"])
    _, err = capsys.readouterr()
    assert code == 1, err
    assert "sglang 0.5.9: the newest release for this target cannot be planned" in err, err
    assert "mm_mxfp8 on sm100 needs FlashInfer >= 0.6.4" in err and "sglang 0.5.9 requires flashinfer_python==0.6.3" in err, err
    assert "--with 'sglang==0.5.2'" in err, err
