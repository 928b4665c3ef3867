"""GPUs and required APIs in the resolver: the floors they put on FlashInfer, and a jit-cache shim
planned with only the providers the GPUs need (loopback worlds, real HTTP)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.plans import plan_for, versions
from support.stack_world import ABI3, X86, build_story_world

from resolve_gpu_stack.errors import NoPlanError
from resolve_gpu_stack.model.gpu import GpuArch
from resolve_gpu_stack.model.request import ResolveRequest, parse_gpu_list

FI_06 = ("0.6.3", "0.6.4", "0.6.5", "0.6.8rc1", "0.6.8", "0.6.8.post1")
PROVIDERS = ("sm90a", "sm100a", "sm100f", "sm103a", "sm110a", "sm120a", "sm120f", "sm121a")


@pytest.fixture(scope="module")
def world06(tmp_path_factory: pytest.TempPathFactory):
    return build_story_world(tmp_path_factory.mktemp("w06") / "www", hostile=False, fi_versions=FI_06)


def gpus(*names: str) -> tuple[GpuArch, ...]:
    return parse_gpu_list(names)


def test_require_api_below_a_flashinfer_pin_fails_naming_api_and_floor(world06):
    with pytest.raises(NoPlanError) as exc:
        plan_for(world06, flashinfer="0.6.3", require_api=("mm_mxfp8",))
    text = str(exc.value) + " ".join(exc.value.reasons)
    assert "mm_mxfp8" in text and "0.6.4" in text and "--flashinfer 0.6.3" in text


def test_require_api_alone_keeps_the_newest(world06):
    plan, _ = plan_for(world06, require_api=("mm_mxfp8",))
    assert versions(plan)["flashinfer-python"] == "0.6.8.post1"


def test_require_api_on_sm120_plans_the_newest_at_or_above_0_6_8rc1(world06):
    plan, _ = plan_for(world06, require_api=("mm_mxfp8",), gpus=gpus("sm120"))
    got = versions(plan)
    assert got["flashinfer-python"] == got["flashinfer-cubin"] == "0.6.8.post1"
    assert got["flashinfer-jit-cache"] == "0.6.8.post1+cu130"
    assert plan.inputs["gpus"] == ["sm120"] and plan.inputs["require-api"] == ["mm_mxfp8"]
    # a pin between the API's general floor and its sm120 floor is refused, naming the sm120 floor
    with pytest.raises(NoPlanError) as exc:
        plan_for(world06, flashinfer="0.6.5", require_api=("mm_mxfp8",), gpus=gpus("sm120"))
    assert "mm_mxfp8 on sm120" in str(exc.value) and "0.6.8rc1" in str(exc.value)


def test_floor_above_every_published_version_names_the_newest(world06):
    with pytest.raises(NoPlanError) as exc:
        plan_for(world06, require_api=("mm_mxfp8:cudnn",))
    assert "0.6.13rc1" in str(exc.value) and "0.6.8.post1" in str(exc.value)


def test_api_without_kernels_for_the_gpu_fails(world06):
    with pytest.raises(NoPlanError, match="mm_mxfp8 has no kernels for sm90"):
        plan_for(world06, require_api=("mm_mxfp8",), gpus=gpus("sm90"))


def test_gpu_cuda_floor_against_torch_cuda(tmp_path: Path):
    w = build_story_world(tmp_path / "www", cuda="cu128", hostile=False, fi_versions=("0.6.5",))
    with pytest.raises(NoPlanError) as exc:
        plan_for(w, target=_target("torch==2.12.0.dev20260307+cu128"), gpus=gpus("sm120"))
    assert "sm120" in str(exc.value) and "cu129" in str(exc.value) and "cu128" in str(exc.value)
    # without the GPU, cu128 is fine ("any GPU")
    plan, _ = plan_for(w, target=_target("torch==2.12.0.dev20260307+cu128"))
    assert versions(plan)["flashinfer-jit-cache"] == "0.6.5+cu128"


def _target(*installed: str):
    from support.plans import target

    return target(installed=installed)


def test_gpu_settings_stay_out_of_the_inputs_when_default(world06):
    plan, _ = plan_for(world06)
    assert not {"gpus", "require-api", "all-gpu-archs"} & set(plan.inputs)


# -- 0.7: a shim over per-architecture providers ------------------------------------------------------


def build_07_world(root: Path):
    w = build_story_world(root, hostile=False, fi_versions=())
    w.pypi("flashinfer-python", "0.7.0", requires=["apache-tvm-ffi<0.2,>=0.1.6", "torch"])
    w.flashinfer("flashinfer-cubin", "0.7.0", page="flashinfer-cubin")
    w.flashinfer(
        "flashinfer-jit-cache",
        "0.7.0+cu130",
        tag=f"{ABI3}-{X86}",
        page="cu130/flashinfer-jit-cache",
        requires=[f"flashinfer-jit-cache-{p}==0.7.0+cu130" for p in PROVIDERS],
    )
    for i, p in enumerate(PROVIDERS):
        w.flashinfer(f"flashinfer-jit-cache-{p}", "0.7.0+cu130", tag=f"{ABI3}-{X86}", page=f"cu130/flashinfer-jit-cache-{p}", padding=1000 * (i + 1))
    return w


@pytest.fixture(scope="module")
def world07(tmp_path_factory: pytest.TempPathFactory):
    return build_07_world(tmp_path_factory.mktemp("w07") / "www")


def providers_of(plan) -> list[str]:
    return sorted(p.name for p in plan.packages if p.name.startswith("flashinfer-jit-cache-"))


def test_sm120_plans_the_shim_and_one_provider(world07):
    plan, _ = plan_for(world07, gpus=gpus("sm120"))
    got = versions(plan)
    assert got["flashinfer-jit-cache"] == "0.7.0+cu130"
    assert providers_of(plan) == ["flashinfer-jit-cache-sm120a"]  # exact beats family
    note = next(n for n in plan.notes if "left out" in n)
    assert "7 of its providers" in note and "flashinfer-jit-cache-sm90a" in note and "saves" in note
    shim = plan.package("flashinfer-jit-cache")
    assert "flashinfer-jit-cache-sm120a" in shim.dependencies and "flashinfer-jit-cache-sm90a" not in shim.dependencies


def test_family_serves_a_gpu_without_an_exact_provider(world07):
    plan, _ = plan_for(world07, gpus=gpus("sm90", "12.1", "sm_100"))
    assert providers_of(plan) == ["flashinfer-jit-cache-sm100a", "flashinfer-jit-cache-sm121a", "flashinfer-jit-cache-sm90a"]


def test_all_gpu_archs_and_any_gpu_plan_every_provider(world07):
    every = sorted(f"flashinfer-jit-cache-{p}" for p in PROVIDERS)
    plan, _ = plan_for(world07, gpus=gpus("sm120"), all_gpu_archs=True)
    assert providers_of(plan) == every and not any("left out" in n for n in plan.notes)
    assert plan.inputs["all-gpu-archs"] is True
    plan, _ = plan_for(world07)
    assert providers_of(plan) == every


def test_request_inputs_only_when_set():
    from support.plans import target

    base = ResolveRequest.build(target=target()).inputs({})
    assert "gpus" not in base
    req = ResolveRequest.build(target=target(), gpus=gpus("sm120", "12.0"), require_api=("mm_mxfp8",)).inputs({})
    assert req["gpus"] == ["sm120"] and req["require-api"] == ["mm_mxfp8"]


def test_framework_pin_below_the_floor_names_the_floor(tmp_path: Path):
    w = build_story_world(tmp_path / "www", hostile=False, fi_versions=FI_06)
    w.pypi("servingfw", "1.0", requires=["flashinfer-python==0.6.3"])
    with pytest.raises(NoPlanError) as exc:
        plan_for(w, with_=("servingfw",), require_api=("mm_mxfp8",))
    text = str(exc.value) + " ".join(exc.value.reasons)
    assert "servingfw 1.0" in text and "==0.6.3" in text and "mm_mxfp8" in text and "0.6.4" in text
