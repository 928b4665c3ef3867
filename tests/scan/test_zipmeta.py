"""zipmeta: reading a wheel's METADATA from the tail, central directory and member bytes alone."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from pathlib import Path

import pytest
from support.wheels import build_wheel, metadata_text

from resolve_gpu_stack.scan import zipmeta
from resolve_gpu_stack.scan.zipmeta import (
    MemberTooLarge,
    NeedMoreBytes,
    ZipError,
    find_eocd,
    inflate_member,
    member_span,
    metadata_member,
    metadata_name,
    parse_central_directory,
    read_metadata_from_zip,
)


def _zip(members: dict[str, bytes], *, comment: bytes = b"", method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=method) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        zf.comment = comment
    return buf.getvalue()


def _metadata_via_ranges(data: bytes, tail_size: int = zipmeta.TAIL_BYTES) -> bytes:
    """What the HTTP layer does, on an in-memory file: tail, then directory, then member."""
    size = len(data)
    tail = data[max(0, size - tail_size) :]
    eocd = find_eocd(tail, size)
    entries = parse_central_directory(data[eocd.cd_offset : eocd.cd_offset + eocd.cd_size], eocd)
    entry = metadata_member(entries)
    start, end = member_span(entry, size)
    return inflate_member(data[start:end], entry, max_size=2**20)


def test_reads_metadata_of_a_real_wheel_and_agrees_with_zipfile(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path, "demo-pkg", "1.2.3", requires=["numpy>=1"], padding=200_000)
    data = wheel.path.read_bytes()
    tail = data[-zipmeta.TAIL_BYTES :]
    eocd = find_eocd(tail, len(data))
    entries = parse_central_directory(data[eocd.cd_offset : eocd.cd_offset + eocd.cd_size], eocd)
    with zipfile.ZipFile(wheel.path) as zf:
        infos = zf.infolist()
    assert [e.name for e in entries] == [i.filename for i in infos]
    assert [(e.header_offset, e.compressed_size, e.uncompressed_size, e.crc32) for e in entries] == [
        (i.header_offset, i.compress_size, i.file_size, i.CRC) for i in infos
    ]
    assert not eocd.zip64 and eocd.shift == 0
    assert metadata_member(entries).name == "demo_pkg-1.2.3.dist-info/METADATA"
    assert _metadata_via_ranges(data) == wheel.metadata == metadata_text("demo-pkg", "1.2.3", ["numpy>=1"])


def test_stored_member_is_read() -> None:
    meta = metadata_text("x", "1")
    data = _zip({"x/__init__.py": b"", "x-1.dist-info/METADATA": meta}, method=zipfile.ZIP_STORED)
    assert _metadata_via_ranges(data) == meta


def test_comment_with_a_fake_end_record_inside_is_skipped() -> None:
    meta = metadata_text("x", "1")
    comment = b"built by a tool PK\x05\x06" + b"\x00" * 18 + b" trailing words"
    data = _zip({"x-1.dist-info/METADATA": meta}, comment=comment)
    eocd = find_eocd(data[-4096:], len(data))
    assert eocd.comment == comment
    assert _metadata_via_ranges(data) == meta


def test_largest_possible_comment_fits_in_the_default_tail() -> None:
    meta = metadata_text("x", "1")
    data = _zip({"pad.bin": bytes(300_000), "x-1.dist-info/METADATA": meta}, comment=b"c" * 0xFFFF)
    assert _metadata_via_ranges(data) == meta


def test_tail_too_short_for_the_end_record_says_so() -> None:
    data = _zip({"pad.bin": bytes(300_000), "x-1.dist-info/METADATA": b"Name: x\n"}, comment=b"c" * 5000)
    with pytest.raises(ZipError, match="no end of central directory in the last 1000 bytes"):
        find_eocd(data[-1000:], len(data))


def test_zip64_written_by_cpython_many_entries() -> None:
    buf = io.BytesIO()
    meta = metadata_text("many", "1")
    with zipfile.ZipFile(buf, "w") as zf:
        for i in range(0x10000):  # one more than a classic end record can count
            zf.writestr(f"many/{i}", b"")
        zf.writestr("many-1.dist-info/METADATA", meta, compress_type=zipfile.ZIP_DEFLATED)
    data = buf.getvalue()
    eocd = find_eocd(data[-zipmeta.TAIL_BYTES :], len(data))
    assert eocd.zip64 and eocd.entries == 0x10001
    assert _metadata_via_ranges(data) == meta


def _zip64_by_hand(members: dict[str, bytes], prefix: bytes = b"") -> bytes:
    """Every size and offset in the zip64 extra fields (0xFFFFFFFF in the classic ones)."""
    out = bytearray(prefix)
    cd = bytearray()
    for name, content in members.items():
        comp = zlib.compress(content)[2:-4]  # raw deflate
        crc = zlib.crc32(content)
        nb = name.encode()
        offset = len(out) - len(prefix)
        local_extra = struct.pack("<2H2Q", 1, 16, len(content), len(comp))
        out += struct.pack("<4s2B4HL2L2H", b"PK\x03\x04", 45, 0, 0, 8, 0, 0x21, crc, 0xFFFFFFFF, 0xFFFFFFFF, len(nb), len(local_extra))
        out += nb + local_extra + comp
        cd_extra = struct.pack("<2H3Q", 1, 24, len(content), len(comp), offset)
        cd += struct.pack(
            "<4s4B4HL2L5H2L",
            b"PK\x01\x02",
            45,
            3,
            45,
            0,
            0,
            8,
            0,
            0x21,
            crc,
            0xFFFFFFFF,
            0xFFFFFFFF,
            len(nb),
            len(cd_extra),
            0,
            0,
            0,
            0,
            0xFFFFFFFF,
        )
        cd += nb + cd_extra
    cd_offset = len(out) - len(prefix)
    out += cd
    z64 = len(out) - len(prefix)
    n = len(members)
    out += struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, n, n, len(cd), cd_offset)
    out += struct.pack("<4sLQL", b"PK\x06\x07", 0, z64, 1)
    out += struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    return bytes(out)


def test_zip64_extra_fields_for_sizes_and_offsets() -> None:
    meta = metadata_text("big", "2.0", ["torch"])
    data = _zip64_by_hand({"big/__init__.py": b"x = 1\n" * 50, "big-2.0.dist-info/METADATA": meta})
    with zipfile.ZipFile(io.BytesIO(data)) as zf:  # the fixture is a zip CPython accepts
        assert zf.read("big-2.0.dist-info/METADATA") == meta
        offsets = [i.header_offset for i in zf.infolist()]
    eocd = find_eocd(data, len(data))
    entries = parse_central_directory(data[eocd.cd_offset :], eocd)
    assert eocd.zip64 and [e.header_offset for e in entries] == offsets
    assert entries[1].uncompressed_size == len(meta)
    assert _metadata_via_ranges(data) == meta


def test_bytes_prepended_to_the_archive_shift_every_offset() -> None:
    meta = metadata_text("sfx", "1")
    plain = _zip({"sfx/a.py": b"a" * 1000, "sfx-1.dist-info/METADATA": meta})
    data = b"#!/bin/sh\nexit 0\n" + plain
    eocd = find_eocd(data, len(data))
    assert eocd.shift == 17
    assert _metadata_via_ranges(data) == meta
    z64 = _zip64_by_hand({"sfx-1.dist-info/METADATA": meta}, prefix=b"JUNK" * 10)
    assert find_eocd(z64, len(z64)).shift == 40
    assert _metadata_via_ranges(z64) == meta


def test_not_a_zip() -> None:
    with pytest.raises(ZipError, match="not a zip file"):
        find_eocd(b"<html>definitely not a wheel</html>", 35)


def test_central_directory_shorter_than_announced() -> None:
    data = _zip({"x-1.dist-info/METADATA": b"Name: x\n"})
    eocd = find_eocd(data, len(data))
    with pytest.raises(ZipError, match="central directory truncated"):
        parse_central_directory(data[eocd.cd_offset : eocd.cd_offset + 10], eocd)


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (["a/__init__.py", "a-1.dist-info/METADATA", "a-1.dist-info/RECORD"], "a-1.dist-info/METADATA"),
        # nested dist-info dirs (vendored packages) and .data dirs are not the wheel's own
        (["a-1.dist-info/METADATA", "a/_vendor/b-2.dist-info/METADATA", "a-1.data/METADATA"], "a-1.dist-info/METADATA"),
    ],
)
def test_metadata_name_picks_the_top_level_dist_info(names: list[str], expected: str) -> None:
    assert metadata_name(names) == expected


def test_metadata_missing_is_a_clear_error() -> None:
    with pytest.raises(ZipError, match=r"no \*\.dist-info/METADATA"):
        metadata_name(["a/__init__.py", "a-1.dist-info/RECORD", "a/_vendor/b-1.dist-info/METADATA"])


def test_two_dist_infos_are_a_clear_error() -> None:
    with pytest.raises(ZipError, match="2 dist-info directories with METADATA: a-1.dist-info/METADATA, b-1.dist-info/METADATA"):
        metadata_name(["b-1.dist-info/METADATA", "a-1.dist-info/METADATA"])


def _entry_and_blob(data: bytes) -> tuple[zipmeta.ZipEntry, bytes]:
    eocd = find_eocd(data, len(data))
    entry = metadata_member(parse_central_directory(data[eocd.cd_offset :], eocd))
    return entry, data[entry.header_offset : eocd.cd_offset]


def test_short_blob_asks_for_exactly_the_bytes_it_needs() -> None:
    meta = metadata_text("x", "1", [f"dep{i}" for i in range(200)])
    entry, blob = _entry_and_blob(_zip({"x-1.dist-info/METADATA": meta}))
    with pytest.raises(NeedMoreBytes) as info:
        inflate_member(blob[:100], entry, max_size=2**20)
    assert info.value.needed == len(blob)  # local header + name + data, nothing more
    assert inflate_member(blob[: info.value.needed], entry, max_size=2**20) == meta


def test_corrupted_member_fails_its_crc() -> None:
    meta = metadata_text("x", "1")
    entry, blob = _entry_and_blob(_zip({"x-1.dist-info/METADATA": meta}, method=zipfile.ZIP_STORED))
    bad = bytearray(blob)
    bad[-3] ^= 0xFF
    with pytest.raises(ZipError, match="does not match its size/CRC"):
        inflate_member(bytes(bad), entry, max_size=2**20)


def test_zip_bomb_refused_by_its_declared_size() -> None:
    entry, blob = _entry_and_blob(_zip({"x-1.dist-info/METADATA": bytes(5 * 2**20)}))
    assert entry.compressed_size < 10_000
    with pytest.raises(MemberTooLarge, match="over the 1048576-byte cap"):
        inflate_member(blob, entry, max_size=2**20)


def test_zip_bomb_refused_even_when_its_header_lies() -> None:
    entry, blob = _entry_and_blob(_zip({"x-1.dist-info/METADATA": bytes(5 * 2**20)}))
    liar = zipmeta.ZipEntry(**{**{f: getattr(entry, f) for f in entry.__slots__}, "uncompressed_size": 100})
    with pytest.raises(MemberTooLarge, match="inflates past"):
        inflate_member(blob, liar, max_size=2**20)


def test_unsupported_compression_method() -> None:
    entry, blob = _entry_and_blob(_zip({"x-1.dist-info/METADATA": b"Name: x\n" * 50}, method=zipfile.ZIP_BZIP2))
    with pytest.raises(ZipError, match="compression method 12 is not supported"):
        inflate_member(blob, entry, max_size=2**20)


def test_read_metadata_from_a_whole_zip() -> None:
    meta = metadata_text("x", "1")
    data = _zip({"x/__init__.py": b"", "x-1.dist-info/METADATA": meta}, method=zipfile.ZIP_BZIP2)
    assert read_metadata_from_zip(io.BytesIO(data), max_size=2**20) == meta
    with pytest.raises(MemberTooLarge):
        read_metadata_from_zip(io.BytesIO(data), max_size=10)
    with pytest.raises(ZipError, match="not a valid zip file"):
        read_metadata_from_zip(io.BytesIO(b"garbage" * 100), max_size=2**20)


def test_a_name_filter_steps_over_the_other_entries_and_still_checks_every_header() -> None:
    """``names``: the entries a reader takes (METADATA, the shared objects) come out exactly as in a
    full read; the rest are stepped over, and a broken header among them is still an error that
    counts every entry before it."""
    from resolve_gpu_stack.scan.wheelscan.result import may_be_scanned

    members = {f"demo/mod{i}.py": b"x = 1\n" for i in range(300)} | {
        "demo/_c.cpython-312-x86_64-linux-gnu.so": b"\x7fELF",
        "demo-1.0.dist-info/METADATA": b"Name: demo\n",
    }
    data = _zip(members)
    eocd = find_eocd(data[-zipmeta.TAIL_BYTES :], len(data))
    directory = data[eocd.cd_offset : eocd.cd_offset + eocd.cd_size]
    full = parse_central_directory(directory, eocd)
    assert parse_central_directory(directory, eocd, names=zipmeta.may_be_metadata) == [e for e in full if e.name.endswith("/METADATA")]
    assert [e.name for e in parse_central_directory(directory, eocd, names=may_be_scanned)] == [
        "demo/_c.cpython-312-x86_64-linux-gnu.so",
        "demo-1.0.dist-info/METADATA",
    ]
    broken = bytearray(directory)
    second = broken.index(b"PK\x01\x02", 4)
    broken[second : second + 4] = b"XXXX"
    with pytest.raises(ZipError, match="entry #2 at"):
        parse_central_directory(bytes(broken), eocd, names=zipmeta.may_be_metadata)
