"""Serving frameworks on the story-1 target, offline on the bundled snapshot (issue 11, "done when"):
SGLang 0.5.9's compiled companions refused with why, planned without them on the kept torch with
the overrides listed, vLLM's own binary named as built for another torch. The scans of the native
wheels replay from the snapshot's manifest: no network. Issue 21: its torchao and torchcodec pins
are met by the torch family's nightlies of the kept torch's day (the reconstructed part). Issue 19:
each compiled wheel judged by what it imports: sgl-kernel 0.3.21 and torch-memory-saver need CUDA 12, torch-c-dlpack-ext has builds
for torch 2.4-2.9 and none for 2.12 (a note, not a refusal)."""

from __future__ import annotations

import json

import pytest
from support.doors import run_cli
from support.paths import SNAPSHOT

from resolve_gpu_stack.cli.app import main

NIGHTLY = "2.12.0.dev20260307+cu130"
STORY = ["resolve", "--snapshot", str(SNAPSHOT), "--python", "3.12", "--platform", "x86_64-manylinux_2_28", "--installed", f"torch=={NIGHTLY}"]
SGLANG = [*STORY, "--with", "sglang", "--override", "cuda-python>=13"]  # FlashInfer follows the framework's pin (0.6.3)
COMPANIONS = ("sgl-kernel", "torch-memory-saver")  # cannot be shown to run on the kept torch; torchao and torchcodec come from the PyTorch index


def test_sglang_refuses_with_sgl_kernel_named_and_why(capsys):
    code, out, err = run_cli(capsys, *SGLANG, "--format", "json")
    assert code == 1 and out == ""
    kernel = next(line for line in err.splitlines() if line.startswith("  - sgl-kernel 0.3.21 (required by sglang 0.5.9): "))
    assert "needs CUDA 12" in kernel and "built for CUDA 13" in kernel  # sgl-kernel 0.3.21 is a CUDA 12 build (libcudart.so.12)
    saver = next(line for line in err.splitlines() if line.startswith("  - torch-memory-saver 0.0.9 "))
    assert "needs CUDA 12" in saver and "built for CUDA 13" in saver
    for name in COMPANIONS:
        assert f"  - {name} " in err
    # the family's nightlies meet their pins; a wheel of builds for other torches is not refused
    assert "  - torchao " not in err and "  - torchcodec " not in err and "  - torch-c-dlpack-ext " not in err
    assert "--build torch-memory-saver" in err  # PyPI has its sdist
    assert "--without sgl-kernel" in err and "--abi-mismatch warn" in err


@pytest.fixture(scope="module")
def sglang_plan():
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main([*SGLANG, *[w for n in COMPANIONS for w in ("--without", n)], "--format", "json"])
    assert code == 0
    return json.loads(out.getvalue())


def test_without_the_companions_plans_the_newest_sglang_on_the_kept_torch(sglang_plan):
    got = {p["name"]: p for p in sglang_plan["packages"]}
    assert got["sglang"]["version"] == "0.5.9"
    assert got["torch"]["version"] == NIGHTLY and got["torch"]["action"] == "keep"
    assert {n: got[n]["version"] for n in ("flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache")} == {
        "flashinfer-python": "0.6.3",
        "flashinfer-cubin": "0.6.3",
        "flashinfer-jit-cache": "0.6.3+cu130",
    }
    audio = got["torchaudio"]
    assert audio["version"] == "2.11.0.dev20260307+cu130" and audio["index"] == "pytorch"
    assert audio["coupling"] == "torch-abi" and audio["built_for"] == "2.12.0.dev20260307" and audio["abi_mismatch"] is False
    assert not set(COMPANIONS) & set(got)
    assert len(got) > 150


def test_the_overrides_are_listed(sglang_plan):
    overrides = {(o["package"], o["requirement"]): o for o in sglang_plan["overrides"]}
    assert overrides[("sglang", "torch==2.9.1")]["replaced_by"] == f"torch=={NIGHTLY}"
    assert overrides[("sglang", "torchaudio==2.9.1")]["replaced_by"] == "torchaudio==2.11.0.dev20260307+cu130"
    assert overrides[("sglang", "cuda-python==12.9")]["reason"] == "--override"


def test_torchao_and_torchcodec_pins_are_met_by_the_nightlies_of_the_kept_torchs_day(sglang_plan):
    got = {p["name"]: p for p in sglang_plan["packages"]}
    overrides = {(o["package"], o["requirement"]): o for o in sglang_plan["overrides"]}
    for name, pin, nightly in (("torchao", "torchao==0.9.0", "0.17.0.dev20260307+cu130"), ("torchcodec", "torchcodec==0.8.0", "0.11.0.dev20260307+cu130")):
        row = got[name]
        assert (row["version"], row["index"], row["coupling"], row["abi_mismatch"]) == (nightly, "pytorch", "torch-abi", False)
        assert row["url"].startswith("https://download.pytorch.org/whl/nightly/cu130/")
        override = overrides[("sglang", pin)]
        assert override["replaced_by"] == f"{name}=={nightly}"
        assert "build for the kept torch" in override["reason"] and "a nightly of that torch's day" in override["reason"]


def test_native_wheels_are_classified_from_the_recorded_scans(sglang_plan):
    got = {p["name"]: p for p in sglang_plan["packages"]}
    assert got["nvidia-nccl-cu13"]["coupling"] == "cuda" and "NVIDIA CUDA library" in got["nvidia-nccl-cu13"]["reason"]  # data: no scan needed
    assert "not in snapshot" not in json.dumps(sglang_plan["packages"])
    assert not [p["name"] for p in sglang_plan["packages"] if p["coupling"] == "unknown"]  # every recorded scan finished
    assert (
        got["numpy"]["coupling"] == "agnostic"
        and got["numpy"]["abi"] == {"kind": None, "torch": NIGHTLY, "floor": None, "cuda_majors": None, "builds": None, "refusal": None, "note": None}
        or got["numpy"]["abi"] is None
    )


def test_a_wheel_of_builds_for_older_torches_is_planned_with_a_note(sglang_plan):
    dlpack = next(p for p in sglang_plan["packages"] if p["name"] == "torch-c-dlpack-ext")
    assert dlpack["coupling"] == "torch-abi" and dlpack["abi_mismatch"] is False
    assert dlpack["abi"]["kind"] == "builds" and dlpack["abi"]["builds"] == ["2.4", "2.5", "2.6", "2.7", "2.8", "2.9"]
    assert "none for 2.12" in dlpack["abi"]["note"] and "expected from torch 2.10 on" in dlpack["abi"]["note"]
    assert any(n.startswith("torch-c-dlpack-ext 0.1.5: has builds for torch 2.4 to 2.9") for n in sglang_plan["notes"])


def test_vllm_names_its_own_binary_as_built_for_another_torch(capsys):
    code, _, err = run_cli(capsys, *STORY, "--with", "vllm", "--flashinfer", "0.6.5", "--format", "json")
    assert code == 1
    assert "vllm 0.11.2 (required by the request): built for torch==2.9.0, torch is 2.12.0.dev20260307+cu130" in err
    assert "--without vllm" in err
