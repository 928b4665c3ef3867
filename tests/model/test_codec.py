"""model/codec.py: the one plan codec (stored plans, the pylock tool table, the plan JSON)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from support.plans import COMMAND, make_plan, with_package

from resolve_gpu_stack.cli.render import PLAN_SCHEMA, plan_to_json
from resolve_gpu_stack.lock.pylock import plan_from_lock, read_pylock, render_pylock
from resolve_gpu_stack.model.codec import FILE_KEYS, CodecError, format_datetime, package_from_dict, package_to_dict, plan_from_dict, plan_to_dict
from resolve_gpu_stack.model.plan import Override

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def test_plan_round_trips_through_json() -> None:
    plan = make_plan()
    assert plan_from_dict(json.loads(json.dumps(plan_to_dict(plan)))) == plan


def test_package_dict_has_every_field_in_one_order() -> None:
    torch = make_plan().packages[0]
    assert list(package_to_dict(torch)) == [
        "name",
        "version",
        "action",
        "coupling",
        "index",
        "reason",
        "installed-version",
        "dependencies",
        "url",
        "filename",
        "sha256",
        "size",
        "upload-time",
        "requires-python",
        "built-for",
        "abi-mismatch",
        "simple-index",
        "abi",
        "abi-torch",
        "abi-floor",
        "cuda-majors",
        "abi-builds",
        "abi-refusal",
        "abi-note",
        "abi-read",
        "sdist",
        "built",
    ]
    assert package_from_dict(package_to_dict(torch), "x") == torch


def test_an_abi_verdict_round_trips_and_a_bad_one_names_the_package() -> None:
    from resolve_gpu_stack.model.abi import AbiKind, AbiVerdict

    plan = make_plan()
    verdict = AbiVerdict(kind=AbiKind.STABLE, against="2.12.0.dev20260307+cu130", floor="2.10", cuda_majors=(13,))
    ext = dataclasses.replace(plan.packages[0], name="xformers", abi=verdict)
    assert package_from_dict(json.loads(json.dumps(package_to_dict(ext))), "x").abi == verdict
    provisional = dataclasses.replace(verdict, read="recorded")  # replayed from an older reader's record (issue 48)
    ext = dataclasses.replace(ext, abi=provisional)
    assert package_from_dict(json.loads(json.dumps(package_to_dict(ext))), "x").abi == provisional
    with pytest.raises(CodecError, match="xformers.*not a valid AbiKind|xformers.*bad ABI verdict"):
        package_from_dict({**package_to_dict(ext), "abi": "sideways"}, "x")
    with pytest.raises(CodecError, match="'cuda-majors' must be an array"):
        package_from_dict({**package_to_dict(ext), "cuda-majors": "13"}, "x")


def test_framework_fields_round_trip() -> None:
    """Overrides, built_for and a planned ABI mismatch survive the codec (stored plans, locks)."""
    plan = make_plan()
    kernel = dataclasses.replace(plan.packages[0], name="sgl-kernel", built_for="torch==2.9.1", abi_mismatch=True)
    override = Override(package="sglang", requirement="torch==2.9.1", replaced_by="torch==2.12.0.dev20260307+cu130", reason="the installed torch is kept")
    plan = dataclasses.replace(plan, packages=(*plan.packages, kernel), overrides=(override,))
    data = json.loads(json.dumps(plan_to_dict(plan)))
    assert data["overrides"] == [
        {"package": "sglang", "requirement": "torch==2.9.1", "replaced-by": "torch==2.12.0.dev20260307+cu130", "reason": "the installed torch is kept"}
    ]
    assert plan_from_dict(data) == plan
    assert package_to_dict(plan.packages[0])["abi-mismatch"] is None  # written only when True


def test_optional_keys_may_be_absent() -> None:
    pkg = package_from_dict({"name": "A_B", "version": "1.0", "action": "keep", "coupling": "agnostic", "index": "pypi"}, "x")
    assert pkg.name == "a-b" and pkg.reason == "" and pkg.url is None and pkg.dependencies == ()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"name": None}, r"^p #1: missing 'name'$"),
        ({"action": "sideways"}, r"^p #1 \(flashinfer-python\): 'sideways' is not one of keep, install, upgrade, downgrade, change, build$"),
        ({"version": "one"}, r"'one' is not a version"),
        ({"size": "big"}, r"'size' must be an integer, not a string"),
        ({"size": True}, r"'size' must be an integer, not a boolean"),
        ({"dependencies": [1]}, r"'dependencies' must be a list of names"),
    ],
)
def test_bad_package_dicts_say_where_and_what(change: dict, message: str) -> None:
    raw = {k: v for k, v in {**package_to_dict(make_plan().packages[1]), **change}.items() if v is not None}
    with pytest.raises(CodecError, match=message):
        package_from_dict(raw, "p #1")


def test_bad_plan_dicts_are_value_errors() -> None:
    raw = plan_to_dict(make_plan())
    with pytest.raises(ValueError, match=r"plan\.notes: must be a list of strings"):
        plan_from_dict({**raw, "notes": [1]})
    with pytest.raises(ValueError, match=r"plan: missing 'target'"):
        plan_from_dict({k: v for k, v in raw.items() if k != "target"})


def test_a_datetime_upload_time_reads_as_the_served_spelling() -> None:
    raw = {**package_to_dict(make_plan().packages[0]), "upload-time": dt.datetime(2026, 3, 7, 8, 12, 34, tzinfo=dt.timezone.utc)}
    assert package_from_dict(raw, "x").upload_time == "2026-03-07T08:12:34Z"
    assert format_datetime(dt.datetime(2026, 3, 7, 8, 12, 34, 5, tzinfo=dt.timezone.utc)) == "2026-03-07T08:12:34.000005Z"


def test_the_tool_table_packages_are_the_codecs_dicts_less_what_is_unset() -> None:
    plan = make_plan()
    doc = tomllib.loads(render_pylock(plan, name=None, command=COMMAND))
    tool = {p["name"]: p for p in doc["tool"]["resolve-gpu-stack"]["packages"]}
    kept = package_to_dict(plan.package("torch"))  # listed in [[packages]] (its hash is known): its file is there
    assert tool["torch"] == {k: v for k, v in kept.items() if v is not None and v != [] and k not in FILE_KEYS}
    listed = package_to_dict(plan.package("flashinfer-jit-cache"))
    assert list(tool["flashinfer-jit-cache"]) == ["name", "version", "action", "coupling", "index", "reason"]
    assert all(tool["flashinfer-jit-cache"][k] == listed[k] for k in tool["flashinfer-jit-cache"])


def test_the_plan_json_keeps_its_schema() -> None:
    plan = with_package(make_plan(), "flashinfer-python", size=None)
    data = plan_to_json(plan)
    assert data["schema"] == PLAN_SCHEMA == "resolve-gpu-stack/plan/v1"
    assert list(data) == ["schema", "target", "flashinfer", "packages", "notes", "overrides", "inputs_digest"]
    assert data["overrides"] == []
    assert data["target"] == {"python": "3.12", "platform": "x86_64-manylinux_2_28", "cuda": "cu130"}
    assert data["flashinfer"] == {"version": "0.6.16", "cuda_label": "cu130"}
    fi = next(p for p in data["packages"] if p["name"] == "flashinfer-python")
    assert fi == {
        "name": "flashinfer-python",
        "version": "0.6.16",
        "action": "upgrade",
        "installed": "0.6.10",
        "index": "pypi",
        "url": "https://files.pypi.example/packages/flashinfer_python-0.6.16-py3-none-any.whl",
        "sha256": fi["sha256"],
        "size": None,
        "coupling": "agnostic",
        "reason": "requested",
        "built_for": None,
        "abi_mismatch": False,
        "abi": None,
    }
    assert data["notes"] == list(plan.notes) and data["inputs_digest"] == plan.inputs_digest
    assert plan_to_json(replace(plan, flashinfer_version=None, cuda_label=None))["flashinfer"] == {"version": None, "cuda_label": None}


def test_a_pylock_reads_back_to_its_plan_through_the_codec() -> None:
    plan = make_plan()
    text = render_pylock(plan, name="gpu", command=COMMAND)
    back = plan_from_lock(read_pylock(Path("pylock.gpu.toml"), text))
    assert back == replace(plan, packages=tuple(sorted(plan.packages, key=lambda p: p.name)))
