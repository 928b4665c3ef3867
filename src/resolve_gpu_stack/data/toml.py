"""Reading TOML documents: one loader and one typed-getter style for every file we read.

The index definitions (``indexes/*.toml``), the project config and lock files are all read through
``load_toml`` and ``TomlReader``: every problem is an exception of the caller's error class whose
message names the file, the table (a dotted path) and the key, and never a traceback. A document
too deeply nested to parse, or bytes that are not UTF-8, are such problems too.

The one module below the I/O floors that touches the file system (``read_text``, ``data_dir``):
the knowledge files this package ships are read here and nowhere else in the pure floors
(``tests/test_layers.py`` holds every other pure module to no file I/O at all).
"""

from __future__ import annotations

import difflib
import enum
import os
import re
import stat
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from packaging.version import InvalidVersion, Version

from ..errors import IndexDefinitionError, ResolveGpuStackError
from ..model.codec import kinds_named, type_name

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

E = TypeVar("E", bound=enum.Enum)

# No version, CUDA label, size or date we read has a number this long; Python refuses to turn a
# number of over 4300 digits into an int (a traceback), and shorter absurd ones only cost time.
MAX_DIGITS = 64
_LONG_NUMBER = re.compile(rf"\d{{{MAX_DIGITS + 1},}}")


def refuse_long_numbers(text: str, where: str, *, error: type[ResolveGpuStackError] = IndexDefinitionError) -> None:
    """Raise ``error`` naming ``where`` (and the line) when ``text`` holds a run of more than
    ``MAX_DIGITS`` digits: versions, CUDA labels and numbers are bounded before anything parses them."""
    found = _LONG_NUMBER.search(text)
    if found is None:
        return
    line = text.count("\n", 0, found.start()) + 1
    at = f"line {line}: " if "\n" in text else ""
    raise error(
        f"{where}: {at}a number of {len(found.group())} digits; no version or number is that long",
        hint=f"numbers and versions have at most {MAX_DIGITS} digits",
    )


def parse_toml(text: str, where: str, *, error: type[ResolveGpuStackError] = IndexDefinitionError) -> dict[str, Any]:
    """A TOML text as a dict; malformed or absurdly nested TOML, or a number or version with an
    absurd number of digits, raises ``error`` naming ``where``."""
    refuse_long_numbers(text, where, error=error)
    try:
        data: dict[str, Any] = tomllib.loads(text)
        return data
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{where}: not valid TOML: {exc}") from None
    except RecursionError:
        raise error(f"{where}: not valid TOML: nested too deeply") from None
    except ValueError as exc:  # an int() tomllib could not make, whatever the limit
        raise error(f"{where}: not valid TOML: {exc}") from None


def data_dir() -> Path:
    """The folder holding the index definitions: packaged copy first, then the source tree's."""
    packaged = Path(__file__).resolve().parents[1] / "_indexes"
    if (packaged / "routing.toml").is_file():
        return packaged
    source = Path(__file__).resolve().parents[3] / "indexes"
    if (source / "routing.toml").is_file():
        return source
    raise IndexDefinitionError("cannot find the index definitions (indexes/*.toml)")


MAX_TEXT_BYTES = 1 << 30  # no lock, config or index file we read is near this; /dev/zero would be endless


def read_text(path: Path, *, error: type[ResolveGpuStackError] = IndexDefinitionError, max_bytes: int = MAX_TEXT_BYTES) -> str:
    """A file's text; a missing, unreadable or non-UTF-8 file raises ``error`` naming it, and so
    does anything but a regular file (a device, a FIFO, ``/dev/stdin``: opened without waiting,
    never read) and a file over ``max_bytes``. A message never quotes the file's content."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise error(f"cannot read {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as fh:
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise error(f"{path}: not a regular file", hint="name a text file")
            if st.st_size > max_bytes:
                raise error(f"{path}: {st.st_size} bytes, over the {max_bytes}-byte limit for this file")
            data = fh.read(max_bytes + 1)
        except OSError as exc:
            raise error(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise error(f"{path}: over the {max_bytes}-byte limit for this file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{path}: not UTF-8 text (byte {exc.start})") from None


def load_toml(path: Path, *, error: type[ResolveGpuStackError] = IndexDefinitionError) -> dict[str, Any]:
    """A TOML file as a dict; a missing, unreadable, non-UTF-8 or malformed file raises ``error`` naming it."""
    return parse_toml(read_text(path, error=error), str(path), error=error)


class TomlReader:
    """Typed access into parsed TOML; each error names the file, the table and the key.

    ``where`` arguments are human-readable locations (``"tool.resolve-gpu-stack.target 'x'"``,
    ``"packages #3 (numpy)"``); the message is ``<file>: <where>: <what>``.
    """

    def __init__(self, source: Path | str, *, error: type[ResolveGpuStackError] = IndexDefinitionError) -> None:
        self.source = source
        self.error = error

    def fail(self, where: str, what: str, *, hint: str | None = None) -> ResolveGpuStackError:
        return self.error(f"{self.source}: {where}: {what}", hint=hint)

    def get(self, table: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str, *, required: bool = False) -> Any:
        """``table[key]`` checked to be of ``kind``; None when absent and not ``required``."""
        if key not in table:
            if required:
                raise self.fail(where, f"missing {key!r}")
            return None
        value = table[key]
        kinds = (kind,) if isinstance(kind, type) else kind
        if not isinstance(value, kinds) or (bool not in kinds and isinstance(value, bool)):
            raise self.fail(where, f"{key!r} must be {kinds_named(kinds)}, not {type_name(value)}")
        return value

    def strings(self, table: Mapping[str, Any], key: str, where: str, *, required: bool = False) -> tuple[str, ...] | None:
        """An array of strings (a lone string is not accepted)."""
        value = self.get(table, key, list, where, required=required)
        if value is None:
            return None
        if not all(isinstance(v, str) for v in value):
            raise self.fail(where, f"{key!r} must be an array of strings")
        return tuple(value)

    def tables(self, table: Mapping[str, Any], key: str, where: str) -> list[Mapping[str, Any]]:
        """An array of tables (``[[key]]``); empty when absent."""
        items = self.get(table, key, list, where) or []
        if not all(isinstance(i, dict) for i in items):
            raise self.fail(where, f"{key!r} must be an array of tables")
        return items

    def version(self, text: str, where: str) -> Version:
        try:
            return Version(text)
        except InvalidVersion:
            raise self.fail(where, f"{text!r} is not a version") from None

    def enum(self, cls: type[E], text: str, where: str) -> E:
        try:
            return cls(text)
        except ValueError:
            allowed = ", ".join(str(m.value) for m in cls)
            raise self.fail(where, f"{text!r} is not one of {allowed}") from None

    def unknown_keys(self, table: Mapping[str, Any], allowed: tuple[str, ...] | list[str], where: str) -> None:
        """Refuse a key that is not in ``allowed``, suggesting the closest known one."""
        for key in table:
            if key not in allowed:
                close = difflib.get_close_matches(key, list(allowed), n=1)
                hint = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(allowed)}"
                raise self.fail(where, f"unknown key {key!r}", hint=hint)


__all__ = ["MAX_DIGITS", "TomlReader", "data_dir", "load_toml", "parse_toml", "read_text", "refuse_long_numbers", "type_name"]
