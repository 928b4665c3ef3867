"""The first hour, fourth pass (issue 52): each miss a new user met, through the command line they typed."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path

import pytest
from support.build_world import extension_sdist, serve_sdist
from support.doors import index_flags, run_cli
from support.elfbuild import synthetic_elf, wheel_bytes
from support.install_world import NIGHTLY, UV, build_world, make_venv, needs_linux, torch_wheel
from support.paths import REPO, SNAPSHOT
from support.server import IndexServer

STORY = ["--python", "3.12", "--platform", "x86_64-manylinux_2_28", "--installed", f"torch=={NIGHTLY}", "--snapshot", str(SNAPSHOT)]
TODAY = ["--python", "3.12", "--platform", "x86_64-manylinux_2_34", "--installed", "torch==2.15.0", "--torch", "installed", "--no-cubin", "--no-jit-cache"]
TODAY += ["--snapshot", str(REPO / "indexes" / "snapshots" / "2026-12-01")]
PRE = ("4.0.0b3", "4.0.0b4")


@pytest.fixture
def world(tmp_path: Path):
    """The story's loopback world, plus a package PyPI has only as an sdist (flash-attn) and one it
    has only as pre-releases (flash-attn-4), as on the day of the report."""
    w = build_world(tmp_path / "www")
    serve_sdist(w, extension_sdist(tmp_path / "sdists", "flash-attn", "2.8.3"))
    for v in PRE:
        w.pypi("flash-attn-4", v)
    with IndexServer(w.root) as srv:
        w.write(srv.url)
        yield w, srv


def declared(srv: IndexServer, tmp_path: Path, *installed: str) -> list[str]:
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    flags = [w for spec in (f"torch=={NIGHTLY}", *installed) for w in ("--installed", spec)]
    return ["--python", py, "--platform", f"{platform.machine()}-manylinux_2_28", *flags, *index_flags(srv.url), "--cache-dir", str(tmp_path / "c")]


# -- 1. FlashInfer's default is what --help says -----------------------------------------------------


def test_help_says_what_the_flashinfer_default_does(capsys):
    code, out, _ = run_cli(capsys, "resolve", "--help")
    assert code == 0
    words = " ".join(out.split())
    assert "latest (default: the newest with every component for this target, an installed one upgraded)" in words
    assert "installed (keep an installed FlashInfer that fits, else the newest)" in words


@pytest.mark.slow
@needs_linux
def test_an_installed_older_flashinfer_is_upgraded_by_default_and_kept_on_request_with_the_newer_named(world, tmp_path, uv_env, capsys):
    w, srv = world
    python = make_venv(tmp_path / "venv", uv_env, torch_wheel(w, NIGHTLY))
    pins = ["flashinfer-python==0.6.4", "flashinfer-cubin==0.6.4"]
    subprocess.run([UV, "pip", "install", "-q", "--python", python, "--no-deps", "--index-url", f"{srv.url}simple/", *pins], check=True, env=uv_env)
    target = ["--python", python, *index_flags(srv.url), "--cache-dir", str(tmp_path / "c")]

    code, out, err = run_cli(capsys, "install", *target, "--dry-run", "--format", "table")
    assert code == 0, err
    assert "flashinfer-python upgrade 0.6.4 -> 0.6.5: newest FlashInfer" in out  # it was: kept, while --help said "latest: the newest"

    code, out, err = run_cli(capsys, "install", *target, "--dry-run", "--flashinfer", "installed", "--format", "table")
    assert code == 0, err
    summary = " ".join(out.split())
    assert "flashinfer-python keep 0.6.4: installed version kept (--flashinfer installed)" in summary
    assert "is 0.6.5: `--flashinfer latest` upgrades" in summary  # the newer release the plan did not take, in the table's words

    code, out, err = run_cli(capsys, *target, "--flashinfer", "installed", "--format", "table")
    assert code == 0, err
    assert "flashinfer-python 0.6.5 is newer than the plan's 0.6.4 (--flashinfer installed keeps the installed one" in " ".join(out.split())
    # and a typed `latest` after the default is not answered by the stored plan of `installed` (the reuse key tells them apart)
    code, out, err = run_cli(capsys, "install", *target, "--dry-run", "--flashinfer", "latest", "--format", "json")
    assert code == 0, err
    fi = next(p for p in json.loads(out)["packages"] if p["name"] == "flashinfer-python")
    assert (fi["version"], fi["action"]) == ("0.6.5", "upgrade")

    # installed as kept, then nothing would change: the summary still names the newer release
    code, _, err = run_cli(capsys, "install", *target, "--flashinfer", "installed", "--format", "json")
    assert code == 0, err
    code, out, err = run_cli(capsys, "install", *target, "--dry-run", "--flashinfer", "installed", "--format", "table")
    assert code == 0, err
    words = " ".join(out.split())
    assert "dry run: nothing would change, every package is kept" in words  # it was the whole story, 0.6.5 unsaid
    assert "flashinfer-python keep 0.6.4: installed version kept (--flashinfer installed)" in words and "is 0.6.5: `--flashinfer latest` upgrades" in words


# -- 3. --with NAME for what has no wheel, or only pre-releases ------------------------------------------


@needs_linux
def test_with_a_package_that_has_only_an_sdist_names_build_and_an_index_of_ones_own(world, tmp_path, capsys):
    _, srv = world
    code, out, err = run_cli(capsys, *declared(srv, tmp_path), "--with", "flash-attn")
    assert code == 1 and out == ""
    assert "error: flash-attn has no wheel on its index, only source distributions (flash_attn-2.8.3.tar.gz" in err.replace(
        "flash-attn-2.8.3", "flash_attn-2.8.3"
    )
    assert "relax a --with pin" not in err  # it was: "available for this target: none" and a pin to relax
    hint = err.split("hint: ", 1)[1]
    assert "--build flash-attn" in hint and "--package-index flash-attn=URL" in hint and "docs/guides/building.md" in hint
    # the way the hint names works: --build plans it from its sdist
    code, out, err = run_cli(capsys, *declared(srv, tmp_path), "--with", "flash-attn", "--build", "flash-attn", "--format", "json")
    assert code == 0, err
    row = next(p for p in json.loads(out)["packages"] if p["name"] == "flash-attn")
    assert row["action"] == "build"


@needs_linux
def test_with_a_package_that_has_only_pre_releases_says_so_and_how_to_allow_them(world, tmp_path, capsys):
    _, srv = world
    code, out, err = run_cli(capsys, *declared(srv, tmp_path), "--with", "flash-attn-4")
    assert code == 1 and out == ""
    assert "error: flash-attn-4 has only pre-releases for this target (4.0.0b4, 4.0.0b3)" in err
    hint = err.split("hint: ", 1)[1]
    assert "--with 'flash-attn-4>=4.0.0b4'" in hint
    # the way the hint names works
    code, out, err = run_cli(capsys, *declared(srv, tmp_path), "--with", "flash-attn-4>=4.0.0b4", "--format", "json")
    assert code == 0, err
    assert next(p for p in json.loads(out)["packages"] if p["name"] == "flash-attn-4")["version"] == "4.0.0b4"


# -- 6. words -------------------------------------------------------------------------------------------


def test_a_framework_pin_through_an_extra_is_named_as_the_framework_s_and_no_override_is_a_no_op(capsys):
    code, out, err = run_cli(capsys, *TODAY, "--with", "sglang", "--format", "json")
    assert code == 0, err
    plan = json.loads(out)
    fi = next(p for p in plan["packages"] if p["name"] == "flashinfer-python")
    assert fi["reason"].startswith("sglang 0.5.23 requires flashinfer_python[cu13]==0.7.2, so 0.7.2")
    assert "flashinfer-python[cu13] 0.7.2 requires" not in fi["reason"]  # it was circular: the extra's own pin on its base
    assert "flashinfer-python 0.7.4 is newer than the plan's 0.7.2 (sglang 0.5.23 requires flashinfer_python[cu13]==0.7.2)" in plan["notes"]
    assert all(o["requirement"] != o["replaced_by"] for o in plan["overrides"])  # it was: torchcodec==0.17.0 -> torchcodec==0.17.0
    assert {(o["package"], o["requirement"]) for o in plan["overrides"]} >= {("sglang", "torch==2.14.1"), ("sglang", "torchaudio==2.11.0")}


def test_a_floor_error_lists_only_the_floors_the_newest_fails(capsys):
    code, out, err = run_cli(capsys, *STORY, "--require-api", "mm_mxfp8", "--gpu", "sm100,sm120")
    assert code == 1 and out == ""
    bullets = [line for line in err.splitlines() if line.startswith("  - ")]
    assert len(bullets) == 1 and "mm_mxfp8 on sm120 needs FlashInfer >= 0.6.8rc1" in bullets[0]  # it was: sm100's floor (0.6.4, met by 0.6.5) too


def test_inspect_gives_examples_from_a_member_that_has_them_and_says_what_its_byte_count_is(tmp_path, capsys):
    quiet = synthetic_elf(bits=64, big=False, needed=("libtorch.so", "libc.so.6"), imports=("malloc",), lead=8192)  # links torch, imports none of it
    shim = synthetic_elf(bits=64, big=False, needed=("libtorch.so",), imports=("aoti_torch_get_device", "aoti_torch_empty_strided"))
    wheel = tmp_path / "demo-1.0-cp312-cp312-linux_x86_64.whl"
    wheel.write_bytes(wheel_bytes({"demo/a_quiet.so": quiet, "demo/b_shim.so": shim}))
    code, out, err = run_cli(capsys, "inspect", str(wheel), "--format", "table")
    assert code == 0, err
    head = out.splitlines()[:2]
    assert "e.g. none" not in out and "(2 function(s), e.g. aoti_torch_get_device, aoti_torch_empty_strided)" in head[1]
    assert head[0].endswith(f"{wheel.stat().st_size:,} of its {wheel.stat().st_size:,} bytes read (100.0%)")


# -- 2. the tool's environment and the target are two ---------------------------------------------------


def test_the_readme_names_the_tool_s_environment_and_the_target_apart():
    readme = (REPO / "README.md").read_text()
    first = readme.split("```sh\n", 1)[1].splitlines()[0]
    assert first.startswith("python3 -m venv .venv && .venv/bin/pip install -e .")  # the tool's own environment
    machine = [line for line in readme.splitlines() if line.startswith("resolve-gpu-stack install --python")]
    assert machine and all("--python ~/gpu/bin/python" in line for line in machine)  # it was: --python .venv/bin/python, the tool's own
    words = " ".join(readme.split())
    assert "**the tool's own**" in words and "**the target**" in words
    for guide in ("serving-frameworks.md", "installing.md", "troubleshooting.md"):
        text = (REPO / "docs" / "guides" / guide).read_text()
        assert not [line for line in text.splitlines() if "resolve-gpu-stack" in line and "--python .venv/bin/python" in line], guide


def test_the_tool_s_own_environment_as_the_target_is_named_so(tmp_path, capsys):
    """The README's first command puts the tool in .venv; `install --python .venv/bin/python` then
    targets the tool's own environment (no torch): the error says which interpreter, and whose."""
    own = str(Path(sys.prefix) / "bin" / "python")
    code, out, err = run_cli(capsys, "install", "--python", own, "--dry-run", "--snapshot", str(SNAPSHOT), "--cache-dir", str(tmp_path / "c"))
    assert code == 2 and out == ""
    assert f"error: no CUDA label: {own} is resolve-gpu-stack's own environment ({sys.prefix}), and it has no torch" in err
    hint = err.split("hint: ", 1)[1]
    assert "--python /path/to/venv/bin/python" in hint and "uv tool install ." in hint
    assert "install a CUDA build of torch in that environment" not in err  # it was: advice to put torch into the tool's environment


@needs_linux
def test_another_environment_without_torch_is_named_in_the_error(tmp_path, uv_env, capsys):
    python = make_venv(tmp_path / "target", uv_env)
    code, out, err = run_cli(capsys, "--python", python, "--snapshot", str(SNAPSHOT), "--cache-dir", str(tmp_path / "c"))
    assert code == 2 and out == ""
    assert f"error: no CUDA label: the target {python} has no torch and --cuda was not given" in err
    assert "own environment" not in err


# -- 5. a gate is quiet ------------------------------------------------------------------------------


def test_check_quiet_is_one_line_for_the_repository_s_own_warnings(capsys, monkeypatch):
    """The repository's committed locks have warnings (4 on the day of the report: kept wheels with
    no sha256): `check` lists them; `check -q`, run by a pre-commit hook on every commit, says one line."""
    monkeypatch.chdir(REPO)
    code, _, err = run_cli(capsys, "check")
    warnings = err.count("warning: ")
    assert code == 0 and warnings >= 1
    code, out, err = run_cli(capsys, "check", "-q")
    assert code == 0 and out == ""
    [line] = err.splitlines()  # it was: 8 lines, every warning and its hint
    assert line.startswith("ok: 4 lock files consistent and fresh, ") and line.endswith(
        f"{warnings} warning{'s' * (warnings != 1)} (`resolve-gpu-stack check` without -q shows them)"
    )


def test_a_refused_connection_is_one_line_per_url(tmp_path, capsys):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: every connection is refused
    base = f"http://127.0.0.1:{port}/"
    flags = ["--index", f"pytorch={base}whl/", "--index", f"flashinfer={base}fi/", "--index", f"pypi={base}simple/"]
    code, out, err = run_cli(capsys, "--python", "3.12", "--installed", f"torch=={NIGHTLY}", *flags, "--cache-dir", str(tmp_path / "c"))
    assert code != 0 and out == ""
    retries = [line for line in err.splitlines() if line.startswith("retrying ")]
    urls = [line.split()[1] for line in retries]
    assert retries and len(urls) == len(set(urls)), err  # it was: a line per attempt, 4 per URL
    assert all("attempt 2 of 5" in line for line in retries)


@pytest.fixture
def abi_venv(tmp_path: Path, uv_env):
    from support.abi_doors import GOOD, venv_with_the_kept_torch
    from support.abi_world import build_abi_world, have_cxx

    if not have_cxx():
        pytest.skip("needs a C++ compiler")
    world, _ = build_abi_world(tmp_path / "abi")
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        python, _ = venv_with_the_kept_torch(world, srv, tmp_path / "venv", uv_env)
        pins = [f"{name}==1.0" for name in GOOD]
        subprocess.run([UV, "pip", "install", "-q", "--python", python, "--no-deps", "--index-url", f"{srv.url}simple/", *pins], check=True, env=uv_env)
        yield python


@pytest.mark.slow
def test_doctor_summarizes_the_symbol_caveats_and_lists_them_with_v_and_in_json(abi_venv, capsys):
    code, out, err = run_cli(capsys, "doctor", "--python", abi_venv, "--format", "json")
    check = next(c for c in json.loads(out)["checks"] if c["name"] == "torch-abi-symbols")
    notes = check["details"]["notes"]
    assert check["status"] == "warn" and len(notes) == 3, check  # builds-ext, locked-ok, pinned-ok
    assert all(n not in check["message"] for n in notes[1:])  # one example, not every caveat in a cell
    assert check["message"].startswith("4 package(s) fit the installed torch;")
    code, out, _ = run_cli(capsys, "doctor", "--python", abi_venv, "--format", "table")
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if "torch-abi-symbols" in line)
    end = next(i for i, line in enumerate(lines) if "torch-abi-import" in line)
    cell = " ".join(" ".join(line.split("│")[3].split()) for line in lines[start:end] if line.count("│") >= 4)
    assert "locked-ok 1.0: its 2 C++ imports" not in cell and "all 3: `doctor -v`" in cell  # the summary only (it was: every caveat, 40 lines)
    code, out, _ = run_cli(capsys, "doctor", "--python", abi_venv, "--format", "table", "-v")
    assert all(f"torch-abi-symbols: {n}" in " ".join(out.split()) for n in notes)
