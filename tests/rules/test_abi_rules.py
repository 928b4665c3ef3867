"""The ABI judgement (``rules/abi.py``): a wheel's imports against one torch. Pure, table-driven."""

from __future__ import annotations

import pytest
from packaging.version import Version

from resolve_gpu_stack.model.abi import AbiKind, AbiVerdict, MemberAbi, WheelAbi
from resolve_gpu_stack.rules.abi import AbiPolicy, AbiTorch, TorchExports, judge, recorded_verdict_fails, requires_floor

NIGHTLY = Version("2.12.0.dev20260307+cu130")
POLICY = AbiPolicy(
    stable_since="2.10",
    loads_none=lambda name, version, torch: "torch has DLPack exchange built in" if name == "dlpack-ext" and torch.release >= (2, 10) else None,
    demangle=lambda s: {"_ZN3c106detail14torchCheckFailEPKcS2_jRKSs": "c10::detail::torchCheckFail(...)"}.get(s, s),
)
FAIL = "_ZN3c106detail14torchCheckFailEPKcS2_jRKSs"
EMPTY = "_ZN2at4_ops5empty4callEv"


def exports_of(*names: str, version: Version = NIGHTLY) -> TorchExports:
    return TorchExports(version=str(version), symbols=frozenset(names), source="test")


def torch(version: Version = NIGHTLY, cuda: int | None = 13, exports: TorchExports | None = None, asked: list[str] | None = None) -> AbiTorch:
    def read() -> TorchExports:
        if asked is not None:
            asked.append("exports")
        return exports if exports is not None else TorchExports(version=str(version), symbols=None, source="not read in this test")

    return AbiTorch(version=version, cuda_major=cuda, exports=read)


def member(
    name: str = "pkg/_C.so",
    *,
    libs: tuple[str, ...] = ("libtorch_cpu.so", "libc10.so"),
    cuda: tuple[int, ...] = (13,),
    shim: int = 0,
    cxx: tuple[str, ...] = (),
    build: str | None = None,
) -> MemberAbi:
    return MemberAbi(name=name, torch_libs=libs, cuda_majors=cuda, shim=shim, cxx=cxx, build=build)


def wheel(*members: MemberAbi) -> WheelAbi:
    return WheelAbi(kind="torch", why="test", members=members, cuda_majors=tuple(sorted({v for m in members for v in m.cuda_majors})))


def test_a_wheel_without_torch_or_cuda_runs_anywhere() -> None:
    v = judge("p", WheelAbi(kind="none", why="no shared objects"), torch(), POLICY)
    assert v.kind is None and v.runs


@pytest.mark.parametrize(("majors", "cuda", "runs"), [((13,), 13, True), ((12,), 13, False), ((12, 13), 13, False), ((12,), None, True)])
def test_a_cuda_only_wheel_must_need_torchs_cuda_major(majors: tuple[int, ...], cuda: int | None, runs: bool) -> None:
    v = judge("torch-memory-saver", WheelAbi(kind="cuda", why="libcudart", cuda_majors=majors), torch(cuda=cuda), POLICY)
    assert v.runs is runs and v.cuda_majors == majors
    if not runs:
        assert "CUDA 12" in (v.refusal or "") and "CUDA 13" in (v.refusal or "")


def test_a_stable_abi_wheel_runs_on_any_torch_at_or_above_its_floor_without_reading_exports() -> None:
    asked: list[str] = []
    v = judge("xformers", wheel(member(shim=70)), torch(asked=asked), POLICY, requires_floor="2.10")
    assert (v.kind, v.floor, v.runs, v.against) == (AbiKind.STABLE, "2.10", True, str(NIGHTLY))
    assert asked == []  # a stable wheel never needs the torch's exports


@pytest.mark.parametrize(
    ("torch_version", "floor", "runs"),
    [
        ("2.12.0.dev20260307+cu130", None, True),
        ("2.10.0+cu130", None, True),
        ("2.10.0.dev20251001+cu130", None, True),  # the 2.10 series: the floor compares releases, not dev builds
        ("2.9.1+cu130", None, False),  # before the stable ABI: the data's floor applies even when the wheel says torch>=2.9
        ("2.11.0+cu130", "2.12", False),  # the wheel's own torch>= is above the data's floor
    ],
)
def test_the_stable_floor_is_the_higher_of_the_data_and_the_wheels_requirement(torch_version: str, floor: str | None, runs: bool) -> None:
    v = judge("p", wheel(member(shim=3)), torch(Version(torch_version)), POLICY, requires_floor=floor)
    assert v.runs is runs, v
    if not runs:
        assert "stable ABI" in (v.refusal or "")


def test_a_stable_wheel_needing_cuda_12_is_refused_on_a_cuda_13_torch() -> None:
    v = judge("xformers", wheel(member(shim=70, cuda=(12,))), torch(), POLICY, requires_floor="2.10")
    assert v.kind is AbiKind.STABLE and not v.runs and "CUDA 12" in (v.refusal or "") and "CUDA 13" in (v.refusal or "")


def test_a_locked_wheel_whose_imports_torch_exports_runs_with_a_note() -> None:
    v = judge("sgl-kernel", wheel(member(cxx=(EMPTY, FAIL))), torch(exports=exports_of(EMPTY, FAIL, "_ZN3c104Half")), POLICY)
    assert v.kind is AbiKind.LOCKED and v.runs
    assert v.note is not None and "layouts are not checked" in v.note and "doctor" in v.note


def test_a_locked_wheel_missing_a_symbol_is_refused_naming_it_demangled() -> None:
    v = judge("sgl-kernel", wheel(member(cxx=(EMPTY, FAIL))), torch(exports=exports_of(EMPTY)), POLICY)
    assert not v.runs and "`c10::detail::torchCheckFail(...)`" in (v.refusal or "") and "does not export" in (v.refusal or "")
    assert EMPTY not in (v.refusal or "")


def test_a_refusal_names_at_most_three_symbols() -> None:
    names = tuple(f"_ZN2at3fn{i}Ev" for i in range(7))
    v = judge("p", wheel(member(cxx=names)), torch(exports=exports_of()), POLICY)
    assert (v.refusal or "").count("`") == 6 and "and 4 more" in (v.refusal or "")


def test_a_locked_wheel_is_refused_when_the_exports_cannot_be_read() -> None:
    unread = TorchExports(version=str(NIGHTLY), symbols=None, source="the exports of torch-2.12.whl are not in the snapshot")
    v = judge("p", wheel(member(cxx=(FAIL,))), torch(exports=unread), POLICY)
    assert not v.runs and "not in the snapshot" in (v.refusal or "") and "cannot be shown to run" in (v.refusal or "")


def test_a_locked_wheel_labelled_for_another_torch_series_is_refused_even_when_symbols_match() -> None:
    v = judge("p", wheel(member(cxx=(FAIL,))), torch(exports=exports_of(FAIL)), POLICY, declared_series="2.9")
    assert not v.runs and "built for torch 2.9" in (v.refusal or "")


def builds_wheel(*series: str, extra: MemberAbi | None = None) -> WheelAbi:
    members = [member(f"ext/addon_torch{s.replace('.', '')}-cuda.so", cxx=(FAIL,), build=s) for s in series]
    return wheel(*members, *((extra,) if extra else ()))


def test_a_wheel_of_builds_with_none_for_this_torch_is_planned_with_a_note_naming_its_builds() -> None:
    v = judge("dlpack-ext", builds_wheel("2.4", "2.5", "2.9"), torch(), POLICY)
    assert v.kind is AbiKind.BUILDS and v.runs and v.builds == ("2.4", "2.5", "2.9")
    assert "builds for torch 2.4 to 2.9, none for 2.12" in (v.note or "") and "torch has DLPack exchange built in" in (v.note or "")
    other = judge("other-ext", builds_wheel("2.8"), torch(), POLICY)
    assert other.runs and "builds for torch 2.8, none for 2.12" in (other.note or "") and "DLPack" not in (other.note or "")


def test_the_data_says_torch_c_dlpack_ext_loads_none_of_its_builds_from_torch_2_10() -> None:
    from resolve_gpu_stack.data.definitions import load_definitions

    policy = AbiPolicy.of(load_definitions().abi)
    builds = tuple(f"2.{n}" for n in range(4, 10))
    v = judge("torch-c-dlpack-ext", builds_wheel(*builds), torch(), policy, version=Version("0.1.5"))
    assert v.runs and "expected from torch 2.10 on" in (v.note or "")
    before = judge("torch-c-dlpack-ext", builds_wheel("2.4", "2.5"), torch(Version("2.6.0+cu126"), cuda=12), policy, version=Version("0.1.5"))
    assert before.runs and "loads none of them" not in (before.note or "")


def test_the_build_for_this_torch_decides() -> None:
    good = judge("p", builds_wheel("2.11", "2.12"), torch(exports=exports_of(FAIL)), POLICY)
    assert good.kind is AbiKind.BUILDS and good.runs
    bad = judge("p", builds_wheel("2.11", "2.12"), torch(exports=exports_of()), POLICY)
    assert bad.kind is AbiKind.BUILDS and not bad.runs and "torchCheckFail" in (bad.refusal or "")


def test_a_member_that_is_no_build_still_has_to_run() -> None:
    v = judge("p", builds_wheel("2.8", extra=member("p/_core.so", cxx=(EMPTY,))), torch(exports=exports_of(FAIL)), POLICY)
    assert not v.runs and "does not export" in (v.refusal or "")


def test_an_unfinished_scan_is_unknown_and_refused_never_agnostic() -> None:
    v = judge("p", WheelAbi(kind="unknown", why="range reads answered 503"), torch(), POLICY)
    assert v.kind is AbiKind.UNKNOWN and not v.runs and "503" in (v.refusal or "")


def test_a_torch_linked_wheel_without_torch_in_the_plan_is_refused() -> None:
    assert not judge("p", wheel(member(shim=1)), None, POLICY).runs


@pytest.mark.parametrize(
    ("verdict", "torch_version", "cuda", "fails"),
    [
        (AbiVerdict(kind=AbiKind.STABLE, against=str(NIGHTLY), floor="2.10", cuda_majors=(13,)), NIGHTLY, 13, None),
        (AbiVerdict(kind=AbiKind.STABLE, against=str(NIGHTLY), floor="2.10", cuda_majors=(12,)), NIGHTLY, 13, "CUDA 12"),
        (AbiVerdict(kind=AbiKind.STABLE, against="2.9.1", floor="2.10"), Version("2.9.1"), 13, "from torch 2.10 on"),
        (AbiVerdict(kind=AbiKind.LOCKED, against="2.11.0"), NIGHTLY, 13, "made against torch 2.11.0"),
        (AbiVerdict(kind=AbiKind.UNKNOWN, against=str(NIGHTLY), refusal="its shared objects could not be judged: budget"), NIGHTLY, 13, "budget"),
        (AbiVerdict(kind=AbiKind.LOCKED, against=str(NIGHTLY), note="all exported"), NIGHTLY, 13, None),
    ],
)
def test_a_recorded_verdict_holds_only_for_the_torch_it_was_made_against(verdict: AbiVerdict, torch_version: Version, cuda: int, fails: str | None) -> None:
    why = recorded_verdict_fails(verdict, torch_version, cuda)
    assert (why is None) is (fails is None) and (fails is None or fails in (why or "")), why


def test_a_verdict_round_trips_through_its_lock_keys() -> None:
    v = AbiVerdict(kind=AbiKind.BUILDS, against="2.12.0", builds=("2.4", "2.9"), cuda_majors=(13,), note="n")
    assert AbiVerdict.from_dict(v.to_dict()) == v
    assert AbiVerdict.from_dict({}) is None
    with pytest.raises(ValueError):
        AbiVerdict.from_dict({"abi": "sideways"})


def test_wheel_abi_round_trips_and_rejects_a_foreign_kind() -> None:
    w = builds_wheel("2.4", "2.9")
    assert WheelAbi.from_dict(w.to_dict()) == w
    with pytest.raises(ValueError):
        WheelAbi.from_dict({"kind": "torch-abi", "why": "old record"})


@pytest.mark.parametrize(
    ("pairs", "floor"),
    [((), None), (((">=", "2.10"),), "2.10"), (((">=", "2.9"), ("<", "3")), "2.9"), ((("==", "2.9.*"),), "2.9"), (((">=", "2.9"), (">=", "2.11")), "2.11")],
)
def test_requires_floor(pairs: tuple[tuple[str, str], ...], floor: str | None) -> None:
    assert requires_floor(pairs) == floor
