"""The scan reads what the loader reads: ELF objects whose dynamic section, string and symbol
tables lie where a prefix reader never looks (tests/support/elfbuild.py ``move_dynamic``: patchelf's
rewrite of torch's ``libtorch_cpu.so``, a 5th loadable segment at the end of the file; many
loadable segments with the string table in a late one, as ``torchvision/image_stable.so``; the
section headers stripped), read by structure from stored and deflated zip members, and the kept
torch's exports read from such a wheel for a declared target."""

from __future__ import annotations

import json
import subprocess
import zlib
from pathlib import Path

import pytest
from support.doors import index_flags
from support.elfbuild import compile_extension, have_cxx, move_dynamic, torch_stubs

from resolve_gpu_stack.scan import elf, inflate
from resolve_gpu_stack.scan.elfstream import KEEP_PREFIX, ElfStream

pytestmark = pytest.mark.skipif(not have_cxx(), reason="needs a C++ compiler to build the shared objects")


@pytest.fixture(scope="module")
def ext(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    d = tmp_path_factory.mktemp("structure")
    return compile_extension(d, "ext.so", torch_stubs(d / "libs"), calls=("cxx_check", "shim_device"))


def _deflated(data: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


def _stream(data: bytes, method: int) -> tuple[ElfStream, int]:
    comp = data if method == 0 else _deflated(data)
    reader = ElfStream(method, len(data), len(comp), exports=True, chunk=256 * 2**10)
    reads = 0
    while (span := reader.wanted()) is not None:
        reader.feed(span[0], comp[span[0] : span[1]])
        reads += 1
    return reader, reads


def _truth(data: bytes) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(needed libraries, imported symbols) of the object as it was before the rewrite (whole)."""
    libs = elf.needed_libraries(data, file_size=len(data))
    return libs.needed, elf.dynamic_symbols(data, file_size=len(data)).imports


LAYOUTS = {
    "a 5th LOAD past 3 MB of code and data": {"pad": 3 * 2**20},
    "a 5th LOAD past 80 MB (the first 64 MB hold no table)": {"pad": 80 * 2**20, "zeros": True},
    "8 LOADs, the string table in the 6th": {"pad": 300_000, "split": True},
    "section headers kept": {"pad": 100_000, "strip_sections": False},
}


BACKENDS = ["zlib"] + (["isal"] if inflate.BACKEND == "isal" else [])


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each inflater this machine has (ISA-L where the isal wheel is installed, zlib always)."""
    monkeypatch.setattr(inflate, "BACKEND", request.param)
    return str(request.param)


def test_isal_is_what_inflates_where_its_wheel_is_installed() -> None:
    pytest.importorskip("isal")
    assert inflate.BACKEND == "isal" and type(inflate.raw_inflater()).__module__.startswith("isal")


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("method", [0, 8], ids=["stored", "deflated"])
def test_tables_moved_past_the_first_bytes_are_read_by_structure(ext: bytes, layout: str, method: int, backend: str) -> None:
    moved = move_dynamic(ext, **LAYOUTS[layout])  # type: ignore[arg-type]
    if len(moved) > elf.SEARCH_LIMIT:
        with pytest.raises(elf.ElfError, match="no dynamic symbol table"):  # what a reader of the first bytes finds
            elf.dynamic_symbols(moved[: elf.SEARCH_LIMIT], file_size=len(moved))
    reader, _ = _stream(moved, method)
    assert reader.error is None and reader.structure is not None
    needed, imports = _truth(ext)
    assert reader.structure.libraries.needed == needed and reader.structure.libraries.torch_libs
    assert reader.structure.symbols is not None and reader.structure.symbols.imports == imports
    assert reader.held <= KEEP_PREFIX + 2**20  # never the whole member in memory
    if method == 0:
        assert reader.consumed < 400_000  # a stored member: range reads of the regions only
    else:  # one pass: the tables after PT_DYNAMIC were kept as they went by, not read again from the start
        assert reader.passes == 1 and reader.consumed <= len(_deflated(moved))


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_member_resumed_from_the_scanners_first_bytes_is_read_in_one_pass(ext: bytes, layout: str) -> None:
    """The scanner inflates a member's first bytes itself and hands the stream over (``resume``):
    the regions after that prefix (a small member whole, the segments after PT_DYNAMIC) are kept as
    they pass, so the member is not inflated a second time from its start."""
    moved = move_dynamic(ext, **LAYOUTS[layout])  # type: ignore[arg-type]
    comp = _deflated(moved)
    first = 16 * 2**10
    inflater = zlib.decompressobj(-15)
    prefix = inflater.decompress(comp[:first], 64 * 2**10)
    reader = ElfStream(8, len(moved), len(comp), exports=True, chunk=256 * 2**10)
    reader.resume(prefix, inflater, first)
    while (span := reader.wanted()) is not None:
        reader.feed(span[0], comp[span[0] : span[1]])
    assert reader.error is None and reader.structure is not None and reader.structure.libraries.torch_libs
    assert reader.passes == 1 and reader.consumed <= len(comp)


def test_readelf_agrees_on_a_rewritten_object(ext: bytes, tmp_path: Path) -> None:
    moved = move_dynamic(ext, pad=200_000, split=True)
    (tmp_path / "m.so").write_bytes(moved)
    try:
        out = subprocess.run(["readelf", "-dW", str(tmp_path / "m.so")], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("no readelf")
    truth = tuple(line.split("[", 1)[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line)
    reader, _ = _stream(moved, 8)
    assert reader.structure is not None and reader.structure.libraries.needed == truth


def test_bad_deflate_data_is_an_error_by_either_inflater(ext: bytes, backend: str) -> None:
    comp = bytearray(_deflated(move_dynamic(ext, pad=10_000)))
    comp[:4096] = bytes([0xFF]) * 4096  # a reserved block type (0b11) where the stream starts
    reader = ElfStream(8, len(ext) + 10_000 + 2**20, len(comp), exports=True, chunk=256 * 2**10)
    while (span := reader.wanted()) is not None:
        reader.feed(span[0], bytes(comp[span[0] : span[1]]))
    assert reader.structure is None and (reader.error or "").startswith("bad deflate data")


def test_a_broken_structure_is_an_error_not_a_guess(ext: bytes) -> None:
    moved = bytearray(move_dynamic(ext, pad=10_000))
    dyn = elf.read_layout(moved).dynamic
    assert dyn is not None
    for pos in range(dyn.offset, dyn.end, 16):  # DT_STRTAB pointing outside every segment
        if int.from_bytes(moved[pos : pos + 8], "little") == 5:
            moved[pos + 8 : pos + 16] = (1 << 40).to_bytes(8, "little")
    reader, _ = _stream(bytes(moved), 8)
    assert reader.structure is None and "DT_STRTAB" in (reader.error or "")
    truncated = move_dynamic(ext, pad=10_000)[:-64]  # the dynamic section cut by the end of the member
    reader, _ = _stream(truncated, 0)
    assert reader.structure is None and "past the end" in (reader.error or "")


# -- the kept torch's exports for a declared target ---------------------------------------------


@pytest.fixture(scope="module")
def moved_torch(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from support.abi_world import build_abi_world
    from support.server import IndexServer

    root = tmp_path_factory.mktemp("movedtorch")
    # 270 MB of zeros before the tables: past what the old reader held (256 MiB) and searched (64 MiB)
    world, _ = build_abi_world(root, torch_lib=lambda data: move_dynamic(data, pad=270_000_000, zeros=True))
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        yield world, srv


def test_a_declared_target_judges_locked_wheels_by_the_exports_of_a_rewritten_libtorch(moved_torch, capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from support.abi_world import NIGHTLY

    from resolve_gpu_stack.cli.app import main

    world, srv = moved_torch
    flags = index_flags(srv.url)
    declared = ["--python", "3.12", "--platform", "x86_64-manylinux_2_28", "--installed", f"torch=={NIGHTLY}", "--flashinfer", "none"]
    cache = ["--cache-dir", str(tmp_path / "c")]
    assert main(["resolve", *declared, *flags, *cache, "--with", "locked-ok", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    row = next(p for p in json.loads(out)["packages"] if p["name"] == "locked-ok")
    assert row["abi"]["kind"] == "locked" and row["abi"]["refusal"] is None and "exported by torch" in row["abi"]["note"], err
    assert main(["resolve", *declared, *flags, *cache, "--with", "locked-bad", "--format", "json"]) == 1
    _, err = capsys.readouterr()
    assert "torchInternalAssertFail" in err and "does not export" in err and "could not be read" not in err, err
    # inspect reads the same exports (from the cache now) and gives the same verdict
    assert main(["inspect", "locked-bad==1.0", *declared[:-2], *flags, *cache, "--format", "json"]) in (0, 1)
    out, err = capsys.readouterr()
    assert "does not export" in out and "could not be read" not in out, out + err


# -- the wheel scan through resolve -------------------------------------------------------------


@pytest.fixture(scope="module")
def companions(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The abi world plus: ``vision-like`` (requires torch; its one member links torch with its
    tables in late segments, as ``torchvision/image_stable.so``); ``sci-like`` (no tie to torch; a
    7 MB member whose first segment holds code and whose tables were moved past 7 MB of data)."""
    from support.abi_world import build_abi_world, pypi_native
    from support.elfbuild import compile_so, stub_libraries
    from support.server import IndexServer

    root = tmp_path_factory.mktemp("companions")
    world, objects = build_abi_world(root)
    vision = move_dynamic(objects["locked_ok.so"], pad=300_000, split=True)
    pypi_native(world, "vision-like", "1.0", {"vision_like/__init__.py": b"", "vision_like/image.so": vision}, ("torch>=2.10",))
    libs = stub_libraries(root / "stubs")
    rx = compile_so(root, "sci.so", libs, links=("libcudart.so.12",), flags=("-Wl,-z,noseparate-code",))
    big = move_dynamic(rx, pad=7 * 2**20, seed=9)
    pypi_native(world, "sci-like", "1.0", {"sci_like/__init__.py": b"", "sci_like/_lib.so": big}, ("numpy",))
    pypi_native(world, "tied-big", "1.0", {"tied_big/__init__.py": b"", "tied_big/_lib.so": big}, ("torch>=2.10",))
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        yield world, srv


def _resolve(world, srv, capsys, tmp_path, *names: str, extra: tuple[str, ...] = ()) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    from support.abi_world import NIGHTLY

    from resolve_gpu_stack.cli.app import main

    flags = index_flags(srv.url)
    declared = ["--python", "3.12", "--platform", "x86_64-manylinux_2_28", "--installed", f"torch=={NIGHTLY}", "--flashinfer", "none"]
    code = main(["resolve", *declared, *flags, "--cache-dir", str(tmp_path / "c"), *extra, *[w for n in names for w in ("--with", n)], "--format", "json"])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_tied_wheel_whose_tables_sit_in_late_segments_is_judged_by_its_symbols(companions, capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Before: the first segment ended with no library name in it, and the wheel was planned
    agnostic (the fail-open the judgement exists to prevent); now its dynamic section is read."""
    code, out, err = _resolve(*companions, capsys, tmp_path, "vision-like")
    assert code == 0, err
    row = next(p for p in json.loads(out)["packages"] if p["name"] == "vision-like")
    assert row["coupling"] == "torch-abi" and row["abi"]["kind"] == "locked" and row["abi"]["refusal"] is None, row


def test_an_untied_native_wheel_past_the_budget_is_planned_not_refused_with_a_build_hint(companions, capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """scipy 1.18.1's case: a native wheel with no tie to torch whose member's tables lie past the
    4 MiB budget. Before: refused as unknown ("build it from its sdist"); now planned by what its
    members name, saying what was not read."""
    code, out, err = _resolve(*companions, capsys, tmp_path, "sci-like")
    assert code == 0 and "--build" not in err, err
    row = next(p for p in json.loads(out)["packages"] if p["name"] == "sci-like")
    assert row["coupling"] in ("agnostic", "cuda") and "nothing ties it to torch" in row["reason"], row


def test_a_tied_wheel_past_its_scan_budget_is_unknown_naming_the_budget_and_read_with_a_larger_one(companions, capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The same 7 MB member in a wheel that requires torch: with --scan-budget 1M its dynamic section
    is not reached: unknown, naming the budget and the ways that fit (never a guess); with the
    default budget it is read (it needs CUDA 12, which the kept CUDA 13 torch refuses, by name)."""
    code, out, err = _resolve(*companions, capsys, tmp_path, "tied-big", extra=("--scan-budget", "1M"))
    assert code == 1 and "tied-big 1.0" in err and "budget" in err, err
    assert "--scan-budget" in err and "--abi-mismatch warn" in err
    code, out, err = _resolve(*companions, capsys, tmp_path, "tied-big")
    assert code == 1 and "tied-big 1.0" in err and "needs CUDA 12" in err and "budget" not in err, err


def test_the_ways_out_of_an_unknown_fit_why() -> None:
    from resolve_gpu_stack.resolver.builds import WayFacts, ways_for

    budget = "its shared objects could not be judged: not scanned past the 4194304-byte budget"
    tied = ways_for("tied-ext", WayFacts(sdist="tied_ext-1.0.tar.gz", unknown=budget, tied=True))
    assert "--scan-budget" in tied[0] and any("--build tied-ext" in w for w in tied)
    untied = ways_for("scipy", WayFacts(sdist="scipy-1.18.1.tar.gz", unknown="not scanned: the server ignored Range", tied=False))
    assert "Range" in untied[0] and not any("--build" in w or "--package-index" in w for w in untied)
    assert any("nothing ties it to torch" in w for w in untied)
    locked = ways_for("locked-bad", WayFacts(sdist="locked_bad-1.0.tar.gz", tied=False))  # built for another torch: a build helps
    assert any("--build locked-bad" in w for w in locked)
