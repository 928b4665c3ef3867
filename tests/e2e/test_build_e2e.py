"""``--build NAME`` end to end (issue 21, "done when"): real builds, offline, real uv, real venvs.

A stand-in torch nightly (its ``torch/lib/libtorch.so`` compiled here, exporting C++ symbols, loaded
by ``import torch``) is installed in a venv; an sdist on the loopback PyPI compiles a C++ extension
that links libtorch and calls into it; its build-system requires torch, and a PyPI torch of another
version waits on the loopback PyPI: it must never be read. ``install --with that --build that``
builds it against the venv's own torch, the extension imports and calls into the stand-in
libtorch, torch's dist-info stays byte-identical; ``lock`` builds it once for a declared target
(a second ``lock`` builds nothing, even with no compiler), records the built wheel's and the
sdist's sha256 and the provenance; ``check`` verifies the provenance; ``wheelhouse`` + ``install
--lock`` put it into a second venv with the same torch without a compiler on PATH.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from support.build_world import ADD_OFFSET, NIGHTLY, PYTHON, build_world, extension_sdist, have_cxx, run_in, torch_wheel
from support.building import HERE, TOOL, UV, _build_processes_gone, common
from support.doors import run_cli
from support.install_world import _glibc_ok, dist_info_bytes, make_venv
from support.server import IndexServer
from support.terminal import foreground

from resolve_gpu_stack.data.toml import load_toml
from resolve_gpu_stack.errors import LockFileError
from resolve_gpu_stack.scan import elf

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not (have_cxx() and _glibc_ok() and Path(UV).exists()), reason="needs Linux, g++ and uv")]


def _so_needs(python: str, module: str) -> tuple[str, ...]:
    site = Path(run_in(python, "import sysconfig; print(sysconfig.get_paths()['platlib'])"))
    [so] = (site / module).glob("_C*.so")
    return elf.needed_libraries(so.read_bytes()).needed


def _no_compiler_path(tmp: Path) -> str:
    empty = tmp / "no-compiler-bin"
    empty.mkdir(exist_ok=True)
    return str(empty)


def _torch_page_requests(srv: IndexServer) -> list[str]:
    return [path for method, path, _ in srv.log if path.startswith("/simple/torch")]


@pytest.fixture
def built_world(tmp_path: Path, uv_env):
    sdist = extension_sdist(tmp_path / "sdists")
    world = build_world(tmp_path, sdists=(sdist,))
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        yield world, srv, sdist


def test_install_build_lock_wheelhouse_install_lock(built_world, tmp_path, uv_env, capsys, monkeypatch):
    world, srv, sdist = built_world
    cache = tmp_path / "cache"
    venv_a = make_venv(tmp_path / "a", uv_env, torch_wheel(world))
    torch_before = dist_info_bytes(venv_a, "torch")

    # install: built against the venv's own torch, installed, and it calls into libtorch
    rc, out, err = run_cli(capsys, "install", "--python", venv_a, "--with", sdist.name, "--build", sdist.name, *common(srv, cache), "--format", "json")
    assert rc == 0, err
    report = {p["name"]: p for p in json.loads(out)["packages"]}
    assert report[sdist.name]["action"] == "build" and report[sdist.name]["after"] == "1.0"
    assert run_in(venv_a, f"import {sdist.module}; print({sdist.module}.add(2, 3))") == str(5 + ADD_OFFSET)
    assert dist_info_bytes(venv_a, "torch") == torch_before
    assert "libtorch.so" in _so_needs(venv_a, sdist.module)
    assert _torch_page_requests(srv) == []  # the PyPI torch was never even looked at
    [log] = (cache / "wheels" / "builds" / "logs").glob(f"{sdist.name}-1.0-*.log")
    text = log.read_text()
    assert "uv build --wheel --no-build-isolation" in text and "kept torch from:" in text

    # lock for the declared target, on a CI machine of its own (another cache): built once, in an
    # environment holding the kept torch's wheel from the PyTorch index
    cache = tmp_path / "ci-cache"
    lock = tmp_path / "locks" / "pylock.node.toml"
    declared = ["--python", PYTHON, "--platform", HERE, "--installed", f"torch=={NIGHTLY}"]  # the node is this machine
    lock_args = ["lock", *declared, "--with", sdist.name, "--build", sdist.name, *common(srv, cache), "-o", str(lock)]
    rc, _, err = run_cli(capsys, *lock_args)
    assert rc == 0, err
    doc = load_toml(lock, error=LockFileError)
    [entry] = [p for p in doc["packages"] if p["name"] == sdist.name]
    [wheel] = entry["wheels"]
    built = next(p for p in doc["tool"]["resolve-gpu-stack"]["packages"] if p["name"] == sdist.name)
    assert "index" not in entry and "path" in wheel and wheel["name"].startswith("ext_kernel-1.0-")
    stored = Path(wheel["path"])
    assert stored.is_file() and wheel["hashes"]["sha256"] == stored.parent.name and wheel["size"] == stored.stat().st_size
    assert built["action"] == "build" and built["sdist"]["sha256"] == sdist.sha256 and built["sdist"]["filename"] == sdist.filename
    assert built["built"]["torch"] == NIGHTLY and built["built"]["python"] == PYTHON and built["built"]["cuda"] == "cu130"
    assert "uv build --wheel --no-build-isolation ext_kernel-1.0.tar.gz" in built["built"]["command"]
    records = sorted((cache / "wheels" / "builds").glob("*.json"))
    assert len(records) == 1
    [log] = (cache / "wheels" / "builds" / "logs").glob(f"{sdist.name}-1.0-*.log")
    assert "kept torch from: its wheel, installed below" in log.read_text() and f"# install torch=={NIGHTLY} (from pytorch)" in log.read_text()
    assert any(p.startswith("/whl/nightly/cu130/torch-") and p.endswith(".whl") for m, p, _ in srv.log if m == "GET")

    # a second lock builds nothing: no compiler on PATH, and no new build record
    monkeypatch.setenv("PATH", _no_compiler_path(tmp_path))
    first = lock.read_text()
    rc, _, err = run_cli(capsys, *lock_args)
    assert rc == 0, err
    assert lock.read_text() == first and sorted((cache / "wheels" / "builds").glob("*.json")) == records

    # check verifies the provenance (no index is asked about the built wheel)
    monkeypatch.chdir(tmp_path)
    rc, out, err = run_cli(capsys, "check", str(lock))
    assert rc == 0, out + err

    # wheelhouse exports the built wheel with the rest; install --lock on a second venv, no compiler anywhere
    house = tmp_path / "house"
    rc, _, err = run_cli(capsys, "wheelhouse", str(lock), "-o", str(house), "--cache-dir", str(cache))
    assert rc == 0, err
    assert (house / "files" / wheel["name"]).is_file()
    monkeypatch.setenv("PATH", os.environ["PATH"])  # as set above: no compiler
    venv_b = make_venv(tmp_path / "b", uv_env, torch_wheel(world))
    torch_b = dist_info_bytes(venv_b, "torch")
    rc, out, err = run_cli(
        capsys, "install", "--lock", str(house / lock.name), "--python", venv_b, "--cache-dir", str(tmp_path / "node-cache"), "--format", "json"
    )
    assert rc == 0, err
    assert run_in(venv_b, f"import {sdist.module}; print({sdist.module}.add(40, 2))") == str(42 + ADD_OFFSET)
    assert dist_info_bytes(venv_b, "torch") == torch_b
    assert _torch_page_requests(srv) == []


def test_a_failed_build_names_its_log_and_stores_nothing(tmp_path, uv_env, capsys):
    sdist = extension_sdist(tmp_path / "sdists", "bad-kernel", broken=True)
    world = build_world(tmp_path, sdists=(sdist,))
    cache = tmp_path / "cache"
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        venv = make_venv(tmp_path / "venv", uv_env, torch_wheel(world))
        before = run_in(venv, "import importlib.metadata as m; print(sorted(d.metadata['Name'] for d in m.distributions()))")
        rc, out, err = run_cli(capsys, "install", "--python", venv, "--with", sdist.name, "--build", sdist.name, *common(srv, cache))
    assert rc == 1 and out == ""
    assert "error: building bad-kernel 1.0 failed (exit" in err and "the build log: " in err
    log = Path(err.split("the build log: ", 1)[1].split()[0])
    assert log.is_file() and "this is not C++" in log.read_text() and "error" in log.read_text()
    assert "its last lines:" in err  # the hint shows the end of the log
    assert not list((cache / "wheels" / "sha256").rglob("bad_kernel-*.whl")) and not list((cache / "wheels" / "builds").glob("*.json"))
    assert run_in(venv, "import importlib.metadata as m; print(sorted(d.metadata['Name'] for d in m.distributions()))") == before


def test_ctrl_c_stops_the_build_and_leaves_no_half_wheel(tmp_path, uv_env):
    sdist = extension_sdist(tmp_path / "sdists", "slow-kernel", sleep=60)
    world = build_world(tmp_path, sdists=(sdist,))
    cache, scratch = tmp_path / "cache", tmp_path / "tmp"
    scratch.mkdir()
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        venv = make_venv(tmp_path / "venv", uv_env, torch_wheel(world))
        env = {**uv_env, "TMPDIR": str(scratch)}
        proc = subprocess.Popen(
            [str(TOOL), "install", "--python", venv, "--with", sdist.name, "--build", sdist.name, *common(srv, cache)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=foreground,
        )
        logs = cache / "wheels" / "builds" / "logs"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any("uv build" in p.read_text() for p in logs.glob("*.log")):
            time.sleep(0.1)
        time.sleep(1.0)  # setup.py is sleeping now
        assert list(scratch.glob("resolve-gpu-stack-build-*")), "the build did not start"
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and b"interrupted" in err
    assert time.monotonic() - started < 15
    assert not list(scratch.glob("resolve-gpu-stack-build-*"))  # the build folder, the half-built wheel with it
    assert not list((cache / "wheels" / "sha256").rglob("slow_kernel-*.whl")) and not list((cache / "wheels" / "builds").glob("*.json"))
    assert "slow_kernel" not in run_in(venv, "import importlib.metadata as m; print([d.metadata['Name'] for d in m.distributions()])")
    assert _build_processes_gone(scratch, "slow-kernel") == []  # the build's process group was stopped


def test_a_cuda_toolkit_of_another_major_is_refused_before_the_build(tmp_path, uv_env, capsys, monkeypatch):
    sdist = extension_sdist(tmp_path / "sdists")
    world = build_world(tmp_path, sdists=(sdist,))
    fake = tmp_path / "cuda12" / "bin"
    fake.mkdir(parents=True)
    (fake / "nvcc").write_text("#!/bin/sh\necho 'Cuda compilation tools, release 12.4, V12.4.131'\n")
    (fake / "nvcc").chmod(0o755)
    monkeypatch.setenv("CUDA_HOME", str(fake.parent))
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        venv = make_venv(tmp_path / "venv", uv_env, torch_wheel(world))
        rc, _, err = run_cli(capsys, "install", "--python", venv, "--with", sdist.name, "--build", sdist.name, *common(srv, tmp_path / "cache"))
    assert rc == 1
    assert "the CUDA toolkit found is 12.4" in err and "built for CUDA 13.0" in err and "nothing was built" in err
    assert not list((tmp_path / "cache" / "wheels" / "builds").glob("logs/*.log"))


def test_dry_run_shows_the_build_and_builds_nothing(built_world, tmp_path, uv_env, capsys):
    world, srv, sdist = built_world
    venv = make_venv(tmp_path / "venv", uv_env, torch_wheel(world))
    # --build NAME alone implies the package (issue 49): planned as if --with NAME, never a silent no-op
    rc, out, err = run_cli(capsys, "install", "--dry-run", "--python", venv, "--build", sdist.name, *common(srv, tmp_path / "cache"), "--format", "json")
    assert rc == 0, err
    row = next(p for p in json.loads(out)["packages"] if p["name"] == sdist.name)
    assert row["action"] == "build" and row["size"] == sdist.size  # what it would download: the sdist
    assert not (tmp_path / "cache" / "wheels" / "builds").exists()
    # a name no index has, or one also left out: a clear error, nothing planned
    rc, out, err = run_cli(capsys, "install", "--dry-run", "--python", venv, "--build", "no-such-kernel", *common(srv, tmp_path / "cache"))
    assert rc != 0 and out == "" and "no-such-kernel: no such package on its index" in err and "Traceback" not in err
    rc, out, err = run_cli(capsys, "resolve", "--python", venv, "--build", sdist.name, "--without", sdist.name, *common(srv, tmp_path / "cache"))
    assert rc == 2 and f"--build {sdist.name} and --without {sdist.name}" in err


def test_an_sdist_that_is_not_the_one_its_index_lists_is_refused_before_anything_is_built(built_world, tmp_path, uv_env, capsys):
    world, srv, sdist = built_world
    served = world.root / "files" / sdist.filename
    data = bytearray(served.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same name and size, other bytes
    served.write_bytes(bytes(data))
    venv = make_venv(tmp_path / "venv", uv_env, torch_wheel(world))
    cache = tmp_path / "cache"
    rc, out, err = run_cli(capsys, "install", "--python", venv, "--with", sdist.name, "--build", sdist.name, *common(srv, cache))
    assert rc == 3 and out == ""
    assert sdist.filename in err and f"does not match {sdist.sha256} from the index page" in err
    assert not (cache / "wheels" / "builds").exists() and not list((cache / "wheels" / "sha256").rglob("*.tar.gz"))
    # bigger than the index says: stopped at the listed size
    served.write_bytes(bytes(data) + b"more")
    rc, _, err = run_cli(capsys, "install", "--python", venv, "--with", sdist.name, "--build", sdist.name, *common(srv, cache))
    assert rc == 3 and f"the server sent more than the {sdist.size} bytes its index page lists; stopped" in err
