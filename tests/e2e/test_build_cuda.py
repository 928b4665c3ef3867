"""CUDA compiled for real through ``--build`` (issue 49), where a CUDA toolkit is installed: an
sdist whose extension has a ``.cu`` file is built on this machine, which has no GPU and no driver.
nvcc is found behind a wrapper script on PATH (the toolkit's root followed: torch's own
cpp_extension would take the wrapper's folder for CUDA_HOME), the arch flags asked for (``--gpu``)
reach nvcc, and the product is a loadable ``.so`` that carries SASS for exactly that arch (read
from its ``.nv_fatbin`` section; and with ``cuobjdump`` where installed). Skipped without nvcc.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from support.build_world import ADD_OFFSET, build_world, extension_sdist, have_cxx, run_in, torch_wheel
from support.building import common
from support.doors import run_cli
from support.install_world import _glibc_ok, make_venv
from support.server import IndexServer

from resolve_gpu_stack.env.buildmachine import find_cuda_toolkit

UV = str(Path(sys.executable).with_name("uv"))
TOOLKIT = find_cuda_toolkit({"PATH": os.environ.get("PATH", ""), **{k: v for k in ("CUDA_HOME", "CUDA_PATH") if (v := os.environ.get(k))}})


def _skip_reason() -> str | None:
    if not (have_cxx() and _glibc_ok() and Path(UV).exists()):
        return "needs Linux, g++ and uv"
    if TOOLKIT is None:
        return "no CUDA toolkit here (nvcc; .ci/run installs NVIDIA's nvcc wheels where it has none: see docs/guides/building.md)"
    if TOOLKIT.major != 13:
        return f"the stand-in torch is a cu130 build; the toolkit here is CUDA {TOOLKIT.version}"
    if not any((TOOLKIT.home / lib / "libcudart_static.a").is_file() for lib in ("lib64", "lib")) and not list(
        TOOLKIT.home.glob("targets/*/lib/libcudart_static.a")
    ):
        return f"the toolkit at {TOOLKIT.home} has no libcudart_static.a"
    return None


pytestmark = [pytest.mark.slow, pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or "")]

KERNEL_CU = """__global__ void scale(float* x, float a) { x[threadIdx.x] *= a; }
extern "C" int kernel_answer() { return 7; }
"""
SETUP_PY = """import os
import torch  # the kept torch
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

root = os.path.dirname(torch.__file__)
setup(
    name="cuda-kernel",
    version="1.0",
    packages=["cuda_kernel"],
    ext_modules=[CUDAExtension("cuda_kernel._C", ["cuda_kernel/_C.cpp", "cuda_kernel/kernel.cu"], include_dirs=[os.path.join(root, "include")],
                               library_dirs=[os.path.join(root, "lib")], libraries=["torch"])],
    cmdclass={"build_ext": BuildExtension},
)
"""
EXT_CPP = """#include <Python.h>
#include "stand_in.h"
extern "C" int kernel_answer();
static PyObject* add(PyObject*, PyObject* args) {
    int a, b;
    if (!PyArg_ParseTuple(args, "ii", &a, &b)) return NULL;
    return PyLong_FromLong(c10::stand_in_add(a, b));
}
static PyObject* answer(PyObject*, PyObject*) { return PyLong_FromLong(kernel_answer()); }
static PyMethodDef methods[] = {{"add", add, METH_VARARGS, ""}, {"answer", answer, METH_NOARGS, ""}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", NULL, -1, methods};
PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&module); }
"""


def _sections(data: bytes) -> dict[str, bytes]:
    """An ELF64 file's sections by name."""
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = headers[shstrndx]
    return {data[names[4] + h[0] :].split(b"\0", 1)[0].decode(): data[h[4] : h[4] + h[5]] for h in headers}


def fatbin_entries(so: Path) -> list[tuple[str, int]]:
    """(``sass`` or ``ptx``, the SM number) of each entry of a ``.so``'s ``.nv_fatbin`` (the fat
    binary's own headers: magic 0xBA55ED50, then per entry its kind at 0 and its arch at 28)."""
    blob = _sections(so.read_bytes()).get(".nv_fatbin", b"")
    out, pos = [], 0
    while pos + 16 <= len(blob):
        magic, _, size, fat = struct.unpack_from("<IHHQ", blob, pos)
        if magic != 0xBA55ED50:
            break
        entry, end = pos + size, pos + size + fat
        while entry < end:
            kind, _, header, padded = struct.unpack_from("<HHII", blob, entry)
            (sm,) = struct.unpack_from("<I", blob, entry + 28)
            out.append(({1: "ptx", 2: "sass"}.get(kind, str(kind)), sm))
            entry += header + padded
        pos = end
    return out


@pytest.mark.parametrize(
    ("gpu", "sass", "archs"),
    [(("--gpu", "sm90"), [("sass", 90)], "9.0"), ((), [("sass", 90), ("sass", 120)], "9.0;12.0")],
    ids=["gpu-asked", "torchs-own-archs"],
)
def test_a_cu_extension_builds_through_the_tool_on_a_driverless_machine_with_sass_for_the_archs(tmp_path, uv_env, capsys, monkeypatch, gpu, sass, archs):
    """``--gpu sm90``: SASS for sm_90 and nothing else; no ``--gpu`` (no GPU, no driver): the archs
    the kept torch was compiled for (its get_arch_list() is [] here, its compile-time flags say
    sm_90 sm_120 compute_120), said, and never torch's own failure."""
    assert TOOLKIT is not None
    sdist = extension_sdist(
        tmp_path / "sdists",
        "cuda-kernel",
        files={"setup.py": SETUP_PY, "cuda_kernel/_C.cpp": EXT_CPP, "cuda_kernel/kernel.cu": KERNEL_CU},
    )
    world = build_world(tmp_path, sdists=(sdist,))
    # nvcc only behind a wrapper script on PATH, as /usr/local/bin/nvcc often is
    wrapper = tmp_path / "wrapper-bin" / "nvcc"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nexec {TOOLKIT.nvcc.resolve()} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}{os.pathsep}{uv_env['PATH']}")
    for name in ("CUDA_HOME", "CUDA_PATH", "TORCH_CUDA_ARCH_LIST"):
        monkeypatch.delenv(name, raising=False)
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        venv = make_venv(tmp_path / "venv", uv_env, torch_wheel(world))
        rc, out, err = run_cli(capsys, "install", "--python", venv, "--build", "cuda-kernel", *gpu, *common(srv, tmp_path / "cache"), "--format", "json")
    assert rc == 0, err
    assert {p["name"]: p for p in json.loads(out)["packages"]}["cuda-kernel"]["action"] == "build"
    # loadable here, without a driver; its host code calls into the stand-in libtorch and into the .cu file's code
    assert run_in(venv, "import cuda_kernel._C as c; print(c.add(2, 3), c.answer())") == f"{5 + ADD_OFFSET} 7"
    site = Path(run_in(venv, "import cuda_kernel, os; print(os.path.dirname(cuda_kernel.__file__))"))
    [so] = site.glob("_C*.so")
    assert fatbin_entries(so) == sass  # SASS for the archs asked for (or torch's own), and nothing else
    cuobjdump = shutil.which("cuobjdump") or str(TOOLKIT.home / "bin" / "cuobjdump")
    if Path(cuobjdump).is_file():
        listed = subprocess.run([cuobjdump, "--list-elf", str(so)], capture_output=True, text=True, check=True).stdout
        assert all(f"sm_{sm}" in listed for _, sm in sass)
    [record] = (tmp_path / "cache" / "wheels" / "builds").glob("*.json")
    built = json.loads(record.read_text())
    assert built["provenance"]["nvcc"] == TOOLKIT.version and built["provenance"]["arch-list"] == archs
    log = Path(built["log"]).read_text()
    assert f"{TOOLKIT.home.resolve()}/bin/nvcc -c" in log or f"{TOOLKIT.home}/bin/nvcc -c" in log  # CUDA_HOME: the real toolkit, not the wrapper's folder
    assert all(f"-gencode=arch=compute_{sm},code=sm_{sm}" in log for _, sm in sass)
    if not gpu:
        assert f"built for the archs torch 2.12.0.dev20260307+cu130 was built for ({archs}, from torch._C._cuda_getArchFlags()" in err
