"""One benchmark measurement, in its own process (so its peak RSS is its own).

    python bench/worker.py '<json job>'   ->   one JSON object on stdout

Jobs:
  {"job": "parse", "kind": "pytorch" | "json", "size": N, "repeat": R}
  {"job": "resolve", "base": URL, "cache": DIR | null, "targets": [[python, platform, installed], ...]}
      drives ``resolve()`` as the CLI does (definitions with --index URLs, an HttpFetcher with an
      HttpCache, the parts of ``cli/assemble.py`` shared by every target, the plan rendered as JSON).
  {"job": "import"}: import the resolver stack and exit (start-up cost).
"""

from __future__ import annotations

import time

from resolve_gpu_stack.net.settings import FetchSettings, TransportSettings

T0 = time.perf_counter()

import json  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
from pathlib import Path  # noqa: E402


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def parse_job(job: dict) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from benchworld import pypi_json_body, pytorch_page_body

    from resolve_gpu_stack.index.parse import parse_page
    from resolve_gpu_stack.model import IndexPage

    if job["kind"] == "pytorch":
        body = pytorch_page_body(job["size"])
        page = IndexPage(url="https://download.pytorch.example/whl/nightly/cu130/torch/", content=body, content_type="text/html")
        index = "pytorch"
    else:
        body = pypi_json_body(job["size"])
        page = IndexPage(url="https://pypi.example/simple/numpy/", content=body, content_type="application/vnd.pypi.simple.v1+json")
        index = "pypi"
    times, rows = [], 0
    for _ in range(job["repeat"]):
        t = time.perf_counter()
        parsed = parse_page(page, index=index)
        times.append(time.perf_counter() - t)
        rows = len(parsed.files)
    if rows != job["size"]:
        raise SystemExit(f"parse: expected {job['size']} rows, got {rows} ({parsed.warnings[:3]})")
    sec = _median(times)
    return {"rows": rows, "bytes": len(body), "seconds": sec, "rows_per_s": rows / sec, "mb_per_s": len(body) / 2**20 / sec}


class MeteredFetcher:
    """Wraps a fetcher (and passes through what it offers: concurrent calls, the result store)
    to split the body bytes received between pages and METADATA.

    Page bytes are the bodies of the pages that came over the wire (not 304s); everything else
    the fetcher received (sidecars, range reads, 404 bodies) is counted as METADATA, so the
    METADATA figure is, if anything, a little high.
    """

    def __init__(self, inner) -> None:
        self.inner = inner
        self.page_bytes = 0
        self.metadata_files = 0
        self._lock = threading.Lock()

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def fetch_pages(self, urls, *, index):
        return self._metered(self.inner.fetch_pages(urls, index=index))

    def fetch_page_round(self, batches):
        return self._metered(self.inner.fetch_page_round(batches))

    def _metered(self, out):
        got = sum(len(r.page.content) for r in out.values() if r.page is not None and not r.from_cache)
        with self._lock:
            self.page_bytes += got
        return out

    def fetch_metadata(self, files):
        out = self.inner.fetch_metadata(files)
        with self._lock:
            self.metadata_files += len(files)
        return out

    @property
    def metadata_bytes(self) -> int:
        return self.inner.stats.bytes_received - self.page_bytes

    def close(self) -> None:
        self.inner.close()


def resolve_job(job: dict) -> dict:
    t_import = time.perf_counter()
    from resolve_gpu_stack.cli.assemble import resolve_parts
    from resolve_gpu_stack.cli.render import plan_to_json
    from resolve_gpu_stack.data.definitions import load_definitions
    from resolve_gpu_stack.model.declared import declared_target
    from resolve_gpu_stack.model.request import ResolveRequest
    from resolve_gpu_stack.net.cache import HttpCache
    from resolve_gpu_stack.net.http import HttpFetcher

    imported = time.perf_counter()
    base = job["base"]
    defs = load_definitions().with_index_urls({"pytorch": base + "whl/", "flashinfer": base + "fi/", "pypi": base + "simple/"})
    inner = HttpFetcher(FetchSettings(transport=TransportSettings(timeout=60)), cache=HttpCache(Path(job["cache"])) if job.get("cache") else None)
    fetcher = MeteredFetcher(inner)
    parts = resolve_parts(defs, fetcher, store=inner.cache)
    plans, per_target = [], []
    t = time.perf_counter()
    try:
        for python, platform, installed in job["targets"]:
            t1 = time.perf_counter()
            plan = parts.resolve(ResolveRequest.build(target=declared_target(python, platform, installed), torch=job.get("torch", "nightly")))
            plans.append(plan_to_json(plan))
            json.dumps(plans[-1])
            per_target.append(time.perf_counter() - t1)
    finally:
        fetcher.close()
    wall = time.perf_counter() - t
    s = inner.stats
    return {
        "resolve_seconds": wall,
        "per_target_seconds": per_target,
        "import_seconds": imported - t_import,
        "since_start_seconds": time.perf_counter() - T0,
        "requests": s.requests,
        "bytes": s.bytes_received,
        "cache_hits": s.cache_hits,
        "full_downloads": s.full_downloads,
        "page_bytes": fetcher.page_bytes,
        "metadata_bytes": fetcher.metadata_bytes,
        "metadata_files": fetcher.metadata_files,
        "plans": [{"packages": {p["name"]: p["version"] for p in pl["packages"]}, "urls": [p["url"] for p in pl["packages"] if p["url"]]} for pl in plans],
    }


def import_job(job: dict) -> dict:
    t = time.perf_counter()
    import resolve_gpu_stack.net.http  # noqa: F401
    import resolve_gpu_stack.resolver.resolve  # noqa: F401

    return {"import_seconds": time.perf_counter() - t}


def main() -> int:
    job = json.loads(sys.argv[1])
    profile = job.pop("profile", None)
    fn = {"parse": parse_job, "resolve": resolve_job, "import": import_job}[job["job"]]
    if profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        out = prof.runcall(fn, job)
        prof.dump_stats(profile)
        pstats.Stats(profile, stream=sys.stderr).sort_stats("cumulative").print_stats(40)
    else:
        out = fn(job)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
