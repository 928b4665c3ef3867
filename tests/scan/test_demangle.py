"""demangle: mangled C++ names written by the C++ runtime's ``__cxa_demangle`` (every mangled name the
five real wheels import, tests/support/data/abi/demangle.tsv, is demangled), given back unchanged where it
cannot be; and the split of a member's imports by the [abi] rules of components.toml."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.paths import DATA

from resolve_gpu_stack.data.definitions import load_definitions
from resolve_gpu_stack.scan import demangle as demangle_module
from resolve_gpu_stack.scan.abi import entity_identifier, split_imports
from resolve_gpu_stack.scan.demangle import _runtime, demangle

PAIRS = [line.split("\t") for line in (DATA / "abi" / "demangle.tsv").read_text().splitlines()]
RULES = load_definitions().abi


needs_runtime = pytest.mark.skipif(_runtime() is None, reason="no C++ runtime with __cxa_demangle here")


@needs_runtime
def test_every_name_a_real_wheel_imports_is_demangled() -> None:
    left = [m for m, _ in PAIRS if demangle(m) == m or demangle(m).startswith("_Z")]
    assert len(PAIRS) > 400 and not left, left[:5]


@needs_runtime
@pytest.mark.parametrize(
    ("mangled", "want"),
    [
        ("_ZNK2at6Tensor5numelEv", "at::Tensor::numel() const"),
        ("_ZN3c106detail14torchCheckFailEPKcS2_j", "c10::detail::torchCheckFail(char const*, char const*, unsigned int)"),
        ("_ZZ4mainENKUlvE_clEv", "main::{lambda()#1}::operator()() const"),
        ("_Z3foov.isra.0.cold", "foo() [clone .isra.0] [clone .cold]"),
        ("_ZTv0_n24_N1AD1Ev", "virtual thunk to A::~A()"),
    ],
)
def test_names_are_written_as_the_cpp_runtime_writes_them(mangled: str, want: str) -> None:
    assert demangle(mangled) == want


@pytest.mark.parametrize("name", ["malloc", "aoti_torch_empty_strided", "_Z", "_ZN3c10", "_Z1fX1E", "_Z" + "P" * 5000 + "i", "_ZSt", "i", "_Z" + "x" * 20000])
def test_what_it_cannot_read_comes_back_unchanged(name: str) -> None:
    assert demangle(name) == name


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([m for m, _ in PAIRS]), st.integers(0, 300), st.text(max_size=12))
def test_any_text_gives_a_string_and_never_raises(base: str, cut: int, junk: str) -> None:
    for name in (base[:cut], base[:cut] + junk, "_Z" + junk, base.replace("E", junk, 1)):
        assert isinstance(demangle(name), str)


def test_without_a_cpp_runtime_the_name_comes_back_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demangle_module, "RUNTIMES", ("libno-such-runtime.so",))
    assert demangle("_ZNK2at6Tensor5numelEv") == "_ZNK2at6Tensor5numelEv"


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
