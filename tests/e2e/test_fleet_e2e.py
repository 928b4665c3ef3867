"""The fleet recipe of the README, end to end and through the command line only: CI locks and
exports a wheelhouse (`lock`, `wheelhouse`), the original indexes shut down, a static web server
serves the wheelhouse, and two fresh nodes (a fake installed torch each) install the same stack,
one with plain `uv pip install -r DIR/pylock.x.toml`, one with `install --lock`; torch's
dist-info stays byte-identical. The served wheelhouse is also a mirror of all three logical
indexes for the resolver (`--index NAME=flat:URL/simple/`). Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from urllib.parse import unquote

import pytest
from support.doors import index_flags, run_cli
from support.install_world import NIGHTLY, UV, build_world, dist_info_bytes, installed, make_venv, needs_linux, torch_wheel
from support.server import IndexServer
from support.static_server import stdlib_server

STACK = ("flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache", "triton", "apache-tvm-ffi", "numpy")


def _flat(base: str) -> list[str]:
    return [flag for name in ("pytorch", "flashinfer", "pypi") for flag in ("--index", f"{name}=flat:{base}simple/")]


@pytest.mark.slow
@needs_linux
def test_fleet_recipe_lock_wheelhouse_and_two_nodes(tmp_path: Path, uv_env, capsys):
    world = build_world(tmp_path / "www")
    ci = make_venv(tmp_path / "ci", uv_env, torch_wheel(world, NIGHTLY))
    lock, house = tmp_path / "ci-out" / "pylock.x.toml", tmp_path / "house"
    # CI: lock against the real indexes, export the wheelhouse
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        rc, _, err = run_cli(capsys, "lock", "--python", ci, *index_flags(srv.url), "--cache-dir", str(tmp_path / "cache"), "--format", "json", "-o", str(lock))
        assert rc == 0, err
        rc, out, err = run_cli(capsys, "wheelhouse", str(lock), "--output", str(house), "--cache-dir", str(tmp_path / "cache"), "--format", "json")
        assert rc == 0, err
        report = json.loads(out)
        assert report["schema"] == "resolve-gpu-stack/wheelhouse-report/v1" and report["fetched"] and not report["reused"]
        assert "wheelhouse " in err and f"{report['files']} wheels" in err  # the summary on stderr
    # the original indexes are down from here on; a rerun offline changes nothing
    rc, out, err = run_cli(capsys, "wheelhouse", str(lock), "--output", str(house), "--cache-dir", str(tmp_path / "empty"), "--format", "json")
    assert rc == 0, err
    again = json.loads(out)
    assert again["fetched"] == [] and again["written"] == [] and len(again["reused"]) == report["files"]
    node_lock = house / "pylock.x.toml"
    with stdlib_server(house) as base:
        # node 1: plain uv, from the rewritten lock (paths relative to it)
        a = make_venv(tmp_path / "a", uv_env, torch_wheel(world, NIGHTLY))
        torch_a = dist_info_bytes(a, "torch")
        subprocess.run([UV, "pip", "install", "-q", "--python", a, "-r", str(node_lock)], check=True, env=uv_env, capture_output=True)
        # node 2: resolve-gpu-stack install --lock (no resolving, no index)
        b = make_venv(tmp_path / "b", uv_env, torch_wheel(world, NIGHTLY))
        torch_b = dist_info_bytes(b, "torch")
        rc, out, err = run_cli(
            capsys, "install", "--lock", str(node_lock), "--python", b, "--uv", UV, "--cache-dir", str(tmp_path / "node-cache"), "--format", "json"
        )
        assert rc == 0, err
        rows = {r["name"]: r["action"] for r in json.loads(out)["packages"]}
        got_a, got_b = installed(a), installed(b)
        assert {k: got_a.get(k) for k in STACK} == {k: got_b.get(k) for k in STACK}
        assert got_a["flashinfer-jit-cache"] == "0.6.5+cu130" and got_a["torch"] == got_b["torch"] == NIGHTLY
        assert dist_info_bytes(a, "torch") == torch_a and dist_info_bytes(b, "torch") == torch_b == torch_a
        assert rows["torch"] == "keep" and rows["flashinfer-jit-cache"] == "install"
        # the served wheelhouse as a mirror of all three logical indexes: the same plan, each
        # package still from the index that owns it
        # (torch is kept and is not in the wheelhouse: the plan keeps the installed one)
        mirrored = json.loads(_plan_json(capsys, "--python", ci, *_flat(base), "--cache-dir", str(tmp_path / "mirror-cache")))
        got = {p["name"]: (p["version"], p["index"], p["action"]) for p in mirrored["packages"]}
        want = {p["name"]: (p["version"], p["index"], p["action"]) for p in json.loads(_lock_as_plan(lock))}
        assert got.pop("torch")[::2] == want.pop("torch")[::2] == (NIGHTLY, "keep")
        assert got == want and {v[1] for v in got.values()} == {"pytorch", "flashinfer", "pypi"}


def _plan_json(capsys, *argv: str) -> str:
    rc, out, err = run_cli(capsys, "resolve", *argv, "--format", "json")
    assert rc == 0, err
    return out


def _lock_as_plan(lock: Path) -> str:
    from resolve_gpu_stack.lock.files import read_lock
    from resolve_gpu_stack.lock.pylock import plan_from_lock

    plan = plan_from_lock(read_lock(lock))
    return json.dumps([{"name": p.name, "version": str(p.version), "index": p.index, "action": p.action.value} for p in plan.packages])


@pytest.mark.slow
@needs_linux
def test_install_lock_cli_refuses_resolver_flags_and_a_missing_lock(tmp_path: Path, capsys):
    rc, _, err = run_cli(capsys, "install", "--lock", str(tmp_path / "pylock.x.toml"), "--flashinfer", "0.6.5")
    assert rc == 2 and "--flashinfer" in err and "nothing is" in err
    rc, _, err = run_cli(capsys, "install", "--lock", str(tmp_path / "pylock.x.toml"), "--index", "pypi=http://127.0.0.1:1/")
    assert rc == 2 and "--index" in err
    rc, _, err = run_cli(capsys, "install", "--lock", str(tmp_path / "pylock.x.toml"))
    assert rc == 2 and "no such file" in err
    rc, _, err = run_cli(capsys, "install", "--force-target")
    assert rc == 2 and "--force-target only applies to --lock" in err


def test_wheelhouse_cli_errors(tmp_path: Path, capsys):
    lock = tmp_path / "pylock.x.toml"
    lock.write_text("")
    rc, _, err = run_cli(capsys, "wheelhouse", str(lock), "--output", str(tmp_path / "h"), "--base-url", "https://user:tok@mirror.example/h")
    assert rc == 2 and "credentials" in err and "tok" not in err
    rc, _, err = run_cli(capsys, "wheelhouse", str(lock), "--output", str(tmp_path / "h"), "--base-url", "mirror.example/h")
    assert rc == 2 and "not an http(s) URL" in err
    rc, _, err = run_cli(capsys, "wheelhouse", str(tmp_path / "nope.toml"), "--output", str(tmp_path / "h"))
    assert rc == 2 and "no such lock" in err
    rc, _, err = run_cli(capsys, "wheelhouse", str(lock), "--output", str(tmp_path))
    assert rc == 2 and "rewrites its locks there" in err


@pytest.mark.slow
@needs_linux
def test_install_lock_hands_the_lock_to_uv_and_downloads_each_wheel_once(tmp_path: Path, uv_env, capsys):
    world = build_world(tmp_path / "www")
    ci = make_venv(tmp_path / "ci", uv_env, torch_wheel(world, NIGHTLY))
    lock = tmp_path / "pylock.x.toml"
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        rc, _, err = run_cli(capsys, "lock", "--python", ci, *index_flags(srv.url), "--cache-dir", str(tmp_path / "cache"), "--format", "json", "-o", str(lock))
        assert rc == 0, err
        node = make_venv(tmp_path / "node", uv_env, torch_wheel(world, NIGHTLY))
        torch_before, before = dist_info_bytes(node, "torch"), installed(node)
        # the dry run (uv's own, on the lock) downloads no wheel and changes nothing
        seen = len(srv.log)
        rc, out, err = run_cli(
            capsys, "install", "--lock", str(lock), "--dry-run", "--python", node, "--uv", UV, "--cache-dir", str(tmp_path / "node-cache"), "--format", "json"
        )
        assert rc == 0, err
        preview = json.loads(out)
        assert preview["dry_run"] is True and any(line.startswith("+ flashinfer-jit-cache==0.6.5+cu130") for line in preview["uv"])
        assert preview["download"]["files"] == len([p for p in preview["packages"] if p["action"] != "keep"])
        assert [p for m, p, _ in srv.log[seen:] if p.endswith(".whl")] == [] and installed(node) == before
        # the real run: every wheel of the lock once (uv downloads and checks it while installing), torch never
        seen = len(srv.log)
        rc, out, err = run_cli(
            capsys, "install", "--lock", str(lock), "--python", node, "--uv", UV, "--cache-dir", str(tmp_path / "node-cache"), "--format", "json"
        )
        assert rc == 0, err
        gets = [(p, _agent(h)) for m, p, h in srv.log[seen:] if m == "GET" and p.endswith(".whl")]
        wheels = [p for p, agent in gets if agent == "uv"]
        ours = [unquote(p.rsplit("/", 1)[-1]) for p, agent in gets if agent != "uv"]
    rows = {r["name"]: r for r in json.loads(out)["packages"]}
    want = {r["name"] for r in rows.values() if r["action"] != "keep"}
    assert len(wheels) == len(set(wheels)) == len(want) and not any("/torch-" in p for p in wheels)
    assert {n for n in want if any(p.rsplit("/", 1)[-1].startswith(n.replace("-", "_") + "-") for p in wheels)} == want
    assert rows["torch"]["action"] == "keep" and dist_info_bytes(node, "torch") == torch_before
    assert all(installed(node)[n] == r["version"] for n, r in rows.items())
    # uv fetched every wheel itself; the compiled ones (a platform tag) were fetched by us first,
    # once each, their verdicts read again from the verified files before uv ran (issue 48)
    compiled = sorted(unquote(p.rsplit("/", 1)[-1]) for p in wheels if not p.endswith("-any.whl"))
    assert compiled and sorted(ours) == compiled, (ours, compiled)
    assert sorted(p.name for p in (tmp_path / "node-cache").rglob("*.whl")) == compiled


def _agent(headers: dict[str, str]) -> str:
    return next((v for k, v in headers.items() if k.lower() == "user-agent"), "").split("/", 1)[0]


@pytest.mark.slow
@needs_linux
def test_cold_install_hands_a_fully_hashed_plan_to_uv(tmp_path: Path, uv_env, capsys):
    """`install` (resolving): when every wheel to install has its index's sha256, the plan goes to
    uv as a temporary pylock, as `install --lock` does: each wheel downloaded once, by uv, while it
    installs; torch untouched."""
    world = build_world(tmp_path / "www")
    node = make_venv(tmp_path / "node", uv_env, torch_wheel(world, NIGHTLY))
    torch_before = dist_info_bytes(node, "torch")
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        # a nightly torch comes with its triton pin installed; the index lists triton without a
        # sha256, so a plan that installs it must download it to hash it (our own path)
        triton = next((world.root / "whl" / "nightly").glob("triton-*.whl"))
        subprocess.run([UV, "pip", "install", "-q", "--python", node, "--no-deps", "--offline", str(triton)], check=True, env=uv_env)
        seen = len(srv.log)
        rc, out, err = run_cli(
            capsys, "install", "--python", node, *index_flags(srv.url), "--uv", UV, "--cache-dir", str(tmp_path / "cache"), "--format", "json"
        )
        assert rc == 0, err
        # whole-file GETs (the resolve itself reads METADATA with Range requests), and who sent them
        whole = [(p, h) for m, p, h in srv.log[seen:] if m == "GET" and p.endswith(".whl") and not any(k.lower() == "range" for k in h)]
        wheels = [p for p, _ in whole]
        agents = {next((v for k, v in h.items() if k.lower() == "user-agent"), "").split("/", 1)[0] for _, h in whole}
    assert agents == {"uv", "resolve-gpu-stack"}, agents  # uv downloaded them while installing; we, the compiled ones, before it (issue 48)
    ours = [p for p, h in whole if _agent(h) != "uv"]
    wheels = [p for p, h in whole if _agent(h) == "uv"]
    assert ours and all(not p.endswith("-any.whl") for p in ours) and len(ours) == len(set(ours))
    rows = {r["name"]: r for r in json.loads(out)["packages"]}
    want = {r["name"] for r in rows.values() if r["action"] != "keep"}
    assert want and len(wheels) == len(set(wheels)) == len(want) and not any("/torch-" in p for p in wheels)
    assert rows["torch"]["action"] == "keep" and dist_info_bytes(node, "torch") == torch_before
    assert all(installed(node)[n] == r["version"] for n, r in rows.items())
