#!/usr/bin/env python3
"""Check the tool's verdicts on today's serving stack against an oracle it does not share.

For each framework and kernel package of the SGLang and vLLM closures, and the torch family, the
newest release on PyPI (or ``NAME==VERSION`` given) is downloaded by pip (``pip download --no-deps``
for the target below) and its ``.so`` members are read by binutils, not by the tool:

- ``readelf -d``: the libraries each member needs (libtorch*/libc10*: it links torch;
  ``libcudart.so.N``, ``libnvrtc.so.N`` and the other toolkit libraries versioned by the CUDA
  major: it needs CUDA major N);
- ``nm -D --undefined-only``: what it imports: C++ symbols of torch (mangled names of the c10,
  at, torch and caffe2 namespaces), C-shim functions (``aoti_torch_*``, ``torch_*``), libtorch_python's
  ``THP*``;
- with torch's real libraries (``--torch-lib DIR``: a ``torch/lib`` folder of torch 2.15.0, or
  ``--fetch-torch``: pip downloads PyPI's torch 2.15.0 wheel, about 900 MB, and its libraries are
  read), ``nm -D --defined-only`` of ``libtorch*.so`` and ``libc10*.so``: what that torch exports.

The oracle's answer: the wheel is ``locked`` (a torch-linked member imports a C++ symbol of torch
or a ``THP*`` function of libtorch_python), ``stable`` (C-shim imports only) or links no torch; it
runs on PyPI's torch 2.15.0 (CUDA 13.2) when a member set for CUDA 13 exists (or it needs no CUDA)
and, locked, every such import is exported (without torch's libraries this is unverified, said with
the reason, never counted as agreeing). Members whose file names say the torch they were built for
(``..._torch29-cuda.so``: one build per torch, loaded by the running torch's version) count only
when built for torch 2.15; with none, none is loaded.
The tool is then asked, both **without** ``--cuda`` (its CUDA from the kept torch's own METADATA):
``inspect NAME==VERSION`` (its kind, CUDA majors and verdict must be the oracle's), and, for a
framework, ``resolve --torch installed --with NAME==VERSION`` (exit 0 exactly when the oracle says
it runs and every exact pin of the wheel's METADATA outside the torch family, whose pins the tool
replaces, is a version pip finds on the indexes; a refusal must name the package or the missing pin).

    .venv/bin/python indexes/verify_today.py [--pypi URL] [--torch-lib DIR | --fetch-torch] [--only NAME[==V] ...] [--python X.Y] [--records] [--json FILE]

``inspect`` reads each wheel as it is now, and so does ``resolve`` (``--scan-records none``; with
``--records`` it may answer from the scan records the tool ships). Where the tool ships a record of
the downloaded wheel (``indexes/records/<sha256>.json``, refreshed by ``scan_records.py``), that
record is compared with binutils too: its members, their CUDA majors and their very imports.

Running it live downloads the wheels (vllm's is hundreds of MB). PyPI's URL comes from uv/pip
configuration (or --pypi). Offline, it says so and exits 0. Exit 1 when a verdict disagrees with the
oracle. ``tests/data/test_verify_today.py`` checks the oracle's logic offline on real compiled objects.
"""

from __future__ import annotations

import argparse
import contextlib
import email.parser
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RECORDS = REPO / "indexes" / "records"  # the scan records the tool ships, by the wheel's sha256
sys.path.insert(0, str(REPO / "src"))

TORCH = "2.15.0"  # PyPI's torch today: no +cuNNN label, CUDA 13.2 by its cuda-toolkit pin
TORCH_CUDA_MAJOR = 13
PYTHON = "3.12"
PLATFORM = "x86_64-manylinux_2_34"
PIP_PLATFORMS = ("manylinux_2_34_x86_64", "manylinux_2_28_x86_64", "manylinux2014_x86_64", "linux_x86_64")
TARGET = ["--platform", PLATFORM, "--installed", f"torch=={TORCH}"]  # no --cuda: the tool finds it
MARKERS = {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix"}
# Pins a framework's METADATA makes that the tool never takes from it: a requirement on torch is
# overridden by the kept torch, a torch-family pin replaced by the family member for it
# (docs/guides/serving-frameworks.md). Every other exact pin must be met as written.
REPLACED = frozenset({"torch", "torchvision", "torchaudio", "torchao", "torchcodec", "triton"})


@dataclass(frozen=True)
class Row:
    """A package of today's closures; ``version`` None: the newest on PyPI today."""

    name: str
    framework: bool = False  # also resolved with --with (a serving framework)
    version: str | None = None


ROWS = (
    Row("vllm", framework=True),  # 0.34.0 on 2026-12-07
    Row("sglang", framework=True),
    # the kernel packages of the SGLang and vLLM closures that ship shared objects (their plans, and
    # the .so members of today's closures read by readelf: fastsafetensors, instanttensor,
    # nccl-extensions, pynvvideocodec, tilelang and tokenspeed-triton link no torch)
    Row("sglang-kernel"),
    Row("sgl-deep-ep"),
    Row("sgl-deep-gemm"),
    Row("sgl-flash-mla"),
    Row("humming-kernels"),
    Row("torch-memory-saver"),
    Row("torch-c-dlpack-ext"),
    Row("flashinfer-python"),  # FlashInfer's parts on PyPI (no flashinfer-jit-cache there)
    Row("flashinfer-cubin"),
    Row("xformers"),
    Row("flash-attn"),
    Row("torchvision"),
    Row("torchaudio"),
    Row("torchcodec"),
    Row("torchao"),
    # what the frameworks' newest releases pin, where it is not the newest
    Row("sgl-deep-gemm", version="0.2.3.post2"),  # sglang 0.5.23
    Row("humming-kernels", version="0.1.12"),  # sglang 0.5.23
    Row("humming-kernels", version="0.1.19"),  # vllm 0.34.0
)

# -- the oracle: binutils on the real files ----------------------------------------------------------

TORCH_LIBRARY = re.compile(r"^lib(torch|c10)[\w-]*\.so(?:\.[0-9]+)*$")
# A CUDA toolkit library whose soname's major is the CUDA major: so are libcudart, libcublas(Lt),
# libcupti, libnvJitLink and libnvrtc(-builtins) in the CUDA 13.2 wheels torch 2.15.0 pins
# (nvidia/cu13/lib/libcudart.so.13, libnvrtc.so.13, libnvrtc-builtins.so.13.2 ...), not libcufft,
# libcusolver, libcusparse (.so.12 there). vllm 0.34.0's cumem_allocator needs libnvrtc.so.13 only.
CUDART = re.compile(r"^lib(?:cudart|cublas|cublasLt|cupti|nvJitLink|nvrtc|nvrtc-builtins)\.so\.(\d+)(?:\.\d+)*$")
# A mangled name whose outermost namespace is torch's (Itanium C++ ABI, "Mangling"): _Z, a special
# name's prefix (_ZTV/_ZTI/_ZTS/_ZTT: vtable, typeinfo, its name, VTT; _ZTH/_ZTW: TLS init and
# wrapper; _ZTh/_ZTv: thunks; _ZGV: guard variable; Z: a local entity of a function), then a
# nested name: N, cv-qualifiers (r V K), a ref-qualifier (R: &, O: &&; torch::Library::_impl(...) &
# is _ZNR5torch7Library5_impl...), and the length-prefixed first component, whatever follows it (a
# name, an operator: c10::operator<< is _ZN3c10ls..., a constructor, template arguments).
CXX_TORCH = re.compile(r"^_Z(?:T[VISTHW]|Th n?[0-9]+_|Tv n?[0-9]+_ n?[0-9]+_)?(?:GV)?Z?N[rVK]*[RO]?(?:3c10|2at|5torch|6caffe2)".replace(" ", ""))
SHIM = re.compile(r"^(?:aoti_torch_|torch_)\w+$")  # the C shim: unmangled C functions
# libtorch_python's Python-binding functions and globals (THPVariable_Wrap, THPVariableClass...):
# unmangled, or a mangled name whose first component (length-prefixed) begins THP
THP = re.compile(r"^(?:THP|_Z(?:T[VIS])?N?[rVK]*[0-9]+THP)")
# A member built for one torch release among several in one wheel, loaded by the running torch's
# version: torch-c-dlpack-ext 0.1.5's libtorch_c_dlpack_addon_torch29-cuda.so is for torch 2.9
# (its torch_c_dlpack_ext/core.py loads f"..._torch{major}{minor}-{cpu|cuda}.so").
BUILT_FOR = re.compile(r"_torch(?P<major>[0-9])(?P<minor>[0-9]{1,2})[-_.]")


def binutils(tool: str, *args: str) -> list[str]:
    """The output lines of ``readelf``/``nm`` (raises when it fails: a member it cannot read)."""
    path = shutil.which(tool)
    if path is None:
        raise RuntimeError(f"{tool} is not installed (binutils)")
    done = subprocess.run([path, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{tool} {' '.join(args[:-1])} failed on {Path(args[-1]).name}: {done.stderr.strip()[:200]}")
    return done.stdout.splitlines()


def needed(so: Path) -> list[str]:
    """``readelf -d``: the DT_NEEDED libraries."""
    out = []
    for line in binutils("readelf", "-d", "--wide", "--", str(so)):
        m = re.search(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", line)
        if m:
            out.append(m.group(1))
    return out


def dynamic_symbols(so: Path, *, defined: bool) -> set[str]:
    """``nm -D``: the undefined (imported) or defined (exported) dynamic symbols, without versions."""
    flag = "--defined-only" if defined else "--undefined-only"
    out = set()
    for line in binutils("nm", "-D", flag, "--", str(so)):
        parts = line.split()
        if parts:
            out.add(parts[-1].split("@", 1)[0])
    return out


@dataclass(frozen=True)
class MemberTruth:
    name: str
    links_torch: bool
    cuda_majors: tuple[int, ...]
    cxx: frozenset[str]
    shim: frozenset[str]
    thp: frozenset[str]


def member_truth(so: Path, name: str) -> MemberTruth:
    libs = needed(so)
    imports = dynamic_symbols(so, defined=False)
    return MemberTruth(
        name=name,
        links_torch=any(TORCH_LIBRARY.match(lib) for lib in libs),
        cuda_majors=tuple(sorted({int(m.group(1)) for lib in libs if (m := CUDART.match(lib))})),
        cxx=frozenset(s for s in imports if CXX_TORCH.match(s)),
        shim=frozenset(s for s in imports if SHIM.match(s)),
        thp=frozenset(s for s in imports if THP.match(s)),
    )


def built_for(member: str) -> str | None:
    """The torch series (``2.9``) a per-torch build member was built for, from its file name."""
    m = BUILT_FOR.search(member.rsplit("/", 1)[-1])
    return f"{m.group('major')}.{int(m.group('minor'))}" if m else None


@dataclass(frozen=True)
class Truth:
    """What binutils say of a wheel, and whether it runs on the torch whose exports are given."""

    kind: str | None  # locked | stable | None (no member links torch)
    cuda_majors: tuple[int, ...]  # of every member
    runs: bool | None  # None: unverified (``why`` says why)
    why: str
    members: tuple[MemberTruth, ...] = field(default=())


def wheel_members(wheel: Path, into: Path) -> list[tuple[str, Path]]:
    """The wheel's shared objects, extracted."""
    out = []
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            base = info.filename.rsplit("/", 1)[-1]
            if info.is_dir() or not re.search(r"\.so(\.\d+)*$", base):
                continue
            target = into / f"{len(out)}-{base}"
            with zf.open(info) as src, target.open("wb") as dst:
                shutil.copyfileobj(src, dst)
            out.append((info.filename, target))
    return out


def torch_exports(lib_dir: Path) -> set[str]:
    """What torch's real libraries export (``nm -D --defined-only`` of libtorch*.so, libc10*.so)."""
    out: set[str] = set()
    for so in sorted(lib_dir.iterdir()):
        if TORCH_LIBRARY.match(so.name) and so.is_file():
            out |= dynamic_symbols(so, defined=True)
    return out


def judge(members: Sequence[MemberTruth], exports: set[str] | None, *, cuda_major: int = TORCH_CUDA_MAJOR, torch: str = TORCH) -> Truth:
    """The oracle's verdict: kind from the torch-linked members' imports (C++ symbols of torch's
    namespaces or THP* functions: locked); runs when a member set for torch's CUDA major exists
    (members per CUDA major: the others are not loaded) and, locked, every such import of the
    deciding members is exported. Of per-torch builds only the one for ``torch``'s series is loaded."""
    series = ".".join(torch.split(".")[:2])
    builds = sorted({b for m in members if (b := built_for(m.name))}, key=lambda v: tuple(map(int, v.split("."))))
    loaded = [m for m in members if built_for(m.name) in (None, series)]
    majors = tuple(sorted({v for m in members for v in m.cuda_majors}))
    deciding = [m for m in loaded if not m.cuda_majors or cuda_major in m.cuda_majors] if len(majors) > 1 else loaded
    linked = [m for m in deciding if m.links_torch]
    cxx = frozenset(s for m in linked for s in m.cxx | m.thp)
    kind = None if not [m for m in members if m.links_torch] else ("locked" if any(m.cxx or m.thp for m in members if m.links_torch) else "stable")
    if majors and cuda_major not in majors:
        return Truth(kind, majors, False, f"needs CUDA {'/'.join(map(str, majors))}, torch has CUDA {cuda_major}", tuple(members))
    if builds and series not in builds and not cxx:
        return Truth(kind, majors, True, f"one build per torch ({', '.join(builds)}), none for {series}: none is loaded", tuple(members))
    if kind != "locked" or not cxx:
        return Truth(kind, majors, True, "C-shim imports only" if kind == "stable" else "links no torch" if kind is None else "runs", tuple(members))
    if exports is None:
        return Truth(kind, majors, None, "torch's libraries are not here (--torch-lib DIR or --fetch-torch): the C++ imports were not checked", tuple(members))
    missing = sorted(cxx - exports)
    if missing:
        return Truth(kind, majors, False, f"{len(missing)} of {len(cxx)} C++ imports are not exported by torch {torch}, e.g. {missing[0]}", tuple(members))
    return Truth(kind, majors, True, f"all {len(cxx)} C++ imports are exported by torch {torch}", tuple(members))


def wheel_truth(wheel: Path, exports: set[str] | None, work: Path) -> Truth:
    members = [member_truth(path, name) for name, path in wheel_members(wheel, work)]
    return judge(members, exports)


# -- comparing the tool with the oracle --------------------------------------------------------------


def compare_members(truths: Sequence[MemberTruth], reported: Sequence[Mapping[str, Any]]) -> str | None:
    """How the tool's members (``inspect``'s ``members``) differ from binutils' reading, or None:
    each torch-linked member listed, with the libraries, CUDA majors and counts of version-locked
    (C++ and THP) and C-shim imports that readelf and nm give."""
    by_name = {str(m.get("name")): m for m in reported}
    for truth in truths:
        said = by_name.get(truth.name)
        if said is None:
            if truth.links_torch:
                return f"inspect does not list {truth.name}, which links torch (readelf)"
            continue
        if not said.get("read", True):
            return f"inspect could not read {truth.name}: {said.get('error')}"
        if bool(said.get("torch_libraries")) != truth.links_torch:
            return f"inspect says {truth.name} {'links' if said.get('torch_libraries') else 'does not link'} torch, readelf says otherwise"
        if sorted(said.get("cuda_majors") or []) != list(truth.cuda_majors):
            return f"inspect says {truth.name} needs CUDA {said.get('cuda_majors')}, readelf says {list(truth.cuda_majors)}"
        if truth.links_torch:
            locked, shim = len(truth.cxx | truth.thp), len(truth.shim)
            if (said.get("cxx_imports"), said.get("shim_imports")) != (locked, shim):
                return (
                    f"inspect counts {said.get('cxx_imports')} C++ and {said.get('shim_imports')} C-shim imports of torch in {truth.name}, "
                    f"nm counts {locked} and {shim}"
                )
    return None


def compare_record(truth: Truth, document: Mapping[str, Any]) -> tuple[str, str]:
    """A shipped scan record of the same wheel (``indexes/records/<sha256>.json``) against binutils:
    its kind and CUDA majors, and per member the torch libraries, CUDA majors, the very C++ and THP
    imports and the count of C-shim imports."""
    scan = document.get("scan") or {}
    kind = "torch" if any(m.links_torch for m in truth.members) else ("cuda" if truth.cuda_majors else "none")
    if scan.get("kind") != kind:
        return "disagree", f"the record says {scan.get('kind')}, readelf says {kind}"
    if sorted(scan.get("cuda-majors") or []) != list(truth.cuda_majors):
        return "disagree", f"the record says CUDA {scan.get('cuda-majors')}, readelf says {list(truth.cuda_majors)}"
    listed = {str(m.get("name")): m for m in scan.get("members") or []}
    for member in truth.members:
        said = listed.get(member.name)
        if said is None:
            if member.links_torch:
                return "disagree", f"the record does not list {member.name}, which links torch (readelf)"
            continue
        if bool(said.get("torch-libs")) != member.links_torch or sorted(said.get("cuda-majors") or []) != list(member.cuda_majors):
            return "disagree", f"the record says {member.name} needs {said.get('torch-libs')} and CUDA {said.get('cuda-majors')}, readelf says otherwise"
        if member.links_torch:
            recorded, read = set(said.get("cxx") or []), member.cxx | member.thp
            if recorded != read:
                odd = sorted(recorded ^ read)[0]
                return (
                    "disagree",
                    f"the record's imports of {member.name} are not nm's: {len(recorded - read)} only recorded, {len(read - recorded)} only read, e.g. {odd}",
                )
            if said.get("shim") != len(member.shim):
                return "disagree", f"the record counts {said.get('shim')} C-shim imports in {member.name}, nm {len(member.shim)}"
    unknown = sorted(set(listed) - {m.name for m in truth.members})
    if unknown:
        return "disagree", f"the record lists {unknown[0]}, which is no shared object of the wheel"
    return "agree", f"its {len(listed)} recorded members are binutils' reading"


def compare_inspect(truth: Truth, report: Mapping[str, Any]) -> tuple[str, str]:
    """(agree | disagree | unverified, why): the tool's ``inspect`` report against the oracle."""
    if "error" in report:
        return "unverified", f"inspect failed: {report['error']}"
    verdict = report.get("verdict") or {}
    said = verdict.get("abi")
    if said == "builds":  # one member per torch: the oracle reads them all as locked
        said = "locked"
    if said != truth.kind and not (truth.kind is None and said is None):
        return "disagree", f"inspect says {said}, binutils say {truth.kind}"
    if list(truth.cuda_majors) != sorted(report.get("cuda_majors") or []):
        return "disagree", f"inspect says CUDA {report.get('cuda_majors')}, readelf says {list(truth.cuda_majors)}"
    differs = compare_members(truth.members, report.get("members") or [])
    if differs:
        return "disagree", differs
    if truth.runs is None:
        return "unverified", truth.why
    runs = bool(verdict.get("runs", True)) if verdict else True
    if runs != truth.runs:
        return "disagree", f"inspect says it {'runs' if runs else 'cannot run'} ({verdict.get('refusal') or verdict.get('note')}); binutils: {truth.why}"
    return "agree", truth.why


def names_pin(text: str, pin: str) -> bool:
    """Whether ``text`` names ``NAME==VERSION`` (the name in any of its spellings: - _ .)."""
    name, version = pin.split("==", 1)
    spelled = "[-_.]".join(re.escape(part) for part in re.split(r"[-_.]+", name))
    return re.search(rf"(?<![\w.-]){spelled}(?:\[[^\]]*\])?\s*==\s*{re.escape(version)}(?![\w.])", text, re.I) is not None


def compare_resolve(truth: Truth, name: str, code: int, err: str, missing: Sequence[str] = ()) -> tuple[str, str]:
    """A framework's ``resolve --with NAME==V``: exit 0 exactly when the oracle says it runs and
    none of its own exact pins is ``missing`` (pip finds no such version); a refusal names the
    package, or, for a missing pin, that pin."""
    if code not in (0, 1):
        return "unverified", f"resolve exit {code}: {err.strip().splitlines()[0] if err.strip() else ''}"
    if missing:
        if code == 0:
            return "disagree", f"resolve planned it; pip finds no {', '.join(missing)}, which its METADATA pins"
        unnamed = [pin for pin in missing if not names_pin(err, pin)]
        if unnamed:
            return "disagree", f"the refusal does not name {unnamed[0]} (pinned by its METADATA; pip finds no such version)"
        return "agree", f"refused, naming its pin {', '.join(missing)}: pip finds no such version"
    if truth.runs is None:
        return "unverified", truth.why
    if (code == 0) != truth.runs:
        return "disagree", f"resolve exit {code}; binutils: {truth.why}"
    if code == 1 and name not in err:
        return "disagree", "the refusal does not name the package"
    return "agree", "planned" if code == 0 else "refused, naming it"


# -- the live run ------------------------------------------------------------------------------------


def _pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=3600, check=False)


def _pip_error(done: subprocess.CompletedProcess[str]) -> str:
    lines = [line.strip() for line in done.stderr.splitlines() if line.strip() and not line.startswith("WARNING")]
    return next((line for line in reversed(lines) if line.startswith("ERROR")), lines[-1] if lines else f"pip exit {done.returncode}")


def pip_download(spec: str, into: Path, pypi: str, python: str = PYTHON) -> Path:
    """The wheel pip picks for the target (newest unless pinned), downloaded without dependencies
    into a folder of its own."""
    platforms = [w for p in PIP_PLATFORMS for w in ("--platform", p)]
    folder = into / re.sub(r"[^\w.=-]+", "_", spec)
    done = _pip(
        "download", "-q", "--no-deps", "--only-binary", ":all:", "--python-version", python, *platforms, "--index-url", pypi, "-d", str(folder), "--", spec
    )
    if done.returncode != 0:
        raise RuntimeError(f"pip download {spec}: {_pip_error(done)}")
    wheels = sorted(folder.glob("*.whl"))
    if len(wheels) != 1:
        raise RuntimeError(f"pip downloaded {len(wheels)} wheels for {spec}")
    return wheels[0]


def pip_versions(name: str, indexes: Sequence[str], python: str = PYTHON, *, pre: bool = False) -> list[str]:
    """The versions pip finds of ``name`` for the target (wheels or sdists), newest first; none when
    no index has it. Raises when pip cannot tell (an index unreachable)."""
    platforms = [w for p in PIP_PLATFORMS for w in ("--platform", p)]
    where = ["--index-url", indexes[0], *(w for url in indexes[1:] for w in ("--extra-index-url", url))]
    done = _pip("index", "versions", *(["--pre"] if pre else []), "--python-version", python, *platforms, *where, "--", name)
    if done.returncode != 0:
        if "No matching distribution found" in done.stderr:
            return []
        raise RuntimeError(f"pip index versions {name}: {_pip_error(done)}")
    line = next((x for x in done.stdout.splitlines() if x.startswith("Available versions:")), "")
    return [v.strip() for v in line.partition(":")[2].split(",") if v.strip()]


def exact_pins(wheel: Path, python: str = PYTHON) -> list[str]:
    """``NAME==VERSION`` of each exact pin in the wheel's own METADATA that applies to the target
    (markers evaluated, extras' requirements left out), but the torch family's (``REPLACED``)."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA"))
        headers = email.parser.HeaderParser().parsestr(zf.read(meta).decode("utf-8", "replace"))
    env = {**MARKERS, "python_version": python, "python_full_version": f"{python}.0", "extra": ""}
    out = []
    for text in headers.get_all("Requires-Dist") or []:
        req = Requirement(text)
        specs = list(req.specifier)
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        if canonicalize_name(req.name) in REPLACED or len(specs) != 1 or specs[0].operator not in ("==", "===") or "*" in specs[0].version:
            continue
        out.append(f"{canonicalize_name(req.name)}=={specs[0].version}")
    return out


def missing_pins(pins: Iterable[str], indexes: Sequence[str], python: str = PYTHON) -> list[str]:
    """The pins of which pip finds no such version on the indexes (a few pip processes at a time:
    they wait on the network)."""
    from concurrent.futures import ThreadPoolExecutor

    from packaging.version import Version

    def found(pin: str) -> bool:
        name, version = pin.split("==", 1)
        return Version(version) in {Version(v) for v in pip_versions(name, indexes, python, pre=True)}

    pins = list(pins)
    with ThreadPoolExecutor(max_workers=4) as pool:
        return [pin for pin, ok in zip(pins, pool.map(found, pins), strict=True) if not ok]


def tool(argv: Sequence[str]) -> tuple[int, str, str]:
    from resolve_gpu_stack.cli.app import main as cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli(list(argv))
    return code, out.getvalue(), err.getvalue()


def version_of(wheel: Path) -> str:
    return wheel.name.split("-")[1]


def run_rows(
    rows: Iterable[Row],
    pypi: str,
    flags: Sequence[str],
    exports: set[str] | None,
    work: Path,
    *,
    python: str = PYTHON,
    indexes: Sequence[str] = (),
    records: Path = RECORDS,
    resolve_flags: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Each row's wheel downloaded, read by binutils, and the tool's ``inspect`` (a fresh read of
    the wheel), its shipped record of that wheel where ``records`` has one, and, for a framework,
    ``resolve`` (with ``resolve_flags``) compared with that; ``flags``: the tool's index, cache and
    --python; ``indexes``: the URLs of the other indexes the tool is given (pip reads them too)."""
    results: list[dict[str, Any]] = []
    where = [pypi, *indexes]
    for row in rows:
        spec = f"{row.name}=={row.version}" if row.version else row.name
        newest = None
        try:
            newest = None if row.version else next(iter(pip_versions(row.name, [pypi], python)), None)  # PyPI's, as pip downloads it
            wheel = pip_download(spec, work / "wheels", pypi, python)
        except (subprocess.SubprocessError, RuntimeError) as exc:
            why = str(exc)[:300] if newest is None else f"{row.name} {newest}, the newest, has no wheel for the target ({str(exc)[:240]})"
            results.append({"package": spec, "door": "download", "status": "unverified", "why": why})
            print(f"{'unverified':10} {'download':8} {spec}: {results[-1]['why']}")
            continue
        version = version_of(wheel)
        first = len(results)
        member_dir = Path(tempfile.mkdtemp(dir=work))
        truth = wheel_truth(wheel, exports, member_dir)
        facts = {"oracle": {"kind": truth.kind, "cuda_majors": list(truth.cuda_majors), "runs": truth.runs}}
        if newest is not None and newest != version:
            facts["newest"] = newest  # the newest release has no wheel for the target: pip took this one
        code, out, err = tool(["inspect", f"{row.name}=={version}", *flags, *TARGET, "--format", "json"])
        report = json.loads(out) if code in (0, 1) and out.strip() else {"error": err.strip().splitlines()[0] if err.strip() else f"exit {code}"}
        status, why = compare_inspect(truth, report)
        if "newest" in facts:
            why += f" (pip took {version}: the newest, {newest}, has no wheel for the target)"
        verdict = report.get("verdict") or {}
        said = {"kind": verdict.get("abi"), "cuda_majors": report.get("cuda_majors") or [], "runs": bool(verdict.get("runs", True)) if verdict else True}
        results.append({"package": f"{row.name} {version}", "door": "inspect", "status": status, "why": why, **facts, "tool": said})
        record = records / f"{hashlib.sha256(wheel.read_bytes()).hexdigest()}.json"
        if record.is_file():
            status, why = compare_record(truth, json.loads(record.read_text()))
            results.append({"package": f"{row.name} {version}", "door": "record", "status": status, "why": why})
        if row.framework:
            try:
                missing = missing_pins(exact_pins(wheel, python), where, python)
            except RuntimeError as exc:
                results.append({"package": f"{row.name} {version}", "door": "resolve", "status": "unverified", "why": str(exc)[:300]})
            else:
                argv = ["resolve", "--torch", "installed", "--flashinfer", "none", "--with", f"{row.name}=={version}", *flags, *resolve_flags]
                code, _, err = tool([*argv, *TARGET])
                status, why = compare_resolve(truth, row.name, code, err, missing)
                row_facts = {"oracle": {**facts["oracle"], "missing_pins": missing}, "tool": {"exit": code}}
                results.append({"package": f"{row.name} {version}", "door": "resolve", "status": status, "why": why, **row_facts})
        for r in results[first:]:
            print(f"{r['status']:10} {r['door']:8} {r['package']}: {r['why']}")
    return results


def fetched_torch(pypi: str, work: Path, python: str = PYTHON) -> Path:
    wheel = pip_download(f"torch=={TORCH}", work / "torch", pypi, python)
    lib = work / "torch-lib"
    lib.mkdir()
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            base = info.filename.rsplit("/", 1)[-1]
            if info.filename.startswith("torch/lib/") and TORCH_LIBRARY.match(base):
                with zf.open(info) as src, (lib / base).open("wb") as dst:
                    shutil.copyfileobj(src, dst)
    return lib


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pypi", help="PyPI's simple URL (default: from uv/pip configuration)")
    ap.add_argument("--torch-lib", type=Path, help=f"a torch/lib folder of torch {TORCH}: its libraries' exports decide the locked wheels")
    ap.add_argument("--fetch-torch", action="store_true", help=f"download PyPI's torch {TORCH} wheel (about 900 MB) for its libraries")
    ap.add_argument("--only", action="append", default=[], help="check only these packages (NAME or NAME==VERSION; repeatable)")
    ap.add_argument("--python", default=PYTHON, help=f"the declared target's Python (default {PYTHON})")
    ap.add_argument("--index", action="append", default=[], metavar="NAME=URL", help="another index for the tool (a mirror of the PyTorch or FlashInfer index)")
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--records", action="store_true", help="let resolve answer from the shipped scan records (default: it reads every wheel now)")
    args = ap.parse_args(argv)
    from resolve_gpu_stack.cli.userconfig import discover_pypi_url
    from resolve_gpu_stack.errors import ResolveGpuStackError

    try:
        pypi = args.pypi or discover_pypi_url(os.environ)
    except ResolveGpuStackError as exc:
        print(f"skipped: {exc}")
        return 0
    rows: Sequence[Row] = ROWS
    if args.only:  # in the order given; a name not in ROWS is checked as a kernel package
        known: dict[str, Row] = {}
        for r in ROWS:
            known.setdefault(r.name, r)
        rows = []
        for text in args.only:
            name, _, version = text.partition("==")
            base = known.get(name, Row(name))
            rows.append(Row(name, base.framework, version or base.version))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "wheels").mkdir()
        exports = None
        if args.torch_lib is not None:
            exports = torch_exports(args.torch_lib)
        elif args.fetch_torch:
            exports = torch_exports(fetched_torch(pypi, work, args.python))
        if exports is None:
            print("note: no torch libraries (--torch-lib DIR or --fetch-torch): locked wheels' C++ imports are unverified")
        flags = ["--python", args.python, "--index", f"pypi={pypi}", *(w for i in args.index for w in ("--index", i))]
        flags += ["--cache-dir", str(work / "cache"), "--timeout", "60"]
        results = run_rows(
            rows,
            pypi,
            flags,
            exports,
            work,
            python=args.python,
            indexes=[i.split("=", 1)[1] for i in args.index],
            resolve_flags=[] if args.records else ["--scan-records", "none"],
        )
    if results and all(r["door"] == "download" for r in results):
        print("skipped (offline?): no wheel could be downloaded")
        return 0
    agree = sum(r["status"] == "agree" for r in results)
    unverified = sum(r["status"] == "unverified" for r in results)
    disagree = [r for r in results if r["status"] == "disagree"]
    print(f"verdicts agreeing with binutils: {agree}/{len(results) - unverified} ({unverified} unverified)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 1 if disagree else 0


if __name__ == "__main__":
    sys.exit(main())
