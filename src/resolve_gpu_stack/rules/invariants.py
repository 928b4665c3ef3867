"""The invariants every plan must keep, and their wording: shared by the resolver's self-check,
``check`` (a lock on disk) and ``doctor`` (an environment). Pure; the data (which package is coupled
how, who owns what) comes from ``Definitions``.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from packaging.utils import NormalizedName
from packaging.version import Version

from ..data.definitions import Definitions, RouteContext
from ..model import Action, Coupling, LockedPackage, LockPlan
from ..model.channel import flashinfer_channel, torch_origin
from ..model.cuda import CudaLabel
from .fit import family_date_mismatch, per_torch_mismatch, torch_abi_mismatch


@dataclass(frozen=True, slots=True)
class Violation:
    """A plan's broken invariant: the package and what is wrong."""

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
    torch_cuda = plan_torch_cuda(plan)
    owners = owner_context(plan)  # once a plan: its torch is looked up by name
    for pkg in plan.packages:
        out += _torch_abi(pkg, torch, torch_cuda, defs)
        out += _download(pkg, require_hashes=require_hashes)
        out += _ownership(pkg, defs, owners)
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
    torch_cuda = plan_torch_cuda(plan)
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


def plan_torch_cuda(plan: LockPlan) -> CudaLabel | None:
    """The CUDA of a plan's torch: its label, else the plan's target CUDA (a PyPI torch has no label:
    its runtime pin gave the plan's CUDA)."""
    return (CudaLabel.of_torch(plan.torch.version) or CudaLabel.parse(plan.target.cuda)) if plan.torch else None


def _torch_abi(pkg: LockedPackage, torch: LockedPackage | None, torch_cuda: CudaLabel | None, defs: Definitions) -> list[Violation]:
    if torch is None or pkg.name == torch.name:
        return []
    coupling, why = defs.coupling(pkg.name, pkg.version)
    if coupling is Coupling.TORCH_ABI:
        rej = torch_abi_mismatch(coupling, why, pkg.version, torch.version) or family_date_mismatch(
            defs.family_built_for.get(pkg.name), pkg.version, torch.version
        )
        if rej is not None:
            return [Violation(pkg.name, f"{pkg.version} is {rej.detail}")]
    per_torch = per_torch_mismatch(defs.per_torch, pkg.version, torch.version, torch_cuda)
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


def _ownership(pkg: LockedPackage, defs: Definitions, owners: RouteContext) -> list[Violation]:
    if pkg.sdist is not None and pkg.sdist.origin is not None:
        return []  # built from a source tree the user named (--build 'NAME @ URL'): no index owns it
    owner = defs.owner(pkg.name, pkg.version, owners)
    if pkg.index != "installed" and owner is not None and pkg.index != owner:
        return [Violation(pkg.name, f"comes from index {pkg.index!r}, but {owner!r} owns it")]
    return []


def owner_of(defs: Definitions, name: str, version: Version, plan: LockPlan) -> str | None:
    return defs.owner(name, version, owner_context(plan))


def owner_context(plan: LockPlan) -> RouteContext:
    """What the index that owns a package of ``plan`` depends on: its FlashInfer channel, CUDA and torch."""
    torch = plan.torch
    return RouteContext(
        flashinfer_channel=flashinfer_channel(plan.flashinfer_version),
        cuda=plan.target.cuda,
        torch_from=torch_origin(torch.version if torch is not None else None),
    )


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
    return any(hashlib.sha256(f"{RECONSTRUCTED}{name}".encode()).hexdigest() == sha256 for name in {filename, unquote(filename)})


def synthetic_note(pkg: LockedPackage) -> str:
    return f"{pkg.name} {pkg.version}: its sha256 is a stand-in from the reconstructed part of a snapshot, not the file's digest (`lock` refuses to write it)"


__all__ = [
    "RECONSTRUCTED",
    "Misalignment",
    "Violation",
    "flashinfer_alignment",
    "jit_cache_misalignment",
    "owner_of",
    "plan_violations",
    "synthetic_note",
    "synthetic_rows",
]
