"""demangle: mangled C++ names written as c++filt writes them (the pairs in tests/data/abi/demangle.tsv
are every mangled name the five real wheels import, recorded with c++filt by record.py), and the
split of a member's imports by the [abi] rules of components.toml."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resolve_gpu_stack.data.definitions import load_definitions
from resolve_gpu_stack.index.abi import entity_identifier, split_imports
from resolve_gpu_stack.index.demangle import demangle

PAIRS = [line.split("\t") for line in (Path(__file__).resolve().parent / "data" / "abi" / "demangle.tsv").read_text().splitlines()]
RULES = load_definitions().abi


def test_every_recorded_name_demangles_as_cxxfilt_does() -> None:
    wrong = [(m, want, demangle(m)) for m, want in PAIRS if demangle(m) != want]
    assert len(PAIRS) > 400 and not wrong, wrong[:5]


@pytest.mark.parametrize(
    ("mangled", "want"),
    [
        ("_ZN1AcviEv", "A::operator int()"),
        ("_Z1fPFvvE", "f(void (*)())"),
        ("_Z1fRA3_i", "f(int (&) [3])"),
        ("_Z1fM1AFviE", "f(void (A::*)(int))"),
        ("_ZZ4mainENKUlvE_clEv", "main::{lambda()#1}::operator()() const"),
        ("_ZN12_GLOBAL__N_13fooEv", "(anonymous namespace)::foo()"),
        ("_Z3foov.isra.0.cold", "foo() [clone .isra.0] [clone .cold]"),
        ("_ZTv0_n24_N1AD1Ev", "virtual thunk to A::~A()"),
        ("_ZGVZ4mainE1x", "guard variable for main::x"),
        ("_Z1fIJidEEvDpT_", "void f<int, double>(int, double)"),
        ("_ZNKR1A1fEv", "A::f() const &"),
        ("_Z1fPKVi", "f(int volatile const*)"),
        ("_ZN1AltIiEEbv", "bool A::operator< <int>()"),
        ("_Z1fILin5EEvv", "void f<-5>()"),
        ("_Z1fPFPFivEvE", "f(int (*(*)())())"),
    ],
)
def test_the_forms_beyond_the_recorded_names(mangled: str, want: str) -> None:
    assert demangle(mangled) == want


@pytest.mark.parametrize("name", ["malloc", "aoti_torch_empty_strided", "_Z", "_ZN3c10", "_Z1fX1E", "_Z" + "P" * 5000 + "i", "_ZSt"])
def test_what_it_cannot_read_comes_back_unchanged(name: str) -> None:
    assert demangle(name) == name


def test_substitutions_cannot_blow_up_the_output() -> None:
    name = "_Z1f" + "".join(f"St4pairIS{'' if i == 0 else i - 1}_S{'' if i == 0 else i - 1}_E" for i in range(1, 30))
    assert demangle(name) in (name, demangle(name))  # it ends, whatever it gives
    assert len(demangle("_Z1fSt4pairIiiE" + "S_" * 2000)) < 100_000


@settings(max_examples=400, deadline=None)
@given(st.sampled_from([m for m, _ in PAIRS]), st.integers(0, 300), st.text(alphabet="_0123456789SNEIKRPTZCDLabcdefghijlmstvxy", max_size=12))
def test_any_mangled_text_gives_a_string_and_never_raises(base: str, cut: int, junk: str) -> None:
    for name in (base[:cut], base[:cut] + junk, "_Z" + junk, base.replace("E", junk, 1)):
        assert isinstance(demangle(name), str)


def test_imports_are_split_by_the_abi_rules() -> None:
    imports = [
        "aoti_torch_get_device_index",
        "torch_call_dispatcher",
        "malloc",
        "_ZN3c106detail14torchCheckFailEPKcS2_j",
        "_ZTIN3c105ErrorE",
        "_ZNK2at6Tensor5numelEv",
        "_ZN5torch8autograd4NodeD2Ev",
        "_ZN6caffe28TypeMeta14typeMetaDatasEv",
        "_Z16THPVariable_WrapRKN2at10TensorBaseE",
        "THPVariableClass",
        "_ZNSt6vectorIiSaIiEE9push_backERKi",
        "_ZN8pybind116detail11type_casterIN2at6TensorEvE4loadENS_6handleEb",
        "aoti_torch_get_device_index",
    ]
    split = split_imports(imports, RULES)
    assert split.shim == ("aoti_torch_get_device_index", "torch_call_dispatcher")
    assert split.cxx == tuple(sorted(imports[3:8]))
    assert split.python == ("THPVariableClass", "_Z16THPVariable_WrapRKN2at10TensorBaseE")
    assert split.locked == tuple(sorted(imports[3:10]))
    assert (entity_identifier("_ZThn8_N3c1010TensorImplD0Ev"), entity_identifier("_ZNSt6vectorIiE"), entity_identifier("free")) == ("c10", None, None)


@pytest.mark.parametrize(
    ("member", "build"),
    [
        ("torch_c_dlpack_ext/libtorch_c_dlpack_addon_torch29-cuda.so", "2.9"),
        ("x/libaddon_torch210-cpu.so", "2.10"),
        ("x/libaddon_torch27-rocm6.so", "2.7"),
        ("x/_C.abi3.so", None),
        ("x/libtorch29.so", None),
        ("libtorch_c_dlpack_addon_torch29-cuda.so/inner.so", None),
    ],
)
def test_member_builds(member: str, build: str | None) -> None:
    assert RULES.build_of(member) == build
