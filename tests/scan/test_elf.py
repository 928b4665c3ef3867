"""elf + wheelscan: which libraries a wheel's shared objects need, from a few of their bytes.

Real shared objects come from the C compiler, linked against stubs carrying torch's and CUDA's
sonames (tests/support/elfbuild.py); 32-bit and big-endian objects are written byte by byte.
"""

from __future__ import annotations

import zipfile
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.elfbuild import CUDART, CountingReader, compile_extension, compile_so, have_cc, have_cxx, stub_libraries, synthetic_elf, torch_stubs, wheel_bytes

from resolve_gpu_stack.data.definitions import load_definitions
from resolve_gpu_stack.scan import elf, wheelscan
from resolve_gpu_stack.scan.elf import ElfError, ElfTruncated, needed_libraries, read_layout
from resolve_gpu_stack.scan.elf.symbols import dynamic_symbols
from resolve_gpu_stack.scan.wheelscan import WheelScanner, scan_wheel
from resolve_gpu_stack.scan.zipmeta import ZipError

TORCH = ("libtorch_cpu.so", "libc10.so")
PAD = 4 * 2**20  # random bytes in .rodata: .dynamic lands past them, as in a kernel library


@pytest.fixture(scope="module")
def objs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    if not have_cc():
        pytest.skip("no C compiler")
    d = tmp_path_factory.mktemp("elf")
    libs = stub_libraries(d / "libs")
    return {
        "torch": compile_so(d, "torchy.so", libs, links=(*TORCH, CUDART)),
        "cuda": compile_so(d, "cudaonly.so", libs, links=(CUDART,)),
        "plain": compile_so(d, "plain.so", libs),
        "torch_padded": compile_so(d, "torch_padded.so", libs, links=(*TORCH, CUDART), pad=PAD, seed=1),
        "cuda_padded": compile_so(d, "cuda_padded.so", libs, links=(CUDART,), pad=PAD, seed=2),
        # code in the first loadable segment: no segment bound, the string table's end must tell
        "cuda_padded_rx": compile_so(d, "cuda_rx.so", libs, links=(CUDART,), pad=PAD, seed=3, flags=("-Wl,-z,noseparate-code",)),
    }


# -- elf: real objects ------------------------------------------------------------------------


def test_dynamic_section_of_a_real_object_gives_every_needed_library(objs: dict[str, bytes]) -> None:
    libs = needed_libraries(objs["torch"], file_size=len(objs["torch"]))
    assert (libs.method, libs.complete) == ("dynamic", True)
    assert libs.needed == ("libtorch_cpu.so", "libc10.so", "libcudart.so.12", "libc.so.6")
    assert libs.torch_libs == TORCH
    assert libs.cuda_majors == (12,) and libs.cuda_libs == ("libcudart.so.12",)


def test_cuda_only_and_plain_objects(objs: dict[str, bytes]) -> None:
    cuda = needed_libraries(objs["cuda"], file_size=len(objs["cuda"]))
    assert cuda.complete and cuda.torch_libs == () and cuda.cuda_majors == (12,)
    plain = needed_libraries(objs["plain"], file_size=len(objs["plain"]))
    assert plain.complete and plain.needed == ("libc.so.6",) and plain.torch_libs == () and plain.cuda_libs == ()


def test_dynamic_section_past_the_bytes_given_falls_back_to_scanning_the_string_table(objs: dict[str, bytes]) -> None:
    data = objs["torch_padded"]
    layout = read_layout(data)
    assert layout.dynamic is not None and layout.dynamic.offset > PAD  # the padding pushed it out
    head = data[: 64 * 1024]
    libs = needed_libraries(head)
    assert (libs.method, libs.complete, libs.table_ended) == ("scan", False, True)
    assert set(TORCH) <= set(libs.needed) and libs.cuda_majors == (12,)
    # the whole file parses exactly, and agrees
    full = needed_libraries(data, file_size=len(data))
    assert full.method == "dynamic" and set(full.needed) <= set(libs.needed)


def test_scan_bound_is_the_first_segment_when_it_holds_no_code(objs: dict[str, bytes]) -> None:
    bound = read_layout(objs["cuda_padded"]).scan_bound
    assert bound is not None and bound < 64 * 1024
    assert read_layout(objs["cuda_padded_rx"]).scan_bound is None  # first segment is executable


def test_truncated_and_garbage_input(objs: dict[str, bytes]) -> None:
    data = objs["torch"]
    for cut in (0, 3, 10, 40, 63):
        with pytest.raises(ElfTruncated):
            needed_libraries(data[:cut])
    for junk in (b"MZ\x90\x00" + bytes(100), b"PK\x03\x04" + bytes(60), b"#!/bin/sh\n" * 10):
        with pytest.raises(ElfError) as err:
            needed_libraries(junk)
        assert not isinstance(err.value, ElfTruncated) and "not an ELF" in str(err.value)
    with pytest.raises(ElfError, match="class"):
        needed_libraries(data[:4] + b"\x07" + data[5:])
    with pytest.raises(ElfError, match="encoding"):
        needed_libraries(data[:5] + b"\x09" + data[6:])
    # claiming to be the whole file while the dynamic section lies beyond it: broken, not scannable
    head = objs["torch_padded"][:100_000]
    with pytest.raises(ElfError, match="dynamic section"):
        needed_libraries(head, file_size=len(head))
    assert issubclass(ElfError, ValueError)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2048), st.integers(0, 2047))
def test_any_bytes_give_a_result_or_elf_error(junk: bytes, at: int) -> None:
    """Random bytes behind a valid ELF header, or spliced into a real object, never crash otherwise."""
    header = synthetic_elf(bits=64, big=False, needed=("libc10.so",))[:64]
    for data in (header + junk, _splice(synthetic_elf(bits=32, big=True, needed=("libc10.so",), gap=64), junk[:32], at)):
        for size in (None, len(data)):
            try:
                needed_libraries(data, file_size=size)
            except ElfError:
                pass


def _splice(data: bytes, junk: bytes, at: int) -> bytes:
    at %= len(data)
    return data[:at] + junk + data[at + len(junk) :]


# -- elf: written byte by byte ----------------------------------------------------------------


@pytest.mark.parametrize("bits", [32, 64])
@pytest.mark.parametrize("big", [False, True], ids=["le", "be"])
def test_both_classes_and_endiannesses(bits: int, big: bool) -> None:
    data = synthetic_elf(bits=bits, big=big, needed=("libc10.so", "libcudart.so.13"), soname="libown.so", gap=10_000)
    layout = read_layout(data)
    assert (layout.bits, layout.big_endian) == (bits, big)
    libs = needed_libraries(data, file_size=len(data))
    assert (libs.method, libs.needed, libs.soname) == ("dynamic", ("libc10.so", "libcudart.so.13"), "libown.so")
    assert libs.cuda_majors == (13,) and libs.torch_libs == ("libc10.so",)
    scanned = needed_libraries(data[:4000])  # string table in, dynamic section out
    assert scanned.method == "scan" and not scanned.complete
    assert scanned.needed == ("libc10.so", "libcudart.so.13", "libown.so")  # the soname is a candidate too


def test_string_table_address_is_translated_through_the_load_segment() -> None:
    # vaddr far from the file offset: reading DT_STRTAB as an offset would miss the table
    data = synthetic_elf(bits=64, big=False, needed=("libtorch.so",), vaddr=0x7F0000)
    assert needed_libraries(data, file_size=len(data)).needed == ("libtorch.so",)


def test_static_object_needs_nothing() -> None:
    data = bytearray(synthetic_elf(bits=64, big=False, needed=()))
    # turn PT_DYNAMIC into PT_NULL
    data[64 + 56 : 64 + 60] = b"\x00\x00\x00\x00"
    libs = needed_libraries(bytes(data), file_size=len(data))
    assert (libs.needed, libs.complete) == ((), True)


def test_scan_sonames() -> None:
    table = b"\x00_ZN3c104impl3fooEv\x00libc10.so\x00libtorch_cpu.so\x00libcudart.so.12\x00GLIBC_2.2.5\x00libm.so.6\x00libtrunc.s"
    assert elf.scan_sonames(table) == ("libc10.so", "libtorch_cpu.so", "libcudart.so.12", "libm.so.6")
    assert elf.scan_sonames(b"/usr/lib/libc10.so\x00xlibfoo.so\x00") == ()  # not whole strings
    assert elf.string_table_end(table, 1) is None
    assert elf.string_table_end(table + b"\x00\x01\x00\x02\x00", 1) == len(table) + 1


@pytest.mark.parametrize(
    ("names", "torch", "cuda", "majors"),
    [
        (("libtorch.so", "libtorch_cuda.so", "libtorch_python.so", "libc10_cuda.so"), 4, 0, ()),
        (("libtorchaudio.so", "libtorchx.so", "libc10x.so"), 0, 0, ()),
        (("libcudart.so.13", "libcublasLt.so.12", "libnvrtc.so.12.8"), 0, 3, (12, 13)),
        (("libcufft.so.11", "libcurand.so.10", "libcuda.so.1", "libcudnn.so.9", "libnccl.so.2"), 0, 5, ()),
    ],
)
def test_library_families(names: tuple[str, ...], torch: int, cuda: int, majors: tuple[int, ...]) -> None:
    assert (len(elf.torch_libs(names)), len(elf.cuda_libs(names)), elf.cuda_majors(names)) == (torch, cuda, majors)


def test_results_are_frozen() -> None:
    libs = needed_libraries(synthetic_elf(bits=64, big=False, needed=("libc10.so",)))
    with pytest.raises(FrozenInstanceError):
        libs.needed = ()  # type: ignore[misc]


# -- wheelscan --------------------------------------------------------------------------------


def _scan(members: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED, **options: int) -> tuple[wheelscan.WheelScan, CountingReader]:
    data = wheel_bytes(members, method=method)
    reader = CountingReader(data)
    result = scan_wheel(reader, len(data), **options)
    assert (result.bytes_read, result.reads, result.file_size) == (reader.bytes, reader.calls, len(data))
    return result, reader


@pytest.mark.parametrize("method", [zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED], ids=["deflated", "stored"])
def test_wheel_kinds(objs: dict[str, bytes], method: int) -> None:
    torch, _ = _scan({"pkg/_C.abi3.so": objs["torch"], "pkg/__init__.py": b""}, method)
    assert torch.kind == "torch-abi" and torch.evidence == wheelscan.Evidence("pkg/_C.abi3.so", "libtorch_cpu.so")
    assert torch.reason == "pkg/_C.abi3.so needs libtorch_cpu.so" and torch.cuda_majors == (12,)
    cuda, _ = _scan({"pkg/ops.so": objs["cuda"], "pkg/plain.so": objs["plain"]}, method)
    assert (cuda.kind, cuda.cuda_majors, cuda.evidence) == ("cuda", (12,), None)
    assert "libcudart.so.12" in cuda.reason and "CUDA major 12" in cuda.reason
    plain, _ = _scan({"pkg/plain.cpython-312-x86_64-linux-gnu.so": objs["plain"]}, method)
    assert plain.kind == "agnostic" and len(plain.members) == 1 and "neither" in plain.reason
    pure, reader = _scan({"pkg/__init__.py": b"x = 1\n"}, method)
    assert (pure.kind, pure.members, pure.reason) == ("agnostic", (), "no shared objects in the wheel")
    assert reader.calls == 1  # the tail held the whole directory


def test_small_wheel_is_read_once_from_its_tail(objs: dict[str, bytes]) -> None:
    result, reader = _scan({"pkg/_C.so": objs["torch"]})
    member = result.members[0]
    assert reader.calls == 1 and result.kind == "torch-abi" and member.stop == "symbols"
    assert member.libraries is not None and member.libraries.complete
    assert member.symbols is not None and member.symbols.complete and member.symbols.method == "dynamic"
    assert "stub_torch_cpu" in member.symbols.imports


def test_padded_member_is_classified_from_a_small_fraction_of_the_wheel(objs: dict[str, bytes]) -> None:
    result, reader = _scan({"pkg/kernels.so": objs["torch_padded"]})
    member = result.members[0]
    assert result.kind == "torch-abi" and member.stop == "symbols" and member.libraries is not None
    assert member.libraries.method == "scan" and member.inflated < member.size / 20
    assert member.symbols is not None and member.symbols.method == "scan" and {"stub_torch_cpu", "c10_stub"} <= set(member.symbols.imports)
    assert len(reader.data) > PAD and reader.bytes < len(reader.data) / 20, (reader.bytes, len(reader.data))


@pytest.mark.parametrize("which", ["cuda_padded", "cuda_padded_rx"])
def test_cuda_only_padded_member_stops_where_its_string_table_ends(objs: dict[str, bytes], which: str) -> None:
    result, reader = _scan({"pkg/comm.so": objs[which]})
    assert result.kind == "cuda" and result.members[0].stop == "strtab-end"
    assert reader.bytes < len(reader.data) / 20


def test_names_cut_by_chunk_boundaries_are_still_found() -> None:
    # 5-byte reads of a stored member: every library name straddles a boundary
    names = ("libcudart.so.12", "libcublasLt.so.12", "libm.so.6")
    data = synthetic_elf(bits=64, big=True, needed=names, gap=3000, lead=2000)
    result, reader = _scan({"p/x.so": data}, zipfile.ZIP_STORED, first_chunk=5, max_chunk=5, tail_bytes=512)
    member = result.members[0]
    assert (result.kind, member.stop, reader.calls > 50) == ("cuda", "strtab-end", True)
    assert member.libraries is not None and member.libraries.needed == names
    torch = synthetic_elf(
        bits=32,
        big=False,
        needed=("libm.so.6", "libtorch_cuda.so", "libc10_cuda.so"),
        gap=3000,
        lead=2000,
        imports=("aoti_torch_empty_strided",),
    )
    result, _ = _scan({"p/x.so": torch}, zipfile.ZIP_STORED, first_chunk=5, max_chunk=5, tail_bytes=512)
    member = result.members[0]
    assert result.evidence == wheelscan.Evidence("p/x.so", "libtorch_cuda.so") and member.stop == "symbols"
    assert member.symbols is not None and member.symbols.imports == ("aoti_torch_empty_strided",)
    assert member.inflated < 2400  # read on to the symbol table's last name, not to the dynamic section


def test_needed_names_after_a_large_string_table(tmp_path: Path, objs: dict[str, bytes]) -> None:
    """GNU ld writes the needed names after every symbol name: many exports push them back."""
    libs = stub_libraries(tmp_path / "libs")
    data = compile_so(tmp_path, "syms.so", libs, links=(CUDART,), pad=2**20, symbols=3000)
    assert data.find(b"libcudart.so.12") > 200_000
    result, reader = _scan({"p/syms.so": data}, first_chunk=8192)
    assert result.kind == "cuda" and result.members[0].stop == "strtab-end" and reader.calls > 2
    assert reader.bytes < len(reader.data) / 2


def test_first_segment_bound_ends_a_scan_with_no_library_names() -> None:
    data = bytearray(synthetic_elf(bits=64, big=False, needed=(), gap=3 * 2**20))
    data[64 + 4 : 64 + 8] = b"\x04\x00\x00\x00"  # the first load segment is read-only and 8 KiB: a bound
    data[64 + 32 : 64 + 40] = (8192).to_bytes(8, "little")
    result, reader = _scan({"pkg/x.so": bytes(data)}, zipfile.ZIP_STORED, first_chunk=4096)
    assert result.kind == "agnostic" and result.members[0].stop == "segment-end"
    assert reader.bytes < 100_000


def test_a_member_whose_first_bytes_do_not_tell_is_read_on_by_its_structure() -> None:
    """Its dynamic section past the cap: before, the wheel was unknown at the cap; now the member is
    read on to its dynamic section (tied to torch or not), which tells it needs nothing."""
    data = bytearray(synthetic_elf(bits=64, big=False, needed=(), gap=3 * 2**20))
    data[64 + 4 : 64 + 8] = b"\x05\x00\x00\x00"  # executable first segment: no bound
    for requires in ((), ("torch>=2.10",)):
        wheel = wheel_bytes({"pkg/x.so": bytes(data)}, requires=requires)
        result = scan_wheel(CountingReader(wheel), len(wheel), cap=2**20)
        member = result.members[0]
        assert (result.kind, member.stop, member.structural) == ("agnostic", "dynamic", True), requires
        assert result.decided and "not read" not in result.reason


def _stopped(members: dict[str, bytes], requires: tuple[str, ...], rounds: int) -> wheelscan.WheelScan:
    """A scan its caller stops (its budget spent) after ``rounds`` rounds of member reads."""
    wheel = wheel_bytes(members, requires=requires)
    scanner = WheelScanner(len(wheel), first_chunk=4096)
    for _ in range(2 + rounds):
        for start, end in scanner.next_ranges():
            scanner.feed(start, wheel[start:end])
    scanner.stop("not scanned past the 8192-byte budget")
    return scanner.result()


def test_a_stopped_scan_is_unknown_when_the_wheel_is_tied_to_torch_and_judged_by_names_when_not(objs: dict[str, bytes]) -> None:
    """The rule of ``torch_tie``: scipy's case (a large native wheel, nothing of torch in its
    METADATA, name or the members read) is planned by what its members name; a wheel that
    requires torch stays unknown, saying why."""
    members = {"pkg/a.so": objs["cuda_padded"], "pkg/b.so": objs["cuda_padded_rx"]}
    untied = _stopped(members, (), 0)
    assert untied.kind == "cuda" and "not every shared object was read (not scanned past the 8192-byte budget)" in untied.reason
    assert "nothing ties it to torch" in untied.reason
    tied = _stopped(members, ("torch>=2.10",), 0)
    assert tied.kind == "unknown" and tied.tie == "its METADATA requires torch" and "budget" in tied.reason
    torchy = _stopped({"pkg/t.so": objs["torch_padded"], **members}, (), 1)  # a member read names torch: tied by it
    assert torchy.kind == "torch-abi" and torchy.abi(load_definitions().abi).kind == "unknown"


@pytest.mark.parametrize(
    ("metadata", "tie"),
    [
        ("Name: scipy\nRequires-Dist: numpy<2.7,>=1.25.2\nRequires-Dist: pytest; extra == 'test'\n", None),
        ("Name: torchvision\nRequires-Dist: numpy\n", "its name (torchvision) says torch"),
        ("Name: demo\nRequires-Dist: torch>=2.10\n", "its METADATA requires torch"),
        ("Name: demo\nRequires-Dist: torch ; extra == 'gpu'\n", "its METADATA requires torch"),
        ("Name: demo\nRequires-Dist: torchmetrics\n", None),
        ("Version: 1.0\n", "its METADATA names no package"),
        (None, "its METADATA was not read"),
    ],
)
def test_torch_tie(metadata: str | None, tie: str | None) -> None:
    assert wheelscan.torch_tie(metadata) == tie


def test_every_member_is_scanned_past_the_first_torch_linked_one(objs: dict[str, bytes]) -> None:
    members = {"a/comm.so": objs["cuda"], "a/kernels.so": objs["torch_padded"], "a/plain.so": objs["plain"]}
    result, reader = _scan(members)
    assert result.kind == "torch-abi" and result.evidence is not None and result.evidence.member == "a/kernels.so"
    assert [(m.name, m.stop) for m in result.members] == [("a/kernels.so", "symbols"), ("a/comm.so", "end"), ("a/plain.so", "end")]
    parallel, _ = _scan(members, parallel=3)
    assert parallel.kind == "torch-abi" and parallel.evidence == result.evidence
    assert sorted((m.name, m.stop) for m in parallel.members) == sorted((m.name, m.stop) for m in result.members)


def test_a_member_that_is_not_elf_makes_the_wheel_unknown(objs: dict[str, bytes]) -> None:
    result, _ = _scan({"pkg/libfake.so": b"INPUT(-lfoo)\n" * 100, "pkg/ok.so": objs["cuda"]})
    bad = next(m for m in result.members if m.name == "pkg/libfake.so")
    assert result.kind == "unknown" and bad.stop == "error" and "not an ELF" in (bad.error or "")
    assert "could not tell what pkg/libfake.so needs" in result.reason


def test_corrupt_deflate_data_is_an_error_not_a_crash(objs: dict[str, bytes]) -> None:
    data = bytearray(wheel_bytes({"pkg/x.so": objs["torch"]}))
    start = 30 + len("pkg/x.so")
    data[start : start + 64] = b"\xff" * 64  # a deflate block of the reserved type
    result = scan_wheel(CountingReader(bytes(data)), len(data))
    assert result.kind == "unknown" and "bad deflate data" in (result.members[0].error or "")


def test_feeding_a_tail_already_read_saves_the_first_request(objs: dict[str, bytes]) -> None:
    data = wheel_bytes({"pkg/kernels.so": objs["torch_padded"]})
    scanner = WheelScanner(len(data))
    tail_start = len(data) - 70_000
    scanner.feed(tail_start, data[tail_start:])  # as if left over from reading METADATA
    asked = []
    while ranges := scanner.next_ranges():
        for start, end in ranges:
            asked.append((start, end))
            scanner.feed(start, data[start:end])
    assert asked and all(end <= tail_start for _, end in asked)
    assert scanner.result().kind == "torch-abi"


def test_not_a_zip_raises_zip_error() -> None:
    with pytest.raises(ZipError):
        scan_wheel(CountingReader(b"\x00" * 100_000), 100_000)
    with pytest.raises(RuntimeError, match="not finished"):
        WheelScanner(100).result()


def test_shared_object_names() -> None:
    assert all(map(wheelscan.is_shared_object, ["a/_C.so", "x.libs/libgomp-a34b.so.1.0.0", "libcudart.so.12", "m.abi3.so"]))
    assert not any(map(wheelscan.is_shared_object, ["a/so", "a.so/", "a/x.so.py", "a/x.sox", "a/libfoo.so.txt"]))


def test_real_wheel_from_tests_helpers(tmp_path: Path) -> None:
    from support.wheels import build_wheel

    wheel = build_wheel(tmp_path, "demo-pkg", "1.0", padding=300_000)
    data = wheel.path.read_bytes()
    result = scan_wheel(CountingReader(data), len(data))
    assert result.kind == "agnostic" and result.members == ()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**31), st.binary(min_size=1, max_size=8)), min_size=1, max_size=6))
def test_corrupted_wheels_give_a_result_or_zip_error(edits: list[tuple[int, bytes]]) -> None:
    """Bytes overwritten anywhere (headers, directory, deflate stream): a result or ZipError, and it ends."""
    data = bytearray(_FUZZ_WHEEL)
    for at, junk in edits:
        at %= len(data)
        data[at : at + len(junk)] = junk[: len(data) - at]
    reader = CountingReader(bytes(data))

    def read(start: int, end: int) -> bytes:
        assert reader.calls < 100, "the scan keeps asking"
        return reader(start, end)

    try:
        result = scan_wheel(read, len(data), tail_bytes=1024, first_chunk=512)
    except ZipError:
        return
    assert result.kind in ("torch-abi", "cuda", "agnostic", "unknown")


_FUZZ_WHEEL = wheel_bytes({"p/a.so": synthetic_elf(bits=64, big=False, needed=("libc10.so", "libcudart.so.12"), gap=3000), "p/b.so": b"x" * 100})


def test_a_local_header_offset_past_the_data_is_a_member_error() -> None:
    data = bytearray(wheel_bytes({"p/a.so": synthetic_elf(bits=64, big=False, needed=("libc10.so",))}))
    cd = data.rfind(b"PK\x01\x02", 0, data.rfind(b"PK\x05\x06"))
    while data[cd + 46 : cd + 46 + 6] != b"p/a.so":
        cd = data.rfind(b"PK\x01\x02", 0, cd)
    data[cd + 42 : cd + 46] = (cd - 10).to_bytes(4, "little")  # inside the central directory
    result = scan_wheel(CountingReader(bytes(data)), len(data))
    assert result.kind == "unknown" and "past the members' data" in (result.members[0].error or "")


@pytest.mark.skipif(not have_cxx(), reason="needs a C++ compiler to build the shared objects")
@pytest.mark.parametrize("name_byte", [b"\xe9", b"\xff"])
def test_a_symbol_name_not_ascii_is_named_as_the_other_reader_names_it(tmp_path, name_byte: bytes) -> None:  # type: ignore[no-untyped-def]
    """The names of a table are read from it decoded once when it is ASCII (a torch library's
    76,000); a table with a byte that is not is read name by name, its bytes decoded as UTF-8
    with replacement, as the reader by validation (``dynamic_symbols``) reads it."""
    lib = bytearray(compile_extension(tmp_path, "lib.so", torch_stubs(tmp_path / "libs"), calls=("cxx_check", "shim_device")))
    at = lib.find(b"\x00PyInit_lib\x00")
    assert at > 0, "the object names no PyInit_lib"
    lib[at + 1 : at + 2] = name_byte  # its first letter
    data = bytes(lib)
    found = elf.read_structure(elf.read_layout(data[: elf.HEAD_BYTES]), lambda o, n: data[o : o + n], len(data), exports=True)
    assert isinstance(found, elf.Structure) and found.symbols is not None
    assert found.symbols.exports == dynamic_symbols(data, exports=True).exports
    assert any("\ufffd" in s for s in found.symbols.exports)
