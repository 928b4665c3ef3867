from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from packaging.version import Version
from support.plans import COMMAND, SHA, TORCH, make_plan, with_package

from resolve_gpu_stack.errors import LockFileError, UsageError
from resolve_gpu_stack.lock import files as lockfile
from resolve_gpu_stack.lock.constraints import render_constraints
from resolve_gpu_stack.lock.files import read_lock, write_lock
from resolve_gpu_stack.lock.pylock import plan_from_lock, read_pylock, render_pylock, target_marker
from resolve_gpu_stack.model import Action, Coupling, LockedPackage, LockPlan, TargetSummary
from resolve_gpu_stack.model.inputs import inputs_digest
from resolve_gpu_stack.urls import strip_credentials

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def sorted_plan(plan: LockPlan) -> LockPlan:
    return replace(plan, packages=tuple(sorted(plan.packages, key=lambda p: p.name)))


def pkg(plan: LockPlan, name: str) -> LockedPackage:
    found = plan.package(name)
    assert found is not None
    return found


# -- inputs digest -------------------------------------------------------------------------------


def test_inputs_digest_is_sha256_of_sorted_compact_json() -> None:
    expected = "sha256:" + hashlib.sha256(b'{"a":1,"b":[1,"x"],"c":{"d":true,"e":"\\u00fc"}}').hexdigest()
    assert inputs_digest({"c": {"e": "ü", "d": True}, "b": (1, "x"), "a": 1}) == expected


def test_inputs_digest_normalizes_and_discriminates() -> None:
    base = {"torch": Version("2.12.0"), "labels": frozenset({"cu130", "cu128"}), "unset": None}
    assert inputs_digest(base) == inputs_digest({"torch": "2.12.0", "labels": ["cu128", "cu130"]})
    assert inputs_digest(base) != inputs_digest({"torch": "2.12.1", "labels": ["cu128", "cu130"]})
    assert inputs_digest({"a": 1}) != inputs_digest({"a": "1"})
    assert inputs_digest({"a": True}) != inputs_digest({"a": 1})


@pytest.mark.parametrize("bad", [{"x": object()}, {"x": float("nan")}, {1: "a"}, {"x": 2**70}])
def test_inputs_digest_refuses_what_a_lock_cannot_hold(bad: dict) -> None:
    with pytest.raises(TypeError):
        inputs_digest(bad)


# -- pylock ------------------------------------------------------------------------------------


def test_pylock_top_level_follows_pep_751() -> None:
    doc = tomllib.loads(render_pylock(make_plan(), name="gpu", command=COMMAND))
    assert doc["lock-version"] == "1.0"
    assert doc["created-by"] == "resolve-gpu-stack"
    assert doc["requires-python"] == "==3.12.*"
    assert doc["environments"] == ["platform_machine == 'x86_64' and sys_platform == 'linux' and python_version == '3.12'"]


def test_pylock_lists_wheels_sorted_with_hashes_and_the_kept_torch_at_its_hash() -> None:
    doc = tomllib.loads(render_pylock(make_plan(), name=None, command=COMMAND))
    names = [p["name"] for p in doc["packages"]]
    assert names == ["flashinfer-cubin", "flashinfer-jit-cache", "flashinfer-python", "torch"]
    # kept, listed at its installed version and hash so that `uv pip sync` finds it satisfied (issue 13, item 3)
    torch = doc["packages"][3]
    assert torch["version"] == TORCH and torch["wheels"][0]["hashes"] == {"sha256": SHA["torch"]}
    assert "kept-unlisted" not in doc["tool"]["resolve-gpu-stack"]
    fi = doc["packages"][2]
    assert fi["version"] == "0.6.16"
    assert fi["index"] == "https://pypi.example/simple/"
    assert fi["requires-python"] == ">=3.10"
    (wheel,) = fi["wheels"]
    assert wheel["name"] == "flashinfer_python-0.6.16-py3-none-any.whl"
    assert wheel["url"].endswith("/flashinfer_python-0.6.16-py3-none-any.whl")
    assert wheel["size"] == 4_000_000
    assert wheel["hashes"] == {"sha256": SHA["fi"]}
    assert wheel["upload-time"] == dt.datetime(2026, 3, 1, 10, 0, 0, 250000, tzinfo=dt.timezone.utc)
    jit = doc["packages"][1]
    assert jit["index"] == "https://flashinfer.ai/whl/"
    assert "size" not in jit["wheels"][0] and "upload-time" not in jit["wheels"][0]


def test_a_kept_package_without_a_hash_is_named_unlisted_in_the_tool_table() -> None:
    plan = with_package(make_plan(), "torch", sha256=None)
    doc = tomllib.loads(render_pylock(plan, name=None, command=COMMAND))
    assert "torch" not in [p["name"] for p in doc["packages"]]
    unlisted = doc["tool"]["resolve-gpu-stack"]["kept-unlisted"]
    assert unlisted["packages"] == ["torch"] and "uv pip sync" in unlisted["why"]


def test_pylock_tool_table_records_torch_pin_group_and_couplings() -> None:
    doc = tomllib.loads(render_pylock(make_plan(), name="gpu", command=COMMAND))
    tool = doc["tool"]["resolve-gpu-stack"]
    assert tool["schema"] == "resolve-gpu-stack/lock/v1"
    assert tool["command"] == COMMAND
    assert tool["inputs-digest"] == make_plan().inputs_digest
    assert tool["inputs"] == make_plan().inputs
    assert tool["target"] == {"python": "3.12", "platform": "x86_64-manylinux_2_28", "cuda": "cu130"}
    assert tool["torch"]["version"] == TORCH
    assert tool["torch"]["action"] == "keep"
    assert tool["torch"]["local"] == "cu130"
    assert tool["torch"]["index"] == "installed"
    assert tool["torch"]["url"].startswith("https://download.pytorch.org/whl/nightly/cu130/")
    assert tool["cuda-label"] == "cu130"
    assert tool["flashinfer"] == {
        "version": "0.6.16",
        "components": ["flashinfer-cubin", "flashinfer-jit-cache", "flashinfer-python"],
    }
    assert tool["indexes"]["pytorch"] == "https://download.pytorch.org/whl/"
    assert tool["notes"] == ["torch kept at the installed nightly", "jit-cache: cu130"]
    by_name = {p["name"]: p for p in tool["packages"]}
    assert [p["name"] for p in tool["packages"]] == sorted(by_name)
    assert by_name["torch"]["action"] == "keep" and by_name["torch"]["coupling"] == "torch"
    assert by_name["flashinfer-jit-cache"]["coupling"] == "cuda"
    assert by_name["flashinfer-jit-cache"]["index"] == "flashinfer"
    assert by_name["flashinfer-python"]["reason"] == "requested"


def test_pylock_is_deterministic_whatever_the_plan_order() -> None:
    plan = make_plan()
    shuffled = replace(plan, packages=tuple(reversed(plan.packages)))
    assert render_pylock(plan, name=None, command=COMMAND) == render_pylock(shuffled, name=None, command=COMMAND)


def test_pylock_refuses_a_wheel_without_sha256_and_names_it() -> None:
    plan = with_package(make_plan(), "flashinfer-jit-cache", sha256=None)
    with pytest.raises(LockFileError, match="flashinfer-jit-cache 0.6.16\\+cu130") as err:
        render_pylock(plan, name=None, command=COMMAND)
    assert err.value.hint and "download" in err.value.hint


def test_pylock_refuses_a_package_to_install_without_a_url() -> None:
    plan = with_package(make_plan(), "flashinfer-cubin", url=None)
    with pytest.raises(LockFileError, match="flashinfer-cubin"):
        render_pylock(plan, name=None, command=COMMAND)


def test_kept_package_needs_no_hash() -> None:
    plan = with_package(make_plan(), "torch", sha256=None, url=None, filename=None, size=None, upload_time=None)
    doc = tomllib.loads(render_pylock(plan, name=None, command=COMMAND))
    assert "torch" not in [p["name"] for p in doc["packages"]]
    assert "url" not in doc["tool"]["resolve-gpu-stack"]["torch"]


def test_pylock_with_only_kept_packages_still_has_a_packages_array() -> None:
    plan = replace(make_plan(), packages=(replace(pkg(make_plan(), "torch"), sha256=None),), flashinfer_version=None)
    doc = tomllib.loads(render_pylock(plan, name=None, command=COMMAND))
    assert doc["packages"] == []
    assert "flashinfer" not in doc["tool"]["resolve-gpu-stack"]


def test_pylock_refuses_a_plan_listing_a_package_twice() -> None:
    plan = make_plan()
    plan = replace(plan, packages=plan.packages + (pkg(plan, "flashinfer-cubin"),))
    with pytest.raises(LockFileError, match="flashinfer-cubin twice"):
        render_pylock(plan, name=None, command=COMMAND)


@pytest.mark.parametrize(
    ("served", "written"),
    [
        ("2026-03-01T10:00:00Z", "2026-03-01T10:00:00Z"),
        ("2026-03-01T10:00:00+00:00", "2026-03-01T10:00:00Z"),
        ("2026-03-01T12:00:00.5+02:00", "2026-03-01T10:00:00.500000Z"),
        ("2026-03-01t05:30:00.1234567-04:30", "2026-03-01T10:00:00.123456Z"),
    ],
)
def test_upload_time_is_written_as_a_utc_toml_datetime(served: str, written: str) -> None:
    plan = with_package(make_plan(), "flashinfer-python", upload_time=served)
    text = render_pylock(plan, name=None, command=COMMAND)
    assert f"upload-time = {written}\n" in text


@pytest.mark.parametrize("bad", ["yesterday", "2026-03-01T10:00:00", "2026-02-30T10:00:00Z", "2026-03-01T10:00:00+25:00"])
def test_bad_upload_time_is_an_error_naming_the_package(bad: str) -> None:
    plan = with_package(make_plan(), "flashinfer-python", upload_time=bad)
    with pytest.raises(LockFileError, match="flashinfer-python 0.6.16"):
        render_pylock(plan, name=None, command=COMMAND)


@pytest.mark.parametrize(
    ("target", "marker"),
    [
        (
            TargetSummary(python="3.13.1", platform="aarch64-manylinux_2_28", cuda=None),
            "platform_machine == 'aarch64' and sys_platform == 'linux' and python_version == '3.13'",
        ),
        (
            TargetSummary(python="3.10", platform="arm64-macosx_14_0", cuda=None),
            "platform_machine == 'arm64' and sys_platform == 'darwin' and python_version == '3.10'",
        ),
        (TargetSummary(python="", platform="x86_64", cuda=None), "platform_machine == 'x86_64'"),
        (TargetSummary(python="", platform="", cuda=None), None),
    ],
)
def test_target_marker(target: TargetSummary, marker: str | None) -> None:
    assert target_marker(target) == marker


def test_unknown_python_leaves_out_requires_python_and_environments() -> None:
    plan = make_plan(target=TargetSummary(python="", platform="", cuda=None))
    doc = tomllib.loads(render_pylock(plan, name=None, command=COMMAND))
    assert "requires-python" not in doc and "environments" not in doc
    assert doc["tool"]["resolve-gpu-stack"]["target"] == {"python": "", "platform": ""}


def test_bad_target_python_is_an_error() -> None:
    plan = make_plan(target=TargetSummary(python="three", platform="x86_64-manylinux_2_28", cuda=None))
    with pytest.raises(LockFileError, match="'three'"):
        render_pylock(plan, name=None, command=COMMAND)


# -- TOML strings ------------------------------------------------------------------------------

text_no_surrogates = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60)


@given(text_no_surrogates, text_no_surrogates)
def test_any_string_survives_a_pylock_round_trip(reason: str, note: str) -> None:
    plan = replace(with_package(make_plan(), "flashinfer-python", reason=reason), notes=(note,))
    back = plan_from_lock(read_pylock(Path("pylock.toml"), render_pylock(plan, name=None, command=COMMAND)))
    assert back.package("flashinfer-python").reason == reason and back.notes == (note,)


def test_a_lone_surrogate_is_an_error_not_a_broken_file() -> None:
    plan = with_package(make_plan(), "flashinfer-python", reason="bad \ud800")
    with pytest.raises(LockFileError, match="surrogate"):
        render_pylock(plan, name=None, command=COMMAND)


def test_hostile_strings_survive_a_pylock_round_trip(tmp_path: Path) -> None:
    reason = 'he said "hi" \\ \n[[packages]]\nname = "evil"\r\t\x01 ünïcødé ✓'
    plan = with_package(make_plan(), "flashinfer-python", reason=reason)
    plan = replace(plan, notes=(reason,), inputs={"weird key = [x]": reason, "n": [1, 2.5, {"k": reason}]})
    path = write_lock(plan, tmp_path / "pylock.toml", command=COMMAND)
    locked = read_lock(path)
    assert [e.name for e in locked.entries] == ["flashinfer-cubin", "flashinfer-jit-cache", "flashinfer-python", "torch"]
    back = plan_from_lock(locked)
    assert pkg(back, "flashinfer-python").reason == reason
    assert back.notes == (reason,)
    assert back.inputs == plan.inputs


# -- round trips -------------------------------------------------------------------------------


def test_pylock_round_trip_gives_the_same_plan(tmp_path: Path) -> None:
    plan = make_plan()
    path = write_lock(plan, tmp_path / "pylock.gpu.toml", command=COMMAND)
    locked = read_lock(path)
    assert locked.format == "pylock"
    assert locked.name == "gpu"
    assert locked.command == COMMAND
    assert locked.inputs_match_digest
    assert locked.torch is not None and locked.torch.version == Version(TORCH) and locked.torch.version.local == "cu130"
    assert locked.flashinfer_components == ("flashinfer-cubin", "flashinfer-jit-cache", "flashinfer-python")
    jit = next(e for e in locked.entries if e.name == "flashinfer-jit-cache")
    assert jit.wheels[0].sha256 == SHA["jit"] and jit.simple_index == "https://flashinfer.ai/whl/"
    assert plan_from_lock(locked) == sorted_plan(plan)


def test_pylock_round_trip_without_optional_fields(tmp_path: Path) -> None:
    plan = LockPlan(
        target=TargetSummary(python="3.11", platform="x86_64-manylinux_2_28", cuda=None),
        packages=(
            LockedPackage(
                name="demo-a",
                version=Version("1.0"),
                action=Action.INSTALL,
                index="local",
                coupling=Coupling.AGNOSTIC,
                url="http://127.0.0.1:1/demo_a-1.0-py3-none-any.whl",
                filename="demo_a-1.0-py3-none-any.whl",
                sha256=SHA["fi"],
            ),
        ),
    )
    back = plan_from_lock(read_lock(write_lock(plan, tmp_path / "pylock.toml", command="x")))
    assert back == replace(plan, inputs_digest=inputs_digest({}))


def test_digest_mismatch_is_visible_after_hand_editing(tmp_path: Path) -> None:
    path = write_lock(make_plan(), tmp_path / "pylock.toml", command=COMMAND)
    path.write_text(path.read_text().replace('torch_channel = "nightly"', 'torch_channel = "stable"'))
    assert not read_lock(path).inputs_match_digest


def test_constraints_content() -> None:
    text = render_constraints(make_plan(), command=COMMAND)
    lines = text.splitlines()
    assert lines[0] == "# This file was generated by resolve-gpu-stack via the following command:"
    assert lines[1] == f"#    {COMMAND}"
    assert f"# inputs-digest: {make_plan().inputs_digest}" in lines
    assert "# target: python=3.12 platform=x86_64-manylinux_2_28 cuda=cu130" in lines
    assert "#   pytorch: https://download.pytorch.org/whl/" in lines
    pins = [ln for ln in lines if ln and not ln.startswith("#")]
    assert [p.split("==")[0] for p in pins] == ["flashinfer-cubin", "flashinfer-jit-cache", "flashinfer-python", "torch"]
    assert f"torch=={TORCH}  # index=installed action=keep coupling=torch" in pins
    assert "flashinfer-jit-cache==0.6.16+cu130  # index=flashinfer action=install coupling=cuda" in pins
    for line in lines:
        assert not line.lstrip().startswith("-")
        if not line.startswith("#"):
            assert not re.search(r"(-i|--index-url|--extra-index-url|--find-links|-f)\b", line)


def test_constraints_command_cannot_inject_lines() -> None:
    text = render_constraints(make_plan(), command="resolve-gpu-stack lock\n--index-url http://evil.example/\r-f x")
    assert all(line.startswith("#") or "==" in line or not line for line in text.splitlines())
    assert "#    resolve-gpu-stack lock --index-url http://evil.example/ -f x" in text


def test_constraints_round_trip(tmp_path: Path) -> None:
    plan = make_plan()
    path = write_lock(plan, tmp_path / "constraints.txt", command=COMMAND)
    locked = read_lock(path)
    assert locked.format == "constraints"
    assert locked.command == COMMAND
    assert locked.inputs_digest == plan.inputs_digest
    assert locked.target == plan.target
    assert locked.indexes == plan.indexes
    assert locked.notes == plan.notes
    want = {(p.name, p.version, p.action, p.coupling, p.index) for p in plan.packages}
    assert {(p.name, p.version, p.action, p.coupling, p.index) for p in locked.pins} == want
    assert locked.torch is not None and str(locked.torch.version) == TORCH and locked.torch.action is Action.KEEP
    with pytest.raises(LockFileError, match="does not record wheels"):
        plan_from_lock(locked)


def test_constraints_reader_accepts_plain_pins_and_comments(tmp_path: Path) -> None:
    path = tmp_path / "c.txt"
    path.write_text("# hand written\n\nTorch == 2.12.0 # keep it\nflashinfer_python==0.6.16\n")
    locked = read_lock(path)
    assert [(p.name, str(p.version)) for p in locked.pins] == [("torch", "2.12.0"), ("flashinfer-python", "0.6.16")]
    assert locked.pin("Flashinfer_Python") is not None
    assert locked.command is None and locked.inputs_digest is None and not locked.generated


# -- credentials -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "clean"),
    [
        ("https://user:s3cr3t@host.example/simple/", "https://host.example/simple/"),
        ("https://tok3n@host.example:8443/x", "https://host.example:8443/x"),
        (
            "--index pytorch=https://u:p%40ss@h.example/whl/ --index pypi=http://a@b@c.example/",
            "--index pytorch=https://h.example/whl/ --index pypi=http://c.example/",
        ),
        ("https://host.example/a@b/c", "https://host.example/a@b/c"),
        ("mail me at someone@mail.example", "mail me at someone@mail.example"),
    ],
)
def test_strip_credentials(text: str, clean: str) -> None:
    assert strip_credentials(text) == clean


def test_no_credentials_in_any_written_file(tmp_path: Path) -> None:
    secret = "user:s3cr3t@"
    plan = make_plan()
    plan = replace(
        plan,
        indexes={k: v.replace("https://", f"https://{secret}") for k, v in plan.indexes.items()},
        notes=(f"mirror https://{secret}mirror.example/simple/ used",),
        inputs={"index_urls": {"pypi": f"https://{secret}pypi.example/simple/"}},
        packages=tuple(replace(p, url=p.url.replace("https://", f"https://{secret}"), reason=f"from https://{secret}x.example/") for p in plan.packages),
    )
    command = f"resolve-gpu-stack lock --index pypi=https://{secret}pypi.example/simple/ --index pytorch=https://tok@dl.example/whl/"
    for name in ("pylock.toml", "constraints.txt"):
        text = write_lock(plan, tmp_path / name, command=command).read_text()
        assert "s3cr3t" not in text and "user:" not in text and "tok@" not in text
        assert "pypi.example/simple/" in text
    doc = tomllib.loads((tmp_path / "pylock.toml").read_text())
    assert doc["packages"][2]["wheels"][0]["url"] == "https://files.pypi.example/packages/flashinfer_python-0.6.16-py3-none-any.whl"
    assert doc["tool"]["resolve-gpu-stack"]["command"].endswith("--index pytorch=https://dl.example/whl/")


def test_no_credentials_in_errors(tmp_path: Path) -> None:
    plan = with_package(make_plan(), "flashinfer-python", sha256=None, filename=None, url="https://user:s3cr3t@files.pypi.example/f.whl")
    with pytest.raises(LockFileError) as err:
        render_pylock(plan, name=None, command=COMMAND)
    assert "https://files.pypi.example/f.whl" in str(err.value) and "s3cr3t" not in str(err.value)
    path = tmp_path / "constraints.txt"
    path.write_text("torch @ https://user:s3cr3t@h.example/torch.whl\n")
    with pytest.raises(LockFileError, match="line 1") as err:
        read_lock(path)
    assert "s3cr3t" not in str(err.value) and "h.example/torch.whl" in str(err.value)


# -- writing -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind"),
    [("pylock.toml", "pylock"), ("pylock.gpu-stack_1.toml", "pylock"), ("constraints.txt", "constraints"), ("gpu.constraints.txt", "constraints")],
)
def test_write_lock_picks_the_format_from_the_name(tmp_path: Path, name: str, kind: str) -> None:
    text = write_lock(make_plan(), tmp_path / name, command=COMMAND).read_text()
    assert text.startswith('lock-version = "1.0"\n' if kind == "pylock" else "# This file was generated")
    assert read_lock(tmp_path / name).format == kind


@pytest.mark.parametrize("name", ["pylock..toml", "pylock.a.b.toml", "lock.toml", "pylock.json", ".txt", "pylock.txt", "pylock"])
def test_write_lock_refuses_other_names(tmp_path: Path, name: str) -> None:
    with pytest.raises(UsageError, match="pylock.<name>.toml") as err:
        write_lock(make_plan(), tmp_path / name, command=COMMAND)
    assert "*.txt" in str(err.value) and err.value.hint
    assert list(tmp_path.iterdir()) == []


def _install_old(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.write_text("old content\n")
    return path


def test_failed_render_leaves_the_old_file(tmp_path: Path) -> None:
    path = _install_old(tmp_path, "pylock.toml")
    plan = with_package(make_plan(), "flashinfer-python", sha256=None)
    with pytest.raises(LockFileError):
        write_lock(plan, path, command=COMMAND)
    assert path.read_text() == "old content\n"
    assert [p.name for p in tmp_path.iterdir()] == ["pylock.toml"]


@pytest.mark.parametrize("fail", ["replace", "fsync", "interrupt"])
def test_failed_write_leaves_the_old_file_and_no_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail: str) -> None:
    path = _install_old(tmp_path, "constraints.txt")

    def boom(*args: object) -> None:
        if fail == "interrupt":
            raise KeyboardInterrupt
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(lockfile.os, "fsync" if fail == "fsync" else "replace", boom)
    expected = KeyboardInterrupt if fail == "interrupt" else LockFileError
    with pytest.raises(expected) as err:
        write_lock(make_plan(), path, command=COMMAND)
    if fail != "interrupt":
        assert "constraints.txt" in str(err.value) and "No space left" in str(err.value)
    assert path.read_text() == "old content\n"
    assert [p.name for p in tmp_path.iterdir()] == ["constraints.txt"]


def test_write_replaces_the_old_file_and_keeps_its_mode(tmp_path: Path) -> None:
    path = _install_old(tmp_path, "pylock.toml")
    os.chmod(path, 0o640)
    write_lock(make_plan(), path, command=COMMAND)
    assert path.read_text().startswith('lock-version = "1.0"')
    assert path.stat().st_mode & 0o777 == 0o640
    fresh = write_lock(make_plan(), tmp_path / "pylock.new.toml", command=COMMAND)
    assert fresh.stat().st_mode & 0o777 == 0o644


def test_write_into_a_missing_folder_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(LockFileError, match="missing/pylock.toml"):
        write_lock(make_plan(), tmp_path / "missing" / "pylock.toml", command=COMMAND)


# -- malformed files -----------------------------------------------------------------------------

GOOD_WHEEL = f'[[packages.wheels]]\nurl = "http://h.example/a-1.0-py3-none-any.whl"\nhashes = {{sha256 = "{SHA["fi"]}"}}\n'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('lock-version = "1.0"\ncreated-by = x\npackages = []\n', r"not valid TOML: .*line 2"),
        ('lock-version = "2.0"\ncreated-by = "x"\npackages = []\n', "pylock version 2.0 is not supported"),
        ('lock-version = 1\ncreated-by = "x"\npackages = []\n', r"Unexpected type int \(expected str\) in 'lock-version'"),
        ('created-by = "x"\npackages = []\n', "Missing required value in 'lock-version'"),
        ('lock-version = "1.0"\npackages = []\n', "Missing required value in 'created-by'"),
        ('lock-version = "1.0"\ncreated-by = "x"\n', "Missing required value in 'packages'"),
        ('lock-version = "1.0"\ncreated-by = "x"\npackages = [1]\n', r"Unexpected type int \(expected Mapping\) in 'packages\[0\]'"),
        ('lock-version = "1.0"\ncreated-by = "x"\n[[packages]]\nversion = "1.0"\n', r"Missing required value in 'packages\[0\]\.name'"),
        ('lock-version = "1.0"\ncreated-by = "x"\n[[packages]]\nname = "a"\nversion = "one"\n', r"Invalid version: 'one' in 'packages\[0\]\.version' \(a\)"),
        (
            'lock-version = "1.0"\ncreated-by = "x"\n[[packages]]\nname = "a"\n[[packages.wheels]]\nurl = "http://h.example/a.whl"\n',
            r"Missing required value in 'packages\[0\]\.wheels\[0\]\.hashes' \(a\)",
        ),
        (
            'lock-version = "1.0"\ncreated-by = "x"\n[[packages]]\nname = "a"\n[[packages.wheels]]\nurl = "u"\nhashes = {}\n',
            "At least one hash must be provided",
        ),
        (
            'lock-version = "1.0"\ncreated-by = "x"\n[[packages]]\nname = "a"\n[[packages.wheels]]\nurl = "http://h.example/a-1.0-py3-none-any.whl"\nhashes = {sha256 = "xyz"}\n',
            "not 64 hex digits",
        ),
        ('lock-version = "1.0"\ncreated-by = "x"\n[[packages]]\nname = "a"\n[[packages.wheels]]\nhashes = {md5 = "x"}\n', "path or url must be provided"),
        (
            'lock-version = "1.0"\ncreated-by = "x"\n[[packages]]\nname = "a"\n' + GOOD_WHEEL + 'size = "big"\n',
            r"Unexpected type str \(expected int\) in 'packages\[0\]\.wheels\[0\]\.size' \(a\)",
        ),
        ('lock-version = "1.0"\ncreated-by = "x"\npackages = []\n[tool.resolve-gpu-stack]\nschema = "v0"\n', "schema 'v0'"),
        ('lock-version = "1.0"\ncreated-by = "x"\npackages = []\ntool = 3\n', r"Unexpected type int \(expected Mapping\) in 'tool'"),
    ],
)
def test_malformed_pylock(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "pylock.toml"
    path.write_text(text)
    with pytest.raises(LockFileError, match=message) as err:
        read_lock(path)
    assert str(path) in str(err.value)


def _tool_edit(tmp_path: Path, old: str, new: str, plan: LockPlan | None = None) -> Path:
    path = write_lock(plan or make_plan(), tmp_path / "pylock.toml", command=COMMAND)
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('action = "keep"\ncoupling', 'action = "sideways"\ncoupling', "'sideways' is not one of keep, install"),
        ('coupling = "cuda"', 'coupling = "gpu"', "'gpu' is not one of"),
        ('name = "torch"\nversion = "2.12', 'version = "2.12', r"Missing required value in 'packages\[3\]\.name'"),
        ('inputs-digest = "', 'xinputs-digest = "', "missing 'inputs-digest'"),
        ("notes = [", "notes = [1, ", "notes: must be a list of strings"),
    ],
)
def test_malformed_tool_table(tmp_path: Path, old: str, new: str, message: str) -> None:
    path = _tool_edit(tmp_path, old, new)
    with pytest.raises(LockFileError, match=message):
        read_lock(path)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            'name = "flashinfer-cubin"\nversion = "0.6.16"\naction = "change"',
            'name = "flashinfer-cubin"\nversion = "0.6.15"\naction = "change"',
            "\\[\\[packages\\]\\] says 0.6.16, the tool table says 0.6.15",
        ),
        (
            '[[tool.resolve-gpu-stack.packages]]\nname = "flashinfer-cubin"',
            '[[tool.resolve-gpu-stack.packages]]\nname = "other"',
            "flashinfer-cubin missing from",
        ),
    ],
)
def test_inconsistent_pylock_cannot_become_a_plan(tmp_path: Path, old: str, new: str, message: str) -> None:
    path = _tool_edit(tmp_path, old, new)
    with pytest.raises(LockFileError, match=message):
        plan_from_lock(read_lock(path))


def test_an_unlisted_package_to_install_cannot_become_a_plan(tmp_path: Path) -> None:
    unlisted = with_package(make_plan(), "torch", sha256=None)  # kept without a hash: not in [[packages]]
    path = _tool_edit(
        tmp_path,
        'name = "torch"\nversion = "2.12.0.dev20260307+cu130"\naction = "keep"',
        'name = "torch"\nversion = "2.12.0.dev20260307+cu130"\naction = "install"',
        unlisted,
    )
    with pytest.raises(LockFileError, match="torch: install package without a \\[\\[packages\\]\\] entry"):
        plan_from_lock(read_lock(path))


def test_a_listed_kept_package_reads_back_kept_with_its_wheel(tmp_path: Path) -> None:
    plan = make_plan()
    back = plan_from_lock(read_lock(write_lock(plan, tmp_path / "pylock.toml", command=COMMAND)))
    torch = pkg(back, "torch")
    assert torch.action is Action.KEEP and torch.sha256 == SHA["torch"] and torch.url == pkg(plan, "torch").url


def test_an_entry_whose_wheel_is_another_version_is_refused_when_read(tmp_path: Path) -> None:
    path = _tool_edit(tmp_path, '[[packages]]\nname = "flashinfer-cubin"\nversion = "0.6.16"', '[[packages]]\nname = "flashinfer-cubin"\nversion = "0.6.15"')
    with pytest.raises(
        LockFileError,
        match=r"Version in 'flashinfer_cubin-0.6.16-py3-none-any.whl' is not consistent with package version '0.6.15' in 'packages\[0\]\.wheels\[0\]' \(flashinfer-cubin\)",
    ):
        read_lock(path)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (('name = "a"', 'name = "A"'), r"PEP 751: Name 'A' is not normalized in 'packages\[0\]\.name'"),
        (('created-by = "uv"', 'created-by = "uv"\nenvironments = ["python_version >> \'3\'"]'), r"PEP 751: .* in 'environments\[0\]'"),
        (('name = "a"\nversion = "1.0"', 'name = "a"\nversion = "1.0"\nrequires-python = ">=three"'), r"PEP 751: .* in 'packages\[0\]\.requires-python'"),
    ],
)
def test_foreign_pylock_is_validated_against_pep_751(tmp_path: Path, edit: tuple[str, str], message: str) -> None:
    path = tmp_path / "pylock.toml"
    path.write_text(('lock-version = "1.0"\ncreated-by = "uv"\n[[packages]]\nname = "a"\nversion = "1.0"\n' + GOOD_WHEEL).replace(*edit, 1))
    with pytest.raises(LockFileError, match=message) as err:
        read_lock(path)
    assert str(path) in str(err.value)


def test_foreign_pylock_reads_but_is_not_a_plan(tmp_path: Path) -> None:
    path = tmp_path / "pylock.toml"
    path.write_text('lock-version = "1.0"\ncreated-by = "uv"\n[[packages]]\nname = "a"\nversion = "1.0"\n' + GOOD_WHEEL)
    locked = read_lock(path)
    assert locked.created_by == "uv" and not locked.generated
    assert locked.entries[0].name == "a"
    assert locked.entries[0].wheels[0].filename == "a-1.0-py3-none-any.whl"
    with pytest.raises(LockFileError, match="not written by resolve-gpu-stack"):
        plan_from_lock(locked)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("torch==2.12.0\n-i https://evil.example/simple/\n", r"line 2: option lines are not allowed .*\(-i\)"),
        ("# header\n--extra-index-url https://x.example/\n", r"line 2: .*--extra-index-url"),
        ("torch>=2.12\n", r"line 1: expected 'name==version'"),
        ("torch==two\n", r"line 1: 'two' is not a version"),
        ("torch==2.12.0\nTorch==2.13.0\n", "torch is pinned twice"),
        ("torch==2.12.0  # index=x action=zap coupling=torch\n", "line 1: 'zap' is not one of"),
    ],
)
def test_malformed_constraints(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "constraints.txt"
    path.write_text(text)
    with pytest.raises(LockFileError, match=message) as err:
        read_lock(path)
    assert "constraints.txt" in str(err.value)


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(LockFileError, match="cannot read .*nope.txt"):
        read_lock(tmp_path / "nope.txt")
    binary = tmp_path / "pylock.toml"
    binary.write_bytes(b'lock-version = "1.0"\n\xff\xfe')
    with pytest.raises(LockFileError, match="pylock.toml: not UTF-8"):
        read_lock(binary)


def test_lock_json_inputs_match_the_digest_after_reading(tmp_path: Path) -> None:
    plan = make_plan(inputs={"a": (1, 2), "v": Version("1.0"), "gone": None}, inputs_digest="")
    locked = read_lock(write_lock(plan, tmp_path / "pylock.toml", command=COMMAND))
    assert locked.inputs == {"a": [1, 2], "v": "1.0"}
    assert locked.inputs_digest == inputs_digest(plan.inputs) == inputs_digest(locked.inputs)
    assert json.loads(json.dumps(locked.inputs)) == locked.inputs


def test_write_locks_writes_every_file_or_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 13, item 6: the second rename fails; the first file is put back as it was."""
    from resolve_gpu_stack.errors import WriteError
    from resolve_gpu_stack.lock.files import write_locks

    first = _install_old(tmp_path, "constraints.txt")
    second = tmp_path / "pylock.x.toml"
    real = lockfile.os.replace

    def replace_file(src: str, dst: object) -> None:
        if str(dst) == str(second):
            raise OSError(30, "Read-only file system")
        real(src, dst)

    monkeypatch.setattr(lockfile.os, "replace", replace_file)
    with pytest.raises(WriteError, match="pylock.x.toml: Read-only file system") as err:
        write_locks(make_plan(), [first, second], command=COMMAND)
    assert err.value.exit_code == 4
    assert first.read_text() == "old content\n" and not second.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["constraints.txt"]
    monkeypatch.setattr(lockfile.os, "replace", real)
    assert write_locks(make_plan(), [first, second], command=COMMAND) == [first, second]
    assert first.read_text().startswith("# This file was generated") and second.read_text().startswith('lock-version = "1.0"')
