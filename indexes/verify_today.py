#!/usr/bin/env python3
"""Check the tool's verdicts on today's serving stack against an oracle it does not share.

For each framework and kernel package of the SGLang and vLLM closures, and the torch family, the
newest release on PyPI (or ``NAME==VERSION`` given) is downloaded by pip (``pip download --no-deps``
for the target below) and its ``.so`` members are read by binutils, not by the tool:

- ``readelf -d``: the libraries each member needs (libtorch*/libc10*: it links torch;
  ``libcudart.so.N``: it needs CUDA major N);
- ``nm -D --undefined-only``: what it imports: C++ symbols of torch (mangled names of the c10,
  at, torch and caffe2 namespaces), C-shim functions (``aoti_torch_*``, ``torch_*``), libtorch_python's
  ``THP*``;
- with torch's real libraries (``--torch-lib DIR``: a ``torch/lib`` folder of torch 2.15.0, or
  ``--fetch-torch``: pip downloads PyPI's torch 2.15.0 wheel, about 900 MB, and its libraries are
  read), ``nm -D --defined-only`` of ``libtorch*.so`` and ``libc10*.so``: what that torch exports.

The oracle's answer: the wheel is ``locked`` (a torch-linked member imports a C++ symbol of torch),
``stable`` (C-shim imports only) or links no torch; it runs on PyPI's torch 2.15.0 (CUDA 13.2) when
a member set for CUDA 13 exists (or it needs no CUDA) and, locked, every C++ import is exported
(without torch's libraries this is unverified, said with the reason, never counted as agreeing).
The tool is then asked, both **without** ``--cuda`` (its CUDA from the kept torch's own METADATA):
``inspect NAME==VERSION`` (its kind, CUDA majors and verdict must be the oracle's), and, for a
framework, ``resolve --torch installed --with NAME==VERSION`` (exit 0 exactly when the oracle says
it runs; a refusal must name the package).

    .venv/bin/python indexes/verify_today.py [--pypi URL] [--torch-lib DIR | --fetch-torch] [--only NAME[==V]] [--python X.Y] [--json FILE]

Running it live downloads the wheels (vllm's is hundreds of MB). PyPI's URL comes from uv/pip
configuration (or --pypi). Offline, it says so and exits 0. Exit 1 when a verdict disagrees with the
oracle. ``tests/test_verify_today.py`` checks the oracle's logic offline on real compiled objects.
"""

from __future__ import annotations

import argparse
import contextlib
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
sys.path.insert(0, str(REPO / "src"))

TORCH = "2.15.0"  # PyPI's torch today: no +cuNNN label, CUDA 13.2 by its cuda-toolkit pin
TORCH_CUDA_MAJOR = 13
PYTHON = "3.12"
PLATFORM = "x86_64-manylinux_2_34"
PIP_PLATFORMS = ("manylinux_2_34_x86_64", "manylinux_2_28_x86_64", "manylinux2014_x86_64", "linux_x86_64")
TARGET = ["--platform", PLATFORM, "--installed", f"torch=={TORCH}"]  # no --cuda: the tool finds it


@dataclass(frozen=True)
class Row:
    """A package of today's closures; ``version`` None: the newest on PyPI today."""

    name: str
    framework: bool = False  # also resolved with --with (a serving framework)
    version: str | None = None


ROWS = (
    Row("vllm", framework=True),  # 0.34.0 on 2026-12-07
    Row("sglang", framework=True),
    Row("sglang-kernel"),
    Row("sgl-deep-ep"),
    Row("torch-memory-saver"),
    Row("xformers"),
    Row("flash-attn"),
    Row("torchvision"),
    Row("torchaudio"),
    Row("torchcodec"),
    Row("torchao"),
)

# -- the oracle: binutils on the real files ----------------------------------------------------------

TORCH_LIBRARY = re.compile(r"^lib(torch|c10)[\w.-]*\.so")
CUDART = re.compile(r"^libcudart\.so\.(\d+)$")
# A mangled name whose outermost namespace is torch's (Itanium ABI: _ZN, cv-qualifiers, then the
# length-prefixed first component; _ZTV/_ZTI/_ZTS: its vtable, typeinfo, typeinfo name).
CXX_TORCH = re.compile(r"^_Z(?:T[VIS])?N[rVK]*(?:3c10|2at|5torch|6caffe2)(?=[0-9A-Z])")
SHIM = re.compile(r"^(?:aoti_torch_|torch_)\w+$")  # the C shim: unmangled C functions


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
        thp=frozenset(s for s in imports if "THP" in s),
    )


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


def judge(members: Sequence[MemberTruth], exports: set[str] | None, *, cuda_major: int = TORCH_CUDA_MAJOR) -> Truth:
    """The oracle's verdict: kind from the torch-linked members' imports; runs when a member set for
    torch's CUDA major exists (members per CUDA major: the others are not loaded) and, locked, every
    C++ import of the deciding members is exported."""
    majors = tuple(sorted({v for m in members for v in m.cuda_majors}))
    deciding = [m for m in members if not m.cuda_majors or cuda_major in m.cuda_majors] if len(majors) > 1 else list(members)
    linked = [m for m in deciding if m.links_torch]
    cxx = frozenset(s for m in linked for s in m.cxx)
    kind = None if not [m for m in members if m.links_torch] else ("locked" if any(m.cxx for m in members if m.links_torch) else "stable")
    if majors and cuda_major not in majors:
        return Truth(kind, majors, False, f"needs CUDA {'/'.join(map(str, majors))}, torch has CUDA {cuda_major}", tuple(members))
    if kind != "locked" or not cxx:
        return Truth(kind, majors, True, "C-shim imports only" if kind == "stable" else "links no torch" if kind is None else "runs", tuple(members))
    if exports is None:
        return Truth(kind, majors, None, "torch's libraries are not here (--torch-lib DIR or --fetch-torch): the C++ imports were not checked", tuple(members))
    missing = sorted(cxx - exports)
    if missing:
        return Truth(kind, majors, False, f"{len(missing)} of {len(cxx)} C++ imports are not exported by torch {TORCH}, e.g. {missing[0]}", tuple(members))
    return Truth(kind, majors, True, f"all {len(cxx)} C++ imports are exported by torch {TORCH}", tuple(members))


def wheel_truth(wheel: Path, exports: set[str] | None, work: Path) -> Truth:
    members = [member_truth(path, name) for name, path in wheel_members(wheel, work)]
    return judge(members, exports)


# -- comparing the tool with the oracle --------------------------------------------------------------


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
    if truth.runs is None:
        return "unverified", truth.why
    runs = bool(verdict.get("runs", True)) if verdict else True
    if runs != truth.runs:
        return "disagree", f"inspect says it {'runs' if runs else 'cannot run'} ({verdict.get('refusal') or verdict.get('note')}); binutils: {truth.why}"
    return "agree", truth.why


def compare_resolve(truth: Truth, name: str, code: int, err: str) -> tuple[str, str]:
    """A framework's ``resolve --with NAME==V``: exit 0 exactly when the oracle says it runs."""
    if truth.runs is None:
        return "unverified", truth.why
    if code not in (0, 1):
        return "unverified", f"resolve exit {code}: {err.strip().splitlines()[0] if err.strip() else ''}"
    if (code == 0) != truth.runs:
        return "disagree", f"resolve exit {code}; binutils: {truth.why}"
    if code == 1 and name not in err:
        return "disagree", "the refusal does not name the package"
    return "agree", "planned" if code == 0 else "refused, naming it"


# -- the live run ------------------------------------------------------------------------------------


def pip_download(spec: str, into: Path, pypi: str, python: str = PYTHON) -> Path:
    """The wheel pip picks for the target (newest unless pinned), downloaded without dependencies."""
    platforms = [w for p in PIP_PLATFORMS for w in ("--platform", p)]
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:", "--python-version", python, *platforms]
    cmd += ["--index-url", pypi, "-d", str(into), "--", spec]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=3600)
    name = re.sub(r"[-_.]+", "_", spec.split("==", 1)[0]).lower()
    wheels = sorted(p for p in into.glob("*.whl") if p.name.lower().startswith(name + "-"))
    if not wheels:
        raise RuntimeError(f"pip downloaded no wheel for {spec}")
    return wheels[-1]


def tool(argv: Sequence[str]) -> tuple[int, str, str]:
    from resolve_gpu_stack.cli.app import main as cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli(list(argv))
    return code, out.getvalue(), err.getvalue()


def version_of(wheel: Path) -> str:
    return wheel.name.split("-")[1]


def run_rows(rows: Iterable[Row], pypi: str, flags: Sequence[str], exports: set[str] | None, work: Path, *, python: str = PYTHON) -> list[dict[str, str]]:
    """Each row's wheel downloaded, read by binutils, and the tool's ``inspect`` (and, for a
    framework, ``resolve``) compared with that; ``flags``: the tool's index, cache and --python."""
    results = []
    for row in rows:
        spec = f"{row.name}=={row.version}" if row.version else row.name
        try:
            wheel = pip_download(spec, work / "wheels", pypi, python)
        except (subprocess.SubprocessError, RuntimeError) as exc:
            results.append({"package": spec, "door": "download", "status": "unverified", "why": str(exc)[:200]})
            continue
        version = version_of(wheel)
        member_dir = Path(tempfile.mkdtemp(dir=work))
        truth = wheel_truth(wheel, exports, member_dir)
        code, out, err = tool(["inspect", f"{row.name}=={version}", *flags, *TARGET, "--format", "json"])
        report = json.loads(out) if code in (0, 1) and out.strip() else {"error": err.strip().splitlines()[0] if err.strip() else f"exit {code}"}
        status, why = compare_inspect(truth, report)
        results.append({"package": f"{row.name} {version}", "door": "inspect", "status": status, "why": why})
        if row.framework:
            code, _, err = tool(["resolve", "--torch", "installed", "--flashinfer", "none", "--with", f"{row.name}=={version}", *flags, *TARGET])
            status, why = compare_resolve(truth, row.name, code, err)
            results.append({"package": f"{row.name} {version}", "door": "resolve", "status": status, "why": why})
        for r in results[-2 if row.framework else -1 :]:
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
    args = ap.parse_args(argv)
    from resolve_gpu_stack.cli.userconfig import discover_pypi_url
    from resolve_gpu_stack.errors import ResolveGpuStackError

    try:
        pypi = args.pypi or discover_pypi_url(os.environ)
    except ResolveGpuStackError as exc:
        print(f"skipped: {exc}")
        return 0
    rows: Sequence[Row] = ROWS
    if args.only:
        wanted = {o.split("==", 1)[0]: (o.split("==", 1)[1] if "==" in o else None) for o in args.only}
        rows = [Row(r.name, r.framework, wanted[r.name] or r.version) for r in ROWS if r.name in wanted]
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
        results = run_rows(rows, pypi, flags, exports, work, python=args.python)
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
