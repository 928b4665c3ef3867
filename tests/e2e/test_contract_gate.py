"""Issue 47: the kept torch's contract, at every door, over a world that holds each trap.

Each row is (trap, door): the door runs through the real CLI on a loopback world
(``contract_world``), real venvs and real uv where it installs, and the gate's promise is asserted:
torch and its closure unchanged unless asked; no package the user named older than its newest
fitting release without the user's word; every compiled wheel with a verdict; FlashInfer aligned,
what is installed included. A row whose fix lands on another branch is a strict xfail naming it,
for the lead to flip after merging.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import tomllib
from support.abi_world import have_cxx
from support.contract_world import build_contract_world
from support.doors import index_flags, run_cli
from support.server import IndexServer
from support.today_world import TORCH

pytestmark = pytest.mark.skipif(not have_cxx(), reason="needs a C++ compiler to build the shared objects")

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
DECLARED = ["--python", PY, "--platform", "x86_64-manylinux_2_28"]
NIGHTLY_OLD = "2.12.0.dev20260305+cu130"
STABLE = "2.10.0+cu130"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[object, IndexServer, Path]]:
    root = tmp_path_factory.mktemp("contract")
    w, _ = build_contract_world(root)
    with IndexServer(w.root) as srv:
        w.write(srv.url)
        yield w, srv, root


def world_flags(world: tuple[object, IndexServer, Path], tmp: Path) -> list[str]:
    _, srv, _ = world
    return [*index_flags(srv.url), "--cache-dir", str(tmp / "c")]


def make_venv(world: tuple[object, IndexServer, Path], where: Path, *packages: str) -> str:
    """A venv holding PyPI's torch 2.15.0 (the stand-in) and ``packages`` from the world's PyPI, by pip, no dependencies."""
    _, srv, _ = world
    env = {**os.environ, "PIP_CONFIG_FILE": "/dev/null", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, env=env)
    python = str(where / "bin" / "python")
    pip = [python, "-m", "pip", "install", "-q", "--no-deps"]
    subprocess.run([*pip, "--index-url", f"{srv.url}pypi-torch/", f"torch=={TORCH}"], check=True, env=env, capture_output=True)
    if packages:
        subprocess.run([*pip, "--index-url", f"{srv.url}simple/", *packages], check=True, env=env, capture_output=True)
    return python


def installed(python: str) -> dict[str, str]:
    listed = subprocess.run([python, "-m", "pip", "list", "--format", "json"], capture_output=True, text=True, check=True).stdout
    return {r["name"].lower(): r["version"] for r in json.loads(listed)}


# -- the doors: each runs one request and gives (exit code, planned versions or None, stderr) -------

Door = Callable[..., tuple[int, "dict[str, dict] | None", str]]


def door_resolve(capsys, world, tmp: Path, flags: list[str]):  # type: ignore[no-untyped-def]
    code, out, err = run_cli(capsys, "resolve", *flags, *world_flags(world, tmp), "--format", "json")
    return code, ({p["name"]: p for p in json.loads(out)["packages"]} if code == 0 else None), err


def door_lock(capsys, world, tmp: Path, flags: list[str]):  # type: ignore[no-untyped-def]
    lock = tmp / "pylock.gate.toml"
    code, _, err = run_cli(capsys, "lock", *flags, *world_flags(world, tmp), "-o", str(lock))
    assert lock.exists() == (code == 0), err  # a refused plan writes nothing
    return code, (_lock_rows(lock) if code == 0 else None), err


def door_config_lock(capsys, world, tmp: Path, flags: list[str], monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """The same request as a target of a project's config: ``lock`` with no flags, then ``check``."""
    w, srv, _ = world
    indexes = ", ".join(f'{n} = "{u}"' for n, u in w.index_urls(srv.url).items())  # type: ignore[attr-defined]
    (tmp / "pyproject.toml").write_text(f"[tool.resolve-gpu-stack]\nindexes = {{ {indexes} }}\n\n{_config_target(flags)}")
    monkeypatch.chdir(tmp)
    code, _, err = run_cli(capsys, "lock", "--cache-dir", str(tmp / "c"))
    lock = tmp / "pylock.node.toml"
    assert lock.exists() == (code == 0), err
    if code == 0:
        checked, _, check_err = run_cli(capsys, "check", "--target", "node")
        assert checked == 0, check_err
    return code, (_lock_rows(lock) if code == 0 else None), err


def door_export_uv(capsys, world, tmp: Path, flags: list[str]):  # type: ignore[no-untyped-def]
    project = tmp / "proj"
    project.mkdir(exist_ok=True)
    before = f'[project]\nname = "app"\nversion = "0"\nrequires-python = ">={PY}"\n'
    (project / "pyproject.toml").write_text(before)
    code, _, err = run_cli(capsys, "export", "uv", *flags, *world_flags(world, tmp), "--project", str(project))
    text = (project / "pyproject.toml").read_text()
    if code != 0:
        assert text == before, "a refused plan changes nothing"
        return code, None, err
    pins = tomllib.loads(text)["tool"]["uv"]["constraint-dependencies"]
    rows = {}
    for pin in pins:
        name, _, version = pin.split(";")[0].strip().partition("==")
        rows[name] = {"version": version}
    return code, rows, err


def _lock_rows(lock: Path) -> dict[str, dict]:
    """Every package the lock plans, kept ones included (its tool table lists them all)."""
    return {p["name"]: {"version": p["version"]} for p in tomllib.loads(lock.read_text())["tool"]["resolve-gpu-stack"]["packages"]}


def _config_target(flags: list[str]) -> str:
    """A config target of the declared flags (--python/--platform/--installed/--torch/--with/--cuda/--no-*)."""
    keys: dict[str, object] = {}
    it = iter(flags)
    for flag in it:
        if flag in ("--no-cubin", "--no-jit-cache"):
            keys[flag.removeprefix("--no-")] = False
        elif flag in ("--installed", "--with", "--keep-broken"):
            keys.setdefault(flag[2:], []).append(next(it))  # type: ignore[union-attr]
        else:
            keys[flag[2:]] = next(it)
    body = "\n".join(f"{k} = {json.dumps(v)}" for k, v in keys.items())
    return f'[[tool.resolve-gpu-stack.target]]\nname = "node"\n{body}\noutput = ["pylock.node.toml"]\n'


DECLARED_DOORS = ["resolve", "lock", "config-lock", "export-uv"]


def run_door(door: str, capsys, world, tmp: Path, flags: list[str], monkeypatch):  # type: ignore[no-untyped-def]
    if door == "config-lock":
        return door_config_lock(capsys, world, tmp, flags, monkeypatch)
    return {"resolve": door_resolve, "lock": door_lock, "export-uv": door_export_uv}[door](capsys, world, tmp, flags)


def version_of(rows: dict[str, dict], name: str) -> str | None:
    row = rows.get(name)
    return row["version"] if row is not None else None


# -- trap: a newer nightly, no --torch ------------------------------------------------------------


@pytest.mark.parametrize("door", DECLARED_DOORS)
def test_a_newer_nightly_never_replaces_the_kept_one_unasked(world, capsys, tmp_path, monkeypatch, door) -> None:
    code, rows, err = run_door(door, capsys, world, tmp_path, [*DECLARED, "--installed", f"torch=={NIGHTLY_OLD}"], monkeypatch)
    assert code == 0, err
    assert rows is not None and version_of(rows, "torch") in (NIGHTLY_OLD, None), rows.get("torch")  # kept (a kept torch may be unlisted)


# -- trap: a stable torch under --torch nightly ----------------------------------------------------


@pytest.mark.parametrize("door", DECLARED_DOORS)
def test_a_stable_torch_under_torch_nightly_is_kept_or_the_command_stops_naming_torch(world, capsys, tmp_path, monkeypatch, door) -> None:
    code, rows, err = run_door(door, capsys, world, tmp_path, [*DECLARED, "--installed", f"torch=={STABLE}", "--torch", "nightly"], monkeypatch)
    if code != 0:
        assert "torch" in err and "Traceback" not in err, err
        return
    assert rows is not None and version_of(rows, "torch") in (STABLE, None), rows.get("torch")


# -- trap: a PyPI torch whose cuda-toolkit extras pin a runtime older than another package wants --


@pytest.mark.parametrize("door", DECLARED_DOORS)
def test_torchs_closure_is_held_or_the_conflict_is_named(world, capsys, tmp_path, monkeypatch, door) -> None:
    flags = [*DECLARED, "--installed", f"torch=={TORCH}", "--torch", "installed", "--with", "humming-kernels", "--no-jit-cache"]
    code, rows, err = run_door(door, capsys, world, tmp_path, flags, monkeypatch)
    if code != 0:
        assert "nvidia-cuda-runtime" in err and "13.2.51" in err, err
        return
    assert rows is not None and version_of(rows, "nvidia-cuda-runtime") in ("13.2.51", None), rows.get("nvidia-cuda-runtime")


# -- trap: a framework whose newest release pins a version no index serves -------------------------


@pytest.mark.parametrize("door", DECLARED_DOORS)
def test_a_named_framework_is_never_walked_back_unasked(world, capsys, tmp_path, monkeypatch, door) -> None:
    """vllm 0.34.0 pins flashinfer-python==0.7.3, which no index serves: every door stops naming
    0.34.0, the pin, and the ways out; never vllm 0.33.0 in silence. Asked for, 0.33.0 plans."""
    flags = [*DECLARED, "--installed", f"torch=={TORCH}", "--torch", "installed", "--no-jit-cache"]
    code, rows, err = run_door(door, capsys, world, tmp_path, [*flags, "--with", "vllm"], monkeypatch)
    assert code == 1 and rows is None, err
    assert "vllm 0.34.0: the newest release for this target cannot be planned; vllm 0.33.0 would be planned instead" in err, err
    assert "because vllm 0.34.0 requires flashinfer-python==0.7.3, which no index serves" in err, err
    assert (
        "we can conclude that vllm 0.34.0 cannot be planned" in err and "--with 'vllm==0.33.0'" in err and "--override 'flashinfer-python==VERSION'" in err
    ), err
    code, rows, err = run_door(door, capsys, world, tmp_path, [*flags, "--with", "vllm==0.33.0"], monkeypatch)
    assert code == 0, err
    assert rows is not None and version_of(rows, "vllm") == "0.33.0" and version_of(rows, "torch") in (TORCH, None)


def test_the_walk_back_refusal_reaches_install_before_anything_changes(world, capsys, tmp_path) -> None:
    python = make_venv(world, tmp_path / "venv")
    before = installed(python)
    for dry in (["--dry-run"], []):
        code, out, err = run_cli(
            capsys, "install", "--python", python, "--torch", "installed", "--with", "vllm", "--no-jit-cache", *world_flags(world, tmp_path), *dry
        )
        assert code == 1 and out == "", err
        assert "vllm 0.34.0" in err and "flashinfer-python==0.7.3" in err and "--with 'vllm==0.33.0'" in err, err
    assert installed(python) == before


# -- trap: a CUDA-12-only stable-ABI wheel under a CUDA 13 torch -----------------------------------


def test_a_cuda_12_only_wheel_is_refused_by_resolve_on_pypis_torch(world, capsys, tmp_path) -> None:
    code, rows, err = door_resolve(capsys, world, tmp_path, [*DECLARED, "--installed", f"torch=={TORCH}", "--torch", "installed", "--with", "xformers"])
    assert code == 1 and rows is None and "xformers" in err and "CUDA" in err, err


def test_inspect_gives_resolves_verdict_on_the_cuda_12_only_wheel_without_cuda(world, capsys, tmp_path) -> None:
    code, out, err = run_cli(
        capsys, "inspect", "xformers==0.0.35", *DECLARED, "--installed", f"torch=={TORCH}", *world_flags(world, tmp_path), "--format", "json"
    )
    assert json.loads(out)["verdict"]["runs"] is False, out


# -- trap: a misaligned installed cubin; a compiled companion whose imports torch lacks -------------


@pytest.fixture(scope="module")
def cubin_venv(world, tmp_path_factory: pytest.TempPathFactory) -> str:
    """torch 2.15.0, flashinfer-python 0.6.5 and flashinfer-cubin 0.6.4 beside it (misaligned)."""
    return make_venv(world, tmp_path_factory.mktemp("cubin") / "venv", "flashinfer-python==0.6.5", "flashinfer-cubin==0.6.4")


MISALIGNED = "flashinfer-cubin 0.6.4: installed, and known not to work with the plan"


@pytest.mark.parametrize("door", ["resolve", "lock", "export-uv", "install --dry-run", "install"])
def test_a_misaligned_installed_cubin_is_named_before_anything_is_installed(world, capsys, tmp_path, cubin_venv, door) -> None:
    before = installed(cubin_venv)
    flags = ["--python", cubin_venv, "--torch", "installed", "--no-cubin", "--no-jit-cache"]
    if door.startswith("install"):
        code, out, err = run_cli(capsys, *door.split(), *flags, *world_flags(world, tmp_path), "--format", "json")
        assert out == ""
    else:
        code, _, err = run_door(door, capsys, world, tmp_path, flags, None)
    assert code == 1, err
    assert MISALIGNED in err and "!= flashinfer-python 0.6.5" in err, err
    assert "leave out --no-cubin" in err and "uv pip uninstall flashinfer-cubin" in err and "--keep-broken flashinfer-cubin" in err, err
    assert installed(cubin_venv) == before


def test_the_users_word_keeps_a_misaligned_cubin_said_in_a_note(world, capsys, tmp_path, cubin_venv) -> None:
    flags = ["--python", cubin_venv, "--torch", "installed", "--no-cubin", "--no-jit-cache", "--keep-broken", "flashinfer-cubin"]
    code, out, err = run_cli(capsys, "install", "--dry-run", *flags, *world_flags(world, tmp_path), "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    assert any(n.startswith("flashinfer-cubin 0.6.4 (installed, left as it is)") and "--keep-broken" in n for n in report["notes"]), report["notes"]


def test_the_plan_brings_a_misaligned_cubin_in_line_when_it_may(world, capsys, tmp_path, cubin_venv) -> None:
    code, out, err = run_cli(
        capsys, "install", "--dry-run", "--python", cubin_venv, "--torch", "installed", "--no-jit-cache", *world_flags(world, tmp_path), "--format", "json"
    )
    assert code == 0, err
    rows = {r["name"]: r for r in json.loads(out)["packages"]}
    assert (rows["flashinfer-cubin"]["before"], rows["flashinfer-cubin"]["version"]) == ("0.6.4", "0.6.5")


def test_install_lock_names_a_misaligned_cubin_the_lock_leaves(world, capsys, tmp_path, cubin_venv) -> None:
    lock = tmp_path / "pylock.node.toml"
    code, _, err = run_cli(capsys, "lock", "--python", cubin_venv, "--torch", "installed", "--no-jit-cache", *world_flags(world, tmp_path), "-o", str(lock))
    assert code == 0, err
    # the lock aligns the cubin; the venv moves back to the misaligned one after the lock was made
    text = lock.read_text()
    data = tomllib.loads(text)
    data_cubin = [p for p in data["packages"] if p["name"] == "flashinfer-cubin"]
    assert data_cubin and data_cubin[0]["version"] == "0.6.5"
    lock_nocubin = tmp_path / "pylock.nocubin.toml"
    code, _, err = run_cli(
        capsys,
        "lock",
        "--python",
        cubin_venv,
        "--torch",
        "installed",
        "--no-cubin",
        "--no-jit-cache",
        "--keep-broken",
        "flashinfer-cubin",
        *world_flags(world, tmp_path),
        "-o",
        str(lock_nocubin),
    )
    assert code == 0, err
    before = installed(cubin_venv)
    code, out, err = run_cli(
        capsys, "install", "--lock", str(lock_nocubin), "--python", cubin_venv, "--cache-dir", str(tmp_path / "c"), "--dry-run", "--format", "json"
    )
    assert code == 0, err  # the lock carries the user's word
    assert any("flashinfer-cubin 0.6.4 (installed, left as it is)" in n for n in json.loads(out)["notes"])
    assert installed(cubin_venv) == before


def test_an_installed_companion_whose_imports_torch_lacks_stops_install(world, capsys, tmp_path) -> None:
    """oldfw 2.0's ``.so`` imports a C++ symbol torch 2.15.0 does not export: install (dry run and
    real) names it before anything changes; --keep-broken oldfw keeps it, said in a note."""
    python = make_venv(world, tmp_path / "venv", "oldfw==2.0")
    before = installed(python)
    flags = ["--python", python, "--torch", "installed", "--no-jit-cache", *world_flags(world, tmp_path), "--format", "json"]
    for dry in (["--dry-run"], []):
        code, out, err = run_cli(capsys, "install", *dry, *flags)
        assert code == 1 and out == "", err
        assert "oldfw 2.0: installed, and known not to work with the plan" in err and "torchInternalAssertFail" in err and "--keep-broken oldfw" in err, err
    assert installed(python) == before
    code, out, err = run_cli(capsys, "install", "--dry-run", *flags, "--keep-broken", "oldfw")
    assert code == 0, err
    assert any(n.startswith("oldfw 2.0 (installed, left as it is)") and "--keep-broken oldfw" in n for n in json.loads(out)["notes"]), out


# -- every door tells the same story ----------------------------------------------------------------


def test_every_door_tells_the_same_story_overrides_notes_and_each_downgrades_cause(world, capsys, tmp_path) -> None:
    """sglang 0.5.23 pins torch==2.14.1 (overridden: torch 2.15.0 is kept); pins-runtime 1.0 forces
    nvidia-cuda-runtime 13.5.37 (installed) down to 13.2.51. resolve, install --dry-run (JSON and
    table), install, the lock's notes and export uv tell the same notes and overrides, and the
    downgrade names the requirement that forces it."""
    python = make_venv(world, tmp_path / "venv", "nvidia-cuda-runtime==13.5.37")
    flags = ["--python", python, "--torch", "installed", "--with", "sglang", "--with", "pins-runtime", "--no-jit-cache", *world_flags(world, tmp_path)]
    code, out, err = run_cli(capsys, "resolve", *flags, "--format", "json")
    assert code == 0, err
    plan = json.loads(out)
    story = {"notes": plan["notes"], "overrides": plan["overrides"]}
    downgrade = next(n for n in plan["notes"] if n.startswith("nvidia-cuda-runtime 13.5.37 -> 13.2.51: "))
    assert "required by pins-runtime 1.0 (nvidia-cuda-runtime<13.5)" in downgrade, downgrade
    row = next(p for p in plan["packages"] if p["name"] == "nvidia-cuda-runtime")
    assert row["action"] == "downgrade" and "required by pins-runtime 1.0 (nvidia-cuda-runtime<13.5)" in row["reason"]
    assert ("sglang", "torch==2.14.1", "torch==2.15.0") in {(o["package"], o["requirement"], o["replaced_by"]) for o in plan["overrides"]}

    code, out, err = run_cli(capsys, "install", "--dry-run", *flags, "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    assert {"notes": report["notes"], "overrides": report["overrides"]} == story
    code, out, err = run_cli(capsys, "install", "--dry-run", *flags, "--format", "table")
    assert code == 0, err
    flat = " ".join(out.split())
    assert "Overrides" in out and "sglang: torch==2.14.1 -> torch==2.15.0 (the installed torch is kept)" in flat, out
    assert " ".join(downgrade.split()) in flat, out

    lock = tmp_path / "pylock.story.toml"
    code, _, err = run_cli(capsys, "lock", *flags, "-o", str(lock))
    assert code == 0, err
    tool = tomllib.loads(lock.read_text())["tool"]["resolve-gpu-stack"]
    assert downgrade in tool["notes"] and {(o["package"], o["requirement"]) for o in tool["overrides"]} >= {("sglang", "torch==2.14.1")}

    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text(f'[project]\nname = "app"\nversion = "0"\nrequires-python = ">={PY}"\n')
    code, _, err = run_cli(capsys, "export", "uv", *flags, "--project", str(project), "--dry-run")
    assert code == 0, err
    assert downgrade in err and "sglang: torch==2.14.1 -> torch==2.15.0 (the installed torch is kept)" in err, err

    code, out, err = run_cli(capsys, "install", *flags, "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    assert {"notes": report["notes"], "overrides": report["overrides"]} == story
    assert installed(python)["nvidia-cuda-runtime"] == "13.2.51" and installed(python)["torch"] == TORCH


# -- trap: an installed jit-cache of another CUDA major than the kept torch's -----------------------


@pytest.mark.parametrize("door", DECLARED_DOORS)
def test_an_installed_jit_cache_of_another_cuda_major_is_named_or_brought_in_line(world, capsys, tmp_path, monkeypatch, door) -> None:
    """torch 2.15.0 is CUDA 13.2; flashinfer-jit-cache 0.6.5+cu128 (CUDA 12) is installed. Under
    --no-jit-cache the plan leaves it: every door stops naming it; --keep-broken keeps it, said in a
    note; without --no-jit-cache the plan brings it in line (+cu130)."""
    target = [*DECLARED, "--installed", f"torch=={TORCH}", "--installed", "flashinfer-jit-cache==0.6.5+cu128", "--torch", "installed"]
    code, rows, err = run_door(door, capsys, world, tmp_path, [*target, "--no-jit-cache"], monkeypatch)
    assert code == 1 and rows is None, err
    assert "flashinfer-jit-cache 0.6.5+cu128: installed, and known not to work with the plan" in err and "CUDA major" in err, err
    assert "leave out --no-jit-cache" in err and "--keep-broken flashinfer-jit-cache" in err, err
    code, rows, err = run_door(door, capsys, world, tmp_path, [*target, "--no-jit-cache", "--keep-broken", "flashinfer-jit-cache"], monkeypatch)
    assert code == 0, err
    code, rows, err = run_door(door, capsys, world, tmp_path, target, monkeypatch)
    assert code == 0, err
    assert rows is not None and version_of(rows, "flashinfer-jit-cache") == "0.6.5+cu130"


# -- every door that writes a lock says the story resolve prints (lock -o, a config's lock) --------


STORY_REQUESTS = {
    "newer-nightly": [*DECLARED, "--installed", f"torch=={NIGHTLY_OLD}"],
    "override": [*DECLARED, "--installed", f"torch=={TORCH}", "--torch", "installed", "--no-jit-cache", "--with", "vllm==0.33.0"],
}


@pytest.mark.parametrize("request_name", sorted(STORY_REQUESTS))
def test_lock_o_and_a_configs_lock_say_every_note_and_override_resolve_prints(world, capsys, tmp_path, monkeypatch, request_name) -> None:
    """The notes (a newer nightly left, the closure kept, the FlashInfer host's answers) and the
    overrides ``resolve`` prints under its table, ``lock -o`` and a config's ``lock`` say on stderr,
    line for line (a config's lines after its target's name), as the lock's notes record them."""
    flags = STORY_REQUESTS[request_name]
    code, out, err = run_cli(capsys, "resolve", *flags, *world_flags(world, tmp_path), "--format", "table")
    assert code == 0, err
    told = out[out.index("Notes") :] if "Notes" in out else ""
    lines = [line for line in (" ".join(raw.split()) for raw in told.splitlines()) if line]
    assert any(line.startswith("- ") for line in lines), out
    plan = json.loads(_json_out(capsys, flags, world, tmp_path))
    assert plan["notes"], plan
    if request_name == "override":
        assert plan["overrides"], plan
    expected = [f"  - {n}" for n in plan["notes"]] + [
        f"  - {o['package']}: {o['requirement']} -> {o['replaced_by']} ({o['reason']})" for o in plan["overrides"]
    ]
    code, _, lock_err = door_lock(capsys, world, tmp_path, flags)
    assert code == 0, lock_err
    said = lock_err.splitlines()
    for line in expected:
        assert line in said, (line, lock_err)
    assert ("Overrides" in said) == bool(plan["overrides"]) and "Notes" in said, lock_err
    code, _, config_err = door_config_lock(capsys, world, tmp_path, flags, monkeypatch)
    assert code == 0, config_err
    said = config_err.splitlines()
    for line in expected:
        assert f"node: {line}" in said, (line, config_err)
    assert "node: Notes" in said, config_err
    recorded = tomllib.loads((tmp_path / "pylock.node.toml").read_text())["tool"]["resolve-gpu-stack"]
    assert all(n in recorded["notes"] for n in plan["notes"]), recorded["notes"]


def _json_out(capsys, flags: list[str], world, tmp: Path) -> str:  # type: ignore[no-untyped-def]
    code, out, err = run_cli(capsys, "resolve", *flags, *world_flags(world, tmp), "--format", "json")
    assert code == 0, err
    return out


# -- PyPI's torch page unreachable: said once per command -------------------------------------------


@pytest.mark.parametrize("door", ["resolve", "lock"])
def test_an_unreadable_pypi_torch_page_is_warned_of_once(world, capsys, caplog, tmp_path, door) -> None:
    """A declared PyPI torch is known from its own wheel on PyPI's torch page; that page answering
    503 to every try is one warning, though the kept torch is read under two route contexts (known,
    then planned)."""
    from support.server import Fault

    _, srv, _ = world
    flags = [*DECLARED, "--installed", f"torch=={TORCH}", "--torch", "installed", "--cuda", "cu132", "--no-jit-cache"]
    srv.script("/simple/torch/", [Fault(status=503)] * 50)
    try:
        caplog.clear()
        if door == "resolve":
            code, _, err = door_resolve(capsys, world, tmp_path, flags)
        else:
            code, _, err = door_lock(capsys, world, tmp_path, flags)
    finally:
        with srv.lock:
            srv.faults.pop("/simple/torch/", None)
    assert code == 0, err
    said = [r.getMessage() for r in caplog.records if "known only as declared" in r.getMessage()]
    assert len(said) == 1 and "/simple/torch/" in said[0] and "503" in said[0], (said, err)
