"""Fault scenarios end to end: the story world on a loopback server, the real CLI, and the checks
every failure must pass afterwards (nothing corrupted in the cache, no temp files, no lock).

    with story_run(tmp_path) as run:
        run.srv.script(run.paths.page, [Fault(status=503)])
        rc, out, err = run.lock(capsys)
        assert rc == 0 and run.cache_problems() == []

``run.paths`` names one request of each kind a `lock -o` makes: an index page, a PEP 658
METADATA sidecar, a range read of a wheel without a sidecar, and a whole wheel download (the
nightly torch, which has no hash on its page, so the lock must download it to hash it).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from support.doors import index_flags, run_cli
from support.server import IndexServer
from support.stack_world import build_story_world
from support.world import World

OLD_NIGHTLY = "2.12.0.dev20260305+cu130"
NEW_NIGHTLY = "2.12.0.dev20260307+cu130"
TORCH_FILE = f"torch-{NEW_NIGHTLY}-cp312-cp312-manylinux_2_28_x86_64.whl"
# The installed torch is an older nightly, and the word to move it is given: the plan upgrades it,
# so the lock downloads the new one.
LISTING = ["--python", "3.12", "--platform", "x86_64-manylinux_2_28", "--installed", f"torch=={OLD_NIGHTLY}"]  # candidates, inspect: the target only
TARGET = [*LISTING, "--upgrade-package", "torch"]  # the stories move the older nightly, by name


@dataclass(frozen=True)
class Paths:
    """Server paths (as the server sees them, unquoted) of one request of each kind."""

    page: str = "/whl/nightly/cu130/torch/"
    json_page: str = "/simple/numpy/"
    metadata: str = f"/whl/nightly/cu130/{TORCH_FILE}.metadata"
    range: str = "/files/numpy-2.2.0-py3-none-any.whl"
    wheel: str = f"/whl/nightly/cu130/{TORCH_FILE}"
    legacy_page: str = "/fi/cu130/torch2.12/flashinfer-python/"
    jit_cache_page: str = "/fi/cu130/flashinfer-jit-cache/"
    jit_cache_wheel: str = "/releases/download/v0.6.5/flashinfer_jit_cache-0.6.5+cu130-cp39-abi3-manylinux_2_28_x86_64.whl"


PATHS = Paths()


def gzipped(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=1)


@dataclass
class StoryRun:
    """A served story world, a cache dir and a lock path; ``lock()`` runs the real CLI."""

    root: Path
    world: World
    srv: IndexServer
    paths: Paths = PATHS
    timeout: float = 10.0
    extra: list[str] = field(default_factory=list)

    @property
    def cache(self) -> Path:
        return self.root / "cache"

    @property
    def lock_path(self) -> Path:
        return self.root / "out" / "pylock.x.toml"

    @property
    def constraints_path(self) -> Path:
        return self.root / "out" / "constraints.txt"

    @property
    def overrides_path(self) -> Path:
        """The overrides file ``lock`` writes beside the constraints file."""
        return self.root / "out" / "overrides.txt"

    def argv(self, command: str = "lock", *extra: str, base: str | None = None) -> list[str]:
        argv = [command, *TARGET, *index_flags(base or self.srv.url), "--cache-dir", str(self.cache), "--timeout", str(self.timeout), *self.extra, *extra]
        if command == "lock":
            argv += ["-o", str(self.lock_path), "-o", str(self.constraints_path)]
        return argv

    def lock(self, capsys, *extra: str) -> tuple[int, str, str]:
        return run_cli(capsys, *self.argv("lock", *extra))

    def served(self, path: str) -> bytes:
        """The bytes the server holds for ``path`` (a page's index.html, or a file)."""
        full = self.world.root / path.lstrip("/")
        return (full / "index.html").read_bytes() if path.endswith("/") else full.read_bytes()

    def gets(self, path: str) -> list[dict[str, str]]:
        """The headers of every GET of ``path`` so far."""
        return [headers for method, raw, headers in self.srv.log if method == "GET" and unquote(urlsplit(raw).path) == path]

    def cache_problems(self) -> list[str]:
        return cache_problems(self.cache, self.world.root)

    def outputs(self) -> dict[str, bytes | None]:
        return {p.name: (p.read_bytes() if p.exists() else None) for p in (self.lock_path, self.constraints_path, self.overrides_path)}


@contextmanager
def story_run(tmp_path: Path, *, hostile: bool = True, build=None) -> Iterator[StoryRun]:
    """Serve the story world (``build(world)`` may add to it before the pages are written)."""
    world = build_story_world(tmp_path / "www", hostile=hostile)
    if build is not None:
        build(world)
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        yield StoryRun(root=tmp_path, world=world, srv=srv)


# -- what a failure may leave behind ------------------------------------------------------------


def _served_pages(www: Path) -> set[bytes]:
    return {p.read_bytes() for p in www.rglob("index.*")}


def _served_metadata(www: Path) -> set[bytes]:
    out = {p.read_bytes() for p in www.rglob("*.whl.metadata")}  # PEP 658 sidecars
    for whl in www.rglob("*.whl"):
        try:
            with zipfile.ZipFile(whl) as zf:
                out.update(zf.read(n) for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA"))
        except Exception:  # noqa: BLE001 - a deliberately corrupt wheel has no METADATA to serve
            continue
    return out


def _wheels_by_name(www: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in www.rglob("*.whl")}


def cache_problems(cache: Path, www: Path) -> list[str]:
    """Everything wrong with a cache dir after a run against the world served from ``www``.

    - no temporary file anywhere (``atomic_write``'s ``.<name>.<8 digits>.tmp``, an older ``.tmp-*``);
    - every HTTP-cache entry's body matches the sha256 and size in its header, and a page / a
      METADATA entry is byte-for-byte a page / a METADATA the server really holds (nothing faulty
      got in);
    - every wheel in ``wheels/sha256/`` hashes to its directory's digest and is the real wheel;
    - every resumable ``wheels/partial/*.part`` is a prefix of the real wheel it belongs to.
    """
    if not cache.exists():
        return []
    problems: list[str] = []
    pages, metadata, wheels = _served_pages(www), _served_metadata(www), _wheels_by_name(www)
    for path in sorted(p for p in cache.rglob("*") if p.is_file()):
        rel = path.relative_to(cache)
        if path.name.startswith(".tmp") or path.name.endswith(".tmp"):
            problems.append(f"{rel}: temporary file left behind")
            continue
        top = rel.parts[0]
        if top != "wheels":  # an HttpCache entry (pages-v1, metadata-v1, any later kind): header line + body
            head, _, body = path.read_bytes().partition(b"\n")
            header = json.loads(head)
            if header.get("sha256") != hashlib.sha256(body).hexdigest() or header.get("size") != len(body):
                problems.append(f"{rel}: body does not match its recorded sha256/size")
            elif top in ("pages-v1", "metadata-v1") and body not in (pages if top == "pages-v1" else metadata):
                problems.append(f"{rel}: holds bytes the server never served as a {top[:-3]}")
        elif rel.parts[:2] == ("wheels", "sha256"):
            data = path.read_bytes()
            if hashlib.sha256(data).hexdigest() != rel.parts[3]:
                problems.append(f"{rel}: does not hash to its digest")
            elif wheels.get(path.name) != data:
                problems.append(f"{rel}: is not the wheel the server holds")
        elif rel.parts[:2] == ("wheels", "partial") and path.suffix == ".part":
            data = path.read_bytes()
            if not any(real.startswith(data) for real in wheels.values()):
                problems.append(f"{rel}: a partial download that is no prefix of any real wheel")
    return problems


def partial_files(cache: Path) -> list[Path]:
    return sorted(p for p in (cache / "wheels" / "partial").glob("*.part")) if (cache / "wheels").exists() else []


def wheel_with_metadata(filename: str, metadata: bytes, *, extra: dict[str, bytes] | None = None) -> bytes:
    """A wheel zip named ``filename`` whose METADATA is ``metadata`` (whatever it says)."""
    dist, version = filename.split("-")[:2]
    info = f"{dist}-{version}.dist-info"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"{dist}/__init__.py", b"")
        for name, data in (extra or {}).items():
            zf.writestr(name, data)
        zf.writestr(f"{info}/METADATA", metadata)
        zf.writestr(f"{info}/WHEEL", b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(f"{info}/RECORD", b"")
    return buf.getvalue()


def replace_pypi_wheel(world: World, filename: str, data: bytes) -> None:
    """Swap the bytes of a PyPI wheel; its page keeps advertising the new file's sha256 and size."""
    import dataclasses

    for entries in world.pages.values():
        for i, entry in enumerate(entries):
            if entry.wheel.filename == filename:
                entry.wheel.path.write_bytes(data)
                entries[i] = dataclasses.replace(entry, wheel=dataclasses.replace(entry.wheel, sha256=hashlib.sha256(data).hexdigest(), size=len(data)))
                return
    raise KeyError(filename)
