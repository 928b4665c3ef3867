"""The fleet benchmark (issue 14): installing the story-1 stack, ours against plain uv.

    python bench/install.py            realistic sizes (jit-cache 800 MB, cubin 300 MB, ~1.5 GB)
    python bench/install.py --quick    ten times smaller

One loopback server (tests/support/server.py) with a bandwidth cap (200 MB/s for all connections) and
20 ms latency per request serves a world of the stack built for this interpreter (its cpXY tag
and machine; random, incompressible wheel bodies); torch is installed (a tiny wheel) and kept.
Every measurement runs in a subprocess into a fresh venv with a fresh uv cache:

1. cold install: ``resolve-gpu-stack install`` (resolve + download + verify + uv) against
   ``uv pip install --no-deps`` of the same pinned wheels (``name @ URL``) from the same server;
2. fleet install: the lock exported as a wheelhouse served by the same capped server, then
   ``install_lock`` (what ``install --lock`` runs) against ``uv pip install -r pylock``.

Reported: wall seconds, ratios to uv, bytes over the network (the server's count), peak RSS
(GNU time when present, else wait4's ru_maxrss). Targets are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests"))

from run import RSS_METHOD, Proc, run_measured  # noqa: E402
from support.server import IndexServer  # noqa: E402
from support.stack_world import ABI3, FI_REQUIRES, TORCH_REQUIRES  # noqa: E402
from support.world import World  # noqa: E402

PY = f"cp{sys.version_info.major}{sys.version_info.minor}"
MACHINE = os.uname().machine
PLAT = f"manylinux_2_28_{MACHINE}"
NIGHTLY = "2.12.0.dev20260307+cu130"
UV = str(Path(sys.executable).with_name("uv"))
TOOL = str(Path(sys.executable).with_name("resolve-gpu-stack"))
MB = 1 << 20
SIZES_MB = {"flashinfer-jit-cache": 800, "flashinfer-cubin": 300, "flashinfer-python": 10, "nvidia-cuda-runtime": 150, "nvidia-cuda-nvrtc": 150}


def build(root: Path, scale: float) -> World:
    """The story-1 stack for this interpreter, with padded (incompressible) large wheels."""
    from support.wheels import build_wheel

    def pad(name: str) -> int:
        return int(SIZES_MB.get(name, 0) * MB * scale)

    w = World(root)
    w.pytorch("torch", NIGHTLY, tag=f"{PY}-{PY}-{PLAT}", requires=[r.format(hash="9c288bc5") for r in TORCH_REQUIRES], requires_python=">=3.10")
    w.pytorch("triton", "3.7.0+git9c288bc5", tag=f"{PY}-{PY}-{PLAT}", at_root=True, padding=int(20 * MB * scale))
    w.flashinfer("flashinfer-jit-cache", "0.6.5+cu130", tag=f"{ABI3}-{PLAT}", page="cu130/flashinfer-jit-cache", padding=pad("flashinfer-jit-cache"))
    for name, version, tag, requires in (
        ("flashinfer-python", "0.6.5", "py3-none-any", FI_REQUIRES),
        ("flashinfer-cubin", "0.6.5", "py3-none-any", ()),
        ("apache-tvm-ffi", "0.1.7", "py3-none-any", ()),
        ("numpy", "2.2.0", "py3-none-any", ()),
        ("packaging", "25.0", "py3-none-any", ()),
        ("filelock", "3.17.0", "py3-none-any", ()),
        ("typing-extensions", "4.12.2", "py3-none-any", ()),
        ("cuda-toolkit", "13.0.2", "py3-none-any", ["nvidia-cuda-runtime==13.0.96; extra == 'cudart'", "nvidia-cuda-nvrtc==13.0.88; extra == 'nvrtc'"]),
        ("nvidia-cuda-runtime", "13.0.96", f"py3-none-{PLAT}", ()),
        ("nvidia-cuda-nvrtc", "13.0.88", f"py3-none-{PLAT}", ()),
    ):
        built = w.pypi(name, version, tag=tag, requires=requires, requires_python=">=3.10" if name == "flashinfer-python" else None)
        if pad(name):  # rebuild in place with padding (World.pypi has no padding of its own)
            again = build_wheel(
                built.path.parent, name, version, tag, requires, requires_python=">=3.10" if name == "flashinfer-python" else None, padding=pad(name)
            )
            entry = w.pages[f"simple/{name}/"][-1]
            entry.wheel = again
    return w


def fresh_venv(path: Path, env: dict[str, str], torch: Path) -> str:
    subprocess.run([UV, "venv", "-q", "--python", sys.executable, str(path)], check=True, env=env)
    python = str(path / "bin" / "python")
    subprocess.run([UV, "pip", "install", "-q", "--python", python, "--no-deps", "--offline", str(torch)], check=True, env=env)
    return python


def measured(srv: IndexServer, cmd: list[str], env: dict[str, str]) -> tuple[Proc, int]:
    before = srv.bytes_sent
    proc = run_measured(cmd, env=env, timeout=1800)
    if proc.rc != 0:
        raise SystemExit(f"failed ({proc.rc}): {' '.join(cmd)}\n{proc.err[-3000:]}")
    return proc, srv.bytes_sent - before


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="wheels ten times smaller")
    ap.add_argument("--rate", type=float, default=200.0, help="bandwidth cap in MB/s (default 200)")
    ap.add_argument("--latency", type=float, default=0.020, help="seconds added to every request (default 0.020)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-install-"))
    results: dict[str, dict[str, float]] = {}
    try:
        world = build(tmp / "www", 0.1 if args.quick else 1.0)
        wheel_bytes = sum(p.stat().st_size for p in (tmp / "www").rglob("*.whl") if not p.name.startswith("torch-"))
        with IndexServer(world.root, latency=args.latency) as srv:
            world.write(srv.url)
            srv.rate = args.rate * 1e6
            base = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_")) and k != "VIRTUAL_ENV"}
            base["UV_PYTHON_DOWNLOADS"] = "never"
            torch = next((world.root / "whl" / "nightly" / "cu130").glob("torch-*.whl"))

            def env(name: str) -> dict[str, str]:
                return {**base, "UV_CACHE_DIR": str(tmp / f"uv-{name}")}

            flags = ["--index", f"pytorch={srv.url}whl/", "--index", f"flashinfer={srv.url}fi/", "--index", f"pypi={srv.url}simple/"]
            ours_py = fresh_venv(tmp / "ours", env("ours"), torch)
            lock = tmp / "pylock.bench.toml"
            p, n = measured(
                srv,
                [TOOL, "install", "-q", "--python", ours_py, *flags, "--cache-dir", str(tmp / "cache-ours"), "--format", "json", "-o", str(lock)],
                env("ours"),
            )
            results["ours: install (cold)"] = {"wall_s": p.wall, "net_bytes": n, "rss_mb": p.maxrss_mb}
            from resolve_gpu_stack.lock.files import read_lock
            from resolve_gpu_stack.lock.pylock import plan_from_lock

            plan = plan_from_lock(read_lock(lock))
            reqs = tmp / "pinned.txt"
            reqs.write_text("".join(f"{pkg.name} @ {pkg.url}\n" for pkg in plan.packages if pkg.url and pkg.action.value != "keep"))
            uv_py = fresh_venv(tmp / "uv", env("uv"), torch)
            p, n = measured(srv, [UV, "pip", "install", "-q", "--python", uv_py, "--no-deps", "-r", str(reqs)], env("uv"))
            results["uv: pip install pinned (cold)"] = {"wall_s": p.wall, "net_bytes": n, "rss_mb": p.maxrss_mb}

            # the wheelhouse, served below /house/ by the same capped server
            export = [
                sys.executable,
                "-c",
                "import sys; from pathlib import Path; from resolve_gpu_stack.env.wheelhouse import export_wheelhouse as e; "
                "from resolve_gpu_stack.net.download import WheelCache as W; from resolve_gpu_stack.net.http import HttpFetcher as H; "
                "e([Path(sys.argv[1])], Path(sys.argv[2]), wheel_cache=W(Path(sys.argv[3])), fetcher=H(cache=None), base_url=sys.argv[4])",
                str(lock),
                str(world.root / "house"),
                str(tmp / "cache-export"),
                srv.url + "house",
            ]
            p, n = measured(srv, export, base)
            results["ours: wheelhouse export (cold cache)"] = {"wall_s": p.wall, "net_bytes": n, "rss_mb": p.maxrss_mb}
            house_lock = world.root / "house" / lock.name
            node = fresh_venv(tmp / "node", env("node"), torch)
            install = [
                sys.executable,
                "-c",
                "import sys; from pathlib import Path; from resolve_gpu_stack.env.lockinstall import install_lock as i; "
                "from resolve_gpu_stack.net.download import WheelCache as W; from resolve_gpu_stack.net.http import HttpFetcher as H; "
                "i(Path(sys.argv[1]), python=sys.argv[2], uv=sys.argv[3], wheel_cache=W(Path(sys.argv[4])), fetcher=H(cache=None))",
                str(house_lock),
                node,
                UV,
                str(tmp / "cache-node"),
            ]
            p, n = measured(srv, install, env("node"))
            results["ours: install_lock from wheelhouse"] = {"wall_s": p.wall, "net_bytes": n, "rss_mb": p.maxrss_mb}
            plain = fresh_venv(tmp / "plain", env("plain"), torch)
            p, n = measured(srv, [UV, "pip", "install", "-q", "--python", plain, "-r", str(house_lock)], env("plain"))
            results["uv: pip install -r pylock from wheelhouse"] = {"wall_s": p.wall, "net_bytes": n, "rss_mb": p.maxrss_mb}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    cold = results["ours: install (cold)"]["wall_s"] / results["uv: pip install pinned (cold)"]["wall_s"]
    fleet = results["ours: install_lock from wheelhouse"]["wall_s"] / results["uv: pip install -r pylock from wheelhouse"]["wall_s"]
    print(f"wheels to install: {wheel_bytes / MB:.0f} MiB; cap {args.rate:.0f} MB/s, latency {args.latency * 1000:.0f} ms; {RSS_METHOD}")
    print(f"{'measurement':45} {'wall s':>8} {'net MiB':>9} {'RSS MiB':>8}")
    for name, r in results.items():
        print(f"{name:45} {r['wall_s']:8.2f} {r['net_bytes'] / MB:9.1f} {r['rss_mb']:8.0f}")
    print(f"ratio cold install ours/uv: {cold:.2f} (target <= 1.15); install_lock/uv -r pylock: {fleet:.2f} (target <= 1.05)")
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    (out / ("install-quick.json" if args.quick else "install.json")).write_text(
        json.dumps({"results": results, "ratio_cold": cold, "ratio_fleet": fleet, "wheel_bytes": wheel_bytes}, indent=1) + "\n"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
