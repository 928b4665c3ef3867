"""Every output schema has a JSON Schema file in schemas/, and what the commands write matches it.

Every JSON object a command prints is validated in every test (``conftest.every_json_output_is_valid``);
here each schema is exercised at least once, the files written to disk (lock tables, manifests)
too, and a wrong object is shown to fail.
"""

from __future__ import annotations

import copy
import json
import re
import sys

import pytest
from support.output_schemas import SCHEMA_ID, SCHEMAS, schema_file, validate, validator
from support.paths import REPO, SNAPSHOT

from resolve_gpu_stack.cli.app import main

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

STORY = ["--python", "3.12", "--platform", "x86_64-manylinux_2_28", "--installed", "torch==2.12.0.dev20260307+cu130", "--snapshot", str(SNAPSHOT)]


def schema_ids_in_source() -> set[str]:
    text = "\n".join(p.read_text() for p in (REPO / "src" / "resolve_gpu_stack").rglob("*.py"))
    return set(re.findall(r"resolve-gpu-stack/[a-z][a-z0-9-]*/v\d+", text))


def test_every_schema_the_source_names_has_a_file_and_every_file_a_schema():
    named = schema_ids_in_source()
    assert {
        "resolve-gpu-stack/plan/v1",
        "resolve-gpu-stack/install/v1",
        "resolve-gpu-stack/check/v1",
        "resolve-gpu-stack/candidates/v1",
        "resolve-gpu-stack/doctor/v1",
        "resolve-gpu-stack/cache/v1",
        "resolve-gpu-stack/wheelhouse-report/v1",
    } <= named
    files = {p.name for p in SCHEMAS.glob("*.json")}
    assert {schema_file(s).name for s in named} == files
    for path in SCHEMAS.glob("*.json"):
        doc = json.loads(path.read_text())
        assert SCHEMA_ID.match(doc["title"]) and schema_file(doc["title"]) == path
        assert doc["properties"]["schema"] == {"const": doc["title"]}
        validator(doc["title"])  # a valid draft 2020-12 schema


def run_json(capsys, *argv: str) -> dict:
    assert main(list(argv)) in (0, 1)
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param([*STORY, "--format", "json"], id="plan"),
        pytest.param(
            ["candidates", "flashinfer-jit-cache", "--cuda", "cu130", "--python", "3.12", "--snapshot", str(SNAPSHOT), "--format", "json"], id="candidates"
        ),
        pytest.param(["doctor", "--python", sys.executable, "--format", "json"], id="doctor"),
    ],
)
def test_command_outputs_match_their_schemas(capsys, argv):
    data = run_json(capsys, *argv)
    validate(data)


def test_check_and_cache_outputs_match_their_schemas(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    validate(run_json(capsys, "check", "--format", "json"))
    validate(run_json(capsys, "cache", "--cache-dir", str(tmp_path), "--format", "json"))


def test_files_written_to_disk_match_their_schemas():
    for lock in sorted((REPO / "constraints").glob("pylock.*.toml")):
        validate(tomllib.loads(lock.read_text())["tool"]["resolve-gpu-stack"])
    validate(json.loads((SNAPSHOT / "manifest.json").read_text()))


def test_a_wheelhouse_manifest_and_report_match_their_schemas(tmp_path):
    from packaging.utils import NormalizedName
    from packaging.version import Version

    from resolve_gpu_stack.env.wheelhouse import WheelhouseReport
    from resolve_gpu_stack.lock.wheelhouse import house_file, manifest_json

    house = house_file(
        filename="demo-1.0-py3-none-any.whl",
        name=NormalizedName("demo"),
        version=Version("1.0"),
        sha256="a" * 64,
        size=10,
        metadata_sha256="b" * 64,
        requires_python=">=3.10",
        upload_time=None,
        locks=("pylock.x.toml",),
    )
    validate(json.loads(manifest_json([house], ["pylock.x.toml"])))
    validate(WheelhouseReport(output=tmp_path, files=(house,), fetched=(house.wheel.filename,), reused=(), written=("wheelhouse.json",)).to_json())


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["packages"][0].update(action="reinstall"), "'reinstall' is not one of"),
        (lambda d: d["packages"][0].pop("version"), "'version' is a required property"),
        (lambda d: d["packages"][0].update(surprise=1), "Additional properties are not allowed ('surprise' was unexpected)"),
        (lambda d: d.update(inputs_digest="md5:0"), "does not match"),
    ],
)
def test_a_wrong_plan_fails_its_schema(capsys, edit, message):
    good = run_json(capsys, *STORY, "--format", "json")
    bad = copy.deepcopy(good)
    edit(bad)
    with pytest.raises(AssertionError, match=re.escape(message)):
        validate(bad)
