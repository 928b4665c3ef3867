"""A loopback world for the ABI judgement, with real compiled shared objects.

The kept torch nightly's wheel carries ``torch/lib/libtorch_cpu.so`` and ``libc10.so``, stub
libraries compiled here that export a few C++ symbols of torch's namespaces and two C-shim
functions; ``libcudart.so.12`` / ``.so.13`` stubs stand for the CUDA runtime. On PyPI:

- ``stable-ext`` (``torch>=2.10``): imports only C-shim functions, needs ``libcudart.so.13``;
- ``stable-cu12``: the same needing ``libcudart.so.12``;
- ``locked-ok``: imports C++ symbols the kept torch exports;
- ``locked-bad``: imports ``c10::detail::torchInternalAssertFail(...)``, which it does not;
- ``pinned-ok``: pins ``torch==2.11.0`` and imports what the kept torch exports (binaries decide);
- ``builds-ext``: one build per torch 2.7, 2.8, 2.9 (``libaddon_torch27.so`` ...), none for 2.12;
- ``cuda-only``: links ``libcudart.so.12`` and no torch (a CUDA 12 runtime user).

``build_abi_world(root)`` returns the world (``serve`` it) and the folder of the compiled objects.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from support.stack_world import build_story_world
from support.wheels import BuiltWheel, build_wheel
from support.world import World, _Entry

CXX = shutil.which("g++") or shutil.which("c++")
TAG = "cp310-abi3-manylinux_2_28_x86_64"  # fits the declared 3.12 target and a venv of this interpreter
NIGHTLY = "2.12.0.dev20260307+cu130"

CHECK_FAIL = "_ZN3c106detail14torchCheckFailEPKcS2_jRKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"
ASSERT_FAIL = "_ZN3c106detail23torchInternalAssertFailEPKcS2_jS2_RKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"

_TORCH_CPU = r"""
#include <string>
namespace c10 { namespace detail {
void torchCheckFail(const char*, const char*, unsigned int, const std::string&) {}
} }
namespace at { namespace _ops { struct empty { static int call(); }; int empty::call() { return 0; } } }
extern "C" int aoti_torch_get_device_index(void*, int* out) { *out = 0; return 0; }
extern "C" int torch_call_dispatcher(const char*, const char*, void*) { return 0; }
"""
_C10 = r"""
namespace c10 { struct Half { static float to_float(unsigned short); }; float Half::to_float(unsigned short) { return 0.f; } }
"""
_CUDART = 'extern "C" int cudaGetDevice(int* d) { *d = 0; return 0; }\n'
_STABLE = r"""
extern "C" int aoti_torch_get_device_index(void*, int*);
extern "C" int torch_call_dispatcher(const char*, const char*, void*);
extern "C" int cudaGetDevice(int*);
extern "C" int entry(void) { int d; return aoti_torch_get_device_index(0, &d) + torch_call_dispatcher("a", "b", 0) + cudaGetDevice(&d); }
"""
_LOCKED_OK = r"""
#include <string>
namespace c10 { namespace detail { void torchCheckFail(const char*, const char*, unsigned int, const std::string&); } }
namespace at { namespace _ops { struct empty { static int call(); }; } }
extern "C" int entry(void) { c10::detail::torchCheckFail("a", "b", 1, std::string("c")); return at::_ops::empty::call(); }
"""
_LOCKED_BAD = r"""
#include <string>
namespace c10 { namespace detail {
void torchCheckFail(const char*, const char*, unsigned int, const std::string&);
void torchInternalAssertFail(const char*, const char*, unsigned int, const char*, const std::string&);
} }
extern "C" int entry(void) { c10::detail::torchCheckFail("a", "b", 1, std::string("c"));
  c10::detail::torchInternalAssertFail("a", "b", 1, "c", std::string("d")); return 0; }
"""
_BUILD = r"""
#include <string>
namespace c10 { namespace detail { void torchInternalAssertFail(const char*, const char*, unsigned int, const char*, const std::string&); } }
extern "C" int entry_%(n)s(void) { c10::detail::torchInternalAssertFail("a", "b", 1, "c", std::string("d")); return %(n)s; }
"""


def have_cxx() -> bool:
    return CXX is not None


def _compile(folder: Path, name: str, source: str, *, soname: str | None = None, links: tuple[str, ...] = ()) -> bytes:
    assert CXX is not None
    src = folder / f"{name}.cc"
    src.write_text(source)
    args = [CXX, "-shared", "-fPIC", "-O1", "-o", name, src.name, "-L", ".", "-Wl,--no-as-needed", *(f"-l:{lib}" for lib in links)]
    if soname:
        args.insert(1, f"-Wl,-soname,{soname}")
    proc = subprocess.run(args, cwd=folder, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed:\n{proc.stderr}")
    return (folder / name).read_bytes()


def compile_objects(folder: Path) -> dict[str, bytes]:
    """Every shared object of the world, by name."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {
        "libtorch_cpu.so": _compile(folder, "libtorch_cpu.so", _TORCH_CPU, soname="libtorch_cpu.so"),
        "libc10.so": _compile(folder, "libc10.so", _C10, soname="libc10.so"),
        "libcudart.so.12": _compile(folder, "libcudart.so.12", _CUDART, soname="libcudart.so.12"),
        "libcudart.so.13": _compile(folder, "libcudart.so.13", _CUDART, soname="libcudart.so.13"),
    }
    out["stable.so"] = _compile(folder, "stable.so", _STABLE, links=("libtorch_cpu.so", "libc10.so", "libcudart.so.13"))
    out["stable12.so"] = _compile(folder, "stable12.so", _STABLE, links=("libtorch_cpu.so", "libc10.so", "libcudart.so.12"))
    out["locked_ok.so"] = _compile(folder, "locked_ok.so", _LOCKED_OK, links=("libtorch_cpu.so", "libc10.so"))
    out["locked_bad.so"] = _compile(folder, "locked_bad.so", _LOCKED_BAD, links=("libtorch_cpu.so", "libc10.so"))
    for n in ("27", "28", "29"):
        out[f"libaddon_torch{n}-cpu.so"] = _compile(folder, f"libaddon_torch{n}-cpu.so", _BUILD % {"n": n}, links=("libtorch_cpu.so", "libc10.so"))
    out["cuda_only.so"] = _compile(
        folder,
        "cuda_only.so",
        _CUDART.replace("cudaGetDevice", "helper") + 'extern "C" int cudaGetDevice(int*);\nextern "C" int use(void) { int d; return cudaGetDevice(&d); }\n',
        links=("libcudart.so.12",),
    )
    return out


def torch_files(objects: dict[str, bytes]) -> dict[str, bytes]:
    """The kept torch's files: an importable package with its two libraries."""
    return {
        "torch/__init__.py": b'__version__ = "2.12.0.dev20260307+cu130"\n',
        "torch/lib/libtorch_cpu.so": objects["libtorch_cpu.so"],
        "torch/lib/libc10.so": objects["libc10.so"],
    }


def pypi_native(w: World, name: str, version: str, files: dict[str, bytes], requires: tuple[str, ...] = (), *, tag: str = TAG) -> BuiltWheel:
    wheel = build_wheel(w.root / "files", name, version, tag, requires, files=files)
    w._add(f"simple/{name}/", "pypi", _Entry(wheel, "files/" + wheel.filename, sidecar=False, upload_time="2026-01-01T00:00:00Z"))
    return wheel


def build_abi_world(root: Path, *, torch_lib: Callable[[bytes], bytes] | None = None, tag: str = TAG) -> tuple[World, dict[str, bytes]]:
    """The story world with a kept torch whose libraries are real, and the six compiled packages;
    ``torch_lib`` rewrites the kept torch's ``libtorch_cpu.so`` (``elfbuild.move_dynamic``);
    ``tag``: the wheel tag of the kept torch and the packages (an aarch64 one for a declared
    aarch64 target: the objects are this machine's, read the same)."""
    objects = compile_objects(root / "objects")
    if torch_lib is not None:
        objects["libtorch_cpu.so"] = torch_lib(objects["libtorch_cpu.so"])
    w = build_story_world(root / "www", hostile=False)
    w.pages["whl/nightly/cu130/torch/"] = [e for e in w.pages["whl/nightly/cu130/torch/"] if NIGHTLY not in e.wheel.filename]
    w.pytorch("torch", NIGHTLY, tag=tag, requires=["filelock"], requires_python=">=3.10", files=torch_files(objects))
    pypi_native(w, "stable-ext", "1.0", {"stable_ext/__init__.py": b"", "stable_ext/_C.abi3.so": objects["stable.so"]}, ("torch>=2.10",), tag=tag)
    pypi_native(w, "stable-cu12", "1.0", {"stable_cu12/__init__.py": b"", "stable_cu12/_C.abi3.so": objects["stable12.so"]}, ("torch>=2.10",), tag=tag)
    pypi_native(w, "locked-ok", "1.0", {"locked_ok/__init__.py": b"", "locked_ok/_C.so": objects["locked_ok.so"]}, tag=tag)
    pypi_native(w, "locked-bad", "1.0", {"locked_bad/__init__.py": b"", "locked_bad/_C.so": objects["locked_bad.so"]}, tag=tag)
    # a framework pinning another torch whose binary runs on the kept one (sglang 0.5.23's shape, issue 28)
    pypi_native(w, "pinned-ok", "1.0", {"pinned_ok/__init__.py": b"", "pinned_ok/_C.so": objects["locked_ok.so"]}, ("torch==2.11.0",), tag=tag)
    pypi_native(
        w,
        "builds-ext",
        "1.0",
        {"builds_ext/__init__.py": b"", **{f"builds_ext/libaddon_torch{n}-cpu.so": objects[f"libaddon_torch{n}-cpu.so"] for n in ("27", "28", "29")}},
        tag=tag,
    )
    pypi_native(w, "cuda-only", "1.0", {"cuda_only/__init__.py": b"", "cuda_only/_helper.so": objects["cuda_only.so"]}, tag=tag)
    return w, objects


__all__ = ["ASSERT_FAIL", "CHECK_FAIL", "NIGHTLY", "build_abi_world", "compile_objects", "have_cxx", "torch_files"]
