"""Issue 50, item 3: FlashInfer as it is published today.

On PyPI flashinfer-cubin stops at 0.6.13 while flashinfer-python goes on (0.6.14 ... 0.7.4), and
flashinfer-python has extras per CUDA major (``cu12``, ``cu13``: its nvidia-cutlass-dsl build) from
0.6.8rc1 (docs/reference/flashinfer-layout.md). A plan asks for the extra of its torch's CUDA major
(components.toml ``[flashinfer.extras]``); with FlashInfer's host reachable the cubin is aligned as
before (exactly python's version, from FlashInfer's index past 0.6.13); without it the plan says
what is missing.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.version import Version
from support.abi_world import have_cxx
from support.server import IndexServer
from support.today_world import TORCH, build_today_world
from support.world import World

from resolve_gpu_stack.cli.app import main
from resolve_gpu_stack.data.definitions import load_definitions

pytestmark = pytest.mark.skipif(not have_cxx(), reason="needs a C++ compiler to build the shared objects")

NEW = "0.7.4"
FI_REQUIRES = [
    "apache-tvm-ffi<0.2,>=0.1.6",
    "numpy",
    "torch",
    "nvidia-cutlass-dsl>=4.8.0",
    'nvidia-cutlass-dsl>=4.8.0; extra == "cu12"',
    'nvidia-cutlass-dsl[cu13]>=4.8.0; extra == "cu13"',
    'torch>=2.12.0; extra == "b12x"',
]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[World, IndexServer, int]]:
    root = tmp_path_factory.mktemp("fi-today")
    w, _ = build_today_world(root)
    w.pypi("flashinfer-python", NEW, requires=FI_REQUIRES, requires_python=">=3.10")  # PyPI: python goes on, the cubin does not
    w.flashinfer("flashinfer-cubin", NEW, tag="py3-none-any", page="flashinfer-cubin")  # past 0.6.13: FlashInfer's index only
    for label in ("cu129", "cu130"):
        w.flashinfer("flashinfer-jit-cache", f"{NEW}+{label}", tag="cp39-abi3-manylinux_2_28_x86_64", page=f"{label}/flashinfer-jit-cache")
    w.pypi("nvidia-cutlass-dsl", "4.8.0", requires=['nvidia-cutlass-dsl-libs-cu13==4.8.0; extra == "cu13"', "nvidia-cutlass-dsl-libs-base==4.8.0"])
    for lib in ("base", "cu13"):
        w.pypi(f"nvidia-cutlass-dsl-libs-{lib}", "4.8.0", tag="py3-none-manylinux_2_28_x86_64")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        refused = s.getsockname()[1]
    with IndexServer(w.root) as srv:
        w.write(srv.url)
        yield w, srv, refused


def argv(w: World, srv: IndexServer, tmp_path: Path, *, down: int | None = None) -> list[str]:
    urls = w.index_urls(srv.url)
    if down is not None:
        urls["flashinfer"] = f"http://127.0.0.1:{down}/"
    return [
        "resolve",
        "--python",
        "3.11",
        "--platform",
        "x86_64-manylinux_2_28",
        "--installed",
        f"torch=={TORCH}",
        "--torch",
        "installed",
        *(x for n, u in urls.items() for x in ("--index", f"{n}={u}")),
        "--cache-dir",
        str(tmp_path / "c"),
        "--format",
        "json",
    ]


def test_the_extras_for_each_cuda_major_are_data() -> None:
    fi = load_definitions().flashinfer
    assert [e.name for e in fi.extras_for(13, "pypi")] == ["cu13"] and [e.name for e in fi.extras_for(12, "pypi")] == ["cu12"]
    assert fi.extras_for(11, "pypi") == () and fi.extras_for(None, "pypi") == () and fi.extras_for(13, "pytorch") == ()
    assert all(e.since == Version("0.6.8rc1") for e in fi.extras)


def test_pypis_torch_gets_the_extra_of_its_cuda_major_and_the_cubin_aligned_from_flashinfers_index(world, capsys, tmp_path) -> None:
    w, srv, _ = world
    code = main(argv(w, srv, tmp_path))
    out, err = capsys.readouterr()
    assert code == 0, err
    got = {p["name"]: p["version"] for p in json.loads(out)["packages"]}
    assert got["flashinfer-python"] == NEW and got["flashinfer-cubin"] == NEW and got["flashinfer-jit-cache"] == f"{NEW}+cu130", got
    # the cu13 extra of torch's CUDA 13.2: nvidia-cutlass-dsl[cu13], never the b12x extra's torch floor
    assert got["nvidia-cutlass-dsl"] == "4.8.0" and got["nvidia-cutlass-dsl-libs-cu13"] == "4.8.0", got


def test_without_flashinfers_host_the_plan_says_what_is_missing(world, capsys, caplog, tmp_path) -> None:
    w, srv, refused = world
    code = main(argv(w, srv, tmp_path, down=refused))
    out, err = capsys.readouterr()
    assert code == 0, err
    plan = json.loads(out)
    got = {p["name"]: p["version"] for p in plan["packages"]}
    assert got["flashinfer-python"] == NEW and got["nvidia-cutlass-dsl-libs-cu13"] == "4.8.0", got
    assert "flashinfer-cubin" not in got and "flashinfer-jit-cache" not in got
    [note] = [n for n in plan["notes"] if "cannot be read" in n]
    assert "planned without flashinfer-cubin, flashinfer-jit-cache" in note and "compiles its kernels on first use" in note
