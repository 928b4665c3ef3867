"""``--build NAME`` from the command line: the build machine (GPUs, jobs, CUDA toolkit), the build
environment's requirements resolved by our resolver, and the progress line, for ``install`` and
``lock`` (the build itself: ``env/build.py``). Imported only when a plan has a build row."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from ..errors import printable
from . import common
from . import options as O
from . import settings as S

if TYPE_CHECKING:
    from ..data.definitions import Definitions
    from ..env.build import BuildContext, BuildRequirements
    from ..env.buildmachine import BuildMachine
    from ..env.probe import Environment
    from ..model import LockPlan
    from .assemble import ResolveParts
    from .options import ResolveOptions


def build_plan_of(
    options: ResolveOptions, env: Mapping[str, str], plan: LockPlan, defs: Definitions, *, uv: str | None = None, environment: Environment | None = None
) -> LockPlan:
    """``plan`` with its build rows built (or found in the wheel cache). ``uv``: ``--uv`` (None: the
    default uv). ``environment``: the probed target of ``install`` (its own torch is used, through a
    ``.pth``); None for a declared target (``lock``: the kept torch's wheel is installed into the
    build environment)."""
    from ..env.build import build_plan, pending

    if not pending(plan):
        return plan
    with build_context(options, env, plan, defs, uv=uv, environment=environment) as ctx:
        return build_plan(plan, ctx)


@contextlib.contextmanager
def build_context(
    options: ResolveOptions, env: Mapping[str, str], plan: LockPlan, defs: Definitions, *, uv: str | None = None, environment: Environment | None = None
) -> Iterator[BuildContext]:
    """The ``BuildContext`` of ``plan``'s builds (see ``build_plan_of``), its fetchers open for the block."""
    from ..env.build import DEFAULT_DEADLINE, BuildContext
    from ..model.declared import declared_target
    from .downloads import download_fetcher, download_progress, wheel_cache

    machine = build_machine(uv, env, plan)
    tags = environment.target.tags if environment is not None else declared_target(plan.target.python, plan.target.platform).tags
    quiet = options.output.quiet
    with download_fetcher(options.network, defs) as fetcher, download_progress(options.output) as downloads, contextlib.ExitStack() as closing:
        yield BuildContext(
            cache=wheel_cache(options.network),
            machine=machine,
            requirements=build_requirements(options, defs, plan, environment, closing),
            target_tags=tags,
            abi=defs.abi,
            site_dirs=(environment.purelib, environment.platlib) if environment is not None else (),
            python=environment.executable if environment is not None else None,
            fetcher=fetcher,
            offline=options.sources.downloads_off,
            downloads=downloads,
            progress=ProgressLine(quiet=quiet),
            say=None if quiet else O.say,
            deadline=S.parse({"build_timeout": options.typed.raw_of("build_timeout")})["build_timeout"] or DEFAULT_DEADLINE,
        )


def build_machine(uv: str | None, env: Mapping[str, str], plan: LockPlan) -> BuildMachine:
    """What this machine brings: uv (``--uv``, else the default), TORCH_CUDA_ARCH_LIST from the plan's GPUs (``--gpu``, or what
    nvidia-smi lists for a probed target), MAX_JOBS (the user's, else cores and memory), the CUDA toolkit."""
    from ..env.buildmachine import BuildMachine, arch_list, available_memory, find_cuda_toolkit, has_cuda_driver, max_jobs
    from ..model.gpu import GpuArch
    from .downloads import find_uv

    gpus = plan.inputs.get("gpus") or []
    caps = [GpuArch.parse(str(g)).capability for g in gpus] if isinstance(gpus, (list, tuple)) else []
    jobs = env.get("MAX_JOBS", "")
    return BuildMachine(
        uv=find_uv(uv, env),
        arch_list=arch_list(caps),
        max_jobs=int(jobs) if jobs.isdigit() and int(jobs) > 0 else max_jobs(os.cpu_count() or 1, available_memory()),
        toolkit=find_cuda_toolkit(env),
        env=env,
        driver=has_cuda_driver(),
    )


def build_needs(uv: str | None, env: Mapping[str, str], plan: LockPlan, *, python: str | None = None) -> list[str]:
    """What each build row of ``plan`` needs, in words (the dry run says it before anything is
    built): the CUDA toolkit of torch's major (and which was found), the GPU archs (with neither
    ``--gpu`` nor a GPU: those the kept torch in ``python``'s environment was compiled for, read
    without a GPU), MAX_JOBS and the memory those jobs take, link stubs on a machine without a driver."""
    from ..env.build import pending
    from ..env.buildmachine import MEMORY_PER_JOB, available_memory
    from ..model.cuda import CudaLabel

    rows = pending(plan)
    if not rows or plan.torch is None:
        return []
    machine = build_machine(uv, env, plan)
    label = CudaLabel.of_torch(plan.torch.version)
    toolkit = machine.toolkit
    if label is None:
        cuda = "no CUDA toolkit (a CPU torch)"
    elif toolkit is None:
        cuda = f"the CUDA {label.major} toolkit (none found: set CUDA_HOME, or put nvcc on PATH)"
    else:
        state = "found" if toolkit.major == label.major else f"but {toolkit.version} was found: refused"
        cuda = f"the CUDA {label.major} toolkit ({state}: {toolkit.version} at {toolkit.home})"
        if machine.stubs is not None:
            cuda += f", no driver here: libcuda from {machine.stubs}"
    archs = machine.arch_list or _torch_archs_said(python, env, plan)
    memory = available_memory()
    gib = 2**30
    jobs = f"MAX_JOBS={machine.max_jobs} (about {machine.max_jobs * MEMORY_PER_JOB // gib} GiB of memory"
    jobs += f"; {memory / gib:.0f} GiB available now)" if memory is not None else ")"
    return [f"{p.name} {p.version}: a build needs {cuda}, TORCH_CUDA_ARCH_LIST {archs}, {jobs}" for p in rows]


def _torch_archs_said(python: str | None, env: Mapping[str, str], plan: LockPlan) -> str:
    """The arch list a build will use with neither ``--gpu`` nor a GPU, in words: the kept torch's
    own (read from the target's torch when the target is here), or that a CUDA build needs --gpu."""
    said = "the archs the kept torch was built for (no --gpu, no GPU seen)"
    if python is None or plan.torch is None:
        return said
    from ..env.build import read_torch_archs

    got = read_torch_archs(python, {k: v for k, v in env.items() if k not in ("PYTHONPATH", "PYTHONHOME")})
    if not got.arch_list:
        return f"none: torch {plan.torch.version} cannot say which archs it was built for ({got.why}); a CUDA extension needs --gpu SM, a CPU-only one none"
    ptx = f"; PTX-only {', '.join(got.ptx)} left out" if got.ptx else ""
    return f"{got.arch_list}, the archs torch {plan.torch.version} was built for (read from {got.source}{ptx}; no --gpu, no GPU seen)"


def build_requirements(
    options: ResolveOptions, defs: Definitions, plan: LockPlan, environment: Environment | None, closing: contextlib.ExitStack
) -> BuildRequirements:
    """The build environment's plan: the sdist's build requirements (torch taken out) resolved by
    our resolver for the target, FlashInfer left out, with the kept torch: kept as installed on a
    probed target, asked for exactly (``--torch VERSION``, from the PyTorch index: routing never
    reads a PyPI torch) for a declared one. One set of resolver parts for every build of the
    command, made when the first build needs them (a build found in the wheel cache resolves
    nothing) and closed with ``closing``."""
    made: list[ResolveParts] = []  # at most one

    def resolve_requirements(requirements: Sequence[str]) -> LockPlan:
        from ..model.cuda import CudaLabel
        from ..model.declared import declared_target
        from ..model.request import FlashInferChoice, ResolveRequest, TorchChoice, requested

        torch = plan.torch
        assert torch is not None
        if environment is not None:
            # as a PEP 517 frontend makes it: nothing installed but the kept torch (a stock venv's
            # setuptools 65.5 must not be kept over the index's newer one)
            kept = {n: v for n, v in environment.target.installed.items() if n == "torch"}
            target = dataclasses.replace(
                environment.target, installed=kept, installed_at={n: w for n, w in environment.target.installed_at.items() if n in kept}
            )
            requires = {n: tuple(d.requires_dist) for n, d in environment.distributions.items() if n in kept}
            choice = TorchChoice.parse("installed")
        else:
            target, requires = declared_target(plan.target.python, plan.target.platform), {}
            choice = TorchChoice.parse(str(torch.version))
        request = ResolveRequest(
            target=target,
            installed_requires=requires,
            torch=choice,
            cuda=CudaLabel.parse(plan.target.cuda),
            flashinfer=FlashInferChoice.parse("none"),
            with_=requested(tuple(requirements), "--with"),
        )
        if not made:
            made.append(closing.enter_context(common.make_parts(options.network, options.sources, defs)))
        return made[0].resolve(request)

    return resolve_requirements


class ProgressLine:
    """A build's progress: one line kept in place on a terminal (elapsed time, last line of the
    build's output), only the closing line otherwise; nothing with ``-q``."""

    def __init__(self, *, quiet: bool) -> None:
        self.quiet = quiet
        self.tty = sys.stderr.isatty()

    def __call__(self, line: str, *, final: bool = False) -> None:
        if self.quiet:
            return
        line = printable(line)  # a build's output: its escape sequences never reach the terminal raw
        if self.tty:
            sys.stderr.write("\r\x1b[K" + line[: os.get_terminal_size(sys.stderr.fileno()).columns - 1] + ("\n" if final else ""))
            sys.stderr.flush()
        elif final:
            O.say(line)
