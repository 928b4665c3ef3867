"""Read a wheel's ``*.dist-info/METADATA`` from pieces of its zip: pure functions over bytes.

The HTTP layer fetches the last few KiB of a wheel (``Range: bytes=-N``), then, only if needed,
the central directory and the METADATA member; these functions say what to fetch next and
decode what came back. No I/O here.

Zip layout, end first (APPNOTE 4.3): ``[local header + data]* [central directory]
[zip64 end record] [zip64 locator] [end of central directory + comment]``. The zip64 records
exist only when a count, size or offset overflows the 16/32-bit fields of the classic record.
"""

from __future__ import annotations

import struct
import zipfile
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import IO

EOCD_SIG = b"PK\x05\x06"
ZIP64_LOCATOR_SIG = b"PK\x06\x07"
ZIP64_EOCD_SIG = b"PK\x06\x06"
CD_SIG = b"PK\x01\x02"
LOCAL_SIG = b"PK\x03\x04"

_EOCD = struct.Struct("<4s4H2LH")  # sig, disk, cd disk, entries here, entries, cd size, cd offset, comment len
_ZIP64_LOCATOR = struct.Struct("<4sLQL")  # sig, disk, zip64 eocd offset, disks
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")  # sig, size, made by, needed, disk, cd disk, entries here, entries, cd size, cd offset
_CD_ENTRY = struct.Struct("<4s4B4HL2L5H2L")
_LOCAL = struct.Struct("<4s2B4HL2L2H")
LOCAL_HEADER_SIZE = _LOCAL.size  # a local header's fixed part; its name and extra field follow

MAX_COMMENT = 0xFFFF
# Enough of the tail to hold the largest comment, the end record and both zip64 records.
TAIL_BYTES = MAX_COMMENT + _EOCD.size + _ZIP64_LOCATOR.size + _ZIP64_EOCD.size + 1024
# Extra-field bytes we allow for in a local header beyond what the central directory shows.
LOCAL_EXTRA_SLACK = 1024

STORED = 0
DEFLATED = 8


class ZipError(ValueError):
    """The bytes are not a usable zip, or the METADATA member cannot be read from them."""


class MemberTooLarge(ZipError):
    """METADATA (compressed or inflated) is over the caller's cap: a zip bomb or a broken wheel."""


class NeedMoreBytes(ZipError):
    """The blob given ends before the member does; fetch ``needed`` bytes from the same start."""

    def __init__(self, needed: int) -> None:
        super().__init__(f"need {needed} bytes from the local header on")
        self.needed = needed


@dataclass(frozen=True, slots=True)
class EndOfCentralDirectory:
    """A zip's end-of-central-directory record: where its central directory lies."""

    cd_offset: int  # absolute position of the central directory in the file
    cd_size: int
    entries: int
    comment: bytes = b""
    zip64: bool = False
    shift: int = 0  # bytes prepended to the archive: add to every stored offset


@dataclass(frozen=True, slots=True)
class ZipEntry:
    """One central directory entry: a member's name, method, sizes and where it lies."""

    name: str
    method: int
    flags: int
    crc32: int
    compressed_size: int
    uncompressed_size: int
    header_offset: int  # absolute position of the local header in the file
    extra_length: int = 0  # length of the central-directory extra field (a hint for the local one)

    @property
    def encrypted(self) -> bool:
        return bool(self.flags & 0x1)


def find_eocd(tail: bytes, file_size: int) -> EndOfCentralDirectory:
    """Locate the central directory from the last ``len(tail)`` bytes of a file of ``file_size``.

    Scans backwards for the end record whose comment length reaches exactly the end of the file
    (a comment may itself contain the signature), then follows the zip64 locator if present.
    """
    if len(tail) > file_size:
        raise ZipError(f"tail of {len(tail)} bytes is longer than the file ({file_size} bytes)")
    tail_start = file_size - len(tail)
    pos = len(tail) - _EOCD.size
    lowest = max(0, len(tail) - _EOCD.size - MAX_COMMENT)
    while pos >= lowest:
        pos = tail.rfind(EOCD_SIG, lowest, pos + 4)
        if pos < 0:
            break
        fields = _EOCD.unpack_from(tail, pos)
        if pos + _EOCD.size + fields[7] == len(tail):
            return _read_end_records(tail, pos, fields, tail_start)
        pos -= 1
    if tail_start > 0 and len(tail) < TAIL_BYTES:
        raise ZipError(f"no end of central directory in the last {len(tail)} bytes; fetch at least {TAIL_BYTES}")
    raise ZipError("not a zip file: no end of central directory record")


def _read_end_records(tail: bytes, pos: int, fields: tuple[int, ...], tail_start: int) -> EndOfCentralDirectory:
    _, disk, cd_disk, _, entries, cd_size, cd_offset, comment_len = fields
    comment = tail[pos + _EOCD.size : pos + _EOCD.size + comment_len]
    if disk != 0 or cd_disk != 0:
        raise ZipError("multi-disk zip archives are not supported")
    loc_pos = pos - _ZIP64_LOCATOR.size
    zip64 = loc_pos >= 0 and tail[loc_pos : loc_pos + 4] == ZIP64_LOCATOR_SIG
    records_start = tail_start + pos  # where the central directory should end
    if zip64:
        z64_pos = _zip64_record(tail, loc_pos, tail_start)
        z = _ZIP64_EOCD.unpack_from(tail, z64_pos)
        entries, cd_size, cd_offset = z[7], z[8], z[9]
        records_start = tail_start + z64_pos
    elif 0xFFFF in (entries,) or 0xFFFFFFFF in (cd_size, cd_offset):
        raise ZipError("end record says zip64 but there is no zip64 locator")
    shift = records_start - cd_size - cd_offset
    if shift < 0:
        raise ZipError(f"central directory ({cd_size} bytes at {cd_offset}) runs past the end records")
    return EndOfCentralDirectory(cd_offset=cd_offset + shift, cd_size=cd_size, entries=entries, comment=comment, zip64=zip64, shift=shift)


def _zip64_record(tail: bytes, loc_pos: int, tail_start: int) -> int:
    """Where in ``tail`` the zip64 end record is: right before its locator, or where the locator
    says (a stored offset may be shifted by prepended bytes)."""
    _, _, z64_offset, _ = _ZIP64_LOCATOR.unpack_from(tail, loc_pos)
    z64_pos = loc_pos - _ZIP64_EOCD.size
    if z64_pos >= 0 and tail[z64_pos : z64_pos + 4] == ZIP64_EOCD_SIG:
        return z64_pos
    rel: int = z64_offset - tail_start
    if not 0 <= rel <= len(tail) - _ZIP64_EOCD.size or tail[rel : rel + 4] != ZIP64_EOCD_SIG:
        raise ZipError("zip64 end of central directory record not found")
    return rel


def parse_central_directory(data: bytes, eocd: EndOfCentralDirectory, *, names: Callable[[bytes], bool] | None = None) -> list[ZipEntry]:
    """The entries of a central directory; ``data`` starts at ``eocd.cd_offset``. ``names`` (an
    entry's raw name -> whether it is wanted): the others are stepped over, their headers checked
    and nothing else read (a wheel of thousands of ``.py`` files, read for one or a few members)."""
    if len(data) < eocd.cd_size:
        raise ZipError(f"central directory truncated: {len(data)} of {eocd.cd_size} bytes")
    out: list[ZipEntry] = []
    pos = 0
    for i in range(eocd.entries):
        if pos + _CD_ENTRY.size > eocd.cd_size or data[pos : pos + 4] != CD_SIG:
            raise ZipError(f"bad central directory entry #{i + 1} at offset {eocd.cd_offset + pos}")
        f = _CD_ENTRY.unpack_from(data, pos)
        flags, method, crc = f[5], f[6], f[9]
        csize, usize, name_len, extra_len, comment_len, offset = f[10], f[11], f[12], f[13], f[14], f[18]
        start = pos + _CD_ENTRY.size
        raw_name = data[start : start + name_len]
        if names is not None and not names(raw_name):
            pos = start + name_len + extra_len + comment_len
            continue
        extra = data[start + name_len : start + name_len + extra_len]
        usize, csize, offset = _apply_zip64_extra(extra, usize, csize, offset)
        name = raw_name.decode("utf-8" if flags & 0x800 else "cp437", errors="replace")
        out.append(
            ZipEntry(
                name=name,
                method=method,
                flags=flags,
                crc32=crc,
                compressed_size=csize,
                uncompressed_size=usize,
                header_offset=offset + eocd.shift,
                extra_length=extra_len,
            )
        )
        pos = start + name_len + extra_len + comment_len
    return out


def _apply_zip64_extra(extra: bytes, usize: int, csize: int, offset: int) -> tuple[int, int, int]:
    """Replace 0xFFFFFFFF fields with their 64-bit values from the zip64 extra block (id 1)."""
    pos = 0
    while pos + 4 <= len(extra):
        tag, size = struct.unpack_from("<2H", extra, pos)
        if tag == 0x0001:
            values = list(struct.unpack_from(f"<{min(size, len(extra) - pos - 4) // 8}Q", extra, pos + 4))
            if usize == 0xFFFFFFFF and values:
                usize = values.pop(0)
            if csize == 0xFFFFFFFF and values:
                csize = values.pop(0)
            if offset == 0xFFFFFFFF and values:
                offset = values.pop(0)
            break
        pos += 4 + size
    if 0xFFFFFFFF in (usize, csize, offset):
        raise ZipError("a zip64 entry lacks its zip64 extra field")
    return usize, csize, offset


def metadata_name(names: Iterable[str]) -> str:
    """The one ``<top-level>.dist-info/METADATA`` among ``names``; anything else is an error."""
    found = sorted(n for n in names if n.count("/") == 1 and n.endswith("/METADATA") and n.split("/", 1)[0].endswith(".dist-info"))
    if not found:
        raise ZipError("no *.dist-info/METADATA in the wheel")
    if len(found) > 1:
        raise ZipError(f"{len(found)} dist-info directories with METADATA: {', '.join(found)}")
    return found[0]


def may_be_metadata(raw_name: bytes) -> bool:
    """``parse_central_directory``'s ``names`` for ``metadata_member``: every entry it could take."""
    return raw_name.endswith(b"/METADATA")


def metadata_member(entries: Sequence[ZipEntry]) -> ZipEntry:
    """The central-directory entry of the wheel's METADATA (exactly one top-level dist-info)."""
    name = metadata_name(e.name for e in entries)
    return next(e for e in entries if e.name == name)


def local_data_start(header: bytes) -> int | None:
    """Where a member's data starts, counted from its local header (``header``: the bytes from that
    header on, at least ``LOCAL_HEADER_SIZE`` of them); None when they are not a local header."""
    if len(header) < _LOCAL.size or header[:4] != LOCAL_SIG:
        return None
    f = _LOCAL.unpack_from(header, 0)
    return int(_LOCAL.size + f[10] + f[11])  # name and extra lengths


def member_span(entry: ZipEntry, file_size: int) -> tuple[int, int]:
    """``(start, end)`` (end exclusive) very likely to hold the member's local header and data."""
    end = entry.header_offset + _LOCAL.size + len(entry.name.encode("utf-8")) + entry.extra_length
    end += LOCAL_EXTRA_SLACK + entry.compressed_size
    return entry.header_offset, min(end, file_size)


def check_member_size(entry: ZipEntry, max_size: int) -> None:
    if entry.compressed_size > max_size or entry.uncompressed_size > max_size:
        raise MemberTooLarge(f"{entry.name} is {max(entry.compressed_size, entry.uncompressed_size)} bytes, over the {max_size}-byte cap")


def inflate_member(blob: bytes, entry: ZipEntry, *, max_size: int) -> bytes:
    """The member's content from ``blob`` (which starts at its local header), CRC-checked.

    Raises ``NeedMoreBytes`` when ``blob`` stops short of the data, ``MemberTooLarge`` when the
    entry (or what it inflates to, whatever its header claims) is over ``max_size``.
    """
    check_member_size(entry, max_size)
    if entry.encrypted:
        raise ZipError(f"{entry.name} is encrypted")
    if len(blob) < _LOCAL.size:
        raise NeedMoreBytes(_LOCAL.size + len(entry.name.encode()) + LOCAL_EXTRA_SLACK + entry.compressed_size)
    data_start = local_data_start(blob)
    if data_start is None:
        raise ZipError(f"no local file header for {entry.name} at offset {entry.header_offset}")
    data_end = data_start + entry.compressed_size
    if len(blob) < data_end:
        raise NeedMoreBytes(data_end)
    raw = blob[data_start:data_end]
    if entry.method == STORED:
        content = raw
    elif entry.method == DEFLATED:
        content = _inflate(raw, entry.name, max_size)
    else:
        raise ZipError(f"{entry.name}: compression method {entry.method} is not supported for range reads")
    if len(content) > max_size:
        raise MemberTooLarge(f"{entry.name} inflates past the {max_size}-byte cap")
    if len(content) != entry.uncompressed_size or zlib.crc32(content) != entry.crc32:
        raise ZipError(f"{entry.name}: content does not match its size/CRC in the central directory")
    return content


def _inflate(raw: bytes, name: str, max_size: int) -> bytes:
    inflater = zlib.decompressobj(-15)
    try:
        out = inflater.decompress(raw, max_size + 1)
    except zlib.error as exc:
        raise ZipError(f"{name}: bad deflate data: {exc}") from exc
    if len(out) > max_size:
        raise MemberTooLarge(f"{name} inflates past the {max_size}-byte cap")
    return out


# What decoding hostile bytes may raise, here or in ``zipfile`` and the zlib, struct and codecs
# under it (a bad deflate stream, a negative seek, an unknown method, an encrypted member, a name
# that is not UTF-8, a truncated record). Callers turn these into one documented error.
DECODE_ERRORS: tuple[type[Exception], ...] = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    struct.error,
    ValueError,
    UnicodeDecodeError,
    NotImplementedError,
    RuntimeError,
    EOFError,
    OverflowError,
    IndexError,
    KeyError,
)
_FILE_ERRORS: tuple[type[Exception], ...] = (*DECODE_ERRORS, OSError)  # reading a whole file as well


def read_metadata_from_zip(fileobj: IO[bytes], *, max_size: int) -> bytes:
    """METADATA from a whole wheel on disk (when the server would not serve ranges).

    Raises ``ZipError`` (or ``MemberTooLarge``) for anything wrong with the archive, never what
    ``zipfile`` raises underneath.
    """
    try:
        with zipfile.ZipFile(fileobj) as zf:
            name = metadata_name(zf.namelist())
            info = zf.getinfo(name)
            if info.file_size > max_size or info.compress_size > max_size:
                raise MemberTooLarge(f"{name} is {max(info.file_size, info.compress_size)} bytes, over the {max_size}-byte cap")
            with zf.open(info) as member:
                data = member.read(max_size + 1)
    except ZipError:
        raise
    except _FILE_ERRORS as exc:
        raise ZipError(f"not a valid zip file: {describe(exc)}") from exc
    if len(data) > max_size:
        raise MemberTooLarge(f"{name} inflates past the {max_size}-byte cap")
    return data


def check_crcs(fileobj: IO[bytes]) -> None:
    """Check the CRC of every member of a whole zip; ``ZipError`` names the first bad one."""
    try:
        with zipfile.ZipFile(fileobj) as zf:
            bad = zf.testzip()
    except _FILE_ERRORS as exc:
        raise ZipError(f"not a valid zip file: {describe(exc)}") from exc
    if bad is not None:
        raise ZipError(f"member {bad} fails its CRC check")


def describe(exc: BaseException) -> str:
    """``zlib.error: Error -3 ...``, ``NotImplementedError: ...``: the kind of failure and its text."""
    kind = type(exc)
    name = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"
    text = str(exc)
    return f"{name}: {text}" if text else name


__all__ = [
    "EndOfCentralDirectory",
    "MemberTooLarge",
    "NeedMoreBytes",
    "TAIL_BYTES",
    "LOCAL_HEADER_SIZE",
    "ZipEntry",
    "DECODE_ERRORS",
    "ZipError",
    "check_member_size",
    "describe",
    "find_eocd",
    "inflate_member",
    "local_data_start",
    "member_span",
    "metadata_member",
    "metadata_name",
    "parse_central_directory",
    "read_metadata_from_zip",
    "check_crcs",
]
