"""doctor imports every installed torch-ABI-bound package (issue 11, item 5): a binary whose libc10
symbol the installed torch lacks fails with an undefined symbol, reported as built for another
torch and named; the package is found torch-ABI-bound from its installed ``.so`` (index/elf/),
its METADATA saying nothing about torch. Real ELF objects, a real venv, real imports."""

from __future__ import annotations

import subprocess

import pytest
from elfbuild import _cc, compile_so, have_cc
from test_install_e2e import PLAT, PY, UV, make_venv
from wheels import build_wheel

from resolve_gpu_stack.data.definitions import load_definitions
from resolve_gpu_stack.env.abi_imports import import_packages, torch_abi_packages
from resolve_gpu_stack.env.doctor import run_checks
from resolve_gpu_stack.env.probe import inspect_environment

pytestmark = pytest.mark.skipif(not have_cc(), reason="needs a C compiler to build the ELF objects")
DEFS = load_definitions()
# The package loads its kernel library at import, as torch extensions do (dlopen, RTLD_NOW); the
# stub is not a Python module, so ctypes loads it rather than ``from . import common_ops``.
LOADER = b"import ctypes, os\nctypes.CDLL(os.path.join(os.path.dirname(__file__), 'common_ops.so'))\n"


def libc10(directory, func: str) -> bytes:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "c10.c").write_text(f"int {func}(void) {{ return 1; }}\n")
    _cc(["-shared", "-fPIC", "-Wl,-soname,libc10.so", "-o", "libc10.so", "c10.c"], directory)
    return (directory / "libc10.so").read_bytes()


@pytest.mark.parametrize("torch_has_symbol", [True, False])
def test_doctor_imports_torch_abi_packages_and_names_one_built_for_another_torch(tmp_path, uv_env, torch_has_symbol):  # noqa: F811
    build = tmp_path / "build"
    built_against = libc10(build / "libs", "c10_stub")  # what the kernel was linked against
    installed = built_against if torch_has_symbol else libc10(build / "other", "c10_other")  # another torch's libc10
    ops = compile_so(build, "common_ops.so", build / "libs", links=("libc10.so",), flags=("-Wl,-rpath,$ORIGIN/../torch/lib",))
    wheels = tmp_path / "w"
    torch = build_wheel(wheels, "torch", "2.12.0", f"{PY}-{PY}-{PLAT}", files={"torch/__init__.py": b"", "torch/lib/libc10.so": installed})
    kernel = build_wheel(wheels, "sgl-kernel", "0.3.21", f"{PY}-{PY}-{PLAT}", files={"sgl_kernel/__init__.py": LOADER, "sgl_kernel/common_ops.so": ops})
    pure = build_wheel(wheels, "plain", "1.0")
    python = make_venv(tmp_path / "venv", uv_env, torch.path)
    subprocess.run([UV, "pip", "install", "-q", "--python", python, "--no-deps", "--offline", str(kernel.path), str(pure.path)], check=True, env=uv_env)

    env = inspect_environment(python)
    bound = torch_abi_packages(env, DEFS)
    assert [(p.name, p.why, p.modules) for p in bound] == [("sgl-kernel", "common_ops.so needs libc10.so", ("sgl_kernel",))]
    outcomes = import_packages(python, bound, uv_env, timeout=60)
    check = next(c for c in run_checks(env, DEFS, import_result=None, gpus=None, abi_imports=outcomes) if c.name == "torch-abi-import")
    if torch_has_symbol:
        assert check.status == "pass" and "sgl-kernel 0.3.21" in check.message, check.message
    else:
        assert check.status == "fail"
        assert "sgl-kernel 0.3.21 is built for another torch" in check.message and "undefined symbol: c10_stub" in check.message
