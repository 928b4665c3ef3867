"""The install world (torch nightlies with their triton pin, the FlashInfer trio, the closure on a PyPI) and
what the install, fleet and wheelhouse tests do with it: real venvs by uv, what a venv holds, the CLI."""

from __future__ import annotations

import json
import platform
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from resolve_gpu_stack.env.probe import _SENTINEL
from support.doors import index_flags, run_cli
from support.server import IndexServer
from support.stack_world import ABI3, FI_REQUIRES, TORCH_REQUIRES
from support.world import World

PY = f"cp{sys.version_info.major}{sys.version_info.minor}"


PLAT = f"manylinux_2_28_{platform.machine()}"


NIGHTLY = "2.12.0.dev20260307+cu130"


OLDER = "2.12.0.dev20260306+cu130"


UV = str(Path(sys.executable).with_name("uv"))


def _glibc_ok() -> bool:
    libc, version = platform.libc_ver()
    if sys.platform != "linux" or libc != "glibc":
        return False
    major, minor = (int(x) for x in version.split(".")[:2])
    return (major, minor) >= (2, 28)


needs_linux = pytest.mark.skipif(not _glibc_ok() or not Path(UV).exists(), reason="needs Linux with glibc >= 2.28 and uv next to this interpreter")


def build_world(root: Path) -> World:
    """Torch nightlies with their triton pin, the FlashInfer trio, and the closure on a PyPI."""
    w = World(root)
    for version in (OLDER, NIGHTLY):
        w.pytorch("torch", version, tag=f"{PY}-{PY}-{PLAT}", requires=[r.format(hash="9c288bc5") for r in TORCH_REQUIRES], requires_python=">=3.10")
    w.pytorch("triton", "3.7.0+git9c288bc5", tag=f"{PY}-{PY}-{PLAT}", at_root=True)
    for v in ("0.6.4", "0.6.5"):
        w.pypi("flashinfer-python", v, requires=FI_REQUIRES, requires_python=">=3.10")
        w.pypi("flashinfer-cubin", v)
        for label in ("cu129", "cu130"):
            w.flashinfer("flashinfer-jit-cache", f"{v}+{label}", tag=f"{ABI3}-{PLAT}", page=f"{label}/flashinfer-jit-cache")
    for v in ("0.1.7", "0.2.0"):
        w.pypi("apache-tvm-ffi", v)
    for name, v in (("numpy", "2.2.0"), ("packaging", "25.0"), ("filelock", "3.17.0"), ("typing-extensions", "4.12.2")):
        w.pypi(name, v)
    w.pypi("cuda-toolkit", "13.0.2", requires=["nvidia-cuda-runtime==13.0.96; extra == 'cudart'", "nvidia-cuda-nvrtc==13.0.88; extra == 'nvrtc'"])
    w.pypi("nvidia-cuda-runtime", "13.0.96", tag=f"py3-none-{PLAT}")
    w.pypi("nvidia-cuda-nvrtc", "13.0.88", tag=f"py3-none-{PLAT}")
    return w


def make_venv(path: Path, env: dict[str, str], torch_wheel: Path | None = None) -> str:
    subprocess.run([UV, "venv", "-q", "--python", sys.executable, str(path)], check=True, env=env)
    python = str(path / "bin" / "python")
    if torch_wheel is not None:
        subprocess.run([UV, "pip", "install", "-q", "--python", python, "--no-deps", "--offline", str(torch_wheel)], check=True, env=env)
    return python


def torch_wheel(world: World, version: str) -> Path:
    [path] = (world.root / "whl" / "nightly" / "cu130").glob(f"torch-{version}-*.whl")
    return path


def installed(python: str) -> dict[str, str]:
    """What the venv has, read by the venv's own interpreter (not by the code under test)."""
    code = "import importlib.metadata as m, json; print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))"
    out = subprocess.run([python, "-c", code], check=True, capture_output=True, text=True).stdout
    return {str(canonicalize_name(k)): v for k, v in json.loads(out).items()}


def dist_info_bytes(python: str, name: str) -> dict[str, bytes]:
    site = Path(
        subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], check=True, capture_output=True, text=True).stdout.strip()
    )
    [info] = site.glob(f"{name}-*.dist-info")
    return {str(p.relative_to(info)): p.read_bytes() for p in sorted(info.rglob("*")) if p.is_file()}


def fake_python(root: Path, installed: dict[str, str]) -> Path:
    facts = {
        "ok": True,
        "version_info": [3, 12, 9, "final", 0],
        "implementation": "cpython",
        "executable": str(root / "bin" / "python"),
        "prefix": str(root),
        "base_prefix": "/usr",
        "real_prefix": None,
        "sysconfig_platform": "linux-x86_64",
        "machine": "x86_64",
        "maxsize_64": True,
        "glibc": "2.28",
        "free_threaded": False,
        "debug": False,
        "soabi": "cpython-312-x86_64-linux-gnu",
        "purelib": str(root / "lib"),
        "platlib": str(root / "lib"),
        "markers": {
            "implementation_name": "cpython",
            "implementation_version": "3.12.9",
            "os_name": "posix",
            "platform_machine": "x86_64",
            "platform_release": "6.0",
            "platform_system": "Linux",
            "platform_version": "#1",
            "python_full_version": "3.12.9",
            "platform_python_implementation": "CPython",
            "python_version": "3.12",
            "sys_platform": "linux",
        },
        "distributions": [
            {"name": n, "version": v, "requires": [], "path": None, "location": str(root / "lib"), "installer": "uv"} for n, v in installed.items()
        ],
        "problems": [],
    }
    python = root / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f"#!/bin/sh\ncat <<'EOF'\n\n{_SENTINEL}{json.dumps(facts)}\nEOF\n")
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    return python


MINOR = f"{sys.version_info.major}.{sys.version_info.minor}"


@pytest.fixture
def exported(tmp_path: Path, capsys, monkeypatch):
    """(lock, wheelhouse, cache, server url): a lock for a declared target, exported once; the
    server stays up (every wheel is in the cache, so re-exports need it for nothing)."""
    monkeypatch.chdir(tmp_path)
    world = build_world(tmp_path / "www")
    lock, house, cache = tmp_path / "locks" / "pylock.x.toml", tmp_path / "house", tmp_path / "cache"
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        rc, _, err = run_cli(
            capsys, "lock", "--python", MINOR, "--installed", f"torch=={NIGHTLY}", *index_flags(srv.url), "--cache-dir", str(cache), "-o", str(lock)
        )
        assert rc == 0, err
        rc, _, err = export(capsys, lock, house, cache)
        assert rc == 0, err
        yield lock, house, cache, srv.url


def export(capsys, lock: Path, house: Path, cache: Path, *flags: str) -> tuple[int, str, str]:
    return run_cli(capsys, "wheelhouse", str(lock), "-o", str(house), "--cache-dir", str(cache), "--format", "json", *flags)
