"""Plans for the lock tests, made by hand, and plans resolved on a story world."""

from __future__ import annotations

import hashlib
from dataclasses import replace

from packaging.version import Version

from resolve_gpu_stack.model import Action, Coupling, LockedPackage, LockPlan, TargetSummary
from resolve_gpu_stack.model.declared import declared_target
from resolve_gpu_stack.model.inputs import inputs_digest
from resolve_gpu_stack.model.request import ResolveRequest
from support.stack_world import resolve_with, serve

TORCH = "2.12.0.dev20260307+cu130"


SHA = {n: hashlib.sha256(n.encode()).hexdigest() for n in ("fi", "cubin", "jit", "torch", "triton")}


COMMAND = "resolve-gpu-stack lock --output pylock.gpu.toml"


def make_plan(**changes: object) -> LockPlan:
    packages = (
        LockedPackage(
            name="torch",
            version=Version(TORCH),
            action=Action.KEEP,
            index="installed",
            coupling=Coupling.TORCH,
            reason="installed nightly, never changed",
            installed_version=Version(TORCH),
            url="https://download.pytorch.org/whl/nightly/cu130/torch-2.12.0.dev20260307%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl",
            filename="torch-2.12.0.dev20260307+cu130-cp312-cp312-manylinux_2_28_x86_64.whl",
            sha256=SHA["torch"],
            size=900_000_000,
            upload_time="2026-03-07T08:12:34Z",
        ),
        LockedPackage(
            name="flashinfer-python",
            version=Version("0.6.16"),
            action=Action.UPGRADE,
            index="pypi",
            coupling=Coupling.AGNOSTIC,
            reason="requested",
            installed_version=Version("0.6.10"),
            url="https://files.pypi.example/packages/flashinfer_python-0.6.16-py3-none-any.whl",
            filename="flashinfer_python-0.6.16-py3-none-any.whl",
            sha256=SHA["fi"],
            size=4_000_000,
            upload_time="2026-03-01T10:00:00.250000Z",
            requires_python=">=3.10",
            dependencies=("torch", "apache-tvm-ffi"),
        ),
        LockedPackage(
            name="flashinfer-jit-cache",
            version=Version("0.6.16+cu130"),
            action=Action.INSTALL,
            index="flashinfer",
            coupling=Coupling.CUDA,
            reason="largest label <= cu130",
            url="https://flashinfer.ai/whl/cu130/flashinfer-jit-cache/flashinfer_jit_cache-0.6.16%2Bcu130-cp39-abi3-manylinux_2_28_x86_64.whl",
            filename="flashinfer_jit_cache-0.6.16+cu130-cp39-abi3-manylinux_2_28_x86_64.whl",
            sha256=SHA["jit"],
        ),
        LockedPackage(
            name="flashinfer-cubin",
            version=Version("0.6.16"),
            action=Action.CHANGE,
            index="flashinfer",
            coupling=Coupling.AGNOSTIC,
            reason="must equal flashinfer-python",
            url="https://flashinfer.ai/whl/flashinfer-cubin/flashinfer_cubin-0.6.16-py3-none-any.whl",
            filename="flashinfer_cubin-0.6.16-py3-none-any.whl",
            sha256=SHA["cubin"],
            size=10,
            installed_version=Version("0.6.16"),
        ),
    )
    inputs = {
        "request": ["flashinfer-python"],
        "torch_channel": "nightly",
        "flashinfer_channel": "stable",
        "allow_downgrade": False,
        "snapshot": {"date": "2026-03-07", "pages": 12},
    }
    plan = LockPlan(
        target=TargetSummary(python="3.12", platform="x86_64-manylinux_2_28", cuda="cu130"),
        packages=packages,
        notes=("torch kept at the installed nightly", "jit-cache: cu130"),
        flashinfer_version=Version("0.6.16"),
        cuda_label="cu130",
        inputs=inputs,
        inputs_digest=inputs_digest(inputs),
        indexes={"pytorch": "https://download.pytorch.org/whl/", "flashinfer": "https://flashinfer.ai/whl/", "pypi": "https://pypi.example/simple/"},
    )
    return replace(plan, **changes)


def with_package(plan: LockPlan, name: str, **changes: object) -> LockPlan:
    return replace(plan, packages=tuple(replace(p, **changes) if p.name == name else p for p in plan.packages))


NIGHTLY = "2.12.0.dev20260307+cu130"


def target(installed=(f"torch=={NIGHTLY}",), platform="x86_64-manylinux_2_28", python="3.12"):
    return declared_target(python, platform, list(installed))


def plan_for(world, **kw):
    kw.setdefault("target", target())
    with serve(world) as (srv, defs, finder):
        plan = resolve_with(finder, defs, ResolveRequest.build(**kw))
        return plan, srv


def versions(plan):
    return {p.name: str(p.version) for p in plan.packages}
