"""Pure policy: which wheels fit a target, version rules, and the invariants every plan must keep.

Stdlib + packaging only. The data (which package is coupled how, which labels exist) comes from
``indexes.Definitions``; this module applies it.
"""

from __future__ import annotations

import enum
import functools
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import Tag
from packaging.utils import NormalizedName
from packaging.version import InvalidVersion, Version

from ..data.definitions import Definitions
from ..data.rules import PerTorchRule
from ..model import Action, Coupling, IndexFile, LockedPackage, LockPlan, Target
from ..model.cuda import CudaLabel


class RejectReason(str, enum.Enum):
    NOT_A_WHEEL = "not a wheel"
    TAGS = "built for another platform or Python"
    REQUIRES_PYTHON = "requires another Python"
    YANKED = "yanked"
    PRERELEASE = "pre-release not asked for"
    TORCH_ABI = "built for another torch"
    CUDA = "built for another CUDA"
    ABI = "its shared objects cannot be shown to run with this torch"
    SPECIFIER = "outside the requested range"


@dataclass(frozen=True, slots=True)
class Rejection:
    reason: RejectReason
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.reason.value}: {self.detail}" if self.detail else self.reason.value


def public(version: Version) -> Version:
    """The public part of a version (``0.6.5+cu130`` -> ``0.6.5``)."""
    return Version(version.public)


def tag_rank(file: IndexFile, target: Target) -> int | None:
    """Position of the best target tag this wheel carries (lower is better); None if none fits."""
    ranks, best_of = _tag_ranks(target.tags)
    tags = file.tags
    try:
        return best_of[tags]
    except KeyError:
        pass
    best = None
    for tag in tags:
        rank = ranks.get(tag)
        if rank is not None and (best is None or rank < best):
            best = rank
    best_of[tags] = best
    return best


_RANKS: dict[int, tuple[tuple[Tag, ...], dict[Tag, int], dict[frozenset[Tag], int | None]]] = {}
_RANKS_KEPT = 4  # tag lists remembered: a lock of many targets resolves one target at a time


def _tag_ranks(tags: tuple[Tag, ...]) -> tuple[dict[Tag, int], dict[frozenset[Tag], int | None]]:
    """{tag: position} of a target's tag list, built once per list (a target has hundreds of tags,
    a wheel one to three: looking the wheel's tags up is ~100x cheaper than scanning the list),
    and the best position per set of wheel tags seen (a page repeats a few sets on every row).

    Only the last few lists are kept (the entry holds the list, thousands of ``Tag`` objects): a
    lock of 200 targets must not keep every target's tags alive until it ends."""
    entry = _RANKS.get(id(tags))
    if entry is None or entry[0] is not tags:
        ranks: dict[Tag, int] = {}
        for i, tag in enumerate(tags):
            ranks.setdefault(tag, i)
        entry = (tags, ranks, {})
        while len(_RANKS) >= _RANKS_KEPT:
            _RANKS.pop(next(iter(_RANKS)), None)  # the oldest (dicts keep insertion order)
        _RANKS[id(tags)] = entry
    return entry[1], entry[2]


def fits_target(file: IndexFile, target: Target) -> Rejection | None:
    """Whether the file can be installed on the target at all (tags, Requires-Python)."""
    if not file.is_wheel:
        return Rejection(RejectReason.NOT_A_WHEEL, file.filename)
    if tag_rank(file, target) is None:
        return _tags_rejection(file.tags)
    return python_rejection(file, target)


def python_rejection(file: IndexFile, target: Target) -> Rejection | None:
    """The file's Requires-Python excludes the target's Python (a wheel's, or an sdist's to build)."""
    if file.requires_python and _python_excluded(file.requires_python, target.python_full_version):
        return Rejection(RejectReason.REQUIRES_PYTHON, file.requires_python)
    return None


@functools.lru_cache(maxsize=1024)
def _tags_rejection(tags: frozenset[Tag]) -> Rejection:
    """The rejection of a wheel whose tags fit nowhere on the target, naming three of them (most
    files of a page are refused for their tags, and a page repeats a few sets on every row)."""
    return Rejection(RejectReason.TAGS, ", ".join(sorted(str(t) for t in tags)[:3]))


@functools.lru_cache(maxsize=4096)
def _python_excluded(requires_python: str, python_full_version: str) -> bool:
    """Whether Requires-Python excludes that Python (a page repeats a few values on every row).
    An unparsable Requires-Python is ignored, as pip and uv do."""
    try:
        spec = SpecifierSet(requires_python)
    except InvalidSpecifier:
        return False
    return not spec.contains(python_full_version, prereleases=True)


def torch_series(version: Version) -> str:
    return f"{version.major}.{version.minor}"


def torch_abi_mismatch(coupling: Coupling, why: str, file_version: Version, torch: Version | None) -> Rejection | None:
    """A FlashInfer AOT wheel (``+cu124torch2.5``) only fits a torch of that exact series."""
    if coupling is not Coupling.TORCH_ABI or not file_version.local:
        return None
    local = file_version.local
    if "torch" not in local:
        return None
    built_for = local.split("torch", 1)[1]
    if torch is None:
        return Rejection(RejectReason.TORCH_ABI, f"{why}; no torch in the plan")
    if torch.is_devrelease or torch.is_prerelease:
        return Rejection(RejectReason.TORCH_ABI, f"built for torch {built_for}, not a torch nightly")
    if torch_series(torch) != built_for:
        return Rejection(RejectReason.TORCH_ABI, f"built for torch {built_for}, torch is {torch}")
    return None


def nightly_date(version: Version) -> int | None:
    """The ``YYYYMMDD`` of a nightly's ``.devYYYYMMDD`` (None for anything else)."""
    dev = version.dev
    return dev if dev is not None and 19000101 <= dev <= 99991231 else None


def family_date_mismatch(rule: str | None, file_version: Version, torch: Version | None) -> Rejection | None:
    """A torch-family nightly that names no torch (components.toml ``[pytorch] built-for`` ``date``:
    torchao, torchcodec) fits only the torch nightly of its own day."""
    day = nightly_date(file_version)
    if rule != "date" or day is None or torch is None:
        return None
    torch_day = nightly_date(torch)
    if torch_day is None:
        return Rejection(RejectReason.TORCH_ABI, f"a nightly built on {day} against that day's torch; torch is the release {torch}")
    if torch_day != day:
        return Rejection(RejectReason.TORCH_ABI, f"a nightly built on {day} against that day's torch; torch is the nightly of {torch_day}")
    return None


def per_torch_mismatch(rule: PerTorchRule | None, file_version: Version, torch: Version | None, cuda: CudaLabel | None) -> Rejection | None:
    """A build whose local label names its torch (components.toml ``[per-torch]``:
    ``+cu12torch2.9cxx11abiTRUE``) fits a released torch of that series, a CUDA it runs under,
    and torch's C++11 ABI setting; None when the label names no torch, or it fits."""
    m = rule.local.match(file_version.local or "") if rule is not None and file_version.local else None
    if m is None or rule is None:
        return None
    series, built = m.group("torch"), f"+{file_version.local}"
    if torch is None:
        return Rejection(RejectReason.TORCH_ABI, f"{built} is built for torch {series}; no torch in the plan")
    if torch.is_devrelease or torch.is_prerelease:
        return Rejection(RejectReason.TORCH_ABI, f"{built} is built for the torch {series} release, torch is the pre-release {torch}")
    if torch_series(torch) != series:
        return Rejection(RejectReason.TORCH_ABI, f"{built} is built for torch {series}, torch is {torch}")
    digits = m.group("cuda")
    if cuda is not None:
        label = CudaLabel.parse(f"cu{digits}") if len(digits) > 2 else None
        fits = label.serves(cuda) if label is not None else int(digits) == cuda.major
        if not fits:
            return Rejection(RejectReason.CUDA, f"{built} is built for CUDA {digits if label is None else f'{label.major}.{label.minor}'}, torch for {cuda}")
    abi = m.groupdict().get("cxx11abi")
    if abi is not None and (abi == "true") != (torch >= rule.cxx11_abi_since):
        return Rejection(RejectReason.TORCH_ABI, f"{built} uses {'the C++11' if abi == 'true' else 'the old'} C++ ABI, torch {torch} the other")
    return None


def cuda_mismatch(coupling: Coupling, file_version: Version, cuda: CudaLabel | None, *, label_required: bool = False) -> Rejection | None:
    """A torch wheel must carry exactly torch's CUDA label; a CUDA-bound wheel with a local label
    (jit-cache and its providers: ``+cu130``) a label that torch's CUDA serves (same major, not
    newer), and one whose builds always carry a label (``label_required``) must have one. A
    CUDA-bound wheel without a label (NVIDIA's libraries: the major is in the name, and torch pins
    them exactly) is left to the requirements. None: nothing to refuse."""
    if cuda is None:
        return None
    local = file_version.local
    if coupling is Coupling.TORCH and local != str(cuda):
        return Rejection(RejectReason.CUDA, f"+{local or '(no label)'}, torch is built for {cuda}")
    if coupling is Coupling.CUDA and (local or label_required):
        label = CudaLabel.parse(local)
        if label is None or not label.serves(cuda):
            return Rejection(RejectReason.CUDA, f"+{local or '(no label)'} does not run under {cuda}")
    return None


def jit_cache_version(python_version: Version, label: str) -> Version:
    """The exact jit-cache version aligned with a flashinfer-python version: ``<public>+<label>``."""
    return Version(f"{python_version.public}+{label}")


def cuda_major(label: str | None) -> int | None:
    parsed = CudaLabel.parse(label)
    return parsed.major if parsed else None


def is_downgrade(old: Version, new: Version, *, public_only: bool = False) -> bool:
    if public_only:
        return public(new) < public(old)
    return new < old


def parse_version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


# -- plan invariants (shared by the resolver's self-check and `check`) -------------------------

@dataclass(frozen=True, slots=True)
class Violation:
    package: str
    message: str

    def __str__(self) -> str:
        return f"{self.package}: {self.message}"


def plan_violations(plan: LockPlan, defs: Definitions, *, torch_floor: Version | None = None, require_hashes: bool = True) -> list[Violation]:
    """Every invariant a lock plan must hold. Empty list = consistent.

    ``require_hashes=False`` for a fresh plan: PyTorch nightly rows carry no sha256 until the lock
    step downloads them; a written lock must have one for every file.
    """
    out = _duplicates(plan) + flashinfer_alignment(plan, defs)
    torch = plan.torch
    for pkg in plan.packages:
        out += _torch_abi(pkg, torch, defs)
        out += _download(pkg, require_hashes=require_hashes)
        out += _ownership(pkg, defs, plan)
    if torch is not None and torch_floor is not None and torch.version < torch_floor:
        out.append(Violation("torch", f"{torch.version} is lower than the installed {torch_floor} this lock was made for"))
    return out


def _duplicates(plan: LockPlan) -> list[Violation]:
    seen: dict[NormalizedName, int] = {}
    for pkg in plan.packages:
        seen[pkg.name] = seen.get(pkg.name, 0) + 1
    return [Violation(n, f"listed {c} times") for n, c in seen.items() if c > 1]


class Misalignment(enum.Enum):
    """Why a jit-cache (or provider) build does not belong with a flashinfer-python, first found first."""

    OTHER_RELEASE = "another release"  # public version differs from flashinfer-python's
    NO_LABEL = "no +cuNNN label"
    OTHER_MAJOR = "another CUDA major than torch's"
    NEWER_LABEL = "a label newer than torch's CUDA"


def jit_cache_misalignment(version: Version, python_version: Version, torch_cuda: CudaLabel | None) -> Misalignment | None:
    """The FlashInfer jit-cache alignment rule (components.toml [flashinfer]): ``version`` must be
    ``<flashinfer-python public version>+<label>`` with a label torch's CUDA serves. Shared by the
    plan invariants and ``doctor``; ``torch_cuda`` None skips the CUDA checks."""
    if version.public != python_version.public:
        return Misalignment.OTHER_RELEASE
    label = CudaLabel.parse(version.local)
    if label is None:
        return Misalignment.NO_LABEL
    if torch_cuda is None:
        return None
    if label.major != torch_cuda.major:
        return Misalignment.OTHER_MAJOR
    if label > torch_cuda:
        return Misalignment.NEWER_LABEL
    return None


def flashinfer_alignment(plan: LockPlan, defs: Definitions) -> list[Violation]:
    fi = defs.flashinfer
    python = plan.package(fi.python)
    if python is None:
        return []
    py_v = python.version
    out = []
    cubin = plan.package(fi.cubin)
    if cubin is not None and str(cubin.version) != str(py_v):
        out.append(Violation(fi.cubin, f"version {cubin.version} != flashinfer-python {py_v} (must match exactly)"))
    torch_cuda = CudaLabel.of_torch(plan.torch.version) if plan.torch else None
    for pkg in plan.packages:
        if pkg.name == fi.jit_cache or fi.is_provider(pkg.name):
            message = _misalignment_message(pkg.version, py_v, torch_cuda, plan.cuda_label)
            if message:
                out.append(Violation(pkg.name, message))
    return out


def _misalignment_message(v: Version, py_v: Version, torch_cuda: CudaLabel | None, group_label: str | None) -> str | None:
    label = v.local
    problem = jit_cache_misalignment(v, py_v, torch_cuda)
    if problem is Misalignment.OTHER_RELEASE:
        return f"version {v} is not {py_v.public}+<cuda label> (flashinfer-python {py_v})"
    if problem is Misalignment.NO_LABEL:
        return f"version {v} has no +cuNNN label"
    if problem is Misalignment.OTHER_MAJOR:
        return f"CUDA label {label} does not match torch's CUDA major ({torch_cuda})"
    if problem is Misalignment.NEWER_LABEL:
        return f"CUDA label {label} is newer than torch's {torch_cuda}"
    if group_label and label != group_label:
        return f"CUDA label {label} differs from the group's {group_label}"
    return None


def _torch_abi(pkg: LockedPackage, torch: LockedPackage | None, defs: Definitions) -> list[Violation]:
    if torch is None or pkg.name == torch.name:
        return []
    coupling, why = defs.coupling(pkg.name, pkg.version)
    if coupling is Coupling.TORCH_ABI:
        rej = torch_abi_mismatch(coupling, why, pkg.version, torch.version) or family_date_mismatch(defs.family_built_for.get(pkg.name), pkg.version, torch.version)
        if rej is not None:
            return [Violation(pkg.name, f"{pkg.version} is {rej.detail}")]
    per_torch = per_torch_mismatch(defs.per_torch, pkg.version, torch.version, CudaLabel.of_torch(torch.version))
    return [Violation(pkg.name, per_torch.detail)] if per_torch is not None else []


def _download(pkg: LockedPackage, *, require_hashes: bool) -> list[Violation]:
    if pkg.action is Action.KEEP:
        return []
    out = []
    if require_hashes and not pkg.sha256:
        out.append(Violation(pkg.name, "no sha256 for the file to install"))
    if pkg.url and (urlsplit(pkg.url).username or urlsplit(pkg.url).password):
        out.append(Violation(pkg.name, "URL carries credentials"))
    return out


def _ownership(pkg: LockedPackage, defs: Definitions, plan: LockPlan) -> list[Violation]:
    owner = owner_of(defs, pkg.name, pkg.version, plan)
    if pkg.index != "installed" and owner is not None and pkg.index != owner:
        return [Violation(pkg.name, f"comes from index {pkg.index!r}, but {owner!r} owns it")]
    return []


def owner_of(defs: Definitions, name: str, version: Version, plan: LockPlan) -> str | None:
    from ..data.definitions import RouteContext
    from ..model.channel import flashinfer_channel

    return defs.owner(name, version, RouteContext(flashinfer_channel=flashinfer_channel(plan.flashinfer_version), cuda=plan.target.cuda))


# -- synthetic digests (the reconstructed parts of a bundled snapshot) ------------------------

RECONSTRUCTED = "RECONSTRUCTED-NOT-REAL:"  # the stand-in scheme: sha256(RECONSTRUCTED + filename)


def synthetic_rows(packages: Iterable[LockedPackage], listed: frozenset[str] = frozenset()) -> list[LockedPackage]:
    """The rows whose sha256 is no real file's digest: listed as synthetic by the snapshot they came
    from (its manifest's ``synthetic_sha256``), or made by the reconstruction's stand-in scheme
    (recognised without the snapshot). Installing such a row can only fail its hash check."""
    return [p for p in packages if p.sha256 and (p.sha256 in listed or _stand_in(p.sha256, p.filename))]


def _stand_in(sha256: str, filename: str | None) -> bool:
    if not filename:
        return False
    from urllib.parse import unquote

    return any(hashlib.sha256(f"{RECONSTRUCTED}{name}".encode()).hexdigest() == sha256 for name in {filename, unquote(filename)})


def synthetic_note(pkg: LockedPackage) -> str:
    return f"{pkg.name} {pkg.version}: its sha256 is a stand-in from the reconstructed part of a snapshot, not the file's digest (`lock` refuses to write it)"


def spec_allows_prerelease(specs: Iterable[SpecifierSet]) -> bool:
    return any(s.prereleases for s in specs if len(s))


def newest_first(versions: Iterable[Version]) -> list[Version]:
    return sorted(set(versions), reverse=True)


def describe_versions(versions: Iterable[Version], limit: int = 6) -> str:
    vs = newest_first(versions)
    if not vs:
        return "none"
    shown = ", ".join(str(v) for v in vs[:limit])
    return shown + (f" (+{len(vs) - limit} more)" if len(vs) > limit else "")


def merge_mappings(*maps: Mapping[str, object]) -> dict[str, object]:
    out: dict[str, object] = {}
    for m in maps:
        out.update(m)
    return out
