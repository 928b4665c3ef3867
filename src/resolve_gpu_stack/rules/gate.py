"""The kept torch's contract, checked in one place (issue 47): every plan passes this gate at every
door before anything is printed or installed (the resolver's doors: resolve, lock, a config's lock,
check --online, install, export uv; ``install --lock`` on the lock's plan and the environment).

What it holds, in order:

- the plan keeps the stack's invariants (``invariants.plan_violations``: never a torch downgrade,
  FlashInfer aligned, ownership, no duplicate): a failure is a bug;
- every compiled wheel has a verdict (no ``unknown`` coupling planned unflagged);
- nothing the target has installed is left out of line with the plan in silence: a FlashInfer
  component the plan does not touch that no longer equals (or fits) the planned flashinfer-python,
  a compiled companion whose shared objects cannot run on the kept torch (``installed_refusals``,
  read by the install door from the environment's files). Each is an error naming it and the ways
  out, unless the user's word keeps it as it is (``--keep-broken NAME``: a note then says so).

No walk-back of a package the user named is checked where the resolution's evidence is
(``resolver/walkback.py``, before the plan is made). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from packaging.utils import NormalizedName
from packaging.version import Version

from ..data.definitions import Definitions
from ..model import Action, Coupling, LockedPackage, LockPlan
from .invariants import Violation, flashinfer_alignment, plan_violations


@dataclass(frozen=True, slots=True, kw_only=True)
class Broken:
    """An installed package the plan leaves as it is, known not to work with the plan."""

    package: NormalizedName
    version: Version
    why: str
    ways: tuple[str, ...] = ()  # what brings it in line, best first (the word that keeps it is added by ``broken_error``)

    def words(self) -> str:
        return f"{self.package} {self.version} (installed, left as it is): {self.why}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """What the gate found: ``bugs`` (the plan breaks an invariant), ``broken`` (refused unless
    kept), ``kept`` (broken, kept by the user's word: said in a note)."""

    bugs: tuple[Violation, ...] = ()
    broken: tuple[Broken, ...] = ()
    kept: tuple[Broken, ...] = ()

    def kept_notes(self) -> tuple[str, ...]:
        return tuple(f"{b.words()}; kept by --keep-broken {b.package}: expect it to fail" for b in self.kept)


def gate(
    plan: LockPlan,
    defs: Definitions,
    *,
    installed: Mapping[NormalizedName, Version],
    keep: frozenset[NormalizedName] = frozenset(),
    installed_refusals: Mapping[NormalizedName, str] | None = None,
    torch_floor: Version | None = None,
    require_hashes: bool = False,
) -> Verdict:
    """The contract for ``plan`` on a target with ``installed``: see the module docstring.
    ``installed_refusals``: per installed compiled package, why its shared objects cannot run on the
    installed torch (the install door reads them; None: not read)."""
    bugs = [*plan_violations(plan, defs, torch_floor=torch_floor, require_hashes=require_hashes), *_unjudged(plan)]
    broken = [*installed_out_of_line(plan, defs, installed), *_companions(plan, installed, installed_refusals or {})]
    return Verdict(bugs=tuple(bugs), broken=tuple(b for b in broken if b.package not in keep), kept=tuple(b for b in broken if b.package in keep))


def _unjudged(plan: LockPlan) -> list[Violation]:
    """A compiled wheel planned without a verdict (its scan did not finish), unflagged."""
    return [
        Violation(p.name, "compiled code planned without a verdict on the plan's torch")
        for p in plan.packages
        if p.coupling is Coupling.UNKNOWN and not p.abi_mismatch and p.action is not Action.KEEP
    ]


def installed_out_of_line(plan: LockPlan, defs: Definitions, installed: Mapping[NormalizedName, Version]) -> list[Broken]:
    """The FlashInfer components installed on the target that the plan does not touch, out of line
    with its flashinfer-python (``flashinfer_alignment``'s own rule, as if the plan kept them)."""
    fi = defs.flashinfer
    if plan.package(fi.python) is None:
        return []
    planned = {p.name for p in plan.packages}
    left = {
        name: version
        for name, version in installed.items()
        if name not in planned and (name in (fi.cubin, fi.jit_cache) or fi.is_provider(name)) and name != fi.python
    }
    if not left:
        return []
    rows = tuple(
        LockedPackage(name=name, version=version, action=Action.KEEP, index="installed", coupling=defs.coupling(name, version)[0])
        for name, version in sorted(left.items())
    )
    python = plan.package(fi.python)
    assert python is not None
    flag = {fi.cubin: "--no-cubin", fi.jit_cache: "--no-jit-cache"}
    return [
        Broken(
            package=name,
            version=left[name],
            why=f"{v.message}: flashinfer-python {python.version} fails at import with it beside",
            ways=(*([f"let the plan align it: leave out {flag[name]}"] if name in flag else []), f"uninstall it: uv pip uninstall {name}"),
        )
        for v in flashinfer_alignment(replace(plan, packages=(*plan.packages, *rows)), defs)
        if (name := NormalizedName(v.package)) in left
    ]


def _companions(plan: LockPlan, installed: Mapping[NormalizedName, Version], refusals: Mapping[NormalizedName, str]) -> list[Broken]:
    """Installed compiled packages the plan leaves as they are (not in it, or kept) whose shared
    objects cannot run on the kept torch; only when the plan keeps the installed torch (their
    verdicts were read against it)."""
    torch = plan.torch
    if torch is None or torch.action is not Action.KEEP:
        return []
    out = []
    for name, why in sorted(refusals.items()):
        row = plan.package(name)
        if name in installed and (row is None or row.action is Action.KEEP):
            out.append(
                Broken(
                    package=name,
                    version=installed[name],
                    why=f"{why}; it fails at import on torch {torch.version}",
                    ways=(f"replace it with a release that runs: --with {name}", f"uninstall it: uv pip uninstall {name}"),
                )
            )
    return out


def broken_message(broken: tuple[Broken, ...]) -> tuple[str, list[str], str]:
    """(headline, reasons, hint) of the error that names what the plan would leave broken."""
    names = ", ".join(f"{b.package} {b.version}" for b in broken)
    ways = [f"{b.package}: " + "; or ".join([*b.ways, f"keep it as it is: --keep-broken {b.package}"]) for b in broken]
    return (
        f"{names}: installed, and known not to work with the plan; nothing is installed while it is left broken in silence",
        [b.words() for b in broken],
        "the ways out:\n  " + "\n  ".join(ways),
    )
