"""Range reads in a second process (net/scan/rangeproc.py): a real child process reading real wheels
from a loopback server answers the same scans and exports as this process would, with its
requests counted, its logs and notes passed on and the index's credentials carried; a child that
cannot start, or dies, or is sent Ctrl-C leaves nothing wrong: its reads are made here."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name
from packaging.version import Version
from support.elfbuild import compile_extension, have_cc, have_cxx, torch_stubs, wheel_bytes
from support.framework_world import build_framework_world
from support.hostile_inputs import hostile_folder
from support.server import IndexServer

from resolve_gpu_stack.data.definitions import load_definitions
from resolve_gpu_stack.model import IndexFile
from resolve_gpu_stack.net.http import HttpFetcher
from resolve_gpu_stack.net.scan import readers
from resolve_gpu_stack.net.scan.classify import RangeClassifier
from resolve_gpu_stack.net.scan.exports import WheelExports
from resolve_gpu_stack.net.settings import FetchSettings, TransportSettings
from resolve_gpu_stack.scan.elf.symbols import dynamic_symbols

pytestmark = pytest.mark.skipif(not have_cc(), reason="needs a C compiler to build the ELF objects")

DEFS = load_definitions()
READY = 60.0  # seconds a child may take to start on a loaded machine


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory):
    return build_framework_world(tmp_path_factory.mktemp("rangeproc"))


@pytest.fixture
def server(world):
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        yield srv


def wheel_file(world, srv: IndexServer, name: str, *, base: str | None = None) -> IndexFile:
    entry = next(e for e in world.pages[f"simple/{name}/"])
    w = entry.wheel
    return IndexFile(
        filename=w.filename,
        url=(base or srv.url) + entry.rel_path,
        name=canonicalize_name(name),
        version=Version(w.filename.split("-")[1]),
        sha256=w.sha256,
        size=w.size,
        index="pypi",
    )


def here(file: IndexFile) -> object:
    """The scan made in this process, by a fetcher with no second process."""
    with HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10), range_process=False), cache=None) as fetcher:
        assert fetcher.range_process is None
        return readers.classifier(fetcher.scan_access(), DEFS.abi)(file)


def test_a_scan_in_the_second_process_answers_what_this_one_would(world, server, caplog):
    caplog.set_level(logging.DEBUG, logger="resolve_gpu_stack")
    said: list[str] = []
    kernel, helper = wheel_file(world, server, "sgl-kernel"), wheel_file(world, server, "cuda-helper")
    with HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None, progress=said.append) as fetcher:
        child = fetcher.range_process
        assert child is not None and child.start(wait=READY), "the second process did not get ready"
        classify = readers.classifier(fetcher.scan_access(), DEFS.abi)
        found, found_helper = classify(kernel), classify(helper)
        assert child.answered == 2, "the scans were not made in the second process"
        assert child.pid is not None and child.pid != os.getpid()
        # what the child's transport sent is counted here: the server saw it, this transport did not send it
        kernel_path = kernel.url.removeprefix(server.url.rstrip("/"))
        helper_path = helper.url.removeprefix(server.url.rstrip("/"))
        assert fetcher.stats.requests == len(server.requests_for(kernel_path)) + len(server.requests_for(helper_path)) > 0
        assert fetcher.stats.bytes_received > 0
    assert found == here(kernel) and found.kind == "torch" and found.cxx
    assert found_helper == here(helper) and found_helper.kind == "cuda"
    # the child's log records are logged here, under their own loggers
    child_logs = [r for r in caplog.records if r.name == "resolve_gpu_stack.net.transport" and kernel.filename in r.getMessage()]
    assert child_logs, "the second process's log records did not come back"


def test_a_scan_over_an_index_with_credentials_carries_them_to_the_second_process(world, server):
    server.auth = ("alice", "s3cret")
    host = server.url.split("://", 1)[1]
    kernel = wheel_file(world, server, "sgl-kernel")
    with HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None) as fetcher:
        fetcher.credentials.remember(f"http://alice:s3cret@{host}simple/")  # as an index URL with user:token@ is
        child = fetcher.range_process
        assert child is not None and child.start(wait=READY)
        found = readers.classifier(fetcher.scan_access(), DEFS.abi)(kernel)
        assert child.answered == 1
    assert found.kind == "torch" and found.cxx, found.why
    statuses = [status for _, status, _ in server.requests_for(kernel.url.removeprefix(server.url.rstrip("/")))]
    assert statuses and "401" not in statuses


def test_the_second_process_reads_with_this_fetchers_own_settings(world, server):
    """The fetcher's frozen ``TransportSettings`` reach the child as that value: its requests go out
    as this process's would (here: the user agent), with no dict in between."""
    kernel = wheel_file(world, server, "sgl-kernel")
    settings = FetchSettings(transport=TransportSettings(timeout=10, user_agent="house-test/1", max_connections=2))
    with HttpFetcher(settings, cache=None) as fetcher:
        child = fetcher.range_process
        assert child is not None and child.start(wait=READY)
        found = readers.classifier(fetcher.scan_access(), DEFS.abi)(kernel)
        assert child.answered == 1, "the scan was not made in the second process"
    assert found.kind == "torch", found.why
    path = kernel.url.removeprefix(server.url.rstrip("/"))
    agents = {headers.get("User-Agent") for _, seen, headers in server.log if seen == path}
    assert agents == {"house-test/1"}


def test_a_child_that_dies_leaves_its_scans_to_this_process(world, server):
    kernel, helper = wheel_file(world, server, "sgl-kernel"), wheel_file(world, server, "cuda-helper")
    with HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None) as fetcher:
        child = fetcher.range_process
        assert child is not None and child.start(wait=READY)
        classify = readers.classifier(fetcher.scan_access(), DEFS.abi)
        assert classify(helper) == here(helper) and child.answered == 1
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
        # the scan sent before the death is seen and every later one: read here, with the same answers
        assert classify(kernel) == here(kernel)
        assert classify(helper) == here(helper)
        assert child.answered == 1
        assert not child.start(wait=0.1), "a dead child is not started again"


def test_ctrl_c_sent_to_the_whole_group_does_not_end_the_child(world, server):
    kernel = wheel_file(world, server, "sgl-kernel")
    with HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None) as fetcher:
        child = fetcher.range_process
        assert child is not None and child.start(wait=READY) and child.pid is not None
        os.kill(child.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends it
        time.sleep(0.2)
        assert readers.classifier(fetcher.scan_access(), DEFS.abi)(kernel) == here(kernel)
        assert child.answered == 1, "the child ended on SIGINT: this process decides"
        pid = child.pid
    with pytest.raises(ProcessLookupError):  # closed with its fetcher: gone, no zombie left to signal
        for _ in range(50):
            os.kill(pid, 0)
            time.sleep(0.1)


def test_a_child_that_cannot_start_leaves_every_scan_here(world, server, monkeypatch):
    kernel = wheel_file(world, server, "sgl-kernel")
    monkeypatch.setattr(sys, "executable", "/nonexistent/python3")
    with HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None) as fetcher:
        child = fetcher.range_process
        assert child is not None and not child.start(wait=1.0)
        monkeypatch.undo()
        assert readers.classifier(fetcher.scan_access(), DEFS.abi)(kernel) == here(kernel)
        assert child.answered == 0


@pytest.mark.skipif(not have_cxx(), reason="needs a C++ compiler to build the shared objects")
def test_torch_exports_read_in_the_second_process_are_the_librarys_own(tmp_path, caplog):
    lib = compile_extension(tmp_path, "lib.so", torch_stubs(tmp_path / "libs"), calls=("cxx_check", "shim_device"))
    wheel = tmp_path / "torch-2.15.0-cp312-cp312-linux_x86_64.whl"
    wheel.write_bytes(wheel_bytes({"torch/lib/libtorch_cpu.so": lib, "torch/__init__.py": b""}))
    with IndexServer(tmp_path) as srv:
        file = IndexFile(filename=wheel.name, url=srv.url + wheel.name, name=canonicalize_name("torch"), version=Version("2.15.0"), size=wheel.stat().st_size)
        with (
            HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None) as fetcher,
            caplog.at_level(logging.INFO, logger="resolve_gpu_stack.net.scan.exports"),
        ):
            child = fetcher.range_process
            assert child is not None and child.start(wait=READY)
            found = readers.exports_reader(fetcher.scan_access())("2.15.0", file)
            assert child.answered == 1
        with HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10), range_process=False), cache=None) as fetcher:
            alone = WheelExports(fetcher.transport, None)("2.15.0", file)
    assert found.symbols is not None and found.symbols == frozenset(dynamic_symbols(lib, exports=True).exports) == alone.symbols
    assert "bytes read" in found.source
    # the child's record comes back as it was made, its arguments with it (as -v and a handler read it)
    made = [r for r in caplog.records if r.name == "resolve_gpu_stack.net.scan.exports" and "bytes read" in r.msg]
    assert made and made[0].args[0] == wheel.name and made[0].args[1] == len(found.symbols), [r.getMessage() for r in caplog.records]


@pytest.mark.skipif(not have_cxx(), reason="needs a C++ compiler to build the shared objects")
def test_torch_exports_asked_before_the_child_is_started_wait_for_it_and_are_read_there(tmp_path, monkeypatch):
    """Scan records answer every scan of a resolve and none holds the kept torch's exports (a
    nightly's, a private build's): they are the first read it asks for, and the child is not
    started yet. They wait for it (its start is
    short beside their read) instead of taking this process's CPU; a child that ends before it is
    ready leaves them here at once (not after the wait), with the same answer."""
    from resolve_gpu_stack.net.scan import rangeproc

    lib = compile_extension(tmp_path, "lib.so", torch_stubs(tmp_path / "libs"), calls=("cxx_check", "shim_device"))
    wheel = tmp_path / "torch-2.15.0-cp312-cp312-linux_x86_64.whl"
    wheel.write_bytes(wheel_bytes({"torch/lib/libtorch_cpu.so": lib, "torch/__init__.py": b""}))
    monkeypatch.setattr(rangeproc, "START_AFTER", 1)  # the wheel is as large as a real torch's, for the child's rule
    with IndexServer(tmp_path) as srv:
        file = IndexFile(filename=wheel.name, url=srv.url + wheel.name, name=canonicalize_name("torch"), version=Version("2.15.0"), size=wheel.stat().st_size)
        with HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None) as fetcher:
            child = fetcher.range_process
            assert child is not None and child.pid is None
            found = readers.exports_reader(fetcher.scan_access())("2.15.0", file)
            assert child.pid is not None and child.answered == 1, "the exports were read here"
        monkeypatch.setattr(sys, "executable", shutil.which("false") or "/bin/false")  # starts, and ends before it is ready
        monkeypatch.setattr(rangeproc, "EXPORTS_WAIT", 3600.0)  # waited out, this test would not end
        with HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None) as fetcher:
            here_found = readers.exports_reader(fetcher.scan_access())("2.15.0", file)
            assert fetcher.range_process is not None and fetcher.range_process.pid is not None and fetcher.range_process.answered == 0
    assert found.symbols is not None and found.symbols == here_found.symbols == frozenset(dynamic_symbols(lib, exports=True).exports)


def test_a_classifier_made_without_a_second_process_scans_here(world, server):
    kernel = wheel_file(world, server, "sgl-kernel")
    with HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None) as fetcher:
        assert RangeClassifier(fetcher.transport, None, DEFS.abi)(kernel) == here(kernel)
        assert fetcher.range_process is not None and fetcher.range_process.pid is None, "a classifier not given it started it"


def test_answers_that_come_in_another_order_count_what_the_child_counted() -> None:
    """Two scans end in the child at once: the later snapshot of its counts may reach this process
    first. What is counted here is the child's own total, never less."""
    from resolve_gpu_stack.net.scan.rangeproc import ChildSettings, RangeProcess
    from resolve_gpu_stack.net.transport import FetchStats
    from resolve_gpu_stack.net.urlpolicy import Credentials

    stats = FetchStats()
    child = RangeProcess(
        ChildSettings(fetch=FetchSettings(transport=TransportSettings(max_connections=1), scan_budget=1), log_level=logging.INFO),
        credentials=Credentials(None),
        stats=stats,
    )
    for counts in ({"requests": 3, "bytes_received": 900}, {"requests": 5, "bytes_received": 1500}, {"requests": 4, "bytes_received": 1200}):
        child._take(("done", 0, None, {**counts, "retries": 0, "full_downloads": 0}))  # the pipe's handler, as the listener calls it
    assert (stats.requests, stats.bytes_received) == (5, 1500)


def test_the_child_starts_only_once_the_wheels_asked_to_read_are_large_enough(world, server, monkeypatch):
    """A plan of small wheels reads them here, sooner than a child would start; once the wheels
    asked to read reach ``START_AFTER`` bytes, the child is started (and the reads asked before it
    is ready are still made here, with the same answers)."""
    from resolve_gpu_stack.net.scan import rangeproc

    kernel, helper = wheel_file(world, server, "sgl-kernel"), wheel_file(world, server, "cuda-helper")
    assert (kernel.size or 0) + (helper.size or 0) < rangeproc.START_AFTER
    with HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None) as fetcher:
        classify = readers.classifier(fetcher.scan_access(), DEFS.abi)
        assert classify(kernel) == here(kernel) and classify(helper) == here(helper)
        assert fetcher.range_process is not None and fetcher.range_process.pid is None, "small wheels started the child"
    monkeypatch.setattr(rangeproc, "START_AFTER", (kernel.size or 0) + 1)
    with HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None) as fetcher:
        classify = readers.classifier(fetcher.scan_access(), DEFS.abi)
        assert classify(kernel) == here(kernel) and fetcher.range_process is not None and fetcher.range_process.pid is None
        assert classify(helper) == here(helper) and fetcher.range_process.pid is not None, "the child did not start"


def test_a_large_wheels_scan_asked_before_the_child_is_ready_waits_for_it_and_is_read_there(world, server, monkeypatch):
    """A wheel of ``START_AFTER`` bytes or more (sglang's, 39 MB) is the one whose scan starts the
    child: its scan waits for the child (read here, it took 1.7 s beside the crawl) and is made
    there, with the answer this process gives; a child that ends before it is ready leaves it here
    at once (not after the wait), with the same answer. (A smaller wheel's scan waits for none:
    ``test_the_child_starts_only_once_the_wheels_asked_to_read_are_large_enough``.)"""
    from resolve_gpu_stack.net.scan import rangeproc

    kernel = wheel_file(world, server, "sgl-kernel")
    monkeypatch.setattr(rangeproc, "START_AFTER", kernel.size or 0)  # the kernel is as large as sglang's wheel, for the rule
    with HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None) as fetcher:
        child = fetcher.range_process
        assert child is not None and child.pid is None
        classify = readers.classifier(fetcher.scan_access(), DEFS.abi)
        assert classify(kernel) == here(kernel)
        assert child.pid is not None and child.answered == 1, "the large wheel was scanned here"
    monkeypatch.setattr(sys, "executable", shutil.which("false") or "/bin/false")  # starts, and ends before it is ready
    monkeypatch.setattr(rangeproc, "EXPORTS_WAIT", 3600.0)  # waited out, this test would not end
    with HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None) as fetcher:
        assert readers.classifier(fetcher.scan_access(), DEFS.abi)(kernel) == here(kernel)
        assert fetcher.range_process is not None and fetcher.range_process.pid is not None and fetcher.range_process.answered == 0


def test_the_child_never_imports_from_the_current_folder_or_pythonpath(world, server, tmp_path, monkeypatch):
    """Started from a folder holding ``queue.py``, ``selectors.py`` and other stdlib names, with
    PYTHONPATH naming it too: the child starts isolated, is ready, answers scans, and none of them ran."""
    ran = hostile_folder(tmp_path / "clone")
    monkeypatch.chdir(tmp_path / "clone")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "clone"))
    kernel = wheel_file(world, server, "sgl-kernel")
    with HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None) as fetcher:
        assert fetcher.range_process is not None
        ready = fetcher.range_process.start(wait=READY)
        assert sorted(p.name for p in ran.iterdir()) == []
        assert ready, "the child did not start"
        assert readers.classifier(fetcher.scan_access(), DEFS.abi)(kernel) == here(kernel)
        assert fetcher.range_process.answered >= 1
    assert sorted(p.name for p in ran.iterdir()) == []


def test_a_resolve_that_starts_the_child_runs_nothing_from_the_current_folder(world, server, tmp_path, monkeypatch, capsys):
    """A real resolve through the CLI (the child started at its first wheel: ``START_AFTER`` 0),
    run in a folder with stdlib-shadowing files: the plan is made, the child was started (isolated,
    from the package's folder) and answered, nothing of the folder ran."""
    from support.doors import index_flags

    from resolve_gpu_stack.cli import app as cli
    from resolve_gpu_stack.net import process
    from resolve_gpu_stack.net.scan import rangeproc

    ran = hostile_folder(tmp_path / "clone")
    monkeypatch.chdir(tmp_path / "clone")
    monkeypatch.setattr(rangeproc, "START_AFTER", 0)
    started: list[list[str]] = []
    real_start = process.start

    def watched(argv, **kw):  # type: ignore[no-untyped-def]
        started.append(list(argv))
        return real_start(argv, **kw)

    monkeypatch.setattr(rangeproc.process, "start", watched)
    argv = ["resolve", "--python", "3.12", "--platform", "x86_64-manylinux_2_28", "--installed", "torch==2.12.0.dev20260307+cu130"]
    rc = cli.main([*argv, *index_flags(server.url), "--flashinfer", "none", "--with", "cuda-helper", "--cache-dir", str(tmp_path / "cache")])
    out, err = capsys.readouterr()
    assert sorted(p.name for p in ran.iterdir()) == []
    assert rc == 0, err
    assert "cuda-helper" in out
    [child] = [a for a in started if "-c" in a and any(rangeproc.CHILD in w for w in a)]
    assert child[1] == "-I" and str(tmp_path / "clone") not in child
    assert sorted(p.name for p in ran.iterdir()) == []


def test_the_console_script_runs_nothing_from_the_current_folder(world, server, tmp_path):
    """``resolve-gpu-stack`` (the console script) run from a folder with stdlib-shadowing files."""
    import subprocess

    from support.doors import index_flags

    ran = hostile_folder(tmp_path / "clone")
    tool = Path(sys.executable).with_name("resolve-gpu-stack")
    argv = ["resolve", "--python", "3.12", "--platform", "x86_64-manylinux_2_28", "--installed", "torch==2.12.0.dev20260307+cu130"]
    for args in (["--help"], [*argv, *index_flags(server.url), "--flashinfer", "none", "--with", "cuda-helper", "--cache-dir", str(tmp_path / "cache")]):
        proc = subprocess.run([str(tool), *args], cwd=tmp_path / "clone", capture_output=True, text=True, timeout=300, check=False)
        assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in ran.iterdir()) == []


def test_the_isolated_child_keeps_the_bytecode_folder_this_process_keeps(server, tmp_path, monkeypatch):
    """``-I`` ignores ``PYTHONPYCACHEPREFIX``: the folder this process keeps its bytecode in
    (``__main__.keep_bytecode``) reaches the child as ``-X pycache_prefix``, and the child's
    modules are compiled there; where this process writes none, the child is started with ``-B``."""
    from resolve_gpu_stack.net.scan import rangeproc

    kept = tmp_path / "bytecode"
    monkeypatch.setattr(sys, "pycache_prefix", str(kept))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    argv = rangeproc.child_command(str(tmp_path))
    assert argv[1:4] == ["-I", "-X", f"pycache_prefix={kept}"] and str(tmp_path) not in argv
    with HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None) as fetcher:
        assert fetcher.range_process is not None and fetcher.range_process.start(wait=READY)
    assert list(kept.rglob("rangechild.*.pyc")), "the child compiled nothing into the kept folder"
    monkeypatch.setattr(sys, "pycache_prefix", None)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert rangeproc.child_command(str(tmp_path))[1:3] == ["-I", "-B"]
