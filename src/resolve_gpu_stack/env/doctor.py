"""`doctor`: verify an installed torch + FlashInfer stack past "it imports" (stories.md, story 3).

Pure: stdlib + packaging. Every check reads an ``Environment`` (``target.inspect_environment``),
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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import NormalizedName, canonicalize_name

from ..data.definitions import Definitions
from ..model import Coupling
from ..model.cuda import CudaLabel, cuda_label_text
from ..resolver.policy import Misalignment, cuda_major, jit_cache_misalignment, public, torch_abi_mismatch
from .target import Environment, InstalledDistribution

SCHEMA = "resolve-gpu-stack/doctor/v1"
PASS, WARN, SKIP, FAIL = "pass", "warn", "skip", "fail"
STATUSES = (PASS, WARN, SKIP, FAIL)

TORCH = NormalizedName("torch")
TVM_FFI = NormalizedName("apache-tvm-ffi")
LEGACY_FLASHINFER = NormalizedName("flashinfer")  # the pre-rename AOT package (<= 0.2.0)
DISABLE_VERSION_CHECK = "FLASHINFER_DISABLE_VERSION_CHECK"


@dataclass(frozen=True, slots=True)
class Check:
    """One verdict: ``status`` is pass | warn | skip | fail; ``details`` is JSON-ready."""

    name: str
    status: str
    message: str
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"check {self.name!r}: unknown status {self.status!r}")

    @property
    def failed(self) -> bool:
        return self.status == FAIL


@dataclass(frozen=True, slots=True)
class ImportResult:
    """``import flashinfer`` run by the target interpreter."""

    ok: bool
    version: str | None = None  # flashinfer.__version__ as printed
    error: str | None = None  # the exception's last line, or why it could not run
    env_bypass: bool = False  # FLASHINFER_DISABLE_VERSION_CHECK was set (and removed for the check)


@dataclass(frozen=True, slots=True)
class Gpu:
    name: str
    compute_cap: tuple[int, int] | None  # None when nvidia-smi reported none (old driver: "[N/A]")

    @property
    def sm(self) -> str:
        return f"sm_{self.compute_cap[0]}{self.compute_cap[1]}" if self.compute_cap else "sm_?"


@dataclass(frozen=True, slots=True)
class GpuQuery:
    """What nvidia-smi said: the GPUs, or why it could not tell."""

    tool: str  # the nvidia-smi that was run (or asked for)
    gpus: tuple[Gpu, ...] = ()
    error: str | None = None
    found: bool = True  # False: an explicitly named nvidia-smi does not exist


def parse_nvidia_smi(text: str) -> tuple[Gpu, ...]:
    """Rows of ``nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader``."""
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        name, sep, cap = line.rpartition(",")
        if not sep:
            raise ValueError(f"unexpected nvidia-smi row {line.strip()!r} (expected 'name, compute_cap')")
        m = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", cap)
        gpus.append(Gpu(name=name.strip(), compute_cap=(int(m[1]), int(m[2])) if m else None))
    return tuple(gpus)


def doctor_ok(checks: Iterable[Check]) -> bool:
    """Every check that ran passed: warn counts as a pass, skip is not a failure."""
    return not any(c.failed for c in checks)


# -- SASS coverage ---------------------------------------------------------------------------------
#
# A jit-cache holds SASS only, no PTX (flashinfer.md 2b), so a GPU runs its kernels only if some
# SASS target is binary compatible with it. CUDA C++ Programming Guide, "Binary Compatibility" and
# "Feature Availability" (arch- and family-specific features, CUDA 12.9):
#   plain    sm_XY   runs on compute capability X.z with z >= Y (same major only): sm_80 on 8.6/8.7/8.9
#   arch     sm_XYa  runs on X.Y only: 9.0a covers sm_90, nothing else
#   family   sm_XYf  runs on the family's X.z with z >= Y: 12.0f covers 12.0 and 12.1
# Nothing runs across majors: sm_90 SASS never runs on sm_100 or sm_120.

_ARCH_RE = re.compile(r"^(\d+)\.(\d+)([af]?)$")
_PROVIDER_RE = re.compile(r"^(\d+)(\d)([af]?)$")


def sass_covers(target: str, cap: tuple[int, int]) -> bool:
    """Whether SASS built for ``target`` ("8.0", "9.0a", "12.0f") runs on compute capability ``cap``."""
    m = _ARCH_RE.match(target.strip())
    if m is None:
        raise ValueError(f"not a SASS target: {target!r} (expected like 8.0, 9.0a or 12.0f)")
    major, minor, suffix = int(m[1]), int(m[2]), m[3]
    if suffix == "a":
        return cap == (major, minor)
    return cap[0] == major and cap[1] >= minor


def provider_arch(name: str, pattern: str = "flashinfer-jit-cache-sm*") -> str | None:
    """The SASS target a 0.7 provider carries, from its name (flashinfer.md 1: ``sm{NN}[a|f]``).

    ``flashinfer-jit-cache-sm120f`` -> "12.0f"; ``flashinfer-jit-cache-sm90a`` -> "9.0a"; else None.
    """
    prefix = pattern.rstrip("*")
    name = canonicalize_name(name)
    if not name.startswith(prefix):
        return None
    m = _PROVIDER_RE.match(name[len(prefix):])
    return f"{m[1]}.{m[2]}{m[3]}" if m else None


# -- the stack as installed --------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Stack:
    env: Environment
    defs: Definitions
    torch: InstalledDistribution | None
    torch_cuda: str | None  # cuNNN from the label, or inferred from Requires-Dist
    python: InstalledDistribution | None
    cubin: InstalledDistribution | None
    shim: InstalledDistribution | None
    providers: tuple[InstalledDistribution, ...]

    @property
    def markers(self) -> dict[str, str]:
        return {**self.env.target.markers, "extra": ""}

    @property
    def any_flashinfer(self) -> bool:
        return any((self.python, self.cubin, self.shim, self.providers))

    @property
    def jit_cache_dists(self) -> tuple[InstalledDistribution, ...]:
        return ((self.shim,) if self.shim else ()) + self.providers


def _stack(env: Environment, defs: Definitions) -> _Stack:
    dists = env.distributions
    fi = defs.flashinfer
    torch = dists.get(TORCH)
    label = cuda_label_text(torch.version) if torch else None
    if torch is not None and label is None:
        label = _cuda_from_requires(torch, {**env.target.markers, "extra": ""})[0]
    providers = tuple(sorted((d for n, d in dists.items() if fi.is_provider(n)), key=lambda d: d.name))
    return _Stack(env=env, defs=defs, torch=torch, torch_cuda=label, python=dists.get(fi.python),
                  cubin=dists.get(fi.cubin), shim=dists.get(fi.jit_cache), providers=providers)


def _requirements(dist: InstalledDistribution, markers: Mapping[str, str]) -> Iterator[Requirement]:
    """The dist's Requires-Dist lines that apply to this target (no extras)."""
    for line in dist.requires_dist:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is None or req.marker.evaluate(dict(markers)):
            yield req


_RUNTIME_RE = re.compile(r"^nvidia-cuda-runtime(?:-cu\d+)?$")


def _cuda_from_requires(torch: InstalledDistribution, markers: Mapping[str, str]) -> tuple[str | None, str | None]:
    """A torch without +cuNNN (a PyPI build) pins its CUDA runtime: ``nvidia-cuda-runtime-cu12==12.8.90``."""
    for req in _requirements(torch, markers):
        if not _RUNTIME_RE.match(canonicalize_name(req.name)):
            continue
        for spec in req.specifier:
            m = re.match(r"^(\d+)\.(\d)\b", spec.version)
            if spec.operator in ("==", "===") and m:
                return f"cu{m[1]}{m[2]}", str(req)
    return None, None


def _cuda_text(label: str) -> str:
    t = CudaLabel.parse(label)
    return f"CUDA {t.major}.{t.minor}" if t else label


def _pkg(dist: InstalledDistribution) -> str:
    return f"{dist.name} {dist.version}"


# -- 1. torch -------------------------------------------------------------------------------------

def _check_torch(s: _Stack) -> Check:
    t = s.torch
    if t is None:
        return Check("torch", FAIL, f"torch is not installed in {s.env.interpreter}", {})
    details: dict[str, Any] = {"version": str(t.version), "cuda": s.torch_cuda}
    label = cuda_label_text(t.version)
    if label is not None:
        return Check("torch", PASS, f"torch {t.version} ({_cuda_text(label)})", details)
    local = t.version.local or ""
    kind = re.match(r"^(cpu|rocm|xpu)", local)
    if kind:
        what = {"cpu": "CPU-only", "rocm": "ROCm", "xpu": "XPU"}[kind[1]]
        return Check("torch", FAIL, f"torch {t.version} is a {what} build: FlashInfer needs a CUDA build of torch (+cuNNN)", details)
    inferred, pin = _cuda_from_requires(t, s.markers)
    if inferred is not None:
        details["cuda_from"] = pin
        return Check("torch", WARN, f"torch {t.version} has no +cuNNN label; its Requires-Dist pins {pin}, "
                     f"so {_cuda_text(inferred)} ({inferred}) is assumed", details)
    return Check("torch", WARN, f"torch {t.version} has no +cuNNN label and names no CUDA runtime: "
                 "its CUDA version is unknown, so CUDA labels are not checked against it", details)


# -- 2. components present ----------------------------------------------------------------------

def _check_components(s: _Stack) -> Check:
    fi = s.defs.flashinfer
    installed = {d.name: str(d.version) for d in (s.python, s.cubin, *s.jit_cache_dists) if d is not None}
    details: dict[str, Any] = {"installed": installed}
    if not s.any_flashinfer:
        return Check("flashinfer-components", SKIP, "FlashInfer is not installed", details)
    if s.python is None:
        others = ", ".join(f"{n} {v}" for n, v in installed.items())
        return Check("flashinfer-components", FAIL, f"{others} installed without {fi.python}, which every component needs", details)
    fails: list[str] = []
    warns: list[str] = []
    py_v = s.python.version
    if s.providers and s.shim is None:
        names = ", ".join(d.name for d in s.providers)
        fails.append(f"{names} installed without the {fi.jit_cache} shim: FlashInfer checks each provider against the "
                     f"shim's version, so none is used (install {fi.jit_cache}=={s.providers[0].version})")
    if s.shim is not None and not s.providers and public(s.shim.version) >= fi.providers_since:
        fails.append(f"{_pkg(s.shim)} is installed without any {fi.providers} provider: the shim carries no kernels")
    if public(py_v) >= fi.jit_cache_since:  # cubin and jit-cache are published from 0.4.0 on
        if s.cubin is None:
            warns.append(f"{fi.cubin} is not installed: precompiled kernel binaries (cubins) are downloaded on first use, "
                         "which needs network access")
        if s.shim is None and not s.providers:
            warns.append(f"{fi.jit_cache} is not installed: kernels are JIT-compiled on first use, which needs nvcc "
                         "and takes minutes")
    present = ", ".join(f"{n} {v}" for n, v in installed.items())
    if fails:
        return Check("flashinfer-components", FAIL, "; ".join(fails + warns), details)
    if warns:
        return Check("flashinfer-components", WARN, "; ".join(warns), details)
    return Check("flashinfer-components", PASS, present, details)


# -- 2b. components aligned -----------------------------------------------------------------------

def _jit_cache_problem(s: _Stack, dist: InstalledDistribution) -> str | None:
    py_v = s.python.version  # type: ignore[union-attr]
    v, label = dist.version, dist.version.local
    want = f"{py_v.public}+cuNNN"
    torch_cuda = s.torch_cuda if s.torch is not None else None
    problem = jit_cache_misalignment(v, py_v, CudaLabel.parse(torch_cuda))
    if problem is Misalignment.OTHER_RELEASE:
        loose = " (FlashInfer's own startswith check would accept it)" if str(v).startswith(str(py_v)) else ""
        return f"{_pkg(dist)} is not {want} for flashinfer-python {py_v}: its kernels belong to another release{loose}"
    if problem is Misalignment.NO_LABEL:
        return f"{_pkg(dist)} has no +cuNNN label (expected {want})"
    if s.shim is not None and dist is not s.shim and str(v) != str(s.shim.version):
        return f"{_pkg(dist)} != the shim {_pkg(s.shim)}: FlashInfer ignores a provider whose version differs from the shim's"
    if problem is Misalignment.OTHER_MAJOR:
        major = cuda_major(label)
        return (f"{_pkg(dist)} is built for {_cuda_text(label)} but torch {s.torch.version} runs {_cuda_text(torch_cuda)}: "  # type: ignore[union-attr,arg-type]
                f"its kernels link libcudart.so.{major}, which will not be there (torch brings libcudart.so.{cuda_major(torch_cuda)})")
    if problem is Misalignment.NEWER_LABEL:
        return (f"{_pkg(dist)} is built for {_cuda_text(label)}, newer than torch's {_cuda_text(torch_cuda)}: "
                f"its kernels may need a newer CUDA runtime than torch's; use a label <= {torch_cuda}")
    return None


def _check_alignment(s: _Stack) -> Check:
    name = "flashinfer-alignment"
    py = s.python
    if py is None:
        return Check(name, SKIP, "flashinfer-python is not installed: nothing to align", {})
    if py.version.public == "0.0.0" and py.version.local == "unknown":
        return Check(name, WARN, f"flashinfer-python {py.version} is an editable or source install: FlashInfer skips its "
                     "version checks and so does this one", {})
    problems: list[str] = []
    checked = [f"flashinfer-python {py.version}"]
    if s.cubin is not None:
        if str(s.cubin.version) != str(py.version):
            problems.append(f"flashinfer-cubin {s.cubin.version} != flashinfer-python {py.version}: FlashInfer requires the "
                            "exact same version (import fails on 0.4.0-0.7.1, the cubins are ignored from 0.7.2rc3)")
        checked.append(f"flashinfer-cubin {s.cubin.version}")
    for dist in s.jit_cache_dists:
        problem = _jit_cache_problem(s, dist)
        if problem:
            problems.append(problem)
        checked.append(_pkg(dist))
    details = {"checked": checked, "torch_cuda": s.torch_cuda}
    if problems:
        return Check(name, FAIL, "; ".join(problems), details)
    if s.jit_cache_dists and s.torch_cuda is None:
        return Check(name, WARN, f"{', '.join(checked)} aligned; torch's CUDA is unknown, so the jit-cache CUDA label "
                     "was not checked against it", details)
    label = next((d.version.local for d in s.jit_cache_dists), None)
    tail = f", label {label} fits torch's {s.torch_cuda}" if label else ""
    return Check(name, PASS, f"aligned: {', '.join(checked)}{tail}", details)


# -- 3. apache-tvm-ffi ----------------------------------------------------------------------------

def _check_tvm_ffi(s: _Stack) -> Check:
    name = "apache-tvm-ffi"
    py = s.python
    if py is None:
        return Check(name, SKIP, "flashinfer-python is not installed", {})
    if public(py.version) < s.defs.flashinfer.agnostic_since:
        return Check(name, SKIP, f"flashinfer-python {py.version} predates apache-tvm-ffi (binds kernels through libtorch)", {})
    reqs = [r for r in _requirements(py, s.markers) if canonicalize_name(r.name) == TVM_FFI]
    tvm = s.env.distributions.get(TVM_FFI)
    spec = ",".join(str(r.specifier) for r in reqs if str(r.specifier))
    details: dict[str, Any] = {"installed": str(tvm.version) if tvm else None, "required": spec or None}
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

def _abi_problem(s: _Stack, dist: InstalledDistribution, why: str) -> tuple[str, str] | None:
    """(status, message) for one torch-ABI-bound distribution, or None when it fits the torch."""
    torch_v = s.torch.version if s.torch else None
    rej = torch_abi_mismatch(Coupling.TORCH_ABI, why, dist.version, torch_v)
    if rej is not None:
        return FAIL, f"{_pkg(dist)} is {rej.detail} ({why}); installed torch: {torch_v or 'none'}"
    pins = [r for r in _requirements(dist, s.markers) if canonicalize_name(r.name) == TORCH and str(r.specifier)]
    for req in pins:
        if torch_v is None:
            return FAIL, f"{_pkg(dist)} requires {req}, and torch is not installed"
        if not req.specifier.contains(torch_v, prereleases=True):
            return FAIL, f"{_pkg(dist)} requires {req}, not the installed torch {torch_v} ({why})"
    if pins or dist.version.local and "torch" in dist.version.local:
        return None
    if dist.name in (s.defs.flashinfer.python, LEGACY_FLASHINFER):
        return WARN, (f"{_pkg(dist)} builds its kernels against libtorch and pins no torch: kernels JIT-compiled "
                      f"for an earlier torch may be stale (its cache is not keyed by version before 0.4.1)")
    return None


def _check_torch_abi(s: _Stack) -> Check:
    name = "torch-abi"
    bound = []
    for dist in s.env.distributions.values():
        coupling, why = s.defs.coupling(dist.name, dist.version)
        if coupling is Coupling.TORCH_ABI:
            bound.append((dist, why))
    if not bound:
        return Check(name, PASS, "no torch-ABI-bound packages besides torch", {"packages": []})
    found = [(p, dist) for dist, why in bound if (p := _abi_problem(s, dist, why)) is not None]
    details = {"packages": [_pkg(d) for d, _ in bound]}
    fails = [msg for (status, msg), _ in found if status == FAIL]
    if fails:
        return Check(name, FAIL, "; ".join(fails), details)
    if found:
        return Check(name, WARN, "; ".join(msg for (_, msg), _ in found), details)
    torch_v = s.torch.version if s.torch else "none"
    return Check(name, PASS, f"{', '.join(details['packages'])} fit torch {torch_v}", details)


# -- 5. import --------------------------------------------------------------------------------------

def _check_import(s: _Stack, result: ImportResult | None) -> Check:
    name = "flashinfer-import"
    if result is None:
        why = "FlashInfer is not installed" if not s.any_flashinfer else "the import was not run"
        return Check(name, SKIP, why, {})
    note = f" ({DISABLE_VERSION_CHECK} is set in your environment; it was removed for this check)" if result.env_bypass else ""
    details = {"version": result.version, "error": result.error, "version_check_bypass_in_env": result.env_bypass}
    if not result.ok:
        return Check(name, FAIL, f"import flashinfer failed: {result.error or 'no error text'}{note}", details)
    installed = s.python.version if s.python else None
    if installed is not None and result.version and result.version != str(installed):
        return Check(name, WARN, f"import flashinfer gave version {result.version}, but flashinfer-python {installed} is "
                     f"installed: another copy shadows it{note}", details)
    return Check(name, PASS, f"import flashinfer -> {result.version}{note}", details)


# -- 6. GPU architecture ----------------------------------------------------------------------------

def _jit_cache_targets(s: _Stack) -> tuple[str, tuple[str, ...] | None]:
    """(what provides the kernels, its SASS targets); targets None when the arch table has no row."""
    fi = s.defs.flashinfer
    shim = s.shim
    if s.providers or (shim is not None and public(shim.version) >= fi.providers_since):
        archs = tuple(a for d in s.providers if (a := provider_arch(d.name, fi.providers)) is not None)
        version = shim.version if shim else s.providers[0].version
        names = ", ".join(d.name.rsplit("-", 1)[-1] for d in s.providers) or "none"
        return f"flashinfer-jit-cache {version} (providers: {names})", archs
    assert shim is not None
    label = shim.version.local or ""
    machine = s.env.target.markers.get("platform_machine", "")
    return f"flashinfer-jit-cache {shim.version}", fi.jit_cache_archs(public(shim.version), label, machine)


def _gpu_groups(gpus: Sequence[Gpu]) -> dict[tuple[int, int] | None, list[str]]:
    groups: dict[tuple[int, int] | None, list[str]] = {}
    for gpu in gpus:
        groups.setdefault(gpu.compute_cap, []).append(gpu.name)
    return groups


def _describe(cap: tuple[int, int] | None, names: list[str]) -> str:
    sm = Gpu("", cap).sm
    kinds = sorted(set(names))
    count = f"{len(names)}x " if len(names) > 1 else ""
    return f"{sm} ({count}{', '.join(kinds)})"


def _check_gpu(s: _Stack, query: GpuQuery | None) -> Check:
    name = "gpu-arch"
    if query is None:
        return Check(name, SKIP, "no nvidia-smi: GPU architecture not checked", {})
    if not query.found:
        return Check(name, SKIP, f"no nvidia-smi at {query.tool}: GPU architecture not checked", {"nvidia_smi": query.tool})
    details: dict[str, Any] = {"nvidia_smi": query.tool,
                               "gpus": [{"name": g.name, "compute_cap": f"{g.compute_cap[0]}.{g.compute_cap[1]}" if g.compute_cap else None}
                                        for g in query.gpus]}
    if query.error:
        return Check(name, WARN, f"{query.tool} failed ({query.error}): GPU architecture not checked", details)
    if not query.gpus:
        return Check(name, WARN, f"{query.tool} lists no GPUs: GPU architecture not checked", details)
    groups = _gpu_groups(query.gpus)
    seen = ", ".join(_describe(cap, names) for cap, names in groups.items())
    if s.shim is None and not s.providers:
        return Check(name, SKIP, f"GPUs {seen}; no flashinfer-jit-cache installed, so there is no kernel coverage to check", details)
    source, targets = _jit_cache_targets(s)
    details["jit_cache"] = source
    details["sass_targets"] = list(targets) if targets is not None else None
    if targets is None:
        return Check(name, WARN, f"arch coverage unknown for {source}: not in the arch table (GPUs {seen})", details)
    fails, warns, oks = [], [], []
    for cap, names in groups.items():
        if cap is None:
            warns.append(f"nvidia-smi reported no compute capability for {', '.join(sorted(set(names)))}: not checked")
            continue
        hit = next((t for t in targets if sass_covers(t, cap)), None)
        if hit is None:
            have = " ".join(targets) or "none"
            fails.append(f"no kernels for {_describe(cap, names)} in {source} (SASS for {have}); they would be "
                         "JIT-compiled, which needs nvcc")
        else:
            oks.append(f"{_describe(cap, names)} covered by {source} (SASS {hit})")
    if fails:
        return Check(name, FAIL, "; ".join(fails + warns), details)
    if warns:
        return Check(name, WARN, "; ".join(warns + oks), details)
    return Check(name, PASS, "; ".join(oks), details)


# -- all of them ------------------------------------------------------------------------------------

def run_checks(env: Environment, defs: Definitions, *, import_result: ImportResult | None, gpus: GpuQuery | None) -> list[Check]:
    """Every check, in a fixed order. ``import_result``/``gpus`` None: that check is skipped."""
    s = _stack(env, defs)
    return [
        _check_torch(s),
        _check_components(s),
        _check_alignment(s),
        _check_tvm_ffi(s),
        _check_torch_abi(s),
        _check_import(s, import_result),
        _check_gpu(s, gpus),
    ]


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
    "Check",
    "Gpu",
    "GpuQuery",
    "ImportResult",
    "SCHEMA",
    "doctor_ok",
    "needs_import",
    "parse_nvidia_smi",
    "provider_arch",
    "report_json",
    "run_checks",
    "sass_covers",
]
