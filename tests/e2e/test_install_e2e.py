"""`resolve-gpu-stack install` end to end: a loopback world of the stack, a real venv, real uv.

The world is built for the interpreter running the tests (its cpXY tag and machine), so that uv
accepts the tiny wheels for a venv made from it. Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name
from packaging.version import Version
from support.doors import index_flags, run_cli
from support.install_world import NIGHTLY, OLDER, PLAT, PY, UV, build_world, dist_info_bytes, installed, make_venv, needs_linux, torch_wheel
from support.server import IndexServer
from support.stack_world import ABI3
from support.wheels import build_wheel

from resolve_gpu_stack.env.install import check_uv_changes, parse_uv_changes
from resolve_gpu_stack.errors import UvError
from resolve_gpu_stack.model import Action, Coupling, LockedPackage, LockPlan, TargetSummary


@pytest.fixture
def stack(tmp_path: Path, uv_env):
    world = build_world(tmp_path / "www")
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        yield world, srv


@pytest.mark.slow
@needs_linux
def test_install_keeps_torch_byte_identical_and_aligns_flashinfer(stack, tmp_path, uv_env, capsys, monkeypatch):
    world, srv = stack
    python = make_venv(tmp_path / "venv", uv_env, torch_wheel(world, NIGHTLY))
    torch_before = dist_info_bytes(python, "torch")
    from resolve_gpu_stack.env import probe as probe_module

    probed: list[str] = []
    real_init = probe_module.ProbeRun.__init__

    def counted(self, path, timeout):
        probed.append(str(path))
        real_init(self, path, timeout)

    monkeypatch.setattr(probe_module.ProbeRun, "__init__", counted)
    lock = tmp_path / "pylock.gpu.toml"
    rc, out, err = run_cli(
        capsys,
        "install",
        "--torch",
        "nightly",
        "--python",
        python,
        *index_flags(srv.url),
        "--cache-dir",
        str(tmp_path / "cache"),
        "--format",
        "json",
        "-o",
        str(lock),
    )
    assert rc == 0, err
    assert probed == [python, python]  # one probe for the resolver and the install's "before", one after uv
    assert dist_info_bytes(python, "torch") == torch_before
    got = installed(python)
    assert got["torch"] == NIGHTLY
    assert (got["flashinfer-python"], got["flashinfer-cubin"], got["flashinfer-jit-cache"]) == ("0.6.5", "0.6.5", "0.6.5+cu130")
    assert got["triton"] == "3.7.0+git9c288bc5" and got["apache-tvm-ffi"] == "0.1.7"
    report = json.loads(out)
    rows = {p["name"]: p for p in report["packages"]}
    assert rows["torch"]["action"] == "keep" and rows["torch"]["before"] == rows["torch"]["after"] == NIGHTLY
    assert rows["flashinfer-jit-cache"] == {
        "name": "flashinfer-jit-cache",
        "version": "0.6.5+cu130",
        "action": "install",
        "index": "flashinfer",
        "before": None,
        "after": "0.6.5+cu130",
        "size": None,
        "reason": "== flashinfer-python public version + CUDA label; SASS for one CUDA major: needs libcudart.so.<major> from torch's runtime",
    }
    assert not any("torch" == c.split()[1].split("==")[0] for c in report["uv"])
    # torch was never downloaded; the nightly triton (no hash on its index) was, once
    asked = [path for method, path, _ in srv.log if method == "GET"]
    assert not any(p.startswith("/whl/nightly/cu130/torch-") and p.endswith(".whl") for p in asked)
    # installed like from an index: no file:// URL into our cache recorded in the environment
    assert dist_info_bytes(python, "flashinfer_jit_cache")["INSTALLER"].strip() == b"uv"
    assert "direct_url.json" not in dist_info_bytes(python, "flashinfer_jit_cache")
    # the lock written on the way has a sha256 for the nightly triton it installs
    text = lock.read_text()
    assert "triton" in text and report["lock"] == str(lock)


@pytest.mark.slow
@needs_linux
def test_tampered_wheel_is_refused_and_nothing_is_installed(stack, tmp_path, uv_env, capsys):
    world, srv = stack
    python = make_venv(tmp_path / "venv", uv_env, torch_wheel(world, NIGHTLY))
    # same name, version and METADATA (so the resolver's range reads still work), other bytes;
    # the FlashInfer page promises a sha256 (and no size) for it
    [jit] = (world.root / "releases" / "download" / "v0.6.5").glob("flashinfer_jit_cache-0.6.5+cu130-*.whl")
    published = hashlib.sha256(jit.read_bytes()).hexdigest()
    tampered = build_wheel(
        jit.parent,
        "flashinfer-jit-cache",
        "0.6.5+cu130",
        f"{ABI3}-{PLAT}",
        files={"flashinfer_jit_cache/__init__.py": b"import os  # not what was published\n"},
    )
    assert tampered.path == jit and tampered.sha256 != published
    before = installed(python)
    cache = tmp_path / "cache"
    rc, out, err = run_cli(capsys, "install", "--python", python, *index_flags(srv.url), "--cache-dir", str(cache), "--format", "json")
    assert rc == 3 and out == ""
    assert "sha256 mismatch" in err and jit.name in err and published in err and tampered.sha256 in err
    assert installed(python) == before
    assert not [p for p in (cache / "wheels" / "sha256").rglob(jit.name)]
    assert not [p for p in (cache / "wheels" / "partial").glob("*") if p.is_file()]


@pytest.mark.slow
@needs_linux
def test_dry_run_changes_nothing_and_says_what_would(stack, tmp_path, uv_env, capsys):
    world, srv = stack
    python = make_venv(tmp_path / "venv", uv_env, torch_wheel(world, NIGHTLY))
    before = installed(python)
    rc, out, err = run_cli(
        capsys, "install", "--dry-run", "--python", python, *index_flags(srv.url), "--cache-dir", str(tmp_path / "cache"), "--format", "json"
    )
    assert rc == 0, err
    assert installed(python) == before
    report = json.loads(out)
    assert report["dry_run"] is True
    rows = {p["name"]: p for p in report["packages"]}
    assert (rows["flashinfer-jit-cache"]["action"], rows["flashinfer-jit-cache"]["version"]) == ("install", "0.6.5+cu130")
    assert rows["flashinfer-python"]["after"] is None and rows["torch"]["action"] == "keep"
    # a dry run downloads nothing: no whole wheel was requested (resolving may range-read one), none is cached
    downloads = [
        path for method, path, headers in srv.log if path.split("?")[0].endswith(".whl") and method == "GET" and "range" not in {h.lower() for h in headers}
    ]
    assert downloads == []
    assert not [p for p in (tmp_path / "cache" / "wheels").rglob("*.whl")]
    assert report["download"]["files"] == sum(1 for p in report["packages"] if p["action"] != "keep") and report["download"]["cached"] == 0


@pytest.mark.slow
@needs_linux
def test_an_older_nightly_is_kept_byte_identical_unless_the_move_is_named(stack, tmp_path, uv_env, capsys):
    """Issue 47: no --torch flag (nightly by default) and a newer nightly on the index: install keeps
    the installed nightly, its dist-info (RECORD included) byte-identical; --upgrade-package torch,
    the word to move it, upgrades it through uv."""
    world, srv = stack
    python = make_venv(tmp_path / "venv", uv_env, torch_wheel(world, OLDER))
    before = dist_info_bytes(python, "torch")
    flags = [*index_flags(srv.url), "--cache-dir", str(tmp_path / "cache"), "--format", "json"]
    rc, out, err = run_cli(capsys, "install", "--python", python, "--dry-run", *flags)
    assert rc == 0, err
    assert {p["name"]: p for p in json.loads(out)["packages"]}["torch"]["action"] == "keep"
    rc, out, err = run_cli(capsys, "install", "--python", python, *flags)
    assert rc == 0, err
    rows = {p["name"]: p for p in json.loads(out)["packages"]}
    assert rows["torch"]["action"] == "keep" and rows["torch"]["after"] == OLDER, rows["torch"]
    assert installed(python)["torch"] == OLDER and installed(python)["flashinfer-python"] == "0.6.5"
    assert dist_info_bytes(python, "torch") == before and "RECORD" in before
    rc, out, err = run_cli(capsys, "install", "--python", python, "--upgrade-package", "torch", *flags)
    assert rc == 0, err
    rows = {p["name"]: p for p in json.loads(out)["packages"]}
    assert rows["torch"]["action"] == "upgrade" and (rows["torch"]["before"], rows["torch"]["after"]) == (OLDER, NIGHTLY)
    assert installed(python)["torch"] == NIGHTLY


@pytest.mark.slow
@needs_linux
def test_an_exact_torch_version_moves_torch_through_uv(stack, tmp_path, uv_env, capsys):
    world, srv = stack
    python = make_venv(tmp_path / "venv", uv_env, torch_wheel(world, OLDER))
    rc, out, err = run_cli(
        capsys, "install", "--python", python, "--torch", NIGHTLY, *index_flags(srv.url), "--cache-dir", str(tmp_path / "cache"), "--format", "json"
    )
    assert rc == 0, err
    rows = {p["name"]: p for p in json.loads(out)["packages"]}
    assert rows["torch"]["action"] == "upgrade" and (rows["torch"]["before"], rows["torch"]["after"]) == (OLDER, NIGHTLY)
    assert installed(python)["torch"] == NIGHTLY


@pytest.mark.slow
@needs_linux
def test_a_torch_move_nobody_named_never_reaches_uv(tmp_path, uv_env):
    """The install door checks again: a plan that moves torch, its recorded inputs without the word
    (an exact --torch, --upgrade-package torch), is refused before uv runs; nothing changes."""
    from dataclasses import replace

    from support.stack_world import resolve_with, serve

    from resolve_gpu_stack.env.install import install_plan
    from resolve_gpu_stack.env.probe import inspect_environment
    from resolve_gpu_stack.errors import UsageError
    from resolve_gpu_stack.model.request import ResolveRequest
    from resolve_gpu_stack.net.wheelcache import WheelCache

    world = build_world(tmp_path / "www")
    python = make_venv(tmp_path / "venv", uv_env, torch_wheel(world, OLDER))
    before = dist_info_bytes(python, "torch")
    environment = inspect_environment(python)
    with serve(world) as (srv, defs, finder):
        plan = resolve_with(finder, defs, ResolveRequest.build(target=environment.target, torch=NIGHTLY))
        assert plan.torch is not None and plan.torch.action is Action.UPGRADE
        unnamed = replace(plan, inputs={**plan.inputs, "torch": "nightly"})
        asked = len(srv.log)
        cache = WheelCache.under(tmp_path / "cache")
        with pytest.raises(UsageError) as err:
            install_plan(unnamed, python=python, uv=UV, wheel_cache=cache, dry_run=False, env=uv_env, environment=environment)
        assert "does not name that move" in err.value.message and "--upgrade-package torch" in (err.value.hint or "")
        assert len(srv.log) == asked  # refused before any download, let alone uv
    assert installed(python)["torch"] == OLDER and dist_info_bytes(python, "torch") == before


@pytest.mark.slow
@needs_linux
def test_install_refuses_the_system_python_unless_told(stack, tmp_path, uv_env, capsys, monkeypatch):
    """Like uv: with no virtual environment active and no --python, install refuses; --system installs
    into python3 on PATH (here a venv's python3 standing in for the system's), with the real uv."""
    world, srv = stack
    python = make_venv(tmp_path / "venv", uv_env, torch_wheel(world, NIGHTLY))
    monkeypatch.setenv("PATH", f"{Path(python).parent}{os.pathsep}{os.environ['PATH']}")
    rc, out, err = run_cli(capsys, "install", *index_flags(srv.url), "--cache-dir", str(tmp_path / "cache"), "--format", "json")
    assert rc == 2 and "no virtual environment is active" in err and "--system" in err
    assert srv.log == [] and "flashinfer-python" not in installed(python)
    rc, out, err = run_cli(capsys, "install", "--system", *index_flags(srv.url), "--cache-dir", str(tmp_path / "cache"), "--format", "json")
    assert rc == 0, err
    assert installed(python)["flashinfer-python"] == "0.6.5" and installed(python)["torch"] == NIGHTLY


@pytest.mark.slow
@needs_linux
def test_declared_python_is_a_usage_error_for_install(stack, capsys):
    _, srv = stack
    rc, out, err = run_cli(capsys, "install", "--python", "3.12", *index_flags(srv.url))
    assert rc == 2 and "real interpreter" in err and srv.log == []


@pytest.mark.slow
@needs_linux
def test_written_pylock_installs_with_plain_uv_into_a_fresh_venv(stack, tmp_path, uv_env, capsys):
    world, srv = stack
    python = make_venv(tmp_path / "venv", uv_env, torch_wheel(world, NIGHTLY))
    lock = tmp_path / "pylock.gpu.toml"
    rc, _, err = run_cli(capsys, "lock", "--python", python, *index_flags(srv.url), "--cache-dir", str(tmp_path / "cache"), "-o", str(lock))
    assert rc == 0, err
    fresh = make_venv(tmp_path / "fresh", uv_env)
    subprocess.run([UV, "pip", "install", "-q", "--python", fresh, "-r", str(lock)], check=True, env=uv_env, capture_output=True)
    got = installed(fresh)
    assert got["triton"] == "3.7.0+git9c288bc5"  # a nightly row without an index hash: filled by the lock
    assert (got["flashinfer-python"], got["flashinfer-jit-cache"]) == ("0.6.5", "0.6.5+cu130")
    assert got["torch"] == NIGHTLY  # the kept torch is listed at its version and hash: a fresh venv gets exactly it
    # where it is installed, `uv pip sync` of the lock leaves it alone (issue 13, item 3)
    before = installed(python)["torch"]
    proc = subprocess.run([UV, "pip", "sync", "--python", python, str(lock)], check=True, env=uv_env, capture_output=True, text=True)
    assert "torch" not in proc.stderr and installed(python)["torch"] == before == NIGHTLY


# -- uv's output against the plan (real uv output, no install) -------------------------------------


def _plan(torch_action: Action) -> LockPlan:
    def pkg(name: str, version: str, action: Action, installed: str | None = None) -> LockedPackage:
        return LockedPackage(
            name=canonicalize_name(name),
            version=Version(version),
            action=action,
            index="pypi",
            coupling=Coupling.AGNOSTIC,
            installed_version=Version(installed) if installed else None,
        )

    return LockPlan(
        target=TargetSummary(python="3.12", platform="x86_64-manylinux_2_28", cuda="cu130"),
        packages=(pkg("torch", NIGHTLY, torch_action, OLDER if torch_action is Action.UPGRADE else None), pkg("foo", "1.0", Action.INSTALL)),
    )


@pytest.mark.slow
@needs_linux
def test_uv_dry_run_that_would_replace_torch_is_refused(tmp_path, uv_env):
    """Real uv output for a request that replaces torch, checked against a plan that keeps it."""
    wheels = tmp_path / "w"
    older = build_wheel(wheels, "torch", OLDER, f"{PY}-{PY}-{PLAT}")
    newer = build_wheel(wheels, "torch", NIGHTLY, f"{PY}-{PY}-{PLAT}")
    foo = build_wheel(wheels, "foo", "1.0")
    python = make_venv(tmp_path / "venv", uv_env, older.path)
    dry = subprocess.run(
        [UV, "pip", "install", "--dry-run", "--python", python, "--no-deps", "--offline", str(newer.path), str(foo.path)],
        check=True,
        env=uv_env,
        capture_output=True,
        text=True,
    )
    changes = parse_uv_changes(dry.stderr)
    assert {(c.op, c.name) for c in changes} >= {("-", "torch"), ("+", "torch"), ("+", "foo")}
    have = {canonicalize_name("torch"): Version(OLDER)}
    keep = _plan(Action.KEEP)
    keep = LockPlan(
        target=keep.target,
        packages=(
            LockedPackage(name=canonicalize_name("torch"), version=Version(OLDER), action=Action.KEEP, index="installed", coupling=Coupling.TORCH),
            keep.packages[1],
        ),
    )
    with pytest.raises(UvError) as err:
        check_uv_changes(changes, keep, have)
    assert f"torch=={OLDER}" in str(err.value) and "must stay" in str(err.value)
    # the same output is fine for a plan that upgrades torch to exactly that nightly
    check_uv_changes(changes, _plan(Action.UPGRADE), have)


def test_uv_change_lines_are_checked_against_the_plan():
    have = {canonicalize_name("torch"): Version(OLDER)}
    plan = _plan(Action.UPGRADE)
    check_uv_changes(parse_uv_changes(f" - torch=={OLDER}\n + torch=={NIGHTLY}\n + foo==1.0\n"), plan, have)
    with pytest.raises(UvError, match="not in the plan"):
        check_uv_changes(parse_uv_changes(" + bar==2.0\n"), plan, have)
    with pytest.raises(UvError, match="plan says upgrade"):
        check_uv_changes(parse_uv_changes(" + torch==2.12.0.dev20260308+cu130\n"), plan, have)
    with pytest.raises(UvError):
        check_uv_changes(parse_uv_changes(f" ~ torch=={NIGHTLY}\n"), plan, have)
    assert parse_uv_changes("Resolved 2 packages in 3ms\nWould install 2 packages\n") == []


@pytest.mark.slow
@needs_linux
def test_uv_failures_are_uv_errors_with_uvs_message_and_no_credentials(stack, tmp_path, uv_env, capsys):
    from resolve_gpu_stack.env.install import _run_uv

    world, srv = stack
    python = make_venv(tmp_path / "venv", uv_env, torch_wheel(world, NIGHTLY))
    before = installed(python)
    rc, out, err = run_cli(
        capsys, "install", "--uv", str(tmp_path / "no-such-uv"), "--python", python, *index_flags(srv.url), "--cache-dir", str(tmp_path / "cache")
    )
    assert rc == 2 and "--uv" in err and "no-such-uv" in err
    assert installed(python) == before and srv.log == []  # refused before any request
    with pytest.raises(UvError) as failed:
        _run_uv(
            [
                UV,
                "pip",
                "install",
                "--dry-run",
                "--offline",
                "--no-config",
                "--python",
                python,
                "foo @ https://alice:s3cret@pypi.example/foo-1.0-py3-none-any.whl",
            ],
            uv_env,
            what="uv pip install --dry-run",
        )
    assert "exit 1" in str(failed.value) and "pypi.example/foo-1.0-py3-none-any.whl" in str(failed.value)
    assert "s3cret" not in str(failed.value)
