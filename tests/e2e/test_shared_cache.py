"""One cache directory shared by processes started at the same moment, and cache files corrupted
on disk. Real processes (``python -m resolve_gpu_stack``), a real venv, real uv, a loopback world
with some latency so the runs overlap."""

from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from support import install_world
from support.faults import cache_problems
from support.server import IndexServer
from support.terminal import foreground

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not install_world._glibc_ok() or not Path(install_world.UV).exists(), reason="needs Linux with glibc >= 2.28 and uv next to this interpreter"
    ),
]

PYTHON_VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"
# the older nightly moved to the newest by name (the plan downloads the new torch's wheel to hash it)
DECLARED = [
    "--python",
    PYTHON_VERSION,
    "--platform",
    f"{platform.machine()}-manylinux_2_28",
    "--installed",
    f"torch=={install_world.OLDER}",
    "--upgrade-package",
    "torch",
]


def program_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_", "VIRTUAL_ENV"))}
    env.update({"HOME": str(tmp_path / "home"), "UV_CACHE_DIR": str(tmp_path / "uv-cache"), "UV_PYTHON_DOWNLOADS": "never", "UV_NO_CONFIG": "1"})
    return env


def start(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "resolve_gpu_stack", *argv], env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=foreground
    )


def finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=180)
    return proc.returncode, out, err


def gets(srv: IndexServer, since: int, path: str) -> list[dict[str, str]]:
    return [h for m, p, h in srv.log[since:] if m == "GET" and unquote(urlsplit(p).path) == path]


def entry_for(cache: Path, kind: str, needle: str) -> Path:
    """The cache entry (pages-v1 / metadata-v1) whose recorded key contains ``needle``."""
    for path in (p for p in (cache / kind).rglob("*") if p.is_file()):
        header = json.loads(path.read_bytes().partition(b"\n")[0])
        if needle in header["key"]:
            return path
    raise AssertionError(f"no {kind} entry for {needle}")


def flip(path: Path, at: int = -10) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def test_concurrent_runs_share_one_cache_and_a_corrupted_cache_is_fetched_again(tmp_path: Path) -> None:
    env = program_env(tmp_path)
    world = install_world.build_world(tmp_path / "www")
    cache = tmp_path / "cache"
    with IndexServer(world.root, latency=0.03) as srv:
        world.write(srv.url)
        python = install_world.make_venv(tmp_path / "venv", env, install_world.torch_wheel(world, install_world.NIGHTLY))
        flags = [*install_world.index_flags(srv.url), "--cache-dir", str(cache), "--format", "json"]

        # -- four processes at once on one empty cache: two resolves, an install, a lock that
        #    downloads the same unhashed nightly wheels as the install
        procs = [
            start(["resolve", "--python", python, *flags], env, tmp_path),
            start(["resolve", "--python", python, *flags], env, tmp_path),
            start(["install", "--python", python, *flags], env, tmp_path),
            start(["lock", *DECLARED, *flags, "-o", "pylock.x.toml"], env, tmp_path),
        ]
        results = [finish(p) for p in procs]
        for rc, _out, err in results:
            assert rc == 0, err
        plan_a, plan_b = (json.loads(results[i][1]) for i in (0, 1))
        assert plan_a == plan_b
        planned = {(p["name"], p["version"], p["action"]) for p in plan_a["packages"]}
        report = json.loads(results[2][1])
        assert {(p["name"], p["version"], p["action"]) for p in report["packages"]} == planned
        assert install_world.installed(python)["flashinfer-jit-cache"] == "0.6.5+cu130"
        assert (tmp_path / "pylock.x.toml").is_file()
        assert cache_problems(cache, world.root) == []
        assert not list((cache / "wheels" / "partial").glob("*.part"))

        # -- corrupt a page entry, a METADATA entry and a wheel of the wheel cache, on disk
        page = entry_for(cache, "pages-v1", "/simple/flashinfer-python/")
        meta = entry_for(cache, "metadata-v1", "flashinfer_python-0.6.5-py3-none-any.whl")
        [triton] = (cache / "wheels" / "sha256").rglob("triton-*.whl")
        for path in (page, meta, triton):
            flip(path)
        mark = len(srv.log)
        rc, out, err = finish(start(["lock", *DECLARED, *flags, "-o", "pylock.y.toml"], env, tmp_path))
        assert rc == 0, err
        assert "is corrupt" in err and "is damaged" in err  # each detection is said, not silent
        # the page came again in full (no validator from a corrupt entry), the METADATA was read
        # again, and the wheel downloaded again
        [page_get] = gets(srv, mark, "/simple/flashinfer-python/")
        assert "If-None-Match" not in page_get
        assert gets(srv, mark, "/files/flashinfer_python-0.6.5-py3-none-any.whl")
        assert gets(srv, mark, "/whl/nightly/" + triton.name)
        assert cache_problems(cache, world.root) == []
        assert (tmp_path / "pylock.x.toml").read_text().split("\n[tool")[0].replace("pylock.x", "pylock.y") == (tmp_path / "pylock.y.toml").read_text().split(
            "\n[tool"
        )[0].replace("pylock.x", "pylock.y")


def test_interrupted_download_leaves_no_temp_file_and_the_next_run_finishes_it(tmp_path: Path) -> None:
    """Ctrl-C while a wheel is half downloaded: exit 130, no lock, no temp file, nothing unverified
    in the cache (at most resumable bytes in partial/); the next run finishes the job."""
    from support.server import Fault

    env = program_env(tmp_path)
    world = install_world.build_world(tmp_path / "www")
    cache = tmp_path / "cache"
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        [torch] = (world.root / "whl" / "nightly" / "cu130").glob(f"torch-{install_world.NIGHTLY}-*.whl")
        path = f"/whl/nightly/cu130/{torch.name}"
        srv.script(path, [Fault(stall_after=torch.stat().st_size // 2, delay=2.0)])
        flags = [*install_world.index_flags(srv.url), "--cache-dir", str(cache)]
        proc = start(["lock", *DECLARED, *flags, "-o", "pylock.x.toml"], env, tmp_path)
        deadline = time.monotonic() + 60
        while not gets(srv, 0, path) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert gets(srv, 0, path), "the download never started"
        time.sleep(0.3)  # half the wheel is on its way, the rest is stalled
        proc.send_signal(signal.SIGINT)
        rc, _, err = finish(proc)
        assert rc == 130 and "interrupted" in err and "Traceback" not in err
        assert not (tmp_path / "pylock.x.toml").exists()
        assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp") or p.name.startswith(".tmp-")]
        assert cache_problems(cache, world.root) == []  # a partial file, if any, is a prefix of the wheel
        parts = list((cache / "wheels" / "partial").glob("*.part"))
        have = parts[0].stat().st_size if parts else None
        mark = len(srv.log)
        rc, _, err = finish(start(["lock", *DECLARED, *flags, "-o", "pylock.x.toml"], env, tmp_path))
        assert rc == 0, err
        again = [h.get("Range") for h in gets(srv, mark, path)]
        assert again == ([f"bytes={have}-"] if have else []), again  # resumed, or already complete and verified
        assert cache_problems(cache, world.root) == [] and not list((cache / "wheels" / "partial").glob("*.part"))
