"""A real target interpreter: choosing it, and inspecting it by running a probe script in it.

A plan is always for a *target* Python, never for the host running this tool. The probe uses only
the target's stdlib (it may not have ``packaging``); its tags are computed here from the facts it
reports. Targets declared by flags (no interpreter) are ``model/declared.py``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.tags import Tag, compatible_tags, generic_tags, mac_platforms
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import InvalidVersion, Version

from ..errors import UsageError
from ..model import Target
from ..model.cuda import TorchCuda, kept_torch_cuda
from ..model.declared import NamedInterpreter, cpython_tag_list, linux_platform_tags
from ..net import process


@dataclass(frozen=True, slots=True, kw_only=True)
class InstalledDistribution:
    """One distribution found in the target's environment."""

    name: NormalizedName
    display_name: str  # as spelled in its metadata
    version: Version
    requires_dist: tuple[str, ...] = ()
    dist_info: Path | None = None  # the .dist-info (or .egg-info) folder
    location: Path | None = None  # the folder that holds dist_info (site-packages)
    installer: str | None = None  # contents of INSTALLER ("pip", "uv"), if any

    @property
    def record(self) -> Path | None:
        """The RECORD file (list of installed files with their hashes), if this is a dist-info."""
        return self.dist_info / "RECORD" if self.dist_info is not None else None


@dataclass(frozen=True, slots=True, kw_only=True)
class Environment:
    """Everything the probe learnt about a real interpreter, plus the Target derived from it."""

    interpreter: str  # the path as given
    executable: str  # the interpreter's own sys.executable
    prefix: str
    base_prefix: str
    is_venv: bool
    implementation: str  # "cpython", "pypy", ...
    sysconfig_platform: str  # sysconfig.get_platform(), e.g. "linux-x86_64"
    glibc: tuple[int, int] | None
    free_threaded: bool
    purelib: str
    platlib: str
    distributions: Mapping[NormalizedName, InstalledDistribution] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    target: Target


# ---------------------------------------------------------------------------------------------
# Choosing the interpreter


def active_venv_interpreter(env: Mapping[str, str]) -> str | None:
    """``$VIRTUAL_ENV/bin/python`` when VIRTUAL_ENV names an existing venv, else None."""
    venv = env.get("VIRTUAL_ENV")
    if venv:
        candidate = Path(venv) / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
        if candidate.exists():
            return str(candidate)
    return None


def default_interpreter(env: Mapping[str, str]) -> str:
    """``$VIRTUAL_ENV/bin/python`` when VIRTUAL_ENV names an existing venv, else ``python3`` on PATH."""
    venv = active_venv_interpreter(env)
    if venv is not None:
        return venv
    search = env.get("PATH")
    found = shutil.which("python3", path=search) if search else None
    if found:
        return found
    raise UsageError(
        "no target interpreter: VIRTUAL_ENV is not set (or has no bin/python) and python3 is not on PATH",
        hint="pass --python /path/to/python, or --python 3.12 --platform x86_64-manylinux_2_28",
    )


def locate_interpreter(named: NamedInterpreter, *, search_path: str | None = None) -> str:
    """The interpreter ``--python`` names, found. The edge parsed the flag (``model.declared.parse_python``):

    1. ``3.<minor>[.<micro>][t]`` is a *version*, even if a file of that name exists (write
       ``./3.12`` to mean the file): a declared target, never found here; anything else is a
       ``NamedInterpreter``, and

    2. anything containing a path separator is an *interpreter path* (checked when inspected; a
       leading ``~`` is the home folder, as the shell reads it unquoted);
    3. an existing file is an *interpreter path*;
    4. a name found on ``search_path`` (a PATH string; the process PATH when None), such as
       ``python3.12``, is an *interpreter* and is returned as the full path found;
    5. anything else is a UsageError.
    """
    text = named.text
    separators = {os.sep, "/"} | ({os.altsep} if os.altsep else set())
    if text.startswith("~"):  # a quoted `'~/gpu/bin/python'` reaches us unexpanded: read as the shell would
        text = os.path.expanduser(text)
    if any(sep in text for sep in separators) or Path(text).is_file():
        return text
    found = shutil.which(text, path=search_path)
    if found:
        return found
    raise UsageError(
        f"--python {named.text!r} is neither a Python version (like 3.12 or 3.13t) nor an interpreter on PATH",
        hint="give a version such as 3.12, or a path such as .venv/bin/python",
    )


# ---------------------------------------------------------------------------------------------
# Inspecting a real interpreter

_SENTINEL = "RESOLVE-GPU-STACK-PROBE:"

# Runs inside the target. Old syntax on purpose (no f-strings) so that an old Python reaches the
# version check and says so instead of failing with a SyntaxError.
_PROBE = r"""
import json, os, platform, re, sys, sysconfig
out = {"ok": True}
def emit(data):
    sys.stdout.write("\n" + SENTINEL + json.dumps(data) + "\n")
    sys.stdout.flush()
if sys.version_info < (3, 8):
    emit({"ok": False, "error": "Python %d.%d is too old: the target must be Python 3.8 or newer"
          % tuple(sys.version_info[:2])})
    sys.exit(0)
from importlib import metadata
def full_version(info):
    text = "%d.%d.%d" % (info.major, info.minor, info.micro)
    if info.releaselevel != "final":
        text += info.releaselevel[0] + str(info.serial)
    return text
glibc = None
try:
    glibc = os.confstr("CS_GNU_LIBC_VERSION").split()[1]
except (AttributeError, ValueError, IndexError, OSError):
    lib, ver = platform.libc_ver()
    glibc = ver if lib == "glibc" and ver else None
out["version_info"] = list(sys.version_info[:3]) + [sys.version_info.releaselevel, sys.version_info.serial]
out["implementation"] = sys.implementation.name
out["executable"] = sys.executable
out["prefix"] = sys.prefix
out["base_prefix"] = getattr(sys, "base_prefix", sys.prefix)
out["real_prefix"] = getattr(sys, "real_prefix", None)
out["sysconfig_platform"] = sysconfig.get_platform()
out["machine"] = platform.machine()
out["maxsize_64"] = sys.maxsize > 2 ** 32
out["glibc"] = glibc
out["free_threaded"] = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
out["debug"] = bool(sysconfig.get_config_var("Py_DEBUG")) or hasattr(sys, "gettotalrefcount")
out["soabi"] = sysconfig.get_config_var("SOABI")
paths = sysconfig.get_paths()
out["purelib"] = paths.get("purelib")
out["platlib"] = paths.get("platlib")
out["markers"] = {
    "implementation_name": sys.implementation.name,
    "implementation_version": full_version(sys.implementation.version),
    "os_name": os.name,
    "platform_machine": platform.machine(),
    "platform_release": platform.release(),
    "platform_system": platform.system(),
    "platform_version": platform.version(),
    "python_full_version": platform.python_version(),
    "platform_python_implementation": platform.python_implementation(),
    "python_version": ".".join(platform.python_version_tuple()[:2]),
    "sys_platform": sys.platform,
}
dists, seen, problems = [], set(), []
for dist in metadata.distributions():
    try:
        name = dist.metadata["Name"]
        path = getattr(dist, "_path", None)
        if not name:
            problems.append("distribution without a Name at %s" % path)
            continue
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:
            continue
        seen.add(key)
        installer = dist.read_text("INSTALLER")
        if key == "torch":  # torch.version.cuda, read from its file: torch is never imported here
            try:
                with open(str(dist.locate_file("torch/version.py"))) as f:
                    found = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]([^'\"]*)['\"]", f.read(), re.M)
                out["torch_version_cuda"] = found.group(1) if found else None
            except OSError:
                pass
        dists.append({
            "name": name, "version": dist.version, "requires": list(dist.requires or []),
            "path": None if path is None else str(path),
            "location": str(dist.locate_file("")),
            "installer": installer.strip() if installer else None,
        })
    except Exception as exc:
        problems.append("unreadable distribution: %r" % (exc,))
out["distributions"] = dists
out["problems"] = problems
emit(out)
""".replace("SENTINEL", repr(_SENTINEL))


class ProbeRun:
    """A probe of an interpreter started in the background (``start_probe``): the subprocess runs
    while the caller does other work; ``result()`` waits for it and describes the environment."""

    def __init__(self, path: str | Path, timeout: float) -> None:
        where = Path(path)
        if not where.exists():
            hint = "pass --python with an existing interpreter path"
            if where.parent.name == "bin" and where.parent.parent.name.startswith("."):  # a project's .venv not made yet
                hint += f" (make {where.parent.parent} first: `uv venv` or `python3 -m venv {where.parent.parent}`, then install the torch you keep)"
            raise UsageError(f"Python interpreter {path}: no such file", hint=hint)
        if where.is_dir() or not os.access(where, os.X_OK):
            raise UsageError(f"Python interpreter {path}: not an executable file")
        self.path = path
        self._timeout = timeout
        self._result: Environment | None = None
        try:
            # -I: isolated, like uv's own probe: no PYTHONPATH, no user site, no cwd on sys.path.
            self._proc: process.Popen[str] | None = process.start(
                [str(where), "-I", "-c", _PROBE], stdout=process.PIPE, stderr=process.PIPE, stdin=process.DEVNULL, text=True
            )
        except OSError as exc:
            raise UsageError(f"Python interpreter {path}: cannot run it: {exc.strerror or exc}") from exc

    def result(self) -> Environment:
        """The environment as the probe found it (waits for it once; later calls answer the same)."""
        if self._result is None:
            self._result = _environment(self.path, self._facts())
        return self._result

    def _facts(self) -> dict[str, Any]:
        proc, self._proc = self._proc, None
        if proc is None:
            raise UsageError(f"Python interpreter {self.path}: its probe failed before")
        try:
            out, err = proc.communicate(timeout=self._timeout)
        except process.TimeoutExpired as exc:
            proc.kill()
            proc.communicate()
            raise UsageError(f"Python interpreter {self.path}: did not answer within {self._timeout:g}s") from exc
        return _probe_facts(self.path, process.CompletedProcess(proc.args, proc.returncode, out, err))

    def close(self) -> None:
        """Stop a probe whose result is no longer wanted."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
        if proc is not None:
            proc.communicate()


def start_probe(path: str | Path, *, timeout: float = 60) -> ProbeRun:
    """Start probing ``path`` in the background; ``.result()`` is ``inspect_environment(path)``."""
    return ProbeRun(path, timeout)


def _probe_facts(path: str | Path, proc: process.CompletedProcess[str]) -> dict[str, Any]:
    """The facts the probe printed after its sentinel; a UsageError saying why there are none."""
    lines = [line for line in proc.stdout.splitlines() if line.startswith(_SENTINEL)]
    if proc.returncode != 0 or not lines:
        raise _no_facts(path, proc)
    try:
        facts = json.loads(lines[-1][len(_SENTINEL) :])
    except json.JSONDecodeError as exc:
        raise UsageError(f"Python interpreter {path}: unreadable probe output ({exc})") from exc
    if not isinstance(facts, dict):
        raise UsageError(f"Python interpreter {path}: unreadable probe output (not a JSON object)")
    if not facts.get("ok"):
        raise UsageError(f"Python interpreter {path}: {facts.get('error', 'probe failed')}")
    return facts


def _no_facts(path: str | Path, proc: process.CompletedProcess[str]) -> UsageError:
    """Why a probe printed no facts: too old a Python, not a Python interpreter, or one that does not work."""
    if proc.returncode != 0 and "-I" in proc.stderr and "option" in proc.stderr.lower():
        return UsageError(f"Python interpreter {path}: too old (no -I option); the target must be Python 3.8 or newer")
    if _SENTINEL in proc.stderr or "import json, os" in proc.stderr:  # it echoed the probe back (`ls -I ...`): no Python
        return UsageError(f"{path}: not a Python interpreter", hint="pass --python with a Python interpreter, e.g. .venv/bin/python, or a version such as 3.12")
    detail = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}, no probe output"])[-1]
    return UsageError(f"Python interpreter {path}: not a working Python interpreter ({detail[:300]})")


def _glibc(text: str | None) -> tuple[int, int] | None:
    match = re.match(r"^(\d+)\.(\d+)", text or "")
    return (int(match[1]), int(match[2])) if match else None


def _normalize_platform(text: str) -> str:
    return text.replace("-", "_").replace(".", "_").replace(" ", "_")


def _platforms(facts: Mapping[str, Any]) -> tuple[str, list[str]]:
    """(Target.platform label, platform tags) from the probe's facts, the way packaging does it."""
    plat = str(facts["sysconfig_platform"])
    glibc = _glibc(facts.get("glibc"))
    if plat.startswith("linux"):
        arch = _normalize_platform(plat).split("_", 1)[1]
        if not facts.get("maxsize_64", True):  # 32-bit interpreter on a 64-bit kernel
            arch = {"x86_64": "i686", "aarch64": "armv8l"}.get(arch, arch)
        label = f"{arch}-manylinux_{glibc[0]}_{glibc[1]}" if glibc else f"{arch}-linux"
        return label, linux_platform_tags(arch, glibc)
    machine = str(facts.get("machine") or "unknown")
    match = re.match(r"^macosx-(\d+)\.(\d+)-(.+)$", plat)
    if match:
        version = (int(match[1]), int(match[2]))
        arch = machine if match[3].startswith(("universal", "fat", "intel")) else match[3]
        return f"{machine}-{_normalize_platform(plat)}", list(mac_platforms(version, arch))
    return f"{machine}-{_normalize_platform(plat)}", [_normalize_platform(plat)]


def _tags(facts: Mapping[str, Any], platforms: list[str]) -> tuple[Tag, ...]:
    major, minor = int(facts["version_info"][0]), int(facts["version_info"][1])
    if facts["implementation"] == "cpython":
        threading = "t" if facts.get("free_threaded") else ""
        abis = [f"cp{major}{minor}{threading}"]
        if facts.get("debug"):
            abis.insert(0, f"cp{major}{minor}{threading}d")
        return cpython_tag_list(major, minor, abis, platforms)
    short = {"pypy": "pp", "ironpython": "ip", "jython": "jy"}.get(facts["implementation"], facts["implementation"])
    soabi = facts.get("soabi") or ""
    abis = ["_".join(soabi.split("-")[:2]).replace(".", "_")] if soabi else []
    interpreter = f"{short}{major}{minor}"
    tags = list(generic_tags(interpreter, abis, platforms))
    tags += compatible_tags((major, minor), interpreter=interpreter, platforms=platforms)
    return tuple(dict.fromkeys(tags))


def _distributions(facts: Mapping[str, Any]) -> tuple[dict[NormalizedName, InstalledDistribution], list[str]]:
    found: dict[NormalizedName, InstalledDistribution] = {}
    warnings = [str(p) for p in facts.get("problems", [])]
    for raw in facts.get("distributions", []):
        try:
            version = Version(raw["version"])
            name = canonicalize_name(raw["name"], validate=True)
        except (InvalidVersion, ValueError, TypeError) as exc:
            warnings.append(f"skipped installed {raw.get('name')!r} {raw.get('version')!r}: {exc}")
            continue
        found.setdefault(
            name,
            InstalledDistribution(
                name=name,
                display_name=raw["name"],
                version=version,
                requires_dist=tuple(raw.get("requires") or ()),
                dist_info=Path(raw["path"]) if raw.get("path") else None,
                location=Path(raw["location"]) if raw.get("location") else None,
                installer=raw.get("installer"),
            ),
        )
    return found, warnings


def _torch_cuda(distributions: Mapping[NormalizedName, InstalledDistribution], facts: Mapping[str, Any]) -> TorchCuda | None:
    """The installed torch's CUDA by the one rule: its label, its runtime pin, its version.py."""
    torch = distributions.get(canonicalize_name("torch"))
    if torch is None:
        return None
    return kept_torch_cuda(torch.version, torch.requires_dist, facts["markers"], facts.get("torch_version_cuda") or None)


def inspect_environment(path: str | Path, *, timeout: float = 60) -> Environment:
    """Run ``path`` and describe it: its Target, its installed distributions, its prefix."""
    return start_probe(path, timeout=timeout).result()


def _environment(path: str | Path, facts: Mapping[str, Any]) -> Environment:
    label, platforms = _platforms(facts)
    distributions, warnings = _distributions(facts)
    info = facts["version_info"]
    target = Target(
        python_version=f"{info[0]}.{info[1]}",
        python_full_version=str(facts["markers"]["python_full_version"]),
        platform=label,
        tags=_tags(facts, platforms),
        markers=dict(facts["markers"]),
        installed={name: dist.version for name, dist in distributions.items()},
        interpreter=str(path),
        installed_at={name: str(dist.location) for name, dist in distributions.items() if dist.location is not None},
        torch_cuda=_torch_cuda(distributions, facts),
    )
    prefix, base = str(facts["prefix"]), str(facts["base_prefix"])
    return Environment(
        interpreter=str(path),
        executable=str(facts.get("executable") or path),
        prefix=prefix,
        base_prefix=base,
        is_venv=prefix != base or bool(facts.get("real_prefix")),
        implementation=str(facts["implementation"]),
        sysconfig_platform=str(facts["sysconfig_platform"]),
        glibc=_glibc(facts.get("glibc")),
        free_threaded=bool(facts.get("free_threaded")),
        purelib=str(facts.get("purelib") or ""),
        platlib=str(facts.get("platlib") or ""),
        distributions=distributions,
        warnings=tuple(warnings),
        target=target,
    )


def inspect_interpreter(path: str | Path, *, timeout: float = 60) -> Target:
    """The Target of a real interpreter (runs it once; see ``inspect_environment``)."""
    return inspect_environment(path, timeout=timeout).target


__all__ = [
    "Environment",
    "active_venv_interpreter",
    "InstalledDistribution",
    "ProbeRun",
    "default_interpreter",
    "inspect_environment",
    "inspect_interpreter",
    "locate_interpreter",
    "start_probe",
]
