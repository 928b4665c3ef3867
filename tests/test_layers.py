"""The floor plan holds: every subpackage imports only from the floors below it, the pure floors
import no I/O library, and ``--help`` stays light."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "resolve_gpu_stack"

# Bottom to top. A module may import from its own floor and from any floor below it.
FLOORS = ["errors", "urls", "model", "data", "index", "rules", "resolver", "net", "lock", "env", "cli"]
PURE = ["errors", "urls", "model", "data", "index", "rules", "resolver"]
IO_MODULES = {"httpx", "subprocess", "socket", "requests", "urllib.request", "http.client"}


def floor_of(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if floor_of(p) in FLOORS)


def imports(path: Path) -> tuple[set[str], set[str]]:
    """(absolute imports, floors reached by relative or package-absolute imports)."""
    tree = ast.parse(path.read_text())
    package = path.relative_to(SRC).parent.parts
    absolute: set[str] = set()
    floors: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                absolute.add(alias.name)
                if alias.name.startswith("resolve_gpu_stack."):
                    floors.add(alias.name.split(".")[1])
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                absolute.add(node.module)
                if node.module.startswith("resolve_gpu_stack."):
                    floors.add(node.module.split(".")[1])
            elif node.level:
                base = list(package[: len(package) - (node.level - 1)]) if node.level > 1 else list(package)
                target = base + (node.module.split(".") if node.module else [])
                if target:
                    floors.add(target[0])
                else:  # "from . import x" at the package root
                    floors |= {a.name for a in node.names}
    return absolute, floors


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_imports_only_from_floors_below(path: Path) -> None:
    mine = FLOORS.index(floor_of(path))
    _, floors = imports(path)
    above = sorted(f for f in floors if f in FLOORS and FLOORS.index(f) > mine)
    assert not above, f"{path.relative_to(SRC)} (floor {floor_of(path)}) imports from a floor above it: {above}"


@pytest.mark.parametrize("path", [p for p in modules() if floor_of(p) in PURE], ids=lambda p: str(p.relative_to(SRC)))
def test_pure_floors_do_no_io(path: Path) -> None:
    absolute, _ = imports(path)
    assert not (absolute & IO_MODULES), f"{path.relative_to(SRC)} imports an I/O module"


def test_every_module_is_on_a_floor() -> None:
    stray = [str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if floor_of(p) not in FLOORS and p.parent == SRC and p.stem not in ("__init__", "__main__")]
    stray += [str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if p.parent != SRC and floor_of(p) not in FLOORS]
    assert not stray, f"modules outside the floor plan: {stray}"


def test_help_imports_nothing_heavy():
    code = "import sys; from resolve_gpu_stack.cli import build_parser; build_parser().format_help(); print(sorted(m for m in ('httpx','resolvelib','rich','bs4') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
