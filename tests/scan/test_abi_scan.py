"""The ABI scan on real compiled objects: C++ extensions linked by GNU ld, gold and lld against a
stub torch (C++ symbols of c10::/at::, stable C-shim functions, a THP binding) and CUDA runtimes of
majors 12 and 13 (tests/support/elfbuild.py); synthetic 32-bit and big-endian objects; the wheel's limits
(hostile layouts end fast, as unknown) and random corruption (only the errors designed)."""

from __future__ import annotations

import io
import shutil
import time
import zipfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.elfbuild import CountingReader, compile_extension, have_cxx, have_lld, hostile_wheels, synthetic_elf, torch_stubs, wheel_bytes

from resolve_gpu_stack.data.definitions import load_definitions
from resolve_gpu_stack.model.abi import CUDA, NONE, TORCH, UNKNOWN, MemberAbi
from resolve_gpu_stack.scan import elf
from resolve_gpu_stack.scan.elf import ElfError, dynamic_symbols
from resolve_gpu_stack.scan.wheelscan import WheelScan, WheelScanner, scan_wheel
from resolve_gpu_stack.scan.zipmeta import ZipError

RULES = load_definitions().abi
PAD = 3 * 2**20  # random bytes in .rodata: .dynamic lands past them, as in a kernel library
SHIM = ("shim_device", "shim_empty", "shim_dispatch")
CXX = ("cxx_check", "cxx_numel", "cxx_typeinfo", "python")
CHECK_FAIL = "_ZN3c106detail14torchCheckFailEPKcS2_jRKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    if not have_cxx():
        pytest.skip("no C++ compiler")
    d = tmp_path_factory.mktemp("abi")
    libs = torch_stubs(d / "libs")
    cuda13 = ("libtorch_cpu.so", "libc10.so", "libcudart.so.13")
    out = {
        "stable13": compile_extension(d, "stable13.so", libs, calls=(*SHIM, "cudart"), links=cuda13, pad=PAD, seed=1),
        "stable12": compile_extension(d, "stable12.so", libs, calls=(*SHIM, "cudart"), links=("libtorch_cpu.so", "libc10.so", "libcudart.so.12")),
        "locked": compile_extension(d, "locked.so", libs, calls=(*CXX, "shim_device"), links=cuda13, pad=PAD, seed=2),
        "build27": compile_extension(d, "libaddon_torch27-cuda.so", libs, calls=("cxx_check",)),
        "build28": compile_extension(d, "libaddon_torch28-cpu.so", libs, calls=("cxx_numel",)),
        "cuda_only": compile_extension(d, "cuda_only.so", libs, calls=("cudart",), links=("libcudart.so.12",), pad=PAD, seed=3),
        "plain": compile_extension(d, "plain.so", libs, calls=(), links=()),
    }
    if shutil.which("ld.gold"):
        out["locked_gold"] = compile_extension(d, "locked_gold.so", libs, calls=CXX, links=cuda13, pad=PAD, seed=4, linker="gold")
    if have_lld():
        out["locked_lld"] = compile_extension(d, "locked_lld.so", libs, calls=CXX, links=cuda13, pad=PAD, seed=5, linker="lld")
        out["stable_lld"] = compile_extension(d, "stable_lld.so", libs, calls=SHIM, links=cuda13, pad=PAD, seed=6, linker="lld")
    return out


def _scan(members: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED, **options: object) -> tuple[WheelScan, CountingReader]:
    data = wheel_bytes(members, method=method)
    reader = CountingReader(data)
    return scan_wheel(reader, len(data), **options), reader


# -- compiled objects ---------------------------------------------------------------------------


def test_a_wheel_importing_only_the_shim_is_stable_and_tells_its_cuda_major(built: dict[str, bytes]) -> None:
    result, reader = _scan({"pkg/_C.abi3.so": built["stable13"], "pkg/__init__.py": b""})
    abi = result.abi(RULES)
    assert abi.kind == TORCH and abi.cuda_majors == (13,)
    (member,) = abi.members
    assert (member.shim, member.cxx, member.build, member.cuda_majors) == (3, (), None, (13,))
    assert set(member.shim_examples) == {"aoti_torch_get_device_index", "aoti_torch_empty_strided", "torch_call_dispatcher"}
    assert member.torch_libs == ("libtorch_cpu.so", "libc10.so")
    assert reader.bytes < len(reader.data) / 20  # the symbols are in the first bytes: .dynamic lies 3 MB later
    twelve = _scan({"pkg/_C.abi3.so": built["stable12"]})[0].abi(RULES)
    assert twelve.kind == TORCH and twelve.cuda_majors == (12,) and twelve.members[0].cuda_majors == (12,)


def test_a_wheel_importing_cxx_symbols_is_locked_to_them(built: dict[str, bytes]) -> None:
    abi = _scan({"pkg/_C.so": built["locked"]})[0].abi(RULES)
    (member,) = abi.members
    assert abi.kind == TORCH and member.shim == 1
    assert CHECK_FAIL in member.cxx and "_ZTIN3c105ErrorE" in member.cxx and "_ZNK2at6Tensor5numelEv" in member.cxx
    assert "_Z16THPVariable_WrapRKN2at6TensorE" in member.cxx  # a Python binding: locked too
    assert list(member.cxx) == sorted(member.cxx) and not any("cxx11" in s and "c10" not in s for s in member.cxx)
    assert "imports 4 C++ torch symbol(s)" in abi.why and "c10::detail::torchCheckFail(char const*" in abi.why


@pytest.mark.parametrize("linker", ["gold", "lld"])
def test_other_linkers_layouts_are_read_from_the_first_bytes(built: dict[str, bytes], linker: str) -> None:
    if f"locked_{linker}" not in built:
        pytest.skip(f"no {linker}")
    data = built[f"locked_{linker}"]
    head = dynamic_symbols(data[: 64 * 1024])  # .dynamic is megabytes later: found by validation
    assert head.method == "scan" and head.complete
    assert sorted(head.imports) == sorted(dynamic_symbols(data, file_size=len(data)).imports)
    abi = _scan({"pkg/_C.so": data})[0].abi(RULES)
    assert abi.kind == TORCH and CHECK_FAIL in abi.members[0].cxx
    if linker == "lld":
        stable = _scan({"pkg/_C.so": built["stable_lld"]})[0].abi(RULES)
        assert stable.members[0].shim == 3 and stable.members[0].cxx == ()


def test_per_torch_build_members_are_named_builds(built: dict[str, bytes]) -> None:
    result, _ = _scan({"pkg/libaddon_torch27-cuda.so": built["build27"], "pkg/libaddon_torch28-cpu.so": built["build28"]}, parallel=8)
    abi = result.abi(RULES)
    assert abi.kind == TORCH and abi.builds == ("2.7", "2.8")
    assert {m.name: m.build for m in abi.members} == {"pkg/libaddon_torch27-cuda.so": "2.7", "pkg/libaddon_torch28-cpu.so": "2.8"}
    assert "builds for torch 2.7, 2.8" in abi.why


def test_cuda_only_and_plain_wheels(built: dict[str, bytes]) -> None:
    cuda = _scan({"pkg/ops.so": built["cuda_only"], "pkg/plain.so": built["plain"]})[0].abi(RULES)
    assert (cuda.kind, cuda.cuda_majors) == (CUDA, (12,))
    assert cuda.members == (MemberAbi(name="pkg/ops.so", cuda_majors=(12,)),)  # the member that needs CUDA, for twins per CUDA major
    plain = _scan({"pkg/plain.so": built["plain"]})[0].abi(RULES)
    assert plain.kind == NONE and "neither" in plain.why
    assert _scan({"pkg/__init__.py": b""})[0].abi(RULES).kind == NONE


def test_two_small_members_one_linking_torch_give_a_verdict(built: dict[str, bytes]) -> None:
    """Once a ValueError (list.remove) from the scanner: both members in the tail already read."""
    members = {"pkg/_C.so": built["build27"], "pkg/_helper.so": built["plain"]}
    result, reader = _scan(members)
    assert reader.calls == 1 and len(reader.data) < 48 * 1024  # a small wheel: read whole, at once
    for parallel in (1, 2, 64):
        result, _ = _scan(members, parallel=parallel, tail_bytes=2**20)
        assert result.kind == "torch-abi" and len(result.members) == 2
        assert result.abi(RULES).kind == TORCH


def test_a_member_past_the_cap_is_read_on_by_its_structure(built: dict[str, bytes]) -> None:
    """Before, a member whose first 2048 bytes did not tell made the wheel unknown; now it is read
    on to its dynamic section, and its symbols are judged."""
    result, _ = _scan({"pkg/_C.so": built["locked"]}, cap=2048)
    abi = result.abi(RULES)
    assert result.kind == "torch-abi" and abi.kind == TORCH and result.members[0].structural
    assert abi.members[0].cxx and CHECK_FAIL in abi.members[0].cxx


def test_a_torch_linked_member_whose_symbols_end_past_the_cap_is_read_by_structure() -> None:
    """The library names come first here (as some linkers write them): the member links torch, its
    symbol table ends past the cap; before, the verdict was unknown; now the table is read where
    ``.dynamic`` says it is. Stopped by the caller's budget before that, it is unknown, never a guess."""
    names = tuple(f"_ZN3c104impl{i:04d}fEv" for i in range(400))
    data = synthetic_elf(bits=64, big=False, needed=("libc10.so",), imports=names, gap=100_000, lead=0)
    table = dynamic_symbols(data[:200_000])
    assert table.complete and table.strings is not None
    member = {"pkg/_C.so": data[: table.strings] + b"\x00libc10.so\x00" + data[table.strings + 11 :]}
    result, _ = _scan(member, zipfile.ZIP_STORED, cap=table.strings + 4096)
    abi = result.abi(RULES)
    assert result.kind == "torch-abi" and result.members[0].links_torch and result.members[0].structural
    assert abi.kind == TORCH and len(abi.members[0].cxx) == len(names) - 1  # the first name gave its bytes to "libc10.so"
    wheel = wheel_bytes(member, method=zipfile.ZIP_STORED)
    scanner = WheelScanner(len(wheel), cap=table.strings + 4096)
    for _ in range(3):
        for start, end in scanner.next_ranges():
            scanner.feed(start, wheel[start:end])
    scanner.stop("not scanned past the budget")
    stopped = scanner.result().abi(RULES)
    assert stopped.kind == UNKNOWN and "not scanned past the budget" in stopped.why


# -- written byte by byte -----------------------------------------------------------------------


@pytest.mark.parametrize("bits", [32, 64])
@pytest.mark.parametrize("big", [False, True], ids=["le", "be"])
@pytest.mark.parametrize("order", ["gnu", "lld"])
def test_symbols_of_both_classes_byte_orders_and_layouts(bits: int, big: bool, order: str) -> None:
    imports = ("aoti_torch_get_device_index", CHECK_FAIL, "malloc")
    data = synthetic_elf(bits=bits, big=big, needed=("libc10.so", "libcudart.so.13"), imports=imports, exports=("PyInit__C",), order=order, gap=200_000)
    exact = dynamic_symbols(data, file_size=len(data), exports=True)
    assert (exact.method, exact.imports, exact.exports, exact.complete) == ("dynamic", imports, ("PyInit__C",), True)
    head = dynamic_symbols(data[:20_000], exports=True)
    assert (head.method, head.imports, head.exports, head.complete) == ("scan", imports, ("PyInit__C",), True)
    try:
        cut = dynamic_symbols(data[: head.strings + 30])  # names cut off: more bytes are needed
    except elf.ElfTruncated:
        assert order == "lld"  # its string table is not next to the table: too few names to find it yet
    else:
        assert not cut.complete and cut.needed_bytes is not None and cut.needed_bytes > head.strings + 30
    result, _ = _scan({"p/_C.so": data}, zipfile.ZIP_STORED, first_chunk=512)
    abi = result.abi(RULES)
    assert abi.kind == TORCH and abi.members[0].cxx == (CHECK_FAIL,) and abi.members[0].shim == 1


def test_static_and_garbage_objects() -> None:
    data = bytearray(synthetic_elf(bits=64, big=False, needed=()))
    data[64 + 56 : 64 + 60] = b"\x00\x00\x00\x00"  # PT_DYNAMIC -> PT_NULL: nothing imported
    assert dynamic_symbols(bytes(data)).complete and dynamic_symbols(bytes(data)).imports == ()
    with pytest.raises(elf.ElfTruncated):
        dynamic_symbols(synthetic_elf(bits=64, big=False, needed=(), imports=("f",), gap=10_000)[:100])
    with pytest.raises(ElfError, match="not an ELF"):
        dynamic_symbols(b"MZ" + bytes(200))
    whole = synthetic_elf(bits=64, big=False, needed=("libc10.so",), gap=100)  # no symbol table at all
    assert dynamic_symbols(whole, file_size=len(whole)).complete


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=1, max_size=64), st.integers(0, 2**31), st.integers(100, 4000))
def test_corrupted_symbol_tables_give_a_result_or_elf_error(junk: bytes, at: int, cut: int) -> None:
    data = bytearray(_FUZZ_OBJECT)
    at %= len(data)
    data[at : at + len(junk)] = junk[: len(data) - at]
    started = time.monotonic()
    for size in (None, len(data)):
        for blob in (bytes(data), bytes(data[:cut])):
            try:
                dynamic_symbols(blob, file_size=size, exports=True)
            except ElfError:
                pass
    assert time.monotonic() - started < 1


_FUZZ_OBJECT = synthetic_elf(bits=64, big=False, needed=("libc10.so",), imports=("aoti_torch_a", CHECK_FAIL, "f"), exports=("g",), gap=500)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**31), st.binary(min_size=1, max_size=8)), min_size=1, max_size=6))
def test_corrupted_torch_wheels_give_a_verdict_or_zip_error(edits: list[tuple[int, bytes]]) -> None:
    data = bytearray(_FUZZ_WHEEL)
    for at, junk in edits:
        at %= len(data)
        data[at : at + len(junk)] = junk[: len(data) - at]
    try:
        result = scan_wheel(CountingReader(bytes(data)), len(data), tail_bytes=1024, first_chunk=256)
    except ZipError:
        return
    assert result.abi(RULES).kind in (TORCH, CUDA, NONE, UNKNOWN)


_FUZZ_WHEEL = wheel_bytes({"p/a.so": _FUZZ_OBJECT, "p/libx_torch29-cpu.so": synthetic_elf(bits=32, big=True, needed=("libtorch.so",), imports=("_ZN2at1fEv",))})


# -- the wheel's limits -------------------------------------------------------------------------


def test_a_wheel_of_4000_members_sharing_one_deflate_stream_ends_fast() -> None:
    data = hostile_wheels()["4000 members sharing one deflate stream"]
    started = time.monotonic()
    with pytest.raises(ZipError, match="overlap"):
        scan_wheel(CountingReader(data), len(data), parallel=64)
    assert time.monotonic() - started < 2


def test_a_wheel_of_4000_expensive_members_ends_within_two_seconds_as_unknown() -> None:
    data = hostile_wheels()["4000 members, each 8 MB of nothing to find"]
    started = time.monotonic()
    result = scan_wheel(CountingReader(data), len(data), parallel=64)
    assert time.monotonic() - started < 2
    abi = result.abi(RULES)
    assert result.kind == "unknown" and abi.kind == UNKNOWN and result.limited is not None
    assert "not every shared object was scanned" in abi.why or "could not tell" in abi.why
    assert len(result.members) == 4000 and all(m.stop == "limit" for m in result.members)
    fewer = hostile_wheels()["500 members, each 8 MB of nothing to find"]
    started = time.monotonic()
    result = scan_wheel(CountingReader(fewer), len(fewer), parallel=64)
    assert time.monotonic() - started < 2
    assert result.abi(RULES).kind == UNKNOWN and "inflated" in (result.limited or "") and len(result.members) == 500


def test_the_member_count_and_the_work_time_are_capped(built: dict[str, bytes]) -> None:
    members = {f"pkg/m{i}.so": built["plain"] for i in range(5)}
    result, _ = _scan(members, max_members=3)
    assert result.kind == "unknown" and "5 shared objects, over the 3" in (result.limited or "")
    assert result.abi(RULES).kind == UNKNOWN and "over the 3" in result.abi(RULES).why
    ticks = iter(range(10**6))
    slow, _ = _scan(members, clock=lambda: float(next(ticks)), time_limit=3.0, tail_bytes=1024)  # every look at the clock: a second
    assert slow.kind == "unknown" and "took over 3 s" in (slow.limited or "")
    quick, _ = _scan(members)
    assert quick.kind == "agnostic" and quick.limited is None


def test_the_inflated_bytes_of_a_wheel_are_capped(built: dict[str, bytes]) -> None:
    result, _ = _scan({"pkg/a.so": built["locked"], "pkg/b.so": built["stable13"]}, max_inflated=5_000)
    assert result.abi(RULES).kind == UNKNOWN and "inflated" in (result.limited or "")


def test_stored_and_deflated_wheels_read_the_same(built: dict[str, bytes]) -> None:
    members = {"pkg/_C.so": built["locked"], "pkg/ops.so": built["cuda_only"]}
    deflated = _scan(members)[0].abi(RULES)
    stored = _scan(members, zipfile.ZIP_STORED)[0].abi(RULES)
    assert deflated == stored and deflated.kind == TORCH


def test_a_wheel_whose_zip_is_fine_for_zipfile(built: dict[str, bytes]) -> None:
    data = wheel_bytes({"pkg/_C.so": built["stable13"]})
    assert zipfile.ZipFile(io.BytesIO(data)).read("pkg/_C.so") == built["stable13"]


def test_the_section_headers_size_the_table_when_dynamic_does_not(built: dict[str, bytes]) -> None:
    if "locked_lld" not in built:
        pytest.skip("no lld")
    data = bytearray(built["locked_lld"])  # lld: .dynstr is not next to .dynsym
    layout = elf.read_layout(data)
    dyn = layout.dynamic
    assert dyn is not None
    for pos in range(dyn.offset, dyn.end, 16):
        if int.from_bytes(data[pos : pos + 8], "little") in (elf.DT_GNU_HASH, elf.DT_HASH):
            data[pos : pos + 8] = (21).to_bytes(8, "little")  # DT_DEBUG: the hash tables are gone from .dynamic
    found = dynamic_symbols(bytes(data), file_size=len(data))
    assert found.method == "sections" and found.complete
    assert sorted(found.imports) == sorted(dynamic_symbols(built["locked_lld"], file_size=len(data)).imports)
    data[0x28:0x30] = bytes(8)  # e_shoff = 0: no section headers either
    with pytest.raises(ElfError, match="cannot tell the size"):
        dynamic_symbols(bytes(data), file_size=len(data))
