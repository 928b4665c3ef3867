"""Build a package from its sdist, or from a source tree (``--build 'NAME @ URL'``: a git commit
or a local tree, archived by ``env/sources.py``), against the kept torch (I/O edge: subprocesses,
disk). ``build_plan`` gives every ``build`` row of a plan a wheel:

1. The sdist is downloaded into the wheel cache and checked against its index's sha256 and size,
   exactly as a wheel (``download.fetch_verified``); a source tree's archive is in the cache since
   it was fetched (else fetched again at its commit and checked to be the same files).
2. The build's inputs (``BuildInputs``: the sdist's sha256, the kept torch's version and wheel sha256
   where known, its CUDA label, the CUDA toolkit found, TORCH_CUDA_ARCH_LIST, Python, platform) are
   the key of a record in ``<wheel cache>/builds/``. A record whose wheel is still in the cache is
   the answer: a second run builds nothing.
3. Otherwise a build environment, a fresh venv of the target's Python in a temporary folder, holds
   - the kept torch. For a probed target (``install``): the target's own site-packages, reached
     through a ``.pth`` file in the venv. The target is never written to (its site folders are
     compared before and after: a build that wrote there is refused), nothing GBs large is copied,
     and the extension is compiled against the very torch files it will run with. For a declared
     target (``lock``): the kept torch's wheel from the PyTorch index, installed into the venv;
   - the sdist's ``[build-system] requires`` with torch taken out, resolved by our resolver as if
     nothing but the kept torch were installed (``BuildRequirements``, given by the CLI: routing
     sends torch to the PyTorch index only), then the backend's ``get_requires_for_build_wheel``
     (PEP 517) resolved and installed too, from verified wheels with uv;
   - the module ``import torch`` finds must be the kept torch's own file (``_check_torch``).
   ``PYTHONNOUSERSITE`` and a scrubbed environment keep a torch in ``~/.local`` or on
   ``PYTHONPATH`` out of it.
4. ``uv build --wheel --no-build-isolation`` runs in that environment with TORCH_CUDA_ARCH_LIST
   (the plan's ``--gpu`` list, which defaults to what nvidia-smi lists; with none, the archs the kept
   torch was built for), MAX_JOBS (cores, and the memory available at ``MEMORY_PER_JOB`` a job) and
   the CUDA toolkit found (CUDA_HOME, CUDA_PATH, nvcc on PATH with a wrapper followed; its stubs
   without a driver), whose major must be torch's: checked before anything starts. stdin is closed;
   the output goes to a log file (0600); a progress line shows the elapsed time and the last line.
   Ctrl-C, SIGTERM, the deadline, and (through the ``Janitor`` and a parent-death signal) SIGKILL of
   the tool stop the build's whole process group, and the temporary folder goes with everything in
   it: the wheel reaches the cache only once checked, by an atomic rename. A failed build names its log.
5. ``verify_built_wheel`` judges the product (its tags fit the target; which of its shared objects
   link torch: the seam where the ABI judgement plugs in); it is stored in the wheel cache under
   its sha256, the record written, and the row becomes the built wheel with its provenance.

The machine a build runs on is ``buildmachine.py``'s; a build's subprocess, its log and its
janitor are ``buildrun.py``'s.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shlex
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, NormalizedName, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from ..atomic import atomic_write
from ..data.rules import AbiRules
from ..errors import BuildError, ResolveGpuStackError
from ..index.parse import parse_metadata
from ..index.sdist import BuildSystem, SdistError, read_build_system, uses_cuda
from ..model import Action, BuildProvenance, LockedPackage, LockPlan, SourceDist
from ..model.abi import TORCH as TORCH_LINKED
from ..model.abi import AbiVerdict
from ..model.codec import provenance_from_dict, provenance_to_dict
from ..model.cuda import CudaLabel
from ..model.source import BuildSpec
from ..net import process
from ..net.download import Downloader, DownloadProgress, FetchedWheel, WheelCache, fetch_packages, fetch_verified, fill_hashes, store_local
from ..net.wheelcache import file_sha256
from ..rules.abi import AbiPolicy, AbiTorch, judge
from ..scan.wheelscan import scan_file
from ..scan.zipmeta import ZipError
from .buildmachine import (
    BuildMachine,
    CudaToolkit,
    arch_list,
    available_memory,
    check_toolkit,
    find_cuda_toolkit,
    max_jobs,
    parse_nvcc_version,
)
from .buildrun import BuildProgress, Janitor, open_log, run_logged, sigterm_stops_builds, stop_process
from .exports import installed_torch_exports
from .install import _run_uv, _uv_args, uv_environment
from .sources import fetch_source

BUILD_SCHEMA = 1  # what goes into a build's key; a new schema builds again
DEFAULT_DEADLINE = 6 * 3600.0  # a build's deadline by default: generous (a flash-attn build for many archs takes hours)
TORCH = NormalizedName("torch")
# Variables that would put other packages (a PyPI torch in ~/.local or on PYTHONPATH) into the build.
_SCRUBBED = ("PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "VIRTUAL_ENV", "CONDA_PREFIX", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS")


# the plan of a build environment's packages: ``requirements`` (torch taken out) resolved by our
# resolver for the target, with the kept torch (kept as installed for a probed target; to install
# from its index for a declared one)
BuildRequirements = Callable[[Sequence[str]], LockPlan]


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
    deadline: float | None = DEFAULT_DEADLINE  # seconds one build may run (--build-timeout); None: no deadline

    def fetch(self, url: str, *, sha256: str | None, size: int | None, filename: str | None) -> FetchedWheel:
        """A file this context's builds need (an sdist), fetched into its cache and verified."""
        return fetch_verified(
            url, sha256=sha256, size=size, cache=self.cache, fetcher=self.fetcher, filename=filename, progress=self.downloads, offline=self.offline
        )


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
    with sigterm_stops_builds():
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
    if sdist.origin is not None:  # a source tree (--build 'NAME @ URL')
        fetched = _source_archive(pkg.name, pkg.version, sdist, ctx)
    else:
        fetched = ctx.fetch(sdist.url, sha256=sdist.sha256, size=sdist.size, filename=sdist.filename)
    inputs = build_inputs(pkg, plan, ctx, fetched.sha256)
    hit = _cached(ctx.cache, inputs)
    if hit is not None:
        return hit(pkg)
    torch = Version(inputs.torch)
    label = CudaLabel.of_torch(torch) or CudaLabel.parse(inputs.cuda)  # the plan's torch's CUDA: a PyPI torch has no label, its plan says
    warning = check_toolkit(torch, label, ctx.machine.toolkit)
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
    logs.mkdir(mode=0o700, parents=True, exist_ok=True)
    log = logs / f"{pkg.name}-{pkg.version}-{inputs.key()[:12]}.log"
    before = target_state(ctx.site_dirs)
    with tempfile.TemporaryDirectory(prefix="resolve-gpu-stack-build-") as tmp_name, Janitor(Path(tmp_name)) as janitor:
        tmp = Path(tmp_name)
        python = _build_environment(tmp, plan, ctx, requirements, log, fetched.path, system, janitor)
        if not ctx.machine.arch_list and label is not None:  # no --gpu, no GPU seen: torch's own archs
            ctx = dataclasses.replace(ctx, machine=_with_torch_archs(pkg, ctx, python, tmp, torch, fetched.path))
            command = _command(ctx.machine, sdist.origin.reference if sdist.origin is not None else sdist.filename)
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
        run_logged(
            cmd,
            env=_build_env(ctx.machine, tmp),
            log=log,
            label=f"building {pkg.name} {pkg.version}",
            progress=ctx.progress,
            append=True,
            deadline=ctx.deadline,
            janitor=janitor,
        )
        written = changed_paths(before, target_state(ctx.site_dirs))
        if written:
            raise BuildError(
                f"building {pkg.name} {pkg.version} wrote into the target environment ({', '.join(written[:5])}): the result is refused; the build log: {log}",
                hint="the target is never written by a build; remove what it wrote, and report the package's build script",
            )
        wheels = sorted(out.glob("*.whl"))
        if len(wheels) != 1:
            raise BuildError(f"building {pkg.name} {pkg.version} made {len(wheels)} wheels, not one; the build log: {log}")
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
            arch_list=ctx.machine.arch_list,  # as built: torch's own archs when no --gpu and no GPU
            python=inputs.python,
            platform=inputs.platform,
            command=command,
        )
        stored = _store(ctx.cache, wheels[0])
    _write_record(ctx.cache, inputs, stored, provenance, log, check.abi)
    return dataclasses.replace(_row(pkg, stored, provenance), abi=check.abi or pkg.abi)


def _source_archive(name: NormalizedName, version: Version, sdist: SourceDist, ctx: BuildContext) -> FetchedWheel:
    """The archive of a source tree (``--build 'NAME @ URL'``): in the wheel cache since it was
    fetched, else fetched again from its origin (git: the locked commit) and checked to be the
    same files."""
    assert sdist.origin is not None
    hit = ctx.cache.lookup(sdist.sha256 or "", sdist.filename, sdist.size) if sdist.sha256 else None
    if hit is not None:
        return hit

    origin = sdist.origin
    if origin.kind == "git" and origin.commit:
        origin = dataclasses.replace(origin, rev=origin.commit)
    # the tree's version is the row's: a dynamic tree's metadata needs no build environment again
    tree = fetch_source(BuildSpec(name=name, source=origin), ctx.cache, ctx.machine.env, lambda *_: (version, (), None))
    if sdist.sha256 and tree.sha256 != sdist.sha256:
        raise BuildError(
            f"the source {sdist.origin.reference} is not the tree recorded (its files' sha256 is {tree.sha256}, the plan's {sdist.sha256})",
            hint="the tree changed since it was locked: lock again to build the tree as it is now",
        )
    found = ctx.cache.lookup(tree.sha256, tree.filename, tree.size)
    assert found is not None
    return found


TargetState = dict[str, tuple[int, int]]  # path -> (mtime_ns, size)


def target_state(site_dirs: Sequence[str]) -> TargetState:
    """What a build must leave as it is: a probed target's site folders, each with its entries
    (a ``.pth`` or package a build script drops there shows; the folders' own times too)."""
    state: TargetState = {}
    for d in dict.fromkeys(site_dirs):
        folder = Path(d)
        try:
            st = folder.stat()
            state[str(folder)] = (st.st_mtime_ns, 0)
            for entry in os.scandir(folder):
                est = entry.stat(follow_symlinks=False)
                state[entry.path] = (est.st_mtime_ns, est.st_size)
        except OSError:
            continue
    return state


def changed_paths(before: TargetState, after: TargetState) -> list[str]:
    """The paths added, removed or changed between two ``target_state``s (sorted)."""
    return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))


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
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # importing the target's torch writes no __pycache__ into the target
    env["MAX_JOBS"] = str(machine.max_jobs)
    env["UV_CACHE_DIR"] = env.get("UV_CACHE_DIR") or str(tmp / "uv-cache")
    if machine.arch_list:
        env["TORCH_CUDA_ARCH_LIST"] = machine.arch_list
    else:
        env.pop("TORCH_CUDA_ARCH_LIST", None)
    if machine.toolkit is not None:
        env["CUDA_HOME"] = str(machine.toolkit.home)
        env["PATH"] = os.pathsep.join([str(machine.toolkit.home / "bin"), str(machine.toolkit.nvcc.parent), env.get("PATH", "")])
    if machine.stubs is not None:  # no driver (a CI build machine): -lcuda links against the toolkit's stub
        env["LIBRARY_PATH"] = os.pathsep.join(p for p in (str(machine.stubs), env.get("LIBRARY_PATH", "")) if p)
    return env


# -- the build environment -----------------------------------------------------------------------


def _build_environment(
    tmp: Path, plan: LockPlan, ctx: BuildContext, requirements: Sequence[str], log: Path, archive: Path, system: BuildSystem, janitor: Janitor
) -> str:
    """A venv under ``tmp`` with the kept torch and the build requirements; its interpreter."""
    venv = tmp / "env"
    env = _build_env(ctx.machine, tmp)
    python = ctx.python or _interpreter_for(plan.target.python)
    try:
        # --no-config: a uv.toml or [tool.uv] in the current folder (required-version, python-preference) never shapes it
        _run_uv([ctx.machine.uv, "venv", "-q", "--no-config", "--python", python, str(venv)], env, what=f"uv venv --python {python}")
    except ResolveGpuStackError as exc:
        raise BuildError(
            f"cannot make a build environment of Python {python} on this machine: {exc.message}",
            hint="a build for a declared target needs an interpreter of its Python here (uv finds it); or build with install --python PATH",
        ) from None
    interpreter = str(venv / "bin" / "python")
    if ctx.site_dirs:
        site = Path(process.run([interpreter, "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True, check=True).stdout.strip())
        (site / "_resolve_gpu_stack_target.pth").write_text("".join(f"{d}\n" for d in dict.fromkeys(ctx.site_dirs)))
    with open_log(log, "wb") as fh:
        fh.write(f"# build environment: {venv}\n# kept torch from: {', '.join(ctx.site_dirs) or 'its wheel, installed below'}\n".encode())
    installed = _install_requirements(tmp / "install", ctx, requirements, interpreter, env, log)
    # PEP 517: then what the backend itself asks for (setuptools < 70.1: wheel), resolved and installed too
    more = [r for r in _without_torch(_backend_requires(interpreter, env, archive, system, tmp, log, janitor), archive.name) if r not in requirements]
    if more and any(canonicalize_name(Requirement(r).name) not in installed for r in more):
        _install_requirements(tmp / "install-backend", ctx, [*requirements, *more], interpreter, env, log)
    _check_torch(interpreter, env, plan, ctx.site_dirs)
    return interpreter


def _install_requirements(work: Path, ctx: BuildContext, requirements: Sequence[str], interpreter: str, env: Mapping[str, str], log: Path) -> set[str]:
    """``requirements`` resolved by our resolver (with the kept torch) and installed into the build
    environment from verified wheels; the names in its plan."""
    env_plan = ctx.requirements(requirements)
    env_plan = fill_hashes(env_plan, cache=ctx.cache, fetcher=ctx.fetcher, progress=ctx.downloads, offline=ctx.offline)
    todo = [p for p in env_plan.packages if p.action is not Action.KEEP]
    with open_log(log, "ab") as fh:
        fh.write("".join(f"# {p.action.value} {p.name}=={p.version} (from {p.index})\n" for p in sorted(env_plan.packages, key=lambda p: p.name)).encode())
    if todo:
        fetched = fetch_packages(todo, cache=ctx.cache, fetcher=ctx.fetcher, progress=ctx.downloads, offline=ctx.offline)
        work.mkdir()
        _run_uv(
            _uv_args(work, uv=ctx.machine.uv, python=interpreter, todo=todo, fetched=fetched, constraints=""),
            env,
            what="uv pip install (the build requirements)",
        )
    return {p.name for p in env_plan.packages}


_BACKEND_HOOK = """
import importlib, json, os, sys, zipfile
answer, backend, hook_name, out, paths = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
sys.path[:0] = [os.path.abspath(p) for p in paths]
name, _, attr = backend.partition(":")
hook = importlib.import_module(name)
for part in filter(None, attr.split(".")):
    hook = getattr(hook, part)
if hook_name == "requires":
    get = getattr(hook, "get_requires_for_build_wheel", None)
    data = json.dumps(list(get({})) if get is not None else []).encode()
else:  # PEP 517 metadata: prepare_metadata_for_build_wheel, else the METADATA of the wheel it builds
    prepare = getattr(hook, "prepare_metadata_for_build_wheel", None)
    if prepare is not None:
        with open(os.path.join(out, prepare(out, {}), "METADATA"), "rb") as fh:
            data = fh.read()
    else:
        with zipfile.ZipFile(os.path.join(out, hook.build_wheel(out, {}))) as whl:
            data = whl.read(next(n for n in whl.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")))
with os.fdopen(answer, "wb") as fh:
    fh.write(data)
"""


def _unpacked(archive: Path, tmp: Path) -> Path:
    """The sdist ``archive`` unpacked under ``tmp`` (once): the project's folder."""
    src = tmp / "requires-src"
    if not src.is_dir():
        src.mkdir()
        try:
            with tarfile.open(archive) if archive.name.endswith((".tar.gz", ".tgz")) else zipfile.ZipFile(archive) as unpacked:
                if isinstance(unpacked, tarfile.TarFile):
                    unpacked.extractall(src, filter="data")
                else:
                    unpacked.extractall(src)
        except (tarfile.TarError, zipfile.BadZipFile, OSError) as exc:
            raise BuildError(f"{archive.name}: cannot unpack it ({exc})") from None
    tops = [p for p in src.iterdir() if p.is_dir()]
    return tops[0] if len(tops) == 1 else src


def _backend_hook(
    interpreter: str, env: Mapping[str, str], archive: Path, system: BuildSystem, tmp: Path, log: Path, janitor: Janitor, hook: str
) -> tuple[int, bytes]:
    """(exit status, answer) of a PEP 517 hook (``requires``: get_requires_for_build_wheel;
    ``metadata``: prepare_metadata_for_build_wheel) asked in the build environment, in the sdist
    unpacked under ``tmp`` (its output goes to the log; the answer on a pipe of its own)."""
    root = _unpacked(archive, tmp)
    out = tmp / f"hook-{hook}"
    out.mkdir(exist_ok=True)
    read, write = os.pipe()
    with open_log(log, "ab") as fh:
        fh.write(f"$ {'get_requires_for_build_wheel' if hook == 'requires' else 'prepare_metadata_for_build_wheel'} (PEP 517)\n".encode())
        fh.flush()
        proc = process.start(
            [interpreter, "-c", _BACKEND_HOOK, str(write), system.backend, hook, str(out), *system.backend_path],
            cwd=root,
            env=dict(env),
            stdin=process.DEVNULL,
            stdout=fh,
            stderr=fh,
            pass_fds=(write,),
            new_session=True,
        )
        os.close(write)
        janitor.watch(proc.pid)
        try:
            with os.fdopen(read, "rb") as answer:
                data = answer.read()
            code = proc.wait()
        except BaseException:
            stop_process(proc)
            raise
    return code, data


def _backend_requires(interpreter: str, env: Mapping[str, str], archive: Path, system: BuildSystem, tmp: Path, log: Path, janitor: Janitor) -> list[str]:
    """The backend's ``get_requires_for_build_wheel`` (PEP 517), asked in the build environment."""
    code, data = _backend_hook(interpreter, env, archive, system, tmp, log, janitor, "requires")
    if code != 0:
        raise BuildError(f"the build backend {system.backend} of {archive.name} failed to say what it needs (exit {code}); the build log: {log}")
    try:
        requires = json.loads(data)
    except ValueError:
        requires = None
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
        raise BuildError(f"the build backend {system.backend} of {archive.name} answered get_requires_for_build_wheel with no list of requirements")
    return requires


# -- the metadata of a tree whose metadata is dynamic ------------------------------------------------

METADATA_SCHEMA = 1


def _metadata_record(cache: WheelCache, digest: str, plan: LockPlan) -> Path:
    """Where the metadata a build backend gave for the archive ``digest`` is kept: by the digest,
    the kept torch of ``plan``, its Python and platform."""
    torch = plan.torch
    assert torch is not None
    key_text = json.dumps(
        {"schema": METADATA_SCHEMA, "sha256": digest, "torch": str(torch.version), "python": plan.target.python, "platform": plan.target.platform},
        sort_keys=True,
    )
    return cache.root / "builds" / "metadata" / f"{hashlib.sha256(key_text.encode()).hexdigest()}.json"


def cached_source_metadata(cache: WheelCache, digest: str, plan: LockPlan) -> tuple[Version, tuple[str, ...], str | None] | None:
    """What ``source_metadata`` answered before for the archive ``digest`` and ``plan``'s kept torch,
    Python and platform (None: never asked, or its record is unreadable); no build environment."""
    try:
        raw = json.loads(_metadata_record(cache, digest, plan).read_text())
        return Version(str(raw["version"])), tuple(str(r) for r in raw["requires-dist"]), raw.get("requires-python")
    except (OSError, ValueError, KeyError, TypeError):
        return None


def source_metadata(name: NormalizedName, archive: Path, digest: str, plan: LockPlan, ctx: BuildContext) -> tuple[Version, tuple[str, ...], str | None]:
    """(version, Requires-Dist, Requires-Python) of the source tree ``archive`` (sha256 ``digest``)
    whose metadata is dynamic (setup.py computing its version, ``[project] dynamic``): its build
    backend's ``prepare_metadata_for_build_wheel`` (PEP 517; the METADATA of the wheel it builds
    when it has no such hook), asked in a build environment made as for its build (the kept torch
    of ``plan``, the backend's requirements). Kept in ``<wheel cache>/builds/metadata/`` by the
    tree's digest, the kept torch, Python and platform: asked once."""
    torch = plan.torch
    assert torch is not None
    known = cached_source_metadata(ctx.cache, digest, plan)
    if known is not None:
        return known
    record = _metadata_record(ctx.cache, digest, plan)
    key = record.stem
    try:
        with archive.open("rb") as fh:
            system = read_build_system(fh, archive.name)
    except SdistError as exc:
        raise BuildError(f"--build {name}: {exc.message}") from None
    requirements = _without_torch(system.requires, archive.name)
    logs = ctx.cache.root / "builds" / "logs"
    logs.mkdir(mode=0o700, parents=True, exist_ok=True)
    log = logs / f"{name}-metadata-{key[:12]}.log"
    if ctx.say is not None:
        ctx.say(f"{name}: its metadata is dynamic: asking its build backend ({system.backend}) in a build environment with torch {torch.version}")
    before = target_state(ctx.site_dirs)
    with tempfile.TemporaryDirectory(prefix="resolve-gpu-stack-build-") as tmp_name, Janitor(Path(tmp_name)) as janitor:
        tmp = Path(tmp_name)
        python = _build_environment(tmp, plan, ctx, requirements, log, archive, system, janitor)
        code, data = _backend_hook(python, _build_env(ctx.machine, tmp), archive, system, tmp, log, janitor, "metadata")
    written = changed_paths(before, target_state(ctx.site_dirs))
    if written:
        raise BuildError(
            f"asking {name}'s build backend for its metadata wrote into the target environment ({', '.join(written[:5])}); the log: {log}",
            hint="the target is never written by a build; remove what it wrote, and report the package's build script",
        )
    if code != 0 or not data:
        raise BuildError(
            f"--build {name}: its build backend {system.backend} failed to give its metadata (exit {code}); the log: {log}",
            hint="the tree's setup.py must run in a build environment with the kept torch and its [build-system] requires",
        )

    try:
        meta = parse_metadata(data, source=f"{name}'s prepare_metadata_for_build_wheel")
    except ResolveGpuStackError as exc:
        raise BuildError(f"--build {name}: the metadata its build backend gave does not parse ({exc.message}); the log: {log}") from None
    if meta.name != name:
        raise BuildError(f"--build {name}: the tree is the project {meta.name!r}, not {name!r}")
    answer = (meta.version, tuple(meta.requires_dist), meta.requires_python)
    record_data = {"name": name, "version": str(meta.version), "requires-dist": list(meta.requires_dist), "requires-python": meta.requires_python}
    atomic_write(record, json.dumps(record_data, sort_keys=True), make_parents=True)
    return answer


_SM = re.compile(r"sm_(\d+)(\d)([af]?)$")
_ARCH_TOKEN = re.compile(r"\b(?:sm|compute)_\d+[af]?\b")


def arch_list_of(torch_archs: Sequence[str]) -> str:
    """TORCH_CUDA_ARCH_LIST of ``torch.cuda.get_arch_list()`` (``["sm_90", "sm_120", "compute_120"]``
    -> ``"9.0;12.0"``): the real GPU archs, the PTX-only entries left out."""
    caps = [f"{m.group(1)}.{m.group(2)}{m.group(3)}" for a in torch_archs if (m := _SM.match(a.strip()))]
    return arch_list(caps)


def archs_of_flags(flags: str | None) -> list[str]:
    """The archs in ``torch._C._cuda_getArchFlags()``'s text, in either spelling torch has given it:
    a space-separated list (``"sm_80 sm_90 compute_90"``) or nvcc's own flags (``"-gencode
    arch=compute_90a,code=sm_90a ..."``, where each ``code=`` names what is compiled)."""
    if not flags:
        return []
    codes = re.findall(r"code=\[?([^\s\]]+)", flags)
    text = " ".join(c.replace(",", " ") for c in codes) if codes else flags
    return list(dict.fromkeys(_ARCH_TOKEN.findall(text)))


# The archs the build environment's torch was compiled for, read without a GPU: torch.cuda.get_arch_list()
# gives [] where no GPU or driver is (torch < 2.10 asks is_available()), torch._C._cuda_getArchFlags() does not.
_TORCH_ARCHS = """
import json, torch
archs, source = [], "torch.cuda.get_arch_list()"
try:
    archs = [str(a) for a in torch.cuda.get_arch_list()]
except Exception:
    pass
if not archs:
    get = getattr(torch._C, "_cuda_getArchFlags", None)
    flags = get() if get is not None else None
    archs, source = ([str(flags)] if flags else []), "torch._C._cuda_getArchFlags()"
print(json.dumps({"archs": archs, "source": source}))
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class TorchArchs:
    """The archs a torch was compiled for (``arch_list``: TORCH_CUDA_ARCH_LIST; "" when it cannot
    say), where they were read (``source``), and the PTX-only entries left out (``ptx``)."""

    arch_list: str
    source: str
    ptx: tuple[str, ...] = ()
    why: str = ""  # why none could be read


def read_torch_archs(interpreter: str, env: Mapping[str, str]) -> TorchArchs:
    """The archs the kept torch in ``interpreter``'s environment was compiled for, read without a
    GPU or a driver (``_TORCH_ARCHS``); never raises."""
    proc = process.run([interpreter, "-I", "-B", "-c", _TORCH_ARCHS], text=True, env={**env, "CUDA_VISIBLE_DEVICES": ""})
    try:
        raw = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 and proc.stdout.strip() else {}
        entries = [str(a) for a in raw.get("archs", [])]
        source = str(raw.get("source", ""))
    except (ValueError, TypeError, AttributeError, IndexError):
        entries, source = [], ""
    archs = archs_of_flags(" ".join(entries))
    found = arch_list_of(archs)
    why = ""
    if not found:
        why = (
            proc.stderr.strip().splitlines()[-1]
            if proc.returncode != 0 and proc.stderr.strip()
            else "it lists none (a CPU torch, or one compiled for PTX only)"
        )
    return TorchArchs(arch_list=found, source=source, ptx=tuple(a for a in archs if a.startswith("compute_")), why=why)


def torch_arch_list(interpreter: str, env: Mapping[str, str], torch: Version) -> str:
    """The archs the build environment's (kept) torch was built for, as TORCH_CUDA_ARCH_LIST; a
    ``BuildError`` naming ``--gpu`` when it cannot say (torch's own default would ask for a GPU
    and fail inside torch on a machine without one)."""
    got = read_torch_archs(interpreter, env)
    if not got.arch_list:
        raise no_archs_error(torch, got.why)
    return got.arch_list


def _with_torch_archs(pkg: LockedPackage, ctx: BuildContext, python: str, tmp: Path, torch: Version, archive: Path) -> BuildMachine:
    """The build machine with the archs the kept torch was compiled for (no --gpu, no GPU seen),
    said; a CPU-only extension (no CUDA source in its archive) needs none; a CUDA one whose torch
    cannot say is refused naming --gpu, before torch's own default fails inside torch."""
    got = read_torch_archs(python, _build_env(ctx.machine, tmp))
    if got.arch_list:
        if ctx.say is not None:
            ptx = f"; PTX-only {', '.join(got.ptx)} left out" if got.ptx else ""
            ctx.say(
                f"note: {pkg.name} {pkg.version}: no --gpu and no GPU seen: built for the archs torch {torch} was built for "
                f"({got.arch_list}, from {got.source}{ptx}); --gpu SM builds for yours only"
            )
        return dataclasses.replace(ctx.machine, arch_list=got.arch_list)
    try:
        with archive.open("rb") as fh:
            cuda = uses_cuda(fh, archive.name)
    except SdistError:
        cuda = True
    if cuda:
        raise no_archs_error(torch, got.why)
    if ctx.say is not None:
        ctx.say(f"note: {pkg.name} {pkg.version}: no CUDA source in it (no .cu file, no CUDAExtension): built with no GPU arch list")
    return ctx.machine


def no_archs_error(torch: Version, why: str) -> BuildError:
    return BuildError(
        f"no --gpu and no GPU on this machine, and torch {torch} cannot say which GPU archs it was built for ({why})",
        hint="say which GPUs the build is for: --gpu sm90 (repeatable; e.g. --gpu sm90 --gpu sm120); nothing was built",
    )


def _interpreter_for(python: str) -> str:
    """The interpreter a declared target's build venv is made from: the one running this tool when
    it is that Python, else the version for uv to find on this machine."""
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    return sys.executable if python in (here, f"{here}.{sys.version_info.micro}") else python


def _torch_site(interpreter: str, env: Mapping[str, str]) -> Path | None:
    """The folder that holds the build environment's ``torch`` package (its libraries are there)."""
    code = "import importlib.util, os; s = importlib.util.find_spec('torch'); print(os.path.dirname(os.path.dirname(s.origin)) if s and s.origin else '')"
    proc = process.run([interpreter, "-I", "-c", code], text=True, env=dict(env))
    where = proc.stdout.strip()
    return Path(where) if proc.returncode == 0 and where else None


_TORCH_CHECK = """
import importlib.metadata as m, importlib.util as u, json, os
spec = u.find_spec("torch")
dist = m.distribution("torch")
print(json.dumps({"version": dist.version, "module": os.path.realpath(spec.origin) if spec and spec.origin else None,
                  "dist_module": os.path.realpath(dist.locate_file("torch/__init__.py"))}))
"""


def _check_torch(interpreter: str, env: Mapping[str, str], plan: LockPlan, site_dirs: Sequence[str]) -> None:
    """The build environment's ``import torch`` must be the kept torch and nothing else: the module
    the build imports (found as ``import`` finds it, not read from metadata) is the kept torch's
    own file (in the target's site folders for a probed target), and its metadata is that version."""
    want = plan.torch.version if plan.torch is not None else None
    proc = process.run([interpreter, "-I", "-B", "-c", _TORCH_CHECK], text=True, env=dict(env))
    try:
        found = json.loads(proc.stdout) if proc.returncode == 0 else {}
    except ValueError:
        found = {}
    got, module = found.get("version"), found.get("module")
    problem = None
    if want is None or not got or Version(got) != want:
        problem = f"the build environment's torch is {got or 'missing'}, not the kept torch {want}"
    elif module is None or module != found.get("dist_module"):
        problem = f"the build environment's import torch finds {module or 'nothing'}, not the kept torch's files ({found.get('dist_module')})"
    elif site_dirs and not any(Path(module).is_relative_to(os.path.realpath(d)) for d in site_dirs):
        problem = f"the build environment's import torch finds {module}, outside the target's site folders ({', '.join(site_dirs)})"
    if problem is not None:
        raise BuildError(
            problem,
            hint="nothing was built: a build requirement that ships a torch package of its own shadows the kept torch; report it with the plan (--format json)",
        )


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
    "source_metadata",
    "run_logged",
    "verify_built_wheel",
]
