"""Table-driven tests of the pure rules: routing, CUDA labels, coupling, alignment, invariants."""

from __future__ import annotations

import pytest
from packaging.utils import canonicalize_name
from packaging.version import Version

from resolve_gpu_stack.data.definitions import RouteContext, load_definitions
from resolve_gpu_stack.model import Action, Coupling, LockedPackage, LockPlan, TargetSummary
from resolve_gpu_stack.model.cuda import CudaLabel
from resolve_gpu_stack.resolver.torch_selection import _lower
from resolve_gpu_stack.rules.fit import torch_abi_mismatch
from resolve_gpu_stack.rules.invariants import plan_violations
from resolve_gpu_stack.rules.versions import jit_cache_version

DEFS = load_definitions().with_index_urls({"pypi": "https://pypi.example/simple/"})


@pytest.mark.parametrize(
    "label, expected", [("cu130", (13, 0)), ("cu128", (12, 8)), ("cu129", (12, 9)), ("cu134", (13, 4)), ("cpu", None), ("cu", None), ("rocm6.4", None)]
)
def test_cuda_label_parse(label, expected):
    parsed = CudaLabel.parse(label)
    assert (None if parsed is None else (parsed.major, parsed.minor)) == expected
    if parsed is not None:
        assert str(parsed) == label


@pytest.mark.parametrize(
    "torch, expected",
    [
        ("2.12.0.dev20260307+cu130", "cu130"),
        ("2.9.1+cu128", "cu128"),
        ("2.9.1+cpu", None),
        ("2.9.1", None),
        ("2.5.0+rocm6.4", None),
        ("0.2.5+cu124torch2.5", None),
    ],
)
def test_cuda_label_of_torch(torch, expected):
    label = CudaLabel.of_torch(torch)
    assert (None if label is None else str(label)) == expected


@pytest.mark.parametrize(
    "torch_cuda, labels",
    [
        ("cu130", ["cu130"]),  # never cu134 (newer) nor cu12x (other major)
        ("cu129", ["cu129", "cu128"]),
        ("cu128", ["cu128"]),
        ("cu134", ["cu134", "cu130"]),
        ("cu126", []),  # no jit-cache label that old
        (None, []),
    ],
)
def test_flashinfer_label_candidates_same_major_not_newer(torch_cuda, labels):
    assert DEFS.flashinfer_labels(torch_cuda) == labels


@pytest.mark.parametrize(
    "name, ctx, expected",
    [
        ("torch", RouteContext(torch_channel="nightly", cuda="cu130"), [("pytorch", "https://download.pytorch.org/whl/nightly/cu130/torch/")]),
        ("torch", RouteContext(torch_channel="stable", cuda="cu130"), [("pytorch", "https://download.pytorch.org/whl/cu130/torch/")]),
        ("torch", RouteContext(torch_channel="test", cuda="cu128"), [("pytorch", "https://download.pytorch.org/whl/test/cu128/torch/")]),
        ("Triton", RouteContext(cuda="cu130"), [("pytorch", "https://download.pytorch.org/whl/nightly/cu130/triton/")]),
        ("flashinfer-jit-cache", RouteContext(cuda="cu130"), [("flashinfer", "https://flashinfer.ai/whl/cu130/flashinfer-jit-cache/")]),
        (
            "flashinfer_jit_cache_sm90a",
            RouteContext(cuda="cu130", flashinfer_channel="nightly"),
            [("flashinfer", "https://flashinfer.ai/whl/nightly/cu130/flashinfer-jit-cache-sm90a/")],
        ),
        (
            "flashinfer-python",
            RouteContext(cuda="cu130", torch_series="2.12"),
            [("pypi", "https://pypi.example/simple/flashinfer-python/"), ("flashinfer", "https://flashinfer.ai/whl/cu130/torch2.12/flashinfer-python/")],
        ),
        (
            "flashinfer-python",
            RouteContext(cuda="cu130", flashinfer_channel="nightly"),
            [("flashinfer", "https://flashinfer.ai/whl/nightly/flashinfer-python/")],
        ),
        (
            "flashinfer-cubin",
            RouteContext(cuda="cu130"),
            [("pypi", "https://pypi.example/simple/flashinfer-cubin/"), ("flashinfer", "https://flashinfer.ai/whl/flashinfer-cubin/")],
        ),
        ("numpy", RouteContext(cuda="cu130"), [("pypi", "https://pypi.example/simple/numpy/")]),
        ("torchtriton", RouteContext(cuda="cu130"), [("pytorch", "https://download.pytorch.org/whl/nightly/cu130/torchtriton/")]),
    ],
)
def test_routing_sends_each_package_only_to_its_owner(name, ctx, expected):
    assert [(p.index, p.url) for p in DEFS.pages_for(name, ctx)] == expected


@pytest.mark.parametrize(
    "name, version, owner",
    [
        ("flashinfer-cubin", "0.6.13", "pypi"),
        ("flashinfer-cubin", "0.6.14", "flashinfer"),
        ("torch", "99.0", "pytorch"),
        ("flashinfer-jit-cache", "9.9.9+cu130", "flashinfer"),
        ("numpy", "2.0", "pypi"),
    ],
)
def test_owner_by_version(name, version, owner):
    assert DEFS.owner(name, Version(version), RouteContext()) == owner


@pytest.mark.parametrize(
    "name, version, coupling",
    [
        ("torch", "2.12.0.dev20260307+cu130", Coupling.TORCH),
        ("flashinfer-python", "0.2.5+cu124torch2.5", Coupling.TORCH_ABI),
        ("flashinfer-python", "0.4.0rc3", Coupling.TORCH_ABI),
        ("flashinfer-python", "0.4.0rc4", Coupling.AGNOSTIC),
        ("flashinfer-python", "0.6.5", Coupling.AGNOSTIC),
        ("flashinfer-cubin", "0.6.5", Coupling.AGNOSTIC),
        ("flashinfer-jit-cache", "0.6.5+cu130", Coupling.CUDA),
        ("flashinfer-jit-cache-sm90a", "0.7.0+cu130", Coupling.CUDA),
        ("torchvision", "0.27.0.dev20260306+cu130", Coupling.TORCH_ABI),
        ("numpy", "2.2.0", Coupling.AGNOSTIC),
    ],
)
def test_coupling_classes_from_data(name, version, coupling):
    assert DEFS.coupling(name, Version(version))[0] is coupling


@pytest.mark.parametrize(
    "python, label, expected",
    [("0.6.5", "cu130", "0.6.5+cu130"), ("0.6.8.post1", "cu129", "0.6.8.post1+cu129"), ("0.6.6.dev20260301", "cu130", "0.6.6.dev20260301+cu130")],
)
def test_jit_cache_version_is_public_plus_label(python, label, expected):
    assert str(jit_cache_version(Version(python), label)) == expected


@pytest.mark.parametrize(
    "old, new, public_only, downgrade",
    [
        ("2.12.0.dev20260307+cu130", "2.10.0+cu130", False, True),
        ("2.12.0.dev20260307+cu130", "2.12.0.dev20260306+cu130", False, True),
        ("2.12.0.dev20260306+cu130", "2.12.0.dev20260307+cu130", False, False),
        ("2.12.0.dev20260307+cu130", "2.12.0+cu130", False, False),  # the final release is newer than its dev builds
        ("2.12.0.dev20260307+cu130", "2.12.0.dev20260307+cu128", False, True),
        ("2.12.0.dev20260307+cu130", "2.12.0.dev20260307+cu128", True, False),
    ],
)
def test_never_downgrade_compares_pep440_with_local_labels(old, new, public_only, downgrade):
    # the torch selection's own rule (``--change-cuda`` compares public versions only)
    assert _lower(Version(new), Version(old), public_only=public_only) is downgrade


@pytest.mark.parametrize(
    "wheel, torch, rejected",
    [
        ("0.2.5+cu124torch2.5", "2.5.1+cu124", False),
        ("0.2.5+cu124torch2.5", "2.6.0+cu124", True),
        ("0.2.5+cu124torch2.5", "2.12.0.dev20260307+cu130", True),
        ("0.6.5", "2.12.0.dev20260307+cu130", False),
    ],
)
def test_aot_wheels_only_fit_their_torch_series(wheel, torch, rejected):
    coupling, why = DEFS.coupling("flashinfer-python", Version(wheel))
    assert (torch_abi_mismatch(coupling, why, Version(wheel), Version(torch)) is not None) is rejected


def _pkg(name, version, index, coupling=Coupling.AGNOSTIC, action=Action.INSTALL, sha="a" * 64, url=None):
    return LockedPackage(
        name=canonicalize_name(name),
        version=Version(version),
        action=action,
        index=index,
        coupling=coupling,
        sha256=sha,
        url=url or f"https://h.example/{name}.whl",
    )


def _plan(*pkgs, label="cu130"):
    return LockPlan(
        target=TargetSummary(python="3.12", platform="x86_64-manylinux_2_28", cuda="cu130"),
        packages=tuple(pkgs),
        cuda_label=label,
        flashinfer_version=Version("0.6.5"),
    )


GOOD = [
    _pkg("torch", "2.12.0.dev20260307+cu130", "installed", Coupling.TORCH, Action.KEEP, sha=None),
    _pkg("flashinfer-python", "0.6.5", "pypi"),
    _pkg("flashinfer-cubin", "0.6.5", "pypi"),
    _pkg("flashinfer-jit-cache", "0.6.5+cu130", "flashinfer", Coupling.CUDA),
]


def _replace(name, **kw):
    from dataclasses import replace

    return [replace(p, **kw) if p.name == name else p for p in GOOD]


@pytest.mark.parametrize(
    "packages, problem",
    [
        (GOOD, None),
        (_replace("flashinfer-cubin", version=Version("0.6.4")), "flashinfer-cubin: version 0.6.4 != flashinfer-python 0.6.5"),
        (_replace("flashinfer-cubin", version=Version("0.6.5.post1")), "flashinfer-cubin: version 0.6.5.post1 != flashinfer-python 0.6.5"),
        (_replace("flashinfer-jit-cache", version=Version("0.6.50+cu130")), "is not 0.6.5+<cuda label>"),
        (_replace("flashinfer-jit-cache", version=Version("0.6.5.post1+cu130")), "is not 0.6.5+<cuda label>"),
        (_replace("flashinfer-jit-cache", version=Version("0.6.5+cu128")), "does not match torch's CUDA major"),
        (_replace("flashinfer-jit-cache", version=Version("0.6.5")), "has no +cuNNN label"),
        (_replace("flashinfer-jit-cache", sha256=None), "no sha256"),
        (_replace("flashinfer-jit-cache", index="pypi"), "comes from index 'pypi', but 'flashinfer' owns it"),
        (_replace("flashinfer-cubin", url="https://user:tok@h.example/x.whl"), "URL carries credentials"),
        (GOOD + [_pkg("numpy", "2.0", "pypi"), _pkg("numpy", "2.1", "pypi")], "numpy: listed 2 times"),
        (GOOD + [_pkg("flashinfer-python", "0.2.5+cu124torch2.5", "flashinfer", Coupling.TORCH_ABI)], "built for torch 2.5"),
    ],
)
def test_plan_invariants(packages, problem):
    found = [str(v) for v in plan_violations(_plan(*packages), DEFS)]
    if problem is None:
        assert found == []
    else:
        assert any(problem in f for f in found), found


def test_torch_floor_invariant():
    found = plan_violations(_plan(*GOOD), DEFS, torch_floor=Version("2.12.0.dev20260308+cu130"))
    assert any("lower than the installed" in str(v) for v in found)


def test_unlabelled_cuda_libraries_are_left_to_the_requirements():
    """NVIDIA's CUDA libraries are CUDA-bound by data (components.toml) but carry no +cuNNN label:
    torch pins them exactly, so the label check does not refuse them; FlashInfer's CUDA builds
    always carry one, and one without it is refused."""
    from resolve_gpu_stack.model import Coupling
    from resolve_gpu_stack.rules.fit import RejectReason, cuda_mismatch

    assert DEFS.coupling("nvidia-nccl-cu13", Version("2.29.7"))[0] is Coupling.CUDA
    assert DEFS.coupling("cuda-bindings", Version("13.0.3"))[0] is Coupling.CUDA
    assert cuda_mismatch(Coupling.CUDA, Version("2.29.7"), CudaLabel(13, 0)) is None
    refused = cuda_mismatch(Coupling.CUDA, Version("0.6.5"), CudaLabel(13, 0), label_required=True)
    assert refused is not None and refused.reason is RejectReason.CUDA
    assert cuda_mismatch(Coupling.CUDA, Version("0.6.5+cu129"), CudaLabel(13, 0)).reason is RejectReason.CUDA
