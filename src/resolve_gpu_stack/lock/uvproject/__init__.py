"""A uv project that keeps the plan: the ``[tool.uv]`` tables a plan is exported to, written into a
``pyproject.toml`` without touching anything else, and a project's ``uv.lock`` read back for ``check``.

Pure (no I/O): text in, text out. ``tables.py``: a plan in uv's words; ``write.py``: into a
pyproject; ``read.py``: an export and a ``uv.lock`` read back. tomlkit edits the pyproject round-trip, so the user's formatting,
order and comments stay; a value is only assigned when it differs from what is there, so a second
export of the same plan changes nothing.

What one export writes (each key only when there is something to say):

* ``[dependency-groups] gpu-stack``: the stack's roots (torch, the FlashInfer components in the
  plan, the ``--with`` requirements), and ``[tool.uv] default-groups`` gains it, so a plain
  ``uv sync`` installs them;
* ``environments``: each target's marker (a plan is made for its targets only);
* ``constraint-dependencies``: every planned package at its planned version (kept ones included);
* ``override-dependencies``: the plan's overrides (a framework's torch pin replaced by the kept
  torch, a torch-family pin by the build for it, the user's ``--override``), and each ``--without``
  package as an override that never applies (uv's way to drop a requirement);
* ``extra-build-dependencies`` (torch, ``match-runtime``) and ``extra-build-variables``
  (``TORCH_CUDA_ARCH_LIST``: the archs built for, or the plan's ``--gpu``) for the packages the plan
  builds against its torch (rows whose action is ``build``), built in uv's isolated build
  environment with the environment's torch (``no-build-isolation-package`` is not written: without
  isolation uv ignores extra-build-dependencies and needs the build backend in the project), and
  ``[tool.uv.sources]`` of each one built from a source tree (git at the locked commit, or a folder);
* ``[[tool.uv.index]]``: one ``explicit`` index per simple-API base a package of a non-PyPI index
  came from (the PyTorch channel and CUDA folder, FlashInfer's CUDA folder), and
  ``[tool.uv.sources]`` pinning each such package to it. PyPI packages get no source: uv's own
  default index (the user's configuration) serves them, as it served the plan;
* ``[tool.resolve-gpu-stack.uv-export]``: the record of all of the above, so that the next export
  replaces exactly what this one wrote (and nothing of the user's), and ``check`` can compare
  ``uv.lock`` with the plan (``read_export``, ``read_uv_lock``).

Several targets (a config's x86_64 and aarch64 targets, whose nightly torches differ by date) share
one project: an entry that every target has is written once, one that differs gets each target's
marker (``torch==2.12.0.dev20260307+cu130 ; platform_machine == 'x86_64' and ...``).
"""

from __future__ import annotations

from .read import ExportRecord, locked_for, marker_holds, read_export, read_uv_lock
from .tables import GROUP, LISTS, NEVER, RECORD, ExportTarget, RecordedTarget, UvIndex, UvTables, built_against_torch, uv_tables, with_marker
from .write import Applied, apply_tables, parse_project

__all__ = [
    "Applied",
    "ExportRecord",
    "ExportTarget",
    "GROUP",
    "LISTS",
    "NEVER",
    "RECORD",
    "RecordedTarget",
    "UvIndex",
    "UvTables",
    "apply_tables",
    "built_against_torch",
    "locked_for",
    "marker_holds",
    "parse_project",
    "read_export",
    "read_uv_lock",
    "uv_tables",
    "with_marker",
]
