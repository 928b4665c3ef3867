"""Build a package from its sdist against the kept torch (``--build NAME``; I/O edge: subprocesses,
disk). ``build_plan`` gives every ``build`` row of a plan a wheel:

1. The sdist is downloaded into the wheel cache and checked against its index's sha256 and size,
   exactly as a wheel (``download.fetch_verified``).
2. The build's inputs (``BuildInputs``: the sdist's sha256, the kept torch's version and wheel sha256
   where known, its CUDA label, the CUDA toolkit found, TORCH_CUDA_ARCH_LIST, Python, platform) are
   the key of a record in ``<wheel cache>/builds/``. A record whose wheel is still in the cache is
   the answer: a second run builds nothing.
3. Otherwise a build environment, a fresh venv of the target's Python in a temporary folder, holds
   - the kept torch. For a probed target (``install``): the target's own site-packages, reached
     through a ``.pth`` file in the venv. The target is never written to, nothing GBs large is
     copied, and the extension is compiled against the very torch files it will run with (a venv
     made ``--system-site-packages`` would see the base interpreter's packages, not a target
     venv's). For a declared target (``lock``): the kept torch's wheel from the PyTorch index,
     with its own requirements, installed into the venv;
   - the sdist's ``[build-system] requires`` with torch taken out, resolved by our resolver for
     the target (``BuildRequirements``, given by the CLI: routing sends torch to the PyTorch index
     only, so a PyPI torch is never a candidate) and installed from verified wheels with uv.
   ``PYTHONNOUSERSITE`` and a scrubbed environment keep a torch in ``~/.local`` or on
   ``PYTHONPATH`` out of it.
4. ``uv build --wheel --no-build-isolation`` runs in that environment with TORCH_CUDA_ARCH_LIST
   (the plan's ``--gpu`` list, which defaults to what nvidia-smi lists), MAX_JOBS (cores, and the
   memory available at ``MEMORY_PER_JOB`` a job) and the CUDA toolkit found (CUDA_HOME, nvcc on
   PATH), whose major must be torch's: checked before anything starts. The output goes to a log
   file; a progress line shows the elapsed time and the last line. Ctrl-C stops the build's whole
   process group and the temporary folder goes with everything in it: the wheel reaches the cache
   only once checked, by an atomic rename. A failed build names its log.
5. ``verify_built_wheel`` judges the product (its tags fit the target; which of its shared objects
   link torch: the seam where the ABI judgement plugs in); it is stored in the wheel cache under
   its sha256, the record written, and the row becomes the built wheel with its provenance.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from packaging.requirements import InvalidRequirement, Requirement
from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, NormalizedName, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from ..atomic import atomic_write
from ..data.rules import AbiRules
from ..errors import BuildError, ResolveGpuStackError
from ..index.sdist import SdistError, read_build_system
from ..index.wheelscan import scan_file
from ..index.zipmeta import ZipError
from ..model import Action, BuildProvenance, LockedPackage, LockPlan, SourceDist
from ..model.abi import TORCH as TORCH_LINKED
from ..model.abi import AbiVerdict
from ..model.codec import provenance_from_dict, provenance_to_dict
from ..model.cuda import CudaLabel
from ..net.download import Downloader, DownloadProgress, FetchedWheel, WheelCache, fetch_packages, fetch_verified, fill_hashes, store_local
from ..net.wheelcache import file_sha256
from ..rules.abi import AbiPolicy, AbiTorch, judge
from .exports import installed_torch_exports
from .install import _run_uv, _uv_args, uv_environment

BUILD_SCHEMA = 1  # what goes into a build's key; a new schema builds again
MEMORY_PER_JOB = 4 * 2**30  # a CUDA compile job takes GBs (abi.md, last section): MAX_JOBS is memory / this, at most the cores
TORCH = NormalizedName("torch")
# Variables that would put other packages (a PyPI torch in ~/.local or on PYTHONPATH) into the build.
_SCRUBBED = ("PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "VIRTUAL_ENV", "CONDA_PREFIX", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS")


class BuildProgress(Protocol):
    """progress(line): one line of build progress (the CLI shows it in place on a terminal);
    ``final``: a build's closing line (done or failed, after its elapsed time)."""

    def __call__(self, line: str, *, final: bool = False) -> None: ...


# the plan of a build environment's packages: ``requirements`` (torch taken out) resolved by our
# resolver for the target, with the kept torch (kept as installed for a probed target; to install
# from its index for a declared one)
BuildRequirements = Callable[[Sequence[str]], LockPlan]


# -- the machine: CUDA toolkit, GPUs, jobs -----------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class CudaToolkit:
    home: Path  # CUDA_HOME
    nvcc: Path
    version: str  # "13.0", from nvcc --version

    @property
    def major(self) -> int:
        return int(self.version.split(".", 1)[0])


_NVCC_RELEASE = re.compile(r"release (\d+)\.(\d+)")


def parse_nvcc_version(output: str) -> str | None:
    """``"13.0"`` from ``nvcc --version`` (``Cuda compilation tools, release 13.0, V13.0.88``)."""
    m = _NVCC_RELEASE.search(output)
    return f"{m.group(1)}.{m.group(2)}" if m else None


def find_cuda_toolkit(env: Mapping[str, str]) -> CudaToolkit | None:
    """The CUDA toolkit a build would use: ``$CUDA_HOME/bin/nvcc``, else ``nvcc`` on PATH (its
    folder's parent is CUDA_HOME; a wrapper script is followed through ``nvcc --version``), else
    ``/usr/local/cuda``. None when there is none, or it does not answer ``--version``."""
    candidates: list[Path] = []
    if env.get("CUDA_HOME"):
        candidates.append(Path(env["CUDA_HOME"]) / "bin" / "nvcc")
    found = shutil.which("nvcc", path=env.get("PATH"))
    if found:
        candidates.append(Path(found))
    candidates.append(Path("/usr/local/cuda/bin/nvcc"))
    for nvcc in candidates:
        if not (nvcc.is_file() and os.access(nvcc, os.X_OK)):
            continue
        try:
            out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        version = parse_nvcc_version(out)
        if version is None:
            continue
        real = nvcc.resolve()
        home = Path(env["CUDA_HOME"]) if env.get("CUDA_HOME") and nvcc == candidates[0] else real.parent.parent
        if not (home / "bin").is_dir():
            home = nvcc.parent.parent
        return CudaToolkit(home=home, nvcc=nvcc, version=version)
    return None


def arch_list(capabilities: Sequence[str]) -> str:
    """TORCH_CUDA_ARCH_LIST for the GPUs (``["12.0", "9.0"]`` -> ``"9.0;12.0"``); "" for any GPU."""

    def key(cap: str) -> tuple[int, ...]:
        return tuple(int(p) for p in re.findall(r"\d+", cap))

    return ";".join(sorted(dict.fromkeys(capabilities), key=key))


def max_jobs(cores: int, available: int | None) -> int:
    """Parallel compile jobs: every core, but no more than the memory available holds at
    ``MEMORY_PER_JOB`` each (a CUDA build that runs out of memory dies half-way); at least one."""
    jobs = max(1, cores)
    if available is not None:
        jobs = min(jobs, max(1, available // MEMORY_PER_JOB))
    return jobs


def available_memory() -> int | None:
    """MemAvailable from /proc/meminfo, in bytes (None where there is none)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildMachine:
    """What this machine brings to a build, found once at the edge."""

    uv: str
    arch_list: str  # TORCH_CUDA_ARCH_LIST; "" leaves torch's default (every architecture it supports)
    max_jobs: int
    toolkit: CudaToolkit | None
    env: Mapping[str, str]  # the environment the tool runs in (scrubbed before a build sees it)


def check_toolkit(torch: Version, toolkit: CudaToolkit | None) -> str | None:
    """``BuildError`` when the CUDA toolkit found is of another major than torch's CUDA (an
    extension built by it would not load); a warning (returned) when a CUDA torch finds none."""
    label = CudaLabel.of_torch(torch)
    if label is None:
        return None
    if toolkit is None:
        return (
            f"no CUDA toolkit found (CUDA_HOME, nvcc on PATH, /usr/local/cuda) for torch {torch}: a CUDA extension "
            f"cannot build; install the CUDA {label.major} toolkit (or NVIDIA's nvcc wheel) and set CUDA_HOME"
        )
    if toolkit.major != label.major:
        raise BuildError(
            f"the CUDA toolkit found is {toolkit.version} ({toolkit.nvcc}), but torch {torch} is built for CUDA {label.major}.{label.minor}: "
            "an extension built with it would not load",
            hint=f"point CUDA_HOME at a CUDA {label.major}.x toolkit; nothing was built",
        )
    return None


# -- what a build depends on: the cache key ----------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildInputs:
    """Everything that decides a build's product (the record's key)."""

    sdist_sha256: str
    torch: str
    torch_sha256: str | None
    cuda: str | None
    nvcc: str | None
    arch_list: str
    python: str
    platform: str

    def key(self) -> str:
        text = json.dumps({"schema": BUILD_SCHEMA, **dataclasses.asdict(self)}, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class BuiltWheelCheck:
    """``verify_built_wheel``'s judgement: problems refuse the wheel, notes are said."""

    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    abi: AbiVerdict | None = None  # the built wheel judged against the torch it was built for (when it links torch)

    @property
    def links_torch(self) -> bool:
        """Whether a shared object of the wheel links torch (then it was judged: ``abi``)."""
        return self.abi is not None


def verify_built_wheel(
    path: Path,
    *,
    name: NormalizedName,
    version: Version,
    torch: Version,
    target_tags: Sequence[Tag],
    abi: AbiRules,
    torch_site: Path | None,
    cuda_major: int | None,
) -> BuiltWheelCheck:
    """THE place a built wheel is judged before it is stored (one place, for every build): it is a
    wheel of ``name`` at ``version``'s public version, one of its tags fits the target, and its
    shared objects run on ``torch``: the ABI judgement every other wheel gets (``rules/abi.py``),
    its imports checked against the exports of the torch it was built against (in ``torch_site``)."""
    problems: list[str] = []
    try:
        got_name, got_version, _, tags = parse_wheel_filename(path.name)
    except InvalidWheelFilename:
        return BuiltWheelCheck(problems=(f"{path.name} is not a wheel file name",))
    if got_name != name or got_version.public != version.public:
        problems.append(f"the build made {got_name} {got_version}, not {name} {version}")
    if not set(tags) & set(target_tags):
        problems.append(f"its tags ({', '.join(sorted(str(t) for t in tags))}) fit no tag of the target")
    try:
        with path.open("rb") as fh:
            scan = scan_file(fh, path.stat().st_size)
    except ZipError as exc:
        return BuiltWheelCheck(problems=(*problems, f"not a readable wheel ({exc})"))
    found = scan.abi(abi)
    if found.kind != TORCH_LINKED:
        return BuiltWheelCheck(
            problems=tuple(problems),
            notes=(f"{name} {got_version}: none of its shared objects links torch ({found.why}); it did not need a build for this torch",),
        )
    exports = (lambda: installed_torch_exports(torch_site, str(torch))) if torch_site is not None else None
    verdict = judge(name, found, AbiTorch(version=torch, cuda_major=cuda_major, exports=exports), AbiPolicy.of(abi), version=got_version)
    if verdict.refusal is not None:
        problems.append(f"it cannot run on torch {torch}: {verdict.refusal}")
    return BuiltWheelCheck(problems=tuple(problems), notes=(f"{name} {got_version}: {verdict.note}",) if verdict.note else (), abi=verdict)


# -- the plan ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildContext:
    """What ``build_plan`` works with (built by the CLI from the flags)."""

    cache: WheelCache
    machine: BuildMachine
    requirements: BuildRequirements
    target_tags: Sequence[Tag]
    abi: AbiRules  # the data's [abi] rules: the built wheel is judged as every other compiled wheel
    site_dirs: Sequence[str] = ()  # a probed target's purelib/platlib (the kept torch is there); () for a declared target
    python: str | None = None  # the interpreter the build venv is made from: a probed target's; None: the target's Python version
    fetcher: Downloader | None = None
    offline: bool = False
    downloads: DownloadProgress | None = None
    progress: BuildProgress | None = None
    say: Callable[[str], None] | None = None  # a note or warning for the user (stderr)


def pending(plan: LockPlan) -> list[LockedPackage]:
    """The plan's build rows that have no wheel yet."""
    return [p for p in plan.packages if p.action is Action.BUILD and p.provenance is None]


def build_plan(plan: LockPlan, ctx: BuildContext) -> LockPlan:
    """The plan with every build row built (or found built in the cache): its file fields the built
    wheel's (a path in the wheel cache), its provenance recorded."""
    todo = pending(plan)
    if not todo:
        return plan
    torch = plan.torch
    if torch is None:
        raise BuildError(f"{todo[0].name}: the plan has no torch to build against")
    built = {p.name: build_one(p, plan, ctx) for p in todo}
    return dataclasses.replace(plan, packages=tuple(built.get(p.name, p) for p in plan.packages))


def build_inputs(pkg: LockedPackage, plan: LockPlan, ctx: BuildContext, sdist_sha256: str) -> BuildInputs:
    torch = plan.torch
    assert torch is not None
    # the torch wheel's sha256 as its index lists it (stable releases); a nightly's version names one
    # build already. A digest learnt later (a lock hashing the kept nightly) must not change the key.
    return BuildInputs(
        sdist_sha256=sdist_sha256,
        torch=str(torch.version),
        torch_sha256=torch.sha256,
        cuda=plan.target.cuda,
        nvcc=ctx.machine.toolkit.version if ctx.machine.toolkit else None,
        arch_list=ctx.machine.arch_list,
        python=plan.target.python,
        platform=plan.target.platform,
    )


def build_one(pkg: LockedPackage, plan: LockPlan, ctx: BuildContext) -> LockedPackage:
    """One build row, built or found in the cache (see the module docstring)."""
    sdist = pkg.sdist
    if sdist is None:
        raise BuildError(f"{pkg.name} {pkg.version}: a build row without an sdist")
    fetched = _source_archive(pkg.name, sdist, ctx) if sdist.origin is not None else None
    if fetched is None:
        fetched = fetch_verified(
            sdist.url,
            sha256=sdist.sha256,
            size=sdist.size,
            cache=ctx.cache,
            fetcher=ctx.fetcher,
            filename=sdist.filename,
            progress=ctx.downloads,
            offline=ctx.offline,
        )
    inputs = build_inputs(pkg, plan, ctx, fetched.sha256)
    hit = _cached(ctx.cache, inputs)
    if hit is not None:
        return hit(pkg)
    torch = Version(inputs.torch)
    warning = check_toolkit(torch, ctx.machine.toolkit)
    if warning and ctx.say is not None:
        ctx.say(f"warning: {pkg.name} {pkg.version}: {warning}")
    try:
        with fetched.path.open("rb") as fh:
            system = read_build_system(fh, sdist.filename)
    except SdistError as exc:
        raise BuildError(f"{sdist.filename}: {exc.message}") from None
    requirements = _without_torch(system.requires, sdist.filename)
    command = _command(ctx.machine, sdist.origin.reference if sdist.origin is not None else sdist.filename)
    logs = ctx.cache.root / "builds" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{pkg.name}-{pkg.version}-{inputs.key()[:12]}.log"
    with tempfile.TemporaryDirectory(prefix="resolve-gpu-stack-build-") as tmp_name:
        tmp = Path(tmp_name)
        python = _build_environment(tmp, plan, ctx, requirements, log)
        out = tmp / "out"
        cmd = [
            ctx.machine.uv,
            "build",
            "--wheel",
            "--no-build-isolation",
            "--python",
            python,
            "--out-dir",
            str(out),
            "--no-config",
            "--no-index",
            "--offline",
            str(fetched.path),
        ]
        run_logged(cmd, env=_build_env(ctx.machine, tmp), log=log, label=f"building {pkg.name} {pkg.version}", progress=ctx.progress, append=True)
        wheels = sorted(out.glob("*.whl"))
        if len(wheels) != 1:
            raise BuildError(f"building {pkg.name} {pkg.version} made {len(wheels)} wheels, not one; the build log: {log}")
        label = CudaLabel.of_torch(torch)
        check = verify_built_wheel(
            wheels[0],
            name=pkg.name,
            version=pkg.version,
            torch=torch,
            target_tags=ctx.target_tags,
            abi=ctx.abi,
            torch_site=_torch_site(python, _build_env(ctx.machine, tmp)),
            cuda_major=label.major if label else None,
        )
        if check.problems:
            raise BuildError(
                f"the wheel built from {sdist.filename} is refused: {'; '.join(check.problems)}; the build log: {log}",
                hint="nothing was stored; fix the build (or its inputs) and run again",
            )
        for note in check.notes:
            if ctx.say is not None:
                ctx.say(f"note: {note}")
        provenance = BuildProvenance(
            torch=inputs.torch,
            torch_sha256=inputs.torch_sha256,
            cuda=inputs.cuda,
            nvcc=inputs.nvcc,
            arch_list=inputs.arch_list,
            python=inputs.python,
            platform=inputs.platform,
            command=command,
        )
        stored = _store(ctx.cache, wheels[0])
    _write_record(ctx.cache, inputs, stored, provenance, log, check.abi)
    return dataclasses.replace(_row(pkg, stored, provenance), abi=check.abi or pkg.abi)


def _source_archive(name: NormalizedName, sdist: SourceDist, ctx: BuildContext) -> FetchedWheel:
    """The archive of a source tree (``--build 'NAME @ URL'``): in the wheel cache since it was
    fetched, else fetched again from its origin (git: the locked commit) and checked to be the
    same files."""
    assert sdist.origin is not None
    hit = ctx.cache.lookup(sdist.sha256 or "", sdist.filename, sdist.size) if sdist.sha256 else None
    if hit is not None:
        return hit
    from ..model.source import BuildSpec
    from .sources import fetch_source

    origin = sdist.origin
    if origin.kind == "git" and origin.commit:
        origin = dataclasses.replace(origin, rev=origin.commit)
    tree = fetch_source(BuildSpec(name=name, source=origin), ctx.cache, ctx.machine.env)
    if sdist.sha256 and tree.sha256 != sdist.sha256:
        raise BuildError(
            f"the source {sdist.origin.reference} is not the tree recorded (its files' sha256 is {tree.sha256}, the plan's {sdist.sha256})",
            hint="the tree changed since it was locked: lock again to build the tree as it is now",
        )
    found = ctx.cache.lookup(tree.sha256, tree.filename, tree.size)
    assert found is not None
    return found


def _row(pkg: LockedPackage, wheel: Path, provenance: BuildProvenance) -> LockedPackage:
    sha, size = wheel.parent.name, wheel.stat().st_size
    _, version, _, _ = parse_wheel_filename(wheel.name)
    return dataclasses.replace(pkg, version=version, url=str(wheel), filename=wheel.name, sha256=sha, size=size, upload_time=None, provenance=provenance)


def _without_torch(requires: Sequence[str], where: str) -> list[str]:
    """The build requirements less torch (the kept torch is in the environment, whatever they pin)."""
    out = []
    for text in requires:
        try:
            req = Requirement(text)
        except InvalidRequirement as exc:
            raise BuildError(f"{where}: build requirement {text!r} does not parse ({exc})") from None
        if canonicalize_name(req.name) != TORCH:
            out.append(text)
    return out


def _command(machine: BuildMachine, sdist: str) -> str:
    env = [f"TORCH_CUDA_ARCH_LIST={shlex.quote(machine.arch_list)}"] if machine.arch_list else []
    env.append(f"MAX_JOBS={machine.max_jobs}")
    return " ".join([*env, "uv build --wheel --no-build-isolation", shlex.quote(sdist)])


def _build_env(machine: BuildMachine, tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in uv_environment(machine.env).items() if k not in _SCRUBBED}
    env["PYTHONNOUSERSITE"] = "1"  # no torch from ~/.local
    env["MAX_JOBS"] = str(machine.max_jobs)
    env["UV_CACHE_DIR"] = env.get("UV_CACHE_DIR") or str(tmp / "uv-cache")
    if machine.arch_list:
        env["TORCH_CUDA_ARCH_LIST"] = machine.arch_list
    else:
        env.pop("TORCH_CUDA_ARCH_LIST", None)
    if machine.toolkit is not None:
        env["CUDA_HOME"] = str(machine.toolkit.home)
        env["PATH"] = os.pathsep.join([str(machine.toolkit.nvcc.parent), env.get("PATH", "")])
    return env


# -- the build environment -----------------------------------------------------------------------


def _build_environment(tmp: Path, plan: LockPlan, ctx: BuildContext, requirements: Sequence[str], log: Path) -> str:
    """A venv under ``tmp`` with the kept torch and the build requirements; its interpreter."""
    venv = tmp / "env"
    env = _build_env(ctx.machine, tmp)
    python = ctx.python or _interpreter_for(plan.target.python)
    try:
        _run_uv([ctx.machine.uv, "venv", "-q", "--python", python, str(venv)], env, what=f"uv venv --python {python}")
    except ResolveGpuStackError as exc:
        raise BuildError(
            f"cannot make a build environment of Python {python} on this machine: {exc.message}",
            hint="a build for a declared target needs an interpreter of its Python here (uv finds it); or build with install --python PATH",
        ) from None
    interpreter = str(venv / "bin" / "python")
    if ctx.site_dirs:
        site = Path(
            subprocess.run(
                [interpreter, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True, check=True
            ).stdout.strip()
        )
        (site / "_resolve_gpu_stack_target.pth").write_text("".join(f"{d}\n" for d in dict.fromkeys(ctx.site_dirs)))
    env_plan = ctx.requirements(requirements)
    env_plan = fill_hashes(env_plan, cache=ctx.cache, fetcher=ctx.fetcher, progress=ctx.downloads, offline=ctx.offline)
    todo = [p for p in env_plan.packages if p.action is not Action.KEEP]
    with log.open("w", encoding="utf-8") as fh:
        fh.write(f"# build environment: {venv}\n# kept torch from: {', '.join(ctx.site_dirs) or 'its wheel, installed below'}\n")
        fh.write("".join(f"# {p.action.value} {p.name}=={p.version} (from {p.index})\n" for p in sorted(env_plan.packages, key=lambda p: p.name)))
    if todo:
        fetched = fetch_packages(todo, cache=ctx.cache, fetcher=ctx.fetcher, progress=ctx.downloads, offline=ctx.offline)
        work = tmp / "install"
        work.mkdir()
        _run_uv(
            _uv_args(work, uv=ctx.machine.uv, python=interpreter, todo=todo, fetched=fetched, constraints=""),
            env,
            what="uv pip install (the build requirements)",
        )
    _check_torch(interpreter, env, plan)
    return interpreter


def _interpreter_for(python: str) -> str:
    """The interpreter a declared target's build venv is made from: the one running this tool when
    it is that Python, else the version for uv to find on this machine."""
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    return sys.executable if python in (here, f"{here}.{sys.version_info.micro}") else python


def _torch_site(interpreter: str, env: Mapping[str, str]) -> Path | None:
    """The folder that holds the build environment's ``torch`` package (its libraries are there)."""
    code = "import importlib.util, os; s = importlib.util.find_spec('torch'); print(os.path.dirname(os.path.dirname(s.origin)) if s and s.origin else '')"
    proc = subprocess.run([interpreter, "-c", code], capture_output=True, text=True, env=dict(env), check=False)
    where = proc.stdout.strip()
    return Path(where) if proc.returncode == 0 and where else None


def _check_torch(interpreter: str, env: Mapping[str, str], plan: LockPlan) -> None:
    """The build environment's ``import torch`` must be the kept torch (and nothing else)."""
    want = plan.torch.version if plan.torch is not None else None
    proc = subprocess.run(
        [interpreter, "-c", "import importlib.metadata as m; print(m.version('torch'))"], capture_output=True, text=True, env=dict(env), check=False
    )
    got = proc.stdout.strip()
    if proc.returncode != 0 or want is None or Version(got) != want:
        raise BuildError(
            f"the build environment's torch is {got or 'missing'}, not the kept torch {want}", hint="nothing was built; report it with the plan (--format json)"
        )


# -- running the build ---------------------------------------------------------------------------


def run_logged(
    cmd: Sequence[str], *, env: Mapping[str, str], log: Path, label: str, progress: BuildProgress | None, append: bool = False, every: float = 1.0
) -> None:
    """Run ``cmd`` with its output (stdout and stderr) in ``log``; ``progress`` gets
    ``<label>: <elapsed> | <last line>`` about every ``every`` seconds, and a closing line
    (``final``). Ctrl-C (or any error) stops the whole process group; a non-zero exit is a
    ``BuildError`` naming the log."""
    start = time.monotonic()
    last = [""]
    with log.open("ab" if append else "wb") as fh:
        fh.write(f"$ {shlex.join(cmd)}\n".encode())
        fh.flush()
        proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=dict(env), start_new_session=True)

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                fh.write(line)
                text = line.decode("utf-8", "replace").strip()
                if text:
                    last[0] = text

        reader = threading.Thread(target=pump, name="resolve-gpu-stack-build-log", daemon=True)
        reader.start()
        try:
            while True:
                try:
                    code = proc.wait(timeout=every)
                    break
                except subprocess.TimeoutExpired:
                    if progress is not None:
                        progress(f"{label}: {_elapsed(time.monotonic() - start)} | {last[0][-120:]}")
        except BaseException:
            _stop(proc)
            raise
        reader.join(timeout=5)
    if progress is not None:
        progress(f"{label}: {'done' if code == 0 else 'failed'} after {_elapsed(time.monotonic() - start)}", final=True)
    if code != 0:
        tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-15:])
        raise BuildError(f"{label} failed (exit {code}); the build log: {log}", hint=f"its last lines:\n{tail}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """The process and everything it started: SIGTERM to its group, SIGKILL after 5 s."""
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _elapsed(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{seconds:.1f}s"


# -- the wheel cache: built wheels and their records -----------------------------------------------


def _record_path(cache: WheelCache, key: str) -> Path:
    return cache.root / "builds" / f"{key}.json"


def _cached(cache: WheelCache, inputs: BuildInputs) -> Callable[[LockedPackage], LockedPackage] | None:
    """The cached build for ``inputs``: a function that turns the row into the built one, or None."""
    try:
        record = json.loads(_record_path(cache, inputs.key()).read_text())
        wheel = record["wheel"]
        hit = cache.lookup(str(wheel["sha256"]), str(wheel["filename"]), int(wheel["size"]))
        provenance = provenance_from_dict(record["provenance"], "build record")
        verdict = AbiVerdict.from_dict(record.get("abi") or {})
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if hit is None or provenance is None:
        return None
    return lambda pkg: dataclasses.replace(_row(pkg, hit.path, provenance), abi=verdict or pkg.abi)


def _store(cache: WheelCache, wheel: Path) -> Path:
    """The checked wheel into the wheel cache under its sha256 (``store_local``: copied into a temp
    file created exclusively, checked, renamed into ``sha256/``)."""
    digest, size = file_sha256(wheel)
    return store_local(wheel, sha256=digest, size=size, cache=cache).path


def _write_record(cache: WheelCache, inputs: BuildInputs, wheel: Path, provenance: BuildProvenance, log: Path, verdict: AbiVerdict | None) -> None:
    record = {
        "schema": BUILD_SCHEMA,
        "key": inputs.key(),
        "inputs": dataclasses.asdict(inputs),
        "wheel": {"filename": wheel.name, "sha256": wheel.parent.name, "size": wheel.stat().st_size},
        "provenance": provenance_to_dict(provenance),
        "log": str(log),
        "abi": verdict.to_dict() if verdict is not None else None,
    }
    atomic_write(_record_path(cache, inputs.key()), json.dumps(record, indent=1, sort_keys=True), make_parents=True)


__all__ = [
    "BUILD_SCHEMA",
    "BuildContext",
    "BuildInputs",
    "BuildMachine",
    "BuildProgress",
    "BuildRequirements",
    "BuiltWheelCheck",
    "CudaToolkit",
    "arch_list",
    "available_memory",
    "build_one",
    "build_plan",
    "check_toolkit",
    "find_cuda_toolkit",
    "max_jobs",
    "parse_nvcc_version",
    "pending",
    "run_logged",
    "verify_built_wheel",
]
