"""doctor imports every installed torch-ABI-bound package (issue 11, item 5): a binary whose libc10
symbol the installed torch lacks fails with an undefined symbol, reported as built for another
torch and named; the package is found torch-ABI-bound from its installed ``.so`` (scan/elf/),
its METADATA saying nothing about torch. Real ELF objects, a real venv, real imports."""

from __future__ import annotations

import subprocess

import pytest
from support.elfbuild import _cc, compile_so, have_cc
from support.install_world import PLAT, PY, UV, make_venv
from support.wheels import build_wheel

from resolve_gpu_stack.data.definitions import load_definitions
from resolve_gpu_stack.env.abi_imports import import_packages, torch_abi_packages
from resolve_gpu_stack.env.buildmachine import has_cuda_driver
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


def _so(directory, name: str, body: str, *links: str, flags: tuple[str, ...] = ()) -> bytes:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.c").write_text(body)
    _cc(["-shared", "-fPIC", f"-Wl,-soname,{name}", "-o", name, f"{name}.c", "-L", str(directory), "-Wl,--no-as-needed", *links, *flags], directory)
    return (directory / name).read_bytes()


@pytest.mark.skipif(has_cuda_driver(), reason="this host has the NVIDIA driver: the driverless path is not what runs here")
def test_doctor_on_a_driverless_host_judges_driver_bound_binaries_from_their_symbols_and_exits_5(tmp_path, uv_env, capsys):
    """Issue 49: a build or CI host has no NVIDIA driver. A package whose .so needs libcuda.so.1 is
    judged from its symbols and not imported; one that needs it through another library fails
    its import on libcuda, which is said as no driver (a skip), never as an undefined symbol or a
    failure; exit 5 (nothing failed, not everything checked), in seconds."""
    import json
    import time

    from resolve_gpu_stack.cli.app import main

    build = tmp_path / "build"
    c10 = libc10(build / "libs", "c10_stub")
    _so(build / "libs", "libcuda.so.1", "int cuInit(int f) { return f; }\n")  # link-time stub only: never installed
    (build / "libs" / "libcuda.so").symlink_to("libcuda.so.1")
    direct = _so(
        build / "libs", "common_ops.so", "int c10_stub(void); int cuInit(int);\nint entry(void) { return c10_stub() + cuInit(0); }\n", "-lc10", "-lcuda"
    )
    helper = _so(build / "libs", "libhelper.so", "int cuInit(int);\nint helper(void) { return cuInit(0); }\n", "-lcuda")
    via = _so(
        build / "libs",
        "ops.so",
        "int c10_stub(void); int helper(void);\nint entry(void) { return c10_stub() + helper(); }\n",
        "-lc10",
        "-lhelper",
        flags=("-Wl,-rpath,$ORIGIN/../torch/lib",),
    )
    wheels = tmp_path / "w"
    torch_files = {"torch/__init__.py": b"", "torch/lib/libc10.so": c10, "torch/lib/libhelper.so": helper}  # a library of another package needs libcuda
    torch = build_wheel(wheels, "torch", "2.12.0", f"{PY}-{PY}-{PLAT}", files=torch_files)
    kernel = build_wheel(wheels, "sgl-kernel", "0.3.21", f"{PY}-{PY}-{PLAT}", files={"sgl_kernel/__init__.py": LOADER, "sgl_kernel/common_ops.so": direct})
    loader_b = b"import ctypes, os\nctypes.CDLL(os.path.join(os.path.dirname(__file__), 'ops.so'))\n"
    other = build_wheel(wheels, "deep-ep", "1.0", f"{PY}-{PY}-{PLAT}", files={"deep_ep/__init__.py": loader_b, "deep_ep/ops.so": via})
    python = make_venv(tmp_path / "venv", uv_env, torch.path)
    subprocess.run([UV, "pip", "install", "-q", "--python", python, "--no-deps", "--offline", str(kernel.path), str(other.path)], check=True, env=uv_env)
    capsys.readouterr()
    started = time.monotonic()
    rc = main(["doctor", "--python", python, "--nvidia-smi", str(tmp_path / "none"), "--format", "json"])
    took = time.monotonic() - started
    out, err = capsys.readouterr()
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    assert rc == 5, (out, err)
    imports = checks["torch-abi-import"]
    assert imports["status"] == "skip" and "no NVIDIA driver on this host" in imports["message"], imports
    assert "sgl-kernel 0.3.21" in imports["details"]["no-driver"]  # not imported at all: its .so needs libcuda.so.1
    tried = {i["package"]: i["error"] for i in imports["details"]["imports"]}
    assert "sgl-kernel 0.3.21" not in tried and "libcuda.so.1: cannot open shared object file" in (tried["deep-ep 1.0"] or "")
    assert "undefined symbol" not in imports["message"]
    assert checks["torch-abi-symbols"]["status"] in ("pass", "warn") and "sgl-kernel 0.3.21" in checks["torch-abi-symbols"]["message"]
    assert took < 15


def test_installed_builds_per_cuda_major_are_judged_as_the_wheel_is(tmp_path, uv_env):
    """torch-memory-saver ships each hook once per CUDA major (``..._cu12``, ``..._cu13``, and an
    unmarked build of CUDA 12), none linking torch. The plan takes it on a CUDA 13 torch (the CUDA 13
    builds decide); the installed package must be judged the same way, or the next install and
    doctor call it broken (seen live on PyPI's torch 2.15.0, 2026-12-07). A package with CUDA 12
    builds only is still refused."""
    from resolve_gpu_stack.env.abi_imports import static_verdicts

    libs = tmp_path / "build" / "libs"
    _so(libs, "libcudart.so.12", "int cudaFree12(void *p) { return 0; }\n")
    _so(libs, "libcudart.so.13", "int cudaFree13(void *p) { return 0; }\n")
    (libs / "libcudart12.so").symlink_to("libcudart.so.12")
    (libs / "libcudart13.so").symlink_to("libcudart.so.13")
    cu12 = _so(libs, "hook_cu12.so", "int cudaFree12(void *p);\nint hook(void) { return cudaFree12(0); }\n", "-lcudart12")
    cu13 = _so(libs, "hook_cu13.so", "int cudaFree13(void *p);\nint hook(void) { return cudaFree13(0); }\n", "-lcudart13")
    wheels = tmp_path / "w"
    torch = build_wheel(wheels, "torch", "2.12.0+cu130", f"{PY}-{PY}-{PLAT}", files={"torch/__init__.py": b""})
    twins = {"saver_hook_cu12.abi3.so": cu12, "saver_hook_cu13.abi3.so": cu13, "saver_hook.abi3.so": cu12, "saver/__init__.py": b""}
    saver = build_wheel(wheels, "saver", "0.0.10", f"{PY}-abi3-{PLAT}", files=twins)
    old = build_wheel(wheels, "oldsaver", "0.0.1", f"{PY}-abi3-{PLAT}", files={"oldsaver_hook.abi3.so": cu12, "oldsaver/__init__.py": b""})
    python = make_venv(tmp_path / "venv", uv_env, torch.path)
    subprocess.run([UV, "pip", "install", "-q", "--python", python, "--no-deps", "--offline", str(saver.path), str(old.path)], check=True, env=uv_env)

    verdicts = {v.name: v.verdict for v in static_verdicts(inspect_environment(python), DEFS)}
    assert verdicts["saver"] is not None and verdicts["saver"].refusal is None, verdicts["saver"]
    assert "the CUDA 13 ones decide" in (verdicts["saver"].note or ""), verdicts["saver"]
    assert verdicts["oldsaver"] is not None and "needs CUDA 12" in (verdicts["oldsaver"].refusal or ""), verdicts["oldsaver"]


def test_imports_share_one_interpreter_and_a_failure_is_checked_alone(tmp_path, uv_env):
    """doctor imports every torch-bound package in one interpreter (torch loaded once), and gives a
    package that failed there, or that the interpreter never reached (a crash), one of its own: the
    crash is the crasher's alone, the packages after it still import, and an ordinary import error
    is the failing package's own (read again alone)."""
    from resolve_gpu_stack.env.abi_imports import AbiPackage

    wheels = tmp_path / "w"
    crasher = build_wheel(wheels, "crasher", "1.0", files={"crasher/__init__.py": b"import os\nos._exit(3)\n"})
    fine = build_wheel(wheels, "fine", "1.0", files={"fine/__init__.py": b""})
    broken = build_wheel(wheels, "broken", "1.0", files={"broken/__init__.py": b"import not_there_at_all\n"})
    python = make_venv(tmp_path / "venv", uv_env)
    paths = [str(w.path) for w in (crasher, fine, broken)]
    subprocess.run([UV, "pip", "install", "-q", "--python", python, "--no-deps", "--offline", *paths], check=True, env=uv_env)

    def pkg(name: str) -> AbiPackage:
        return AbiPackage(name=name, version="1.0", why="test", modules=(name,))

    got = {o.package: o.error for o in import_packages(python, [pkg("broken"), pkg("crasher"), pkg("fine")], uv_env, timeout=60)}
    assert "exited with status 3" in (got["crasher 1.0"] or ""), got
    assert got["fine 1.0"] is None, got  # never reached in the shared interpreter: imported alone
    assert "No module named 'not_there_at_all'" in (got["broken 1.0"] or ""), got


@pytest.mark.parametrize("case", ["no-bytecode", "users-prefix", "compiled"])
def test_doctor_keeps_the_targets_bytecode_in_its_own_folder_where_the_target_writes_none(tmp_path, uv_env, case):
    """Issue 49 (doctor in seconds): where ``PYTHONDONTWRITEBYTECODE`` is set (container images set
    it) and the target's torch was installed without bytecode, every import check would compile the
    stack from source at every run (the live SGLang stack: 23 s of CPU, 10 s from bytecode). The
    import checks then keep the target's bytecode in the program's own folder, never beside the
    target's sources; a ``PYTHONPYCACHEPREFIX`` of the user's own, or a target that has its
    bytecode, is left as it is. The verdicts are the same. Through the real command, a process."""
    import json
    import os
    import sys

    build = tmp_path / "build"
    c10 = libc10(build / "libs", "c10_stub")
    ops = compile_so(build, "common_ops.so", build / "libs", links=("libc10.so",), flags=("-Wl,-rpath,$ORIGIN/../torch/lib",))
    wheels = tmp_path / "w"
    torch = build_wheel(wheels, "torch", "2.12.0", f"{PY}-{PY}-{PLAT}", files={"torch/__init__.py": b"", "torch/lib/libc10.so": c10})
    loader = b"import torch\n" + LOADER
    kernel = build_wheel(wheels, "sgl-kernel", "0.3.21", f"{PY}-{PY}-{PLAT}", files={"sgl_kernel/__init__.py": loader, "sgl_kernel/common_ops.so": ops})
    python = make_venv(tmp_path / "venv", uv_env, torch.path)
    subprocess.run([UV, "pip", "install", "-q", "--python", python, "--no-deps", "--offline", str(kernel.path)], check=True, env=uv_env)
    site = next((tmp_path / "venv" / "lib").glob("python3*/site-packages"))
    if case == "compiled":
        subprocess.run([python, "-m", "compileall", "-q", str(site / "torch")], check=True, env={**uv_env, "PYTHONDONTWRITEBYTECODE": ""})
    assert not list(site.glob("sgl_kernel/**/*.pyc"))
    cache, users = tmp_path / "cache", tmp_path / "users-prefix"
    env = {**uv_env, "PYTHONDONTWRITEBYTECODE": "1", "XDG_CACHE_HOME": str(cache), "PYTHONPYCACHEPREFIX": str(users) if case == "users-prefix" else ""}
    env = {k: v for k, v in env.items() if v}
    cmd = [sys.executable, "-m", "resolve_gpu_stack", "doctor", "--python", python, "--nvidia-smi", str(tmp_path / "none"), "--format", "json"]
    runs = [subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path) for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[0].stderr
    first, second = (json.loads(r.stdout) for r in runs)
    assert first == second
    imports = {c["name"]: c for c in first["checks"]}["torch-abi-import"]
    assert imports["status"] == "pass" and "sgl-kernel 0.3.21" in imports["message"], imports
    kept = list((cache / "resolve-gpu-stack" / "bytecode").glob(f"**{os.path.realpath(site)}/**/*.pyc"))
    assert not list(site.glob("sgl_kernel/**/*.pyc"))  # the target is never written
    if case == "no-bytecode":
        assert {p.parent.name + "/" + p.name.split(".", 1)[0] for p in kept} >= {"torch/__init__", "sgl_kernel/__init__"}
    else:
        assert kept == []  # the user's own prefix (and PYTHONDONTWRITEBYTECODE: nothing written), or the target's own bytecode


def test_doctors_kept_bytecode_never_hides_a_reinstalled_file_of_the_same_size_and_mtime(tmp_path, uv_env):
    """Python trusts a ``.pyc`` whose source has the size and mtime it recorded; an installer that
    writes a changed file of the same size with the wheel's (or the same second's) timestamp would
    then have the doctor import the code that was there before. The kept bytecode is one folder per
    installed state (the digest of every RECORD): after a reinstall the doctor imports what is
    installed now, here a package whose new release fails at import."""
    import json
    import os
    import sys

    build = tmp_path / "build"
    c10 = libc10(build / "libs", "c10_stub")
    ops = compile_so(build, "common_ops.so", build / "libs", links=("libc10.so",), flags=("-Wl,-rpath,$ORIGIN/../torch/lib",))
    wheels = tmp_path / "w"
    torch = build_wheel(wheels, "torch", "2.12.0", f"{PY}-{PY}-{PLAT}", files={"torch/__init__.py": b"", "torch/lib/libc10.so": c10})

    def kernel(version: str, tail: bytes):  # noqa: ANN202
        files = {"sgl_kernel/__init__.py": b"import torch\n" + LOADER + tail, "sgl_kernel/common_ops.so": ops}
        return build_wheel(wheels, "sgl-kernel", version, f"{PY}-{PY}-{PLAT}", files=files)

    good, bad = kernel("0.3.21", b"OK = 1  \n"), kernel("0.3.22", b"OK = 1/0\n")
    python = make_venv(tmp_path / "venv", uv_env, torch.path)
    site = next((tmp_path / "venv" / "lib").glob("python3*/site-packages"))
    install = [UV, "pip", "install", "-q", "--python", python, "--no-deps", "--offline", "--reinstall"]
    subprocess.run([*install, str(good.path)], check=True, env=uv_env)
    source = site / "sgl_kernel" / "__init__.py"
    stamp = source.stat()
    env = {k: v for k, v in {**uv_env, "PYTHONDONTWRITEBYTECODE": "1", "XDG_CACHE_HOME": str(tmp_path / "cache")}.items() if k != "PYTHONPYCACHEPREFIX"}
    cmd = [sys.executable, "-m", "resolve_gpu_stack", "doctor", "--python", python, "--nvidia-smi", str(tmp_path / "none"), "--format", "json"]

    def import_check() -> dict:
        run = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path)
        return {c["name"]: c for c in json.loads(run.stdout)["checks"]}["torch-abi-import"]

    assert import_check()["status"] == "pass"
    subprocess.run([*install, str(bad.path)], check=True, env=uv_env)
    assert source.stat().st_size == stamp.st_size
    os.utime(source, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))  # the same size and mtime as the file before
    check = import_check()
    assert check["status"] == "fail" and "ZeroDivisionError" in json.dumps(check), check


@pytest.mark.skipif(has_cuda_driver(), reason="this host has the NVIDIA driver: the driverless path is not what runs here")
def test_a_binary_whose_dynamic_section_lies_past_its_first_megabytes_is_still_found_needing_torch_and_the_driver(tmp_path, uv_env, capsys):
    """A kernel library that patchelf (auditwheel) rewrote keeps its dynamic section and names at
    the end of the file: sglang-kernel's 1.1 GB ``flash_ops.abi3.so`` on the live SGLang stack,
    where a read of the first 2 MiB found neither its libtorch nor its libcuda.so.1. Its needed
    libraries are read from the file mapped, wherever they lie: torch-bound, driver-bound, and so
    judged from its symbols, not imported, on a host without the driver."""
    from support.elfbuild import move_dynamic

    build = tmp_path / "build"
    c10 = libc10(build / "libs", "c10_stub")
    _so(build / "libs", "libcuda.so.1", "int cuInit(int f) { return f; }\n")
    (build / "libs" / "libcuda.so").symlink_to("libcuda.so.1")
    ops = _so(build / "libs", "flash_ops.so", "int c10_stub(void); int cuInit(int);\nint entry(void) { return c10_stub() + cuInit(0); }\n", "-lc10", "-lcuda")
    moved = move_dynamic(ops, pad=3 * 2**20, zeros=True)
    wheels = tmp_path / "w"
    torch = build_wheel(wheels, "torch", "2.12.0", f"{PY}-{PY}-{PLAT}", files={"torch/__init__.py": b"", "torch/lib/libc10.so": c10})
    kernel = build_wheel(wheels, "late-kernel", "1.0", f"{PY}-{PY}-{PLAT}", files={"late_kernel/__init__.py": b"", "late_kernel/flash_ops.so": moved})
    python = make_venv(tmp_path / "venv", uv_env, torch.path)
    subprocess.run([UV, "pip", "install", "-q", "--python", python, "--no-deps", "--offline", str(kernel.path)], check=True, env=uv_env)
    [bound] = torch_abi_packages(inspect_environment(python), DEFS)
    assert (bound.name, bound.why, bound.modules, bound.needs_driver) == ("late-kernel", "flash_ops.so needs libc10.so", ("late_kernel",), "flash_ops.so")
    import json

    from resolve_gpu_stack.cli.app import main

    capsys.readouterr()
    rc = main(["doctor", "--python", python, "--nvidia-smi", str(tmp_path / "none"), "--format", "json"])
    out, err = capsys.readouterr()
    imports = {c["name"]: c for c in json.loads(out)["checks"]}["torch-abi-import"]
    assert rc == 5, (out, err)
    assert imports["details"]["no-driver"] == ["late-kernel 1.0"] and imports["details"]["imports"] == [], imports
    assert "late-kernel 1.0 needs libcuda.so.1, so it was judged from its symbols only, not imported" in imports["message"]
