"""`install` with GPUs known, end to end (loopback world, real venv, real uv): a FlashInfer 0.7
jit-cache shim is installed with only the provider the GPU needs, uv's --no-deps does not pull the
skipped providers back in, and `doctor` accepts that minimal install as complete for the GPU."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.doors import index_flags, run_cli
from support.install_world import NIGHTLY, PLAT, build_world, installed, make_venv, needs_linux, torch_wheel
from support.server import IndexServer
from support.stack_world import ABI3
from support.world import World

PROVIDERS = ("sm90a", "sm100a", "sm120a", "sm120f")


def build_07_world(root: Path) -> World:
    w = build_world(root)
    w.pypi("flashinfer-python", "0.7.0", requires=["apache-tvm-ffi<0.2,>=0.1.6", "torch"], requires_python=">=3.10")
    w.flashinfer("flashinfer-cubin", "0.7.0", page="flashinfer-cubin")
    w.flashinfer(
        "flashinfer-jit-cache",
        "0.7.0+cu130",
        tag=f"{ABI3}-{PLAT}",
        page="cu130/flashinfer-jit-cache",
        requires=[f"flashinfer-jit-cache-{p}==0.7.0+cu130" for p in PROVIDERS],
    )
    for p in PROVIDERS:
        w.flashinfer(f"flashinfer-jit-cache-{p}", "0.7.0+cu130", tag=f"{ABI3}-{PLAT}", page=f"cu130/flashinfer-jit-cache-{p}", padding=20_000)
    return w


@pytest.fixture
def world07(tmp_path: Path, uv_env):
    world = build_07_world(tmp_path / "www")
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        yield world, srv


def _smi_dir(tmp_path: Path, cap: str) -> Path:
    d = tmp_path / "smi-bin"
    d.mkdir(exist_ok=True)
    smi = d / "nvidia-smi"
    smi.write_text(f'#!/bin/sh\necho "NVIDIA RTX PRO 6000 Blackwell, {cap}"\n')
    smi.chmod(0o755)
    return d


@pytest.mark.slow
@needs_linux
@pytest.mark.parametrize("how", ["--gpu", "nvidia-smi"])
def test_install_for_sm120_installs_the_shim_and_one_provider(world07, tmp_path, uv_env, capsys, monkeypatch, how):
    world, srv = world07
    python = make_venv(tmp_path / "venv", uv_env, torch_wheel(world, NIGHTLY))
    smi = _smi_dir(tmp_path, "12.0")
    gpu_flags = ["--gpu", "sm120"] if how == "--gpu" else []
    if how == "nvidia-smi":  # a probed target's default GPUs come from nvidia-smi on PATH
        monkeypatch.setenv("PATH", f"{smi}{os.pathsep}{os.environ['PATH']}")
    rc, out, err = run_cli(capsys, "install", "--python", python, *gpu_flags, *index_flags(srv.url), "--cache-dir", str(tmp_path / "cache"), "--format", "json")
    assert rc == 0, err
    got = installed(python)
    assert got["flashinfer-jit-cache"] == "0.7.0+cu130" and got["flashinfer-jit-cache-sm120a"] == "0.7.0+cu130"
    assert not {f"flashinfer-jit-cache-{p}" for p in ("sm90a", "sm100a", "sm120f")} & set(got)  # uv --no-deps kept them out
    asked = [path for method, path, _ in srv.log if method == "GET"]
    assert not any("flashinfer_jit_cache_sm90a" in p and p.endswith(".whl") for p in asked)  # never downloaded
    assert {p["name"] for p in json.loads(out)["packages"]} >= {"flashinfer-jit-cache", "flashinfer-jit-cache-sm120a"}

    rc, out, _ = run_cli(capsys, "doctor", "--python", python, "--nvidia-smi", str(smi / "nvidia-smi"), "--format", "json")
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    assert checks["flashinfer-components"]["status"] == "pass", checks["flashinfer-components"]
    assert checks["flashinfer-alignment"]["status"] == "pass"
    assert checks["gpu-arch"]["status"] == "pass" and "SASS 12.0a" in checks["gpu-arch"]["message"]
