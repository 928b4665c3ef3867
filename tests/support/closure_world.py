"""A loopback world of the kept torch's closure (issue 47 items 2 and 4, issue 52 item 4).

- torch 2.15.0 as PyPI serves it: no ``+cuNNN`` label, on PyPI's torch page (where a declared kept
  torch is known from) and on a page of its own (``pypi-torch/``) for a venv to install it from; its
  METADATA requires ``cuda-toolkit[cudart,nvrtc]==13.2.2`` (Linux) and ``filelock``.
- cuda-toolkit 13.2.2, whose extras pin ``nvidia-cuda-runtime==13.2.86.*`` and
  ``nvidia-cuda-nvrtc==13.2.86.*`` (the real wheel's shape), and the two at 13.2.86 and at 13.5.37.
- humming-kernels 0.1.19 requiring ``nvidia-cuda-runtime>=13.5`` (vllm 0.34.0's dependency today), and
  ``hungry`` 1.0 requiring it: a plan that would move torch's runtime.
- ``fw`` 1.0, a framework pinning ``torch==2.14.0`` and ``filelock==3.16.0`` (the plan overrides the
  first; the second it keeps), requiring ``uses-runtime``, which requires ``nvidia-cuda-runtime``
  without a floor: torch's 13.2.86 serves it.

``closure_world(root)`` returns the world (``serve`` it); ``closure_venv`` makes a real venv holding
torch and its closure, installed by pip from the world (no machine pip configuration).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support.wheels import build_wheel
from support.world import World, _Entry

PY = f"cp{sys.version_info.major}{sys.version_info.minor}"
X86 = "manylinux_2_28_x86_64"
TORCH = "2.15.0"
TORCH_REQUIRES = ["cuda-toolkit[cudart,nvrtc]==13.2.2; platform_system == 'Linux'", "filelock"]
LINUX = "(sys_platform == 'linux' and platform_machine == 'x86_64')"
TOOLKIT_REQUIRES = [
    f"nvidia-cuda-runtime==13.2.86.*; {LINUX} and extra == 'cudart'",
    f"nvidia-cuda-nvrtc==13.2.86.*; {LINUX} and extra == 'nvrtc'",
    f"nvidia-cuda-nvcc==13.2.86.*; {LINUX} and extra == 'nvcc'",
]
CLOSURE = {"torch": TORCH, "cuda-toolkit": "13.2.2", "nvidia-cuda-runtime": "13.2.86", "nvidia-cuda-nvrtc": "13.2.86"}


def closure_world(root: Path) -> World:
    w = World(root)
    tag = f"{PY}-{PY}-{X86}"
    torch = build_wheel(
        w.root / "pypi-files", "torch", TORCH, tag, TORCH_REQUIRES, requires_python=">=3.10", files={"torch/__init__.py": b"__version__ = '2.15.0'\n"}
    )
    for page in ("pypi-torch/torch/", "simple/torch/"):
        w._add(page, "pypi", _Entry(torch, "pypi-files/" + torch.filename, sidecar=False, upload_time="2026-10-28T00:00:00Z"))
    w.pytorch("torch", "2.14.0+cu130", tag=tag, channel="stable", variant="cu130", requires=["filelock"])  # the PyTorch index is served
    w.pypi("cuda-toolkit", "13.2.2", requires=TOOLKIT_REQUIRES)
    for name in ("nvidia-cuda-runtime", "nvidia-cuda-nvrtc"):
        for version in ("13.2.86", "13.5.37"):
            w.pypi(name, version, tag=f"py3-none-{X86}")
    for version in ("3.16.0", "3.17.0"):
        w.pypi("filelock", version)
    w.pypi("humming-kernels", "0.1.19", requires=["nvidia-cuda-runtime>=13.5", "nvidia-cuda-nvrtc>=13.5"])
    w.pypi("hungry", "1.0", requires=["nvidia-cuda-runtime>=13.5"])
    w.pypi("uses-runtime", "1.0", requires=["nvidia-cuda-runtime"])
    w.pypi("fw", "1.0", requires=["torch==2.14.0", "filelock==3.16.0", "uses-runtime"])
    return w


def pip_env() -> dict[str, str]:
    return {**os.environ, "PIP_CONFIG_FILE": "/dev/null", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def closure_venv(venv: Path, base: str) -> str:
    """A real venv holding torch 2.15.0 and its closure (pip, from the world served at ``base``); its python."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=pip_env())
    python = str(venv / "bin" / "python")
    pins = [f"{n}=={v}" for n, v in CLOSURE.items() if n != "torch"]
    pip = [python, "-m", "pip", "install", "-q", "--no-deps", "--index-url", f"{base}simple/", *pins, "filelock==3.17.0"]
    subprocess.run(pip, check=True, env=pip_env(), capture_output=True)
    pip = [python, "-m", "pip", "install", "-q", "--no-deps", "--index-url", f"{base}pypi-torch/", f"torch=={TORCH}"]
    subprocess.run(pip, check=True, env=pip_env(), capture_output=True)
    return python


def records(venv: Path) -> dict[str, bytes]:
    """The RECORD file of each of torch and its closure in ``venv`` (what an uninstall or reinstall rewrites)."""
    site = next((venv / "lib").glob("python*/site-packages"))
    out = {}
    for name, version in CLOSURE.items():
        dist = site / f"{name.replace('-', '_')}-{version}.dist-info"
        out[name] = (dist / "RECORD").read_bytes()
    return out


__all__ = ["CLOSURE", "TORCH", "closure_venv", "closure_world", "pip_env", "records"]
