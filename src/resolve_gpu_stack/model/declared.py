"""Declared targets: wheel tags and environment markers from a Python version and a platform.

Pure (stdlib + packaging): a plan for ``--python 3.12 --platform x86_64-manylinux_2_28`` is
computed, never probed. Inspecting a real interpreter is ``env/probe.py``'s job; it reuses the
tag helpers here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import InvalidVersion, Version

from ..errors import UsageError
from .target import Target

# Machines a declared target may name. x86_64/i686 accept manylinux wheels down to glibc 2.5
# (manylinux1), every other architecture starts at 2.17 (manylinux2014), as pip and uv do.
MANYLINUX_FLOOR = {"x86_64": 5, "i686": 5, "aarch64": 17, "ppc64le": 17, "s390x": 17, "armv7l": 17}
_LEGACY_MANYLINUX = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
_DECLARED_MIN_GLIBC = 17

_PLATFORM_RE = re.compile(r"^(?P<machine>[a-z0-9_]+)-(?:manylinux_2_(?P<minor>\d+)|(?P<linux>linux))$")
PYTHON_VERSION_RE = re.compile(r"^3\.(?P<minor>\d+)(?:\.(?P<micro>\d+))?(?P<t>t)?$")
_ACCEPTED_PLATFORMS = (
    "<machine>-manylinux_2_<N> with N >= 17 (e.g. x86_64-manylinux_2_28, aarch64-manylinux_2_28), "
    "or <machine>-linux for plain linux_<machine> wheels only; machines: " + ", ".join(MANYLINUX_FLOOR)
)


def parse_python_version(python: str) -> tuple[int, int, int | None, bool]:
    """``3.13t`` -> (3, 13, None, True); a malformed, too old or impossible version is a UsageError."""
    match = PYTHON_VERSION_RE.match(python.strip())
    if match is None:
        raise UsageError(f"bad Python version {python!r}: expected 3.<minor>[.<micro>][t], e.g. 3.12, 3.12.4 or 3.13t")
    minor = int(match["minor"])
    micro = int(match["micro"]) if match["micro"] is not None else None
    threaded = match["t"] is not None
    if minor < 8:
        raise UsageError(f"Python {python} is too old: targets must be Python 3.8 or newer")
    if threaded and minor < 13:
        raise UsageError(f"Python {python}: free-threaded builds exist only for Python 3.13 and newer")
    return 3, minor, micro, threaded


# The newest CPython minor version there is (3.15 is in development in 2026): a declared target
# above it is a typo, not a Python any index has wheels for.
NEWEST_KNOWN_MINOR = 15


@dataclass(frozen=True, slots=True)
class PythonVersion:
    """A declared Python version (``--python 3.13t``, a config's ``python``), parsed once at the edge:
    the text as typed (stripped: what a lock records and a message quotes) and its parts."""

    text: str
    minor: int
    micro: int | None = None
    threaded: bool = False

    @classmethod
    def parse(cls, text: str) -> PythonVersion:
        """A malformed, too old, impossible or unknown (above 3.NEWEST_KNOWN_MINOR) version is a UsageError."""
        _, minor, micro, threaded = parse_python_version(text)
        if minor > NEWEST_KNOWN_MINOR:  # refused up front, not after a crawl that finds no wheel for it
            raise UsageError(
                f"unknown Python version {text.strip()}: the newest CPython there is (or is in development) is 3.{NEWEST_KNOWN_MINOR}",
                hint="give the target's version, e.g. --python 3.12, or the path of its interpreter",
            )
        return cls(text=text.strip(), minor=minor, micro=micro, threaded=threaded)

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class NamedInterpreter:
    """``--python`` naming an interpreter rather than a version: a path, or a name found on PATH
    when the target is inspected (``env.probe.locate_interpreter``). The text as typed."""

    text: str

    def __str__(self) -> str:
        return self.text


def parse_python(text: str) -> PythonVersion | NamedInterpreter:
    """``--python``: ``3.<minor>[.<micro>][t]`` is a version (range-checked), even if a file of that
    name exists (``./3.12`` means the file); anything else names an interpreter (found when inspected)."""
    value = text.strip()
    if not value:
        raise UsageError("--python needs a value: a version like 3.12 or a path to an interpreter")
    if PYTHON_VERSION_RE.match(value):
        return PythonVersion.parse(value)
    return NamedInterpreter(value)


@dataclass(frozen=True, slots=True)
class Platform:
    """A declared platform (``--platform x86_64-manylinux_2_28``), parsed once at the edge: the text
    as typed (stripped), its machine and its glibc minor (None: plain ``linux_<machine>`` wheels only)."""

    text: str
    machine: str
    glibc_minor: int | None

    @classmethod
    def parse(cls, text: str) -> Platform:
        machine, glibc_minor = _parse_platform(text)
        return cls(text=text.strip(), machine=machine, glibc_minor=glibc_minor)

    def __str__(self) -> str:
        return self.text


def _parse_platform(platform: str) -> tuple[str, int | None]:
    """``x86_64-manylinux_2_28`` -> ("x86_64", 28); ``x86_64-linux`` -> ("x86_64", None)."""
    match = _PLATFORM_RE.match(platform.strip())
    if match is None or match["machine"] not in MANYLINUX_FLOOR:
        raise UsageError(f"unknown platform {platform!r}: accepted forms are {_ACCEPTED_PLATFORMS}")
    if match["linux"]:
        return match["machine"], None
    minor = int(match["minor"])
    if minor < _DECLARED_MIN_GLIBC:
        raise UsageError(f"unknown platform {platform!r}: accepted forms are {_ACCEPTED_PLATFORMS}")
    return match["machine"], minor


def linux_platform_tags(arch: str, glibc: tuple[int, int] | None) -> list[str]:
    """Platform tags for Linux on ``arch`` with that glibc, most preferred first (as pip/uv order them).

    ``manylinux_2_<N>`` for N from the glibc minor down to the architecture's floor, each followed by
    its legacy alias (manylinux2014 = 2_17, ...), then plain ``linux_<arch>``. No glibc (musl or
    unknown): ``linux_<arch>`` only.
    """
    archs = ["armv8l", "armv7l"] if arch == "armv8l" else [arch]
    tags: list[str] = []
    if glibc is not None and glibc[0] == 2:
        for one in archs:
            floor = MANYLINUX_FLOOR.get(one, 17)
            for minor in range(glibc[1], floor - 1, -1):
                tags.append(f"manylinux_2_{minor}_{one}")
                if minor in _LEGACY_MANYLINUX:
                    tags.append(f"{_LEGACY_MANYLINUX[minor]}_{one}")
    tags += [f"linux_{one}" for one in archs]
    return tags


def cpython_tag_list(major: int, minor: int, abis: Sequence[str], platforms: Sequence[str]) -> tuple[Tag, ...]:
    """CPython tags for those ABIs and platforms, then the compatible ones, most preferred first."""
    version = (major, minor)
    tags = list(cpython_tags(version, abis=list(abis), platforms=list(platforms)))
    tags += compatible_tags(version, interpreter=f"cp{major}{minor}", platforms=list(platforms))
    return tuple(dict.fromkeys(tags))


def _linux_markers(machine: str, major: int, minor: int, micro: int) -> dict[str, str]:
    full = f"{major}.{minor}.{micro}"
    return {
        "implementation_name": "cpython",
        "implementation_version": full,
        "os_name": "posix",
        "platform_machine": machine,
        "platform_python_implementation": "CPython",
        "platform_release": "",
        "platform_system": "Linux",
        "platform_version": "",
        "python_full_version": full,
        "python_version": f"{major}.{minor}",
        "sys_platform": "linux",
    }


def parse_installed(specs: Iterable[str]) -> dict[NormalizedName, Version]:
    """``["torch==2.9.1+cu130", ...]`` -> {canonical name: Version}; local labels are kept."""
    installed: dict[NormalizedName, Version] = {}
    for spec in specs:
        name, sep, version = spec.partition("==")
        name, version = name.strip(), version.strip()
        if not sep or version.startswith("=") or not name or not version:
            raise UsageError(f"bad --installed {spec!r}: expected NAME==VERSION, e.g. torch==2.9.1+cu130")
        try:
            key = canonicalize_name(name, validate=True)
            parsed = Version(version)
        except (ValueError, InvalidVersion) as exc:
            raise UsageError(f"bad --installed {spec!r}: {exc}") from exc
        if key in installed and installed[key] != parsed:
            raise UsageError(f"--installed names {key} twice, as {installed[key]} and {parsed}")
        installed[key] = parsed
    return installed


def installed_pins(specs: Iterable[str]) -> Mapping[NormalizedName, Version]:
    """``--installed`` parsed once (``parse_installed``), frozen: what a declared target already has."""
    return MappingProxyType(parse_installed(specs))


def declared_target(python: str | PythonVersion, platform: str | Platform, installed: Sequence[str] | Mapping[NormalizedName, Version] = ()) -> Target:
    """A target described by flags: ``declared_target("3.12", "x86_64-manylinux_2_28")``. Values the
    edge parsed (``PythonVersion``, ``Platform``, installed pins) are used as they are; a text is parsed."""
    py = python if isinstance(python, PythonVersion) else PythonVersion(python.strip(), *parse_python_version(python)[1:])
    where = platform if isinstance(platform, Platform) else Platform.parse(platform)
    pins = dict(installed) if isinstance(installed, Mapping) else parse_installed(installed)
    major, minor = 3, py.minor
    glibc = (2, where.glibc_minor) if where.glibc_minor is not None else None
    abi = f"cp{major}{minor}{'t' if py.threaded else ''}"
    tags = cpython_tag_list(major, minor, [abi], linux_platform_tags(where.machine, glibc))
    markers = _linux_markers(where.machine, major, minor, py.micro or 0)
    return Target(
        python_version=f"{major}.{minor}",
        python_full_version=markers["python_full_version"],
        platform=where.text,
        tags=tags,
        markers=markers,
        installed=pins,
        interpreter=None,
    )


__all__ = [
    "NEWEST_KNOWN_MINOR",
    "PYTHON_VERSION_RE",
    "NamedInterpreter",
    "Platform",
    "PythonVersion",
    "cpython_tag_list",
    "declared_target",
    "installed_pins",
    "linux_platform_tags",
    "parse_installed",
    "parse_python",
    "parse_python_version",
]
