"""The traps of the kept torch's contract (issue 47), on one loopback world: today's world
(``today_world``: PyPI's torch 2.15.0 with its cuda-toolkit pin, the story's nightlies and stable
torch on the PyTorch index, xformers built for CUDA 12 only, oldfw 2.0 whose ``.so`` imports a
symbol torch 2.15.0 lacks) and what it lacks:

- vllm 0.34.0 pinning ``flashinfer-python==0.7.3``, which no index serves (0.33.0 plans);
- nvidia-cuda-runtime 13.5.37, newer than the 13.2.51 torch's cuda-toolkit pins, and
  humming-kernels 1.0 requiring ``nvidia-cuda-runtime>=13.5``;
- flashinfer-cubin 0.6.4, to install beside flashinfer-python 0.6.5 (a misaligned cubin);
- pins-runtime 1.0 requiring ``nvidia-cuda-runtime<13.5``: with 13.5.37 installed, a downgrade
  whose cause the plan names.
"""

from __future__ import annotations

from pathlib import Path

from support.today_world import build_today_world
from support.world import World

X86 = "manylinux_2_28_x86_64"


def build_contract_world(root: Path) -> tuple[World, dict[str, bytes]]:
    w, objects = build_today_world(root)
    w.pypi("vllm", "0.34.0", requires=["torch==2.14.0", "flashinfer-python==0.7.3", "numpy"], upload_time="2026-11-30T00:00:00Z")
    w.pypi("nvidia-cuda-runtime", "13.5.37", tag=f"py3-none-{X86}")
    w.pypi("humming-kernels", "1.0", requires=["nvidia-cuda-runtime>=13.5"])
    w.pypi("flashinfer-cubin", "0.6.4")
    w.pypi("pins-runtime", "1.0", requires=["nvidia-cuda-runtime<13.5"])
    return w, objects
