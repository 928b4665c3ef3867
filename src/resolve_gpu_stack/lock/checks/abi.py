"""Compiled wheels: each recorded ABI verdict must hold for the lock's torch and CUDA; a verdict
replayed from a scan record (``abi-read = "recorded"``: an older reader's, a records URL's, the
shipped ones), or judged against torch's exports from an exports record, is noted as provisional."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.version import Version

from ...model import Action, Coupling, LockedPackage, LockPlan
from ...model.abi import READ_RECORDED, UNVERIFIED
from ...model.cuda import CudaLabel
from ...rules.abi import recorded_verdict_fails
from ...rules.invariants import plan_torch_cuda
from .finding import NOTE, WARNING, Expected, Finding, error_at, regenerate_hint

PROVISIONAL = (
    "its verdict is provisional: replayed from a scan record (abi-read = recorded: an older reader's, which may rest on "
    "a member entered near its end or on the names in its first bytes, or one a records URL or the tool's shipped records "
    "gave by the wheel's sha256, or torch's exports from such a record, by the torch wheel's sha256); install reads it "
    "again from the verified file"
)

if TYPE_CHECKING:
    from ...model.abi import AbiVerdict


def abi_findings(path: Path, plan: LockPlan, inputs: Mapping[str, Any], expected: Expected | None = None) -> list[Finding]:
    """Every compiled wheel's recorded ABI verdict must hold for the lock's torch and CUDA
    (``rules.abi.recorded_verdict_fails``); a lock without verdicts (written before they were
    recorded) is held to the torch its torch-ABI rows were built for. A failure is an error, unless
    the lock's inputs record the user's word (``abi-mismatch = "warn"``): then a warning."""
    out: list[Finding] = []
    for pkg in plan.packages:
        message = _abi_problem(pkg, plan.torch, plan_torch_cuda(plan)) if pkg.action is not Action.KEEP else None
        if message is None and pkg.action is not Action.KEEP and pkg.abi is not None and pkg.abi.read == READ_RECORDED:
            out.append(Finding(level=NOTE, path=path, message=PROVISIONAL, package=pkg.name))
        if message is None and pkg.action is not Action.KEEP and pkg.abi is not None and pkg.abi.unverified:
            out.append(Finding(level=NOTE, path=path, message=f"its verdict is {UNVERIFIED} (abi-read = names)", package=pkg.name))
        if message is None:
            continue
        if inputs.get("abi-mismatch") == "warn":
            out.append(Finding(level=WARNING, path=path, message=message + " (locked with --abi-mismatch warn)", package=pkg.name))
        else:
            hint = regenerate_hint(expected) or f"regenerate the lock with --without {pkg.name}, or with --abi-mismatch warn to accept it"
            out.append(error_at(path, message, package=pkg.name, hint=hint))
    return out


def _abi_problem(pkg: LockedPackage, torch: LockedPackage | None, cuda: CudaLabel | None) -> str | None:
    """Why ``pkg`` cannot be shown to run with the lock's ``torch`` (of CUDA ``cuda``, the lock's
    target: a PyPI torch has no label): its recorded verdict fails, its scan did not finish, or (no
    verdict recorded) a torch-ABI wheel built for another torch."""
    version = torch.version if torch is not None else None
    if pkg.abi is not None:
        return _verdict_problem(pkg.abi, version, cuda)
    if pkg.coupling is Coupling.UNKNOWN:
        return "compiled code whose scan did not finish: it cannot be shown to run with the lock's torch"
    if pkg.coupling is Coupling.TORCH_ABI and (pkg.abi_mismatch or _built_for_another(pkg.built_for, version)):
        built = f"built for torch {pkg.built_for}" if pkg.built_for else "built for a torch nothing names"
        return f"torch-ABI wheel {built}, the lock's torch is {version or 'unknown'}: it would fail to import (undefined symbol)"
    return None


def _verdict_problem(abi: AbiVerdict, torch: Version | None, cuda: CudaLabel | None) -> str | None:
    """Why a recorded ABI verdict does not hold for ``torch`` (and its CUDA's major: its label, else
    the lock's target CUDA, which the kept torch's runtime pin gave: ``plan_torch_cuda``)."""
    why = recorded_verdict_fails(abi, torch, cuda.major if cuda else None)
    return f"cannot be shown to run with the lock's torch: {why}" if why else None


def _built_for_another(built_for: str | None, torch: Version | None) -> bool:
    """Whether a wheel says it was built for a torch that is not ``torch``."""
    return built_for is not None and torch is not None and not _fits(built_for, torch)


def _fits(built_for: str, torch: Version) -> bool:
    """Whether a build for ``built_for`` (a version, or an A.B series) is for ``torch``."""
    want = built_for.removesuffix(".*")
    public = torch.public
    return public == want or public.startswith(want + ".")
