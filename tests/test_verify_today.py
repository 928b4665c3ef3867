"""Issue 50, item 5: ``indexes/verify_today.py`` takes its expected answers from binutils, not from
the tool. Offline: its oracle (``readelf -d``, ``nm -D``) on real compiled objects and torch stub
libraries, its comparisons, and one whole run over a loopback world (pip downloads the wheels from
it, the tool is asked without ``--cuda``)."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest
from abi_world import compile_objects, have_cxx
from server import IndexServer
from today_world import build_today_world

REPO = Path(__file__).resolve().parents[1]
pytestmark = [
    pytest.mark.skipif(not have_cxx(), reason="needs a C++ compiler to build the shared objects"),
    pytest.mark.skipif(shutil.which("readelf") is None or shutil.which("nm") is None, reason="needs binutils (readelf, nm)"),
]


def verify() -> ModuleType:
    spec = importlib.util.spec_from_file_location("verify_today", REPO / "indexes" / "verify_today.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


V = verify()


@pytest.fixture(scope="module")
def objects(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("objects")
    compile_objects(folder)
    return folder


def test_binutils_read_what_each_member_links_and_imports(objects: Path) -> None:
    locked = V.member_truth(objects / "locked_ok.so", "locked_ok.so")
    assert locked.links_torch and locked.cxx and not locked.cuda_majors
    stable = V.member_truth(objects / "stable.so", "stable.so")
    assert stable.links_torch and not stable.cxx and stable.shim and stable.cuda_majors == (13,)
    cuda = V.member_truth(objects / "cuda_only.so", "cuda_only.so")
    assert not cuda.links_torch and cuda.cuda_majors == (12,) and not cuda.cxx


def test_the_oracle_judges_against_torchs_real_exports(objects: Path) -> None:
    lib = objects / "lib"
    lib.mkdir(exist_ok=True)
    for name in ("libtorch_cpu.so", "libc10.so"):
        shutil.copy(objects / name, lib / name)
    exports = V.torch_exports(lib)

    def truth(*names: str, with_exports: bool = True):  # type: ignore[no-untyped-def]
        return V.judge([V.member_truth(objects / n, n) for n in names], exports if with_exports else None)

    ok = truth("locked_ok.so")
    assert (ok.kind, ok.runs) == ("locked", True) and "exported by torch" in ok.why
    bad = truth("locked_bad.so")
    assert (bad.kind, bad.runs) == ("locked", False) and "not exported" in bad.why
    assert truth("locked_ok.so", with_exports=False).runs is None  # no torch libraries: unverified, said why
    assert truth("stable.so").runs is True and truth("stable12.so").runs is False  # CUDA 12 only, torch has 13
    twins = truth("stable12.so", "stable.so")  # one member per CUDA major: the CUDA 13 one decides
    assert (twins.kind, twins.cuda_majors, twins.runs) == ("stable", (12, 13), True)
    assert truth("cuda_only.so").kind is None


def test_the_comparisons(objects: Path) -> None:
    ok = V.Truth("locked", (), True, "all 2 C++ imports are exported")
    agree = {"cuda_majors": [], "verdict": {"abi": "locked", "runs": True}}
    assert V.compare_inspect(ok, agree)[0] == "agree"
    assert V.compare_inspect(ok, {"cuda_majors": [], "verdict": {"abi": "stable", "runs": True}})[0] == "disagree"
    assert V.compare_inspect(ok, {"cuda_majors": [13], "verdict": {"abi": "locked", "runs": True}})[0] == "disagree"
    assert V.compare_inspect(ok, {"cuda_majors": [], "verdict": {"abi": "locked", "runs": False, "refusal": "x"}})[0] == "disagree"
    assert V.compare_inspect(V.Truth("locked", (), None, "no libs"), agree) == ("unverified", "no libs")
    assert V.compare_resolve(ok, "sglang", 0, "")[0] == "agree"
    assert V.compare_resolve(V.Truth("locked", (), False, "missing"), "sglang", 0, "")[0] == "disagree"
    assert V.compare_resolve(V.Truth("locked", (), False, "missing"), "sglang", 1, "error: sglang 0.5.23 ...")[0] == "agree"


def test_a_whole_run_on_a_loopback_world_agrees_without_cuda(tmp_path: Path, objects: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pip downloads the newest wheels from the world (its own client, this machine's pip
    configuration left out), binutils judge them against the world torch's real libraries, and
    the tool, asked without --cuda, agrees on every verdict."""
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    world, objs = build_today_world(tmp_path / "w")
    lib = tmp_path / "torch-lib"
    lib.mkdir()
    for name in ("libtorch_cpu.so", "libc10.so"):
        (lib / name).write_bytes(objs[name])
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    rows = [V.Row("sglang-kernel"), V.Row("torch-memory-saver"), V.Row("oldfw", framework=True), V.Row("sglang", framework=True, version="0.5.23")]
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        pypi = f"{srv.url}simple/"
        work = tmp_path / "work"
        (work / "wheels").mkdir(parents=True)
        flags = [
            "--python",
            python,
            "--index",
            f"pypi={pypi}",
            *(x for n, u in world.index_urls(srv.url).items() if n != "pypi" for x in ("--index", f"{n}={u}")),
        ]
        flags += ["--cache-dir", str(work / "cache")]
        results = V.run_rows(rows, pypi, flags, V.torch_exports(lib), work, python=python)
    got = {(r["package"], r["door"]): r["status"] for r in results}
    assert all(s == "agree" for s in got.values()), results
    assert ("oldfw 2.0", "resolve") in got and ("sglang 0.5.23", "resolve") in got  # the newest oldfw: refused, naming it
    assert ("sglang-kernel 0.4.10", "inspect") in got and ("torch-memory-saver 0.0.10", "inspect") in got


@pytest.mark.parametrize(
    ("symbol", "torch"),
    [
        ("_ZN2at6TensorC1Ev", True),
        ("_ZNK3c1010TensorImpl5numelEv", True),
        ("_ZTVN3c105ErrorE", True),
        ("_ZN5torch8autograd4NodeD2Ev", True),
        ("_ZN8facebook10torchcodec12attentionEv", False),  # torchcodec's own namespace; "2at" inside a name
        ("_ZN10torchcodec3c10Ev", False),
        ("_ZNSt6vectorIiSaIiEED1Ev", False),
        ("aoti_torch_get_device_index", False),
    ],
)
def test_the_oracle_reads_torchs_namespaces_from_the_mangled_name(symbol: str, torch: bool) -> None:
    assert bool(V.CXX_TORCH.match(symbol)) is torch
