"""Scenario tests of the resolver on small worlds served over real HTTP on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.plans import NIGHTLY, plan_for, target, versions
from support.stack_world import ABI3, FI_REQUIRES, X86, build_story_world

from resolve_gpu_stack.errors import DowngradeRefused, NoPlanError, UsageError
from resolve_gpu_stack.model import Action, Coupling
from resolve_gpu_stack.model.request import ResolveRequest


@pytest.fixture
def story(tmp_path: Path):
    return build_story_world(tmp_path / "www")


def test_story1_keeps_nightly_torch_and_aligns_flashinfer(story):
    plan, srv = plan_for(story)
    torch = plan.package("torch")
    assert torch.action is Action.KEEP and str(torch.version) == NIGHTLY and torch.coupling is Coupling.TORCH
    got = versions(plan)
    assert got["flashinfer-python"] == "0.6.5"
    assert got["flashinfer-cubin"] == "0.6.5"
    assert got["flashinfer-jit-cache"] == "0.6.5+cu130"
    jit = plan.package("flashinfer-jit-cache")
    assert jit.index == "flashinfer" and jit.filename.endswith("manylinux_2_28_x86_64.whl") and jit.coupling is Coupling.CUDA
    assert plan.cuda_label == "cu130"
    # the closure of torch: the exact triton pin, from the PyTorch index, and the cuda-toolkit extras
    assert got["triton"] == "3.7.0+git9c288bc5" and plan.package("triton").index == "pytorch"
    assert {"nvidia-cuda-runtime", "nvidia-cuda-nvrtc", "cuda-toolkit"} <= set(got)
    assert got["cuda-toolkit"] == "13.0.2"
    # no AOT wheel; nothing named torch/triton/jit-cache from PyPI, though PyPI offers 99.0.0
    for name in ("torch", "triton", "flashinfer-jit-cache"):
        assert plan.package(name).index != "pypi"
    assert "pytorch-triton" not in got and "torchtriton" not in got
    assert not any("torch2.5" in (p.url or "") for p in plan.packages)
    assert any("torch2.12/flashinfer-python/ answered 404" in n for n in plan.notes)
    # the hostile names were never even asked of PyPI
    asked = {entry[1] for entry in srv.log}
    assert "/simple/torch/" not in asked and "/simple/triton/" not in asked and "/simple/flashinfer-jit-cache/" not in asked


def test_closure_respects_tvm_ffi_exclusions_python_and_yanked(story):
    plan, _ = plan_for(story)
    got = versions(plan)
    # apache-tvm-ffi!=0.1.8,!=0.1.8.post0,<0.2,>=0.1.6 -> 0.1.7 (0.1.8.post0 and 0.2.0 are newer but excluded)
    assert got["apache-tvm-ffi"] == "0.1.7"
    # numpy 3.0.0 requires Python >= 3.14, 2.3.0 is yanked: 2.2.0
    assert got["numpy"] == "2.2.0"
    # extras only when asked: optree is torch's optional extra
    assert "optree" not in got


def test_older_nightly_installed_is_kept_without_the_word_to_move_it(story):
    """No --torch (nightly by default): the installed nightly is kept, and a note names the newer one and how to move to it."""
    plan, _ = plan_for(story, target=target(installed=["torch==2.12.0.dev20260305+cu130"]))
    torch = plan.package("torch")
    assert str(torch.version) == "2.12.0.dev20260305+cu130" and torch.action is Action.KEEP
    note = next(n for n in plan.notes if n.startswith("torch 2.12.0.dev20260305+cu130 is kept though"))
    assert f"{NIGHTLY} is published (nightly)" in note and "--upgrade-package torch" in note


def test_upgrade_package_torch_moves_an_older_nightly_to_the_newest(story):
    plan, _ = plan_for(story, target=target(installed=["torch==2.12.0.dev20260305+cu130"]), upgrade_package=("torch",))
    torch = plan.package("torch")
    assert str(torch.version) == NIGHTLY and torch.action is Action.UPGRADE
    assert str(torch.installed_version) == "2.12.0.dev20260305+cu130"
    assert not any("is kept though" in n for n in plan.notes)


def test_exact_torch_version_moves_torch(story):
    plan, _ = plan_for(story, torch=NIGHTLY, target=target(installed=["torch==2.12.0.dev20260305+cu130"]))
    assert str(plan.package("torch").version) == NIGHTLY and plan.package("torch").action is Action.UPGRADE


def test_stable_channel_keeps_an_installed_nightly_with_a_note(story):
    """--torch stable without the word: the nightly is kept, FlashInfer follows it, a note says the channel differs."""
    plan, _ = plan_for(story, torch="stable")
    assert plan.package("torch").action is Action.KEEP and str(plan.package("torch").version) == NIGHTLY
    note = next(n for n in plan.notes if "(a nightly build) is kept" in n)
    assert "--torch stable chooses FlashInfer and the rest for it" in note and "--upgrade-package torch" in note


def test_a_stable_torch_under_the_default_nightly_is_kept_with_a_note(story):
    plan, _ = plan_for(story, target=target(installed=["torch==2.10.0+cu130"]))
    torch = plan.package("torch")
    assert torch.action is Action.KEEP and str(torch.version) == "2.10.0+cu130"
    [note] = [n for n in plan.notes if "torch 2.10.0+cu130" in n]
    assert note.startswith("torch 2.10.0+cu130 (a stable build) is kept: --torch nightly chooses FlashInfer and the rest for it")
    assert "--upgrade-package torch moves it to the newest nightly build" in note
    plan, _ = plan_for(story, target=target(installed=["torch==2.10.0+cu130"]), upgrade_package=("torch",))
    assert str(plan.package("torch").version) == NIGHTLY and plan.package("torch").action is Action.UPGRADE


def test_a_plan_that_cannot_be_made_on_the_kept_torch_names_the_way_to_move_it(story):
    with pytest.raises(NoPlanError) as err:
        plan_for(story, target=target(installed=["torch==2.12.0.dev20260305+cu130"]), with_=("flashinfer-python==0.0.1",))
    assert err.value.exit_code == 1
    hint = err.value.hint or ""  # a way out, with the others, not a reason among the reasons
    assert "keeps the installed torch 2.12.0.dev20260305+cu130" in hint and "--upgrade-package torch" in hint, hint
    assert not any("--upgrade-package torch" in r for r in err.value.reasons), err.value.reasons


def test_stable_with_nightly_installed_and_the_word_is_refused_as_downgrade(story):
    with pytest.raises(DowngradeRefused) as err:
        plan_for(story, torch="stable", upgrade_package=("torch",))
    msg = str(err.value)
    assert "downgrade torch from 2.12.0.dev20260307+cu130 to 2.10.0+cu130" in msg
    assert "--torch installed" in err.value.hint and err.value.exit_code == 1


def test_allow_downgrade_lets_stable_through(story):
    plan, _ = plan_for(story, torch="stable", allow_downgrade=True, upgrade_package=("torch",))
    torch = plan.package("torch")
    assert str(torch.version) == "2.10.0+cu130" and torch.action is Action.DOWNGRADE
    # --allow-downgrade alone names no move: the nightly is kept
    plan, _ = plan_for(story, torch="stable", allow_downgrade=True)
    torch = plan.package("torch")
    assert str(torch.version) == NIGHTLY and torch.action is Action.KEEP


def test_upgrade_package_names_only_torch():
    with pytest.raises(UsageError) as err:
        ResolveRequest.build(target=target(), upgrade_package=("flashinfer-python",))
    assert "only torch" in err.value.message


def test_torch_installed_keeps_exactly(story):
    plan, _ = plan_for(story, torch="installed", target=target(installed=["torch==2.12.0.dev20260306+cu130"]))
    assert plan.package("torch").action is Action.KEEP
    assert str(plan.package("torch").version) == "2.12.0.dev20260306+cu130"


def test_explicit_older_torch_spec_is_refused(story):
    with pytest.raises(DowngradeRefused):
        plan_for(story, torch="2.12.0.dev20260305+cu130")


def test_aarch64_gets_newest_nightly_that_has_an_aarch64_wheel(story):
    plan, _ = plan_for(story, target=target(installed=[], platform="aarch64-manylinux_2_28"), cuda="cu130")
    torch = plan.package("torch")
    assert str(torch.version) == "2.12.0.dev20260306+cu130" and torch.action is Action.INSTALL
    assert plan.package("flashinfer-jit-cache").filename.endswith("manylinux_2_28_aarch64.whl")
    assert plan.package("triton").url.endswith("aarch64.whl")
    assert any("2.12.0.dev20260307+cu130 has no wheel for Python 3.12 on aarch64" in n for n in plan.notes)


def test_with_torchvision_picks_the_companion_of_the_installed_date(story):
    plan, _ = plan_for(story, with_=("torchvision",))
    tv = plan.package("torchvision")
    # 20260306's build pins torch==2.12.0.dev20260307: the companion, whatever its own date
    assert str(tv.version) == "0.27.0.dev20260306+cu130"
    assert tv.coupling is Coupling.TORCH_ABI and tv.index == "pytorch"
    assert plan.package("torch").action is Action.KEEP


def test_cu128_torch_gets_newest_flashinfer_with_a_cu128_jit_cache(tmp_path):
    w = build_story_world(tmp_path / "www", cuda="cu128")
    # 0.6.6 exists, but without a cu128 jit-cache (like 0.6.18 in real life)
    w.pypi("flashinfer-python", "0.6.6", requires=FI_REQUIRES)
    w.pypi("flashinfer-cubin", "0.6.6")
    for label in ("cu129", "cu130"):
        w.flashinfer("flashinfer-jit-cache", f"0.6.6+{label}", tag=f"{ABI3}-{X86}", page=f"{label}/flashinfer-jit-cache")
    plan, _ = plan_for(w, target=target(installed=["torch==2.12.0.dev20260307+cu128"]))
    got = versions(plan)
    assert got["flashinfer-python"] == "0.6.5" and got["flashinfer-jit-cache"] == "0.6.5+cu128"
    assert any("flashinfer 0.6.6: no flashinfer-jit-cache for cu128 at 0.6.6; newest with every component is 0.6.5" in n for n in plan.notes)


def test_cu129_torch_may_use_cu128_label_but_never_cu130(tmp_path):
    w = build_story_world(tmp_path / "www", cuda="cu129")
    w.pypi("flashinfer-python", "0.6.7", requires=FI_REQUIRES)
    w.pypi("flashinfer-cubin", "0.6.7")
    w.flashinfer("flashinfer-jit-cache", "0.6.7+cu128", tag=f"{ABI3}-{X86}", page="cu128/flashinfer-jit-cache")
    w.flashinfer("flashinfer-jit-cache", "0.6.7+cu130", tag=f"{ABI3}-{X86}", page="cu130/flashinfer-jit-cache")
    plan, srv = plan_for(w, target=target(installed=["torch==2.12.0.dev20260307+cu129"]))
    assert versions(plan)["flashinfer-jit-cache"] == "0.6.7+cu128"
    assert not srv.requests_for("/fi/cu130/flashinfer-jit-cache/")


def test_flashinfer_0_7_shim_and_providers_share_one_label(tmp_path):
    w = build_story_world(tmp_path / "www")
    w.pypi("flashinfer-python", "0.7.0", requires=["apache-tvm-ffi<0.2,>=0.1.6", "torch"])
    w.pypi("flashinfer-cubin", "0.7.0")  # cubin left PyPI after 0.6.13: this one must be ignored
    w.flashinfer("flashinfer-cubin", "0.7.0", page="flashinfer-cubin")
    providers = ["sm90a", "sm100a", "sm120f"]
    w.flashinfer(
        "flashinfer-jit-cache",
        "0.7.0+cu130",
        tag=f"{ABI3}-{X86}",
        page="cu130/flashinfer-jit-cache",
        requires=[f"flashinfer-jit-cache-{p}==0.7.0+cu130" for p in providers],
    )
    for p in providers:
        w.flashinfer(f"flashinfer-jit-cache-{p}", "0.7.0+cu130", tag=f"{ABI3}-{X86}", page=f"cu130/flashinfer-jit-cache-{p}")
        w.flashinfer(f"flashinfer-jit-cache-{p}", "0.7.0+cu129", tag=f"{ABI3}-{X86}", page=f"cu129/flashinfer-jit-cache-{p}")
    plan, _ = plan_for(w)
    got = versions(plan)
    assert got["flashinfer-python"] == "0.7.0" and got["flashinfer-jit-cache"] == "0.7.0+cu130"
    for p in providers:
        pkg = plan.package(f"flashinfer-jit-cache-{p}")
        assert str(pkg.version) == "0.7.0+cu130" and pkg.coupling is Coupling.CUDA and pkg.index == "flashinfer"
    assert plan.package("flashinfer-cubin").index == "flashinfer"


def test_pinned_flashinfer_version_and_component_switches(story):
    plan, _ = plan_for(story, flashinfer="0.6.4", jit_cache=False)
    got = versions(plan)
    assert got["flashinfer-python"] == "0.6.4" and got["flashinfer-cubin"] == "0.6.4"
    assert "flashinfer-jit-cache" not in got
    plan, _ = plan_for(story, flashinfer="none")
    assert not any(n.startswith("flashinfer") for n in versions(plan))


def test_unknown_flashinfer_version_says_why(story):
    with pytest.raises(NoPlanError) as err:
        plan_for(story, flashinfer="0.6.9")
    assert "flashinfer-python 0.6.9 does not exist" in str(err.value) and "0.6.5" in str(err.value)


def test_conflicting_with_pin_explains_the_chain(story):
    with pytest.raises(NoPlanError) as err:
        plan_for(story, with_=("apache-tvm-ffi==0.1.8",))
    msg = str(err.value)
    assert "apache-tvm-ffi" in msg and "flashinfer-python 0.6." in msg


def test_cuda_flag_must_match_installed_torch(story):
    with pytest.raises(UsageError) as err:
        plan_for(story, cuda="cu128")
    assert "--change-cuda" in err.value.hint


def test_no_torch_and_no_cuda_is_a_usage_error(story):
    with pytest.raises(UsageError):
        plan_for(story, target=target(installed=[]))


def test_keeps_installed_closure_package_when_it_satisfies(story):
    plan, _ = plan_for(story, target=target(installed=[f"torch=={NIGHTLY}", "numpy==2.1.0"]))
    numpy = plan.package("numpy")
    assert str(numpy.version) == "2.1.0" and numpy.action is Action.KEEP


def test_aot_wheel_is_never_chosen_even_if_pinned(story, tmp_path):
    # a legacy AOT page that does exist for this torch series still offers only torch-2.5 builds
    story.flashinfer(
        "flashinfer-python", "0.2.5+cu130torch2.5", tag="cp38-abi3-linux_x86_64", page="cu130/torch2.12/flashinfer-python", requires=["torch==2.5.*"]
    )
    with pytest.raises(NoPlanError):
        plan_for(story, flashinfer="0.2.5+cu130torch2.5", jit_cache=False, cubin=False)
    plan, _ = plan_for(story)
    assert any("0.2.5+cu130torch2.5 is built for torch 2.5" in n for n in plan.notes)
