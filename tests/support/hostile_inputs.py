"""Hostile inputs built by hand: a wheel whose METADATA member is broken, a folder of modules that
shadow the standard library."""

from __future__ import annotations

import io
import struct
import zipfile
from pathlib import Path


def _cd_entry(data: bytes, name: bytes) -> int:
    """Offset of the central-directory entry for member ``name``."""
    end = data.rfind(b"PK\x05\x06")
    p = struct.unpack_from("<L", data, end + 16)[0]
    while data[p : p + 4] == b"PK\x01\x02":
        n, e, c = struct.unpack_from("<3H", data, p + 28)
        if data[p + 46 : p + 46 + n] == name:
            return p
        p += 46 + n + e + c
    raise KeyError(name)


def corrupt_wheel(data: bytes, how: str) -> bytes:
    """``data`` (a wheel) with its METADATA member (or another member's name) broken ``how``."""
    zf = zipfile.ZipFile(io.BytesIO(data))
    info = next(i for i in zf.infolist() if i.filename.endswith(".dist-info/METADATA"))
    name = info.filename.encode()
    out = bytearray(data)
    local, central = info.header_offset, _cd_entry(data, name)
    if how == "bad-deflate":  # zipfile: zlib.error
        start = local + 30 + len(name) + struct.unpack_from("<H", data, local + 28)[0]
        out[start : start + info.compress_size] = b"\xff" * info.compress_size
    elif how == "unknown-method":  # zipfile: NotImplementedError
        struct.pack_into("<H", out, local + 8, 99)
        struct.pack_into("<H", out, central + 10, 99)
    elif how == "encrypted":  # zipfile: RuntimeError
        struct.pack_into("<H", out, local + 6, 1)
        struct.pack_into("<H", out, central + 8, 1)
    elif how == "non-utf8-name":  # zipfile: UnicodeDecodeError (another member's name)
        other = next(i for i in zf.infolist() if i.filename != info.filename)
        p = _cd_entry(data, other.filename.encode())
        struct.pack_into("<H", out, p + 8, 0x800)
        out[p + 46] = 0xFF
    else:
        raise ValueError(how)
    return bytes(out)


# a stdlib module shadowed in the current folder (a cloned repository's ``queue.py``): each writes a
# marker when it runs; the child imports every one of these (and the CLI most of them)
SHADOWED = ("queue", "selectors", "pickle", "struct", "threading", "socket", "ssl", "signal", "zipfile", "zlib", "logging", "concurrent", "http", "email")


def hostile_folder(folder: Path) -> Path:
    """A folder whose ``queue.py``, ``selectors.py``, ... (and ``logging/``, ``http/`` packages) mark ``folder/ran/``."""
    ran = folder / "ran"
    ran.mkdir(parents=True)
    for name in SHADOWED:
        code = f"open({str(ran / name)!r}, 'w').close()\nraise ImportError('shadowed {name} ran')\n"
        if name in ("logging", "concurrent", "http", "email"):
            (folder / name).mkdir()
            (folder / name / "__init__.py").write_text(code)
        else:
            (folder / f"{name}.py").write_text(code)
    return ran
