"""Issue 28: the torch users have today is a kept torch, at every door.

``pip install torch`` gives PyPI's torch 2.15.0: no ``+cuNNN`` label, METADATA pinning
``cuda-toolkit[...]==13.2.2``, ``torch/version.py`` saying CUDA 13.2. A real venv holding a stand-in
of it (installed by pip without this machine's pip configuration, which caps torch, as a user's
venv would not) is kept as cu132 by ``resolve``, ``lock -o``, ``check``, ``install`` (torch
byte-identical), ``install --lock``, ``inspect``, ``doctor`` and ``export uv``; FlashInfer's
jit-cache takes the largest label of CUDA 13 <= 13.2 (cu130).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from packaging.version import Version
from support.abi_world import have_cxx
from support.doors import index_flags, run_cli
from support.paths import REPO
from support.server import IndexServer
from support.today_world import TORCH, build_today_world

from resolve_gpu_stack.data.definitions import load_definitions
from resolve_gpu_stack.model.abi import CUDA as CUDA_KIND
from resolve_gpu_stack.model.abi import TORCH as TORCH_KIND
from resolve_gpu_stack.model.abi import MemberAbi, WheelAbi
from resolve_gpu_stack.model.cuda import CudaLabel, kept_torch_cuda
from resolve_gpu_stack.rules.abi import AbiPolicy, AbiTorch, judge

pytestmark = pytest.mark.skipif(not have_cxx(), reason="needs a C++ compiler to build the shared objects")

TOOLKIT_PIN = "cuda-toolkit[cublas,cudart]==13.2.2; platform_system == 'Linux'"
LINUX = {"platform_system": "Linux", "sys_platform": "linux"}


# -- the one rule ------------------------------------------------------------------------------------


def test_the_kept_torch_cuda_comes_from_its_label_else_its_runtime_pin_else_version_py() -> None:
    assert kept_torch_cuda("2.12.0.dev20260307+cu130", (TOOLKIT_PIN,), LINUX, "13.2").label == CudaLabel(13, 0)  # type: ignore[union-attr]
    pinned = kept_torch_cuda("2.15.0", (TOOLKIT_PIN,), LINUX, None)
    assert pinned is not None and pinned.label == CudaLabel(13, 2) and pinned.source == "pin"
    assert "cuda-toolkit[cublas,cudart]==13.2.2" in pinned.words()
    old = kept_torch_cuda("2.9.1", ("nvidia-cuda-runtime-cu12==12.8.90",), LINUX, None)
    assert old is not None and old.label == CudaLabel(12, 8)
    # the pin's marker does not hold (macOS): version.py says
    read = kept_torch_cuda("2.15.0", (TOOLKIT_PIN,), {"platform_system": "Darwin"}, "13.2")
    assert read is not None and read.label == CudaLabel(13, 2) and read.source == "version.py"
    assert kept_torch_cuda("2.15.0", ("cuda-toolkit>=13",), LINUX, None) is None  # a floor names no runtime
    assert kept_torch_cuda("2.15.0+cpu", (), LINUX, None) is None


# -- the doors ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def today(tmp_path_factory: pytest.TempPathFactory):
    """The world served, and a venv holding PyPI's torch 2.15.0 stand-in (pip, no machine config)."""
    root = tmp_path_factory.mktemp("today")
    world, _ = build_today_world(root)
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        venv = root / "venv"
        env = {**os.environ, "PIP_CONFIG_FILE": "/dev/null", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=env)
        python = str(venv / "bin" / "python")
        pip = [python, "-m", "pip", "install", "-q", "--no-deps", "--index-url", f"{srv.url}pypi-torch/", f"torch=={TORCH}"]
        subprocess.run(pip, check=True, env=env, capture_output=True)
        yield world, srv, python, venv


def flags(world, srv, tmp_path: Path) -> list[str]:  # type: ignore[no-untyped-def]
    return [*index_flags(srv.url), "--cache-dir", str(tmp_path / "c")]


def torch_bytes(venv: Path) -> dict[Path, bytes]:
    files = sorted((venv / "lib").glob("python*/site-packages/torch/**/*"))
    return {p: p.read_bytes() for p in files if p.is_file() and "__pycache__" not in p.parts}


def rows(plan: dict) -> dict[str, dict]:
    return {p["name"]: p for p in plan["packages"]}


def assert_kept_cu132(plan: dict) -> None:
    assert plan["target"]["cuda"] == "cu132", plan["target"]
    got = rows(plan)
    assert got["torch"]["version"] == TORCH and got["torch"]["action"] == "keep", got["torch"]
    assert got["flashinfer-jit-cache"]["version"] == "0.6.5+cu130"


@pytest.mark.parametrize("extra", [["--torch", "installed"], ["--torch", "installed", "--cuda", "cu132"], ["--torch", "stable"]])
def test_resolve_keeps_pypis_torch_as_cu132_and_plans_jit_cache_cu130(today, capsys, tmp_path, extra) -> None:
    """``--torch installed`` (and ``--cuda cu132`` with it, and ``--torch stable``): the kept torch is
    PyPI's 2.15.0, never swapped for the index's labelled twin 2.15.0+cu132."""
    world, srv, python, _ = today
    code, out, err = run_cli(capsys, "resolve", "--python", python, *extra, *flags(world, srv, tmp_path), "--format", "json")
    assert code == 0, err
    assert_kept_cu132(json.loads(out))


def test_another_cuda_than_the_pins_is_refused_naming_the_pin(today, capsys, tmp_path) -> None:
    world, srv, python, _ = today
    code, out, err = run_cli(capsys, "resolve", "--python", python, "--torch", "installed", "--cuda", "cu130", *flags(world, srv, tmp_path))
    assert code == 2 and out == ""
    assert "built for cu132" in err and "cuda-toolkit[cublas,cudart]==13.2.2" in err, err


def test_a_declared_torch_without_label_is_known_from_its_release_on_pypi_else_asks_for_cuda(today, capsys, tmp_path) -> None:
    """``--installed torch==2.15.0`` (no label, no --cuda): its CUDA comes from the METADATA of its
    own wheel on PyPI's torch page (its cuda-toolkit==13.2.2 pin: cu132), and the kept torch is that
    release, never the index's labelled twin. A release PyPI does not have asks for --cuda, saying why."""
    world, srv, _, _ = today
    declared = ["--python", "3.11", "--platform", "x86_64-manylinux_2_28", "--installed", f"torch=={TORCH}"]
    for extra in ([], ["--torch", "installed"], ["--cuda", "cu132", "--torch", "installed"]):
        code, out, err = run_cli(capsys, "resolve", *declared, *extra, *flags(world, srv, tmp_path), "--format", "json")
        assert code == 0, (extra, err)
        assert_kept_cu132(json.loads(out))
    missing = ["--python", "3.11", "--platform", "x86_64-manylinux_2_28", "--installed", "torch==2.15.1"]
    code, out, err = run_cli(capsys, "resolve", *missing, *flags(world, srv, tmp_path))
    assert code == 2 and out == ""
    assert "no +cuNNN label" in err and "PyPI's torch page has no wheel of that release" in err and "--cuda" in err, err
    # where the PyTorch index is mirrored flat from such a page, it says cu132 the same way
    urls = {**world.index_urls(srv.url), "pytorch": f"flat:{srv.url}pypi-torch/"}
    mirror = [*(w for n, u in urls.items() for w in ("--index", f"{n}={u}")), "--cache-dir", str(tmp_path / "c2")]
    code, out, err = run_cli(capsys, "resolve", *declared, "--torch", "installed", *mirror, "--format", "json")
    assert code == 0, err
    assert_kept_cu132(json.loads(out))


def test_lock_config_lock_check_and_export_uv_keep_it(today, capsys, tmp_path, monkeypatch) -> None:
    world, srv, python, _ = today
    indexes = ", ".join(f'{n} = "{u}"' for n, u in world.index_urls(srv.url).items())
    (tmp_path / "pyproject.toml").write_text(
        f"[tool.resolve-gpu-stack]\nindexes = {{ {indexes} }}\n\n"
        f'[[tool.resolve-gpu-stack.target]]\nname = "node"\npython = "3.11"\nplatform = "x86_64-manylinux_2_28"\n'
        f'installed = ["torch=={TORCH}"]\ncuda = "cu132"\ntorch = "installed"\noutput = ["pylock.node.toml"]\n'
    )
    monkeypatch.chdir(tmp_path)
    cache = ["--cache-dir", str(tmp_path / "c")]
    lock = tmp_path / "pylock.toml"
    code, _, err = run_cli(capsys, "lock", "--python", python, "--torch", "installed", *flags(world, srv, tmp_path), "-o", str(lock))
    assert code == 0, err
    code, _, err = run_cli(capsys, "lock", *cache)
    assert code == 0, err
    for path in (lock, tmp_path / "pylock.node.toml"):
        data = tomllib.loads(path.read_text())
        assert data["tool"]["resolve-gpu-stack"]["target"]["cuda"] == "cu132"
        assert {p["name"]: p["version"] for p in data["packages"]}["flashinfer-jit-cache"] == "0.6.5+cu130"
    code, _, err = run_cli(capsys, "check", "--target", "node")
    assert code == 0, err
    code, _, err = run_cli(capsys, "check", "--target", "node", "--online", *cache)
    assert code == 0, err
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "app"\nversion = "0"\nrequires-python = ">=3.11"\n')
    code, _, err = run_cli(capsys, "export", "uv", "--python", python, "--torch", "installed", *flags(world, srv, tmp_path), "--project", str(project))
    assert code == 0, err
    assert f"torch=={TORCH}" in (project / "pyproject.toml").read_text()


def test_doctor_inspect_and_candidates_judge_on_cu132(today, capsys, tmp_path) -> None:
    world, srv, python, _ = today
    code, out, err = run_cli(capsys, "doctor", "--python", python, "--format", "json")
    torch = {c["name"]: c for c in json.loads(out)["checks"]}["torch"]
    assert torch["status"] == "pass" and torch["details"]["cuda"] == "cu132", torch
    assert "cuda-toolkit[cublas,cudart]==13.2.2" in torch["message"]
    # the CUDA 13 twin decides on the kept torch's CUDA 13.2; the C++ imports are read against its files
    for wheel, kind in (("torch-memory-saver==0.0.10", "stable"), ("sglang-kernel==0.4.10", "locked")):
        code, out, err = run_cli(capsys, "inspect", wheel, "--python", python, *flags(world, srv, tmp_path), "--format", "json")
        verdict = json.loads(out)["verdict"]
        assert code == 0 and (verdict["abi"], verdict["runs"]) == (kind, True), (out, err)
    code, out, err = run_cli(capsys, "candidates", "torch-memory-saver", "--python", python, *flags(world, srv, tmp_path), "--format", "json")
    assert code == 0, err
    [row] = json.loads(out)["files"]
    assert row["fits_target"] is True, row


@pytest.mark.slow
def test_install_and_install_lock_leave_torch_byte_identical(today, capsys, tmp_path, uv_env) -> None:
    world, srv, python, venv = today
    before = torch_bytes(venv)
    assert any(p.name == "libtorch_cpu.so" for p in before)
    lock = tmp_path / "pylock.toml"
    code, _, err = run_cli(capsys, "lock", "--python", python, "--torch", "installed", *flags(world, srv, tmp_path), "-o", str(lock))
    assert code == 0, err
    code, out, err = run_cli(capsys, "install", "--lock", str(lock), "--python", python, "--cache-dir", str(tmp_path / "c"), "--format", "json")
    assert code == 0, err
    assert torch_bytes(venv) == before
    code, out, err = run_cli(capsys, "install", "--python", python, "--torch", "installed", *flags(world, srv, tmp_path), "--format", "json")
    assert code == 0, err
    assert torch_bytes(venv) == before
    listed = subprocess.run([python, "-m", "pip", "list", "--format", "json"], capture_output=True, text=True, check=True, env=uv_env).stdout
    have = {r["name"]: r["version"] for r in json.loads(listed)}
    assert have["torch"] == TORCH and have["flashinfer-jit-cache"] == "0.6.5+cu130"
    # sglang on it: its torch==2.14.1 pin is overridden in the install too, torch untouched
    code, out, err = run_cli(
        capsys, "install", "--python", python, "--torch", "installed", "--with", "sglang", *flags(world, srv, tmp_path), "--format", "json"
    )
    assert code == 0, err
    assert torch_bytes(venv) == before
    listed = subprocess.run([python, "-m", "pip", "list", "--format", "json"], capture_output=True, text=True, check=True, env=uv_env).stdout
    have = {r["name"]: r["version"] for r in json.loads(listed)}
    assert (have["torch"], have["sglang"], have["sglang-kernel"], have["torch-memory-saver"]) == (TORCH, "0.5.23", "0.4.10", "0.0.10")


# -- binaries decide, pins do not; no silent walk-back ------------------------------------------------


def test_with_sglang_plans_the_newest_on_the_kept_torch_its_pin_reported_as_overridden(today, capsys, tmp_path) -> None:
    world, srv, python, _ = today
    code, out, err = run_cli(
        capsys, "resolve", "--python", python, "--torch", "installed", "--with", "sglang", *flags(world, srv, tmp_path), "--format", "json"
    )
    assert code == 0, err
    plan = json.loads(out)
    assert_kept_cu132(plan)
    got = rows(plan)
    assert got["sglang"]["version"] == "0.5.23" and got["sglang-kernel"]["version"] == "0.4.10"
    assert "sglang pins torch==2.14.1; kept 2.15.0: its compiled parts import only symbols 2.15.0 exports" in got["sglang"]["reason"]
    assert got["sglang-kernel"]["abi"]["kind"] == "locked" and got["sglang-kernel"]["abi"]["refusal"] is None
    saver = got["torch-memory-saver"]
    assert saver["version"] == "0.0.10" and saver["abi"]["refusal"] is None and saver["abi"]["cuda_majors"] == [13]
    assert "the CUDA 13 ones decide, not loaded: torch_memory_saver_hook_mode_torch_cu12.abi3.so" in saver["abi"]["note"]
    overrides = {(o["package"], o["requirement"]): o["replaced_by"] for o in plan["overrides"]}
    assert overrides[("sglang", "torch==2.14.1")] == "torch==2.15.0"


def test_with_vllm_plans_the_stable_abi_release_over_its_pin(today, capsys, tmp_path) -> None:
    world, srv, python, _ = today
    code, out, err = run_cli(capsys, "resolve", "--python", python, "--torch", "installed", "--with", "vllm", *flags(world, srv, tmp_path), "--format", "json")
    assert code == 0, err
    plan = json.loads(out)
    vllm = rows(plan)["vllm"]
    assert vllm["version"] == "0.33.0" and vllm["coupling"] == "torch-stable" and vllm["abi"]["floor"] == "2.14.0"
    assert "vllm pins torch==2.14.0; kept 2.15.0: its compiled parts import only the C shim" in vllm["reason"]
    assert ("vllm", "torch==2.14.0") in {(o["package"], o["requirement"]) for o in plan["overrides"]}


@pytest.mark.parametrize("command", ["resolve", "lock"])
def test_a_newest_release_that_cannot_run_fails_naming_it_never_the_old_one_unasked(today, capsys, tmp_path, command) -> None:
    """oldfw 2.0 imports a C++ symbol the kept torch does not export; oldfw 1.0 (pure, unpinned)
    could run: exit 1 naming 2.0 and its blocker, and how to accept the older one."""
    world, srv, python, _ = today
    out_flags = ["-o", str(tmp_path / "pylock.toml")] if command == "lock" else []
    code, out, err = run_cli(capsys, command, "--python", python, "--torch", "installed", "--with", "oldfw", *flags(world, srv, tmp_path), *out_flags)
    assert code == 1 and out == "", err
    assert "oldfw 2.0" in err and "torchInternalAssertFail" in err and "--with 'oldfw<2.0'" in err, err
    assert not (tmp_path / "pylock.toml").exists()
    code, out, err = run_cli(
        capsys, "resolve", "--python", python, "--torch", "installed", "--with", "oldfw<2.0", *flags(world, srv, tmp_path), "--format", "json"
    )
    assert code == 0, err
    assert rows(json.loads(out))["oldfw"]["version"] == "1.0"


@pytest.mark.parametrize("pytorch_index", ["whl/", "nowhere/"])
def test_a_declared_pypi_torch_reads_its_exports_from_its_own_wheel(today, capsys, tmp_path, pytorch_index) -> None:
    """A declared target has no torch on disk: the C++ imports of sglang are checked against the
    exports of PyPI's 2.15.0 wheel itself (routing.toml ``kept``), also where the PyTorch index has
    no torch page at all (``nowhere/``: its labelled twin cannot stand in); torch stays kept."""
    world, srv, _, _ = today
    urls = {**world.index_urls(srv.url), "pytorch": srv.url + pytorch_index}
    index = [*(w for n, u in urls.items() for w in ("--index", f"{n}={u}")), "--cache-dir", str(tmp_path / "c")]
    declared = ["--python", "3.11", "--platform", "x86_64-manylinux_2_28", "--installed", f"torch=={TORCH}", "--torch", "installed"]
    code, out, err = run_cli(capsys, "resolve", *declared, "--with", "sglang", "--no-jit-cache", *index, "--format", "json")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["target"]["cuda"] == "cu132" and rows(plan)["torch"]["action"] == "keep"
    assert rows(plan)["sglang-kernel"]["abi"]["refusal"] is None and "exported by torch 2.15.0" in rows(plan)["sglang-kernel"]["abi"]["note"]
    code, out, err = run_cli(capsys, "inspect", "sglang-kernel==0.4.10", *declared[:6], *index, "--format", "json")
    assert code == 0 and json.loads(out)["verdict"]["runs"] is True, (out, err)


def test_a_dependency_walked_back_past_a_refused_release_is_named_in_the_notes(today, capsys, tmp_path) -> None:
    world, srv, python, _ = today
    code, out, err = run_cli(
        capsys, "resolve", "--python", python, "--torch", "installed", "--with", "uses-dep", *flags(world, srv, tmp_path), "--format", "json"
    )
    assert code == 0, err
    plan = json.loads(out)
    assert rows(plan)["kernel-dep"]["version"] == "1.0"
    note = next(n for n in plan["notes"] if n.startswith("kernel-dep 1.0 is planned, walked back past 2.0+cu13torch2.16"))
    assert "torch 2.16" in note and "2.15.0" in note, note


# -- builds per CUDA major (pure) ---------------------------------------------------------------------

SAVER = "torch_memory_saver_hook_mode"


def _saver_abi(kind: str) -> WheelAbi:
    """torch-memory-saver 0.0.10 as read from PyPI's wheel: for each hook mode an unmarked member
    (libcudart.so.12) and its _cu12 and _cu13 twins."""
    members = tuple(
        MemberAbi(name=f"{SAVER}_{mode}{mark}.abi3.so", cuda_majors=(major,), torch_libs=("libc10.so",) if kind == TORCH_KIND else ())
        for mode in ("torch", "preload")
        for mark, major in (("_cu13", 13), ("_cu12", 12), ("", 12))
    )
    return WheelAbi(kind=kind, why="test", members=members, cuda_majors=(12, 13))


@pytest.mark.parametrize("kind", [CUDA_KIND, TORCH_KIND])
def test_twins_per_cuda_major_are_builds_the_one_for_torchs_major_decides(kind: str) -> None:
    policy = AbiPolicy.of(load_definitions().abi)
    on13 = judge("torch-memory-saver", _saver_abi(kind), AbiTorch(version=Version(TORCH), cuda_major=13), policy)
    assert on13.refusal is None and on13.cuda_majors == (13,), on13
    assert on13.note is not None and "the CUDA 13 ones decide, not loaded:" in on13.note
    assert f"{SAVER}_torch_cu12.abi3.so" in on13.note and f"{SAVER}_preload.abi3.so" in on13.note and "_cu13" not in on13.note.split("not loaded:")[1]
    on12 = judge("torch-memory-saver", _saver_abi(kind), AbiTorch(version=Version("2.9.1"), cuda_major=12), policy)
    assert on12.refusal is None and on12.cuda_majors == (12,)
    # a CUDA 14 torch has no twin: every member counts, and the CUDA majors refuse it
    on14 = judge("torch-memory-saver", _saver_abi(kind), AbiTorch(version=Version("2.16.0"), cuda_major=14), policy)
    assert on14.refusal is not None and "CUDA 12 and CUDA 13" in on14.refusal


# -- indexes/verify_today.py on the loopback world ------------------------------------------------------


def test_verify_today_checks_each_verdict_against_binutils(today, capsys, monkeypatch) -> None:
    """The truth script on a PyPI of today's shape (issue 50): pip downloads each newest wheel,
    binutils (readelf, nm) read its members and the venv torch's real libraries, and every verdict
    of the tool, asked without --cuda (inspect; resolve for the frameworks), agrees with them."""
    import importlib.util
    import shutil

    if shutil.which("readelf") is None or shutil.which("nm") is None:
        pytest.skip("needs binutils (readelf, nm)")
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    spec = importlib.util.spec_from_file_location("verify_today", REPO / "indexes" / "verify_today.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["verify_today"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    world, srv, _, venv = today
    urls = world.index_urls(srv.url)
    [lib] = venv.glob("lib/python*/site-packages/torch/lib")
    only = ["vllm", "sglang==0.5.23", "sglang-kernel", "sgl-deep-ep", "torch-memory-saver", "xformers", "torchvision", "torchaudio", "torchcodec", "torchao"]
    argv = ["--pypi", urls["pypi"], "--index", f"pytorch={urls['pytorch']}", "--index", f"flashinfer={urls['flashinfer']}", "--torch-lib", str(lib)]
    code = module.main([*argv, *(w for o in only for w in ("--only", o)), "--python", f"{sys.version_info.major}.{sys.version_info.minor}"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "verdicts agreeing with binutils: 12/12 (0 unverified)" in out, out
    assert "agree      inspect  xformers 0.0.35: needs CUDA 12, torch has CUDA 13" in out, out


def test_a_family_members_floor_is_a_floor_and_a_release_is_not_a_nightly() -> None:
    from packaging.utils import NormalizedName

    from resolve_gpu_stack.resolver.framework import _family_how
    from resolve_gpu_stack.resolver.requirement import Cand

    release = Cand(name=NormalizedName("torchvision"), version=Version("0.29.2"), file=None)
    nightly = Cand(name=NormalizedName("torchao"), version=Version("0.17.0.dev20260307+cu130"), file=None)
    assert _family_how(release, None, ">=2.14.0") == "its METADATA requires torch>=2.14.0, which the kept torch meets"
    assert _family_how(release, None, "==2.15.0") == "its METADATA pins torch==2.15.0"
    assert _family_how(nightly, "date", None) == "a nightly of that torch's day: it names no torch itself"
    assert _family_how(Cand(name=NormalizedName("torchao"), version=Version("0.18.0"), file=None), "date", None) == "its METADATA names no torch"  # type: ignore[call-arg]


def test_the_scan_lists_cuda_twins_that_link_no_torch_so_the_one_for_torchs_major_decides() -> None:
    """torch-memory-saver 0.0.10 on PyPI: its ``_cu12``/``_cu13`` twins link no torch, only a CUDA
    runtime each. The scan lists them (names and majors), so the twin for torch's CUDA major
    decides: planned on a CUDA 13 torch, never refused as "needs CUDA 12 and CUDA 13"."""
    from support.elfbuild import synthetic_elf, wheel_bytes

    from resolve_gpu_stack.scan.wheelscan import scan_wheel

    members = {
        f"torch_memory_saver/{SAVER}_{mode}{mark}.abi3.so": synthetic_elf(bits=64, big=False, needed=(f"libcudart.so.{major}", "libc.so.6"))
        for mode in ("torch", "preload")
        for mark, major in (("_cu12", 12), ("_cu13", 13))
    }
    data = wheel_bytes({**members, "torch_memory_saver-0.0.10.dist-info/METADATA": b"Metadata-Version: 2.1\nName: torch_memory_saver\nVersion: 0.0.10\n"})
    defs = load_definitions()
    abi = scan_wheel(lambda start, end: data[start:end], len(data)).abi(defs.abi)
    assert abi.kind == CUDA_KIND and abi.cuda_majors == (12, 13)
    assert sorted(m.name.rsplit("/", 1)[-1] for m in abi.members) == sorted(n.rsplit("/", 1)[-1] for n in members)
    verdict = judge("torch-memory-saver", abi, AbiTorch(version=Version(TORCH), cuda_major=13), AbiPolicy.of(defs.abi))
    assert verdict.refusal is None and verdict.cuda_majors == (13,), verdict
    assert verdict.note is not None and f"{SAVER}_torch_cu12.abi3.so" in verdict.note


def test_the_family_follows_pypis_torch_through_every_door(today, capsys, tmp_path, monkeypatch) -> None:
    """With PyPI's torch kept, torchvision is PyPI's release (the family follows its torch) and is
    judged by its scan, through resolve, lock -o, a config lock, check (offline and online),
    candidates and wheelhouse; the PyTorch index's torchvision page is never read."""
    world, srv, _, _ = today
    declared = ["--python", "3.11", "--platform", "x86_64-manylinux_2_28", "--installed", f"torch=={TORCH}", "--torch", "installed"]
    cache = ["--cache-dir", str(tmp_path / "c")]
    code, out, err = run_cli(capsys, "resolve", *declared, "--with", "torchvision", "--no-jit-cache", *flags(world, srv, tmp_path), "--format", "json")
    assert code == 0, err
    row = rows(json.loads(out))["torchvision"]
    assert (row["version"], row["index"], row["coupling"]) == ("0.29.2", "pypi", "torch-stable"), row
    lock = tmp_path / "pylock.fam.toml"
    code, _, err = run_cli(capsys, "lock", *declared, "--with", "torchvision", "--no-jit-cache", *flags(world, srv, tmp_path), "-o", str(lock))
    assert code == 0, err
    indexes = ", ".join(f'{n} = "{u}"' for n, u in world.index_urls(srv.url).items())
    (tmp_path / "pyproject.toml").write_text(
        f"[tool.resolve-gpu-stack]\nindexes = {{ {indexes} }}\n\n"
        f'[[tool.resolve-gpu-stack.target]]\nname = "fam"\npython = "3.11"\nplatform = "x86_64-manylinux_2_28"\n'
        f'installed = ["torch=={TORCH}"]\ntorch = "installed"\nwith = ["torchvision"]\njit-cache = false\noutput = ["pylock.fam.toml"]\n'
    )
    monkeypatch.chdir(tmp_path)
    before = tomllib.loads(lock.read_text())["packages"]
    code, _, err = run_cli(capsys, "lock", *cache)
    assert code == 0, err
    assert tomllib.loads(lock.read_text())["packages"] == before  # the config lock plans the same
    for extra in ([], ["--online", *cache]):
        code, _, err = run_cli(capsys, "check", *extra)
        assert code == 0, err
    code, out, err = run_cli(capsys, "candidates", "torchvision", *declared[:6], *flags(world, srv, tmp_path), "--format", "json")
    assert code == 0 and "0.29.2" in out, err
    house = tmp_path / "house"
    code, _, err = run_cli(capsys, "wheelhouse", str(lock), "-o", str(house), *cache)
    assert code == 0, err
    assert any(p.name.startswith("torchvision-0.29.2") for p in house.rglob("*.whl"))
    read = [str(line) for line in srv.log]
    assert any("/simple/torchvision/" in line for line in read), read[:5]
    assert not [line for line in read if "/whl/" in line and "torchvision" in line], "the PyTorch index's torchvision page was read"


@pytest.mark.parametrize("declared", [True, False], ids=["declared", "probed"])
def test_inspect_and_resolve_judge_a_cuda12_wheel_with_the_same_kept_torch(today, capsys, tmp_path, declared) -> None:
    """Issue 47: xformers 0.0.35's ``.so`` needs ``libcudart.so.12``; PyPI's torch 2.15.0 has no
    label and is CUDA 13.2 by its cuda-toolkit pin. With no ``--cuda``, ``inspect`` and ``resolve
    --with xformers`` judge it against the same kept torch (cu132, from its pin): it cannot run."""
    world, srv, python, _ = today
    target = ["--python", "3.11", "--platform", "x86_64-manylinux_2_28", "--installed", f"torch=={TORCH}"] if declared else ["--python", python]
    code, out, err = run_cli(capsys, "inspect", "xformers==0.0.35", *target, *flags(world, srv, tmp_path), "--format", "json")
    report = json.loads(out)
    assert code == 1, (out, err)
    assert report["torch"] == TORCH and report["torch_cuda"]["label"] == "cu132" and "cuda-toolkit" in report["torch_cuda"]["from"], report
    assert report["verdict"]["runs"] is False and "CUDA 12" in report["verdict"]["refusal"], report["verdict"]
    code, out, err = run_cli(capsys, "inspect", "xformers==0.0.35", *target, *flags(world, srv, tmp_path), "--format", "table")
    assert code == 1 and f"verdict against torch {TORCH} (cu132: its METADATA pins cuda-toolkit" in out, out
    code, out, err = run_cli(capsys, "resolve", *target, "--with", "xformers", *flags(world, srv, tmp_path))
    assert code == 1 and out == "", out
    assert "xformers 0.0.35" in err and "CUDA 12" in err, err


def test_a_stable_torch_under_the_default_nightly_is_kept_at_every_door_with_a_note(today, capsys, tmp_path) -> None:
    """Issue 47: no ``--torch`` (``nightly``) and PyPI's stable torch 2.15.0 in the venv (or declared):
    ``resolve``, ``lock -o``, ``install --dry-run`` and ``export uv`` keep it; the plan's notes say
    that the channel chose FlashInfer and the rest for the torch kept, and how to move it."""
    world, srv, python, _ = today
    channel_note = f"torch {TORCH} (a stable build) is kept: --torch nightly chooses FlashInfer and the rest for it"
    declared = ["--python", "3.11", "--platform", "x86_64-manylinux_2_28", "--installed", f"torch=={TORCH}"]
    for target in (["--python", python], declared):
        asked = len(srv.log)
        code, out, err = run_cli(capsys, "resolve", *target, *flags(world, srv, tmp_path), "--format", "json")
        assert code == 0, err
        plan = json.loads(out)
        assert_kept_cu132(plan)
        assert not [str(line) for line in srv.log[asked:] if "/whl/" in str(line)], "the PyTorch index was read for a kept PyPI torch"
        assert any(n.startswith(channel_note) and "--upgrade-package torch" in n for n in plan["notes"]), plan["notes"]
    lock = tmp_path / "pylock.toml"
    code, _, err = run_cli(capsys, "lock", "--python", python, *flags(world, srv, tmp_path), "-o", str(lock))
    assert code == 0, err
    text = lock.read_text()
    assert channel_note in text
    assert tomllib.loads(text)["tool"]["resolve-gpu-stack"]["target"]["cuda"] == "cu132"
    code, out, err = run_cli(capsys, "install", "--python", python, "--dry-run", *flags(world, srv, tmp_path), "--format", "json")
    assert code == 0, err
    assert rows(json.loads(out))["torch"]["action"] == "keep"
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "app"\nversion = "0"\nrequires-python = ">=3.11"\n')
    code, _, err = run_cli(capsys, "export", "uv", "--python", python, *flags(world, srv, tmp_path), "--project", str(project))
    assert code == 0, err
    assert f"torch=={TORCH}" in (project / "pyproject.toml").read_text()


@pytest.mark.slow
def test_a_real_install_with_no_torch_flag_leaves_pypis_torch_byte_identical(today, capsys, tmp_path) -> None:
    world, srv, python, venv = today
    before = torch_bytes(venv)
    code, out, err = run_cli(capsys, "install", "--python", python, *flags(world, srv, tmp_path), "--format", "json")
    assert code == 0, err
    assert rows(json.loads(out))["torch"]["action"] == "keep"
    assert torch_bytes(venv) == before


def test_doctor_judges_an_installed_cuda12_wheel_on_pypis_torch_as_resolve_does(today, capsys, tmp_path) -> None:
    """doctor judges installed compiled packages against the same kept torch (cu132 by its pin, no
    label): xformers 0.0.35 installed beside PyPI's torch 2.15.0 needs CUDA 12, and fails the check."""
    world, srv, _, _ = today
    venv = tmp_path / "venv"
    env = {**os.environ, "PIP_CONFIG_FILE": "/dev/null", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=env)
    python = str(venv / "bin" / "python")
    for index, req in ((f"{srv.url}pypi-torch/", f"torch=={TORCH}"), (f"{srv.url}simple/", "xformers==0.0.35")):
        subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--index-url", index, req], check=True, env=env, capture_output=True)
    code, out, err = run_cli(capsys, "doctor", "--python", python, "--format", "json")
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    symbols = checks["torch-abi-symbols"]
    assert code == 1 and symbols["status"] == "fail", symbols
    assert "xformers 0.0.35" in symbols["message"] and "CUDA 12" in symbols["message"], symbols["message"]
