"""``inspect`` on the real wheels of ../shared/reference/abi.md agrees with readelf and nm.

Each wheel is rebuilt from its recorded first bytes (tests/support/data/abi/<wheel>/: every ``.so`` member up
to the end of its ``.dynstr``, zeros after, at its real size) and inspected through the CLI as a
local file; its needed libraries, its C-shim and C++ torch import counts and its verdicts against a
kept cu130 nightly and a cu128 release are compared with what binutils recorded (facts.json)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from support.real_wheels import WHEELS, SparseWheel, fixture

from resolve_gpu_stack.cli.app import main
from resolve_gpu_stack.data.definitions import load_definitions
from resolve_gpu_stack.scan.abi import split_imports

RULES = load_definitions().abi
NO_INDEX = ["--index", "pytorch=http://127.0.0.1:9/whl/", "--index", "pypi=http://127.0.0.1:9/simple/", "--timeout", "2"]
# wheel -> (verdict on the cu130 nightly, verdict on torch 2.10.0+cu128): (abi kind, runs)
VERDICTS = {
    "xformers-0.0.35": (("stable", False), ("stable", True)),  # CUDA 12, shim only, torch>=2.10
    "vllm_gguf_plugin-0.0.5": (("stable", True), ("stable", False)),  # CUDA 13, shim only
    "torch_c_dlpack_ext-0.1.5": (("builds", True), ("builds", True)),  # builds 2.4-2.9, none for either torch
    # Tied to torch (name, METADATA): every member is read to its dynamic section, which the sparse
    # rebuild (first bytes, then a hole of zeros) does not have: unknown, never a guess from zeros.
    # (Before: CUDA 12 with no torch linked, and locked.) The live tests read the real wheels.
    "torch_memory_saver-0.0.9": (("unknown", False), ("unknown", False)),
    "sgl_kernel-0.3.21": (("unknown", False), ("unknown", False)),
}
TORCHES = ("2.12.0.dev20260307+cu130", "2.10.0+cu128")


def rebuilt(name: str, folder: Path) -> Path:
    """The wheel as a sparse file on disk: a stored zip of its members at their real sizes, each its
    recorded first bytes then a hole (sgl-kernel's members add up to 1.7 GB; the file takes kBs)."""
    wheel = SparseWheel(fixture(name))
    out = folder / f"{name}-py3-none-manylinux_2_28_x86_64.whl"
    with out.open("wb") as fh:
        for at, blob in wheel.pieces:
            fh.seek(at)
            fh.write(blob)
        fh.truncate(wheel.size)
    return out


@pytest.mark.parametrize("name", WHEELS)
def test_inspect_agrees_with_readelf_and_nm(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wheel = rebuilt(name, tmp_path)
    fx = fixture(name)
    for torch, (kind, runs) in zip(TORCHES, VERDICTS[name], strict=True):
        code = main(["inspect", str(wheel), "--python", "3.12", "--installed", f"torch=={torch}", *NO_INDEX, "--format", "json"])
        report = json.loads(capsys.readouterr().out)
        assert code == (0 if runs else 1), report["verdict"]
        assert (report["verdict"]["abi"], report["verdict"]["runs"]) == (kind, runs), (torch, report["verdict"])
    members = {m["name"]: m for m in report["members"]}
    assert set(members) == {m["name"] for m in fx.members}
    for fact in fx.members:
        got = members[fact["name"]]
        assert got["needed"] == [n for n in fact["needed"] if n.startswith("lib")], fact["name"]  # readelf -d NEEDED (ld-linux is not lib*)
        if got["torch_libraries"]:
            split = split_imports(fact["undefined"], RULES)  # nm -D --undefined-only
            assert (got["shim_imports"], got["cxx_imports"]) == (len(split.shim), len(split.locked)), fact["name"]


def test_inspect_names_the_wheel_at_a_url_with_a_query_as_on_disk(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The data's row for torch-c-dlpack-ext (no build loaded from torch 2.10 on) is keyed by the
    project name: a URL whose file name is followed by a query string gets it too."""
    from support.server import IndexServer

    wheel = rebuilt("torch_c_dlpack_ext-0.1.5", tmp_path)
    with zipfile.ZipFile(wheel, "a") as zf:  # a METADATA, which a wheel read by URL needs
        zf.writestr("torch_c_dlpack_ext-0.1.5.dist-info/METADATA", "Metadata-Version: 2.1\nName: torch-c-dlpack-ext\nVersion: 0.1.5\n")
    flags = ["--python", "3.12", "--installed", f"torch=={TORCHES[0]}", *NO_INDEX, "--cache-dir", str(tmp_path / "c"), "--format", "json"]
    notes = []
    with IndexServer(tmp_path) as srv:
        srv.seek_ranges = True
        for where in (str(wheel), f"{srv.url}{wheel.name}?token=x"):
            code = main(["inspect", where, *flags])
            report = json.loads(capsys.readouterr().out)
            assert code == 0 and report["kind"] == "torch", report
            notes.append(report["verdict"]["note"])
    assert "expected from torch 2.10 on" in notes[0] and notes[1] == notes[0]


def test_inspect_of_a_url_whose_server_ignores_range_downloads_nothing_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: the whole wheel was downloaded "to read its metadata", then the scan said it was not
    downloaded. Now neither reads it: unknown, saying the server ignored Range."""
    from support.server import IndexServer

    wheel = rebuilt("torch_c_dlpack_ext-0.1.5", tmp_path)
    flags = ["--python", "3.12", "--installed", f"torch=={TORCHES[0]}", *NO_INDEX, "--cache-dir", str(tmp_path / "c"), "--format", "json"]
    with IndexServer(tmp_path) as srv:
        srv.ignore_ranges = True
        code = main(["inspect", f"{srv.url}{wheel.name}", *flags])
        report = json.loads(capsys.readouterr().out)
        requests = list(srv.log)
    assert code == 1 and report["kind"] == "unknown" and "ignored Range" in json.dumps(report), report
    assert len(requests) == 1, requests  # the scan's first range, answered whole and left; no METADATA download after it
