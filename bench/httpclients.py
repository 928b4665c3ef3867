"""The HTTP client chosen by measurement (issue 23 item 3): import time and CPU per request of
httpx, urllib3 (the client pip uses) and the standard library's ``http.client``, and of our
``net.transport.Transport`` (the policy on top of whichever carries it), on this workload.

    python bench/httpclients.py [--requests 300] [--runs 5]

The workload is the resolver's: many small GETs over a few kept-alive connections to one host,
a page of a few KB, a METADATA range read (``Range: bytes=-N``, 206). A loopback server
(tests/support/server.py, in this process) serves them; each client runs in its own process, which
reports its own CPU time (``time.process_time``) for ``--requests`` sequential requests after
one warm-up request (the connection is open). Import time: the wall time of ``python -c "import
X"`` minus that of ``python -c pass``, medians of ``--runs`` fresh processes, bytecode compiled.
urllib3 is measured when it is installed (``pip install urllib3``); it is not a dependency.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))

PY = sys.executable
CLIENTS = {  # name -> the import that brings it in
    "http.client": "import http.client, ssl",
    "urllib3": "import urllib3",
    "httpx": "import httpx",
    "ours": "import resolve_gpu_stack.net.transport",
}

CHILD = r"""
import json, sys, time
client, base, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
page, meta = base + "page/", base + "wheel.whl"
def run(get):
    get(page, {}); get(meta, {"Range": "bytes=-2048"})  # the connection is open
    t, c = time.perf_counter(), time.process_time()
    for i in range(n):
        get(page if i % 2 else meta, {} if i % 2 else {"Range": "bytes=-2048"})
    return time.process_time() - c, time.perf_counter() - t
if client == "http.client":
    import http.client
    from urllib.parse import urlsplit
    u = urlsplit(base)
    conn = http.client.HTTPConnection(u.hostname, u.port)
    def get(url, headers):
        conn.request("GET", urlsplit(url).path, headers={"User-Agent": "bench", "Accept-Encoding": "gzip", **headers})
        r = conn.getresponse()
        body = r.read()
        assert r.status in (200, 206) and body
elif client == "urllib3":
    import urllib3
    pool = urllib3.PoolManager(maxsize=32)
    def get(url, headers):
        r = pool.request("GET", url, headers={"User-Agent": "bench", **headers}, redirect=False, retries=False)
        assert r.status in (200, 206) and r.data
elif client == "httpx":
    import httpx
    c = httpx.Client(follow_redirects=False)
    def get(url, headers):
        r = c.get(url, headers=headers)
        assert r.status_code in (200, 206) and r.content
else:
    from resolve_gpu_stack.net.transport import Transport
    tr = Transport()
    def get(url, headers):
        resp, final = tr.open(url, headers)
        tr.check_status(resp, url, ok=(200, 206))
        body = tr.read_body(resp, url, 1 << 20, "page")
        tr.finish(resp)
        assert body
cpu, wall = run(get)
print(json.dumps({"cpu": cpu, "wall": wall}))
"""


def have(client: str) -> bool:
    return subprocess.run([PY, "-c", CLIENTS[client]], capture_output=True).returncode == 0


def import_ms(code: str, runs: int, env: dict[str, str]) -> float:
    def wall(c: str) -> float:
        t = time.perf_counter()
        subprocess.run([PY, "-c", c], check=True, env=env)
        return time.perf_counter() - t

    wall(code)  # compiles
    pairs = [(wall(code), wall("pass")) for _ in range(runs)]
    return statistics.median(a - b for a, b in pairs) * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    from support.server import IndexServer

    tmp = Path(tempfile.mkdtemp(prefix="rgs-http-"))
    (tmp / "page").mkdir()
    (tmp / "page" / "index.html").write_text(
        "<html><body>" + "".join(f'<a href="/files/p-{i}.whl">p-{i}.whl</a><br>\n' for i in range(60)) + "</body></html>\n"
    )
    (tmp / "wheel.whl").write_bytes(os.urandom(256 * 1024))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    print(f"{args.requests} sequential GETs on one kept-alive connection (a 4 KB page and a 2 KB range read of a wheel, in turns), loopback")
    print(f"{'client':12s} {'import':>9s} {'CPU/request':>12s} {'wall/request':>13s}")
    with IndexServer(tmp) as srv:
        for client in CLIENTS:
            if not have(client):
                print(f"{client:12s} not installed")
                continue
            imp = import_ms(CLIENTS[client], args.runs, env)
            cpus, walls = [], []
            for _ in range(args.runs):
                out = subprocess.run([PY, "-c", CHILD, client, srv.url, str(args.requests)], capture_output=True, text=True, env=env)
                if out.returncode:
                    raise SystemExit(out.stderr[-2000:])
                got = json.loads(out.stdout)
                cpus.append(got["cpu"] / args.requests)
                walls.append(got["wall"] / args.requests)
            print(f"{client:12s} {imp:7.1f} ms {statistics.median(cpus) * 1e6:9.0f} us {statistics.median(walls) * 1e6:10.0f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
