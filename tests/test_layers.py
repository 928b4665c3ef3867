"""The layering holds: pure modules import no I/O libraries; bs4 only in parse.py; --help is light."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "resolve_gpu_stack"
PURE = ["models", "errors", "indexes", "parse", "policy", "provider", "resolve", "finder", "lockfile"]
IO_MODULES = {"httpx", "subprocess", "socket", "requests", "urllib.request"}


def imported(module: str) -> set[str]:
    tree = ast.parse((SRC / f"{module}.py").read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


@pytest.mark.parametrize("module", PURE)
def test_pure_layers_do_no_io(module):
    assert not (imported(module) & IO_MODULES), f"{module} imports an I/O module"


def test_bs4_only_in_parse():
    users = [p.stem for p in SRC.glob("*.py") if any(m == "bs4" or m.startswith("bs4.") for m in imported(p.stem))]
    assert users in ([], ["parse"])


def test_help_imports_nothing_heavy():
    code = "import sys; from resolve_gpu_stack.cli import build_parser; build_parser().format_help(); print(sorted(m for m in ('httpx','resolvelib','rich','bs4') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
