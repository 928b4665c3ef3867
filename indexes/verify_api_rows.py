"""Re-verify every API row of indexes/gpus.toml against the released flashinfer-python wheels.

    python indexes/verify_api_rows.py [--index URL] [--timeout SECONDS]

For each ``[[api]]`` row (``symbol``, optional ``backend``, ``flashinfer`` floor, ``runs-on`` and
its ``[[api.gpu]]`` floors) the released wheels on PyPI must agree:

* the floor release has the symbol (exported by ``flashinfer``; with a backend, the backend is a
  value of the symbol's ``backend`` Literal), and the release just below it does not;
* each GPU of ``runs-on`` is supported (by the backend's requirement function, decorated with
  ``@supported_compute_capability([...])``; without a backend, by any backend's) first at its
  ``[[api.gpu]]`` floor, else at the row's floor, and not in the release just below that;
* the newest release supports no GPU the row leaves out of ``runs-on``.

Only the members needed are read from each wheel, by HTTP range requests (the zip's directory,
``flashinfer/__init__.py`` and the modules the symbol is imported through), each checked against
its CRC and the file size against the one the index lists. PyPI's URL comes from ``--index``, else
from your uv/pip configuration (as the resolver's does); it is never written into this repository.
Offline (the index cannot be reached), the script says so and exits 0: nothing was verified.

Exit: 0 every row agrees (or skipped offline), 1 a row disagrees (each disagreement names the row,
the GPU and the release that shows it), 2 usage.
"""

from __future__ import annotations

import argparse
import ast
import functools
import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from urllib.parse import urljoin

from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from resolve_gpu_stack.data.gpus import ApiRow, load_gpu_table  # noqa: E402
from resolve_gpu_stack.net.settings import TransportSettings  # noqa: E402
from resolve_gpu_stack.net.transport import Transport  # noqa: E402
from resolve_gpu_stack.scan.zipmeta import TAIL_BYTES, find_eocd, inflate_member, member_span, parse_central_directory  # noqa: E402

PACKAGE = "flashinfer-python"
MAX_MEMBER = 8 * 1024 * 1024  # a Python module of flashinfer is well under this


# -- what one release says ------------------------------------------------------------------------


@dataclass(frozen=True)
class ApiFacts:
    """What a release's source says of one symbol: exported, its ``backend`` Literal values, and
    per backend the GPUs (compute capability x 10: 100, 107, 120) its requirement function allows."""

    exported: bool
    backends: frozenset[str] = frozenset()
    archs: Mapping[str, frozenset[int]] = field(default_factory=dict)  # backend -> GPUs; {} unknown

    def has(self, backend: str | None) -> bool:
        return self.exported and (backend is None or backend in self.backends)

    def supports(self, backend: str | None, arch: int) -> bool | None:
        """Whether ``arch`` is supported (by ``backend``, or by any backend); None: nothing says."""
        if not self.archs:
            return None
        if backend is None:
            return any(arch in a for a in self.archs.values())
        found = self.archs.get(backend.replace("-", "_"))
        return None if found is None else arch in found


def api_facts(read: Callable[[str], str | None], symbol: str) -> ApiFacts:
    """The facts of ``symbol`` in a release whose files ``read(path)`` returns (None: no such
    member): found by following ``from .x import symbol`` from ``flashinfer/__init__.py`` to the
    module that defines it."""
    candidates = ["flashinfer/__init__.py"]
    for _ in range(6):
        path, text = next(((c, t) for c in candidates if (t := read(c)) is not None), ("", None))
        if text is None:
            return ApiFacts(exported=False)
        tree = ast.parse(text)
        definition = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == symbol), None)
        if definition is not None:
            return ApiFacts(exported=True, backends=_backend_values(definition), archs=_requirements(tree, symbol))
        candidates = _imported_from(tree, symbol, path)
        if not candidates:
            return ApiFacts(exported=False)
    return ApiFacts(exported=False)


def _imported_from(tree: ast.Module, symbol: str, path: str) -> list[str]:
    """The members ``symbol`` may be imported from (``from .gemm import mm_mxfp8`` in
    flashinfer/__init__.py: flashinfer/gemm/__init__.py or flashinfer/gemm.py)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level and any(a.name == symbol for a in node.names):
            base = PurePosixPath(path).parent
            for _ in range(node.level - 1):
                base = base.parent
            target = base.joinpath(*node.module.split(".")) if node.module else base
            return [f"{target}/__init__.py", f"{target}.py"]
    return []


def _backend_values(definition: ast.FunctionDef) -> frozenset[str]:
    for arg in [*definition.args.args, *definition.args.kwonlyargs]:
        if arg.arg == "backend" and arg.annotation is not None:
            return frozenset(n.value for n in ast.walk(arg.annotation) if isinstance(n, ast.Constant) and isinstance(n.value, str))
    return frozenset()


def _requirements(tree: ast.Module, symbol: str) -> dict[str, frozenset[int]]:
    """backend -> GPUs, from ``@supported_compute_capability([100, 103]) def _<backend>_<symbol>_requirement``
    (``gemm_mxfp8`` counts for ``mm_mxfp8``)."""
    out: dict[str, frozenset[int]] = {}
    suffixes = (f"_ge{symbol}_requirement", f"_{symbol}_requirement")
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef) or not node.name.startswith("_"):
            continue
        backend = next((node.name[1 : -len(sfx)] for sfx in suffixes if node.name.endswith(sfx) and len(node.name) > len(sfx) + 1), None)
        for deco in node.decorator_list if backend else ():
            if isinstance(deco, ast.Call) and getattr(deco.func, "id", None) == "supported_compute_capability" and deco.args:
                try:
                    out[backend] = frozenset(int(v) for v in ast.literal_eval(deco.args[0]))  # type: ignore[index]
                except (ValueError, TypeError):
                    continue
    return out


# -- the rows against the releases -----------------------------------------------------------------


def _arch_number(arch: object) -> int:
    return int(str(arch).removeprefix("sm").rstrip("af"))


@dataclass
class RowCheck:
    """One row's disagreements with the releases, and what could not be checked (notes)."""

    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def verify_row(row: ApiRow, releases: Sequence[Version], facts: Callable[[Version], ApiFacts]) -> RowCheck:
    """What the released wheels (``releases``, ascending) say against ``row``. A floor may be a tag
    that was never released (a release candidate): the first release at or above it must have the
    API, the last release below it must not."""
    out = RowCheck()
    if not releases:
        out.notes.append("no released wheel to check against")
        return out
    _check_floor(out, row.name, row.flashinfer, releases, lambda v: facts(v).has(row.backend), "has it")
    if row.runs_on is None:
        return out
    per_gpu = {_arch_number(a): g.flashinfer for g in row.per_gpu for a in g.archs}
    listed = {_arch_number(a) for a in row.runs_on}
    for number in sorted(listed | _supported_anywhere(row, releases, facts)):

        def supports(v: Version, number: int = number) -> bool | None:
            return facts(v).supports(row.backend, number) if facts(v).has(row.backend) else False

        if number not in listed:
            first = next((v for v in releases if supports(v)), None)
            out.problems.append(f"{row.name}: sm{number} is supported from {first} on, but runs-on leaves it out")
            continue
        if supports(releases[-1]) is None:
            out.notes.append(f"{row.name} on sm{number}: the newest release names no requirement for it; per-GPU support not checked")
            continue
        _check_floor(
            out, f"{row.name} on sm{number}", max(per_gpu.get(number, row.flashinfer), row.flashinfer), releases, supports, "supports it", since=row.flashinfer
        )
    return out


def _supported_anywhere(row: ApiRow, releases: Sequence[Version], facts: Callable[[Version], ApiFacts]) -> set[int]:
    """The GPUs the newest release supports for the row (its backend, or any)."""
    newest = facts(releases[-1])
    if not newest.has(row.backend):
        return set()
    archs = [newest.archs.get(row.backend.replace("-", "_"), frozenset())] if row.backend else list(newest.archs.values())
    return {a for found in archs for a in found}


def _check_floor(
    out: RowCheck, what: str, floor: Version, releases: Sequence[Version], holds: Callable[[Version], bool | None], words: str, *, since: Version | None = None
) -> None:
    """The first release at or above ``floor`` ``holds``, the last one below it (and at or above
    ``since``) does not; otherwise the problem, naming the release that shows it. A release whose
    source says nothing either way (``holds`` None: no requirement list yet) is skipped, with a note."""
    first = next((v for v in releases if v >= floor), None)
    if first is None:
        out.problems.append(f"{what}: floor {floor} is above every release (newest {releases[-1]})")
        return
    later = [v for v in releases if v >= first]
    known = next((v for v in later if holds(v) is not None), None)
    if known is None:
        out.notes.append(f"{what}: no release at or above {first} says either way")
        return
    if known != first:
        out.notes.append(f"{what}: {first} up to {known} (excluded) say nothing either way; checked from {known}")
    if not holds(known):
        found = next((v for v in later if v > known and holds(v)), None)
        out.problems.append(
            f"{what}: {known} (at or above the floor {floor}) does not; " + (f"the first release that does is {found}" if found else f"no release {words}")
        )
    below = [v for v in releases if v < floor and (since is None or v >= since)]
    if below and holds(below[-1]):
        earliest = next(v for v in releases if (since is None or v >= since) and holds(v))
        out.problems.append(f"{what}: {below[-1]} already {words} (from {earliest} on); the floor {floor} is too high")
    elif below and holds(below[-1]) is None:
        out.notes.append(f"{what}: {below[-1]} says nothing either way: the floor {floor} itself is not checked")
    elif not below and since is None and releases[0] > floor:
        out.notes.append(f"{what}: no py3-none-any wheel below {releases[0]}: the floor {floor} itself is not checked")


# -- reading released wheels by ranges ---------------------------------------------------------------


@dataclass(frozen=True)
class Wheel:
    version: Version
    url: str
    size: int | None


class Http:
    """GETs through the resolver's own transport (its URL and redirect policy, credentials per
    origin, retries): (status, headers, body, final URL)."""

    CAP = 64 * 1024 * 1024

    def __init__(self, timeout: float) -> None:
        self.transport = Transport(TransportSettings(timeout=timeout, retries=1))

    def get(self, url: str, headers: Mapping[str, str] | None = None) -> tuple[int, Mapping[str, str], bytes, str]:
        def attempt() -> tuple[int, Mapping[str, str], bytes, str]:
            resp, final = self.transport.open(url, dict(headers or {}))
            try:
                self.transport.check_status(resp, url, ok=(200, 206))
                got = {k: v for k in ("content-length", "content-range") if (v := resp.headers.get(k)) is not None}
                return resp.status_code, got, self.transport.read_body(resp, url, self.CAP, "answer"), final
            finally:
                self.transport.finish(resp)

        return self.transport.retrying(url, attempt)

    def close(self) -> None:
        self.transport.close()


class RangeReader:
    """A wheel's members by HTTP range requests: the directory once, then each member asked for
    (once)."""

    def __init__(self, client: Http, wheel: Wheel) -> None:
        self.client = client
        self.wheel = wheel
        self.read = functools.lru_cache(maxsize=None)(self._read)
        self.size = wheel.size or self._size()
        tail = self._get(max(0, self.size - TAIL_BYTES), self.size)
        eocd = find_eocd(tail, self.size)
        start = eocd.cd_offset
        directory = tail[start - (self.size - len(tail)) :] if start >= self.size - len(tail) else self._get(start, start + eocd.cd_size)
        self.entries = {e.name: e for e in parse_central_directory(directory[: eocd.cd_size], eocd)}

    def _size(self) -> int:
        status, headers, _, _ = self.client.get(self.wheel.url, {"Range": "bytes=0-0"})
        if status != 206:
            raise OSError(f"{self.wheel.url}: the server ignored the Range header")
        return int(headers.get("content-range", "").rpartition("/")[2])

    def _get(self, start: int, end: int) -> bytes:
        status, headers, body, _ = self.client.get(self.wheel.url, {"Range": f"bytes={start}-{end - 1}"})
        if status != 206:
            raise OSError(f"{self.wheel.url}: the server ignored the Range header")
        total = headers.get("content-range", "").rpartition("/")[2]
        if total.isdigit() and int(total) != self.size:
            raise OSError(f"{self.wheel.url}: {total} bytes, but the index lists {self.size}")
        return body

    def _read(self, path: str) -> str | None:
        entry = self.entries.get(path)
        if entry is None:
            return None
        start, end = member_span(entry, self.size)
        return inflate_member(self._get(start, end), entry, max_size=MAX_MEMBER).decode("utf-8")


def released_wheels(client: Http, index: str) -> list[Wheel]:
    """flashinfer-python's py3-none-any wheels on the simple index at ``index`` (PEP 691 JSON),
    ascending, yanked ones left out."""
    _, _, body, final = client.get(f"{index.rstrip('/')}/{PACKAGE}/", {"Accept": "application/vnd.pypi.simple.v1+json"})
    out: dict[Version, Wheel] = {}
    for f in json.loads(body).get("files", []):
        name = f.get("filename", "")
        if not name.endswith("-py3-none-any.whl") or f.get("yanked"):
            continue
        project, version, _, _ = parse_wheel_filename(name)
        if project == canonicalize_name(PACKAGE):
            out[version] = Wheel(version=version, url=urljoin(final, f["url"]), size=f.get("size"))
    return [out[v] for v in sorted(out)]


def verify(rows: Iterable[ApiRow], wheels: Sequence[Wheel], open_wheel: Callable[[Wheel], RangeReader], *, say: Callable[[str], None] = print) -> list[str]:
    by_version = {w.version: w for w in wheels}
    readers: dict[Version, RangeReader] = {}
    memo: dict[tuple[Version, str], ApiFacts] = {}

    def facts_for(symbol: str) -> Callable[[Version], ApiFacts]:
        def facts(version: Version) -> ApiFacts:
            if (version, symbol) not in memo:
                if version not in readers:
                    readers[version] = open_wheel(by_version[version])
                memo[version, symbol] = api_facts(readers[version].read, symbol)
            return memo[version, symbol]

        return facts

    problems = []
    for row in rows:
        found = verify_row(row, [w.version for w in wheels], facts_for(row.symbol))
        say(
            f"{'ok  ' if not found.problems else 'FAIL'} {row.name}"
            + "".join(f"\n     {p}" for p in found.problems)
            + "".join(f"\n     (not checked) {n}" for n in found.notes)
        )
        problems += found.problems
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--index", metavar="URL", help="the PyPI simple index (default: your uv/pip configuration)")
    parser.add_argument("--gpus-toml", type=Path, default=REPO / "indexes" / "gpus.toml", help="the table to verify")
    parser.add_argument("--timeout", type=float, default=30.0)
    args = parser.parse_args(argv)
    from resolve_gpu_stack.cli.userconfig import discover_pypi_url
    from resolve_gpu_stack.errors import CrawlError

    index = args.index or discover_pypi_url(os.environ)
    rows = load_gpu_table(args.gpus_toml).apis
    client = Http(args.timeout)
    try:
        try:
            wheels = released_wheels(client, index)
        except CrawlError as exc:
            print(f"skipped: the index cannot be reached ({exc}); nothing was verified", file=sys.stderr)
            return 0
        print(f"{len(wheels)} released {PACKAGE} wheels; {len(rows)} API rows of {args.gpus_toml.name}")
        problems = verify(rows, wheels, lambda w: RangeReader(client, w))
    finally:
        client.close()
    print(f"{len(problems)} disagreement{'s' * (len(problems) != 1)}" if problems else "every API row agrees with the released wheels")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
