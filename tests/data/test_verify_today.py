"""Issue 50, item 5: ``indexes/verify_today.py`` takes its expected answers from binutils, not from
the tool. Offline: its oracle (``readelf -d``, ``nm -D``) on real compiled objects and torch stub
libraries, its comparisons, and one whole run over a loopback world (pip downloads the wheels from
it, the tool is asked without ``--cuda``)."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest
from support.abi_world import ASSERT_FAIL, TAG, _compile, compile_objects, have_cxx
from support.framework_world import pypi_native
from support.paths import REPO
from support.server import IndexServer
from support.today_world import build_today_world
from support.wheels import build_wheel

from resolve_gpu_stack.cli.app import main as cli

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


# libtorch_python in miniature: an operator of c10 (c10::operator<<: _ZN3c10ls...), a ref-qualified
# member function of torch (torch::Library::impl(...) &: _ZNR5torch...), a mangled THP function and
# an unmangled THP global, as sglang-kernel 0.4.10 and sgl-deep-ep import them from torch 2.15.0
_PYTHON_LIB = r"""
#include <ostream>
namespace c10 { enum class DeviceType : signed char { CPU = 0 };
std::ostream& operator<<(std::ostream& os, DeviceType) { return os; } }
namespace torch { struct Library { Library& impl(const char*) &; }; Library& Library::impl(const char*) & { return *this; } }
int THPVariable_Wrap(int x) { return x; }
extern "C" { void* THPVariableClass = 0; }
"""
_BINDER = r"""
#include <ostream>
namespace c10 { enum class DeviceType : signed char { CPU = 0 }; std::ostream& operator<<(std::ostream&, DeviceType); }
namespace torch { struct Library { Library& impl(const char*) &; }; }
int THPVariable_Wrap(int);
int THPVariable_Unwrap(int);
extern "C" { extern void* THPVariableClass; }
extern "C" int entry(std::ostream& os, torch::Library* lib) {
  os << c10::DeviceType::CPU; lib->impl("x"); return THPVariable_Wrap(1) + (THPVariableClass != 0) %s; }
"""
BINDER_IMPORTS = {"_ZN3c10lsERSoNS_10DeviceTypeE", "_ZNR5torch7Library4implEPKc"}


def test_binutils_read_operators_ref_qualified_members_and_thp_imports_as_the_tool_does(tmp_path: Path) -> None:
    """The live run's first count differed (sglang-kernel 0.4.10: binutils 116 imports, the tool
    122): the oracle's pattern missed torch's operators (``_ZN3c10ls...``), ref-qualified member
    functions (``_ZNR5torch...``) and the THP* bindings, which the tool counts. Compiled here, read by
    nm, judged against the stub's real exports, and compared member by member with ``inspect``."""
    lib = tmp_path / "lib"
    lib.mkdir()
    _compile(tmp_path, "libtorch_python.so", _PYTHON_LIB, soname="libtorch_python.so")
    shutil.copy(tmp_path / "libtorch_python.so", lib / "libtorch_python.so")
    ok = _compile(tmp_path, "binder_ok.so", _BINDER % "", links=("libtorch_python.so",))
    _compile(tmp_path, "binder_bad.so", _BINDER % "+ THPVariable_Unwrap(2)", links=("libtorch_python.so",))
    truth = V.member_truth(tmp_path / "binder_ok.so", "binder/_C.so")
    assert truth.links_torch and truth.cxx == BINDER_IMPORTS and truth.thp == {"_Z16THPVariable_Wrapi", "THPVariableClass"}
    exports = V.torch_exports(lib)
    runs = V.judge([truth], exports)
    assert (runs.kind, runs.runs, runs.why) == ("locked", True, "all 4 C++ imports are exported by torch 2.15.0")
    bad = V.judge([V.member_truth(tmp_path / "binder_bad.so", "binder/_C.so")], exports)
    assert (bad.kind, bad.runs) == ("locked", False) and "1 of 5" in bad.why and "_Z18THPVariable_Unwrapi" in bad.why
    # the tool's inspect lists the same member with the same counts (no torch in the target: the scan only)
    wheel = build_wheel(tmp_path / "whl", "binder", "1.0", TAG, files={"binder/__init__.py": b"", "binder/_C.so": ok})
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = cli(["inspect", str(wheel.path), "--python", "3.12", "--platform", "x86_64-manylinux_2_28", "--format", "json"])
    assert code == 0
    members = json.loads(out.getvalue())["members"]
    assert V.compare_members([truth], members) is None, members
    miscounted = [{**members[0], "cxx_imports": 2}]
    assert V.compare_members([truth], miscounted) == "inspect counts 2 C++ and 0 C-shim imports of torch in binder/_C.so, nm counts 4 and 0"
    assert "does not list binder/_C.so" in str(V.compare_members([truth], []))


def test_readelf_reads_the_cuda_major_from_every_toolkit_library_versioned_by_it(tmp_path: Path, objects: Path) -> None:
    """vllm 0.34.0's cumem_allocator needs libnvrtc.so.13 and no libcudart: CUDA 13, as the tool
    said and the live run's first oracle (libcudart only) did not. libcusparse.so.12 is in CUDA 13.2
    too: its soname does not tell the CUDA major, and is not read as one."""
    for lib in ("libnvrtc.so.13", "libcusparse.so.12"):
        _compile(objects, lib, 'extern "C" int nvrtcVersion(int* a) { return *a = 0; }\n', soname=lib)
    source = 'extern "C" int aoti_torch_get_device_index(void*, int*);\nextern "C" int nvrtcVersion(int*);\n'
    source += 'extern "C" int entry(void) { int d; return aoti_torch_get_device_index(0, &d) + nvrtcVersion(&d); }\n'
    so = _compile(objects, "allocator.so", source, links=("libtorch_cpu.so", "libnvrtc.so.13", "libcusparse.so.12"))
    truth = V.member_truth(objects / "allocator.so", "vllm/cumem_allocator.abi3.so")
    assert truth.links_torch and truth.cuda_majors == (13,) and not truth.cxx
    wheel = build_wheel(tmp_path, "alloc", "1.0", TAG, files={"vllm/cumem_allocator.abi3.so": so})
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert cli(["inspect", str(wheel.path), "--python", "3.12", "--platform", "x86_64-manylinux_2_28", "--format", "json"]) == 0
    report = json.loads(out.getvalue())
    assert V.compare_members([truth], report["members"]) is None and report["cuda_majors"] == [13]
    wrong = [{**report["members"][0], "cuda_majors": []}]
    assert V.compare_members([truth], wrong) == "inspect says vllm/cumem_allocator.abi3.so needs CUDA [], readelf says [13]"


def test_of_per_torch_builds_only_the_one_for_the_kept_torch_is_loaded(objects: Path) -> None:
    """torch-c-dlpack-ext 0.1.5 carries builds for torch 2.4 ... 2.9 and loads the one named for the
    running torch: on torch 2.15.0 none is loaded (the live run's first oracle read them all as
    locked and failing, where the tool, rightly, said it runs)."""
    members = [V.member_truth(objects / f"libaddon_torch{n}-cpu.so", f"builds_ext/libaddon_torch{n}-cpu.so") for n in ("27", "28", "29")]
    lib = objects / "lib"
    lib.mkdir(exist_ok=True)
    for name in ("libtorch_cpu.so", "libc10.so"):
        shutil.copy(objects / name, lib / name)
    exports = V.torch_exports(lib)
    assert ASSERT_FAIL not in exports  # what each build imports: the stub torch does not export it
    none = V.judge(members, exports)
    assert (none.kind, none.runs, none.why) == ("locked", True, "one build per torch (2.7, 2.8, 2.9), none for 2.15: none is loaded")
    on29 = V.judge(members, exports, torch="2.9.1")  # the build for 2.9 is loaded, and fails
    assert (on29.kind, on29.runs) == ("locked", False) and ASSERT_FAIL in on29.why
    assert V.built_for("torch_c_dlpack_ext/libtorch_c_dlpack_addon_torch29-cuda.so") == "2.9"
    assert V.built_for("pkg/libaddon_torch215-cpu.so") == "2.15" and V.built_for("vllm/_C.abi3.so") is None


def test_a_frameworks_own_pins_are_read_from_its_wheel_and_looked_up_by_pip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """vllm 0.34.0 pins flashinfer-python==0.7.3, which no index serves: resolve refuses it, rightly.
    The oracle reads the pins from the wheel's METADATA (markers for the target; extras and the torch
    family, whose pins the tool replaces, left out) and asks pip, on a loopback index, which exist."""
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    requires = [
        "torch==2.14.0",
        "torchaudio==2.11.0",
        "flashinfer-python==0.7.3",
        "Kernel_Dep==1.0",
        "numpy>=1",
        "humming-kernels[cu13]==0.1.19",
        "av==16.1.0; platform_machine == 'aarch64'",
        "flash-mla==9.9; extra == 'mla'",
        "tokenspeed-mla==2.0.3; platform_system == 'Linux'",
    ]
    wheel = build_wheel(tmp_path / "whl", "fw", "1.0", "py3-none-any", requires)
    pins = V.exact_pins(wheel.path, "3.12")
    assert pins == ["flashinfer-python==0.7.3", "kernel-dep==1.0", "humming-kernels==0.1.19", "tokenspeed-mla==2.0.3"]
    from support.world import World

    w = World(tmp_path / "www")
    for name, version in (("flashinfer-python", "0.7.2"), ("flashinfer-python", "0.7.4"), ("kernel-dep", "1.0"), ("humming-kernels", "0.1.19")):
        w.pypi(name, version)
    w.pypi("tokenspeed-mla", "2.0.3rc1")  # a pre-release is not the pinned release
    with IndexServer(w.root) as srv:
        w.write(srv.url)
        index = f"{srv.url}simple/"
        assert V.pip_versions("flashinfer-python", [index], "3.12") == ["0.7.4", "0.7.2"]
        assert V.pip_versions("no-such-package", [index], "3.12") == []
        missing = V.missing_pins(pins, [index], "3.12")
    assert missing == ["flashinfer-python==0.7.3", "tokenspeed-mla==2.0.3"]
    runs = V.Truth("stable", (13,), True, "C-shim imports only")
    err = "error: no plan satisfies every requirement on flashinfer-python\n  - fw 1.0 requires flashinfer_python==0.7.3, which no index serves; tokenspeed-mla==2.0.3 too\n"
    assert V.compare_resolve(runs, "fw", 1, err, missing) == (
        "agree",
        "refused, naming its pin flashinfer-python==0.7.3, tokenspeed-mla==2.0.3: pip finds no such version",
    )
    assert V.compare_resolve(runs, "fw", 0, "", missing)[0] == "disagree"  # planned with a pin no index has
    assert V.compare_resolve(runs, "fw", 1, "error: fw 1.0 requires flashinfer-python==0.7.30", missing)[0] == "disagree"  # names another pin
    assert V.compare_resolve(runs, "fw", 1, "error: fw cannot run", [])[0] == "disagree"  # no missing pin: it runs, so planned


def test_a_whole_run_on_a_loopback_world_agrees_without_cuda(tmp_path: Path, objects: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pip downloads the newest wheels from the world (its own client, this machine's pip
    configuration left out), binutils judge them against the world torch's real libraries, and
    the tool, asked without --cuda, agrees on every verdict."""
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    world, objs = build_today_world(tmp_path / "w")
    # a framework whose own pin (kernel-dep==3.0) no index serves: refused for that, and the oracle knows why
    native = "cp39-abi3-manylinux_2_28_x86_64"
    pypi_native(world, "pinfw", "1.0", native, {"pinfw/__init__.py": b"", "pinfw/_C.abi3.so": objs["stable.so"]}, ["torch==2.14.1", "kernel-dep==3.0"])
    lib = tmp_path / "torch-lib"
    lib.mkdir()
    for name in ("libtorch_cpu.so", "libc10.so"):
        (lib / name).write_bytes(objs[name])
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    rows = [
        V.Row("sglang-kernel"),
        V.Row("torch-memory-saver"),
        V.Row("oldfw", framework=True),
        V.Row("sglang", framework=True, version="0.5.23"),
        V.Row("pinfw", framework=True),
    ]
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
    [pinned] = [r for r in results if r["package"] == "pinfw 1.0" and r["door"] == "resolve"]
    assert pinned["why"] == "refused, naming its pin kernel-dep==3.0: pip finds no such version" and pinned["oracle"]["missing_pins"] == ["kernel-dep==3.0"]
    [inspected] = [r for r in results if r["package"] == "sglang-kernel 0.4.10" and r["door"] == "inspect"]
    assert inspected["oracle"] == inspected["tool"] == {"kind": "locked", "cuda_majors": [], "runs": True}


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
        ("_ZN3c10lsERSoNS_10DeviceTypeE", True),  # c10::operator<<(std::ostream&, c10::DeviceType)
        ("_ZNR5torch7Library5_implEPKcONS_11CppFunctionENS_17_RegisterOrVerifyE", True),  # torch::Library::_impl(...) &
        ("_ZThn8_N3c1011StorageImplD1Ev", True),  # a non-virtual thunk
        ("_ZGVZN3c1010TensorImpl4sizeEvE1s", True),  # the guard variable of a local static
        ("_ZTTN3c105ErrorE", True),  # a VTT
        ("_Z16THPVariable_WrapN2at10TensorBaseE", False),  # a THP binding (THP, below), in no namespace
    ],
)
def test_the_oracle_reads_torchs_namespaces_from_the_mangled_name(symbol: str, torch: bool) -> None:
    assert bool(V.CXX_TORCH.match(symbol)) is torch


def test_scan_records_writes_a_record_of_each_rows_wheel_as_the_kept_pypi_torch_routes_it(
    tmp_path: Path, objects: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``indexes/scan_records.py`` refreshes the shipped records from verify_today's rows: each wheel
    found on its index for PyPI's kept torch (torchvision: PyPI's, the family follows its torch),
    scanned by range requests and written under its sha256; a release with no wheel is said."""
    spec = importlib.util.spec_from_file_location("scan_records", REPO / "indexes" / "scan_records.py")
    assert spec is not None and spec.loader is not None
    records = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "verify_today", V)
    spec.loader.exec_module(records)
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    world, _ = build_today_world(tmp_path / "w")
    out = tmp_path / "records"
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        argv = ["--pypi", f"{srv.url}simple/", "--python", python, "--out", str(out), "--with", "sglang==0.5.23"]
        code = records.main([*argv, "sglang-kernel==0.4.10", "torchvision==0.29.2", "sglang-kernel==9.9"])
        printed = capsys.readouterr().out
        assert code == 0, printed
        before = {f.name: f.read_bytes() for f in out.glob("*.json")}
        assert records.main([*argv, "sglang-kernel==0.4.10"]) == 0  # again: the records of the same bytes are kept as they are
        again = capsys.readouterr().out
    assert "kept          sglang_kernel-0.4.10-cp39-abi3-manylinux_2_28_x86_64.whl: its record is there" in again, again
    assert "recorded      --with sglang==0.5.23: 0 new of " in again, again
    assert {f.name: f.read_bytes() for f in out.glob("*.json")} == before
    sha = {e.wheel.filename: e.wheel.sha256 for page in world.pages.values() for e in page}
    # --torch: PyPI's torch's exports record, the answer for the C++ imports of the records in --out
    from resolve_gpu_stack.env.confirm import wheel_exports
    from resolve_gpu_stack.net.scan.records import exports_record_name, parse_exports, parse_record

    with IndexServer(world.root) as srv:
        world.write(srv.url)
        assert records.main(["--pypi", f"{srv.url}simple/", "--python", python, "--out", str(out), "--torch", "torch==2.15.0"]) == 0
        said = capsys.readouterr().out
    [torch] = [e.wheel for e in world.pages["simple/torch/"] if e.wheel.filename.startswith("torch-2.15.0-")]
    assert f"recorded      {torch.filename}" in said, said
    imports = {
        s for f in out.glob("*.json") if not f.name.endswith(".exports.json") for m in parse_record(f.stem, f.read_bytes())[0].abi.members for s in m.cxx
    }  # type: ignore[union-attr]
    found, why = parse_exports(torch.sha256, (out / exports_record_name(torch.sha256)).read_bytes())
    exported = wheel_exports(torch.path, "2.15.0").symbols
    assert found is not None and imports and found.universe == imports and exported is not None, why
    assert found.symbols == imports & exported and found.universe == imports  # the rest: "missing"
    for filename in ("sglang_kernel-0.4.10-cp39-abi3-manylinux_2_28_x86_64.whl", "torchvision-0.29.2-py3-none-manylinux_2_28_x86_64.whl"):
        assert f"recorded      {filename}" in printed, printed
        written = json.loads((out / f"{sha[filename]}.json").read_text())
        assert written["filename"] == filename and written["sha256"] == sha[filename]
    assert "not recorded  sglang-kernel==9.9: sglang-kernel 9.9: no wheel for" in printed, printed  # no such release: said, nothing written
    assert len(list(out.glob("*.json"))) > 2
    assert "recorded      --with sglang==0.5.23" in printed
    # verify_today compares a shipped record with binutils' reading of the same wheel, member by member
    path = {e.wheel.filename: e.wheel.path for page in world.pages.values() for e in page}
    kernel = "sglang_kernel-0.4.10-cp39-abi3-manylinux_2_28_x86_64.whl"
    truth = V.wheel_truth(path[kernel], None, tmp_path)
    document = json.loads((out / f"{sha[kernel]}.json").read_text())
    assert V.compare_record(truth, document) == ("agree", "its 1 recorded members are binutils' reading")
    [member] = document["scan"]["members"]
    forged = {**document, "scan": {**document["scan"], "members": [{**member, "cxx": member["cxx"][1:]}]}}
    status, why = V.compare_record(truth, forged)
    assert status == "disagree" and "0 only recorded, 1 only read" in why, why
    assert V.compare_record(truth, {**document, "scan": {**document["scan"], "members": []}})[0] == "disagree"


def _scan_records_module(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("scan_records", REPO / "indexes" / "scan_records.py")
    assert spec is not None and spec.loader is not None
    records = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "verify_today", V)
    spec.loader.exec_module(records)
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    return records


def test_scan_records_reads_a_guess_whole_and_never_writes_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``evilguess``: a wheel nothing ties to torch whose ``.so`` (linking libtorch_cpu and libc10,
    importing a name the torch lacks) lies behind 6 MiB of padding: its range scan judges it by the
    library names in its first bytes ("none", ``read = names``: a guess). ``scan_records.py`` does
    not write that: it downloads the whole file, verified against its page's sha256, and writes the
    reading of every member from its start (torch, the member's imports). ``evilfake``'s page gives
    a sha256 its file does not have: its guess cannot be read whole, and nothing is written. With
    ``--guesses``, a records folder's schema-4 guesses are replaced by the same whole readings; the
    one whose file cannot be had is said and left as it is. A cold resolve's plan (``--with``) is
    read the same way."""
    from support.forgery import compile_forged, forged_wheel
    from support.wheels import BuiltWheel, metadata_text
    from support.world import _Entry

    from resolve_gpu_stack.model.abi import READ_NAMES, WheelAbi
    from resolve_gpu_stack.net.scan.classify import ScanRecord
    from resolve_gpu_stack.net.scan.records import parse_record, record_document

    records = _scan_records_module(monkeypatch)
    world, _ = build_today_world(tmp_path / "w")
    lib = compile_forged(tmp_path / "w" / "objects")
    tag = "cp39-abi3-manylinux_2_28_x86_64"
    wheels = {}
    for name in ("evilguess", "evilfake"):
        path, _ = forged_wheel(world.root / "files", lib, name=name, requires=(), tag=tag)
        data = path.read_bytes()
        sha = hashlib.sha256(data).hexdigest() if name == "evilguess" else "0f" * 32  # evilfake's page lies about its bytes
        wheels[name] = BuiltWheel(path=path, filename=path.name, sha256=sha, size=len(data), metadata=metadata_text(name, "1.0", ()))
        world._add(f"simple/{name}/", "pypi", _Entry(wheels[name], "files/" + path.name, sidecar=False, upload_time="2026-01-01T00:00:00Z"))
    out = tmp_path / "records"
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        argv = ["--pypi", f"{srv.url}simple/", "--python", python, "--out", str(out), "--with", "sglang==0.5.23"]
        assert records.main([*argv, "evilguess==1.0", "evilfake==1.0"]) == 0
        printed = capsys.readouterr().out
        guess, fake = wheels["evilguess"], wheels["evilfake"]
        written = json.loads((out / f"{guess.sha256}.json").read_text())
        scan = written["scan"]
        assert f"recorded      {guess.filename}: torch" in printed, printed
        assert scan["schema"] == 5 and "read" not in scan and scan["kind"] == "torch" and scan["bytes_read"] == guess.size, scan
        [member] = scan["members"]
        assert member["name"] == "evilguess/_C.so" and "libc10.so" in member["torch-libs"], member
        assert any("stand_in_missing" in s for s in member["cxx"]), member
        assert "not recorded  evilfake==1.0:" in printed and not (out / f"{fake.sha256}.json").exists(), printed
        for path in out.glob("*.json"):  # nothing written is a guess
            record, why = parse_record(path.name.removesuffix(".json"), path.read_bytes())
            assert record is not None and record.abi.read != READ_NAMES, (path.name, why)
        # a cold resolve's plan (--with): its guesses from names are read whole too, never written as guesses
        plans = tmp_path / "plans"
        argv = ["--pypi", f"{srv.url}simple/", "--python", python, "--out", str(plans), "--with", "evilguess", "--with", "evilfake"]
        assert records.main([*argv, "sglang-kernel==0.4.10"]) == 0
        printed = capsys.readouterr().out
        assert "recorded      --with evilguess: 1 new of 1 scans (1 of the plan's wheels; 1 of its 1 guesses from names read whole)" in printed, printed
        assert "recorded      --with evilfake: 0 new of 0 scans (0 of the plan's wheels; 0 of its 1 guesses from names read whole)" in printed, printed
        assert json.loads((plans / f"{guess.sha256}.json").read_text())["scan"] == scan
        assert not (plans / f"{fake.sha256}.json").exists()
        # --guesses: a folder's schema-4 guesses (as shipped before guesses were marked) read whole
        old = tmp_path / "old"
        old.mkdir()
        abi = WheelAbi(kind="none", why="1 of 1 shared object(s) not read to their dynamic section, and nothing ties it to torch")
        for wheel in (guess, fake):
            doc = record_document(wheel.sha256, wheel.filename, wheel.size, ScanRecord(abi=abi))
            doc["scan"]["schema"] = 4
            (old / f"{wheel.sha256}.json").write_text(json.dumps(doc))
        fake_before = (old / f"{fake.sha256}.json").read_bytes()
        assert records.main(["--pypi", f"{srv.url}simple/", "--python", python, "--out", str(old), "--guesses"]) == 0
        printed = capsys.readouterr().out
    assert "1 guesses replaced by whole readings, 1 left as they are" in printed, printed
    assert f"not recorded  {fake.filename}:" in printed and (old / f"{fake.sha256}.json").read_bytes() == fake_before
    replaced = json.loads((old / f"{guess.sha256}.json").read_text())
    assert replaced["scan"] == scan, replaced
    record, _ = parse_record(guess.sha256, (old / f"{guess.sha256}.json").read_bytes())
    assert record is not None and record.abi.kind == "torch" and record.abi.read != READ_NAMES
