"""What a source distribution says about itself, read from the archive without unpacking it: its
``PKG-INFO`` (the metadata the resolver needs for a ``--build`` package with no wheel) and its
``pyproject.toml`` ``[build-system]`` (PEP 517/518: what the build needs besides the kept torch).

No I/O beyond the file object handed in. An sdist is ``<name>-<version>.tar.gz`` (or ``.zip``) with
one top-level folder; only that folder's own ``PKG-INFO`` / ``pyproject.toml`` count, only regular
files, and at most ``MAX_MEMBER_BYTES`` each. Anything else is an ``SdistError`` naming the problem.
"""

from __future__ import annotations

import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

from packaging.version import InvalidVersion, Version

from ..data.toml import parse_toml
from ..errors import ResolveGpuStackError
from ..model import IndexFile, WheelMetadata

MAX_MEMBER_BYTES = 5 * 2**20
# PEP 517: a project without [build-system] is built by setuptools' legacy backend, with at least
# setuptools>=40.8.0 installed (setuptools >= 70.1 builds wheels without the `wheel` package).
LEGACY_REQUIRES = ("setuptools>=40.8.0",)
LEGACY_BACKEND = "setuptools.build_meta:__legacy__"


# The fields of an sdist's PKG-INFO the resolve uses, which only core metadata 2.2+ (PEP 643) says
# are static: a 2.2+ PKG-INFO that lists none of them as Dynamic is the metadata its wheels will
# have; an older one (or one that lists them) may say nothing of what its setup.py computes. As uv
# trusts an sdist's PKG-INFO (its uv-pypi-types ``parse_pkg_info``).
STATIC_SINCE = Version("2.2")
STATIC_BEFORE = Version("3")  # a major this reader does not know: its build backend says
RESOLVE_FIELDS = frozenset({"requires-dist", "requires-python", "provides-extra"})

# The metadata of an sdist whose PKG-INFO is not static, asked of its build backend (PEP 517
# ``prepare_metadata_for_build_wheel``, in a build environment with the kept torch): (the sdist's
# file on its index, what its PKG-INFO says) -> what its backend says. Injected into the resolve
# from the floor that can make a build environment (``cli/sources.py``'s ``sdist_metadata_of``).
SdistMetadata = Callable[[IndexFile, WheelMetadata], WheelMetadata]


def pkg_info_is_static(meta: WheelMetadata) -> bool:
    """Whether an sdist's PKG-INFO (read into ``meta``) may be trusted for the resolve: core metadata
    2.x from 2.2 on, with none of Requires-Dist, Requires-Python, Provides-Extra listed as Dynamic."""
    try:
        version = Version(meta.metadata_version or "0")
    except InvalidVersion:
        return False
    return STATIC_SINCE <= version < STATIC_BEFORE and not RESOLVE_FIELDS & set(meta.dynamic)


class SdistError(ResolveGpuStackError):
    """An sdist whose PKG-INFO or pyproject.toml cannot be read (the message says why)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildSystem:
    """``[build-system]`` of an sdist's pyproject.toml (PEP 518 / 517)."""

    requires: tuple[str, ...]
    backend: str
    backend_path: tuple[str, ...] = ()


def read_member(fileobj: IO[bytes], filename: str, leaf: str) -> bytes | None:
    """The bytes of ``<top folder>/<leaf>`` in the sdist ``filename`` (None when it has none)."""
    try:
        if filename.endswith(".zip"):
            return _zip_member(fileobj, leaf)
        if filename.endswith((".tar.gz", ".tgz")):
            return _tar_member(fileobj, leaf)
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError) as exc:
        raise SdistError(f"not a readable sdist ({type(exc).__name__}: {exc})") from None
    raise SdistError(f"{filename!r} is not an sdist (.tar.gz or .zip)")


def read_pkg_info(fileobj: IO[bytes], filename: str) -> bytes:
    data = read_member(fileobj, filename, "PKG-INFO")
    if data is None:
        raise SdistError("the sdist has no PKG-INFO in its top folder")
    return data


def read_build_system(fileobj: IO[bytes], filename: str) -> BuildSystem:
    """The sdist's ``[build-system]``; PEP 517's legacy setuptools build when it declares none."""
    raw = read_member(fileobj, filename, "pyproject.toml")
    if raw is None:
        return BuildSystem(requires=LEGACY_REQUIRES, backend=LEGACY_BACKEND)

    try:
        doc = parse_toml(raw.decode("utf-8"), "pyproject.toml", error=SdistError)
    except UnicodeDecodeError:
        raise SdistError("pyproject.toml is not UTF-8 text") from None
    table = doc.get("build-system")
    if table is None:
        return BuildSystem(requires=LEGACY_REQUIRES, backend=LEGACY_BACKEND)
    return _build_system(table)


def _build_system(table: object) -> BuildSystem:
    """A ``[build-system]`` table's values, of the types PEP 517 and 518 give them."""
    requires = table.get("requires") if isinstance(table, dict) else None
    if not isinstance(table, dict) or not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
        raise SdistError("pyproject.toml [build-system] 'requires' must be a list of requirement strings (PEP 518)")
    backend = table.get("build-backend", LEGACY_BACKEND)
    path = table.get("backend-path", [])
    if not isinstance(backend, str) or not isinstance(path, list) or not all(isinstance(p, str) for p in path):
        raise SdistError("pyproject.toml [build-system] 'build-backend' / 'backend-path' have the wrong type (PEP 517)")
    return BuildSystem(requires=tuple(requires), backend=backend, backend_path=tuple(path))


_CUDA_SOURCES = (".cu", ".cuh")
_CUDA_WORDS = (b"CUDAExtension", b"CUDA_HOME", b"enable_language(CUDA", b"LANGUAGES CXX CUDA", b"LANGUAGES CUDA")
_BUILD_SCRIPTS = ("setup.py", "CMakeLists.txt")


def uses_cuda(fileobj: IO[bytes], filename: str) -> bool:
    """Whether the sdist compiles CUDA code: a ``.cu``/``.cuh`` file, or a ``setup.py`` or
    ``CMakeLists.txt`` that names CUDA (``CUDAExtension``, ``enable_language(CUDA)``). A CPU-only
    extension needs no GPU arch list."""
    try:
        if filename.endswith(".zip"):
            with zipfile.ZipFile(fileobj) as zf:
                return any(_names_cuda(i.filename, i.file_size, lambda i=i: zf.read(i)) for i in zf.infolist())  # type: ignore[misc]
        if filename.endswith((".tar.gz", ".tgz")):
            with tarfile.open(fileobj=fileobj, mode="r:gz") as tar:
                for info in tar:
                    member = tar.extractfile(info) if info.isfile() else None
                    if member is not None and _names_cuda(info.name, info.size, member.read):
                        return True
                return False
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError) as exc:
        raise SdistError(f"not a readable sdist ({type(exc).__name__}: {exc})") from None
    raise SdistError(f"{filename!r} is not an sdist (.tar.gz or .zip)")


def _names_cuda(name: str, size: int, read: Callable[[], bytes]) -> bool:
    leaf = name.rsplit("/", 1)[-1]
    if leaf.endswith(_CUDA_SOURCES):
        return True
    return leaf in _BUILD_SCRIPTS and size <= MAX_MEMBER_BYTES and any(w in read() for w in _CUDA_WORDS)


def _top_level(name: str, leaf: str) -> bool:
    parts = name.strip("/").split("/")
    return len(parts) == 2 and parts[1] == leaf and parts[0] not in ("", ".", "..")


def _tar_member(fileobj: IO[bytes], leaf: str) -> bytes | None:
    with tarfile.open(fileobj=fileobj, mode="r:gz") as tar:
        for info in tar:
            if not _top_level(info.name, leaf):
                continue
            if not info.isfile():
                raise SdistError(f"{info.name} is not a regular file")
            if info.size > MAX_MEMBER_BYTES:
                raise SdistError(f"{info.name} is {info.size} bytes, over the {MAX_MEMBER_BYTES}-byte cap")
            member = tar.extractfile(info)
            return member.read() if member is not None else None
    return None


def _zip_member(fileobj: IO[bytes], leaf: str) -> bytes | None:
    with zipfile.ZipFile(fileobj) as zf:
        for info in zf.infolist():
            if not _top_level(info.filename, leaf) or info.filename.endswith("/"):  # a folder entry
                continue
            if info.file_size > MAX_MEMBER_BYTES:
                raise SdistError(f"{info.filename} is {info.file_size} bytes, over the {MAX_MEMBER_BYTES}-byte cap")
            return zf.read(info)
    return None


__all__ = [
    "LEGACY_BACKEND",
    "LEGACY_REQUIRES",
    "MAX_MEMBER_BYTES",
    "RESOLVE_FIELDS",
    "STATIC_BEFORE",
    "STATIC_SINCE",
    "BuildSystem",
    "SdistError",
    "SdistMetadata",
    "read_build_system",
    "read_member",
    "pkg_info_is_static",
    "read_pkg_info",
    "uses_cuda",
]
