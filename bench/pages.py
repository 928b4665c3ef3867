"""Index pages parsed by two trees in turns: the CPU of each page set, and the same results.

    python bench/pages.py capture DIR -- resolve ARGS...      # every page a CLI run parses, saved (then judged)
    python bench/pages.py A B [--runs 5] [--passes 3] [--set live=DIR] [--set bench] [--set samples] [--set hostile]

``capture`` runs the CLI in this process (this tree's ``src``) with ``parse_page`` wrapped as the
finder calls it, and saves each call: the page's bytes, its URL and content type, the index, and
the filter it was read with (``only``, or a ``RowFilter``'s tags and ``sdists``). A live run's pages
(today's PyPI, ~76 MB for ``--with sglang``) stay out of the repository: give DIR outside it.

A and B are git revisions or ``src`` directories (as ``ab.py`` takes them). For each turn, each tree
parses every set ``--passes`` times in a fresh process (its own ``src`` on ``sys.path``), as the
finder does: one ``ParseMemo`` and one ``RowFilter`` per filter for the whole set; a pass's CPU is
``time.process_time`` around it, the median pass is the turn's figure. The sets:

- ``live=DIR``: pages ``capture`` saved;
- ``bench``: every page of ``run.py``'s wide world (``benchworld.py``: PyPI's JSON and HTML, the
  PyTorch index's HTML, FlashInfer's), read whole and with a cp312 x86_64 target's filter;
- ``samples``: the PyTorch and FlashInfer index pages recorded in ``../shared/reference/samples``;
- ``hostile``: malformed pages (rows that are not objects, bad filenames and digests, escapes,
  duplicated keys, ``NaN``, ``1e400``, binary bodies, HTML soup), small and large.

Every set's results (files, order, warnings, variants, subdirs, status; or the error) are reduced
to a digest in each tree: the two trees must agree, or the script says where they differ.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# ../shared beside the checkout (a worktree one level further down: ../../shared)
SAMPLES = next((d / "shared" / "reference" / "samples" for d in (ROOT.parent, ROOT.parent.parent) if (d / "shared").is_dir()), ROOT / "samples")
JSON_TYPE = "application/vnd.pypi.simple.v1+json"
CP312 = ["cp312-cp312-manylinux_2_28_x86_64", "cp312-abi3-manylinux_2_17_x86_64", "py3-none-any"]


# -- a set on disk: manifest.json and the bodies ---------------------------------------------------
def save_set(out: Path, calls: list[dict[str, Any]]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    manifest = []
    for i, call in enumerate(calls):
        body = f"{i:04d}.body"
        (out / body).write_bytes(call.pop("content"))
        manifest.append({**call, "body": body})
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))


def capture(out: Path, argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT / "src"))
    import resolve_gpu_stack.index.finder as finder
    from resolve_gpu_stack.cli import run  # not the console script's (__main__.run ends the process: nothing would be saved)

    calls: list[dict[str, Any]] = []
    original = finder.parse_page

    def wrapped(page: Any, *, index: str, only: Any = None, keep: Any = None, memo: Any = None) -> Any:
        if page is not None:
            filt = None if keep is None else {"tags": sorted(str(t) for t in keep.tags), "sdists": keep.sdists}
            calls.append(
                {
                    "url": page.url,
                    "content_type": page.content_type,
                    "content": page.content,
                    "index": index,
                    "only": None if only is None else sorted(only),
                    "keep": filt,
                }
            )
        return original(page, index=index, only=only, keep=keep, memo=memo)

    finder.parse_page = wrapped  # type: ignore[assignment]
    sys.argv = ["resolve-gpu-stack", *argv]
    try:
        run()
    except SystemExit as exc:
        code = exc.code
    else:
        code = 0
    save_set(out, calls)
    print(f"saved {len(calls)} pages, {sum(len((out / f'{i:04d}.body').read_bytes()) for i in range(len(calls))) / 2**20:.1f} MB, to {out}", file=sys.stderr)
    return int(code or 0)


def bench_set(out: Path) -> None:
    """run.py's wide world: each page whole, and each PyPI page with a cp312 x86_64 filter."""
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(ROOT / "tests"))
    from benchworld import build_named

    story = build_named("wide", out / "www")
    base = "http://127.0.0.1:8000/"
    story.world.write(base)
    calls = []
    for path in sorted((out / "www").rglob("index.*")):
        rel = path.parent.relative_to(out / "www").as_posix() + "/"
        index = "pytorch" if rel.startswith("whl/") else "flashinfer" if rel.startswith("fi/") else "pypi"
        ctype = JSON_TYPE if path.suffix == ".json" else "text/html"
        for keep in (None, {"tags": CP312, "sdists": False}) if index == "pypi" and path.suffix == ".json" else (None,):
            calls.append({"url": base + rel, "content_type": ctype, "content": path.read_bytes(), "index": index, "only": None, "keep": keep})
    shutil.rmtree(out / "www")
    save_set(out, calls)


def samples_set(out: Path) -> None:
    calls = []
    for path in sorted(SAMPLES.glob("*.html")):
        index = "flashinfer" if path.name.startswith("flashinfer") else "pytorch"
        calls.append(
            {
                "url": f"https://{index}.example/{path.stem}/",
                "content_type": "text/html",
                "content": path.read_bytes(),
                "index": index,
                "only": None,
                "keep": None,
            }
        )
    save_set(out, calls)


def _hostile_rows(n: int) -> list[str]:
    good = [
        json.dumps(
            {"filename": f"demo-1.{i}-py3-none-any.whl", "url": f"https://files.example/p/{i}/demo-1.{i}-py3-none-any.whl", "hashes": {"sha256": "ab" * 32}}
        )
        for i in range(n)
    ]
    bad = [
        "7",
        "null",
        "[]",
        '{"filename": 12, "url": "x.whl"}',
        '{"filename": "demo-0.1-py3-none-any.whl", "url": "https://files.example/p/demo-0.1-py3-none-any.whl", "size": 1e400}',
        '{"filename": "demo\\u002d0.2-py3-none-any.whl", "url": "../../p/demo-0.2-py3-none-any.whl#sha256=nothex"}',
        '{"filename": "demo-0.3-py3-none-any.whl", "filename": "demo-0.4-cp312-cp312-win_amd64.whl", "url": "w.whl"}',
        '{"filename": "demo-0.5-py36+-none-any.whl", "url": "y.whl"}',
        '{"filename": "../evil-1.0-py3-none-any.whl", "url": "https://u:pw@files.example/evil.whl"}',
        '{"filename": "demo-0.6-py3-none-any-cu12.whl", "url": "v.whl"}',
        '{"filename": "demo-0.6-variants.json", "url": "v.json", "hashes": {"sha256": "cd"}}',
        '{"filename": "demo-0.7.tar.gz", "url": "s.tar.gz", "requires-python": "not a spec", "yanked": true, "core-metadata": "x"}',
    ]
    return bad + good + bad


def hostile_set(out: Path) -> None:
    calls = []
    for n in (10, 12000):  # a small page (json) and one of more than 1 MiB (row by row)
        text = '{"meta": {"api-version": "1.1"}, "name": "demo", "files": [' + ",".join(_hostile_rows(n)) + "]}"
        for body in (text, text[:-1] + ', "x": NaN}', text[:-2], '{"meta": {"api-version": "2.0"}, "files": []}'):
            for keep in (None, {"tags": CP312, "sdists": False}, {"tags": CP312, "sdists": True}):
                calls.append(
                    {
                        "url": "https://pypi.example/simple/demo/",
                        "content_type": JSON_TYPE,
                        "content": body.encode(),
                        "index": "pypi",
                        "only": None,
                        "keep": keep,
                    }
                )
    soup = '<html><a href="demo-1.0-py3-none-any.whl#sha256=zz">x</a><a href="../">up</a><a href="x.exe">x</a><a href=demo-2.0.tar.gz data-yanked>s</a><p><a'
    for body in (soup.encode(), b"PK\x03\x04binary", b"<Error><Code>NoSuchKey</Code></Error>", b"\xff\xfe<a href='x-1.0.tar.gz'>x</a>"):
        calls.append({"url": "https://idx.example/simple/demo/", "content_type": "text/html", "content": body, "index": "pypi", "only": None, "keep": None})
    save_set(out, calls)


# -- the worker: one tree's parse of the sets ---------------------------------------------------------
def _canon(parsed: Any) -> Any:
    def file(f: Any) -> list[Any]:
        variant = None if f.variant is None else [f.variant.label, f.variant.json_url, f.variant.json_sha256]
        fields = [f.filename, f.url, f.name, str(f.version), sorted(map(str, f.tags)), f.is_wheel, f.index, f.sha256, f.size, f.requires_python, f.yanked]
        return [*fields, f.metadata_sha256, f.has_metadata, f.upload_time, f.untested, variant]

    if isinstance(parsed, str):
        return parsed
    return [
        parsed.url,
        [file(f) for f in parsed.files],
        [file(f) for f in parsed.variants],
        list(parsed.subdirs),
        list(parsed.warnings),
        parsed.title,
        parsed.status,
        parsed.status_reason,
    ]


def worker(sets: dict[str, str], passes: int) -> dict[str, Any]:
    from packaging.tags import parse_tag

    from resolve_gpu_stack.index.parse import ParseMemo, RowFilter, parse_page
    from resolve_gpu_stack.model import IndexPage

    out: dict[str, Any] = {}
    for name, directory in sets.items():
        manifest = json.loads((Path(directory) / "manifest.json").read_text())
        calls = [(IndexPage(url=c["url"], content=(Path(directory) / c["body"]).read_bytes(), content_type=c["content_type"]), c) for c in manifest]

        def one_pass(calls: list[tuple[Any, dict[str, Any]]]) -> list[Any]:
            memo, filters, results = ParseMemo(), {}, []
            for page, c in calls:
                keep = None
                if c["keep"] is not None:
                    key = (tuple(c["keep"]["tags"]), c["keep"]["sdists"])
                    keep = filters.get(key) or filters.setdefault(key, RowFilter(frozenset(t for s in key[0] for t in parse_tag(s)), sdists=key[1]))
                try:
                    results.append(parse_page(page, index=c["index"], only=c["only"], keep=keep, memo=memo))
                except Exception as exc:  # noqa: BLE001 - a hostile page's refusal is part of the result
                    results.append(f"{type(exc).__name__}: {exc}")
            return results

        cpu = []
        for _ in range(passes):
            start = time.process_time()
            results = one_pass(calls)
            cpu.append(time.process_time() - start)
        canon = [_canon(r) for r in results]
        digests = [hashlib.sha256(json.dumps(c).encode()).hexdigest()[:16] for c in canon]
        out[name] = {
            "cpu": statistics.median(cpu),
            "pages": len(calls),
            "bytes": sum(len(p.content) for p, _ in calls),
            "files": sum(len(r.files) for r in results if not isinstance(r, str)),
            "digest": hashlib.sha256("".join(digests).encode()).hexdigest()[:16],
            "page_digests": digests,
            "page_results": [r[:120] if isinstance(r, str) else f"{len(r.files)} files, {len(r.warnings)} warnings" for r in results],
        }
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["capture"]:
        if len(argv) < 3 or "--" not in argv:
            raise SystemExit("usage: pages.py capture DIR -- resolve ARGS...")
        return capture(Path(argv[1]), argv[argv.index("--") + 1 :])
    if argv[:1] == ["_worker"]:
        job = json.loads(argv[1])
        print(json.dumps(worker(job["sets"], job["passes"])))
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a", help="a git revision or a src directory")
    ap.add_argument("b", help="a git revision or a src directory")
    ap.add_argument("--runs", type=int, default=5, help="turns of both trees (default 5)")
    ap.add_argument("--passes", type=int, default=3, help="passes over the sets per turn and tree; the median counts (default 3)")
    ap.add_argument("--set", action="append", default=[], help="live=DIR (pages capture saved), bench, samples, hostile (default: bench, samples, hostile)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(HERE))
    from run import remove_work, source_dir

    tmp = Path(tempfile.mkdtemp(prefix="rgs-pages-"))
    makers = {"bench": bench_set, "samples": samples_set, "hostile": hostile_set}
    sets: dict[str, str] = {}
    try:
        for spec in args.set or ["bench", "samples", "hostile"]:
            name, _, directory = spec.partition("=")
            if directory:
                sets[name] = directory
            else:
                makers[name](tmp / name)
                sets[name] = str(tmp / name)
        trees = {"A": source_dir(args.a, tmp), "B": source_dir(args.b, tmp)}
        job = json.dumps({"sets": sets, "passes": args.passes})
        turns: dict[str, list[dict[str, Any]]] = {side: [] for side in trees}
        for _ in range(args.runs):
            for side, src in trees.items():
                env = {**os.environ, "PYTHONPATH": str(src), "PYTHONDONTWRITEBYTECODE": "1"}
                done = subprocess.run([sys.executable, __file__, "_worker", job], capture_output=True, text=True, env=env, check=True)
                turns[side].append(json.loads(done.stdout))
        with open("/proc/loadavg") as f:
            load = " ".join(f.read().split()[:3])
        print(f"{args.runs} turns of {args.passes} passes, in turns (load average {load})")
        for name in sets:
            first = {side: turns[side][0][name] for side in trees}
            cpu = {side: statistics.median(t[name]["cpu"] for t in turns[side]) for side in trees}
            print(f"  {name}: {first['A']['pages']} pages, {first['A']['bytes'] / 2**20:.1f} MB")
            for side, spec in (("A", args.a), ("B", args.b)):
                each = ", ".join(f"{t[name]['cpu'] * 1000:.0f}" for t in turns[side])
                print(f"    {side} {spec}: CPU median {cpu[side] * 1000:.1f} ms ({each}), {first[side]['files']} files, results {first[side]['digest']}")
            print(f"    B / A: {cpu['B'] / cpu['A']:.3f}; A / B: {cpu['A'] / cpu['B']:.2f}x")
            if first["A"]["digest"] != first["B"]["digest"]:
                differ = [i for i, (x, y) in enumerate(zip(first["A"]["page_digests"], first["B"]["page_digests"], strict=True)) if x != y]
                print(f"    RESULTS DIFFER on {len(differ)} pages: {differ[:10]}")
                for i in differ[:5]:
                    print(f"      page {i}: A {first['A']['page_results'][i]!r}; B {first['B']['page_results'][i]!r}")
    finally:
        remove_work(tmp)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
