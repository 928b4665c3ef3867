"""Build tiny but real wheels (a valid zip with METADATA, WHEEL and RECORD) for tests and benchmarks."""

from __future__ import annotations

import base64
import hashlib
import io
import zipfile
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name


@dataclass(frozen=True)
class BuiltWheel:
    path: Path
    filename: str
    sha256: str
    size: int
    metadata: bytes


def record_hash(data: bytes) -> str:
    """A RECORD line's hash of ``data`` (PEP 376: urlsafe base64 of the sha256, unpadded)."""
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def metadata_text(
    name: str, version: str, requires: list[str] | tuple[str, ...] = (), requires_python: str | None = None, extras: tuple[str, ...] = ()
) -> bytes:
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    if requires_python:
        lines.append(f"Requires-Python: {requires_python}")
    lines += [f"Provides-Extra: {e}" for e in extras]
    lines += [f"Requires-Dist: {r}" for r in requires]
    return ("\n".join(lines) + "\n\n").encode()


def build_wheel(
    directory: Path,
    name: str,
    version: str,
    tag: str = "py3-none-any",
    requires: list[str] | tuple[str, ...] = (),
    requires_python: str | None = None,
    extras: tuple[str, ...] = (),
    files: dict[str, bytes] | None = None,
    padding: int = 0,
    metadata_override: bytes | None = None,
) -> BuiltWheel:
    """Write ``<dist>-<version>-<tag>.whl`` into ``directory``.

    ``files`` adds modules (default: ``<dist>/__init__.py`` with ``__version__``); ``padding`` adds
    an incompressible member of that many bytes *before* the dist-info, so METADATA sits near the
    end of a large zip (for range-request tests).
    """
    dist = canonicalize_name(name).replace("-", "_")
    filename = f"{dist}-{version}-{tag}.whl"
    dist_info = f"{dist}-{version}.dist-info"
    meta = metadata_override if metadata_override is not None else metadata_text(name, version, requires, requires_python, extras)
    members: dict[str, bytes] = {}
    if files is None:
        files = {f"{dist}/__init__.py": f'__version__ = "{version}"\n'.encode()}
    members.update(files)
    if padding:
        import os

        members[f"{dist}/_padding.bin"] = os.urandom(padding)
    wheel_meta = f"Wheel-Version: 1.0\nGenerator: resolve-gpu-stack-tests\nRoot-Is-Purelib: true\nTag: {tag}\n".encode()
    members[f"{dist_info}/METADATA"] = meta
    members[f"{dist_info}/WHEEL"] = wheel_meta
    record = "".join(f"{p},{record_hash(d)},{len(d)}\n" for p, d in members.items()) + f"{dist_info}/RECORD,,\n"
    members[f"{dist_info}/RECORD"] = record.encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path, data in members.items():
            zf.writestr(path, data, compress_type=zipfile.ZIP_STORED if path.endswith("_padding.bin") else zipfile.ZIP_DEFLATED)
    data = buf.getvalue()
    directory.mkdir(parents=True, exist_ok=True)
    out = directory / filename
    out.write_bytes(data)
    return BuiltWheel(path=out, filename=filename, sha256=hashlib.sha256(data).hexdigest(), size=len(data), metadata=meta)
