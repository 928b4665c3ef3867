"""A serving framework on a kept torch nightly (issue 11, resolver side): overrides, the torch-family
build, the aligned FlashInfer trio, couplings found from METADATA and ELF, and the refusal of
torch-ABI wheels built for another torch."""

from __future__ import annotations

import pytest
from support.elfbuild import have_cc
from support.framework_world import FileClassifier, build_framework_world
from support.stack_world import serve

from resolve_gpu_stack.errors import NoPlanError, UsageError
from resolve_gpu_stack.model import Action, Coupling, Override
from resolve_gpu_stack.model.declared import declared_target
from resolve_gpu_stack.model.request import ResolveRequest
from resolve_gpu_stack.net.scan import readers
from resolve_gpu_stack.resolver.resolve import resolve

pytestmark = pytest.mark.skipif(not have_cc(), reason="needs a C compiler to build the ELF objects")

NIGHTLY = "2.12.0.dev20260307+cu130"
TARGET = declared_target("3.12", "x86_64-manylinux_2_28", [f"torch=={NIGHTLY}"])


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory):
    return build_framework_world(tmp_path_factory.mktemp("fw"))


def run(world, **kw):
    classifier = FileClassifier(world.root)
    with serve(world) as (_, defs, finder):
        plan = resolve(
            ResolveRequest.build(target=TARGET, **kw), finder, defs, classifier=classifier, exports=readers.exports_reader(finder.fetcher.scan_access())
        )
    return plan, classifier


def versions(plan):
    return {p.name: str(p.version) for p in plan.packages}


def test_companion_linking_libtorch_is_refused_with_why_and_ways_out(world):
    with pytest.raises(NoPlanError) as err:
        run(world, with_=("sglang",))
    e = err.value
    text = str(e) + " ".join(e.reasons) + (e.hint or "")
    assert "sgl-kernel" in str(e)
    why = next(r for r in e.reasons if r.startswith("sgl-kernel 0.3.21"))
    assert "required by sglang 0.5.9" in why
    # version-locked (C++ imports of c10::/at::), judged against the kept torch's exports: the story's
    # stand-in torch wheel has no libraries, so they cannot be read and the wheel is not planned
    assert "imports 2 C++ symbols of torch" in why and "c10::detail::torchCheckFail" in why
    assert "exports could not be read" in why and "cannot be shown to run" in why
    assert "--without sgl-kernel" in text and "--abi-mismatch warn" in text
    # the CUDA-only native wheel and the pure framework are not reasons to refuse
    assert not any(r.startswith(("cuda-helper", "sglang")) for r in e.reasons)


def test_without_companion_plans_newest_framework_on_kept_torch(world):
    plan, classifier = run(world, with_=("sglang",), without=("sgl-kernel",))
    got = versions(plan)
    assert got["sglang"] == "0.5.9"  # not walked back to 0.5.2 to dodge torch==2.9.1
    torch = plan.package("torch")
    assert str(torch.version) == NIGHTLY and torch.action is Action.KEEP
    # the framework's FlashInfer pin met by the aligned trio
    assert (got["flashinfer-python"], got["flashinfer-cubin"], got["flashinfer-jit-cache"]) == ("0.6.3", "0.6.3", "0.6.3+cu130")
    # torchaudio==2.9.1 replaced by the nightly whose own pin names the kept torch
    audio = plan.package("torchaudio")
    assert str(audio.version) == "2.11.0.dev20260307+cu130" and audio.index == "pytorch"
    assert audio.built_for == "2.12.0.dev20260307" and not audio.abi_mismatch
    assert Override(package="sglang", requirement="torch==2.9.1", replaced_by=f"torch=={NIGHTLY}", reason="the installed torch is kept") in plan.overrides
    family = next(o for o in plan.overrides if o.requirement == "torchaudio==2.9.1")
    assert family.package == "sglang" and family.replaced_by == "torchaudio==2.11.0.dev20260307+cu130"
    assert "sgl-kernel" not in got
    assert any("sgl-kernel left out (--without)" in n and "sglang 0.5.9" in n for n in plan.notes)
    # couplings found, with evidence
    sglang = plan.package("sglang")
    assert sglang.coupling is Coupling.AGNOSTIC and sglang.built_for == "2.9.1" and "pure Python" in sglang.reason
    helper = plan.package("cuda-helper")
    assert helper.coupling is Coupling.CUDA and "libcudart.so.13" in helper.reason and helper.built_for is None
    assert helper.abi is not None and helper.abi.cuda_majors == (13,) and helper.abi.runs
    assert plan.package("numpy").coupling is Coupling.AGNOSTIC
    # only native wheels the data does not cover were scanned, by range reads
    assert any(a.startswith("cuda_helper-") for a in classifier.asked)
    assert not any(a.startswith(("sglang-", "torch-", "flashinfer_jit_cache-", "numpy-")) for a in classifier.asked)


def test_abi_mismatch_warn_plans_it_flagged(world):
    plan, _ = run(world, with_=("sglang",), abi_mismatch="warn")
    kernel = plan.package("sgl-kernel")
    assert kernel is not None and kernel.abi_mismatch and kernel.coupling is Coupling.TORCH_ABI
    assert "ABI MISMATCH" in kernel.reason and "C++ symbols of torch" in kernel.reason
    assert kernel.abi is not None and kernel.abi.kind.value == "locked" and not kernel.abi.runs
    assert any(n.startswith("sgl-kernel 0.3.21 cannot be shown to run with the plan's torch and is planned anyway") for n in plan.notes)
    assert not plan.package("sglang").abi_mismatch
    assert plan.inputs["abi-mismatch"] == "warn"


def test_framework_binary_pinning_another_torch_is_named(world):
    with pytest.raises(NoPlanError) as err:
        run(world, with_=("vllm",))
    why = next(r for r in err.value.reasons if r.startswith("vllm 0.11.1"))
    assert "built for torch==2.9.0" in why and NIGHTLY.split("+")[0] in why


def test_automatic_override_off_never_walks_back_unasked(world):
    """sglang 0.5.9 pins torch==2.9.1; without the automatic override the plan cannot have it, and
    sglang 0.5.2 is never planned in its place without the user's word: the error names 0.5.9, the
    pin in its way, and the ways out; asking for 0.5.2 plans it."""
    with pytest.raises(NoPlanError) as err:
        run(world, with_=("sglang",), auto_torch_override=False)
    e = err.value
    assert str(e).startswith("sglang 0.5.9: the newest release for this target cannot be planned; sglang 0.5.2 would be planned instead")
    assert any(r.startswith("because sglang 0.5.9 requires torch==2.9.1") for r in e.reasons), e.reasons
    assert any("we can conclude that sglang 0.5.9 cannot be planned" in r for r in e.reasons), e.reasons
    assert "--with 'sglang==0.5.2'" in (e.hint or "") and "leave out --no-auto-torch-override" in (e.hint or "")
    plan, _ = run(world, with_=("sglang==0.5.2",), auto_torch_override=False)
    assert versions(plan)["sglang"] == "0.5.2" and not plan.overrides
    assert plan.inputs["auto-torch-override"] is False


def test_automatic_override_off_with_a_pin_is_a_clear_no_plan(world):
    with pytest.raises(NoPlanError) as err:
        run(world, with_=("sglang==0.5.9",), auto_torch_override=False)
    assert "torch" in str(err.value) and any("torch==2.9.1" in r for r in err.value.reasons)


def test_flashinfer_extra_checked_against_kept_torch(world):
    plan, _ = run(world, with_=("fwcu13",))
    got = versions(plan)
    assert (got["flashinfer-python"], got["flashinfer-cubin"], got["flashinfer-jit-cache"]) == ("0.6.5", "0.6.5", "0.6.5+cu130")
    # cu13's own requirements are in; b12x (torch>=2.12.0, which a 2.12 nightly fails) is dropped
    assert got["nvidia-cutlass-dsl"] == "4.8.0" and "nvidia-cutlass-dsl-libs-cu13" in got
    assert any("extra [b12x] left out" in n and "torch>=2.12.0" in n for n in plan.notes)
    assert any(o.package == "fwcu13" and o.requirement == "torch==2.11.0" for o in plan.overrides)


def test_explicit_flashinfer_version_overrides_the_framework_pin(world):
    plan, _ = run(world, with_=("sglang",), without=("sgl-kernel",), flashinfer="0.6.4")
    got = versions(plan)
    assert (got["flashinfer-python"], got["flashinfer-cubin"], got["flashinfer-jit-cache"]) == ("0.6.4", "0.6.4", "0.6.4+cu130")
    fi = {o.requirement: o for o in plan.overrides if o.reason.startswith("--flashinfer")}
    assert fi["flashinfer_python==0.6.3"].replaced_by == "flashinfer-python==0.6.4"
    assert fi["flashinfer_cubin==0.6.3"].replaced_by == "flashinfer-cubin==0.6.4"


def test_user_override_replaces_every_requirement_on_a_name(world):
    # uv's meaning: an override whose marker does not apply removes the requirement
    plan, _ = run(world, with_=("sglang",), overrides=("sgl-kernel; python_version < '3'", "numpy==2.1.0"))
    got = versions(plan)
    assert "sgl-kernel" not in got and got["numpy"] == "2.1.0"
    user = [o for o in plan.overrides if o.reason == "--override"]
    assert {o.requirement for o in user} >= {"sgl-kernel==0.3.21", "numpy"}
    assert plan.inputs["overrides"] == sorted(["sgl-kernel; python_version < '3'", "numpy==2.1.0"])


def test_new_request_fields_leave_the_inputs_of_existing_locks_unchanged():
    plain = ResolveRequest.build(target=TARGET)
    keys = set(plain.inputs({}))
    assert not keys & {"overrides", "auto-torch-override", "without", "abi-mismatch"}
    changed = ResolveRequest.build(target=TARGET, without=("Sgl_Kernel",), abi_mismatch="warn")
    assert changed.inputs({})["without"] == ["sgl-kernel"]


@pytest.mark.parametrize("kw", [{"abi_mismatch": "ignore"}, {"without": ("sgl-kernel==1",)}, {"overrides": ("not a req!",)}])
def test_bad_framework_switches_are_usage_errors(kw):
    with pytest.raises(UsageError):
        ResolveRequest.build(target=TARGET, **kw)


def test_plan_with_overrides_survives_the_result_store_record(world):
    import json

    from resolve_gpu_stack.model.codec import plan_from_dict, plan_to_dict

    plan, _ = run(world, with_=("sglang",), abi_mismatch="warn")
    again = plan_from_dict(json.loads(json.dumps(plan_to_dict(plan))))
    assert again == plan
    assert again.package("sgl-kernel").abi_mismatch and again.overrides == plan.overrides


def test_flashinfers_reason_names_the_framework_pin_that_held_it(world):
    """sglang pins flashinfer_python==0.6.3 while 0.6.5 has every component: the reason says so,
    not "newest FlashInfer ..." (issue 24)."""
    plan, _ = run(world, with_=("sglang",), without=("sgl-kernel",))
    reason = plan.package("flashinfer-python").reason
    assert reason.startswith(
        "sglang 0.5.9 requires flashinfer_python==0.6.3, so 0.6.3, not the newest FlashInfer with "
        "flashinfer-python, flashinfer-cubin, flashinfer-jit-cache for cu130 (0.6.5)"
    ), reason
    plain, _ = run(world)
    assert plain.package("flashinfer-python").reason.startswith("newest FlashInfer with flashinfer-python, flashinfer-cubin, flashinfer-jit-cache for cu130")
    asked, _ = run(world, flashinfer="0.6.4")
    assert asked.package("flashinfer-python").reason.startswith("--flashinfer 0.6.4 asked for it")
