"""``indexes/snapshots/bundled.toml``: the snapshots a checkout carries, and the kept torch each fits.

The hint for a machine without network names the snapshot that fits its target (a PyPI-torch
venv gets the PyPI-torch snapshot, not a nightly one). An installed tool carries no snapshots: then
there is none to name."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .toml import TomlReader, data_dir, load_toml

BUNDLED = Path("snapshots") / "bundled.toml"
TORCH_FROM = ("pypi", "pytorch")

# Base URL replayed for an index a snapshot has pages of but the user gave no URL for (pypi).
PLACEHOLDER_BASE = "https://{name}.snapshot.invalid/simple/"


@dataclass(frozen=True, slots=True, kw_only=True)
class BundledSnapshot:
    """A recorded snapshot shipped with the checkout, and what it was recorded for."""

    path: str  # relative to the checkout
    torch_from: str  # "pypi" | "pytorch": where the kept torch it was recorded for was published
    fits: str  # what it was recorded for, and the flags that replay it


def bundled_path(directory: Path | None = None) -> Path:
    """Where ``bundled.toml`` is below ``directory`` (default: the index definitions' folder); an
    installed tool has none (the caller, on an I/O floor, looks)."""
    return (directory or data_dir()) / BUNDLED


def bundled_snapshots(path: Path) -> tuple[BundledSnapshot, ...]:
    """The rows of the ``bundled.toml`` at ``path``; a bad row raises naming it."""
    r = TomlReader(path)
    out = []
    for i, row in enumerate(r.tables(load_toml(path), "snapshot", "top level")):
        where = f"snapshot #{i + 1}"
        r.unknown_keys(row, ("path", "torch-from", "fits"), where)
        torch_from = r.get(row, "torch-from", str, where, required=True)
        if torch_from not in TORCH_FROM:
            raise r.fail(where, f"'torch-from' {torch_from!r} is not one of {', '.join(TORCH_FROM)}")
        out.append(
            BundledSnapshot(path=r.get(row, "path", str, where, required=True), torch_from=torch_from, fits=r.get(row, "fits", str, where, required=True))
        )
    return tuple(out)


def offline_hint(snapshots: tuple[BundledSnapshot, ...], torch_from: str) -> str | None:
    """The hint for a machine without network whose kept torch was published at ``torch_from``:
    the snapshot that fits it, or None when the checkout has none."""
    fit = next((s for s in snapshots if s.torch_from == torch_from), None)
    if fit is None:
        return None
    return (
        f"no network here? replay a recorded snapshot with --snapshot DIR: a checkout has {fit.path}, recorded for {fit.fits}; "
        "else check the index URL (--index NAME=URL, your uv/pip configuration) and your DNS or proxy"
    )


__all__ = ["BundledSnapshot", "bundled_path", "bundled_snapshots", "offline_hint"]
