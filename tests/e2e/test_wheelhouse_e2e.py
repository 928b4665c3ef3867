"""The fleet recipe end to end: lock (two targets), export one wheelhouse, shut the original
indexes down, serve the wheelhouse with a real static web server (nginx when installed, else
the standard library's), and install from it with uv, pip, and ``install_lock`` into fresh
venvs whose (fake) installed torch stays byte-identical. Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.doors import index_flags, run_cli
from support.install_world import NIGHTLY, PLAT, PY, UV, build_world, dist_info_bytes, installed, make_venv, needs_linux
from support.server import IndexServer
from support.stack_world import ABI3, TORCH_REQUIRES
from support.static_server import nginx, nginx_available, stdlib_server

from resolve_gpu_stack.env.lockinstall import install_lock
from resolve_gpu_stack.env.wheelhouse import export_wheelhouse
from resolve_gpu_stack.errors import UsageError
from resolve_gpu_stack.index.parse import parse_page
from resolve_gpu_stack.model import IndexPage
from resolve_gpu_stack.net.download import WheelCache
from resolve_gpu_stack.net.http import HttpFetcher
from resolve_gpu_stack.net.settings import FetchSettings, TransportSettings

ARM = "manylinux_2_28_aarch64"
STACK = {
    "flashinfer-python": "0.6.5",
    "flashinfer-cubin": "0.6.5",
    "flashinfer-jit-cache": "0.6.5+cu130",
    "triton": "3.7.0+git9c288bc5",
    "apache-tvm-ffi": "0.1.7",
}
JSON_ACCEPT = "application/vnd.pypi.simple.v1+json"


def torch_wheel(world, version: str) -> Path:
    [path] = (world.root / "whl" / "nightly" / "cu130").glob(f"torch-{version}-*{PLAT}.whl")
    return path


def _fleet_world(root: Path):
    w = build_world(root)
    w.pytorch("torch", NIGHTLY, tag=f"{PY}-{PY}-{ARM}", requires=[r.format(hash="9c288bc5") for r in TORCH_REQUIRES], requires_python=">=3.10")
    w.pytorch("triton", "3.7.0+git9c288bc5", tag=f"{PY}-{PY}-{ARM}", at_root=True)
    w.flashinfer("flashinfer-jit-cache", "0.6.5+cu130", tag=f"{ABI3}-{ARM}", page="cu130/flashinfer-jit-cache")
    w.pypi("nvidia-cuda-runtime", "13.0.96", tag=f"py3-none-{ARM}")
    w.pypi("nvidia-cuda-nvrtc", "13.0.88", tag=f"py3-none-{ARM}")
    return w


@pytest.fixture
def fetcher():
    """The download fetcher ``install_lock`` is handed (the command's is its session's ``download_fetcher``)."""
    with HttpFetcher(cache=None) as f:
        yield f


@pytest.fixture
def house(tmp_path: Path, uv_env, capsys):
    """Two locks (this machine, and a declared aarch64 target), exported into one wheelhouse,
    then the original indexes shut down. Yields (world, wheelhouse dir, node venv python)."""
    world = _fleet_world(tmp_path / "www")
    node = make_venv(tmp_path / "ci", uv_env, torch_wheel(world, NIGHTLY))
    locks = tmp_path / "locks"
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        common = [*index_flags(srv.url), "--cache-dir", str(tmp_path / "cache"), "--format", "json"]
        rc, _, err = run_cli(capsys, "lock", "--python", node, *common, "-o", str(locks / "pylock.x86.toml"))
        assert rc == 0, err
        minor = f"{sys.version_info.major}.{sys.version_info.minor}"
        rc, _, err = run_cli(
            capsys,
            "lock",
            "--python",
            minor,
            "--platform",
            "aarch64-manylinux_2_28",
            "--installed",
            f"torch=={NIGHTLY}",
            "--torch",
            "installed",
            *common,
            "-o",
            str(locks / "pylock.arm.toml"),
        )
        assert rc == 0, err
        seen = len(srv.log)
        report = export_wheelhouse(
            [locks / "pylock.x86.toml", locks / "pylock.arm.toml"], tmp_path / "house", wheel_cache=WheelCache(tmp_path / "export-cache"), fetcher=_fetcher()
        )
        assert report.fetched and not report.reused
        downloads = [p for m, p, _ in srv.log[seen:] if m == "GET" and p.endswith(".whl")]
    yield world, tmp_path / "house", report, downloads


def _fetcher():
    from resolve_gpu_stack.net.http import HttpFetcher

    return HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None)


def _servers():
    yield pytest.param("stdlib", id="stdlib")
    yield pytest.param("nginx", id="nginx", marks=pytest.mark.skipif(not nginx_available(), reason="nginx is not installed (apt-get install -y nginx-light)"))


@pytest.mark.slow
@needs_linux
def test_wheelhouse_layout_manifest_and_idempotent_rerun(house, tmp_path):
    world, out, report, downloads = house
    manifest = json.loads((out / "wheelhouse.json").read_text())
    names = [f["filename"] for f in manifest["files"]]
    assert len(names) == len(set(names)) == len(report.files)
    assert len(downloads) == len(set(downloads)) == len(names)  # every wheel crossed the network once
    assert manifest["total-bytes"] == sum(f["size"] for f in manifest["files"]) == sum((out / "files" / n).stat().st_size for n in names)
    shared = {f["filename"]: f["locks"] for f in manifest["files"]}
    assert any(v == ["pylock.arm.toml", "pylock.x86.toml"] for v in shared.values())  # e.g. flashinfer-python, once
    assert any("aarch64" in n for n in names) and any("x86_64" in n for n in names)
    for f in manifest["files"]:
        meta = out / "files" / (f["filename"] + ".metadata")
        assert meta.is_file() and f["metadata-sha256"] == __import__("hashlib").sha256(meta.read_bytes()).hexdigest()
    page = (out / "simple" / "flashinfer-python" / "index.html").read_text()
    assert (
        'data-requires-python="&gt;=3.10"' in page
        and 'data-core-metadata="sha256=' in page
        and 'data-dist-info-metadata="sha256=' in page
        and "#sha256=" in page
    )
    # the rewritten locks: relative paths, the same hashes
    original = (tmp_path / "locks" / "pylock.x86.toml").read_text()
    rewritten = (out / "pylock.x86.toml").read_text()
    assert 'path = "files/' in rewritten and "url = " not in rewritten.split("[tool.")[0]
    assert [line for line in original.splitlines() if "sha256" in line] == [line for line in rewritten.splitlines() if "sha256" in line]
    # a rerun (the original indexes are down) downloads nothing and rewrites nothing
    again = export_wheelhouse(
        [tmp_path / "locks" / "pylock.x86.toml", tmp_path / "locks" / "pylock.arm.toml"],
        out,
        wheel_cache=WheelCache(tmp_path / "empty-cache"),
        fetcher=_fetcher(),
    )
    assert again.fetched == () and again.written == () and len(again.reused) == len(names)
    # --base-url: URLs under it, only the locks change
    based = export_wheelhouse(
        [tmp_path / "locks" / "pylock.x86.toml", tmp_path / "locks" / "pylock.arm.toml"],
        out,
        wheel_cache=WheelCache(tmp_path / "empty-cache"),
        base_url="https://mirror.example/house",
    )
    assert sorted(based.written) == ["pylock.arm.toml", "pylock.x86.toml"] and based.fetched == ()
    assert 'url = "https://mirror.example/house/files/' in (out / "pylock.x86.toml").read_text()


@pytest.mark.slow
@needs_linux
def test_our_parser_reads_the_wheelhouse_pages(house):
    _, out, report, _ = house
    url = "http://127.0.0.1:1/simple/flashinfer-jit-cache/"
    for leaf, ctype in (("index.html", "text/html"), ("index.json", JSON_ACCEPT)):
        parsed = parse_page(IndexPage(url=url, content=(out / "simple" / "flashinfer-jit-cache" / leaf).read_bytes(), content_type=ctype), index="flashinfer")
        assert not parsed.warnings
        assert sorted(f.filename for f in parsed.files) == sorted(f.wheel.filename for f in report.files if f.name == "flashinfer-jit-cache")
        assert all(f.sha256 and f.url.startswith("http://127.0.0.1:1/files/flashinfer_jit_cache-") and f.has_metadata for f in parsed.files)


@pytest.mark.slow
@needs_linux
@pytest.mark.parametrize("kind", list(_servers()))
def test_fleet_installs_from_the_served_wheelhouse(kind, house, tmp_path, uv_env, fetcher):
    world, out, _, _ = house
    with nginx(out, tmp_path / "nginx") if kind == "nginx" else stdlib_server(out) as base:
        if kind == "nginx":  # PEP 691 by content negotiation, HTML otherwise
            import urllib.request

            ask = urllib.request.Request(base + "simple/numpy/", headers={"Accept": JSON_ACCEPT})
            with urllib.request.urlopen(ask) as answer:
                assert answer.headers["Content-Type"] == JSON_ACCEPT and json.load(answer)["name"] == "numpy"
            with urllib.request.urlopen(base + "simple/numpy/") as answer:
                assert answer.headers["Content-Type"].startswith("text/html")
        # 1. plain uv from the lock (relative paths)
        a = make_venv(tmp_path / "a", uv_env, torch_wheel(world, NIGHTLY))
        torch_a = dist_info_bytes(a, "torch")
        subprocess.run([UV, "pip", "install", "-q", "--python", a, "-r", str(out / "pylock.x86.toml")], check=True, env=uv_env, capture_output=True)
        assert _stack(installed(a)) == STACK and dist_info_bytes(a, "torch") == torch_a
        # 2. our install_lock from the lock rewritten for the served URL (what a fleet node runs)
        export_wheelhouse(LOCKS(tmp_path), out, wheel_cache=WheelCache(tmp_path / "c2"), base_url=base + "house")
        served = (out / "pylock.x86.toml").read_text().replace(base + "house/", base)
        (out / "pylock.x86.toml").write_text(served)
        assert f'url = "{base}files/' in served
        b = make_venv(tmp_path / "b", uv_env, torch_wheel(world, NIGHTLY))
        torch_b = dist_info_bytes(b, "torch")
        report = install_lock(out / "pylock.x86.toml", python=b, uv=UV, wheel_cache=WheelCache(tmp_path / "c3"), fetcher=fetcher, env=uv_env)
        assert _stack(installed(b)) == STACK and dist_info_bytes(b, "torch") == torch_b
        assert {r.name: r.action.value for r in report.rows}["torch"] == "keep"
        # and plain uv from the same URL lock
        b2 = make_venv(tmp_path / "b2", uv_env, torch_wheel(world, NIGHTLY))
        subprocess.run([UV, "pip", "install", "-q", "--python", b2, "-r", str(out / "pylock.x86.toml")], check=True, env=uv_env, capture_output=True)
        assert _stack(installed(b2)) == STACK
        # 3. uv and pip with the wheelhouse as the index
        c = make_venv(tmp_path / "c", uv_env, torch_wheel(world, NIGHTLY))
        subprocess.run(
            [UV, "pip", "install", "-q", "--python", c, "--index-url", base + "simple/", "flashinfer-jit-cache==0.6.5+cu130"],
            check=True,
            env=uv_env,
            capture_output=True,
        )
        assert installed(c)["flashinfer-jit-cache"] == "0.6.5+cu130"
        # pip (the one running these tests, pointed at the venv: pip >= 22.3)
        pip = subprocess.run(
            [sys.executable, "-m", "pip", "--python", c, "install", "-q", "--no-cache-dir", "--index-url", base + "simple/", "apache-tvm-ffi==0.1.7"],
            env=uv_env,
            capture_output=True,
            text=True,
        )
        assert pip.returncode == 0, pip.stderr
        assert installed(c)["apache-tvm-ffi"] == "0.1.7" and dist_info_bytes(c, "torch") == dist_info_bytes(a, "torch")


def LOCKS(tmp_path: Path) -> list[Path]:
    return [tmp_path / "locks" / "pylock.x86.toml", tmp_path / "locks" / "pylock.arm.toml"]


def _stack(got: dict[str, str]) -> dict[str, str]:
    return {k: got.get(k, "") for k in STACK}


@pytest.mark.slow
@needs_linux
def test_install_lock_refuses_another_target_unless_forced(house, tmp_path, uv_env, fetcher):
    world, out, _, _ = house
    venv = make_venv(tmp_path / "v", uv_env, torch_wheel(world, NIGHTLY))
    before, torch_before = installed(venv), dist_info_bytes(venv, "torch")
    with pytest.raises(UsageError) as refused:
        install_lock(out / "pylock.arm.toml", python=venv, uv=UV, wheel_cache=WheelCache(tmp_path / "c"), fetcher=fetcher, env=uv_env)
    said = str(refused.value)
    # the cause comes first: the lock's environments exclude this interpreter; then what is
    # installed: the lock keeps the kept torch's closure (cuda-toolkit and the nvidia-* pins its
    # extras hold, triton), none of it installed here
    assert said.split(": ", 1)[1].startswith("the lock's environments ("), said
    assert "exclude Python 3.11 on x86_64" in said.split("; ")[0], said
    assert "cuda-toolkit: the lock keeps the installed cuda-toolkit " in said and "here cuda-toolkit is not installed" in said, said
    assert re.search(r"; and \d+ more$", said), said
    assert "no flag installs" in (refused.value.hint or "")  # the kept packages differ: --force-target would not pass it either
    assert installed(venv) == before
    with pytest.raises(UsageError, match="here triton is not installed") as forced:
        install_lock(out / "pylock.arm.toml", python=venv, uv=UV, wheel_cache=WheelCache(tmp_path / "c"), fetcher=fetcher, env=uv_env, force_target=True)
    assert "no flag installs" in (forced.value.hint or "")
    assert installed(venv) == before
    bare = make_venv(tmp_path / "bare", uv_env)  # no torch: the lock keeps one
    with pytest.raises(UsageError, match="keeps the installed torch"):
        install_lock(out / "pylock.x86.toml", python=bare, uv=UV, wheel_cache=WheelCache(tmp_path / "c"), fetcher=fetcher, env=uv_env)
    # a wheel that is not the one the lock names is refused by uv, with nothing installed: one of
    # another size, and one of the same size with other bytes (uv's hash check)
    from resolve_gpu_stack.errors import UvError

    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    victim = next((copy / "files").glob("flashinfer_python-*.whl"))
    good = victim.read_bytes()
    victim.write_bytes(good + b"\0")
    with pytest.raises(UvError, match="has size"):
        install_lock(copy / "pylock.x86.toml", python=venv, uv=UV, wheel_cache=WheelCache(tmp_path / "c4"), fetcher=fetcher, env=uv_env)
    assert installed(venv) == before
    victim.write_bytes(good[:10] + bytes([good[10] ^ 1]) + good[11:])  # the first entry's modification time: a valid zip
    with pytest.raises(UvError, match="(?i)hash mismatch") as mismatch:
        install_lock(copy / "pylock.x86.toml", python=venv, uv=UV, wheel_cache=WheelCache(tmp_path / "c4"), fetcher=fetcher, env=uv_env)
    assert "sha256 differs" in (mismatch.value.hint or "") and "nothing was installed" in (mismatch.value.hint or "")
    assert installed(venv) == before and dist_info_bytes(venv, "torch") == torch_before
