"""Complexity stays in bounds (issue 51): no function, method or class of ``src/`` ranks D or
worse by radon's cyclomatic complexity (over 20 paths: split it into well-named steps, or make the
branching data under indexes/ where it is compatibility knowledge), and no module ranks below B by
radon's maintainability index (under 10: split the module). The same figures as ``radon cc -n D
src`` and ``radon mi -n C src`` (multi-line strings counted as comments, radon's default)."""

from __future__ import annotations

from pathlib import Path

from radon.complexity import cc_rank, cc_visit
from radon.metrics import mi_rank, mi_visit
from support.paths import SRC

WORST_BLOCK = "C"  # radon cc: A 1-5, B 6-10, C 11-20, D 21-30, E 31-40, F 41+
WORST_MODULE = "B"  # radon mi: A 20-100, B 10-19, C 0-9


def modules() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def test_the_source_tree_is_measured() -> None:
    assert len(modules()) > 100, f"{SRC}: the measure would pass over an empty tree"


def test_no_block_ranks_worse_than_c() -> None:
    worse = [
        f"{path.relative_to(SRC)}:{block.lineno} {block.fullname} - {cc_rank(block.complexity)} ({block.complexity})"
        for path in modules()
        for block in cc_visit(path.read_text())
        if cc_rank(block.complexity) > WORST_BLOCK
    ]
    assert not worse, "blocks over radon's C (split them into smaller, well-named functions):\n" + "\n".join(worse)


def test_no_module_ranks_below_b() -> None:
    worse = [
        f"{path.relative_to(SRC)} - {mi_rank(mi)} ({mi:.2f})" for path in modules() if mi_rank(mi := mi_visit(path.read_text(), multi=True)) > WORST_MODULE
    ]
    assert not worse, "modules below radon's maintainability B (split them by what they do):\n" + "\n".join(worse)
