"""Native wheels' scans start while the closure is crawled (issue 11 item 7), and the framework
step collects them instead of scanning again; the plan is the same as with scans after resolution."""

from __future__ import annotations

import json
import threading

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version
from support.elfbuild import have_cc
from support.framework_world import FileClassifier, build_framework_world
from support.stack_world import serve

from resolve_gpu_stack.model import IndexFile
from resolve_gpu_stack.model.abi import WheelAbi
from resolve_gpu_stack.model.declared import declared_target
from resolve_gpu_stack.model.request import ResolveRequest
from resolve_gpu_stack.net.scan import readers
from resolve_gpu_stack.resolver import framework
from resolve_gpu_stack.resolver.coupling import ScanAhead, classify_all
from resolve_gpu_stack.resolver.requirement import Cand, Req
from resolve_gpu_stack.resolver.resolve import resolve

pytestmark = pytest.mark.skipif(not have_cc(), reason="needs a C compiler to build the ELF objects")

TARGET = declared_target("3.12", "x86_64-manylinux_2_28", ["torch==2.12.0.dev20260307+cu130"])


class ThreadNoting(FileClassifier):
    def __init__(self, root) -> None:  # type: ignore[no-untyped-def]
        super().__init__(root)
        self.threads: list[str] = []

    def __call__(self, file: IndexFile) -> WheelAbi:
        self.threads.append(threading.current_thread().name)
        return super().__call__(file)


def test_scans_start_during_the_crawl_and_are_collected_once(tmp_path, monkeypatch):
    world = build_framework_world(tmp_path / "fw")
    seen_at_collect: list[int] = []
    original = framework.classify_all

    def collect(files, classifier):  # type: ignore[no-untyped-def]
        seen_at_collect.append(classifier.started)  # the ScanAhead resolve wrapped the classifier in
        return original(files, classifier)

    monkeypatch.setattr(framework, "classify_all", collect)
    noting = ThreadNoting(world.root)
    with serve(world) as (_, defs, finder):
        plan = resolve(
            ResolveRequest.build(target=TARGET, with_=("sglang",), without=("sgl-kernel",)),
            finder,
            defs,
            classifier=noting,
            exports=readers.exports_reader(finder.fetcher.scan_access()),
        )
    assert seen_at_collect and seen_at_collect[0] >= 1  # cuda-helper's scan began before the plan was known
    assert any(t.startswith("scan-ahead") for t in noting.threads)
    assert len(noting.asked) == len(set(noting.asked))  # never scanned twice
    assert any(a.startswith("cuda_helper-") for a in noting.asked)
    helper = plan.package("cuda-helper")
    assert "libcudart.so.13" in helper.reason


def test_scan_ahead_answers_a_started_scan_and_scans_the_rest_when_asked():
    calls: list[str] = []
    gate = threading.Event()

    def classifier(file: IndexFile) -> WheelAbi:
        calls.append(file.filename)
        if file.filename.startswith("early"):
            gate.wait(5)
        return WheelAbi(kind="unknown", why=file.filename)

    def wheel(name: str) -> IndexFile:
        fn = f"{name}-1.0-cp312-cp312-linux_x86_64.whl"
        return IndexFile(filename=fn, url=f"http://x/{fn}", name=canonicalize_name(name), version=Version("1.0"))

    with ScanAhead(classifier) as ahead:
        ahead.start(wheel("early"))
        ahead.start(wheel("early"))  # once per URL
        gate.set()
        got = classify_all([wheel("early"), wheel("late")], ahead)
        assert ahead.started == 1
    assert sorted(calls) == sorted(["early-1.0-cp312-cp312-linux_x86_64.whl", "late-1.0-cp312-cp312-linux_x86_64.whl"])
    assert {c.why for c in got.values()} == {"early-1.0-cp312-cp312-linux_x86_64.whl", "late-1.0-cp312-cp312-linux_x86_64.whl"}
    ahead.start(wheel("after"))  # closed: nothing more starts
    assert ahead.started == 1


def test_the_scans_collected_after_resolution_run_on_the_scan_ahead_pool():
    """One pool scans (README, concurrency): the wheels ``couplings`` still asks about once the plan
    is known start on the resolve's ``ScanAhead`` pool, not on a pool of their own."""
    threads: dict[str, str] = {}

    def classifier(file: IndexFile) -> WheelAbi:
        threads[file.filename] = threading.current_thread().name
        return WheelAbi(kind="unknown", why=file.filename)

    files = [
        IndexFile(filename=f"p{i}-1.0-cp312-cp312-linux_x86_64.whl", url=f"http://x/p{i}.whl", name=canonicalize_name(f"p{i}"), version=Version("1.0"))
        for i in range(4)
    ]
    with ScanAhead(classifier) as ahead:
        ahead.start(files[0])
        got = classify_all([*files, files[1]], ahead)
    assert sorted(got) == sorted(f.url for f in files)
    assert len(threads) == 4 and all(name.startswith("scan-ahead") for name in threads.values())
    with ScanAhead(classifier) as closed:
        pass
    assert classify_all(files[:1], closed)[files[0].url].why == files[0].filename  # closed: scanned on the calling thread


def test_the_first_scan_whose_verdict_reads_torchs_exports_starts_the_follow_up_once() -> None:
    """``follow``: the first wheel whose verdict against the kept torch would read its exports (a
    version-locked wheel: C++ imports of torch, no stable-ABI floor deciding first) starts the job
    (the exports' read) on a thread of its own, once however many such wheels there are; a stable-ABI
    wheel, a per-CUDA-major twin of another major and a pure wheel start nothing."""
    from resolve_gpu_stack.data.definitions import load_definitions
    from resolve_gpu_stack.model.abi import MemberAbi
    from resolve_gpu_stack.rules.abi import AbiPolicy, AbiTorch, asks_for_exports

    policy = AbiPolicy.of(load_definitions().abi)
    torch = AbiTorch(version=Version("2.15.0"), cuda_major=13)
    locked = WheelAbi(kind="torch", why="links libtorch", members=(MemberAbi(name="k.so", torch_libs=("libtorch.so",), cxx=("_ZN3c104warnEv",)),))
    stable = WheelAbi(kind="torch", why="stable ABI", members=(MemberAbi(name="s.so", torch_libs=("libtorch.so",), shim=3),))
    refused = WheelAbi(kind="torch", why="CUDA 12", members=(MemberAbi(name="r.so", torch_libs=("libtorch.so",), cuda_majors=(12,), cxx=("_ZN3c104warnEv",)),))
    answers = {"k": locked, "s": stable, "r": refused, "n": WheelAbi(kind="none", why="pure")}
    ran: list[str] = []
    files = [
        IndexFile(
            filename=f"{n}-1.0-cp312-cp312-linux_x86_64.whl",
            url=f"https://x.example/{n}.whl",
            name=canonicalize_name(n),
            version=Version("1.0"),
            tags=frozenset(),
            is_wheel=True,
            index="pypi",
        )
        for n in ("n", "s", "r", "k1", "k2", "k3")
    ]
    with ScanAhead(lambda f: answers[f.filename[0]]) as ahead:
        ahead.follow(lambda f, abi: (lambda: ran.append("exports")) if asks_for_exports(f.name, f.version, abi, torch, policy) else None)
        for f in files:
            ahead.start(f)
        ahead.scan_all(files)  # (what the framework step does; close then waits for the follow-up)
    assert ran == ["exports"]
    assert [asks_for_exports(n, None, a, torch, policy) for n, a in answers.items()] == [True, False, False, False]


def test_the_follow_up_starts_at_once_while_the_scans_queue() -> None:
    """The exports' read is what a plan waits for last: it never waits behind scans queued on a
    busy pool (here one thread, held by a slow scan)."""
    import threading

    release, ran = threading.Event(), threading.Event()
    locked = WheelAbi(kind="torch", why="links libtorch")

    def classify(f: IndexFile) -> WheelAbi:
        if f.filename.startswith("slow"):
            release.wait(10)
        return locked if f.filename.startswith("k") else WheelAbi(kind="none", why="pure")

    files = [
        IndexFile(
            filename=f"{n}-1.0-cp312-cp312-linux_x86_64.whl", url=f"https://x.example/{n}.whl", name=canonicalize_name(n), version=Version("1.0"), index="pypi"
        )
        for n in ("k", "slow1", "slow2")
    ]
    with ScanAhead(classify, threads=1) as ahead:
        ahead.follow(lambda f, abi: ran.set if abi is locked else None)
        for f in files:
            ahead.start(f)
        try:
            assert ran.wait(5), "the follow-up waited behind the queued scans"
        finally:
            release.set()


@pytest.fixture(scope="module")
def ruled_out(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The abi world with ``app`` (``ext-x<2`` and ``app-part``) and ``app-part`` (``ext-x``):
    ext-x 2.0, the newest, is what ``app-part`` alone would take, and ``app``'s ``<2`` rules it out
    before the crawl meets it; ext-x 2.0 pins ext-y 2.0, 1.0 pins 1.0. Each ext wheel holds an object
    needing neither torch nor CUDA at its start, then 256 KB of random bytes, then its METADATA: a scan reads from the
    start, METADATA's read from the end."""
    from support.abi_world import build_abi_world, have_cxx
    from support.server import IndexServer
    from support.wheels import build_wheel
    from support.world import _Entry

    if not have_cxx():
        pytest.skip("needs a C++ compiler to build the shared objects")
    root = tmp_path_factory.mktemp("ruled-out")
    world, objects = build_abi_world(root)
    for name, pins in (("ext-x", "ext-y=={v}"), ("ext-y", None)):
        for v in ("1.0", "2.0"):
            dist = name.replace("-", "_")
            files = {f"{dist}/_helper.so": objects["libc10.so"], f"{dist}/__init__.py": b""}
            wheel = build_wheel(
                world.root / "files", name, v, "cp312-cp312-manylinux_2_28_x86_64", [pins.format(v=v)] if pins else [], files=files, padding=256 * 2**10
            )
            world._add(f"simple/{name}/", "pypi", _Entry(wheel, "files/" + wheel.filename, sidecar=False, upload_time="2026-01-01T00:00:00Z"))
    world.pypi("app", "1.0", requires=["ext-x<2", "app-part"])
    world.pypi("app-part", "1.0", requires=["ext-x"])
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        yield world, srv


@pytest.mark.parametrize("door", ["resolve", "lock"])
def test_a_release_a_requirement_met_before_rules_out_is_not_scanned_ahead(ruled_out, capsys, tmp_path, door) -> None:
    """The crawl follows each requirement's best release (ext-x 2.0 for ``app-part``'s ``ext-x``),
    but a release a requirement met so far rules out (``app``'s ``ext-x<2``), and what it alone
    leads to (ext-y 2.0), are not scanned ahead: no byte of their objects is read. The plan keeps
    ext-x 1.0 and ext-y 1.0, scanned (their objects read, their verdict told)."""
    from support.abi_doors import DECLARED
    from support.doors import index_flags, run_cli

    world, srv = ruled_out
    srv.log.clear()
    argv = ["lock", "-o", str(tmp_path / "pylock.toml")] if door == "lock" else ["resolve", "--format", "json"]
    code, out, err = run_cli(capsys, *argv, *DECLARED, "--with", "app", *index_flags(srv.url), "--cache-dir", str(tmp_path / "cache"), "--scan-records", "none")
    assert code == 0, err
    heads = {path.rsplit("/", 1)[-1] for method, path, headers in srv.log if method == "GET" and headers.get("Range", "").startswith("bytes=0-")}
    assert {"ext_x-1.0-cp312-cp312-manylinux_2_28_x86_64.whl", "ext_y-1.0-cp312-cp312-manylinux_2_28_x86_64.whl"} <= heads, heads
    assert not {h for h in heads if "-2.0-" in h}, f"a release ruled out was scanned: {heads}"
    read = {path.rsplit("/", 1)[-1] for method, path, _ in srv.log if method == "GET" and "ext_x-2.0" in path}
    assert read, "the crawl never met ext-x 2.0: the test shows nothing"
    if door == "resolve":
        plan = {p["name"]: p for p in json.loads(out)["packages"]}
        assert (plan["ext-x"]["version"], plan["ext-y"]["version"]) == ("1.0", "1.0")
        assert all("need neither torch nor CUDA" in plan[n]["reason"] for n in ("ext-x", "ext-y")), plan["ext-x"]["reason"]
    else:
        text = (tmp_path / "pylock.toml").read_text()
        assert 'name = "ext-x"\nversion = "1.0"' in text and 'name = "ext-y"\nversion = "1.0"' in text


def _cand(text: str) -> Cand:
    name, version = text.split()
    return Cand(name=canonicalize_name(name), version=Version(version), file=None)


def _req(text: str) -> Req:
    parsed = Requirement(text)
    return Req(name=canonicalize_name(parsed.name), specifier=SpecifierSet(str(parsed.specifier)))


def test_which_scans_the_crawl_holds_back() -> None:
    """The crawl's rule (``prefetch._Asked``), on the shapes today's SGLang closure has: a release a
    requirement met so far rules out waits, and what it alone leads to; a ruled-out parent's pin
    rules nothing out; requirements no release met satisfies together rule nothing out; a release
    held back and met again on a clean path is offered then, once."""
    from resolve_gpu_stack.resolver.prefetch import _Asked

    asked = _Asked()
    root, sglang = (), (_cand("sglang 0.5.23"),)
    for c in ("sglang 0.5.23", "numpy 2.5.5", "numpy 2.3.5"):
        asked.met(_cand(c))
    asked.add(_req("numpy"), sglang)
    assert asked.offer(_cand("numpy 2.5.5"), sglang)  # nothing bounds numpy yet: the newest is scanned
    asked.add(_req("numpy<2.4"), (_cand("mistral-common 1.13.1"),))
    assert not asked.offer(_cand("numpy 2.4.6"), sglang), "numpy<2.4 was met and 2.3.5 meets all: 2.4.6 waits"
    assert asked.offer(_cand("numpy 2.3.5"), root) and not asked.offer(_cand("numpy 2.3.5"), root)  # once
    # cutlass: sglang pins 4.8.0; 4.8.1 (met first) pins its libs to 4.8.1: that pin rules nothing out
    for c in ("nvidia-cutlass-dsl 4.8.1", "nvidia-cutlass-dsl 4.8.0", "libs-base 4.8.1", "libs-base 4.8.0"):
        asked.met(_cand(c))
    asked.add(_req("nvidia-cutlass-dsl==4.8.0"), sglang)
    dsl481 = (*sglang, _cand("nvidia-cutlass-dsl 4.8.1"))
    asked.add(_req("libs-base==4.8.1"), dsl481)
    assert not asked.offer(_cand("libs-base 4.8.1"), dsl481), "reached only through a ruled-out release"
    asked.add(_req("libs-base==4.8.0"), (*sglang, _cand("nvidia-cutlass-dsl 4.8.0")))
    assert asked.offer(_cand("libs-base 4.8.0"), (*sglang, _cand("nvidia-cutlass-dsl 4.8.0")))
    # kernels: sglang's <0.15 against a transformers' >=0.19.1: no release meets both, neither waits
    for c in ("kernels 0.14.1", "kernels 0.19.1", "transformers 5.25.0"):
        asked.met(_cand(c))
    asked.add(_req("kernels<0.15"), sglang)
    asked.add(_req("kernels>=0.19.1"), (_cand("transformers 5.25.0"),))
    assert asked.offer(_cand("kernels 0.14.1"), sglang) and asked.offer(_cand("kernels 0.19.1"), (_cand("transformers 5.25.0"),))
    # a release first met below a ruled-out one waits; met again on a clean path, it is released
    asked.met(_cand("charset-normalizer 3.5.3"))
    fi074 = (*sglang, _cand("flashinfer-python 0.7.4"))
    asked.met(_cand("flashinfer-python 0.7.4"))
    asked.met(_cand("flashinfer-python 0.7.2"))
    asked.add(_req("flashinfer-python==0.7.2"), sglang)
    assert not asked.released(_cand("charset-normalizer 3.5.3"), sglang), "never held: nothing to release"
    assert not asked.offer(_cand("charset-normalizer 3.5.3"), fi074)
    assert asked.released(_cand("charset-normalizer 3.5.3"), (_cand("requests 2.33.0"),))
    assert not asked.released(_cand("charset-normalizer 3.5.3"), (_cand("requests 2.33.0"),))  # once
