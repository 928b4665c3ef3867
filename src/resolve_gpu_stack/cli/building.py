"""``--build NAME`` from the command line: a plan's build rows built, and what each needs said, for
``install`` and ``lock`` (the build machine, the build environment's requirements and the progress
line: ``buildenv.py``; the build itself: ``env/build.py``). Imported only when a plan has a build row."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..env.build import build_plan, pending, read_torch_archs
from ..env.buildmachine import MEMORY_PER_JOB, available_memory
from ..rules.invariants import plan_torch_cuda
from .buildenv import build_context, build_machine
from .downloads import download_progress

if TYPE_CHECKING:
    from ..data.definitions import Definitions
    from ..env.probe import Environment
    from ..model import LockPlan
    from .assemble import Session
    from .options import ResolveOptions


def build_plan_of(
    options: ResolveOptions,
    env: Mapping[str, str],
    session: Session,
    plan: LockPlan,
    defs: Definitions,
    *,
    uv: str | None = None,
    environment: Environment | None = None,
) -> LockPlan:
    """``plan`` with its build rows built (or found in the wheel cache). ``uv``: ``--uv`` (None: the
    default uv). ``environment``: the probed target of ``install`` (its own torch is used, through a
    ``.pth``); None for a declared target (``lock``: the kept torch's wheel is installed into the
    build environment)."""
    if not pending(plan):
        return plan
    with (
        download_progress(options.output) as downloads,
        build_context(options, env, session, plan, defs, uv=uv, environment=environment, downloads=downloads) as ctx,
    ):
        return build_plan(plan, ctx)


def build_needs(uv: str | None, env: Mapping[str, str], plan: LockPlan, *, python: str | None = None) -> list[str]:
    """What each build row of ``plan`` needs, in words (the dry run says it before anything is
    built): the CUDA toolkit of torch's major (and which was found), the GPU archs (with neither
    ``--gpu`` nor a GPU: those the kept torch in ``python``'s environment was compiled for, read
    without a GPU), MAX_JOBS and the memory those jobs take, link stubs on a machine without a driver."""
    rows = pending(plan)
    if not rows or plan.torch is None:
        return []
    machine = build_machine(uv, env, plan)
    label = plan_torch_cuda(plan)  # a PyPI torch has no label: its plan's CUDA
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
        elif machine.stubless:
            cuda += ", no driver here and no libcuda stub in the toolkit (lib64/stubs, lib/stubs, targets/*/lib/stubs): an extension that links -lcuda will not link"
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

    got = read_torch_archs(python, {k: v for k, v in env.items() if k not in ("PYTHONPATH", "PYTHONHOME")})
    if not got.arch_list:
        return f"none: torch {plan.torch.version} cannot say which archs it was built for ({got.why}); a CUDA extension needs --gpu SM, a CPU-only one none"
    ptx = f"; PTX-only {', '.join(got.ptx)} left out" if got.ptx else ""
    return f"{got.arch_list}, the archs torch {plan.torch.version} was built for (read from {got.source}{ptx}; no --gpu, no GPU seen)"
