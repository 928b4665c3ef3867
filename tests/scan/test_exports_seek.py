"""The kept torch's exports read from its library's two ends (scan/elfstream.py over
scan/deflateseek.py): a released ``libtorch_cpu.so`` has its dynamic section and string table
in the last fifth of 448 MB, and inflating the member up to them read 510 MB of the torch wheel.
Over a real loopback server: the same exports as the whole object gives, for a few MB of the
member; a layout the tail does not hold is read from the start as before; the budget holds."""

from __future__ import annotations

import random
import shutil
import subprocess
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.version import Version
from support.elfbuild import compile_extension, have_cxx, move_dynamic, patchelf_layout, torch_stubs, wheel_bytes
from support.forgery import low_entropy
from support.server import IndexServer

from resolve_gpu_stack.env.confirm import wheel_exports
from resolve_gpu_stack.env.exports import library_exports
from resolve_gpu_stack.model import IndexFile
from resolve_gpu_stack.net.http import HttpFetcher
from resolve_gpu_stack.net.scan.classify import STREAM_PIECE
from resolve_gpu_stack.net.scan.exports import WheelExports
from resolve_gpu_stack.net.settings import FetchSettings, TransportSettings
from resolve_gpu_stack.scan import elf, elfstream, zipmeta
from resolve_gpu_stack.scan.elf.symbols import dynamic_symbols
from resolve_gpu_stack.scan.elfstream import ElfStream

MB = 2**20
LIB = "torch/lib/libtorch_cpu.so"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[IndexServer, dict[str, bytes]]]:
    if not have_cxx():
        pytest.skip("needs a C++ compiler to build the shared objects")
    root = tmp_path_factory.mktemp("seek")
    lib = compile_extension(root, "lib.so", torch_stubs(root / "libs"), calls=("cxx_check", "shim_device"))
    objects = {
        # incompressible pad: stored blocks before the tables
        "stored": move_dynamic(lib, pad=24 * MB, seed=1),
        # a pad of 16 byte values: dynamic Huffman blocks before the tables
        "dynamic": move_dynamic(lib, filler=low_entropy(24 * MB, 2)),
        # the tables where the linker put them, 12 MB of data after them: not for the tail
        "early": lib + random.Random(3).randbytes(12 * MB),
        # torch's own layout: .dynamic past the middle, 12 MB on, the section headers and the moved tables
        "sections": patchelf_layout(lib, before=16 * MB, gap=12 * MB, seed=4),
        # the same, its .dynamic section header left where the section was: they disagree with PT_DYNAMIC
        "stale": patchelf_layout(lib, before=16 * MB, gap=12 * MB, seed=4, stale_dynamic=True),
        # the aarch64 builds' layout: the program headers moved too, past the middle (4 MB before the end here)
        "headers": patchelf_layout(lib, before=16 * MB, gap=4 * MB, seed=5, headers_at=2 * MB),
    }
    for name, data in objects.items():
        (root / f"torch-{name}.whl").write_bytes(wheel_bytes({LIB: data, "torch/__init__.py": b""}))
    (root / "torch-headers-stored.whl").write_bytes(wheel_bytes({LIB: objects["headers"], "torch/__init__.py": b""}, method=zipfile.ZIP_STORED))
    with IndexServer(root) as srv:
        yield srv, objects


def _exports(srv: IndexServer, name: str, *, budget: int | None = None) -> tuple[frozenset[str] | None, str, int]:
    path = Path(srv.root) / f"torch-{name}.whl"
    file = IndexFile(filename=path.name, url=srv.url + path.name, name="torch", version=Version("2.15.0"), size=path.stat().st_size)
    before = srv.bytes_sent
    with HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None) as fetcher:
        found = WheelExports(fetcher.transport, None, budget=budget)("2.15.0", file)
    return found.symbols, found.source, srv.bytes_sent - before


def _truth(data: bytes) -> frozenset[str]:
    return frozenset(dynamic_symbols(data, exports=True).exports)


def _compressed(srv: IndexServer, name: str) -> int:
    data = (Path(srv.root) / f"torch-{name}.whl").read_bytes()
    eocd = zipmeta.find_eocd(data[-zipmeta.TAIL_BYTES :], len(data))
    entries = zipmeta.parse_central_directory(data[eocd.cd_offset : eocd.cd_offset + eocd.cd_size], eocd)
    return next(e.compressed_size for e in entries if e.name == LIB)


@pytest.mark.parametrize("layout", ["stored", "dynamic"])
def test_a_library_whose_tables_are_at_its_end_is_read_from_its_two_ends(served, layout: str) -> None:  # type: ignore[no-untyped-def]
    srv, objects = served
    assert elf.read_layout(objects[layout][:4096]).dynamic.offset > len(objects[layout]) // 2  # type: ignore[union-attr]
    symbols, source, sent = _exports(srv, layout)
    assert symbols == _truth(objects[layout]) and symbols, source
    assert sent < _compressed(srv, layout) // 3, f"{sent} bytes sent of a {_compressed(srv, layout)}-byte member"


def test_the_same_exports_as_inflating_the_member_from_its_start(served, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    srv, _ = served
    seeking, _, sent = _exports(srv, "dynamic")
    monkeypatch.setattr(elfstream, "SEEK_MIN", 2**40)  # no member is entered at its end
    streamed, _, streamed_sent = _exports(srv, "dynamic")
    assert seeking == streamed and streamed_sent > 3 * sent


def test_section_headers_beside_the_moved_tables_spare_reading_back_to_the_dynamic_section(served) -> None:  # type: ignore[no-untyped-def]
    """torch's libraries as patchelf leaves them: the section headers at the start of the last
    segment, with the string table; .dynamic 91 MB before it (12 MB here). Checked against the
    program headers, they give the same exports without the bytes between; where they disagree,
    the member is read by PT_DYNAMIC, and the answer is the same."""
    srv, objects = served
    layout = elf.read_layout(objects["sections"][:4096])
    assert layout.dynamic is not None and layout.dynamic.offset > len(objects["sections"]) // 2 and layout.shoff > layout.dynamic.offset + 12 * MB
    symbols, source, sent = _exports(srv, "sections")
    assert symbols == _truth(objects["sections"]) and symbols, source
    assert sent < elfstream.TAIL_MIN + MB, f"{sent} bytes sent: the 12 MB between .dynamic and the tables were read"
    stale, stale_source, stale_sent = _exports(srv, "stale")
    assert stale == symbols, stale_source
    assert stale_sent > 12 * MB  # read back to PT_DYNAMIC's segment: the section headers were not trusted
    import zlib

    for name, method, passes in (("sections", "sections", 1), ("stale", "dynamic", 1)):
        c = zlib.compressobj(6, zlib.DEFLATED, -15)
        stream = _fed(objects[name], c.compress(objects[name]) + c.flush(), sections=True)
        found = stream.structure
        assert found is not None and found.symbols is not None, stream.error
        assert (found.symbols.method, stream.passes) == (method, passes), name
        assert frozenset(found.symbols.exports) == symbols
        assert found.libraries.complete == (method == "dynamic")  # the section headers name no library: not "needs nothing"


def test_tables_where_the_linker_put_them_are_read_from_the_start(served) -> None:  # type: ignore[no-untyped-def]
    srv, objects = served
    symbols, source, _ = _exports(srv, "early")
    assert symbols == _truth(objects["early"]) and symbols, source


def test_the_budget_holds_for_a_tail_read_too(served) -> None:  # type: ignore[no-untyped-def]
    srv, _ = served
    symbols, source, sent = _exports(srv, "dynamic", budget=MB)
    assert symbols is None and "budget" in source, source
    assert sent < 3 * MB


def _fed(data: bytes, comp: bytes, *, sections: bool = False) -> ElfStream:
    """An ``ElfStream`` of ``data`` (deflated: ``comp``) fed as a streaming reader feeds it: what
    it asks for, in pieces of ``STREAM_PIECE`` (its end at once)."""
    stream = ElfStream(zipmeta.DEFLATED, len(data), len(comp), exports=True, sections=sections)
    while (span := stream.wanted(len(comp))) is not None:
        end = span[1] if stream.reading_end else min(span[1], span[0] + STREAM_PIECE)
        stream.feed(span[0], comp[span[0] : end])
    return stream


def test_a_corrupt_end_is_an_error_not_a_guess(served) -> None:  # type: ignore[no-untyped-def]
    """The last MBs of a member's deflate data replaced by noise: no block start inflates to the
    end, the stream from the start is tried, and it stops at the bad data with an error."""
    import zlib

    _, objects = served
    data = objects["dynamic"]
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    comp = bytearray(c.compress(data) + c.flush())
    comp[-3 * MB :] = random.Random(9).randbytes(3 * MB)
    stream = _fed(data, bytes(comp))
    assert stream.structure is None and "bad deflate data" in (stream.error or ""), stream.error


def test_tables_that_copy_bytes_from_before_the_entry_point_are_read_from_the_start(served) -> None:  # type: ignore[no-untyped-def]
    """The 64 MB before the tables are 40-byte pieces of the tables themselves: deflate writes them,
    and the tables, as copies of copies reaching back past any entry point near the end, so every
    byte there depends on the window the entry point lacks. None of them is used; the stream from
    the start reads the tables, and the answer is the same."""
    import zlib

    _, objects = served
    lib, pad = objects["early"][: -12 * MB], 64 * MB
    region = move_dynamic(lib, pad=pad, zeros=True)[len(lib) + pad :]  # what move_dynamic puts after the pad
    rng = random.Random(10)
    pieces = b"".join(region[o : o + 40] for o in (rng.randrange(len(region) - 40) for _ in range(pad // 40 + 1)))
    data = move_dynamic(lib, filler=pieces[:pad])
    assert data[len(lib) + pad :] == region
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    comp = c.compress(data) + c.flush()
    assert len(comp) >= elfstream.SEEK_MIN
    stream = _fed(data, comp)
    assert stream.structure is not None and stream.structure.symbols is not None, stream.error
    assert frozenset(stream.structure.symbols.exports) == _truth(data)
    assert stream.consumed > len(comp)  # the end was read, then all of it from the start


def test_program_headers_moved_near_the_end_are_read_there_by_range_and_from_disk(served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """torch 2.15.0's aarch64 builds: the program header table 419 MB into the 514 MB
    ``libtorch_cuda.so`` (199 MB into ``libtorch_cpu.so``), in a segment of its own, the section
    headers and the string table at the end; the first 4 KB hold only the ELF header. Their
    exports are those of the library before the move, read by range from the member's end
    (deflated: one entered read, not the bytes before the headers; stored: a few range reads),
    from the wheel on disk, and from the library on disk."""
    srv, objects = served
    data, lib_before = objects["headers"], objects["early"][: -12 * MB]
    phoff, _ = elf.program_header_table(data[:4096])
    assert phoff > len(data) // 2 and elf.read_layout(data[:4096], table=data[phoff : phoff + 4096]).shoff > phoff
    with pytest.raises(elf.ElfTruncated):
        elf.read_layout(data[:4096])
    truth = _truth(lib_before)
    assert truth and _truth(data) == truth
    if shutil.which("nm"):  # binutils agrees, through the section headers
        (tmp_path / "lib.so").write_bytes(data)
        listed = subprocess.run(["nm", "-D", "--defined-only", "--format=posix", str(tmp_path / "lib.so")], capture_output=True, text=True, check=True)
        assert {line.split(" ")[0].split("@")[0] for line in listed.stdout.splitlines()} == truth

    symbols, source, sent = _exports(srv, "headers")
    assert symbols == truth, source
    assert sent < _compressed(srv, "headers") // 2, f"{sent} bytes sent: the member was read from its start (80% of it lies before its headers)"
    stored, stored_source, stored_sent = _exports(srv, "headers-stored")
    assert stored == truth, stored_source
    assert stored_sent < MB, stored_sent

    import zlib

    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    comp = c.compress(data) + c.flush()
    stream = _fed(data, comp, sections=True)
    found = stream.structure
    assert found is not None and found.symbols is not None, stream.error
    assert (found.symbols.method, stream.passes, frozenset(found.symbols.exports)) == ("sections", 1, truth)
    assert stream.consumed < len(comp) // 2
    monkeypatch.setattr(elfstream, "SEEK_MIN", 2**40)  # from the start only: the headers kept as the stream passes them
    streamed = _fed(data, comp, sections=True)
    assert streamed.structure is not None and streamed.structure.symbols is not None, streamed.error
    assert frozenset(streamed.structure.symbols.exports) == truth and streamed.passes == 1

    for name in ("headers", "headers-stored"):  # install --lock's torch wheel at hand
        found_on_disk = wheel_exports(Path(srv.root) / f"torch-{name}.whl", "2.15.0")
        assert found_on_disk.symbols == truth, found_on_disk.source
    (tmp_path / "libtorch_cpu.so").write_bytes(data)  # the installed torch
    assert frozenset(library_exports(tmp_path / "libtorch_cpu.so")) == truth


def test_program_headers_past_the_end_or_impossible_are_an_error_not_a_guess(served) -> None:  # type: ignore[no-untyped-def]
    """An ELF header pointing its program headers past the object's end, or at a count no object
    has: an error naming it, by range and from the stream."""
    import struct
    import zlib

    _, objects = served
    data = bytearray(objects["headers"])
    for field, value, why in ((32, len(data) - 100, "run past the end"), (56, 0xFFFF, "program header count")):
        bad = bytearray(data)
        struct.pack_into("<Q" if field == 32 else "<H", bad, field, value)
        c = zlib.compressobj(6, zlib.DEFLATED, -15)
        stream = _fed(bytes(bad), c.compress(bytes(bad)) + c.flush(), sections=True)
        assert stream.structure is None and why in (stream.error or ""), stream.error
