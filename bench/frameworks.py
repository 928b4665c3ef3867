"""Speed at framework size (issue 11 item 7): the SGLang closure of the bundled snapshot, replayed
on loopback, against `uv pip compile` of the same pinned set; and the ELF classification's share.

    python bench/frameworks.py            3 runs per figure, at 50 ms (and 0 ms) per response
    python bench/frameworks.py --quick    1 run per figure, 50 ms only

The world: every page and METADATA file the snapshot `indexes/snapshots/2026-03-07` recorded,
served by tests/support/server.py (latency per response), absolute hrefs rewritten to the loopback host
(`/whl/`, `/fi/`, `/_ext/<host>/...`). The snapshot holds no wheels: each wheel it has a recorded
scan of becomes a sparse wheel of the recorded size whose `.so` members need what the recorded
scan found (libtorch/libc10, the CUDA libraries it names, or neither; a stored member whose dynamic
section lies past the byte budget for the ones recorded "not scanned past the budget"), so the
classifier runs its range reads over HTTP as it does on PyPI.

Ours: `resolve-gpu-stack resolve --with sglang --override 'cuda-python>=13' --without ...` (the
story-1 target, torch kept), cold cache, in a child process that also times the classification
(`framework.classify_all`) and takes the classifier's byte counts. uv: `uv pip compile` of the
plan's exact pins with the plan's overrides (and a never-true marker for each `--without`), cold.
Writes bench/results/frameworks.json. Exit 1 when a run failed or uv's closure differs from ours.
"""

from __future__ import annotations

import argparse
import json
import os
import posixpath
import re
import shutil
import struct
import sys
import tempfile
import time
import zlib
from pathlib import Path
from urllib.parse import unquote

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests"))

SNAPSHOT = ROOT / "indexes" / "snapshots" / "2026-03-07"
NIGHTLY = "2.12.0.dev20260307+cu130"
TARGET = ("3.12", "x86_64-manylinux_2_28")
WITHOUT = ("sgl-kernel", "torch-memory-saver")  # cannot be shown to run on the kept torch (CUDA 12 builds)
PREFIX = {"pypi": "simple/", "pytorch": "whl/", "flashinfer": "fi/"}
REWRITE = [(b"https://download.pytorch.org/whl/", b"/whl/"), (b"https://flashinfer.ai/whl/", b"/fi/")]
_EXTERNAL = re.compile(rb"https://([a-z0-9.-]+)/")


# -- the world ------------------------------------------------------------------------------------
def local_path(url: str) -> str:
    """The loopback path (no leading slash) of a recorded absolute URL."""
    for old, new in REWRITE:
        if url.startswith(old.decode()):
            return new.decode()[1:] + url[len(old) :]
    host, _, rest = url[len("https://") :].partition("/")
    return f"_ext/{host}/{rest}"


def rewrite(body: bytes) -> bytes:
    for old, new in REWRITE:
        body = body.replace(old, new)
    return _EXTERNAL.sub(rb"/_ext/\1/", body)


def key_path(key: str) -> str:
    if key.startswith("https://"):
        return local_path(key)
    index, _, rel = key.partition(":")
    return posixpath.normpath(PREFIX[index] + rel) + ("/" if rel.endswith("/") else "")


def build_world(root: Path) -> dict:
    """Pages, METADATA sidecars and sparse wheels under ``root``; returns what was built."""
    manifest = json.loads((SNAPSHOT / "manifest.json").read_text())
    wheels_by_sha: dict[str, tuple[str, int | None]] = {}
    for key, entry in manifest["pages"].items():
        if entry["status"] != 200:
            continue
        page = key_path(key)
        body = rewrite((SNAPSHOT / entry["file"]).read_bytes())
        is_json = "json" in entry["content_type"]
        out = root / unquote(page) / ("index.json" if is_json else "index.html")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(body)
        wheels_by_sha.update(_hashed_wheels(page, body, is_json))
    for key, entry in manifest["metadata"].items():
        out = root / (unquote(key_path(key)) + ".metadata")
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SNAPSHOT / entry["file"], out)
    scans = {wheels_by_sha[k.removeprefix("sha256=")][0]: v for k, v in manifest["scans"].items() if k.removeprefix("sha256=") in wheels_by_sha}
    sizes = dict(wheels_by_sha.values())
    built = 0
    for path in sorted(set(scans) | {key_path(k) for k in manifest["metadata"]}):
        scan = scans.get(path) or {"kind": "none", "why": "", "file_size": sizes.get(path) or 2**20}
        scan_wheel(root / unquote(path), scan)
        built += 1
    return {
        "pages": sum(1 for e in manifest["pages"].values() if e["status"] == 200),
        "metadata": len(manifest["metadata"]),
        "scans": len(manifest["scans"]),
        "scanned_wheels": len(scans),
        "wheels": built,
        "recorded_scan_bytes": sum(s["bytes_read"] for s in manifest["scans"].values()),
        "recorded_scan_wheel_bytes": sum(s["file_size"] for s in manifest["scans"].values()),
    }


def _hashed_wheels(page: str, body: bytes, is_json: bool) -> dict[str, tuple[str, int | None]]:
    """sha256 -> (loopback path, size when the page gives it) of each wheel a page lists."""
    out = {}
    if is_json:
        for f in json.loads(body).get("files", []):
            sha = f.get("hashes", {}).get("sha256")
            if sha and f["filename"].endswith(".whl"):
                out[sha] = (_join(page, f["url"]), f.get("size"))
    else:
        for href, sha in re.findall(rb'href="([^"#]+\.whl)#sha256=([0-9a-f]{64})"', body):
            out[sha.decode()] = (_join(page, href.decode()), None)
    return out


def _join(page: str, href: str) -> str:
    if href.startswith("/"):
        return href[1:]
    return posixpath.normpath(posixpath.join(page, href))


def scan_wheel(path: Path, scan: dict) -> None:
    """A sparse wheel of the recorded size whose shared objects say what the recorded scan (schema 2)
    found: each torch-linked member needs its torch libraries and imports its recorded C++ symbols;
    a CUDA wheel's member needs the CUDA libraries named; the others need libc only."""
    from support.elfbuild import synthetic_elf

    kind, why, size = scan["kind"], scan.get("why", ""), int(scan["file_size"])
    members: list[tuple[str, bytes, bool]] = []  # (name, data, stored)
    if kind == "torch":
        for m in scan["members"]:
            imports = tuple(m.get("cxx", ())) + tuple(m.get("shim-examples", ()))
            members.append((m["name"], synthetic_elf(bits=64, big=False, needed=(*m["torch-libs"], "libc.so.6"), imports=imports), False))
    elif kind == "cuda":
        libs = tuple(x.strip() for x in why.split("(", 1)[1].split(";")[0].split(","))
        members.append(("pkg/lib/libcuda_user.so", synthetic_elf(bits=64, big=False, needed=(*libs, "libc.so.6")), False))
    elif kind == "none":
        m = re.match(r"(\d+) shared object", why)
        members += [(f"pkg/_ext{i}.so", synthetic_elf(bits=64, big=False, needed=("libc.so.6",)), False) for i in range(int(m.group(1)) if m else 0)]
    elif kind == "unknown":  # a stored .so whose dynamic section lies past the budget
        from resolve_gpu_stack.net.scan.classify import budget

        members.append(("pkg/lib/libbig.so", synthetic_elf(bits=64, big=False, needed=("libc.so.6",), gap=budget(size) + 2**20), True))
    dist, version = path.name.split("-")[:2]
    sidecar = path.with_name(path.name + ".metadata")
    meta = sidecar.read_bytes() if sidecar.is_file() else f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n\n".encode()
    members.append((f"{dist}-{version}.dist-info/METADATA", meta, False))
    _write_sparse_zip(path, members, size)


def _write_sparse_zip(path: Path, members: list[tuple[str, bytes, bool]], size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    central = []
    with open(path, "wb") as fh:
        for name, data, stored in members:
            packed = data if stored else zlib.compress(data, 6)[2:-4]
            method = 0 if stored else 8
            nb = name.encode()
            offset = fh.tell()
            crc = zlib.crc32(data)
            fh.write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0x21, crc, len(packed), len(data), len(nb), 0) + nb + packed)
            central.append((nb, offset, method, crc, len(packed), len(data)))
        tail = 200 + sum(46 + len(c[0]) for c in central)
        pad = max(0, size - fh.tell() - tail - 30 - 12)
        nb = b"pkg/_data.bin"
        offset = fh.tell()
        fh.write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0x21, 0, pad, pad, len(nb), 0) + nb)
        fh.seek(pad, os.SEEK_CUR)  # a hole: the wheel's bulk, never read by the classifier
        central.append((nb, offset, 0, 0, pad, pad))
        cd = fh.tell()
        for nb, offset, method, crc, csize, usize in central:
            fh.write(
                struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0x21, crc, csize, usize, len(nb), 0, 0, 0, 0, 0o755 << 16, offset) + nb
            )
        fh.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(central), len(central), fh.tell() - cd, cd, 0))


# -- the child: our CLI in-process, with the classification timed --------------------------------
def child(argv: list[str], stats_path: str) -> int:
    t0 = time.perf_counter()
    from resolve_gpu_stack.cli.app import main
    from resolve_gpu_stack.resolver import framework

    spent: list[dict] = []
    original = framework.classify_all

    def timed(files, classifier):  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        out = original(files, classifier)
        s = getattr(classifier, "stats", None)
        spent.append(
            {
                "seconds": time.perf_counter() - t,
                "files": len(files),
                "bytes_read": getattr(s, "bytes_read", 0),
                "wheel_bytes": getattr(s, "wheel_bytes", 0),
                "scanned": getattr(s, "wheels", 0),
                "not_scanned": getattr(s, "not_scanned", 0),
            }
        )
        return out

    framework.classify_all = timed  # type: ignore[assignment]
    code = main(argv)
    sys.stdout.flush()
    Path(stats_path).write_text(json.dumps({"rc": code, "classify": spent, "seconds": time.perf_counter() - t0}))
    return code


# -- the driver -----------------------------------------------------------------------------------
def ours(srv, cache: Path, work: Path, extra: tuple[str, ...] = ()) -> dict:
    from run import PY, run_measured

    argv = [
        "resolve",
        "--python",
        TARGET[0],
        "--platform",
        TARGET[1],
        "--installed",
        f"torch=={NIGHTLY}",
        "--with",
        "sglang",
        "--override",
        "cuda-python>=13",
        *[w for n in WITHOUT for w in ("--without", n)],
        *[w for n, p in PREFIX.items() for w in ("--index", f"{n}={srv.url}{p}")],
        "--cache-dir",
        str(cache),
        "--format",
        "json",
        "-q",
        *extra,
    ]
    stats = work / f"stats-{time.monotonic_ns()}.json"
    n0, b0 = len(srv.log), srv.bytes_sent
    proc = run_measured([PY, str(Path(__file__).resolve()), "--child", str(stats), *argv])
    if proc.rc != 0:
        raise RuntimeError(f"resolve failed ({proc.rc}):\n{proc.err[-3000:]}")
    plan = json.loads(proc.out)
    child_stats = json.loads(stats.read_text())
    log = srv.log[n0:]
    classify = child_stats["classify"][0] if child_stats["classify"] else {}
    return {
        "wall": proc.wall,
        "cpu": proc.cpu,
        "maxrss_mb": proc.maxrss_mb,
        "requests": len(log),
        "bytes": srv.bytes_sent - b0,
        "range_requests": sum(1 for _, p, h in log if p.endswith(".whl") and "Range" in h),
        "classify_seconds": classify.get("seconds", 0.0),
        "classify_files": classify.get("files", 0),
        "classify_bytes": classify.get("bytes_read", 0),
        "classified_wheel_bytes": classify.get("wheel_bytes", 0),
        "not_scanned": classify.get("not_scanned", 0),
        "plan": plan,
    }


def uv_compile(srv, plan: dict, cache: Path, work: Path, uv: str) -> dict:
    from run import compile_with_uv, uv_command

    pins = {p["name"]: p["version"] for p in plan["packages"]}
    (work / "requirements.in").write_text("".join(f"{n}=={v}\n" for n, v in sorted(pins.items())))
    overrides = [o["replaced_by"] for o in plan["overrides"]] + [f"{n}; sys_platform == 'never'" for n in WITHOUT]
    (work / "overrides.txt").write_text("\n".join(dict.fromkeys(overrides)) + "\n")
    # --extra-index-url, not run.py's explicit indexes: the overrides name the kept torch, and uv
    # looks an override up on the default index only (a `--override` file takes no
    # [tool.uv.sources]); this world is the recorded snapshot, not a PyPI-shaped one.
    cmd = uv_command(uv, srv.url, work, extra=("--override", "overrides.txt"), config="extra-index")
    return compile_with_uv(cmd, srv, cache, work)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1 run per figure, 50 ms only")
    ap.add_argument("--repeat", type=int, default=0)
    ap.add_argument("--child", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child[1:], args.child[0])
    import run
    from support.server import IndexServer

    repeat = args.repeat or (1 if args.quick else 3)
    latencies = (0.05,) if args.quick else (0.05, 0.0)
    failures: list[str] = []
    results: dict = {"quick": args.quick, "repeat": repeat, "machine": run._machine()}
    uv = run._find_uv()
    with tempfile.TemporaryDirectory(prefix="rgs-bench-fw-") as tmpdir:
        tmp = Path(tmpdir)
        run.PROC_ENV["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
        root = tmp / "www"
        t = time.perf_counter()
        results["world"] = build_world(root)
        results["world"]["build_seconds"] = time.perf_counter() - t
        say(f"world: {results['world']}")
        with IndexServer(root) as srv:
            srv.seek_ranges = True
            for latency in latencies:
                srv.latency = latency
                mine, theirs = [], []
                for i in range(repeat):
                    mine.append(ours(srv, Path(tempfile.mkdtemp(dir=tmp)), tmp))
                    theirs.append(uv_compile(srv, mine[-1]["plan"], Path(tempfile.mkdtemp(dir=tmp)), Path(tempfile.mkdtemp(dir=tmp)), uv))
                    o, u = mine[-1], theirs[-1]
                    say(
                        f"{latency * 1000:.0f} ms #{i + 1}: ours {o['wall']:.2f} s ({o['requests']} req, {len(o['plan']['packages'])} packages), "
                        f"classify {o['classify_seconds']:.2f} s for {o['classify_files']} wheels, {o['classify_bytes']:,} of {o['classified_wheel_bytes']:,} B; "
                        f"uv {u['wall']:.2f} s ({u['requests']} req)"
                    )
                plan = {p["name"]: p["version"] for p in mine[0]["plan"]["packages"]}
                if plan != theirs[0]["packages"]:
                    failures.append(
                        f"{latency * 1000:.0f} ms: closures differ: ours only {sorted(set(plan.items()) - set(theirs[0]['packages'].items()))}, "
                        f"uv only {sorted(set(theirs[0]['packages'].items()) - set(plan.items()))}"
                    )
                for o in mine:
                    o.pop("plan")
                for u in theirs:
                    u.pop("packages")
                fig = {"ours": run._summary(mine), "uv": run._summary(theirs), "closure": len(plan)}
                fig["ratio_wall"] = fig["ours"]["wall"] / fig["uv"]["wall"]
                fig["classify_share_of_wall"] = fig["ours"]["classify_seconds"] / fig["ours"]["wall"]
                fig["classify_share_of_bytes"] = fig["ours"]["classify_bytes"] / max(1, fig["ours"]["classified_wheel_bytes"])
                results[f"cold_{int(latency * 1000)}ms"] = fig
                say(
                    f"{latency * 1000:.0f} ms: ours/uv {fig['ratio_wall']:.2f}x (target <= 1.0x); classification {fig['classify_share_of_wall'] * 100:.1f}% "
                    f"of the wall (< 10%), {fig['classify_share_of_bytes'] * 100:.3f}% of the classified wheels' bytes (< 1%)"
                )
    w = results["world"]
    say(
        f"recorded live scans (PyPI, snapshot manifest): {w['recorded_scan_bytes']:,} of {w['recorded_scan_wheel_bytes']:,} B = "
        f"{w['recorded_scan_bytes'] / w['recorded_scan_wheel_bytes'] * 100:.2f}%"
    )
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    (out / "frameworks.json").write_text(json.dumps({**results, "failures": failures}, indent=2))
    for f in failures:
        say(f"FAILED: {f}")
    return 1 if failures else 0


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
