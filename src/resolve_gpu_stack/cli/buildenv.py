"""The build machine and the build environment of ``--build`` from the command line: the machine
(uv, GPUs' archs, jobs, CUDA toolkit), the build environment's requirements resolved by our
resolver, the progress line, and the ``BuildContext`` of them (``build_context``), for the builds of
``install`` and ``lock`` (``building.py``) and for the metadata of a source tree whose metadata is
dynamic, asked before the resolve (``sources.py``). Imports no module that imports ``common``: the
resolve's edge (``common``) reaches it through ``sources.py``."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from ..env.build import DEFAULT_DEADLINE, BuildContext
from ..env.buildmachine import BuildMachine, arch_list, available_memory, find_cuda_toolkit, has_cuda_driver, max_jobs
from ..env.install import find_uv as default_uv
from ..errors import UsageError, printable
from ..model.cuda import CudaLabel
from ..model.declared import declared_target
from ..model.gpu import GpuArch
from ..model.request import FlashInferChoice, ResolveRequest, TorchChoice, requested
from . import options as O

if TYPE_CHECKING:
    from ..data.definitions import Definitions
    from ..env.build import BuildRequirements
    from ..env.probe import Environment
    from ..model import LockPlan
    from ..net.download import DownloadProgress
    from .assemble import ResolveParts, Session
    from .options import ResolveOptions


def find_uv(uv: str | None, env: Mapping[str, str]) -> str:
    """``--uv PATH`` (checked now, before anything is downloaded), or the default uv when None (also
    for a command without ``--uv``)."""
    if uv is None:
        return default_uv(env)
    found = shutil.which(uv, path=env.get("PATH"))
    if found is None:
        raise UsageError(f"--uv {uv}: not an executable", hint="pass the path of the uv executable, or leave --uv out to use the uv installed with this tool")
    return found


@contextlib.contextmanager
def build_context(
    options: ResolveOptions,
    env: Mapping[str, str],
    session: Session,
    plan: LockPlan,
    defs: Definitions,
    *,
    uv: str | None = None,
    environment: Environment | None = None,
    downloads: DownloadProgress | None = None,
) -> Iterator[BuildContext]:
    """The ``BuildContext`` of ``plan``'s builds through the command's ``session`` (its wheel cache,
    its download fetcher, its resolve parts for the build requirements, open for the block): ``uv``: ``--uv``
    (None: the default uv); ``environment``: the probed target of ``install`` (its own torch is used,
    through a ``.pth``), None for a declared target (the kept torch's wheel is installed into the
    build environment); ``downloads``: the progress of its downloads (None: not shown)."""
    machine = build_machine(uv, env, plan)
    tags = environment.target.tags if environment is not None else declared_target(plan.target.python, plan.target.platform).tags
    quiet = options.output.quiet
    with contextlib.ExitStack() as closing:
        yield BuildContext(
            cache=session.wheel_cache(),
            machine=machine,
            requirements=build_requirements(options, session, defs, plan, environment, closing),
            target_tags=tags,
            abi=defs.abi,
            site_dirs=(environment.purelib, environment.platlib) if environment is not None else (),
            python=environment.executable if environment is not None else None,
            fetcher=session.download_fetcher(defs),
            offline=options.sources.downloads_off,
            downloads=downloads,
            progress=ProgressLine(quiet=quiet),
            say=None if quiet else O.say,
            deadline=options.typed.build_timeout or DEFAULT_DEADLINE,
        )


def build_machine(uv: str | None, env: Mapping[str, str], plan: LockPlan) -> BuildMachine:
    """What this machine brings: uv (``--uv``, else the default), TORCH_CUDA_ARCH_LIST from the plan's GPUs (``--gpu``, or what
    nvidia-smi lists for a probed target), MAX_JOBS (the user's, else cores and memory), the CUDA toolkit."""
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


def build_requirements(
    options: ResolveOptions, session: Session, defs: Definitions, plan: LockPlan, environment: Environment | None, closing: contextlib.ExitStack
) -> BuildRequirements:
    """The build environment's plan: the sdist's build requirements (torch taken out) resolved by
    our resolver for the target, FlashInfer left out, with the kept torch: kept as installed on a
    probed target, asked for exactly (``--torch VERSION``, from the PyTorch index: routing never
    reads a PyPI torch) for a declared one. One set of resolver parts for every build of the
    command, made when the first build needs them (a build found in the wheel cache resolves
    nothing) and closed with ``closing``."""
    made: list[ResolveParts] = []  # at most one

    def resolve_requirements(requirements: Sequence[str]) -> LockPlan:
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
        if not made:  # from the command's session (as common.make_parts)
            parts = session.resolve_parts(defs, snapshot=options.sources.snapshot, live_fallback=options.sources.live_fallback)
            made.append(closing.enter_context(parts))
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
