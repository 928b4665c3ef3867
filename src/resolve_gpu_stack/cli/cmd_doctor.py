"""`resolve-gpu-stack doctor`: check an installed torch + FlashInfer stack, offline.

The edge of ``doctor``: runs the target interpreter (inspection, ``import flashinfer``) and
nvidia-smi, then hands the facts to the pure checks in ``doctor.py`` and prints the verdicts.
Exit 0 when no check failed (warn and skip are not failures), 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TextIO

from ..errors import UsageError
from . import common
from . import settings as S

if TYPE_CHECKING:
    from ..env.doctor import Check, GpuQuery, ImportResult

_SENTINEL = "RESOLVE-GPU-STACK-DOCTOR:"
_IMPORT = f"import flashinfer, sys; sys.stdout.write('\\n{_SENTINEL}' + str(getattr(flashinfer, '__version__', '?')) + '\\n')"
_SMI_QUERY = ("--query-gpu=name,compute_cap", "--format=csv,noheader")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "doctor",
        help="verify the installed torch + FlashInfer stack (versions, CUDA labels, GPU kernels, import)",
        description=(
            "Verify a target environment past 'it imports': torch's CUDA build, FlashInfer's components "
            "aligned (cubin == python, jit-cache == <python>+cuNNN with torch's CUDA major), apache-tvm-ffi "
            "in range, no torch-ABI-bound package built for another torch, `import flashinfer` with "
            "FlashInfer's own version checks on, and jit-cache kernels for every GPU nvidia-smi lists. "
            "Nothing is downloaded. Exit 0 when no check failed, 1 otherwise."
        ),
    )
    S.add_flags(p, ["python"], help={"python": "the interpreter to check (default: the active virtual environment, else python3)"})
    p.add_argument("--nvidia-smi", dest="nvidia_smi", metavar="PATH", help="the nvidia-smi to run (default: the one on PATH; none: the GPU check is skipped)")
    p.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS", help="limit for `import flashinfer` in the target (default 120)")
    common.add_output_flags(p)


def run(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    from ..data.definitions import load_definitions
    from ..env.doctor import needs_import, report_json, run_checks
    from ..env.probe import default_interpreter, inspect_environment, parse_python_flag
    from .render import print_json

    if args.python is not None:
        kind, python = parse_python_flag(args.python, search_path=env.get("PATH"))
        if kind == "version":
            raise UsageError(f"doctor checks a real environment; --python {args.python} is a version",
                             hint="pass the interpreter's path, e.g. --python .venv/bin/python")
    else:
        python = default_interpreter(env)
    # absolute now: the import check runs in an empty temporary folder, where a relative
    # `venv/bin/python` names nothing (abspath, not resolve: a venv's python is a symlink out of it)
    python = os.path.abspath(python)
    if args.timeout <= 0:
        raise UsageError(f"--timeout {args.timeout:g}: must be a positive number of seconds")
    environment = inspect_environment(python)
    defs = load_definitions()
    import_result = probe_import(python, env, args.timeout) if needs_import(environment, defs) else None
    checks = run_checks(environment, defs, import_result=import_result, gpus=query_gpus(args.nvidia_smi, env))
    report = report_json(python, checks)
    if common.output_format(args) == "json":
        print_json(report, sys.stdout)
    else:
        print_table(python, checks, sys.stdout)
    return 0 if report["ok"] else 1


def probe_import(python: str, env: Mapping[str, str], timeout: float) -> ImportResult:
    """``import flashinfer`` in the target, with FlashInfer's version checks on.

    FLASHINFER_DISABLE_VERSION_CHECK is removed (any non-empty value disables the checks). The rest
    of the environment (PYTHONPATH, user site) is kept: this imports what the user's programs would.
    The working directory is an empty folder, so a source checkout in the cwd cannot shadow the install.
    """
    from ..env.doctor import DISABLE_VERSION_CHECK, ImportResult

    child_env = {k: v for k, v in env.items() if k != DISABLE_VERSION_CHECK}
    bypass = bool(env.get(DISABLE_VERSION_CHECK))
    with tempfile.TemporaryDirectory(prefix="rgs-doctor-") as cwd:
        try:
            proc = subprocess.run([python, "-c", _IMPORT], capture_output=True, text=True, timeout=timeout,
                                  env=child_env, cwd=cwd, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return ImportResult(ok=False, error=f"did not finish within {timeout:g}s", env_bypass=bypass)
        except OSError as exc:
            return ImportResult(ok=False, error=f"cannot run {python}: {exc.strerror or exc}", env_bypass=bypass)
    found = [line[len(_SENTINEL):] for line in proc.stdout.splitlines() if line.startswith(_SENTINEL)]
    if proc.returncode == 0 and found:
        return ImportResult(ok=True, version=found[-1].strip(), env_bypass=bypass)
    lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
    error = lines[-1] if lines else f"exit status {proc.returncode}, no error output"
    return ImportResult(ok=False, error=error[:500], env_bypass=bypass)


def query_gpus(explicit: str | None, env: Mapping[str, str], timeout: float = 30) -> GpuQuery | None:
    """The GPUs nvidia-smi lists; None when there is no nvidia-smi (the GPU check is then skipped)."""
    from ..env.doctor import GpuQuery, parse_nvidia_smi

    tool = explicit if explicit is not None else shutil.which("nvidia-smi", path=env.get("PATH"))
    if tool is None:
        return None
    if not os.path.isfile(tool):
        return GpuQuery(tool=tool, found=False)
    try:
        proc = subprocess.run([tool, *_SMI_QUERY], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return GpuQuery(tool=tool, error=f"no answer within {timeout:g}s")
    except OSError as exc:
        return GpuQuery(tool=tool, error=f"cannot run it: {exc.strerror or exc}")
    if proc.returncode != 0:
        text = (proc.stdout + "\n" + proc.stderr).strip().splitlines()
        return GpuQuery(tool=tool, error=(text[-1] if text else f"exit status {proc.returncode}")[:300])
    try:
        return GpuQuery(tool=tool, gpus=parse_nvidia_smi(proc.stdout))
    except ValueError as exc:
        return GpuQuery(tool=tool, error=str(exc))


_STYLE = {"pass": "green", "warn": "yellow", "skip": "dim", "fail": "bold red"}


def print_table(python: str, checks: Sequence[Check], out: TextIO) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from ..env.doctor import doctor_ok

    console = Console(file=out, highlight=False)
    table = Table(title=f"doctor: {python}", title_justify="left")
    table.add_column("check", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("message")
    for c in checks:
        style = _STYLE.get(c.status, "")
        table.add_row(c.name, f"[{style}]{c.status}[/]", escape(c.message))
    console.print(table)
    counts = {s: sum(1 for c in checks if c.status == s) for s in ("pass", "warn", "skip", "fail")}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    verdict = "[green]ok[/]" if doctor_ok(checks) else "[bold red]FAILED[/]"
    console.print(f"{verdict}: {summary}")
