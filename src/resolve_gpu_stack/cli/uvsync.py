"""What `uv sync` in a uv project would do to the environment that holds the kept torch, beyond
the plan: said by ``export uv`` after it writes the project, and by ``check`` on a project it
exported. Below the commands."""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path

from ..urls import redact_url
from . import common


def uv_sync_warnings(folder: Path, pythons: Collection[str]) -> list[str]:
    """What `uv sync` in the project ``folder`` would do to the environment that holds the kept torch,
    beyond the plan: a ``.python-version`` for another Python than the plan's makes it replace the
    whole ``.venv`` (torch with it); a torch there installed from a file (``direct_url.json``) is
    reinstalled from the index at the same version (its files change)."""
    out = _python_pin_warnings(folder, pythons)
    for record in sorted((folder / ".venv").glob("lib/python*/site-packages/torch-*.dist-info/direct_url.json")):
        try:
            url = json.loads(record.read_text()).get("url", "")
        except (OSError, ValueError, AttributeError):
            url = ""
        version = record.parent.name.removeprefix("torch-").removesuffix(".dist-info")
        out.append(
            f"torch {version} in {common.shown(folder / '.venv')} was installed from a file ({redact_url(str(url)) or 'direct_url.json'}): `uv sync` "
            "reinstalls it from the plan's index, the same version with other files; let it, or keep this environment out of `uv sync`"
        )
    return out


def _python_pin_warnings(folder: Path, pythons: Collection[str]) -> list[str]:
    """A ``.python-version`` in ``folder`` for another Python than the plan's: `uv sync` would
    replace the whole ``.venv``."""
    minors = {".".join(p.split(".")[:2]) for p in pythons}
    pin = folder / ".python-version"
    try:
        pinned = pin.read_text().strip().splitlines()[0].strip() if pin.is_file() else ""
    except (OSError, UnicodeDecodeError, IndexError):
        pinned = ""
    if not pinned or not minors or any(pinned == m or pinned.startswith(m + ".") for m in minors):
        return []
    return [
        f"{common.shown(pin)} asks for Python {pinned}, the plan is for Python {', '.join(sorted(minors))}: `uv sync` would make a new "
        f".venv for {pinned}, replacing the whole environment, the kept torch with it; pin the plan's Python first: `uv python pin {sorted(minors)[0]}`"
    ]


__all__ = ["uv_sync_warnings"]
