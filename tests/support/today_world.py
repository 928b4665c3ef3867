"""A loopback world of today's shape (2026-12-01, ``/work/shared/reference/today.md``).

- torch 2.15.0 as PyPI serves it: dist-info version ``2.15.0`` (no ``+cuNNN``), METADATA pinning
  ``cuda-toolkit[cublas,cudart]==13.2.2``, ``torch/version.py`` saying ``cuda = '13.2'``, and real
  stub libraries (``abi_world``) exporting the C++ symbols and C-shim functions the compiled wheels
  below import. It is on PyPI's torch page (where a declared kept torch is known from: routing.toml
  ``kept``) and on a page of its own (``pypi-torch/``) for a venv to install it from; the PyTorch
  index's ``cu132`` page has the labelled build ``2.15.0+cu132`` beside it.
- FlashInfer 0.6.5 (python, cubin on PyPI; jit-cache for cu128, cu129, cu130 on FlashInfer's index).
- sglang 0.5.23 pinning ``torch==2.14.1`` and ``sglang-kernel==0.4.10``, both shipping a ``.so``
  whose C++ imports the kept torch exports (version-locked, runs); sglang 0.5.2 without pins.
- torch-memory-saver 0.0.10 (required by sglang): ``..._hook_mode_torch_cu12.abi3.so`` and its
  ``_cu13`` twin (stable-ABI code needing libcudart 12 / 13): one build per CUDA major.
- vllm 0.33.0 pinning ``torch==2.14.0``: its ``.so`` imports only the C shim (stable ABI).
- oldfw 2.0 pinning ``torch==2.14.1`` with a ``.so`` importing a C++ symbol the kept torch does not
  export (cannot run), and oldfw 1.0, pure Python without pins (could): a framework whose newest
  release is refused.
- torchvision 0.29.2, torchaudio 2.11.1, torchcodec 0.17.0, torchao 0.18.0 as PyPI has them:
  ``py3-none`` wheels whose ``.so`` import only the C shim, with ``torch>=`` floors.
- uses-dep 1.0 requiring kernel-dep, whose newest 2.0+cu13torch2.16 is a build for torch 2.16: the
  dependency is walked back to 1.0, and the plan says past what and why.

``build_today_world(root)`` returns the world (``serve`` it) and the compiled objects.
"""

from __future__ import annotations

import sys
from pathlib import Path

from support.abi_world import compile_objects
from support.framework_world import pypi_native
from support.stack_world import build_story_world
from support.wheels import build_wheel
from support.world import World, _Entry

PY = f"cp{sys.version_info.major}{sys.version_info.minor}"  # a venv of the interpreter running the tests installs these
X86 = "manylinux_2_28_x86_64"
TORCH = "2.15.0"
TORCH_REQUIRES = ["cuda-toolkit[cublas,cudart]==13.2.2; platform_system == 'Linux'", "filelock", "typing-extensions>=4.13.0"]
VERSION_PY = b"__version__ = '2.15.0+cu132'\ndebug = False\ncuda = '13.2'\ngit_version = 'd0f2af8b'\nhip = None\n"


def torch_files(objects: dict[str, bytes]) -> dict[str, bytes]:
    """PyPI's torch 2.15.0 in miniature: ``torch/version.py`` and two libraries of real symbols."""
    return {
        "torch/__init__.py": b"from .version import __version__\n",
        "torch/version.py": VERSION_PY,
        "torch/lib/libtorch_cpu.so": objects["libtorch_cpu.so"],
        "torch/lib/libc10.so": objects["libc10.so"],
    }


def build_today_world(root: Path) -> tuple[World, dict[str, bytes]]:
    objects = compile_objects(root / "objects")
    w = build_story_world(root / "www", hostile=False, fi_versions=("0.6.5",), py=PY)
    files = torch_files(objects)
    tag = f"{PY}-{PY}-{X86}"
    # PyPI's torch, where a user's `pip install torch` gets it (the tool never installs from here)
    wheel = build_wheel(w.root / "pypi-files", "torch", TORCH, tag, TORCH_REQUIRES, requires_python=">=3.10", files=files)
    for page in ("pypi-torch/torch/", "simple/torch/"):  # (a page of its own for pip; PyPI's torch page)
        w._add(page, "pypi", _Entry(wheel, "pypi-files/" + wheel.filename, sidecar=False, upload_time="2026-10-28T00:00:00Z"))
    # the PyTorch index's stable cu132 page: the same release with its label
    w.pytorch("torch", f"{TORCH}+cu132", tag=tag, channel="stable", variant="cu132", requires=TORCH_REQUIRES[1:], requires_python=">=3.10", files=files)
    w.pypi("cuda-toolkit", "13.2.2", requires=["nvidia-cuda-runtime==13.2.51; extra == 'cudart'", "nvidia-cublas==13.2.0.9; extra == 'cublas'"])
    w.pypi("nvidia-cuda-runtime", "13.2.51", tag=f"py3-none-{X86}")
    w.pypi("nvidia-cublas", "13.2.0.9", tag=f"py3-none-{X86}")
    w.pypi("typing-extensions", "4.13.2")
    native = "cp39-abi3-manylinux_2_28_x86_64"
    pypi_native(w, "sglang-kernel", "0.4.10", native, {"sgl_kernel/__init__.py": b"", "sgl_kernel/common_ops.abi3.so": objects["locked_ok.so"]})
    twins = {"torch_memory_saver/__init__.py": b""}
    for major, so in (("12", "stable12.so"), ("13", "stable.so")):  # the same code, one build per CUDA major
        twins[f"torch_memory_saver_hook_mode_torch_cu{major}.abi3.so"] = objects[so]
    pypi_native(w, "torch-memory-saver", "0.0.10", "cp39-abi3-manylinux2014_x86_64", twins)
    sglang = ["torch==2.14.1", "sglang-kernel==0.4.10", "flashinfer_python==0.6.5", "torch_memory_saver>=0.0.9.post1", "numpy"]
    pypi_native(w, "sglang", "0.5.23", native, {"sglang/__init__.py": b"", "sglang/srt/_kernels.abi3.so": objects["locked_ok.so"]}, sglang)
    w.pypi("sglang", "0.5.2", requires=["numpy"], upload_time="2025-09-01T00:00:00Z")
    vllm = ["torch==2.14.0", "flashinfer-python==0.6.5", "numpy"]
    pypi_native(w, "vllm", "0.33.0", native, {"vllm/__init__.py": b"", "vllm/_C.abi3.so": objects["stable.so"]}, vllm)
    pypi_native(w, "oldfw", "2.0", native, {"oldfw/__init__.py": b"", "oldfw/_C.abi3.so": objects["locked_bad.so"]}, ["torch==2.14.1", "numpy"])
    w.pypi("oldfw", "1.0", requires=["numpy"], upload_time="2025-01-01T00:00:00Z")
    # the rest of indexes/verify_today.py's rows: sgl-deep-ep (locked, runs), xformers (stable, CUDA 12 only)
    pypi_native(w, "sgl-deep-ep", "0.1.2.post1", native, {"deep_ep/__init__.py": b"", "deep_ep_cpp.abi3.so": objects["locked_ok.so"]})
    pypi_native(
        w, "xformers", "0.0.35", "py39-none-manylinux_2_28_x86_64", {"xformers/__init__.py": b"", "xformers/_C.so": objects["stable12.so"]}, ["torch>=2.10"]
    )
    # the torch family's PyPI releases: C-shim only, torch>= floors (their scans judge them)
    for name, version, floor in (
        ("torchvision", "0.29.2", "2.14.0"),
        ("torchaudio", "2.11.1", "2.11"),
        ("torchcodec", "0.17.0", "2.9"),
        ("torchao", "0.18.0", "2.9"),
    ):
        module = name.replace("-", "_")
        files = {f"{module}/__init__.py": b"", f"{module}/_stable.so": objects["stable.so"]}
        pypi_native(w, name, version, "py3-none-manylinux_2_28_x86_64", files, [f"torch>={floor}"])
    # a dependency whose newest release is a build for another torch series (its label says so)
    w.pypi("kernel-dep", "2.0+cu13torch2.16", tag=f"{PY}-{PY}-{X86}")
    w.pypi("kernel-dep", "1.0")
    w.pypi("uses-dep", "1.0", requires=["kernel-dep"])
    return w, objects


__all__ = ["PY", "TORCH", "build_today_world", "torch_files"]
