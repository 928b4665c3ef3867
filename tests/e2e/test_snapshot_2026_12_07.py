"""The snapshot of today (``indexes/snapshots/2026-12-07``), replayed offline.

Recorded from PyPI by ``indexes/snapshots/tools/record_2026_12_07.py``: PyPI's torch 2.15.0 kept
(declared), FlashInfer's own host unreachable (the plan is made without its parts, one warning), then
``--with sglang`` (plans), ``--with vllm`` (stops: vllm 0.34.0 pins flashinfer-python==0.7.3, which
no index serves) and ``--with vllm==0.33.0`` (the way out the error names: plans). A replay prints
what the live run printed, byte for byte once PyPI's file URLs are cut to their path and the reason
FlashInfer's host could not be read is cut (live: the name did not resolve; replayed: no page).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from support.doors import run_cli
from support.paths import REPO

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SNAPSHOT = REPO / "indexes" / "snapshots" / "2026-12-07"


def recorder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("record_2026_12_07", REPO / "indexes" / "snapshots" / "tools" / "record_2026_12_07.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rows(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in plan["packages"]}


@pytest.mark.parametrize("story", ["sglang", "vllm"])
def test_replaying_todays_snapshot_prints_the_live_plan_byte_for_byte(
    story: str, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    rec = recorder()
    code, out, err = run_cli(capsys, *rec.story_argv(story), "--snapshot", str(SNAPSHOT), "--cache-dir", str(tmp_path / "c"), "--format", "json")
    assert code == 0, err
    assert rec.relative_plan(out) == (SNAPSHOT / "plans" / f"{story}.json").read_text()
    # FlashInfer's host unreadable: one warning, naming the host and what was left out
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "flashinfer.ai cannot be read" in warnings[0], warnings
    assert "planned without flashinfer-cubin, flashinfer-jit-cache" in warnings[0]


def test_vllm_newest_stops_naming_its_pin_no_index_serves_and_the_ways_out(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rec = recorder()
    code, out, err = run_cli(capsys, *rec.story_argv("vllm-newest"), "--snapshot", str(SNAPSHOT), "--cache-dir", str(tmp_path / "c"), "--format", "json")
    assert code == 1 and out == "", (code, out)
    recorded = (SNAPSHOT / "plans" / "vllm-newest.txt").read_text()
    error = recorded[recorded.index("error:") :]
    assert rec.relative_error(err).endswith(error), err
    assert "vllm 0.34.0 requires flashinfer-python==0.7.3, which no index serves" in error
    assert "--with 'vllm==0.33.0'" in error


def test_sglang_today_plans_flashinfer_python_from_pypi_for_cuda_13_without_the_hosts_parts() -> None:
    plan = json.loads((SNAPSHOT / "plans" / "sglang.json").read_text())
    got = rows(plan)
    assert plan["target"]["cuda"] == "cu132"
    assert (got["torch"]["version"], got["torch"]["action"]) == ("2.15.0", "keep")
    assert got["sglang"]["version"] == "0.5.23" and got["sglang-kernel"]["abi"]["refusal"] is None
    assert got["flashinfer-python"]["index"] == "pypi"
    assert "flashinfer-cubin" not in got and "flashinfer-jit-cache" not in got
    assert all(r["index"] != "pytorch" for r in plan["packages"])


def test_vllm_0_33_0_today_plans_on_the_kept_torch() -> None:
    got = rows(json.loads((SNAPSHOT / "plans" / "vllm.json").read_text()))
    assert got["vllm"]["version"] == "0.33.0" and got["vllm"]["coupling"] == "torch-stable"
    assert got["torch"]["action"] == "keep"


def test_the_offline_hint_can_name_todays_snapshot() -> None:
    bundled = tomllib.loads((REPO / "indexes" / "snapshots" / "bundled.toml").read_text())["snapshot"]
    assert bundled[0]["path"] == "indexes/snapshots/2026-12-07" and bundled[0]["torch-from"] == "pypi"
    assert all((REPO / s["path"] / "manifest.json").is_file() for s in bundled)
