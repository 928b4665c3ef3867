"""`resolve-gpu-stack doctor`: check an installed torch + FlashInfer stack, offline.

The edge of ``doctor``: runs the target interpreter (inspection, ``import flashinfer``) and
nvidia-smi, then hands the facts to the pure checks in ``doctor.py`` and prints the verdicts.
Exit 0 when no check failed (warn and skip are not failures), 1 otherwise; 5 when nothing failed
but this host has no NVIDIA driver and a package that needs it was judged from its symbols only.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from packaging.utils import canonicalize_name
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..data.definitions import load_definitions
from ..env.abi_imports import import_packages, static_verdicts, torch_abi_packages
from ..env.buildmachine import has_cuda_driver
from ..env.doctor import DISABLE_VERSION_CHECK, NO_DRIVER_EXIT, ImportResult, doctor_ok, driverless, needs_import, report_json, run_checks
from ..env.gpu import query_nvidia_smi
from ..env.probe import default_interpreter, inspect_environment, locate_interpreter
from ..errors import UsageError
from ..model.declared import PythonVersion
from ..net import process
from ..pycache import bytecode_folder
from . import common, render
from . import options as O
from . import settings as S

if TYPE_CHECKING:
    from ..data.definitions import Definitions
    from ..env.doctor import Check, GpuQuery
    from ..env.probe import Environment
    from .assemble import Session

_SENTINEL = "RESOLVE-GPU-STACK-DOCTOR:"
_API_SENTINEL = "RESOLVE-GPU-STACK-DOCTOR-API:"
_IMPORT = f"""\
import flashinfer, sys
sys.stdout.write('\\n{_SENTINEL}' + str(getattr(flashinfer, '__version__', '?')) + '\\n')
if len(sys.argv) > 1:
    import inspect, json
    found = {{}}
    for name, symbol, backend in json.loads(sys.argv[1]):
        obj = getattr(flashinfer, symbol, None)
        ok = obj is not None
        if ok and backend:  # a backend is one of the values the function's `backend` accepts
            try:
                text = str(inspect.signature(obj))
            except (TypeError, ValueError):
                text = ''
            try:
                text += inspect.getsource(obj)
            except (OSError, TypeError):
                pass
            ok = repr(backend) in text or ('"' + backend + '"') in text
        found[name] = ok
    sys.stdout.write('\\n{_API_SENTINEL}' + json.dumps(found) + '\\n')
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class DoctorSettings(O.CommandOptions):
    typed: S.TypedSettings = field(default_factory=S.TypedSettings)  # --python, --require-api
    nvidia_smi: str | None = None
    timeout: float = 120.0  # --timeout: for `import flashinfer` (not the network's: doctor reads no index)


def read(args: argparse.Namespace, env: Mapping[str, str]) -> DoctorSettings:
    return DoctorSettings(**O.command_fields(args, env), typed=S.typed(args), nvidia_smi=args.nvidia_smi, timeout=args.import_timeout)


def run(settings: DoctorSettings, env: Mapping[str, str], session: Session) -> int:
    flag = settings.typed.python
    if isinstance(flag, PythonVersion):
        raise UsageError(f"doctor checks a real environment; --python {flag} is a version", hint="pass the interpreter's path, e.g. --python .venv/bin/python")
    if flag is not None:
        python = locate_interpreter(flag, search_path=env.get("PATH"))
    else:
        python = default_interpreter(env)
    # absolute now: the import check runs in an empty temporary folder, where a relative
    # `venv/bin/python` names nothing (abspath, not resolve: a venv's python is a symlink out of it)
    python = os.path.abspath(python)
    timeout = settings.timeout
    if timeout <= 0:
        raise UsageError(f"--timeout {timeout:g}: must be a positive number of seconds")
    apis = settings.typed.names("require_api")
    environment = inspect_environment(python)
    defs = load_definitions()
    env = import_environment(env, environment)
    # flashinfer's import probe runs in its own interpreter beside the rest (each takes seconds:
    # on the live SGLang stack 8 s for flashinfer, 12 s for sglang's imports)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="doctor-flashinfer-import") as pool:
        flashinfer = pool.submit(probe_import, python, env, timeout, apis, defs) if needs_import(environment, defs) else None
        # every installed compiled package against the installed torch from its symbols first: one that
        # cannot run is not imported (importing a mismatched extension can crash the interpreter)
        abi_symbols = static_verdicts(environment, defs)
        refused = {v.name for v in abi_symbols if v.verdict.refusal is not None}
        bound = [p for p in torch_abi_packages(environment, defs) if p.name not in refused]
        # a host without the NVIDIA driver (a build or CI machine): what needs libcuda is judged from its
        # symbols (above) and not imported: its import could only fail, on the driver, after seconds each
        driver = has_cuda_driver()
        not_imported = [f"{p.name} {p.version}" for p in bound if p.needs_driver is not None and not driver]
        abi_imports = import_packages(python, [p for p in bound if f"{p.name} {p.version}" not in not_imported], env, timeout=timeout)
        import_result = flashinfer.result() if flashinfer is not None else None
    checks = run_checks(
        environment,
        defs,
        import_result=import_result,
        gpus=query_gpus(settings.nvidia_smi, env),
        require_api=apis,
        abi_imports=abi_imports,
        abi_symbols=abi_symbols,
        not_imported=not_imported,
    )
    report = report_json(python, checks)
    if common.output_format(settings.output) == "json":
        render.print_json(report, sys.stdout)
    else:
        print_table(python, checks, sys.stdout, verbose=settings.output.verbose)
    if not report["ok"]:
        return 1
    return NO_DRIVER_EXIT if driverless(checks) else 0


def import_environment(env: Mapping[str, str], environment: Environment) -> Mapping[str, str]:
    """The environment the import checks run the target in: ``env`` itself, unless the target would
    compile every module from source on every run: ``PYTHONDONTWRITEBYTECODE`` set (as container
    images set it), no ``PYTHONPYCACHEPREFIX`` of the user's own, and torch installed without its
    bytecode. There the target's bytecode is kept where the program keeps its own
    (``~/.cache/resolve-gpu-stack/bytecode``, the user's alone: ``pycache.bytecode_folder``),
    never beside its sources: the live SGLang stack's imports took 23 s of CPU each run from source,
    10 s from bytecode. Python checks a ``.pyc`` against its source's size and mtime only, and an
    installer may write a changed file of the same size within the same second (or with the wheel's
    own timestamps): so the folder is one per installed state, named by the digest of every
    distribution's name, version and RECORD (the sha256 of each installed file), and the folders of
    the same environment's earlier states are removed. What is imported is the installed code."""
    if not env.get("PYTHONDONTWRITEBYTECODE") or env.get("PYTHONPYCACHEPREFIX"):
        return env
    torch = environment.distributions.get(canonicalize_name("torch"))
    if torch is None or torch.location is None or (torch.location / "torch" / "__pycache__").is_dir():
        return env  # no torch to import, or an install that compiled its bytecode: read as it is
    folder, why = bytecode_folder(env)
    if why is not None:
        return env
    state = _installed_state(environment)
    place = Path(folder) / "environments" / hashlib.sha256(environment.prefix.encode()).hexdigest()[:16]
    for earlier in place.glob("*"):
        if earlier.name != state:
            shutil.rmtree(earlier, ignore_errors=True)
    return {**{k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}, "PYTHONPYCACHEPREFIX": str(place / state)}


def _installed_state(environment: Environment) -> str:
    """A digest of what is installed: each distribution's name, version and RECORD (the sha256 and
    size of each of its files; a distribution without one, by its name and version)."""
    digest = hashlib.sha256()
    for name, dist in sorted(environment.distributions.items()):
        digest.update(f"{name}=={dist.version}\n".encode())
        record = dist.record
        if record is not None:
            with contextlib.suppress(OSError):
                digest.update(record.read_bytes())
    return digest.hexdigest()[:24]


def probe_import(python: str, env: Mapping[str, str], timeout: float, apis: Sequence[str] = (), defs: Definitions | None = None) -> ImportResult:
    """``import flashinfer`` in the target, with FlashInfer's version checks on; with ``apis``, whether
    the module has each (``mm_mxfp8``; ``mm_mxfp8:cutlass``: and its ``backend`` accepts cutlass),
    looked up in the GPU table of ``defs`` (needed with ``apis``).

    FLASHINFER_DISABLE_VERSION_CHECK is removed (any non-empty value disables the checks). The rest
    of the environment (PYTHONPATH, user site) is kept: this imports what the user's programs would.
    The working directory is an empty folder, so a source checkout in the cwd cannot shadow the install.
    """
    child_env = {k: v for k, v in env.items() if k != DISABLE_VERSION_CHECK}
    bypass = bool(env.get(DISABLE_VERSION_CHECK))
    with tempfile.TemporaryDirectory(prefix="rgs-doctor-") as cwd:
        try:
            proc = process.run(
                [python, "-c", _IMPORT, *_api_argument(apis, defs)],
                text=True,
                timeout=timeout,
                env=child_env,
                cwd=cwd,
            )
        except process.TimeoutExpired:
            return ImportResult(ok=False, error=f"did not finish within {timeout:g}s", env_bypass=bypass)
        except OSError as exc:
            return ImportResult(ok=False, error=f"cannot run {python}: {exc.strerror or exc}", env_bypass=bypass)
    found = [line[len(_SENTINEL) :] for line in proc.stdout.splitlines() if line.startswith(_SENTINEL)]
    if proc.returncode == 0 and found:
        return ImportResult(ok=True, version=found[-1].strip(), env_bypass=bypass, apis=_api_answer(proc.stdout, apis))
    lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
    error = lines[-1] if lines else f"exit status {proc.returncode}, no error output"
    return ImportResult(ok=False, error=error[:500], env_bypass=bypass)


def _api_argument(apis: Sequence[str], defs: Definitions | None = None) -> list[str]:
    """The import script's argument: [name, symbol, backend] of each API (none: no argument); the
    APIs' rows from ``defs``' GPU table."""
    if not apis:
        return []
    if defs is None:
        raise ValueError("the APIs' rows come from the definitions' GPU table: pass defs with apis")
    table = defs.gpu_table()
    return [json.dumps([[name, table.api(name).symbol, table.api(name).backend] for name in apis])]


def _api_answer(stdout: str, apis: Sequence[str]) -> tuple[tuple[str, bool], ...]:
    lines = [line[len(_API_SENTINEL) :] for line in stdout.splitlines() if line.startswith(_API_SENTINEL)]
    if not apis or not lines:
        return ()
    found = json.loads(lines[-1])
    return tuple((name, bool(found.get(name))) for name in apis)


def query_gpus(explicit: str | None, env: Mapping[str, str], timeout: float = 30) -> GpuQuery | None:
    """The GPUs nvidia-smi lists; None when there is no nvidia-smi (the GPU check is then skipped)."""
    return query_nvidia_smi(explicit, env, timeout)


_STYLE = {"pass": "green", "warn": "yellow", "skip": "dim", "fail": "bold red"}


def print_table(python: str, checks: Sequence[Check], out: TextIO, *, verbose: bool = False) -> None:
    """The checks as a table, a message each (a summary where a check has many caveats: with
    ``verbose``, each caveat on a line of its own below the table)."""
    console = Console(file=out, highlight=False)
    table = Table(title=f"doctor: {python}", title_justify="left")
    table.add_column("check", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("message")
    for c in checks:
        style = _STYLE.get(c.status, "")
        table.add_row(c.name, f"[{style}]{c.status}[/]", escape(c.message))
    console.print(table)
    for c in checks:
        for note in c.details.get("notes", ()) if verbose else ():
            console.print(f"  {c.name}: {note}", markup=False)
    counts = {s: sum(1 for c in checks if c.status == s) for s in ("pass", "warn", "skip", "fail")}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    verdict = "[green]ok[/]" if doctor_ok(checks) else "[bold red]FAILED[/]"
    console.print(f"{verdict}: {summary}")
