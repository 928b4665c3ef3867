"""A serving framework on the story world: sglang pinning torch, torchaudio and FlashInfer exactly,
a compiled companion whose ``.so`` links libtorch (METADATA without torch, like sgl-kernel), a
native wheel needing only libcudart, a vLLM-like wheel pinning torch and linking libtorch, and a
FlashInfer release with the ``cu13`` and ``b12x`` extras. The ``.so`` files are real ELF objects
(``elfbuild``), and the test classifier reads the served wheels with ``wheelscan``."""

from __future__ import annotations

import threading
from pathlib import Path
from urllib.parse import urlsplit

from resolve_gpu_stack.data.definitions import load_definitions
from resolve_gpu_stack.model import IndexFile
from resolve_gpu_stack.model.abi import WheelAbi
from resolve_gpu_stack.scan.wheelscan import scan_wheel
from support.elfbuild import compile_extension, torch_stubs
from support.stack_world import ABI3, ARM, FI_REQUIRES, X86, build_story_world
from support.wheels import build_wheel
from support.world import World, _Entry

SGLANG_REQUIRES = [
    "torch==2.9.1",
    "torchaudio==2.9.1",
    "torchvision",
    "flashinfer_python==0.6.3",
    "flashinfer_cubin==0.6.3",
    "sgl-kernel==0.3.21",
    "cuda-helper>=1.0",
    "numpy",
]
FI_EXTRAS = [
    "nvidia-cutlass-dsl[cu13]>=4.4.2; extra == 'cu13'",
    "torch>=2.12.0; extra == 'b12x'",
    "nvidia-cutlass-dsl==4.7.1; extra == 'b12x'",
]


def pypi_native(w: World, name: str, version: str, tag: str, files: dict[str, bytes], requires: list[str] | tuple[str, ...] = ()) -> None:
    """A PyPI wheel carrying ``files`` (shared objects)."""
    wheel = build_wheel(w.root / "files", name, version, tag, requires, files=files)
    w._add(f"simple/{name}/", "pypi", _Entry(wheel, "files/" + wheel.filename, sidecar=False, upload_time="2026-01-01T00:00:00Z"))


def build_framework_world(root: Path, *, py: str = "cp312") -> World:
    """``py``: the CPython tag of the compiled wheels (see ``build_story_world``)."""
    w = build_story_world(root / "www", fi_versions=("0.6.3", "0.6.4"), py=py)
    # FlashInfer 0.6.5 with extras: cu13 adds a package, b12x a torch floor a nightly fails
    w.pypi("flashinfer-python", "0.6.5", requires=[*FI_REQUIRES, *FI_EXTRAS], requires_python=">=3.10")
    w.pypi("flashinfer-cubin", "0.6.5")
    for label in ("cu128", "cu129", "cu130"):
        for arch in (X86, ARM):
            w.flashinfer("flashinfer-jit-cache", f"0.6.5+{label}", tag=f"{ABI3}-{arch}", page=f"{label}/flashinfer-jit-cache")
    w.pypi("nvidia-cutlass-dsl", "4.7.1")
    w.pypi("nvidia-cutlass-dsl", "4.8.0", requires=["nvidia-cutlass-dsl-libs-cu13==4.8.0; extra == 'cu13'"])
    w.pypi("nvidia-cutlass-dsl-libs-cu13", "4.8.0")
    # torchaudio nightlies on the PyTorch index, each pinned to one torch nightly
    for date, pin in (("20260307", "20260307"), ("20260306", "20260306")):
        w.pytorch("torchaudio", f"2.11.0.dev{date}+cu130", tag=f"{py}-{py}-{X86}", requires=[f"torch==2.12.0.dev{pin}"])

    build = root / "elf"
    libs = torch_stubs(build / "libs")
    # version-locked, as sgl-kernel and vLLM's _C are: C++ imports of c10:: and at:: (the story's kept
    # torch is a stand-in without libraries, so its exports cannot be read: such a wheel is refused)
    torch_so = compile_extension(build, "common_ops.abi3.so", libs, calls=("cxx_check", "cxx_numel"))
    cuda_so = compile_extension(build, "_helper.so", libs, calls=("cudart",), links=("libcudart.so.13",))  # torch's CUDA major
    pypi_native(w, "sgl-kernel", "0.3.21", "cp310-abi3-manylinux2014_x86_64", {"sgl_kernel/__init__.py": b"", "sgl_kernel/common_ops.abi3.so": torch_so})
    pypi_native(w, "cuda-helper", "1.0", f"{py}-{py}-manylinux_2_28_x86_64", {"cuda_helper/__init__.py": b"", "cuda_helper/_helper.so": cuda_so})
    pypi_native(
        w,
        "vllm",
        "0.11.1",
        "cp38-abi3-manylinux_2_28_x86_64",
        {"vllm/__init__.py": b"", "vllm/_C.abi3.so": torch_so},
        requires=["torch==2.9.0", "flashinfer-python==0.6.4", "numpy"],
    )

    w.pypi("sglang", "0.5.2", requires=["numpy"])  # before the pins
    w.pypi("sglang", "0.5.9", requires=SGLANG_REQUIRES)
    w.pypi("fwcu13", "1.0", requires=["torch==2.11.0", "flashinfer_python[cu13,b12x]==0.6.5"])
    return w


class FileClassifier:
    """The classifier the net layer will provide, over the wheels on disk: ``scan_wheel`` reading
    the served file's bytes by range, counting the wheels it was asked about."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.asked: list[str] = []
        self.bytes_read = 0
        self._lock = threading.Lock()

    def __call__(self, file: IndexFile) -> WheelAbi:
        data = (self.root / urlsplit(file.url).path.lstrip("/")).read_bytes()
        scan = scan_wheel(lambda start, end: data[start:end], len(data))
        with self._lock:
            self.asked.append(file.filename)
            self.bytes_read += scan.bytes_read
        return scan.abi(_RULES)


_RULES = load_definitions().abi
