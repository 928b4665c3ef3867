"""The build benchmark (issue 21): what ``--build`` costs around the compile itself, and a cache hit.

    python bench/build.py            3 runs each, a small and a heavier extension
    python bench/build.py --quick    1 run each, the small extension only

No network and no GPU: tests/support/build_world.py makes the world (a stand-in torch nightly whose
``torch/lib/libtorch.so`` is compiled here, an sdist whose setup.py imports torch and compiles a
C++ extension linking libtorch, setuptools repacked from this environment), tests/support/server.py serves
it on 127.0.0.1, and a venv holds the stand-in torch (the probed target). For each extension:

1. by hand (the baseline: what a team's build script does): ``uv venv``, a ``.pth`` to the
   target's site-packages, ``uv pip install`` of setuptools from a local wheel, ``uv build --wheel
   --no-build-isolation`` of the sdist;
2. the tool's build of the plan's build row (``env.build.build_plan``, in-process, cold wheel
   cache), split into its phases: the sdist (download, sha256), the build environment (venv,
   ``.pth``, the build requirements resolved by our resolver, downloaded, verified, installed
   by uv, the torch check), the compile (``uv build``), the verification of the product
   (``verify_built_wheel``) and storing it, and the rest ("other": reading ``[build-system]``, the
   key and the record, removing the temporary build folder);
3. the same again: a cache hit (no environment, no compile);
4. the whole ``install --with EXT --build EXT`` command, cold and with the build cached.

Reported: medians, and the tool's own overhead = its build - the compile. Nothing asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from resolve_gpu_stack.net.settings import FetchSettings, TransportSettings

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests"))

from support.build_world import NIGHTLY, build_world, extension_sdist, have_cxx, repacked_setuptools, torch_wheel  # noqa: E402
from support.doors import index_flags  # noqa: E402
from support.server import IndexServer  # noqa: E402

UV = str(Path(sys.executable).with_name("uv"))
TOOL = str(Path(sys.executable).with_name("resolve-gpu-stack"))
PHASES = ("sdist", "environment", "compile", "verify", "store")


def venv_with_torch(path: Path, env: dict[str, str], torch: Path) -> str:
    subprocess.run([UV, "venv", "-q", "--python", sys.executable, str(path)], check=True, env=env)
    python = str(path / "bin" / "python")
    subprocess.run([UV, "pip", "install", "-q", "--python", python, "--no-deps", "--offline", str(torch)], check=True, env=env)
    return python


def site_packages(python: str) -> str:
    return subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], check=True, capture_output=True, text=True
    ).stdout.strip()


def by_hand(work: Path, target: str, sdist: Path, setuptools: Path, env: dict[str, str]) -> dict[str, float]:
    """The baseline: a build script's steps, timed."""
    times: dict[str, float] = {}
    t = time.perf_counter()
    subprocess.run([UV, "venv", "-q", "--python", sys.executable, str(work / "env")], check=True, env=env)
    python = str(work / "env" / "bin" / "python")
    Path(site_packages(python), "target.pth").write_text(site_packages(target) + "\n")
    subprocess.run([UV, "pip", "install", "-q", "--python", python, "--no-deps", "--offline", str(setuptools)], check=True, env=env)
    times["environment"] = time.perf_counter() - t
    t = time.perf_counter()
    subprocess.run(
        [UV, "build", "-q", "--wheel", "--no-build-isolation", "--python", python, "--out-dir", str(work / "out"), "--no-config", "--offline", str(sdist)],
        check=True,
        env=env,
        capture_output=True,
    )
    times["compile"] = time.perf_counter() - t
    times["total"] = times["environment"] + times["compile"]
    return times


class Phases:
    """Wraps env.build's steps with timers (the module's own functions, called as in a real run)."""

    def __init__(self) -> None:
        import resolve_gpu_stack.env.build as build

        self.build = build
        self.times: dict[str, float] = {}
        self._saved = {name: getattr(build, name) for name in ("fetch_verified", "_build_environment", "run_logged", "verify_built_wheel", "_store")}
        for name, phase in (
            ("fetch_verified", "sdist"),
            ("_build_environment", "environment"),
            ("run_logged", "compile"),
            ("verify_built_wheel", "verify"),
            ("_store", "store"),
        ):
            setattr(build, name, self._timed(self._saved[name], phase))

    def _timed(self, fn: Callable, phase: str) -> Callable:
        def wrapper(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.times[phase] = self.times.get(phase, 0.0) + time.perf_counter() - t

        return wrapper

    def close(self) -> None:
        for name, fn in self._saved.items():
            setattr(self.build, name, fn)


def tool_build(srv: IndexServer, target: str, ext: str, cache: Path, env: dict[str, str]) -> tuple[dict[str, float], dict[str, float]]:
    """The tool's build of the plan's build row, cold then cached: (phases + total, hit total)."""
    from resolve_gpu_stack.cli.assemble import resolve_parts
    from resolve_gpu_stack.data.definitions import load_definitions
    from resolve_gpu_stack.env.build import BuildContext, BuildMachine, build_plan
    from resolve_gpu_stack.env.probe import inspect_environment
    from resolve_gpu_stack.model.request import FlashInferChoice, ResolveRequest, TorchChoice
    from resolve_gpu_stack.net.download import WheelCache
    from resolve_gpu_stack.net.http import HttpFetcher

    defs = load_definitions().with_index_urls({"pytorch": srv.url + "whl/", "flashinfer": srv.url + "fi/", "pypi": srv.url + "simple/"})
    environment = inspect_environment(target)
    requires = {n: tuple(d.requires_dist) for n, d in environment.distributions.items()}

    def request(with_: tuple[str, ...], build: tuple[str, ...] = ()) -> ResolveRequest:
        return ResolveRequest(
            target=environment.target,
            installed_requires=requires,
            torch=TorchChoice.parse("installed"),
            flashinfer=FlashInferChoice.parse("none"),
            with_=with_,
            build_packages=build,
        )

    def requirements(reqs):
        with HttpFetcher(FetchSettings(transport=TransportSettings(timeout=30)), cache=None) as fetcher:
            return resolve_parts(defs, fetcher, owns_source=False).resolve(request(tuple(reqs)))

    with HttpFetcher(FetchSettings(transport=TransportSettings(timeout=30)), cache=None) as fetcher:
        plan = resolve_parts(defs, fetcher, owns_source=False).resolve(request((ext,), (ext,)))
    machine = BuildMachine(uv=UV, arch_list="", max_jobs=os.cpu_count() or 1, toolkit=None, env=env)
    with HttpFetcher(FetchSettings(transport=TransportSettings(timeout=30)), cache=None) as fetcher:
        ctx = BuildContext(
            cache=WheelCache.under(cache),
            machine=machine,
            requirements=requirements,
            target_tags=environment.target.tags,
            abi=defs.abi,
            site_dirs=(environment.purelib, environment.platlib),
            python=environment.executable,
            fetcher=fetcher,
        )
        phases = Phases()
        try:
            t = time.perf_counter()
            build_plan(plan, ctx)
            cold = {**phases.times, "total": time.perf_counter() - t}
            t = time.perf_counter()
            build_plan(plan, ctx)
            hit = {"total": time.perf_counter() - t}
        finally:
            phases.close()
    return cold, hit


def cli_install(srv: IndexServer, work: Path, torch: Path, ext: str, cache: Path, env: dict[str, str]) -> float:
    python = venv_with_torch(work, env, torch)
    t = time.perf_counter()
    subprocess.run(
        [TOOL, "install", "-q", "--python", python, "--with", ext, "--build", ext, "--flashinfer", "none", *index_flags(srv.url), "--cache-dir", str(cache)],
        check=True,
        env=env,
        capture_output=True,
    )
    return time.perf_counter() - t


def median(values: list[float]) -> float:
    return statistics.median(values)


def measure(root: Path, name: str, filler: int, runs: int, env: dict[str, str]) -> dict[str, object]:
    sdist = extension_sdist(root / "sdists", name, filler=filler)
    world = build_world(root / name, sdists=(sdist,))
    setuptools = repacked_setuptools(root / "setuptools-wheel")
    hand: list[dict[str, float]] = []
    cold: list[dict[str, float]] = []
    hit: list[float] = []
    install_cold: list[float] = []
    install_warm: list[float] = []
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        target = venv_with_torch(root / f"{name}-target", env, torch_wheel(world))
        for _ in range(runs):
            work = Path(tempfile.mkdtemp(dir=root))
            hand.append(by_hand(work, target, sdist.path, setuptools, env))
            c, h = tool_build(srv, target, name, work / "cache", env)
            cold.append(c)
            hit.append(h["total"])
            cache = work / "cli-cache"
            install_cold.append(cli_install(srv, work / "cli-a", torch_wheel(world), name, cache, env))
            install_warm.append(cli_install(srv, work / "cli-b", torch_wheel(world), name, cache, env))
            shutil.rmtree(work, ignore_errors=True)
    for c in cold:  # what no phase covers: reading [build-system], the key and the record, removing the temporary folder
        c["other"] = c["total"] - sum(c.get(k, 0.0) for k in PHASES)
    tool = {k: median([c.get(k, 0.0) for c in cold]) for k in (*PHASES, "other", "total")}
    return {
        "extension": name,
        "filler": filler,
        "runs": runs,
        "by_hand": {k: median([h[k] for h in hand]) for k in ("environment", "compile", "total")},
        "tool": tool,
        "overhead": tool["total"] - tool["compile"],
        "cache_hit": median(hit),
        "install_cold": median(install_cold),
        "install_cached": median(install_warm),
    }


def show(r: dict) -> None:
    h, t = r["by_hand"], r["tool"]
    print(f"\n{r['extension']} (filler {r['filler']}, {r['runs']} run(s), medians in seconds)")
    print(f"  by hand:    environment {h['environment']:.3f}  compile {h['compile']:.3f}  total {h['total']:.3f}")
    print("  the tool:   " + "  ".join(f"{k} {t[k]:.3f}" for k in (*PHASES, "other", "total")))
    print(
        f"  overhead (tool total - its compile): {r['overhead']:.3f}  ({r['overhead'] / t['total']:.0%} of its build; by hand the environment took {h['environment']:.3f})"
    )
    print(f"  cache hit: {r['cache_hit'] * 1000:.1f} ms")
    print(f"  install --with {r['extension']} --build {r['extension']}: cold {r['install_cold']:.2f}, build cached {r['install_cached']:.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one run, the small extension only")
    parser.add_argument("--output", type=Path, default=HERE / "results" / "build.json")
    args = parser.parse_args(argv)
    if not have_cxx():
        print("needs Linux and g++", file=sys.stderr)
        return 1
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_INDEX_URL", "UV_DEFAULT_INDEX", "PIP_INDEX_URL")}
    env["UV_PYTHON_DOWNLOADS"] = "never"
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-build-") as tmp:
        env["UV_CACHE_DIR"] = str(Path(tmp) / "uv-cache")
        cases = [("small-ext", 0)] if args.quick else [("small-ext", 0), ("heavy-ext", 600)]
        for name, filler in cases:
            results.append(measure(Path(tmp), name, filler, 1 if args.quick else 3, env))
            show(results[-1])
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"torch": NIGHTLY, "cores": os.cpu_count(), "results": results}, indent=1) + "\n")
    print(f"\nwritten: {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
