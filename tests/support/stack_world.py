"""A small world of the GPU stack on a loopback server: torch nightlies with their triton pins,
FlashInfer's three components across CUDA labels, a PyPI with the closure, and hostile extras."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from resolve_gpu_stack.cli.assemble import resolve_parts
from resolve_gpu_stack.data.definitions import Definitions, load_definitions
from resolve_gpu_stack.index.finder import Finder
from resolve_gpu_stack.model import LockPlan
from resolve_gpu_stack.model.request import ResolveRequest
from resolve_gpu_stack.net.http import HttpFetcher
from resolve_gpu_stack.net.settings import FetchSettings, TransportSettings
from support.server import IndexServer
from support.world import World

X86 = "manylinux_2_28_x86_64"
ARM = "manylinux_2_28_aarch64"
ABI3 = "cp39-abi3"

TORCH_REQUIRES = [
    "filelock",
    "typing-extensions>=4.10.0",
    "cuda-toolkit[cudart,nvrtc]==13.0.2; platform_system == 'Linux'",
    "triton==3.7.0+git{hash}; platform_system == 'Linux'",
    "optree>=0.13.0; extra == 'optree'",
]
FI_REQUIRES = [
    "apache-tvm-ffi!=0.1.8,!=0.1.8.post0,<0.2,>=0.1.6",
    "numpy",
    "torch",
    "packaging>=24.2",
]


def torch_nightly(w: World, date: str, *, arch: str = X86, py: str = "cp312", cuda: str = "cu130", triton_hash: str = "9c288bc5") -> None:
    v = f"2.12.0.dev{date}+{cuda}"
    w.pytorch("torch", v, tag=f"{py}-{py}-{arch}", variant=cuda, requires=[r.format(hash=triton_hash) for r in TORCH_REQUIRES], requires_python=">=3.10")


def build_story_world(root: Path, *, cuda: str = "cu130", hostile: bool = True, fi_versions: tuple[str, ...] = ("0.6.4", "0.6.5"), py: str = "cp312") -> World:
    """``py``: the CPython tag of the compiled wheels (cp312; the interpreter running the tests
    for worlds a real venv installs from)."""
    w = World(root)
    for date in ("20260305", "20260306", "20260307"):
        torch_nightly(w, date, cuda=cuda, py=py)
        if date != "20260307":  # date skew: no aarch64 build on the newest date
            torch_nightly(w, date, arch=ARM, cuda=cuda, py=py)
    for arch in (X86, ARM):
        w.pytorch("triton", "3.7.0+git9c288bc5", tag=f"{py}-{py}-{arch}", variant=cuda, at_root=True)
    # torchvision nightlies pin torch==<date> without the local label, often the previous day
    w.pytorch("torchvision", f"0.27.0.dev20260307+{cuda}", tag=f"{py}-{py}-{X86}", variant=cuda, requires=["numpy", "torch==2.12.0.dev20260306"])
    w.pytorch("torchvision", f"0.27.0.dev20260306+{cuda}", tag=f"{py}-{py}-{X86}", variant=cuda, requires=["numpy", "torch==2.12.0.dev20260307"])
    w.pytorch("torchvision", f"0.27.0.dev20260305+{cuda}", tag=f"{py}-{py}-{X86}", variant=cuda, requires=["numpy", "torch==2.12.0.dev20260305"])
    # stable torch, lower than any nightly
    w.pytorch("torch", f"2.10.0+{cuda}", tag=f"{py}-{py}-{X86}", channel="stable", variant=cuda, requires=["filelock"])

    for v in fi_versions:
        w.pypi("flashinfer-python", v, requires=FI_REQUIRES, requires_python=">=3.10")
        w.pypi("flashinfer-cubin", v)
        for label in ("cu128", "cu129", "cu130"):
            for arch in (X86, ARM):
                w.flashinfer("flashinfer-jit-cache", f"{v}+{label}", tag=f"{ABI3}-{arch}", page=f"{label}/flashinfer-jit-cache")
    # an AOT wheel of the torch-ABI era, on a legacy page for another torch
    w.flashinfer("flashinfer-python", "0.2.5+cu124torch2.5", tag="cp38-abi3-linux_x86_64", page="cu124/torch2.5/flashinfer-python", requires=["torch==2.5.*"])

    for v in ("0.1.6", "0.1.7", "0.1.8", "0.1.8.post0", "0.2.0"):
        w.pypi("apache-tvm-ffi", v)
    for name, v in (
        ("numpy", "2.2.0"),
        ("numpy", "2.1.0"),
        ("packaging", "25.0"),
        ("filelock", "3.17.0"),
        ("typing-extensions", "4.12.2"),
        ("optree", "0.14.0"),
    ):
        w.pypi(name, v)
    w.pypi("cuda-toolkit", "13.0.2", requires=["nvidia-cuda-runtime==13.0.96; extra == 'cudart'", "nvidia-cuda-nvrtc==13.0.88; extra == 'nvrtc'"])
    w.pypi("cuda-toolkit", "13.1.0")
    w.pypi("nvidia-cuda-runtime", "13.0.96", tag=f"py3-none-{X86}")
    w.pypi("nvidia-cuda-runtime", "13.0.96", tag=f"py3-none-{ARM}")
    w.pypi("nvidia-cuda-nvrtc", "13.0.88", tag=f"py3-none-{X86}")
    w.pypi("nvidia-cuda-nvrtc", "13.0.88", tag=f"py3-none-{ARM}")
    w.pypi("numpy", "3.0.0", requires_python=">=3.14")  # newer, but not for Python 3.12
    w.pypi("numpy", "2.3.0", yanked="broken build")

    if hostile:  # a PyPI that offers higher versions of what belongs to other indexes
        for arch in (X86, ARM):
            w.pypi("torch", "99.0.0", tag=f"{py}-{py}-{arch}")
            w.pypi("triton", "99.0.0", tag=f"{py}-{py}-{arch}")
            w.pypi("pytorch-triton", "99.0.0", tag=f"{py}-{py}-{arch}")
            w.pypi("flashinfer-jit-cache", "9.9.9+cu130", tag=f"{ABI3}-{arch}")
        w.pypi("torchtriton", "99.0.0")
    # the per-torch FlashInfer pages for torch 2.12 do not exist: the server answers 404
    return w


def resolve_with(finder: Finder, defs: Definitions, request: ResolveRequest, *, store=None) -> LockPlan:
    """``request`` resolved as a command resolves it: through the one assembly of a resolve's parts
    (``cli/assemble.py``) around ``finder`` and its fetcher, keeping plans in ``store`` when given."""
    return resolve_parts(defs, finder.fetcher, finder=finder, store=store).resolve(request)


@contextmanager
def serve(world: World) -> Iterator[tuple[IndexServer, Definitions, Finder]]:
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        defs = load_definitions().with_index_urls(world.index_urls(srv.url))
        fetcher = HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None)
        try:
            yield srv, defs, Finder(fetcher, defs)
        finally:
            fetcher.close()
