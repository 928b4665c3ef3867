"""Hostile and malformed input through the CLI: a PyPI offering higher versions of what other
indexes own, wheels that lie about what they are, path traversal in filenames, enormous
METADATA, and plain http. None of it is chosen, requested, cached as good, or written anywhere
but the cache and the snapshot dir."""

from __future__ import annotations

import json
import logging
import socket
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.doors import index_flags, run_cli
from support.faults import PATHS, TARGET, StoryRun, replace_pypi_wheel, story_run, wheel_with_metadata
from support.stack_world import ABI3, ARM, X86, torch_nightly
from support.world import World

from resolve_gpu_stack.errors import CrawlError
from resolve_gpu_stack.net.download import WheelCache, wheel_filename
from resolve_gpu_stack.net.snapshot import _storage_path, snapshot_key

HOSTILE_NAMES = ("torch", "triton", "pytorch-triton", "torchtriton", "flashinfer-jit-cache", "flashinfer-jit-cache-sm90a", "flashinfer-jit-cache-sm100a")


def _flashinfer_0_7(w: World) -> None:
    """FlashInfer 0.7: jit-cache is a shim over per-arch providers on flashinfer.ai; PyPI offers
    every provider name at a higher version."""
    providers = ("sm90a", "sm100a")
    w.pypi("flashinfer-python", "0.7.0", requires=["apache-tvm-ffi<0.2,>=0.1.6", "torch"])
    w.flashinfer("flashinfer-cubin", "0.7.0", page="flashinfer-cubin")  # cubin left PyPI after 0.6.13
    w.flashinfer(
        "flashinfer-jit-cache",
        "0.7.0+cu130",
        tag=f"{ABI3}-{X86}",
        page="cu130/flashinfer-jit-cache",
        requires=[f"flashinfer-jit-cache-{p}==0.7.0+cu130" for p in providers],
    )
    for p in providers:
        w.flashinfer(f"flashinfer-jit-cache-{p}", "0.7.0+cu130", tag=f"{ABI3}-{X86}", page=f"cu130/flashinfer-jit-cache-{p}")
        for arch in (X86, ARM):
            w.pypi(f"flashinfer-jit-cache-{p}", "9.9.9+cu130", tag=f"{ABI3}-{arch}")
            w.pypi(f"flashinfer-jit-cache-{p}", "9.9.9")


def _files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


# -- a hostile PyPI --------------------------------------------------------------------------------


def test_hostile_pypi_is_never_asked_chosen_cached_or_written(tmp_path: Path, capsys) -> None:
    with story_run(tmp_path, build=_flashinfer_0_7) as run:
        rc, _, err = run.lock(capsys, "--with", "torchvision")
        assert rc == 0, err
        lock = run.lock_path.read_text() + run.constraints_path.read_text()
        for name in ("flashinfer-jit-cache", "flashinfer-jit-cache-sm90a", "flashinfer-jit-cache-sm100a"):
            assert f"{name}==0.7.0+cu130" in lock
        pins = {line.split("==")[0]: line for line in run.constraints_path.read_text().splitlines() if "==" in line and not line.startswith("#")}
        for name in ("torch", "torchvision", "triton", "flashinfer-jit-cache", "flashinfer-jit-cache-sm90a", "flashinfer-jit-cache-sm100a"):
            assert "index=pypi" not in pins[name], pins[name]
        assert "pytorch-triton" not in pins and "torchtriton" not in pins
        assert "99.0.0" not in lock and "9.9.9" not in lock
        # the hostile pages were never even requested, nor any of their files
        asked = {path for method, path, _ in run.srv.log}
        for name in HOSTILE_NAMES:
            assert f"/simple/{name}/" not in asked
        assert not [p for p in asked if "99.0.0" in p or "9.9.9" in p]
        # and nothing of them is in the cache
        for path in _files_under(run.cache):
            data = path.read_bytes()
            assert b"99.0.0" not in data and b"9.9.9" not in data, path
            for name in HOSTILE_NAMES:
                assert f"/simple/{name}/".encode() not in data, (path, name)
        assert run.cache_problems() == []


def test_a_wheel_claiming_another_package_on_a_flashinfer_page_is_ignored_with_a_warning(tmp_path: Path, capsys, caplog) -> None:
    def build(w: World) -> None:
        w.flashinfer("torch", "99.0.0+cu130", tag=f"cp312-cp312-{X86}", page="cu130/flashinfer-jit-cache")

    with story_run(tmp_path, build=build) as run:
        rc, _, err = run.lock(capsys)
        assert rc == 0, err
        warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert any(
            PATHS.jit_cache_page in m and "torch-99.0.0+cu130" in m and "names package 'torch', not 'flashinfer-jit-cache'; ignored" in m for m in warned
        ), warned
        assert "99.0.0" not in run.lock_path.read_text()
        assert not [p for _, p, _ in run.srv.log if "99.0.0" in p]


# -- path traversal ------------------------------------------------------------------------------

NEWEST_NUMPY = "numpy-2.4.0-py3-none-any.whl"


def _traversal_world(w: World) -> None:
    """Newer torch, jit-cache and numpy than the story's: each reachable only through a link whose
    file name is a path (refused), or, for numpy, through %2e%2e segments of a URL on the index's
    own host (followed: fetching it is harmless, but its METADATA must be stored inside the
    snapshot)."""
    w.pypi("numpy", "2.4.0")
    torch_nightly(w, "20260308")
    w.pypi("flashinfer-python", "0.6.6", requires=["apache-tvm-ffi<0.2,>=0.1.6", "torch"])
    w.pypi("flashinfer-cubin", "0.6.6")
    w.flashinfer("flashinfer-jit-cache", "0.6.6+cu130", tag=f"{ABI3}-{X86}", page="cu130/flashinfer-jit-cache")


def _rewrite_pages(run: StoryRun) -> None:
    """Add the traversal links to the pages the world wrote."""
    torch_page = run.world.root / "whl/nightly/cu130/torch/index.html"
    good = f"torch-2.12.0.dev20260308+cu130-cp312-cp312-{X86}.whl"
    rows = "".join(
        f'    <a href="/whl/nightly/cu130/{prefix}{quote(good)}">{prefix}{good}</a><br/>\n'
        for prefix in ("..%2F..%2F..%2F..%2F", "%2e%2e%2f%2e%2e%2f%2e%2e%2f")
    )
    torch_page.write_text(torch_page.read_text().replace("  </body>", rows + "  </body>"))
    # drop the real 20260308 row: only the traversal links offer it
    text = torch_page.read_text()
    torch_page.write_text(
        "\n".join(
            line for line in text.splitlines() if not (good.replace("+", "%2B") in line and line.strip().startswith('<a href="/whl/nightly/cu130/torch-'))
        )
        + "\n"
    )
    jit_page = run.world.root / "fi/cu130/flashinfer-jit-cache/index.html"
    jit = f"flashinfer_jit_cache-0.6.6+cu130-{ABI3}-{X86}.whl"
    jit_page.write_text(
        jit_page.read_text().replace(
            f'href="{run.srv.url}releases/download/v0.6.6/{jit}',
            f'href="{run.srv.url}releases/download/v0.6.6/..%2f..%2f..%2f..%2f{jit}',
        )
    )
    json_page = run.world.root / "simple/numpy/index.json"
    data = json.loads(json_page.read_text())
    for f in data["files"]:
        if f["filename"] == NEWEST_NUMPY:
            f["url"] = f"../../files/a/b/%2e%2e/%2e%2e/{NEWEST_NUMPY}"  # the server resolves it to files/<wheel>
    data["files"].append({"filename": "../../../../evil-1.0-py3-none-any.whl", "url": "../../files/evil-1.0-py3-none-any.whl", "hashes": {}})
    json_page.write_text(json.dumps(data))


def test_traversal_in_file_names_is_refused_and_nothing_is_written_outside_the_snapshot(tmp_path: Path, capsys, caplog) -> None:
    caplog.set_level(logging.INFO)
    with story_run(tmp_path / "t", build=_traversal_world) as run:
        _rewrite_pages(run)
        snap = tmp_path / "t" / "a" / "b" / "c" / "snap"
        before = _files_under(tmp_path)
        argv = ["snapshot", "--output", str(snap), *TARGET, *index_flags(run.srv.url), "--cache-dir", str(run.cache), "--format", "json"]
        rc, out, err = run_cli(capsys, *argv)
        assert rc == 0, err
        plan = {p["name"]: p for p in json.loads(out)["packages"]}
        # file names that are paths are refused (logged), never requested
        assert plan["torch"]["version"] == "2.12.0.dev20260307+cu130"
        assert plan["flashinfer-jit-cache"]["version"] == plan["flashinfer-python"]["version"] + "+cu130" == "0.6.5+cu130"
        refused = [r.getMessage() for r in caplog.records if "path traversal refused" in r.getMessage()]
        # said once per page that has such links (the torch page's two in one line, with a count)
        assert sorted(m.split(": ", 1)[0].rsplit("/", 2)[-2] for m in refused) == ["flashinfer-jit-cache", "numpy", "torch"], refused
        assert any("/torch/" in m and "1 more" in m for m in refused), refused
        asked = [p for _, p, _ in run.srv.log]
        assert not [p for p in asked if "evil" in p or "%2F" in p.split("/")[-1] or "%2f" in p.split("/")[-1]]
        # the %2e%2e URL of a good file name was followed (same host) and its METADATA recorded
        assert plan["numpy"]["version"] == "2.4.0" and "%2e%2e" in plan["numpy"]["url"]
        created = _files_under(tmp_path) - before
        outside = [p for p in created if snap not in p.parents and run.cache not in p.parents]
        assert outside == []
        assert any(NEWEST_NUMPY in p.name for p in created if snap in p.parents)
        for entry in json.loads((snap / "manifest.json").read_text())["metadata"].values():
            assert (snap / entry["file"]).resolve().is_relative_to(snap.resolve())
        # and the snapshot replays to the same plan
        replay = [
            "resolve",
            *TARGET,
            "--snapshot",
            str(snap),
            "--index",
            f"pytorch={run.srv.url}whl/",
            "--index",
            f"flashinfer={run.srv.url}fi/",
            "--format",
            "json",
        ]
        rc, again, err = run_cli(capsys, *replay)
        assert rc == 0, err
        versions = lambda text: {p["name"]: p["version"] for p in json.loads(text)["packages"]}  # noqa: E731
        assert versions(again) == versions(out)


@settings(max_examples=200, deadline=None)
@given(path=st.lists(st.sampled_from(["..", ".", "", "%2e%2e", "%2E%2e%2f", "..%2f", "a", "%00", "\\..", "~", "/"]), max_size=8).map("/".join))
def test_snapshot_storage_path_never_leaves_the_snapshot(path: str) -> None:
    bases = {"pytorch": "https://idx.example/whl/", "pypi": "https://pypi.example/simple/"}
    for url in (f"https://idx.example/whl/{path}", f"https://pypi.example/simple/{path}", f"https://other.example/{path}"):
        for kind in ("pages", "metadata"):
            rel = _storage_path(kind, snapshot_key(url, bases))
            root = Path("/snap")
            full = (root / rel).resolve()
            assert full.is_relative_to(root) and full != root, (url, rel)


@settings(max_examples=200, deadline=None)
@given(name=st.text(alphabet=st.sampled_from(list("./\\%2eEfa-_\x00")), max_size=12))
def test_wheel_cache_file_names_are_never_paths(name: str) -> None:
    try:
        got = wheel_filename(f"https://idx.example/x/{quote(name)}")
    except CrawlError:
        return
    cache = WheelCache(Path("/cache"))
    path = cache.path_for("ab" * 32, got)
    assert path.parent == Path("/cache/sha256/ab") / ("ab" * 32) and path.name == got


# -- wheels that lie about themselves --------------------------------------------------------------


@pytest.mark.parametrize("says", ["Name: evil-numpy\nVersion: 2.2.0", "Name: numpy\nVersion: 2.2.1"], ids=["other-project", "other-version"])
def test_range_read_metadata_naming_another_project_or_version_is_refused(tmp_path: Path, capsys, says: str) -> None:
    with story_run(tmp_path) as run:
        name = PATHS.range.rsplit("/", 1)[1]
        replace_pypi_wheel(run.world, name, wheel_with_metadata(name, f"Metadata-Version: 2.1\n{says}\n".encode()))
        run.world.write(run.srv.url)
        rc, out, err = run.lock(capsys)
        assert rc == 3 and out == "", err
        said = says.replace("Name: ", "").replace("\nVersion: ", " ")
        assert f"{name}: METADATA says {said} but the filename says numpy 2.2.0" in err
        assert "hint: the index serves a mislabelled wheel; it is not used" in err
        assert not run.lock_path.exists() and run.cache_problems() == []


def test_sidecar_naming_another_project_is_refused(tmp_path: Path, capsys) -> None:
    """The PEP 658 sidecar matches its digest on the page, but names another project."""
    with story_run(tmp_path) as run:
        for entry in run.world.pages["whl/nightly/cu130/torch/"]:
            if entry.wheel.filename.endswith(PATHS.metadata.rsplit("/", 1)[1].removesuffix(".metadata")):
                import dataclasses

                meta = entry.wheel.metadata.replace(b"Name: torch", b"Name: torch-evil")
                (run.world.root / (entry.rel_path + ".metadata")).write_bytes(meta)
                run.world.pages["whl/nightly/cu130/torch/"][run.world.pages["whl/nightly/cu130/torch/"].index(entry)] = dataclasses.replace(
                    entry, wheel=dataclasses.replace(entry.wheel, metadata=meta)
                )
        run.world.write(run.srv.url)
        rc, out, err = run.lock(capsys)
        assert rc == 3 and out == "", err
        assert "METADATA says torch-evil 2.12.0.dev20260307+cu130 but the filename says torch 2.12.0.dev20260307+cu130" in err
        assert not run.lock_path.exists() and run.cache_problems() == []


@pytest.mark.parametrize(
    ("size", "words"),
    [
        (20 * 2**20, ("refusing METADATA", "over")),  # declared in the zip's directory: refused before reading it
        (6_000_000, ("refusing METADATA", "over the 5242880-byte cap")),  # one cap (5 MiB) for fetching and parsing
    ],
    ids=["far-over-the-cap", "just-over-the-cap"],
)
def test_enormous_metadata_is_refused(tmp_path: Path, capsys, size: int, words: tuple[str, ...]) -> None:
    with story_run(tmp_path, build=lambda w: w.pypi("numpy", "2.4.0")) as run:
        base = b"Metadata-Version: 2.1\nName: numpy\nVersion: 2.4.0\nSummary: "
        meta = base + b"x" * (size - len(base) - 2) + b"\n\n"
        replace_pypi_wheel(run.world, NEWEST_NUMPY, wheel_with_metadata(NEWEST_NUMPY, meta))
        run.world.write(run.srv.url)
        rc, out, err = run.lock(capsys)
        assert rc == 3 and out == "", err
        assert NEWEST_NUMPY in err
        for word in words:
            assert word in err
        assert not run.lock_path.exists() and run.cache_problems() == []
        wheel_bytes = (run.world.root / "files" / NEWEST_NUMPY).stat().st_size
        asked = [h for _, p, h in run.srv.log if p.endswith(NEWEST_NUMPY)]
        assert asked and all("Range" in h for h in asked)  # only range reads, never the whole wheel
        assert wheel_bytes < size // 100  # the zip is small: the caps judge the uncompressed size


# -- plain http ----------------------------------------------------------------------------------


@pytest.fixture
def mirror_host(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``mirror.example`` resolves to 127.0.0.1 (a non-loopback-looking name); every lookup is logged."""
    real = socket.getaddrinfo
    looked_up: list[str] = []

    def fake(host, *args, **kwargs):
        host = host.decode("ascii") if isinstance(host, bytes) else host  # an ASCII name is asked as bytes
        looked_up.append(str(host))
        if host == "mirror.example":
            host = "127.0.0.1"
        elif host not in ("127.0.0.1", "localhost", "::1"):
            raise socket.gaierror(f"no network in tests ({host})")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    return looked_up


def test_plain_http_to_a_non_loopback_host_is_refused_before_any_connection(tmp_path: Path, capsys, mirror_host: list[str], monkeypatch) -> None:
    with story_run(tmp_path) as run:
        port = run.srv.url.rsplit(":", 1)[1].rstrip("/")
        pypi = f"http://mirror.example:{port}/simple/"
        argv = [a if not a.startswith("pypi=") else f"pypi={pypi}" for a in run.argv("lock")]
        rc, out, err = run_cli(capsys, *argv)
        assert rc == 3 and out == "", err
        assert f"error: {pypi}" in err and "plain http is refused (no TLS)" in err
        assert "hint: use https, or pass --allow-insecure-host mirror.example" in err
        assert "mirror.example" not in mirror_host, "refused before any name lookup or connection"
        assert not [p for _, p, _ in run.srv.log if p.startswith("/simple/")]
        assert not run.lock_path.exists()

        # the same URL from the environment (uv's / pip's configuration) is refused the same way
        monkeypatch.setenv("UV_INDEX_URL", pypi)
        rc, _, err = run_cli(capsys, "resolve", *TARGET, *index_flags(run.srv.url)[:4], "--cache-dir", str(run.cache))
        assert rc == 3 and f"error: {pypi}" in err and "--allow-insecure-host mirror.example" in err
        assert "mirror.example" not in mirror_host

        # allowed by name: it works, over the same loopback server
        rc, _, err = run_cli(capsys, *argv, "--allow-insecure-host", "mirror.example")
        assert rc == 0, err
        assert "mirror.example" in mirror_host
        assert run.gets("/simple/numpy/")
