"""Can this compiled wheel run on this torch? A wheel's imports (``model.abi.WheelAbi``) judged
against one torch: its version, its CUDA major, and (for version-locked wheels) what its
libraries export. Pure; the same judgement for ``resolve``, ``lock``, ``check``, ``inspect`` and
``doctor``.

- **stable** (only C-shim imports): runs when torch >= its floor (the wheel's own ``torch>=``
  requirement, at least the release that brought the stable ABI) and its CUDA majors are torch's.
- **locked** (C++ imports of torch's namespaces): each import must be exported by the torch's
  libraries; a missing one is a refusal naming up to three of them, demangled. All present: it
  runs, with a note that layouts are not checked (``doctor`` imports it). Exports unknown:
  refused, never guessed.
- **builds** (members named for one torch each): the member for the torch's series decides; with
  none for it the wheel loads none of them: a note naming the builds it has, not a refusal.
- a CUDA major other than torch's: refused naming both.
- **unknown** (the scan did not finish): refused with why.

The refusal is the verdict's ``refusal``; whether a refusal blocks the plan is the caller's
(``--abi-mismatch``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..data.rules import AbiRules
from ..model import IndexFile
from ..model.abi import CUDA, NONE, READ_RECORDED, READ_START, TORCH, AbiKind, AbiVerdict, MemberAbi, WheelAbi
from ..scan.demangle import demangle
from .versions import torch_series

SHOWN = 3  # symbols named in a refusal


@dataclass(frozen=True, slots=True, kw_only=True)
class TorchExports:
    """The dynamic symbols a torch's libraries define (what an extension may import from it).

    ``symbols`` None: not known, ``source`` says why; else ``source`` says where they were read.
    ``universe``: the names this answer is for (None: every name; a partial record's set, of which
    ``symbols`` are the exported ones); ``wider``: the answer for every name, read when a verdict
    asks about a name outside ``universe`` (None: none to be had). ``recorded``: the answer is an
    exports record's (a verdict resting on it is recorded provenance, as one on a scan record).
    """

    version: str
    symbols: frozenset[str] | None
    source: str
    universe: frozenset[str] | None = None
    wider: Callable[[], TorchExports] | None = field(default=None, compare=False, repr=False)
    recorded: bool = False  # from an exports record (by the torch wheel's sha256), not a read of the libraries: a verdict on it is provisional

    def answers(self, names: Iterable[str]) -> bool:
        """Whether this answer says, for each of ``names``, whether torch exports it."""
        return self.universe is None or all(n in self.universe for n in names)

    def covering(self, names: Sequence[str]) -> TorchExports:
        """An answer for each of ``names``: this one, else the wider one (read now), else not known."""
        if self.answers(names):
            return self
        if self.wider is not None:
            return self.wider()
        return TorchExports(version=self.version, symbols=None, source=f"{self.source} answers only for {len(self.universe or ())} names")

    def missing(self, names: Iterable[str]) -> tuple[str, ...]:
        """The names among ``names`` that this torch does not export (all of them when unknown,
        or when this answer is not for them: ``covering`` first)."""
        if self.symbols is None:
            return tuple(names)
        universe = self.universe
        return tuple(n for n in names if n not in self.symbols or (universe is not None and n not in universe))


class ExportsSource(Protocol):
    """What the torch of ``version`` (whose wheel is ``file``, when it has one) exports: read from
    the installed torch's libraries on disk, from its wheel by range reads, or from a snapshot."""

    def __call__(self, version: Version, file: IndexFile | None) -> TorchExports: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class AbiTorch:
    """The torch a verdict is made against: its version, its CUDA major (None: a CPU build or not
    known) and, read only when a version-locked wheel asks, its exports."""

    version: Version
    cuda_major: int | None
    exports: Callable[[], TorchExports] | None = None

    @property
    def series(self) -> str:
        return torch_series(self.version)


@dataclass(frozen=True, slots=True, kw_only=True)
class AbiPolicy:
    """What the data says beyond a wheel's own symbols (``indexes/components.toml`` ``[abi]``)."""

    stable_since: str  # the torch release that brought the LibTorch stable ABI
    loads_none: Callable[[str, Version | None, Version], str | None] = lambda name, version, torch: None  # why a package loads no build there
    demangle: Callable[[str], str] = str  # for messages
    cuda_build_of: Callable[[str], int | None] = lambda member: None  # the CUDA major a member's name marks it as the build for

    @classmethod
    def of(cls, rules: AbiRules) -> AbiPolicy:
        """The policy of the data's ``[abi]`` rules, with the demangler for messages."""

        def loads_none(name: str, version: Version | None, torch: Version) -> str | None:
            row = rules.loads_no_builds(name, version, torch)
            return None if row is None else f"expected from torch {row.torch} on: {row.why}"

        return cls(stable_since=str(rules.stable_since), loads_none=loads_none, demangle=demangle, cuda_build_of=rules.cuda_build_of)


def judge(
    name: str,
    abi: WheelAbi,
    torch: AbiTorch | None,
    policy: AbiPolicy,
    *,
    version: Version | None = None,
    requires_floor: str | None = None,
    declared_series: str | None = None,
) -> AbiVerdict:
    """The verdict on wheel ``name`` (at ``version``) whose scan is ``abi``, against ``torch`` (None:
    no torch in the plan). ``requires_floor``: the lowest torch its own ``torch>=`` requirement
    admits; ``declared_series``: the torch series its version label names (``+cu130torch2.12``).
    A scan replayed from an older reader's record carries that into the verdict (``read``: a lock's
    ``abi-read``, which ``check`` notes as provisional)."""
    verdict = _judged(name, abi, torch, policy, version=version, requires_floor=requires_floor, declared_series=declared_series)
    return verdict if abi.read == READ_START else replace(verdict, read=abi.read)


def _judged(
    name: str,
    abi: WheelAbi,
    torch: AbiTorch | None,
    policy: AbiPolicy,
    *,
    version: Version | None = None,
    requires_floor: str | None = None,
    declared_series: str | None = None,
) -> AbiVerdict:
    """The verdict on wheel ``name`` (at ``version``) whose scan is ``abi``, against ``torch`` (None:
    no torch in the plan). ``requires_floor``: the lowest torch its own ``torch>=`` requirement
    admits; ``declared_series``: the torch series its version label names (``+cu130torch2.12``)."""
    against = None if torch is None else str(torch.version)
    if abi.kind == NONE:
        return AbiVerdict(kind=None, against=against)
    if abi.kind == CUDA:
        abi, twins = _cuda_builds(abi, torch, policy) if torch is not None else (abi, None)
        return AbiVerdict(kind=None, against=against, cuda_majors=abi.cuda_majors, refusal=_cuda_refusal(abi.cuda_majors, torch), note=twins)
    if abi.kind != TORCH:
        return AbiVerdict(kind=AbiKind.UNKNOWN, against=against, refusal=f"its shared objects could not be judged: {abi.why}")
    if torch is None:
        return AbiVerdict(kind=_kind(abi.members), refusal="it links torch, and the plan has no torch")
    return _judge_linked(name, version, abi, torch, policy, requires_floor, declared_series)


def _judge_linked(
    name: str, version: Version | None, abi: WheelAbi, torch: AbiTorch, policy: AbiPolicy, requires_floor: str | None, declared_series: str | None
) -> AbiVerdict:
    """``judge`` of a wheel that links torch, against the plan's torch: by its per-torch builds,
    or by its members' imports (of the build for torch's CUDA major, when it has one per major)."""
    abi, twins = _cuda_builds(abi, torch, policy)
    builds = abi.builds
    if builds:
        verdict = _judge_builds(name, version, abi, torch, policy, builds, requires_floor)
    else:
        verdict = _judge_members(abi.members, torch, policy, requires_floor, declared_series)
    return verdict if twins is None else _with(verdict, note="; ".join(n for n in (twins, verdict.note) if n))


def _cuda_builds(abi: WheelAbi, torch: AbiTorch, policy: AbiPolicy) -> tuple[WheelAbi, str | None]:
    """A wheel whose members differ only by a CUDA-major mark (``_cu12`` / ``_cu13``, components.toml
    ``[abi] cuda-build-members``; an unmarked member of the same stem is one more build, of the
    CUDA it links) has one build per CUDA major: the member marked for torch's major decides, with
    the members of no such group; the others are named in a note. Unchanged without such twins,
    or when none is marked for torch's major."""
    twins = _cuda_twins(abi.members, policy)
    major = torch.cuda_major
    if major is None or not any(major in g for g in twins.values()):
        return abi, None
    kept, others = _for_major(abi.members, twins, major)
    return replace(abi, members=kept, cuda_majors=tuple(sorted({v for m in kept for v in m.cuda_majors}))), _builds_note(twins, major, others)


def _for_major(members: Sequence[MemberAbi], twins: Mapping[str, Mapping[int | None, MemberAbi]], major: int) -> tuple[tuple[MemberAbi, ...], list[str]]:
    """(the members torch's CUDA ``major`` loads, the file names of the other majors' builds)."""
    dropped = {id(m) for g in twins.values() if major in g for k, m in g.items() if k != major}
    kept = tuple(m for m in members if id(m) not in dropped)
    return kept, [m.name.rsplit("/", 1)[-1] for m in members if id(m) in dropped]


def _builds_note(twins: Mapping[str, Mapping[int | None, MemberAbi]], major: int, others: Sequence[str]) -> str:
    """The note naming the CUDA builds of a wheel, and the members of the other majors' builds."""
    majors = sorted({k for g in twins.values() for k in g if k is not None})
    return f"builds per CUDA major ({', '.join(f'CUDA {v}' for v in majors)}): the CUDA {major} ones decide, not loaded: {', '.join(others)}"


def _cuda_twins(members: Sequence[MemberAbi], policy: AbiPolicy) -> dict[str, dict[int | None, MemberAbi]]:
    """The members that are builds of one object for several CUDA majors, by stem: each group's
    members by the CUDA major marked in their name (None: unmarked); groups of one left out."""
    groups: dict[str, dict[int | None, MemberAbi]] = {}
    for m in members:
        major, stem = _cuda_mark(m.name, policy)
        groups.setdefault(stem, {})[major] = m
    return {stem: g for stem, g in groups.items() if any(k is not None for k in g) and len(g) >= 2}


def _cuda_mark(name: str, policy: AbiPolicy) -> tuple[int | None, str]:
    """(the CUDA major a member's file name is marked for, or None; its stem without the mark)."""
    base = name.rsplit("/", 1)[-1]
    major = policy.cuda_build_of(base)
    stem = base.split(".", 1)[0]
    return major, stem.removesuffix(f"_cu{major}") if major is not None else stem


def _kind(members: Sequence[MemberAbi]) -> AbiKind:
    linked = [m for m in members if m.links_torch]
    return AbiKind.LOCKED if any(m.cxx for m in linked) else AbiKind.STABLE


def _judge_members(
    members: Sequence[MemberAbi], torch: AbiTorch, policy: AbiPolicy, requires_floor: str | None, declared_series: str | None, *, builds: tuple[str, ...] = ()
) -> AbiVerdict:
    majors, cxx = _imports(members)
    floor = None if cxx else _higher(policy.stable_since, requires_floor)
    base = AbiVerdict(kind=AbiKind.BUILDS if builds else _kind(members), against=str(torch.version), cuda_majors=majors, builds=builds, floor=floor)
    refusal = _cuda_refusal(majors, torch) or (_floor_refusal(floor, torch) if floor is not None else _series_refusal(declared_series, torch))
    if refusal is not None:
        return _with(base, refusal=refusal)
    if floor is not None:
        return base
    found, recorded = _locked(cxx, torch, policy)
    verdict = _with(base, **found)
    return replace(verdict, read=READ_RECORDED) if recorded else verdict


def _imports(members: Sequence[MemberAbi]) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """(the CUDA majors the members need, the C++ torch symbols the torch-linked ones import), sorted."""
    majors = tuple(sorted({v for m in members for v in m.cuda_majors}))
    cxx = tuple(sorted({s for m in members if m.links_torch for s in m.cxx}))
    return majors, cxx


def _floor_refusal(floor: str, torch: AbiTorch) -> str | None:
    """A stable-ABI wheel needs a torch at or above its floor."""
    if _release(torch.version) < _release_of(floor):
        return f"uses the LibTorch stable ABI from torch {floor} on; torch is {torch.version}"
    return None


def _series_refusal(declared_series: str | None, torch: AbiTorch) -> str | None:
    """A wheel whose version names its torch series (``+cu128torch2.9``) needs that series' C++ ABI."""
    if declared_series is not None and declared_series != torch.series:
        return f"built for torch {declared_series} (its C++ ABI); torch is {torch.version}"
    return None


def asks_for_exports(name: str, version: Version | None, abi: WheelAbi, torch: AbiTorch, policy: AbiPolicy) -> bool:
    """Whether the verdict on wheel ``name``'s scan ``abi`` against ``torch`` reads torch's exports
    (a version-locked wheel: not a stable-ABI floor, another CUDA major or a per-torch build that
    decides first): the judgement itself, run with a stand-in for them."""
    asked: list[bool] = []

    def stand_in() -> TorchExports:
        asked.append(True)
        return TorchExports(version=str(torch.version), symbols=None, source="not read yet")

    judge(name, abi, replace(torch, exports=stand_in), policy, version=version)
    return bool(asked)


def _locked(cxx: tuple[str, ...], torch: AbiTorch, policy: AbiPolicy) -> tuple[dict[str, str], bool]:
    """The refusal or note of a version-locked wheel importing ``cxx``, and whether it rests on an
    exports record."""
    exports = torch.exports().covering(cxx) if torch.exports is not None else None
    example = policy.demangle(cxx[0])
    if exports is None or exports.symbols is None:
        why = exports.source if exports is not None else "no source of them for this target"
        return {
            "refusal": f"imports {len(cxx)} C++ symbol{'s' * (len(cxx) != 1)} of torch (e.g. `{example}`), and torch {torch.version}'s exports "
            f"could not be read ({why}): it cannot be shown to run"
        }, False
    missing = exports.missing(cxx)
    if missing:
        shown = ", ".join(f"`{policy.demangle(s)}`" for s in missing[:SHOWN])
        more = f" and {len(missing) - SHOWN} more" if len(missing) > SHOWN else ""
        return {"refusal": f"needs {shown}{more}, which torch {torch.version} does not export (built for another torch)"}, exports.recorded
    imports = f"its {len(cxx)} C++ imports of torch are all" if len(cxx) != 1 else "its one C++ import of torch is"
    return {"note": f"{imports} exported by torch {torch.version}; their layouts are not checked (`resolve-gpu-stack doctor` imports it)"}, exports.recorded


def _judge_builds(
    name: str, version: Version | None, abi: WheelAbi, torch: AbiTorch, policy: AbiPolicy, builds: tuple[str, ...], requires_floor: str | None
) -> AbiVerdict:
    """A wheel of per-torch builds: the members for this torch's series (and the members that are
    no build) decide; with none for it, a note naming the builds."""
    own = [m for m in abi.members if m.build == torch.series]
    rest = [m for m in abi.members if m.build is None and m.links_torch]
    if own:
        return _judge_members(own + rest, torch, policy, requires_floor, None, builds=builds)
    if rest:  # members that are no build still run with this torch, or not
        verdict = _judge_members(rest, torch, policy, requires_floor, None, builds=builds)
        if verdict.refusal is not None:
            return verdict
    return AbiVerdict(kind=AbiKind.BUILDS, against=str(torch.version), builds=builds, note=_no_build_note(name, version, builds, torch, policy))


def _no_build_note(name: str, version: Version | None, builds: tuple[str, ...], torch: AbiTorch, policy: AbiPolicy) -> str:
    span = builds[0] if len(builds) == 1 else f"{builds[0]} to {builds[-1]}"
    note = f"has builds for torch {span}, none for {torch.series}: none of its shared objects is loaded with torch {torch.version}"
    expected = policy.loads_none(name, version, torch.version)
    return note + (f" ({expected})" if expected else "")


def _cuda_refusal(majors: tuple[int, ...], torch: AbiTorch | None) -> str | None:
    if torch is None or torch.cuda_major is None or not majors or majors == (torch.cuda_major,):
        return None
    other = [m for m in majors if m != torch.cuda_major] or list(majors)
    needs = " and ".join(f"CUDA {m}" for m in majors)
    return f"needs {needs} (libcudart.so.{other[0]} and its kin), torch {torch.version} is built for CUDA {torch.cuda_major}"


def _with(verdict: AbiVerdict, *, refusal: str | None = None, note: str | None = None) -> AbiVerdict:
    """``verdict`` with the refusal and the note given (one not given stays as it is)."""
    return replace(verdict, refusal=verdict.refusal if refusal is None else refusal, note=verdict.note if note is None else note)


def _higher(a: str, b: str | None) -> str:
    return a if b is None or _release_of(b) <= _release_of(a) else b


def _release(version: Version) -> tuple[int, ...]:
    return (version.release + (0, 0))[:2]


def _release_of(text: str) -> tuple[int, ...]:
    try:
        return _release(Version(text))
    except InvalidVersion:
        return (0, 0)


def recorded_verdict_fails(verdict: AbiVerdict, torch: Version | None, cuda_major: int | None) -> str | None:
    """Why a verdict recorded in a lock does not hold for the lock's own torch (None: it holds):
    it was made against another torch, its stable-ABI floor is above that torch, its CUDA majors
    are not torch's, or it was a refusal (unknown included) planned anyway."""
    if torch is None:
        return "the lock has no torch to hold its ABI verdict against"
    if verdict.against is not None and verdict.against != str(torch):
        return f"its ABI verdict was made against torch {verdict.against}, the lock's torch is {torch}"
    if verdict.refusal is not None:
        return verdict.refusal
    if verdict.floor is not None and _release(torch) < _release_of(verdict.floor):
        return f"uses the LibTorch stable ABI from torch {verdict.floor} on; the lock's torch is {torch}"
    if verdict.kind is AbiKind.UNKNOWN:
        return "its shared objects could not be judged"
    return _cuda_refusal(verdict.cuda_majors, AbiTorch(version=torch, cuda_major=cuda_major))


def ties_to_torch(name: str, requirement_names: Iterable[str]) -> bool:
    """The rule for a scan that did not finish: a package is tied to torch when its name says torch
    or its METADATA requires torch. Only a tied package's unknown is worth a build from its sdist;
    an untied one (scipy: a large native wheel whose dynamic sections lie past the budget) is
    judged by what its members name (``scan/wheelscan/``'s ``torch_tie``, the same rule)."""
    return "torch" in canonicalize_name(name) or any(canonicalize_name(n) == "torch" for n in requirement_names)


def requires_floor(specifiers: Iterable[tuple[str, str]]) -> str | None:
    """The lowest torch a wheel's own torch requirement admits, from its ``(operator, version)``
    pairs: the highest ``>=``/``>``/``~=``/``==`` bound (``torch>=2.10`` -> "2.10"); None when it
    sets none."""
    floors = [v for op, v in specifiers if op in (">=", ">", "~=", "==", "===")]
    if not floors:
        return None
    return max(floors, key=_release_of).removesuffix(".*")


def torch_floor(requires_dist: Iterable[str]) -> str | None:
    """``requires_floor`` of a wheel's ``Requires-Dist`` lines: its torch requirements whose marker
    names no extra (a line that is not a requirement is passed over)."""
    pairs = []
    for text in requires_dist:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) == "torch" and (req.marker is None or "extra" not in str(req.marker)):
            pairs += [(s.operator, s.version) for s in req.specifier]
    return requires_floor(pairs)


__all__ = [
    "SHOWN",
    "AbiPolicy",
    "AbiTorch",
    "ExportsSource",
    "TorchExports",
    "asks_for_exports",
    "judge",
    "recorded_verdict_fails",
    "requires_floor",
    "ties_to_torch",
    "torch_floor",
]
