"""The HTTP client's own CPU on the live crawl's shape (issue 53 item 3): two source trees in turns.

    python bench/clientcpu.py [--baseline DIR_OR_REV] [--runs 5] [--workers 96] [--plain]

The live cold ``--with sglang`` resolve reads ~206 index pages (77 MB of uncompressed JSON: the
proxy sends no gzip) and ~276 ranges of wheels (21 MB) over HTTPS from one host, on ~30 kept-alive
connections, 96 worker threads. Its wall time is CPU-bound (the proxy is 1-2 ms away), and the
client's share of that CPU (``Transport.open``, ``read_body``, TLS records, the threads' wake-ups)
is what this measures, apart from the resolver and apart from the network's noise: nginx serves
the same shape over TLS on 127.0.0.1 (a certificate made by ``openssl``; nginx's CPU is its own
process's, not counted), and a child process per tree runs the requests through
``net.transport.Transport`` (``open``, ``check_status``, ``read_body``, ``finish``, in
``retrying``) from a pool of ``--workers`` threads, in 4 rounds of pages then the ranges, as the
crawl does. The child reports its process CPU after its imports (user, sys), its context switches, its wall,
the connections it opened (and how many resumed a TLS session) and the thread CPU of
``Transport.open`` (connects included), ``Transport.read_body`` and ``Connection.connect``.
Trees alternate run by run (``A B A B ...``); medians are printed. ``--plain``: http instead of TLS.

``--body MB``: instead, one body of MB megabytes read 10 times in a row (the CPU per byte).

``--baseline`` is a folder holding ``src/`` (or ``resolve_gpu_stack/``) or a git revision
(exported with ``git archive``); without it only this tree runs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))

PAGES = 206
PAGE_BYTES = 77 * 2**20
RANGES = 276
RANGE_BYTES = 21 * 2**20

CHILD = r"""
import json, os, resource, sys, time
from concurrent.futures import ThreadPoolExecutor
base, workers = sys.argv[1], int(sys.argv[2])
jobs = json.loads(sys.argv[3])
from resolve_gpu_stack.net.settings import TransportSettings
from resolve_gpu_stack.net.transport import Transport
import resolve_gpu_stack.net.client.connection as cc
opened = {"connections": 0, "resumed": 0}
connect = cc.Connection.connect
def counted(self):
    connect(self)
    opened["connections"] += 1
    opened["resumed"] += bool(getattr(self, "resumed", False))
cc.Connection.connect = counted
spent = {"open": 0.0, "read_body": 0.0, "connect": 0.0}
def timed(owner, name, key):
    real = getattr(owner, name)
    def run(*a, **k):
        t = time.thread_time()
        try:
            return real(*a, **k)
        finally:
            spent[key] += time.thread_time() - t  # the GIL makes += safe enough for a figure
    setattr(owner, name, run)
timed(Transport, "open", "open"); timed(Transport, "read_body", "read_body"); timed(cc.Connection, "connect", "connect")
t0, w0 = os.times(), time.perf_counter()  # after the imports: the requests' CPU only
tr = Transport(TransportSettings(max_connections=workers))
def get(job):
    path, spec = job
    url = base + path
    headers = {"Range": spec, "Accept-Encoding": "identity"} if spec else {"Accept": "application/vnd.pypi.simple.v1+json"}
    def attempt():
        resp, _ = tr.open(url, headers)
        try:
            tr.check_status(resp, url, ok=(206,) if spec else (200,))
            return len(tr.read_body(resp, url, 64 << 20, "body"))
        finally:
            tr.finish(resp)
    return tr.retrying(url, attempt)
got = 0
with ThreadPoolExecutor(workers) as pool:
    for batch in jobs:
        got += sum(pool.map(get, batch))
tr.close()
t1, w1 = os.times(), time.perf_counter()
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"user": t1.user - t0.user, "sys": t1.system - t0.system, "wall": w1 - w0, "bytes": got,
                  "requests": tr.stats.requests, "csw": ru.ru_nvcsw + ru.ru_nivcsw, **opened, **spent}))
"""


def world(root: Path, rng: random.Random) -> list[list[tuple[str, str]]]:
    """Pages of the crawl's sizes (a few large, most small) and one wheel to read ranges of; the
    request batches: 4 rounds of pages, then the ranges."""
    weights = [rng.paretovariate(1.2) for _ in range(PAGES)]
    scale = PAGE_BYTES / sum(weights)
    (root / "pages").mkdir(parents=True)
    pages = []
    for i, w in enumerate(weights):
        size = max(600, int(w * scale))
        row = b'{"filename": "p-%d.whl", "url": "https://files.example/p.whl", "hashes": {"sha256": "%s"}}, ' % (i, b"0" * 64)
        (root / "pages" / f"p{i}.json").write_bytes((row * (size // len(row) + 1))[:size])
        pages.append((f"pages/p{i}.json", ""))
    wheel = 64 * 2**20
    (root / "wheel.whl").write_bytes(os.urandom(wheel))
    each = RANGE_BYTES // RANGES
    ranges = []
    for _ in range(RANGES):
        n = max(1, int(rng.uniform(0.2, 1.8) * each))
        start = rng.randrange(0, wheel - n)
        ranges.append(("wheel.whl", f"bytes={start}-{start + n - 1}"))
    rng.shuffle(pages)
    return [pages[i::4] for i in range(4)] + [ranges]


def nginx(root: Path, tmp: Path, cert: Path | None, key: Path | None, port: int) -> subprocess.Popen[bytes]:
    tls = f"ssl_certificate {cert};\n        ssl_certificate_key {key};\n" if cert else ""
    (tmp / "nginx.conf").write_text(
        f"daemon off;\nmaster_process off;\nworker_processes 1;\npid {tmp / 'nginx.pid'};\nerror_log {tmp / 'error.log'};\n"
        "events { worker_connections 4096; }\n"
        f"http {{\n    access_log off;\n"
        + "".join(f"    {k}_temp_path {tmp / k};\n" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        + "    keepalive_timeout 75s;\n    keepalive_requests 10000;\n    tcp_nodelay on;\n    sendfile on;\n"
        "    default_type application/octet-stream;\n"
        f"    server {{\n        listen 127.0.0.1:{port} {'ssl ' if cert else ''}backlog=1024;\n        {tls}        root {root};\n    }}\n}}\n"
    )
    return subprocess.Popen([shutil.which("nginx") or "/usr/sbin/nginx", "-p", str(tmp), "-c", str(tmp / "nginx.conf")], stderr=subprocess.PIPE)


def make_cert(tmp: Path) -> tuple[Path, Path]:
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2"]
        + ["-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True,
        capture_output=True,
    )
    return cert, key


def source_of(spec: str, tmp: Path) -> Path:
    """The folder to put on ``sys.path`` for a baseline: DIR/src, DIR, or a git revision exported."""
    path = Path(spec)
    if path.is_dir():
        return path / "src" if (path / "src" / "resolve_gpu_stack").is_dir() else path
    out = tmp / "baseline"
    out.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", spec, "src"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    return out / "src"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", help="a folder with src/, or a git revision")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--workers", type=int, default=96)
    ap.add_argument("--plain", action="store_true", help="http, not TLS")
    ap.add_argument("--body", type=int, metavar="MB", help="instead of the crawl: one body of MB megabytes read 10 times, one request at a time")
    ap.add_argument(
        "--wrap", default="", help="a command the child runs under, {tree} replaced by the tree's name (e.g. 'perf stat -x, --append -o ps-{tree}')"
    )
    args = ap.parse_args()
    from support.static_server import _wait_for, free_port

    tmp = Path(tempfile.mkdtemp(prefix="rgs-clientcpu-"))
    try:
        jobs = world(tmp / "www", random.Random(53))
        if args.body:
            (tmp / "www" / "body.bin").write_bytes(os.urandom(args.body * 2**20))
            jobs = [[("body.bin", "")] * 10]
        cert, key = (None, None) if args.plain else make_cert(tmp)
        trees = {"this": ROOT / "src"}
        if args.baseline:
            trees = {"baseline": source_of(args.baseline, tmp), **trees}
        port = free_port()
        (tmp / "nginx").mkdir()
        server = nginx(tmp / "www", tmp / "nginx", cert, key, port)
        try:
            _wait_for(port, server)
            base = f"{'http' if args.plain else 'https'}://127.0.0.1:{port}/"
            results: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
            for turn in range(args.runs + 1):  # the first turn compiles each tree's bytecode: not counted
                for name, src in trees.items():
                    env = {**os.environ, "PYTHONPATH": str(src), "SSL_CERT_FILE": str(cert or ""), "PYTHONPYCACHEPREFIX": str(tmp / f"pyc-{name}")}
                    env.pop("SSL_CERT_DIR", None)
                    out = subprocess.run(
                        [*args.wrap.replace("{tree}", name).split(), sys.executable, "-c", CHILD, base, str(args.workers), json.dumps(jobs)],
                        capture_output=True,
                        text=True,
                        env=env,
                    )
                    if out.returncode:
                        raise SystemExit(out.stderr[-3000:])
                    if turn:
                        results[name].append(json.loads(out.stdout))
        finally:
            server.terminate()
            server.wait()
        load = os.getloadavg()[0]
        first = next(iter(results.values()))[0]
        shape = f"of a {args.body} MB body" if args.body else f"({PAGES} pages, {PAGE_BYTES >> 20} MB; {RANGES} ranges, {RANGE_BYTES >> 20} MB)"
        print(
            f"{first['requests']} GETs {shape} over {'http' if args.plain else 'TLS'} from {args.workers} threads; "
            f"medians of {args.runs}, trees in turns; load {load:.1f}"
        )
        print(
            f"{'tree':10s} {'CPU s':>7s} {'user':>6s} {'sys':>6s} {'ctx sw':>7s} {'wall s':>7s} {'conns':>6s} {'resumed':>7s} {'open':>6s} {'body':>6s} {'connect':>7s}"
        )
        for name, runs in results.items():

            def med(key: str, rows: list[dict[str, float]] = runs) -> float:
                return statistics.median(r[key] for r in rows)

            cpu = statistics.median(r["user"] + r["sys"] for r in runs)
            print(
                f"{name:10s} {cpu:7.3f} {med('user'):6.3f} {med('sys'):6.3f} {med('csw'):7.0f} {med('wall'):7.3f} {med('connections'):6.0f} {med('resumed'):7.0f} {med('open'):6.3f} {med('read_body'):6.3f} {med('connect'):7.3f}"
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
