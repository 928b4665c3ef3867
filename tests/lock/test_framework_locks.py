"""Framework plans in locks (issue 11, item 5): the pylock tool table records overrides, couplings
and built_for and reads them back; ``check`` fails a torch-ABI wheel built for another torch unless
the lock's inputs record ``abi-mismatch = "warn"``."""

from __future__ import annotations

import dataclasses
import datetime as dt
import sys

import pytest
from support.elfbuild import have_cc
from support.framework_world import FileClassifier, build_framework_world
from support.stack_world import serve

from resolve_gpu_stack.lock.check import check_lock
from resolve_gpu_stack.lock.files import read_lock
from resolve_gpu_stack.lock.pylock import plan_from_lock, render_pylock
from resolve_gpu_stack.model.declared import declared_target
from resolve_gpu_stack.model.inputs import inputs_digest
from resolve_gpu_stack.model.request import ResolveRequest
from resolve_gpu_stack.net.scan import readers
from resolve_gpu_stack.resolver.resolve import resolve

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

pytestmark = pytest.mark.skipif(not have_cc(), reason="needs a C compiler to build the ELF objects")

NIGHTLY = "2.12.0.dev20260307+cu130"
TARGET = declared_target("3.12", "x86_64-manylinux_2_28", [f"torch=={NIGHTLY}"])
TODAY = dt.date(2026, 3, 8)


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory):
    world = build_framework_world(tmp_path_factory.mktemp("fwlock"))
    out = {}
    with serve(world) as (_, defs, finder):
        for key, kw in {"without": {"without": ("sgl-kernel",)}, "warn": {"abi_mismatch": "warn"}}.items():
            out[key] = resolve(
                ResolveRequest.build(target=TARGET, with_=("sglang",), **kw),
                finder,
                defs,
                classifier=FileClassifier(world.root),
                exports=readers.exports_reader(finder.fetcher.scan_access()),
            )
        out["defs"] = defs
    return out


def write(tmp_path, plan, name="pylock.fw.toml"):
    """The plan as a pylock (the world's PyTorch pages give no hash: a stand-in one, as a download would)."""
    packages = tuple(p if p.sha256 or not p.url else dataclasses.replace(p, sha256="0" * 64) for p in plan.packages)
    plan = dataclasses.replace(plan, packages=packages)
    path = tmp_path / name
    path.write_text(render_pylock(plan, name="fw", command="resolve-gpu-stack lock --with sglang"))
    return path


def test_tool_table_records_overrides_couplings_and_built_for(plans, tmp_path):
    plan = plans["without"]
    path = write(tmp_path, plan)
    tool = tomllib.loads(path.read_text())["tool"]["resolve-gpu-stack"]
    assert {"package": "sglang", "requirement": "torch==2.9.1", "replaced-by": f"torch=={NIGHTLY}", "reason": "the installed torch is kept"} in tool[
        "overrides"
    ]
    audio = next(p for p in tool["packages"] if p["name"] == "torchaudio")
    assert audio["coupling"] == "torch-abi" and audio["built-for"] == "2.12.0.dev20260307"
    back = plan_from_lock(read_lock(path))
    assert back.overrides == plan.overrides
    assert back.package("torchaudio").built_for == "2.12.0.dev20260307"
    assert check_lock(path, plans["defs"], today=TODAY).findings == ()


def test_check_fails_a_torch_abi_wheel_for_another_torch_without_the_users_word(plans, tmp_path):
    plan = plans["warn"]
    kernel = plan.package("sgl-kernel")
    assert kernel.abi_mismatch
    # as locked with --abi-mismatch warn: a warning, not an error
    warned = check_lock(write(tmp_path, plan), plans["defs"], today=TODAY)
    assert [(f.level, f.package) for f in warned.findings] == [("warning", "sgl-kernel")]
    # the same packages without the recorded word: an error naming the package and the ways out
    inputs = {k: v for k, v in plan.inputs.items() if k != "abi-mismatch"}
    bare = dataclasses.replace(plan, inputs=inputs, inputs_digest=inputs_digest(inputs))
    checked = check_lock(write(tmp_path, bare, "pylock.bare.toml"), plans["defs"], today=TODAY)
    errors = [f for f in checked.findings if f.level == "error"]
    assert [f.package for f in errors] == ["sgl-kernel"]
    assert "cannot be shown to run with the lock's torch" in errors[0].message and "C++ symbols of torch" in errors[0].message
    assert "--without sgl-kernel" in (errors[0].hint or "")


def test_check_holds_each_recorded_verdict_to_the_locks_torch(plans, tmp_path):
    """A lock edited so its torch is another than the one its verdicts were made against fails,
    naming the package and both torches; so does a stable-ABI floor above it or another CUDA major."""
    from resolve_gpu_stack.model.abi import AbiKind, AbiVerdict

    plan = plans["warn"]
    helper = plan.package("cuda-helper")
    assert helper is not None and helper.abi is not None and helper.abi.cuda_majors == (13,)
    cases = {
        "another torch": dataclasses.replace(helper.abi, against="2.11.0+cu130"),
        "cuda 12": dataclasses.replace(helper.abi, cuda_majors=(12,)),
        "stable floor": AbiVerdict(kind=AbiKind.STABLE, against=str(plan.torch.version), floor="2.13"),
    }
    for case, verdict in cases.items():
        edited = dataclasses.replace(plan, packages=tuple(dataclasses.replace(p, abi=verdict) if p.name == "cuda-helper" else p for p in plan.packages))
        inputs = {k: v for k, v in plan.inputs.items() if k != "abi-mismatch"}
        edited = dataclasses.replace(edited, inputs=inputs, inputs_digest=inputs_digest(inputs))
        checked = check_lock(write(tmp_path, edited, f"pylock.{case.replace(' ', '-')}.toml"), plans["defs"], today=TODAY)
        errors = [f for f in checked.findings if f.level == "error" and f.package == "cuda-helper"]
        assert errors, case
        assert {"another torch": "made against torch 2.11.0+cu130", "cuda 12": "CUDA 12", "stable floor": "from torch 2.13 on"}[case] in errors[0].message


def test_check_catches_a_built_for_another_torch_even_unflagged(plans, tmp_path):
    plan = plans["without"]
    packages = tuple(dataclasses.replace(p, built_for="2.9.1") if p.name == "torchaudio" else p for p in plan.packages)
    checked = check_lock(write(tmp_path, dataclasses.replace(plan, packages=packages)), plans["defs"], today=TODAY)
    errors = [f for f in checked.findings if f.level == "error"]
    assert [f.package for f in errors] == ["torchaudio"] and "built for torch 2.9.1" in errors[0].message
