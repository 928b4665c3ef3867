"""Issue 15 item 10: no quadratic corners. A long ``with`` list on one name costs work linear in
its length, and a lock of many targets keeps no state of a target once the next one starts (the
Finder, pages and METADATA, is shared on purpose). Shapes are asserted by counting, never timing."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from support.paths import SNAPSHOT

from resolve_gpu_stack.cli import app as cli
from resolve_gpu_stack.resolver import resolve
from resolve_gpu_stack.resolver.factory import CandidateFactory
from resolve_gpu_stack.resolver.requirement import Req
from resolve_gpu_stack.rules.fit import TargetFit


def _config(root: Path, *, withs: int = 1, targets: int = 1) -> Path:
    entries = ", ".join(f'"numpy!=1.0.{i}"' for i in range(withs))
    text = f'[project]\nname = "d"\nversion = "0"\n\n[tool.resolve-gpu-stack]\nsnapshot = "{SNAPSHOT}"\n\n[tool.resolve-gpu-stack.defaults]\npython = "3.12"\ncuda = "cu130"\n'
    for k in range(targets):
        text += f'\n[[tool.resolve-gpu-stack.target]]\nname = "t{k}"\ninstalled = ["torch==2.12.0.dev20260307+cu130"]\nwith = [{entries}]\noutput = ["c/t{k}.txt"]\n'
    path = root / "pyproject.toml"
    path.write_text(text)
    return path


def _checks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, withs: int) -> int:
    """How many times a requirement was checked against a candidate in one lock."""
    calls = 0
    original = Req.is_satisfied_by

    def counting(self: Req, cand, *args) -> bool:
        nonlocal calls
        calls += 1
        return original(self, cand, *args)

    root = tmp_path / str(withs)
    root.mkdir()
    monkeypatch.setattr(Req, "is_satisfied_by", counting)
    try:
        assert cli.main(["lock", "--config", str(_config(root, withs=withs)), "--cache-dir", str(root / "cache")]) == 0
    finally:
        monkeypatch.setattr(Req, "is_satisfied_by", original)
    return calls


def test_a_long_with_list_costs_linear_checks(tmp_path, monkeypatch):
    # resolvelib asks for numpy's candidates again after each of the N requirements is added: the
    # factory must check only the new requirement each time (before: N*N/2 * candidates checks)
    small, large = _checks(tmp_path, monkeypatch, 150), _checks(tmp_path, monkeypatch, 600)
    assert large < 6 * small, (small, large)  # 4x the entries: ~4x the checks, not ~16x


def test_many_targets_keep_no_state_of_earlier_targets(tmp_path, monkeypatch):
    """Each target's factory (its candidates, rejection records) and tag ranks die with it."""
    alive: list[int] = []
    fits: list[int] = []
    original = resolve._resolve

    def counting(*args, **kwargs):
        gc.collect()
        alive.append(sum(isinstance(o, CandidateFactory) for o in gc.get_objects()))
        fits.append(sum(isinstance(o, TargetFit) for o in gc.get_objects()))
        return original(*args, **kwargs)

    monkeypatch.setattr(resolve, "_resolve", counting)
    config = _config(tmp_path, targets=6)
    assert cli.main(["lock", "--config", str(config), "--cache-dir", str(tmp_path / "cache")]) == 0
    assert len(alive) == 6
    assert max(alive) <= 1, alive  # at most the previous target's, held by a remembered error; not one per target
    assert max(fits) <= 1, fits  # the same for the targets' tag ranks (TargetFit)
