"""Where things are: the repository and its parts, for the tests and their helpers wherever they lie."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
SRC = REPO / "src" / "resolve_gpu_stack"
DATA = TESTS / "support" / "data"
SNAPSHOT = REPO / "indexes" / "snapshots" / "2026-03-07"
