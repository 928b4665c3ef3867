"""The program: ``python -m resolve_gpu_stack`` and the ``resolve-gpu-stack`` console script (``run``).

Before anything else is imported, ``keep_bytecode`` makes sure the program is not compiled from
source on every run. An install without bytecode (``uv pip install`` / ``uv tool install`` without
``--compile-bytecode``) where ``PYTHONDONTWRITEBYTECODE=1`` is set (as many container images set
it) would otherwise compile this package and its dependencies at every start: ~1 MB of source,
~0.2 s. There the compiled modules are kept under ``$XDG_CACHE_HOME/resolve-gpu-stack/bytecode``
(``~/.cache/...``), never beside the sources, exactly as ``PYTHONPYCACHEPREFIX`` would keep them;
the first run writes them. A ``PYTHONPYCACHEPREFIX`` of the user's own, an install that compiled
its bytecode, or writing allowed: nothing changes.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

BYTECODE_FOLDER = "bytecode"


def keep_bytecode(environ: Mapping[str, str]) -> str | None:
    """Point ``sys.pycache_prefix`` at the program's bytecode folder when no bytecode would be
    read or written otherwise (see the module docstring); the folder, or None when left alone."""
    tag = sys.implementation.cache_tag
    if not sys.dont_write_bytecode or sys.pycache_prefix is not None or tag is None:
        return None
    here = os.path.dirname(os.path.abspath(__file__))
    if os.path.exists(os.path.join(here, "cli", "__pycache__", f"app.{tag}.pyc")):
        return None  # the installer compiled the package
    # the default cache folder, as net.cache.default_cache_dir finds it (that module is not loaded yet)
    xdg = environ.get("XDG_CACHE_HOME", "")
    base = xdg if os.path.isabs(xdg) else os.path.join(environ.get("HOME") or os.path.expanduser("~"), ".cache")
    folder = os.path.join(base, "resolve-gpu-stack", BYTECODE_FOLDER)
    sys.pycache_prefix = folder
    sys.dont_write_bytecode = False  # into that folder only: a folder the user cannot write is skipped quietly
    return folder


def run() -> int:
    """The console script."""
    keep_bytecode(os.environ)
    from .cli import run as cli_run

    return cli_run()


if __name__ == "__main__":
    raise SystemExit(run())
