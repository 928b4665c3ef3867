"""A small GPU-stack world and a project that locks it: shared by the check and pre-commit tests.

Every wheel a lock downloads carries a sha256 on its index page here (the torch nightlies are
installed, hence kept and not downloaded), so real pylock files can be written without the network.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from resolve_gpu_stack.cli.config import load_config, resolve_definitions, resolve_request
from resolve_gpu_stack.index.finder import Finder
from resolve_gpu_stack.net.http import HttpFetcher
from resolve_gpu_stack.net.settings import FetchSettings, TransportSettings
from resolve_gpu_stack.net.snapshot import RecordingFetcher
from support.server import IndexServer
from support.stack_world import resolve_with
from support.world import World

X86 = "manylinux_2_28_x86_64"
ARM = "manylinux_2_28_aarch64"
FI_REQUIRES = ["apache-tvm-ffi>=0.1.6,<0.2", "numpy", "torch", "packaging>=24.2"]


def build_lock_world(root: Path) -> World:
    w = World(root)
    for date in ("20260306", "20260307"):
        for arch in (X86, ARM):
            w.pytorch(
                "torch", f"2.12.0.dev{date}+cu130", tag=f"cp312-cp312-{arch}", requires=["filelock", "typing-extensions>=4.10.0"], requires_python=">=3.10"
            )
    for v in ("0.6.4", "0.6.5"):
        add_flashinfer(w, v)
    for name, v in (("apache-tvm-ffi", "0.1.7"), ("numpy", "2.2.0"), ("packaging", "25.0"), ("filelock", "3.17.0"), ("typing-extensions", "4.12.2")):
        w.pypi(name, v)
    return w


def add_flashinfer(w: World, version: str) -> None:
    w.pypi("flashinfer-python", version, requires=FI_REQUIRES, requires_python=">=3.10")
    w.pypi("flashinfer-cubin", version)
    for label in ("cu129", "cu130"):
        for arch in (X86, ARM):
            w.flashinfer("flashinfer-jit-cache", f"{version}+{label}", tag=f"cp39-abi3-{arch}", page=f"{label}/flashinfer-jit-cache")


@contextmanager
def serve_world(world: World) -> Iterator[tuple[dict[str, IndexServer], dict[str, str]]]:
    """The world served by three loopback servers, one per index (each on its own host:port, as
    the real indexes are); yields the servers and the index base URLs."""
    with ExitStack() as stack:
        servers = {name: stack.enter_context(IndexServer(world.root)) for name in ("pytorch", "flashinfer", "pypi")}
        world.write(servers["flashinfer"].url)  # FlashInfer pages link their wheels absolutely
        urls = {name: world.index_urls(srv.url)[name] for name, srv in servers.items()}
        yield servers, urls


def config_text(urls: dict[str, str], *, snapshot: str | None = None, x86_extra: str = "") -> str:
    """A pyproject.toml with two targets; ``urls`` are the loopback indexes. With a snapshot PyPI is
    left out, as a user would: the snapshot replays it under its placeholder base URL."""
    indexes = ", ".join(f'{k} = "{v}"' for k, v in urls.items() if not (snapshot and k == "pypi"))
    head = f'snapshot = "{snapshot}"\n' if snapshot else ""
    return textwrap.dedent(f"""\
        [project]
        name = "demo"
        version = "0"

        [tool.resolve-gpu-stack]
        {head}indexes = {{ {indexes} }}

        [tool.resolve-gpu-stack.defaults]
        python = "3.12"
        cuda = "cu130"

        [[tool.resolve-gpu-stack.target]]
        name = "x86_64-py312"
        installed = ["torch==2.12.0.dev20260307+cu130"]
        output = ["constraints/pylock.x86_64-py312.toml", "constraints/x86_64-py312.txt"]
        {x86_extra}
        [[tool.resolve-gpu-stack.target]]
        name = "aarch64-py312"
        platform = "aarch64-manylinux_2_28"
        installed = ["torch==2.12.0.dev20260306+cu130"]
        torch = "installed"
        output = ["constraints/pylock.aarch64-py312.toml"]
        """)


def record_snapshot(project: Path, destination: Path) -> None:
    """Record every page and METADATA file the project's targets read (the server must be up)."""
    config = load_config(project / "pyproject.toml")
    defs = resolve_definitions(config, {})
    bases = {n: d.url for n, d in defs.indexes.items()}
    recorder = RecordingFetcher(HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None), destination, bases)
    try:
        finder = Finder(recorder, defs)
        for target in config.targets:
            resolve_with(finder, defs, resolve_request(target))
    finally:
        recorder.close()
