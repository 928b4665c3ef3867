"""A build under control, on the machines builds run on (issue 30): each item of the probe has a
test that failed before.

- the build machine: a wrapper ``nvcc`` on PATH finds the real toolkit (a fake toolkit tree);
  CUDA_HOME, then CUDA_PATH, come first; without a driver the build links against the toolkit's
  stubs; no ``--gpu`` and no GPU: torch's own archs (or a refusal naming --gpu), never torch's
  traceback; the dry run says what each build needs;
- a PEP 517 build environment: a target's old setuptools never wins over the index's, and what the
  backend's ``get_requires_for_build_wheel`` asks for is installed; a build requirement that ships
  a ``torch`` package of its own is refused (the module imported is checked, not the metadata);
- under control: SIGTERM and SIGKILL of the tool leave no build process and no temporary folder;
  a build past ``--build-timeout`` is stopped with a clear error; the build reads no stdin; its log
  is 0600; a build that writes into the target environment is refused.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.build_world import NIGHTLY, build_world, extension_sdist, have_cxx, serve_wheel_file, torch_wheel
from support.building import TOOL, _build_processes_gone, common
from support.doors import run_cli
from support.install_world import _glibc_ok, make_venv
from support.server import IndexServer
from support.wheels import build_wheel

from resolve_gpu_stack.env import build as B
from resolve_gpu_stack.env.buildmachine import has_cuda_driver

UV = str(Path(sys.executable).with_name("uv"))
needs_builds = pytest.mark.skipif(not (have_cxx() and _glibc_ok() and Path(UV).exists()), reason="needs Linux, g++ and uv")


# -- the build machine (no build runs) ---------------------------------------------------------------


def _script(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def fake_toolkit(root: Path, version: str = "13.0", *, dryrun: bool = True, stubs: str | None = "lib64/stubs") -> Path:
    """A CUDA toolkit tree: bin/nvcc answers --version (and -dryrun with its TOP, as nvcc does),
    include/cuda_runtime_api.h, ``stubs``/libcuda.so (None: no stubs, as NVIDIA's nvcc wheels)."""
    top = f'  *-dryrun*) echo "#\\$ _HERE_={root}/bin"; echo "#\\$ TOP={root}/bin/.." >&2 ;;\n' if dryrun else ""
    _script(
        root / "bin" / "nvcc",
        f'#!/bin/sh\ncase "$*" in\n{top}  *--version*) echo "Cuda compilation tools, release {version}, V{version}.88" ;;\nesac\n',
    )
    (root / "include").mkdir(parents=True)
    (root / "include" / "cuda_runtime_api.h").write_text("/* fake */\n")
    if stubs is not None:
        (root / stubs).mkdir(parents=True)
        (root / stubs / "libcuda.so").write_bytes(b"")
    return root


@pytest.mark.parametrize("dryrun", [True, False], ids=["asks-nvcc", "follows-the-script"])
def test_a_wrapper_nvcc_on_path_finds_the_real_toolkit(tmp_path, dryrun):
    toolkit = fake_toolkit(tmp_path / "opt" / "cuda-13.0", dryrun=dryrun)
    wrapper = _script(tmp_path / "usr" / "local" / "bin" / "nvcc", f'#!/bin/sh\nexec {toolkit}/bin/nvcc "$@"\n')
    found = B.find_cuda_toolkit({"PATH": str(wrapper.parent)})
    assert found is not None and found.home == toolkit and found.version == "13.0" and found.nvcc == wrapper
    machine = B.BuildMachine(uv="uv", arch_list="9.0", max_jobs=1, toolkit=found, env={"PATH": str(wrapper.parent)})
    env = B._build_env(machine, tmp_path)
    assert env["CUDA_HOME"] == str(toolkit) and env["PATH"].split(os.pathsep)[0] == str(toolkit / "bin")


def test_cuda_home_then_cuda_path_come_before_nvcc_on_path(tmp_path):
    on_path = fake_toolkit(tmp_path / "path-cuda")
    home, cuda_path = fake_toolkit(tmp_path / "home-cuda", "13.1"), fake_toolkit(tmp_path / "cuda-path", "13.2")
    env = {"PATH": str(on_path / "bin")}
    assert B.find_cuda_toolkit({**env, "CUDA_HOME": str(home), "CUDA_PATH": str(cuda_path)}).home == home  # type: ignore[union-attr]
    assert B.find_cuda_toolkit({**env, "CUDA_PATH": str(cuda_path)}).version == "13.2"  # type: ignore[union-attr]
    assert B.find_cuda_toolkit(env).home == on_path  # type: ignore[union-attr]


def test_without_a_driver_the_build_links_against_the_toolkit_stubs(tmp_path):
    toolkit = B.find_cuda_toolkit({"PATH": str(fake_toolkit(tmp_path / "cuda") / "bin")})
    bare = B.BuildMachine(uv="uv", arch_list="9.0", max_jobs=1, toolkit=toolkit, env={"LIBRARY_PATH": "/x"}, driver=False)
    assert B._build_env(bare, tmp_path)["LIBRARY_PATH"] == f"{tmp_path / 'cuda' / 'lib64' / 'stubs'}{os.pathsep}/x"
    assert "LIBRARY_PATH" not in B._build_env(B.BuildMachine(uv="uv", arch_list="9.0", max_jobs=1, toolkit=toolkit, env={}), tmp_path)


# where toolkits keep the libcuda stub: the runfile/.deb layout (lib64 a link to targets/<arch>/lib),
# one without the lib64 link (conda's, a copied targets/ tree), and NVIDIA's nvcc wheels (bin, include,
# lib, nvvm: no stubs at all)
STUB_LAYOUTS = {"lib64": "lib64/stubs", "targets-only": "targets/x86_64-linux/lib/stubs", "wheels": None}


@pytest.mark.parametrize("layout", STUB_LAYOUTS, ids=list(STUB_LAYOUTS))
def test_a_driverless_machine_finds_the_stubs_where_the_toolkit_keeps_them(tmp_path, layout):
    stubs = STUB_LAYOUTS[layout]
    root = fake_toolkit(tmp_path / "cuda", stubs=stubs)
    if layout == "wheels":
        (root / "lib").mkdir()
        (root / "lib" / "libcudart.so.13").write_bytes(b"")
    else:
        (root / "lib64" / "other").mkdir(parents=True, exist_ok=True)  # a lib64 without stubs in it is passed over
    toolkit = B.find_cuda_toolkit({"PATH": str(root / "bin")})
    bare = B.BuildMachine(uv="uv", arch_list="9.0", max_jobs=1, toolkit=toolkit, env={}, driver=False)
    env = B._build_env(bare, tmp_path)
    if stubs is None:
        assert bare.stubs is None and bare.stubless and "LIBRARY_PATH" not in env
    else:
        assert bare.stubs == root / stubs and not bare.stubless and env["LIBRARY_PATH"] == str(root / stubs)
    with_driver = B.BuildMachine(uv="uv", arch_list="9.0", max_jobs=1, toolkit=toolkit, env={})
    assert with_driver.stubs is None and not with_driver.stubless


def test_torch_arch_list_reads_the_real_archs():
    assert B.arch_list_of(["sm_80", "sm_90", "sm_100", "sm_120", "compute_120"]) == "8.0;9.0;10.0;12.0"
    assert B.arch_list_of(["sm_90a", "sm_100f"]) == "9.0a;10.0f"
    assert B.arch_list_of([]) == ""


def test_torchs_compile_time_arch_flags_are_read_in_either_spelling():
    assert B.archs_of_flags("sm_80 sm_90 sm_100 sm_120 compute_120") == ["sm_80", "sm_90", "sm_100", "sm_120", "compute_120"]
    gencode = "-gencode arch=compute_90a,code=sm_90a -gencode arch=compute_100a,code=[sm_100a,compute_100a]"
    assert B.archs_of_flags(gencode) == ["sm_90a", "sm_100a", "compute_100a"]
    assert B.arch_list_of(B.archs_of_flags(gencode)) == "9.0a;10.0a"
    assert B.archs_of_flags("") == B.archs_of_flags(None) == []
    # as the CUDA wheel of torch 2.14.1 holds it (its libtorch_cuda.so's string)
    assert B.arch_list_of(B.archs_of_flags("sm_75 sm_80 sm_86 sm_90 sm_100 sm_120")) == "7.5;8.0;8.6;9.0;10.0;12.0"


def test_a_torch_that_cannot_say_its_archs_is_refused_naming_gpu(tmp_path):
    with pytest.raises(B.BuildError, match="no --gpu and no GPU") as err:
        B.torch_arch_list(sys.executable, {"PATH": os.environ["PATH"]}, B.Version(NIGHTLY))  # no torch here
    assert "--gpu sm90" in (err.value.hint or "")


def test_a_build_log_is_private_even_where_an_old_one_was_not(tmp_path):
    old = tmp_path / "x.log"
    old.write_text("before\n")
    old.chmod(0o644)
    with B.open_log(old, "ab") as fh:
        fh.write(b"secret\n")
    with B.open_log(tmp_path / "new.log", "wb") as fh:
        fh.write(b"x")
    assert stat.S_IMODE(old.stat().st_mode) == 0o600 and stat.S_IMODE((tmp_path / "new.log").stat().st_mode) == 0o600


# -- real builds ------------------------------------------------------------------------------------


def _hook_backend() -> dict[str, str]:
    """An in-tree PEP 517 backend (setuptools') whose get_requires_for_build_wheel asks for
    ``build-helper``, which setup.py imports."""
    return {
        "_backend.py": "from setuptools.build_meta import *  # noqa\n\n\ndef get_requires_for_build_wheel(config_settings=None):\n    return ['build-helper']\n"
    }


def _old_setuptools(venv: str) -> None:
    """What a stock ``python3.11 -m venv`` holds: setuptools 65.5.0 (here: one that fails as that one
    does, for a build that needs a newer one)."""
    site = Path(
        subprocess.run([venv, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True, check=True).stdout.strip()
    )
    (site / "setuptools").mkdir()
    (site / "setuptools" / "__init__.py").write_text("raise SystemExit(\"error: invalid command 'bdist_wheel'\")\n")
    info = site / "setuptools-65.5.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: setuptools\nVersion: 65.5.0\n")
    (info / "RECORD").write_text("")
    (info / "INSTALLER").write_text("pip\n")


@needs_builds
def test_a_target_with_old_setuptools_builds_and_the_backend_requirements_are_installed(tmp_path, uv_env, capsys):
    sdist = extension_sdist(
        tmp_path / "sdists",
        "hook-kernel",
        requires=("setuptools", "torch"),
        prelude="import build_helper  # what the backend asked for (get_requires_for_build_wheel)",
        backend="_backend",
        files=_hook_backend(),
    )
    world = build_world(tmp_path, sdists=(sdist,))
    serve_wheel_file(world, build_wheel(tmp_path / "helper", "build-helper", "1.0", files={"build_helper.py": b"X = 1\n"}).path)
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        venv = make_venv(tmp_path / "venv", uv_env, torch_wheel(world))
        _old_setuptools(venv)
        cache = tmp_path / "cache"
        rc, out, err = run_cli(capsys, "install", "--python", venv, "--with", sdist.name, "--build", sdist.name, *common(srv, cache), "--format", "json")
    assert rc == 0, err
    [log] = (cache / "wheels" / "builds" / "logs").glob("hook-kernel-*.log")
    text = log.read_text()
    assert "# install setuptools==" in text and "setuptools==65.5.0" not in text  # the index's setuptools, not the target's
    assert "# install build-helper==1.0" in text  # the backend's own requirement, resolved and installed


@needs_builds
def test_a_build_requirement_shipping_a_torch_package_is_refused(tmp_path, uv_env, capsys):
    sdist = extension_sdist(tmp_path / "sdists", "shadowed-kernel", requires=("setuptools>=70.1", "torch", "torch-shim"))
    world = build_world(tmp_path, sdists=(sdist,))
    serve_wheel_file(world, build_wheel(tmp_path / "shim", "torch-shim", "1.0", files={"torch/__init__.py": b"__version__ = 'impostor'\n"}).path)
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        venv = make_venv(tmp_path / "venv", uv_env, torch_wheel(world))
        rc, _, err = run_cli(capsys, "install", "--python", venv, "--with", sdist.name, "--build", sdist.name, *common(srv, tmp_path / "cache"))
    assert rc == 1 and "import torch finds" in err and "not the kept torch's files" in err and "nothing was built" in err


@needs_builds
def test_stdin_is_closed_the_log_private_and_a_write_into_the_target_refused(tmp_path, uv_env):
    prelude = (
        "import os, sys, torch\n"
        "if 'bdist_wheel' in sys.argv:\n"
        "    print('STDIN:', sys.stdin.read())\n"
        "    open(os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), 'evil.pth'), 'w').write('import os\\n')\n"
    )
    sdist = extension_sdist(tmp_path / "sdists", "nosy-kernel", prelude=prelude)
    world = build_world(tmp_path, sdists=(sdist,))
    cache = tmp_path / "cache"
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        venv = make_venv(tmp_path / "venv", uv_env, torch_wheel(world))
        proc = subprocess.run(
            [str(TOOL), "install", "--python", venv, "--with", sdist.name, "--build", sdist.name, *common(srv, cache)],
            input=b"s3cret-token\n",
            capture_output=True,
            env=uv_env,
            timeout=300,
        )
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "wrote into the target environment" in err and "evil.pth" in err and "the result is refused" in err
    [log] = (cache / "wheels" / "builds" / "logs").glob("nosy-kernel-*.log")
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert "STDIN: \n" in log.read_text() and "s3cret" not in log.read_text()
    assert not list((cache / "wheels" / "builds").glob("*.json"))  # nothing stored


def _start_slow_build(tmp_path: Path, uv_env: dict[str, str], srv: IndexServer, world, sdist, *extra: str) -> tuple[subprocess.Popen[bytes], Path]:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    venv = make_venv(tmp_path / "venv", uv_env, torch_wheel(world))
    proc = subprocess.Popen(
        [str(TOOL), "install", "--python", venv, "--with", sdist.name, "--build", sdist.name, *common(srv, tmp_path / "cache"), *extra],
        env={**uv_env, "TMPDIR": str(scratch)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    logs = tmp_path / "cache" / "wheels" / "builds" / "logs"
    end = time.monotonic() + 120
    while time.monotonic() < end and not any("uv build" in p.read_text() for p in logs.glob("*.log")):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    return proc, scratch


def _gone(scratch: Path, within: float = 15.0) -> list[Path]:
    end = time.monotonic() + within
    while (left := list(scratch.glob("resolve-gpu-stack-build-*"))) and time.monotonic() < end:
        time.sleep(0.1)
    return left


@needs_builds
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_the_tool_killed_during_a_build_leaves_no_build_process_and_no_temp_folder(tmp_path, uv_env, sig):
    sdist = extension_sdist(tmp_path / "sdists", "slow-kernel", sleep=120)
    world = build_world(tmp_path, sdists=(sdist,))
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        proc, scratch = _start_slow_build(tmp_path, uv_env, srv, world, sdist)
        time.sleep(1.0)  # setup.py sleeps now
        assert list(scratch.glob("resolve-gpu-stack-build-*")), "the build did not start"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    if sig == signal.SIGTERM:
        assert proc.returncode == 1 and b"stopped by SIGTERM" in err
    else:
        assert proc.returncode == -signal.SIGKILL
    assert _build_processes_gone(scratch, "slow-kernel", within=15) == []
    assert _gone(scratch) == []


@needs_builds
def test_a_build_past_its_deadline_is_stopped_with_a_clear_error(tmp_path, uv_env):
    sdist = extension_sdist(tmp_path / "sdists", "late-kernel", sleep=120)
    world = build_world(tmp_path, sdists=(sdist,))
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        proc, scratch = _start_slow_build(tmp_path, uv_env, srv, world, sdist, "--build-timeout", "3")
        _, err = proc.communicate(timeout=120)
    text = err.decode()
    assert proc.returncode == 1 and "ran past its deadline of 3.0s and was stopped" in text and "--build-timeout" in text
    assert _build_processes_gone(scratch, "late-kernel") == [] and _gone(scratch) == []
    assert not list((tmp_path / "cache" / "wheels" / "builds").glob("*.json"))


@needs_builds
def test_without_gpu_the_build_uses_torchs_archs_and_the_dry_run_says_what_it_needs(tmp_path, uv_env, capsys, monkeypatch):
    sdist = extension_sdist(tmp_path / "sdists")
    world = build_world(tmp_path, sdists=(sdist,))
    monkeypatch.setenv("PATH", f"{fake_toolkit(tmp_path / 'cuda') / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        venv = make_venv(tmp_path / "venv", uv_env, torch_wheel(world))
        argv = ["install", "--python", venv, "--with", sdist.name, "--build", sdist.name, *common(srv, tmp_path / "cache")]
        rc, _, err = run_cli(capsys, *argv, "--dry-run")
        assert rc == 0, err
        assert f"{sdist.name} 1.0: a build needs the CUDA 13 toolkit (found: 13.0 at {tmp_path / 'cuda'})" in err
        # read from the venv's torch without a GPU: its get_arch_list() is [] there, its compile-time flags are not
        said = f"TORCH_CUDA_ARCH_LIST 9.0;12.0, the archs torch {NIGHTLY} was built for (read from torch._C._cuda_getArchFlags(); PTX-only compute_120 left out"
        assert said in err and "MAX_JOBS=" in err and "GiB" in err
        rc, out, err = run_cli(capsys, *argv, "--format", "json")
    assert rc == 0, err
    assert "built for the archs torch" in err and "(9.0;12.0, from torch._C._cuda_getArchFlags(); PTX-only compute_120 left out)" in err
    [record] = (tmp_path / "cache" / "wheels" / "builds").glob("*.json")
    built = json.loads(record.read_text())["provenance"]
    assert built["arch-list"] == "9.0;12.0" and "TORCH_CUDA_ARCH_LIST='9.0;12.0'" in built["command"]


@needs_builds
@pytest.mark.parametrize("cuda", [False, True], ids=["cpu-only-extension", "cuda-extension"])
def test_a_torch_that_lists_no_arch_builds_a_cpu_extension_and_refuses_a_cuda_one_naming_gpu(tmp_path, uv_env, capsys, monkeypatch, cuda):
    files = {"ext_kernel/kernel.cu": "__global__ void k() {}\n"} if cuda else {}
    sdist = extension_sdist(tmp_path / "sdists", files=files)
    world = build_world(tmp_path, sdists=(sdist,), arch_flags="")  # a torch whose flags list no arch
    monkeypatch.setenv("PATH", f"{fake_toolkit(tmp_path / 'cuda') / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        venv = make_venv(tmp_path / "venv", uv_env, torch_wheel(world))
        argv = ["install", "--python", venv, "--build", sdist.name, *common(srv, tmp_path / "cache")]
        rc, _, err = run_cli(capsys, *argv, "--dry-run")
        assert rc == 0 and "a CUDA extension needs --gpu SM, a CPU-only one none" in err, err
        rc, _, err = run_cli(capsys, *argv)
    records = list((tmp_path / "cache" / "wheels" / "builds").glob("*.json"))
    if cuda:
        assert rc == 1 and "cannot say which GPU archs it was built for" in err and "--gpu sm90" in err and "Traceback" not in err
        assert records == []
    else:
        assert rc == 0, err
        assert "no CUDA source in it (no .cu file, no CUDAExtension): built with no GPU arch list" in err
        assert len(records) == 1


@needs_builds
@pytest.mark.skipif(has_cuda_driver(), reason="this host has the NVIDIA driver: no stubs are needed")
@pytest.mark.parametrize("layout", ["targets-only", "wheels"])
def test_the_dry_run_on_a_driverless_machine_names_the_stubs_or_their_absence(tmp_path, uv_env, capsys, monkeypatch, layout):
    """The dry run says where libcuda comes from on a machine without the driver: the toolkit's
    ``targets/<arch>/lib/stubs`` where it has no lib64 link, or, for a toolkit with no stub at all
    (NVIDIA's nvcc wheels), that an extension linking -lcuda will not link."""
    sdist = extension_sdist(tmp_path / "sdists")
    world = build_world(tmp_path, sdists=(sdist,))
    root = fake_toolkit(tmp_path / "cuda", stubs=STUB_LAYOUTS[layout])
    monkeypatch.setenv("PATH", f"{root / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        venv = make_venv(tmp_path / "venv", uv_env, torch_wheel(world))
        rc, _, err = run_cli(capsys, "install", "--python", venv, "--build", sdist.name, "--gpu", "sm90", *common(srv, tmp_path / "cache"), "--dry-run")
    assert rc == 0, err
    said = f"a build needs the CUDA 13 toolkit (found: 13.0 at {root})"
    if layout == "wheels":
        assert f"{said}, no driver here and no libcuda stub in the toolkit" in err and "-lcuda will not link" in err
    else:
        assert f"{said}, no driver here: libcuda from {root / 'targets' / 'x86_64-linux' / 'lib' / 'stubs'}" in err
