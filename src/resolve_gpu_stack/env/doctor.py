"""`doctor`: verify an installed torch + FlashInfer stack past "it imports" (stories.md, story 3).

Pure: stdlib + packaging. Every check reads an ``Environment`` (``probe.inspect_environment``),
the component rules (``indexes.Definitions``) and two facts gathered at the edge by ``cmd_doctor``:
the result of importing flashinfer in the target, and the GPUs nvidia-smi lists. A check never claims
what it did not look at: without the fact it needs it says ``skip`` and why.

Decisions (flashinfer.md section 6):
- A missing flashinfer-cubin or flashinfer-jit-cache is a ``warn`` naming what is lost: FlashInfer
  works without either (cubins are downloaded on first use, kernels JIT-compiled with nvcc), and
  nothing in the other components declares them. The one case where the other components do imply
  a component is the 0.7 split: a jit-cache shim with no ``flashinfer-jit-cache-sm*`` provider
  carries no kernels, and a provider without its shim is never used (FlashInfer checks each provider
  against the shim's version), so both are failures. A shim with only some of the providers its
  Requires-Dist lists is normal ("minimal" installs); the GPU check says whether the local GPUs are
  covered.
- Alignment is the resolver's, stricter than FlashInfer's own checks: cubin == python as strings;
  jit-cache and every provider == ``<python public version>+cuNNN``; providers == the shim.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from ..data.definitions import Definitions
from ..model import Coupling
from ..model.cuda import CudaLabel, cuda_label_text
from ..rules.fit import torch_abi_mismatch
from ..rules.invariants import Misalignment, jit_cache_misalignment
from ..rules.versions import cuda_major, public
from .abi_imports import ImportOutcome, StaticVerdict
from .doctor_gpu import arch_floor_problems, check_apis, visible_gpus
from .doctor_stack import (
    FAIL,
    LEGACY_FLASHINFER,
    PASS,
    SKIP,
    TORCH,
    TVM_FFI,
    WARN,
    Check,
    ImportResult,
    Stack,
    cuda_text,
    installed_stack,
    pkg,
    requirements,
)
from .gpu import Gpu, GpuQuery, describe_gpus, gpu_groups, parse_nvidia_smi, provider_arch, sass_covers
from .probe import Environment, InstalledDistribution

SCHEMA = "resolve-gpu-stack/doctor/v1"
DISABLE_VERSION_CHECK = "FLASHINFER_DISABLE_VERSION_CHECK"


def doctor_ok(checks: Iterable[Check]) -> bool:
    """Every check that ran passed: warn counts as a pass, skip is not a failure."""
    return not any(c.failed for c in checks)


# -- 1. torch -------------------------------------------------------------------------------------


def _check_torch(s: Stack) -> Check:
    t = s.torch
    if t is None:
        return Check("torch", FAIL, f"torch is not installed in {s.env.interpreter}", {})
    details: dict[str, Any] = {"version": str(t.version), "cuda": s.torch_cuda}
    label = cuda_label_text(t.version)
    if label is not None:
        return Check("torch", PASS, f"torch {t.version} ({cuda_text(label)})", details)
    local = t.version.local or ""
    kind = re.match(r"^(cpu|rocm|xpu)", local)
    if kind:
        what = {"cpu": "CPU-only", "rocm": "ROCm", "xpu": "XPU"}[kind[1]]
        return Check("torch", FAIL, f"torch {t.version} is a {what} build: FlashInfer needs a CUDA build of torch (+cuNNN)", details)
    kept = s.torch_cuda_from
    if kept is not None:  # a PyPI torch: its CUDA by the rule every command uses
        details["cuda_from"] = kept.evidence or kept.source
        return Check("torch", PASS, f"torch {t.version} ({cuda_text(str(kept.label))}, {kept.label}: no +cuNNN label; {kept.words()})", details)
    return Check(
        "torch",
        WARN,
        f"torch {t.version} has no +cuNNN label and names no CUDA runtime: its CUDA version is unknown, so CUDA labels are not checked against it",
        details,
    )


# -- 2. components present ----------------------------------------------------------------------


def _check_components(s: Stack) -> Check:
    fi = s.defs.flashinfer
    installed = {d.name: str(d.version) for d in (s.python, s.cubin, *s.jit_cache_dists) if d is not None}
    details: dict[str, Any] = {"installed": installed}
    if not s.any_flashinfer:
        return Check("flashinfer-components", SKIP, "FlashInfer is not installed", details)
    if s.python is None:
        others = ", ".join(f"{n} {v}" for n, v in installed.items())
        return Check("flashinfer-components", FAIL, f"{others} installed without {fi.python}, which every component needs", details)
    fails, warns = _component_problems(s, s.python)
    present = ", ".join(f"{n} {v}" for n, v in installed.items())
    if fails:
        return Check("flashinfer-components", FAIL, "; ".join(fails + warns), details)
    if warns:
        return Check("flashinfer-components", WARN, "; ".join(warns), details)
    return Check("flashinfer-components", PASS, present, details)


def _component_problems(s: Stack, python: InstalledDistribution) -> tuple[list[str], list[str]]:
    """(failures, warnings) about which FlashInfer components are installed beside ``python``."""
    fi = s.defs.flashinfer
    fails: list[str] = []
    if s.providers and s.shim is None:
        names = ", ".join(d.name for d in s.providers)
        fails.append(
            f"{names} installed without the {fi.jit_cache} shim: FlashInfer checks each provider against the "
            f"shim's version, so none is used (install {fi.jit_cache}=={s.providers[0].version})"
        )
    if s.shim is not None and not s.providers and public(s.shim.version) >= fi.providers_since:
        fails.append(f"{pkg(s.shim)} is installed without any {fi.providers} provider: the shim carries no kernels")
    return fails, _missing_components(s, python)


def _missing_components(s: Stack, python: InstalledDistribution) -> list[str]:
    """Warnings for the components a FlashInfer that publishes them (0.4.0 on) goes without."""
    fi = s.defs.flashinfer
    warns: list[str] = []
    if public(python.version) < fi.jit_cache_since:
        return warns
    if s.cubin is None:
        warns.append(f"{fi.cubin} is not installed: precompiled kernel binaries (cubins) are downloaded on first use, which needs network access")
    if s.shim is None and not s.providers:
        warns.append(f"{fi.jit_cache} is not installed: kernels are JIT-compiled on first use, which needs nvcc and takes minutes")
    return warns


# -- 2b. components aligned -----------------------------------------------------------------------


def _jit_cache_problem(s: Stack, python: InstalledDistribution, dist: InstalledDistribution) -> str | None:
    """A jit-cache build ``dist`` against flashinfer-python (``python``), the shim and torch's CUDA."""
    py_v = python.version
    v = dist.version
    want = f"{py_v.public}+cuNNN"
    torch_cuda = s.torch_cuda if s.torch is not None else None
    problem = jit_cache_misalignment(v, py_v, CudaLabel.parse(torch_cuda))
    if problem is Misalignment.OTHER_RELEASE:
        loose = " (FlashInfer's own startswith check would accept it)" if str(v).startswith(str(py_v)) else ""
        return f"{pkg(dist)} is not {want} for flashinfer-python {py_v}: its kernels belong to another release{loose}"
    if problem is Misalignment.NO_LABEL:
        return f"{pkg(dist)} has no +cuNNN label (expected {want})"
    if s.shim is not None and dist is not s.shim and str(v) != str(s.shim.version):
        return f"{pkg(dist)} != the shim {pkg(s.shim)}: FlashInfer ignores a provider whose version differs from the shim's"
    return _label_problem(s, dist, problem)


def _label_problem(s: Stack, dist: InstalledDistribution, problem: Misalignment | None) -> str | None:
    """A jit-cache build's CUDA label against torch's."""
    label = dist.version.local or ""
    torch_cuda = s.torch_cuda
    if s.torch is None or torch_cuda is None:  # the CUDA checks need torch's label (jit_cache_misalignment skips them)
        return None
    if problem is Misalignment.OTHER_MAJOR:
        major = cuda_major(label)
        return (
            f"{pkg(dist)} is built for {cuda_text(label)} but torch {s.torch.version} runs {cuda_text(torch_cuda)}: "
            f"its kernels link libcudart.so.{major}, which will not be there (torch brings libcudart.so.{cuda_major(torch_cuda)})"
        )
    if problem is Misalignment.NEWER_LABEL:
        return (
            f"{pkg(dist)} is built for {cuda_text(label)}, newer than torch's {cuda_text(str(torch_cuda))}: "
            f"its kernels may need a newer CUDA runtime than torch's; use a label <= {torch_cuda}"
        )
    return None


def _check_alignment(s: Stack) -> Check:
    name = "flashinfer-alignment"
    py = s.python
    if py is None:
        return Check(name, SKIP, "flashinfer-python is not installed: nothing to align", {})
    if py.version.public == "0.0.0" and py.version.local == "unknown":
        return Check(
            name, WARN, f"flashinfer-python {py.version} is an editable or source install: FlashInfer skips its version checks and so does this one", {}
        )
    problems, checked = _alignment_problems(s, py)
    details = {"checked": checked, "torch_cuda": s.torch_cuda}
    if problems:
        return Check(name, FAIL, "; ".join(problems), details)
    if s.jit_cache_dists and s.torch_cuda is None:
        return Check(name, WARN, f"{', '.join(checked)} aligned; torch's CUDA is unknown, so the jit-cache CUDA label was not checked against it", details)
    label = next((d.version.local for d in s.jit_cache_dists), None)
    tail = f", label {label} fits torch's {s.torch_cuda}" if label else ""
    return Check(name, PASS, f"aligned: {', '.join(checked)}{tail}", details)


def _alignment_problems(s: Stack, py: InstalledDistribution) -> tuple[list[str], list[str]]:
    """(what is misaligned, what was checked): the cubin and every jit-cache build against ``py``."""
    problems: list[str] = []
    checked = [f"flashinfer-python {py.version}"]
    if s.cubin is not None:
        if str(s.cubin.version) != str(py.version):
            problems.append(
                f"flashinfer-cubin {s.cubin.version} != flashinfer-python {py.version}: FlashInfer requires the "
                "exact same version (import fails on 0.4.0-0.7.1, the cubins are ignored from 0.7.2rc3)"
            )
        checked.append(f"flashinfer-cubin {s.cubin.version}")
    for dist in s.jit_cache_dists:
        problem = _jit_cache_problem(s, py, dist)
        if problem:
            problems.append(problem)
        checked.append(pkg(dist))
    return problems, checked


# -- 3. apache-tvm-ffi ----------------------------------------------------------------------------


def _check_tvm_ffi(s: Stack) -> Check:
    name = "apache-tvm-ffi"
    py = s.python
    if py is None:
        return Check(name, SKIP, "flashinfer-python is not installed", {})
    if public(py.version) < s.defs.flashinfer.agnostic_since:
        return Check(name, SKIP, f"flashinfer-python {py.version} predates apache-tvm-ffi (binds kernels through libtorch)", {})
    reqs = [r for r in requirements(py, s.markers) if canonicalize_name(r.name) == TVM_FFI]
    tvm = s.env.distributions.get(TVM_FFI)
    spec = ",".join(str(r.specifier) for r in reqs if str(r.specifier))
    details: dict[str, Any] = {"installed": str(tvm.version) if tvm else None, "required": spec or None}
    return _tvm_ffi_verdict(name, py, tvm, reqs, spec, details)


def _tvm_ffi_verdict(
    name: str, py: InstalledDistribution, tvm: InstalledDistribution | None, reqs: Sequence[Requirement], spec: str, details: dict[str, Any]
) -> Check:
    if not reqs:
        msg = "flashinfer-python declares no apache-tvm-ffi requirement"
        return Check(name, WARN, msg + ("" if tvm else ", and apache-tvm-ffi is not installed"), details)
    if tvm is None:
        return Check(name, FAIL, f"apache-tvm-ffi is not installed; flashinfer-python {py.version} requires apache-tvm-ffi{spec}", details)
    bad = [r for r in reqs if not r.specifier.contains(tvm.version, prereleases=True)]
    if bad:
        return Check(name, FAIL, f"apache-tvm-ffi {tvm.version} is outside flashinfer-python {py.version}'s range {spec}", details)
    return Check(name, PASS, f"apache-tvm-ffi {tvm.version} within {spec or 'any version'}", details)


# -- 4. torch-ABI-bound packages --------------------------------------------------------------------


def _abi_problem(s: Stack, dist: InstalledDistribution, why: str) -> tuple[str, str] | None:
    """(status, message) for one torch-ABI-bound distribution, or None when it fits the torch."""
    torch_v = s.torch.version if s.torch else None
    rej = torch_abi_mismatch(Coupling.TORCH_ABI, why, dist.version, torch_v)
    if rej is not None:
        return FAIL, f"{pkg(dist)} is {rej.detail} ({why}); installed torch: {torch_v or 'none'}"
    pins = _torch_pins(dist, s)
    unmet = _unmet_pin(dist, pins, torch_v, why)
    if unmet is not None:
        return FAIL, unmet
    if pins or dist.version.local and "torch" in dist.version.local:
        return None
    return _stale_kernels(s, dist)


def _torch_pins(dist: InstalledDistribution, s: Stack) -> list[Requirement]:
    """``dist``'s requirements on torch that say a version."""
    return [r for r in requirements(dist, s.markers) if canonicalize_name(r.name) == TORCH and str(r.specifier)]


def _stale_kernels(s: Stack, dist: InstalledDistribution) -> tuple[str, str] | None:
    """A FlashInfer that builds against libtorch with no torch pin: its JIT cache may be stale."""
    if dist.name in (s.defs.flashinfer.python, LEGACY_FLASHINFER):
        return WARN, (
            f"{pkg(dist)} builds its kernels against libtorch and pins no torch: kernels JIT-compiled "
            f"for an earlier torch may be stale (its cache is not keyed by version before 0.4.1)"
        )
    return None


def _unmet_pin(dist: InstalledDistribution, pins: Sequence[Requirement], torch_v: Version | None, why: str) -> str | None:
    """Why ``dist``'s torch pin is not met by the installed torch (none installed, or another)."""
    for req in pins:
        if torch_v is None:
            return f"{pkg(dist)} requires {req}, and torch is not installed"
        if not req.specifier.contains(torch_v, prereleases=True):
            return f"{pkg(dist)} requires {req}, not the installed torch {torch_v} ({why})"
    return None


def _torch_abi_bound(s: Stack) -> list[tuple[InstalledDistribution, str]]:
    """The installed distributions the data calls torch-ABI-bound, with why."""
    bound = []
    for dist in s.env.distributions.values():
        rule = s.defs.coupling_rule(dist.name, dist.version)
        if rule is not None and rule[0] is Coupling.TORCH_ABI:
            bound.append((dist, rule[1]))
        elif rule is None and dist.name in s.defs.pytorch_family and dist.name != TORCH:  # PyPI's releases: no label, no row
            bound.append((dist, "a torch-family library, built with torch"))
    return bound


def _check_torch_abi(s: Stack) -> Check:
    name = "torch-abi"
    bound = _torch_abi_bound(s)
    if not bound:
        return Check(name, PASS, "no torch-ABI-bound packages besides torch", {"packages": []})
    found = [p for dist, why in bound if (p := _abi_problem(s, dist, why)) is not None]
    details: dict[str, Any] = {"packages": [pkg(d) for d, _ in bound]}
    torch_v = s.torch.version if s.torch else "none"
    return _verdict(name, found, details, f"{', '.join(details['packages'])} fit torch {torch_v}")


def _verdict(name: str, found: Sequence[tuple[str, str]], details: dict[str, Any], fine: str) -> Check:
    """FAIL naming the failures among ``found`` ((status, message) each), else WARN naming the
    warnings, else PASS saying ``fine``."""
    fails = [msg for status, msg in found if status == FAIL]
    if fails:
        return Check(name, FAIL, "; ".join(fails), details)
    if found:
        return Check(name, WARN, "; ".join(msg for _, msg in found), details)
    return Check(name, PASS, fine, details)


# -- 4b. compiled packages against the installed torch, statically ---------------------------------


def _check_abi_symbols(verdicts: Sequence[StaticVerdict]) -> Check:
    """Each installed package whose shared objects link torch or need CUDA, judged against the
    installed torch from its symbols, before any import (``abi_imports.static_verdicts``)."""
    name = "torch-abi-symbols"
    details = {"packages": [{"package": v.package, "members": list(v.members), "abi": v.verdict.to_dict()} for v in verdicts]}
    if not verdicts:
        return Check(name, PASS, "no installed shared objects link torch or need a CUDA runtime besides torch's own", details)
    fails = [f"{v.package}: {v.verdict.refusal}" for v in verdicts if v.verdict.refusal is not None]
    if fails:
        return Check(name, FAIL, "; ".join(fails) + " (not imported)", details)
    notes = [f"{v.package}: {v.verdict.note}" for v in verdicts if v.verdict.note]
    if not notes:
        return Check(name, PASS, f"{', '.join(v.package for v in verdicts)} fit the installed torch", details)
    # a summary, not a cell of forty lines: every caveat is in the details (JSON; the table's -v)
    noted = [v.package for v in verdicts if v.verdict.note]
    message = f"{len(verdicts)} package(s) fit the installed torch; {len(noted)} with a caveat ({_names(noted)}), e.g. {notes[0]}" + (
        "" if len(notes) == 1 else f"; all {len(notes)}: `doctor -v`, or `--format json` (details.notes)"
    )
    return Check(name, WARN, message, {**details, "notes": notes})


def _names(names: Sequence[str], shown: int = 4) -> str:
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


# -- 4c. torch-ABI-bound packages import --------------------------------------------------------------


def _check_abi_imports(outcomes: Sequence[ImportOutcome], not_imported: Sequence[str] = ()) -> Check:
    """Each installed torch-ABI-bound package imported in the target (``env/abi_imports.py``);
    ``not_imported``: the packages left unimported because they need the NVIDIA driver and this
    host has none (their shared objects were judged from their symbols: ``torch-abi-symbols``). An
    import that fails for want of the driver's libcuda is no failure either: a skip, said apart
    from an ``undefined symbol`` (a binary built for another torch)."""
    name = "torch-abi-import"
    details = {"imports": [{"package": o.package, "module": o.module, "error": o.error} for o in outcomes], "no-driver": list(not_imported)}
    if not outcomes and not not_imported:
        return Check(name, PASS, "no torch-ABI-bound packages to import besides torch", details)
    fails = []
    driverless = [*not_imported]
    for o in outcomes:
        if o.undefined_symbol:
            fails.append(f"{o.package} is built for another torch: import {o.module} failed with an undefined symbol ({o.error})")
        elif o.no_driver:
            driverless.append(o.package)
        elif o.error is not None:
            fails.append(f"{o.package}: import {o.module} failed: {o.error}")
    if fails:
        return Check(name, FAIL, "; ".join(fails), details)
    imported = sorted({o.package for o in outcomes} - set(driverless))
    if driverless:
        said = f"no NVIDIA driver on this host: {', '.join(sorted(set(driverless)))} need{'s' if len(set(driverless)) == 1 else ''} libcuda.so.1, so {'it was' if len(set(driverless)) == 1 else 'they were'} judged from {'its' if len(set(driverless)) == 1 else 'their'} symbols only, not imported"
        return Check(name, SKIP, said + (f"; imported {', '.join(imported)}" if imported else ""), details)
    return Check(name, PASS, f"imported {', '.join(imported)}", details)


# -- 5. import --------------------------------------------------------------------------------------


def _check_import(s: Stack, result: ImportResult | None) -> Check:
    name = "flashinfer-import"
    if result is None:
        why = "FlashInfer is not installed" if not s.any_flashinfer else "the import was not run"
        return Check(name, SKIP, why, {})
    note = f" ({DISABLE_VERSION_CHECK} is set in your environment; it was removed for this check)" if result.env_bypass else ""
    details = {"version": result.version, "error": result.error, "version_check_bypass_in_env": result.env_bypass}
    if not result.ok and result.error is not None and "libcuda.so" in result.error and "cannot open shared object file" in result.error:
        said = f"no NVIDIA driver on this host: import flashinfer needs libcuda.so.1 ({result.error}); not a fault of the install{note}"
        return Check(name, SKIP, said, {**details, "no-driver": ["flashinfer"]})
    if not result.ok:
        return Check(name, FAIL, f"import flashinfer failed: {result.error or 'no error text'}{note}", details)
    installed = s.python.version if s.python else None
    if installed is not None and result.version and result.version != str(installed):
        return Check(
            name,
            WARN,
            f"import flashinfer gave version {result.version}, but flashinfer-python {installed} is installed: another copy shadows it{note}",
            details,
        )
    return Check(name, PASS, f"import flashinfer -> {result.version}{note}", details)


# -- 6. GPU architecture ----------------------------------------------------------------------------


def _jit_cache_targets(s: Stack) -> tuple[str, tuple[str, ...] | None]:
    """(what provides the kernels, its SASS targets); targets None when the arch table has no row."""
    fi = s.defs.flashinfer
    shim = s.shim
    if s.providers or (shim is not None and public(shim.version) >= fi.providers_since):
        return _provider_targets(s)
    assert shim is not None
    label = shim.version.local or ""
    machine = s.env.target.markers.get("platform_machine", "")
    return f"flashinfer-jit-cache {shim.version}", fi.jit_cache_archs(public(shim.version), label, machine)


def _provider_targets(s: Stack) -> tuple[str, tuple[str, ...]]:
    """FlashInfer 0.7 on: the providers installed, each one architecture's kernels."""
    fi = s.defs.flashinfer
    archs = tuple(a for d in s.providers if (a := provider_arch(d.name, fi.providers)) is not None)
    version = s.shim.version if s.shim else s.providers[0].version
    names = ", ".join(d.name.rsplit("-", 1)[-1] for d in s.providers) or "none"
    return f"flashinfer-jit-cache {version} (providers: {names})", archs


def _check_gpu(s: Stack, query: GpuQuery | None) -> Check:
    name = "gpu-arch"
    unusable = _unusable_query(name, query)
    if unusable is not None:
        return unusable
    assert query is not None
    details = _gpu_details(query)
    groups = gpu_groups(query.gpus)
    seen = ", ".join(describe_gpus(cap, names) for cap, names in groups.items())
    floors = arch_floor_problems(s, visible_gpus(query))
    if s.shim is None and not s.providers:
        if floors:
            return Check(name, FAIL, "; ".join(floors), details)
        return Check(name, SKIP, f"GPUs {seen}; no flashinfer-jit-cache installed, so there is no kernel coverage to check", details)
    source, targets = _jit_cache_targets(s)
    details["jit_cache"] = source
    details["sass_targets"] = list(targets) if targets is not None else None
    if targets is None:
        if floors:
            return Check(name, FAIL, "; ".join(floors), details)
        return Check(name, WARN, f"arch coverage unknown for {source}: not in the arch table (GPUs {seen})", details)
    fails, warns, oks = _coverage(groups, targets, source)
    return _worst(name, floors + fails, warns, oks, details)


def _worst(name: str, fails: list[str], warns: list[str], oks: list[str], details: dict[str, Any]) -> Check:
    """FAIL naming the failures (then the warnings), else WARN, else PASS."""
    if fails:
        return Check(name, FAIL, "; ".join(fails + warns), details)
    if warns:
        return Check(name, WARN, "; ".join(warns + oks), details)
    return Check(name, PASS, "; ".join(oks), details)


def _unusable_query(name: str, query: GpuQuery | None) -> Check | None:
    """The check when nvidia-smi is missing, fails or lists no GPU (nothing to check); else None."""
    if query is None:
        return Check(name, SKIP, "no nvidia-smi: GPU architecture not checked", {})
    if not query.found:
        return Check(name, SKIP, f"no nvidia-smi at {query.tool}: GPU architecture not checked", {"nvidia_smi": query.tool})
    if query.error:
        return Check(name, WARN, f"{query.tool} failed ({query.error}): GPU architecture not checked", _gpu_details(query))
    if not query.gpus:
        return Check(name, WARN, f"{query.tool} lists no GPUs: GPU architecture not checked", _gpu_details(query))
    return None


def _gpu_details(query: GpuQuery) -> dict[str, Any]:
    return {
        "nvidia_smi": query.tool,
        "gpus": [{"name": g.name, "compute_cap": f"{g.compute_cap[0]}.{g.compute_cap[1]}" if g.compute_cap else None} for g in query.gpus],
    }


def _coverage(groups: Mapping[tuple[int, int] | None, list[str]], targets: Sequence[str], source: str) -> tuple[list[str], list[str], list[str]]:
    """(failures, warnings, passes) for each group of GPUs against the jit-cache's SASS targets."""
    fails, warns, oks = [], [], []
    for cap, names in groups.items():
        if cap is None:
            warns.append(f"nvidia-smi reported no compute capability for {', '.join(sorted(set(names)))}: not checked")
            continue
        hit = next((t for t in targets if sass_covers(t, cap)), None)
        if hit is None:
            have = " ".join(targets) or "none"
            fails.append(f"no kernels for {describe_gpus(cap, names)} in {source} (SASS for {have}); they would be JIT-compiled, which needs nvcc")
        else:
            oks.append(f"{describe_gpus(cap, names)} covered by {source} (SASS {hit})")
    return fails, warns, oks


# -- all of them ------------------------------------------------------------------------------------


def run_checks(
    env: Environment,
    defs: Definitions,
    *,
    import_result: ImportResult | None,
    gpus: GpuQuery | None,
    require_api: Sequence[str] = (),
    abi_imports: Sequence[ImportOutcome] | None = None,
    abi_symbols: Sequence[StaticVerdict] | None = None,
    not_imported: Sequence[str] = (),
) -> list[Check]:
    """Every check, in a fixed order. ``import_result``/``gpus`` None: that check is skipped. With
    ``require_api``, a last check that the imported module has each API (per visible GPU's floor).
    ``abi_imports`` / ``abi_symbols`` None: the torch-ABI import / symbol check is left out (a
    caller that ran none); ``not_imported``: the packages not imported for want of the NVIDIA driver."""
    s = installed_stack(env, defs)
    abi = ([] if abi_symbols is None else [_check_abi_symbols(abi_symbols)]) + ([] if abi_imports is None else [_check_abi_imports(abi_imports, not_imported)])
    api = [check_apis(s, import_result, require_api, gpus)] if require_api else []
    return [
        _check_torch(s),
        _check_components(s),
        _check_alignment(s),
        _check_tvm_ffi(s),
        _check_torch_abi(s),
        *abi,
        _check_import(s, import_result),
        _check_gpu(s, gpus),
        *api,
    ]


NO_DRIVER_EXIT = 5  # nothing failed, but what needs the NVIDIA driver was not checked: this host has none


def driverless(checks: Iterable[Check]) -> bool:
    """Whether a check was skipped because this host has no NVIDIA driver (``NO_DRIVER_EXIT``)."""
    return any(c.status == SKIP and c.details.get("no-driver") for c in checks)


def needs_import(env: Environment, defs: Definitions) -> bool:
    """Whether there is a flashinfer to import at all."""
    dists = env.distributions
    return defs.flashinfer.python in dists or LEGACY_FLASHINFER in dists


def report_json(python: str, checks: Sequence[Check]) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "python": python,
        "checks": [{"name": c.name, "status": c.status, "message": c.message, "details": dict(c.details)} for c in checks],
        "ok": doctor_ok(checks),
    }


__all__ = [
    "NO_DRIVER_EXIT",
    "Check",
    "Gpu",
    "GpuQuery",
    "ImportResult",
    "SCHEMA",
    "doctor_ok",
    "driverless",
    "needs_import",
    "parse_nvidia_smi",
    "provider_arch",
    "report_json",
    "run_checks",
    "sass_covers",
]
