"""What the library would cost instead of each replica of one (issue 31 item 4), on the benchmark worlds.

    python bench/replicas.py [--worlds large,small,wide] [--repeat 7]

For each world of ``run.py`` a cold resolve runs in-process (the CLI's ``main``, served by
``tests/support/server.py``) with a recorder on each replica, so the inputs are exactly what a run feeds
them: every METADATA file read (``metadata.core_metadata_fields``, the copy of
``packaging.metadata.parse_email``), every HTML page (``htmlfast.tokens``, the fast path before
``html.parser``) and every href joined (``parse._join_redacted``, the fast path before
``urljoin``). Each input set is then read both ways, in turns, ``--repeat`` times (medians):

- METADATA: ``core_metadata_fields(raw)`` vs ``packaging.metadata.parse_email(raw)``;
- HTML: ``parse._collect`` (htmlfast, falling back) vs ``parse.read_with_html_parser`` alone;
- hrefs: ``_join_redacted`` (a fresh per-page context per page) vs ``redact(urljoin(base, href))``.

The import the library needs and a resolve does not otherwise load (``packaging.metadata`` and the
``email`` package; ``html.parser``; ``ctypes`` and libstdc++ for the demangler) is timed in fresh
processes after the resolve's own imports: with the bytecode cache, and without one (every module
compiled from source, the standard library's too: an upper bound). The extra cost of a run is the
library's time minus the copy's, plus that import. Under 10 ms: the library it is.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

from benchworld import WORLDS, build_named  # noqa: E402
from run import PY, resolve_words  # noqa: E402
from support.server import IndexServer  # noqa: E402

# what a cold resolve imports before any of these libraries would be (the CLI's resolve path)
RESOLVE_IMPORTS = "import resolve_gpu_stack.cli.app, resolve_gpu_stack.cli.cmd_resolve, resolve_gpu_stack.index.parse, resolve_gpu_stack.net.transport"
LIBRARIES = {
    "METADATA: packaging.metadata (email)": "import packaging.metadata",
    "HTML: html.parser": "import html.parser",
    "demangler: ctypes + the C++ runtime, one name": "from resolve_gpu_stack.scan.demangle import demangle; demangle('_ZNK2at6Tensor5numelEv')",
}


def record(world: str, tmp: Path) -> dict[str, list]:
    """A cold CLI resolve of ``world`` in-process; the inputs each replica saw."""
    from resolve_gpu_stack import cli
    from resolve_gpu_stack.index import htmlfast, metadata, parse

    seen: dict[str, list] = {"metadata": [], "html": [], "joins": []}
    originals = (metadata.core_metadata_fields, htmlfast.tokens, parse._join_redacted)

    def fields(raw: bytes):  # type: ignore[no-untyped-def]
        seen["metadata"].append(raw)
        return originals[0](raw)

    def tokens(text: str):  # type: ignore[no-untyped-def]
        seen["html"].append(text)
        return originals[1](text)

    def join(base: str, href: str, ctx):  # type: ignore[no-untyped-def]
        seen["joins"].append((ctx.url, base, href))
        return originals[2](base, href, ctx)

    story = build_named(world, tmp / f"www-{world}")
    metadata.core_metadata_fields, htmlfast.tokens, parse._join_redacted = fields, tokens, join
    try:
        with IndexServer(tmp / f"www-{world}") as srv:
            story.world.write(srv.url)
            indexes = {"pytorch": srv.url + "whl/", "flashinfer": srv.url + "fi/", "pypi": srv.url + "simple/"}
            with contextlib.redirect_stdout(io.StringIO()):
                rc = cli.main(resolve_words(story, indexes, tmp / f"cache-{world}"))
            if rc:
                raise SystemExit(f"{world}: the resolve failed ({rc})")
    finally:
        metadata.core_metadata_fields, htmlfast.tokens, parse._join_redacted = originals
    return seen


def timed(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def in_turns(copy: Callable[[], object], library: Callable[[], object], repeat: int) -> tuple[float, float]:
    a, b = [], []
    for _ in range(repeat):
        a.append(timed(copy, 1))
        b.append(timed(library, 1))
    return statistics.median(a), statistics.median(b)


def costs(seen: dict[str, list], repeat: int) -> dict[str, tuple[int, float, float]]:
    from urllib.parse import urljoin

    from packaging.metadata import parse_email

    from resolve_gpu_stack.index import parse

    def copy_joins() -> None:
        contexts: dict[str, parse._Context] = {}
        for url, base, href in seen["joins"]:
            ctx = contexts.get(url) or contexts.setdefault(url, parse._Context(url, "pypi", None, {}))
            parse._join_redacted(base, href, ctx)

    def library_joins() -> None:
        for _url, base, href in seen["joins"]:
            parse.redact(urljoin(base, href))

    def copy_html() -> None:
        for text in seen["html"]:
            parse._collect(text, parse._Context("http://h/", "pypi", None, {}))

    def library_html() -> None:
        for text in seen["html"]:
            parse.read_with_html_parser(parse._AnchorCollector(), text)

    out = {
        "METADATA": (
            len(seen["metadata"]),
            *in_turns(lambda: [parse.core_metadata_fields(r) for r in seen["metadata"]], lambda: [parse_email(r) for r in seen["metadata"]], repeat),
        ),
        "HTML": (len(seen["html"]), *in_turns(copy_html, library_html, repeat)),
        "hrefs": (len(seen["joins"]), *in_turns(copy_joins, library_joins, repeat)),
    }
    return out


def import_cost(statement: str, repeat: int, *, bytecode: bool, tmp: Path) -> float:
    """Median seconds of ``statement`` in a fresh process that has imported what a resolve does."""
    code = f"{RESOLVE_IMPORTS}\nimport time\nt = time.perf_counter()\n{statement}\nprint(time.perf_counter() - t)"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    times = []
    for i in range(repeat):
        if not bytecode:  # an empty bytecode folder each time: every module compiled from source
            env.update(PYTHONPYCACHEPREFIX=str(tmp / f"pyc-{i}"), PYTHONDONTWRITEBYTECODE="1")
        out = subprocess.run([PY, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
        times.append(float(out.strip().splitlines()[-1]))
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worlds", default=",".join(WORLDS), help=f"comma-separated, of {', '.join(WORLDS)}")
    ap.add_argument("--repeat", type=int, default=7, help="runs of each side, in turns (default 7)")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="rgs-replicas-"))
    try:
        print("import a resolve does not otherwise pay (fresh processes, medians): with bytecode / without (all from source)")
        for label, statement in LIBRARIES.items():
            warm = import_cost(statement, args.repeat, bytecode=True, tmp=tmp)
            cold = import_cost(statement, max(3, args.repeat // 2), bytecode=False, tmp=tmp)
            print(f"  {label}: {warm * 1000:.1f} ms / {cold * 1000:.1f} ms")
        print("per run: inputs, the copy's time, the library's (in-process, in turns, medians), extra = library - copy")
        for world in args.worlds.split(","):
            seen = record(world.strip(), tmp)
            for what, (n, copy, library) in costs(seen, args.repeat).items():
                print(f"  {world} {what}: {n} inputs, copy {copy * 1000:.2f} ms, library {library * 1000:.2f} ms, extra {(library - copy) * 1000:+.2f} ms")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
