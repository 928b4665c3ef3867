"""The December snapshot (``indexes/snapshots/2026-12-01``): today's world, replayed offline.

Recorded from today's PyPI by ``indexes/snapshots/tools/record_2026_12_01.py``: PyPI's torch 2.15.0
kept (declared: no label, CUDA 13.2 from its own METADATA), then ``--with sglang`` and ``--with
vllm``. Replaying it prints the plan the live run printed (``plans/STORY.json``), byte for byte
once PyPI's file URLs are cut to their path as the snapshot keeps them; every door that reaches the
kept torch's exports (``resolve``, ``lock``, ``inspect``) reads them from the snapshot.
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

SNAPSHOT = REPO / "indexes" / "snapshots" / "2026-12-01"


def recorder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("record_2026_12_01", REPO / "indexes" / "snapshots" / "tools" / "record_2026_12_01.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rows(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in plan["packages"]}


@pytest.mark.parametrize("story", ["sglang", "vllm"])
def test_replaying_the_december_snapshot_prints_the_live_plan_byte_for_byte(story: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rec = recorder()
    code, out, err = run_cli(capsys, *rec.story_argv(story), "--snapshot", str(SNAPSHOT), "--cache-dir", str(tmp_path / "c"), "--format", "json")
    assert code == 0, err
    recorded = (SNAPSHOT / "plans" / f"{story}.json").read_text()
    assert rec.relative_plan(out) == recorded


def test_sglang_on_pypis_torch_plans_the_newest_release_its_kernels_and_twins_its_pin_overridden(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    plan = json.loads((SNAPSHOT / "plans" / "sglang.json").read_text())
    got = rows(plan)
    assert plan["target"]["cuda"] == "cu132"
    assert (got["torch"]["version"], got["torch"]["action"]) == ("2.15.0", "keep")
    assert got["sglang"]["version"] == "0.5.23" and "sglang pins torch==2.14.1; kept 2.15.0" in got["sglang"]["reason"]
    assert got["sglang-kernel"]["version"] == "0.4.10" and got["sglang-kernel"]["abi"]["refusal"] is None
    assert got["torch-memory-saver"]["version"] == "0.0.10"
    assert any("builds per CUDA major" in n and "CUDA 13 ones decide" in n for n in plan["notes"])
    # the family follows its torch: PyPI's releases, judged by their scans (C-shim only, floors)
    for name in ("torchvision", "torchaudio", "torchcodec"):
        assert got[name]["index"] == "pypi" and got[name]["coupling"] == "torch-stable", got[name]
    assert all(r["index"] != "pytorch" for r in plan["packages"])


def test_vllm_on_pypis_torch_plans_its_stable_abi_release_over_its_pin() -> None:
    got = rows(json.loads((SNAPSHOT / "plans" / "vllm.json").read_text()))
    assert got["vllm"]["version"] == "0.33.0" and got["vllm"]["coupling"] == "torch-stable"
    assert "vllm pins torch==2.14.0; kept 2.15.0" in got["vllm"]["reason"]


def test_inspect_and_lock_read_the_kept_torchs_exports_from_the_snapshot(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rec = recorder()
    declared = list(rec.TARGET[:6])  # --python, --platform, --installed torch==2.15.0
    code, out, err = run_cli(
        capsys, "inspect", "sglang-kernel==0.4.10", *declared, "--snapshot", str(SNAPSHOT), "--cache-dir", str(tmp_path / "c"), "--format", "json"
    )
    assert code == 0, err
    verdict = json.loads(out)["verdict"]
    assert verdict["runs"] is True and "122 C++ imports of torch are all exported by torch 2.15.0" in verdict["note"]
    lock = tmp_path / "pylock.sglang.toml"
    code, out, err = run_cli(capsys, "lock", *rec.story_argv("sglang"), "--snapshot", str(SNAPSHOT), "--cache-dir", str(tmp_path / "c"), "-o", str(lock))
    assert code == 0, err
    packages = {p["name"]: p for p in tomllib.loads(lock.read_text())["packages"]}
    assert packages["sglang"]["version"] == "0.5.23" and packages["sglang-kernel"]["version"] == "0.4.10"
    assert all("sha256" in w["hashes"] for p in packages.values() for w in p.get("wheels", []))


def test_export_uv_of_the_vllm_story_takes_everything_from_pypi_and_says_nothing_false(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PyPI's torch is listed on PyPI, the project's default index: no "no index lists it" warning,
    no uv index for the PyTorch index (the family follows its torch to PyPI), torch held by override."""
    rec = recorder()
    project = tmp_path / "demo"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "demo"\nversion = "0.1.0"\nrequires-python = ">=3.12"\ndependencies = []\n')
    monkeypatch.chdir(project)
    code, out, err = run_cli(capsys, "export", "uv", *rec.story_argv("vllm"), "--snapshot", str(SNAPSHOT), "--cache-dir", str(tmp_path / "c"))
    assert code == 0, err
    assert "no index lists it" not in err, err
    doc = tomllib.loads((project / "pyproject.toml").read_text())
    uv = doc["tool"]["uv"]
    assert "index" not in uv and "sources" not in uv, uv
    assert {"torch==2.15.0", "torchvision==0.29.2", "torchaudio==2.11.1"} <= set(uv["override-dependencies"])
