"""Which torch and CUDA a compiled wheel runs on: what its shared objects import (``WheelAbi``),
and the judgement of that against one torch (``AbiVerdict``). Pure values and their dict codec.

A wheel's ``.so`` members say it in their dynamic symbols, not in metadata
(``../shared/reference/abi.md``):

- **stable**: every torch import is a function of the LibTorch stable C shim (``aoti_torch_*``,
  ``torch_*``): it runs on every torch at or above its floor;
- **locked**: some imports are C++ symbols of torch's namespaces (``c10::``, ``at::``, ``torch::``)
  or ``THP*`` functions: it runs only on a torch that exports each of them (in practice one release
  series);
- **builds**: the wheel carries one build per torch version (member names say which) and loads the
  one for the running torch;
- **unknown**: the scan did not finish (budget, errors, a snapshot without the scan): never taken
  for agnostic.

``WheelAbi`` is what a scan found, torch-independent (stored in caches, snapshots and locks);
``AbiVerdict`` is the judgement against the plan's torch (``resolver/abi.py`` makes it).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: How a scan was reached (a lock's ``abi-read``): every member read from its start (range reads
#: of the index's file, or a file on disk), or replayed from a record by the wheel's sha256 that an
#: older reader made (a snapshot's schema 2 or 3: it may rest on a member entered near its end, or
#: on the library names in its first bytes): provisional, ``check`` says so, install reads it again.
#: ``names``: a wheel nothing ties to torch (``scan/wheelscan`` ``torch_tie``) whose members were
#: judged by the library names in their first bytes, their dynamic sections not reached: a guess a
#: forger can steer, so unverified (never shown as "runs"); install and wheelhouse read it again
#: from the verified file, by structure.
#: ``names`` in words, wherever a verdict that rests on it is shown (plan, candidates, inspect, check, install).
UNVERIFIED = (
    "unverified: judged from the library names in the first bytes of its shared objects, their dynamic sections not read, "
    "and nothing ties it to torch; install reads it again from the verified file"
)
READ_START = "start"
READ_RECORDED = "recorded"
READ_NAMES = "names"
READS = (READ_START, READ_RECORDED, READ_NAMES)

#: The ``kind`` of a ``WheelAbi``: torch-linked, CUDA-only, neither, or not known.
TORCH = "torch"
CUDA = "cuda"
NONE = "none"
UNKNOWN = "unknown"
WHEEL_KINDS = (TORCH, CUDA, NONE, UNKNOWN)

#: The keys of a package's ABI verdict (``AbiVerdict``: what a compiled wheel was judged to be
#: against the plan's torch), in the order they are written, and the type each holds in a lock or plan.
ABI_KEY_TYPES: Mapping[str, type] = {
    "abi": str,
    "abi-torch": str,
    "abi-floor": str,
    "cuda-majors": list,
    "abi-builds": list,
    "abi-refusal": str,
    "abi-note": str,
    "abi-read": str,
}
ABI_KEYS = tuple(ABI_KEY_TYPES)


class AbiKind(str, enum.Enum):
    """How a torch-linked wheel binds to torch (the lock's ``abi`` key)."""

    STABLE = "stable"  # only C-shim imports: every torch >= its floor
    LOCKED = "locked"  # C++ imports of torch's namespaces: a torch that exports them all
    BUILDS = "builds"  # one build per torch version, loaded at run time
    UNKNOWN = "unknown"  # the scan did not finish


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberAbi:
    """One ``.so`` member of a wheel: what it needs from torch and CUDA."""

    name: str  # the member's path in the wheel
    torch_libs: tuple[str, ...] = ()  # DT_NEEDED libraries of torch (libtorch*.so, libc10*.so)
    cuda_majors: tuple[int, ...] = ()  # from libcudart.so.N, libcublas.so.N, ...
    shim: int = 0  # imports of the stable C shim
    shim_examples: tuple[str, ...] = ()  # up to three of them
    cxx: tuple[str, ...] = ()  # every C++ torch import (mangled, sorted): what the torch must export
    build: str | None = None  # the torch series this member is a build for ("2.9"), from its name

    @property
    def links_torch(self) -> bool:
        return bool(self.torch_libs)


@dataclass(frozen=True, slots=True, kw_only=True)
class WheelAbi:
    """What a compiled wheel's shared objects import, torch-independent.

    ``members``: the torch-linked members (all of them: a wheel of per-torch builds has several);
    for a ``cuda`` wheel, the members that need CUDA, with their majors (twins per CUDA major).
    ``cuda_majors``: the CUDA majors any member needs. ``why``: the evidence in one line, or, for
    ``unknown``, why the scan did not finish.
    """

    kind: str  # TORCH | CUDA | NONE | UNKNOWN
    why: str
    members: tuple[MemberAbi, ...] = ()
    cuda_majors: tuple[int, ...] = ()
    read: str = READ_START  # how its members were read (``READS``)

    def __post_init__(self) -> None:
        if self.kind not in WHEEL_KINDS:
            raise ValueError(f"WheelAbi kind {self.kind!r} is not one of {', '.join(WHEEL_KINDS)}")

    @property
    def cxx(self) -> tuple[str, ...]:
        """Every C++ torch import of every member, distinct and sorted."""
        return tuple(sorted({s for m in self.members for s in m.cxx}))

    @property
    def builds(self) -> tuple[str, ...]:
        """The torch series the members are builds for, in version order."""
        found = {m.build for m in self.members if m.build}
        return tuple(sorted(found, key=_series_key))

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "why": self.why,
            "cuda-majors": list(self.cuda_majors),
            "members": [_member_to_dict(m) for m in self.members],
            **({"read": self.read} if self.read != READ_START else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WheelAbi:
        """Raises ``ValueError`` (``TypeError``/``KeyError`` included) for data that is not one."""
        return cls(
            kind=str(data["kind"]),
            why=str(data["why"]),
            cuda_majors=tuple(int(v) for v in data.get("cuda-majors", ())),
            members=tuple(_member_from_dict(m) for m in data.get("members", ())),
            read=_read_of(data.get("read", READ_START)),
        )


def _member_to_dict(m: MemberAbi) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": m.name,
        "torch-libs": list(m.torch_libs),
        "cuda-majors": list(m.cuda_majors),
        "shim": m.shim,
        "shim-examples": list(m.shim_examples),
        "cxx": list(m.cxx),
    }
    if m.build is not None:
        out["build"] = m.build
    return out


def _member_from_dict(data: Mapping[str, Any]) -> MemberAbi:
    if not isinstance(data, Mapping):
        raise TypeError("a member must be a table")
    build = data.get("build")
    return MemberAbi(
        name=str(data["name"]),
        torch_libs=tuple(str(v) for v in data.get("torch-libs", ())),
        cuda_majors=tuple(int(v) for v in data.get("cuda-majors", ())),
        shim=int(data.get("shim", 0)),
        shim_examples=tuple(str(v) for v in data.get("shim-examples", ())),
        cxx=tuple(str(v) for v in data.get("cxx", ())),
        build=None if build is None else str(build),
    )


def _series_key(series: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else -1 for p in series.split("."))


@dataclass(frozen=True, slots=True, kw_only=True)
class AbiVerdict:
    """A torch-linked (or CUDA-bound) wheel judged against the plan's torch.

    ``refusal``: why it cannot run with that torch (None: it can). ``note``: what the user should
    know when it is planned (a locked wheel's layouts are not checked; a wheel of builds with none
    for this torch). ``against``: the torch version it was judged against.
    """

    kind: AbiKind | None  # None: not torch-linked (a CUDA-only wheel judged for its CUDA major)
    against: str | None = None
    floor: str | None = None  # stable: the lowest torch it runs on ("2.10")
    cuda_majors: tuple[int, ...] = ()
    builds: tuple[str, ...] = ()  # builds: the torch series it has builds for
    refusal: str | None = None
    note: str | None = None
    read: str | None = None  # how the scan it judges was reached (``READS``; None: a lock made before it was recorded)

    @property
    def runs(self) -> bool:
        return self.refusal is None

    @property
    def unverified(self) -> bool:
        """Whether it rests on a guess from the library names in the wheel's first bytes (``READ_NAMES``)."""
        return self.read == READ_NAMES

    def to_dict(self) -> dict[str, Any]:
        """The lock's keys (``ABI_KEYS``; None where unset: TOML writers drop them)."""
        return {
            "abi": None if self.kind is None else self.kind.value,
            "abi-torch": self.against,
            "abi-floor": self.floor,
            "cuda-majors": list(self.cuda_majors) or None,
            "abi-builds": list(self.builds) or None,
            "abi-refusal": self.refusal,
            "abi-note": self.note,
            "abi-read": self.read,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AbiVerdict | None:
        """None when ``data`` records no verdict; ``ValueError`` when it records a bad one."""
        kind = data.get("abi")
        majors = data.get("cuda-majors")
        if kind is None and majors is None and data.get("abi-read") != READ_NAMES:  # an unverified "no torch" is recorded as such
            return None
        return cls(
            kind=None if kind is None else AbiKind(str(kind)),
            against=_opt_str(data.get("abi-torch")),
            floor=_opt_str(data.get("abi-floor")),
            cuda_majors=tuple(int(v) for v in majors or ()),
            builds=tuple(str(v) for v in data.get("abi-builds") or ()),
            refusal=_opt_str(data.get("abi-refusal")),
            note=_opt_str(data.get("abi-note")),
            read=None if data.get("abi-read") is None else _read_of(data.get("abi-read")),
        )


def _read_of(value: object) -> str:
    if value not in READS:
        raise ValueError(f"abi-read {value!r} is not one of {', '.join(READS)}")
    return str(value)


def _opt_str(value: object) -> str | None:
    return None if value is None else str(value)


__all__ = [
    "ABI_KEYS",
    "ABI_KEY_TYPES",
    "CUDA",
    "NONE",
    "READS",
    "READ_RECORDED",
    "READ_START",
    "TORCH",
    "UNKNOWN",
    "WHEEL_KINDS",
    "AbiKind",
    "AbiVerdict",
    "MemberAbi",
    "WheelAbi",
]
