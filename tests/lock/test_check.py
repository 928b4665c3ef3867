"""`lock` for every configured target and `check`: one test per invariant, on real lock files
written by the real resolver and lock writer from a small world on a loopback server."""

from __future__ import annotations

import datetime as dt
import re
import shutil
from pathlib import Path

import pytest
from packaging.version import Version
from support.lock_project import add_flashinfer, build_lock_world, config_text, record_snapshot, serve_world

from resolve_gpu_stack.cli import app as cli
from resolve_gpu_stack.data.definitions import load_definitions
from resolve_gpu_stack.lock.check import build_date, check_lock, retention_findings
from resolve_gpu_stack.model import Action, Coupling, LockedPackage

PYLOCK = Path("constraints/pylock.x86_64-py312.toml")
TXT = Path("constraints/x86_64-py312.txt")
ARM = Path("constraints/pylock.aarch64-py312.toml")
REGENERATE = "regenerate: resolve-gpu-stack lock --target x86_64-py312"
DEFS = load_definitions()


def main(*argv: str) -> int:
    return cli.main(list(argv))


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The world on live loopback servers (one per index, as in real life), and a project locked
    against it (once per module)."""
    root = tmp_path_factory.mktemp("lockworld")
    world = build_lock_world(root / "www")
    with serve_world(world) as (srv, urls):
        project = root / "project"
        project.mkdir()
        (project / "pyproject.toml").write_text(config_text(urls))
        rc = cli.main(["lock", "--config", str(project / "pyproject.toml"), "--cache-dir", str(root / "cache")])
        assert rc == 0
        yield srv, world, urls, project


@pytest.fixture
def project(served, tmp_path, monkeypatch):
    """A fresh copy of the locked project; the current directory is its root."""
    _, _, _, locked = served
    copy = tmp_path / "project"
    shutil.copytree(locked, copy)
    monkeypatch.chdir(copy)
    return copy


def edit(path: Path, old: str, new: str, count: int = 1) -> None:
    text = path.read_text()
    assert text.count(old) >= count, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new) if count == 0 else text.replace(old, new, count))


def check_output(capsys, *argv: str) -> tuple[int, str]:
    rc = main("check", *argv)
    out = capsys.readouterr()
    return rc, out.out + out.err


# -- lock ----------------------------------------------------------------------------------------


def test_lock_writes_every_target_from_one_crawl(served):
    srv, _, _, project = served
    for path in (PYLOCK, TXT, ARM):
        assert (project / path).is_file()
    # both targets read the shared PyPI and FlashInfer pages, but each page was fetched once
    for index, page in (
        ("pypi", "/simple/numpy/"),
        ("pypi", "/simple/flashinfer-python/"),
        ("pypi", "/simple/flashinfer-cubin/"),
        ("flashinfer", "/fi/cu130/flashinfer-jit-cache/"),
    ):
        assert len([r for r in srv[index].requests_for(page) if r[0] == "GET"]) == 1, page
    text = (project / PYLOCK).read_text()
    assert 'command = "resolve-gpu-stack lock --target x86_64-py312"' in text
    assert 'installed-torch = "2.12.0.dev20260307+cu130"' in text
    arm = (project / ARM).read_text()
    assert 'platform = "aarch64-manylinux_2_28"' in arm and "manylinux_2_28_aarch64.whl" in arm


def test_lock_target_selects_and_flags_override_the_config(project, capsys):
    (project / PYLOCK).unlink()
    (project / ARM).unlink()
    assert main("lock", "--target", "x86_64-py312", "--no-cubin", "--flashinfer", "0.6.4") == 0
    text = (project / PYLOCK).read_text()
    assert "flashinfer-cubin" not in text and 'version = "0.6.4"' in text
    assert 'command = "resolve-gpu-stack lock --target x86_64-py312 --flashinfer 0.6.4 --no-cubin"' in text
    assert not (project / ARM).exists()
    # the flags are inputs of that lock: the next check agrees with it (issue 13, item 7)
    rc, out = check_output(capsys, "--target", "x86_64-py312")
    assert rc == 0, out
    # a change to the config that the flags do not override makes it stale; regenerating keeps the flags
    edit(project / "pyproject.toml", 'cuda = "cu130"', 'cuda = "cu130"\nwith = ["numpy"]')
    rc, out = check_output(capsys, "--target", "x86_64-py312")
    assert rc == 1
    assert "stale" in out and "with: [] -> ['numpy']" in out and "flashinfer:" not in out
    assert "regenerate: resolve-gpu-stack lock --target x86_64-py312 --flashinfer 0.6.4 --no-cubin" in out
    # the flags are not applied to another target's lock, nor to a lock whose command names none
    edit(project / "pyproject.toml", 'cuda = "cu130"\nwith = ["numpy"]', 'cuda = "cu130"')
    edit(project / PYLOCK, "--flashinfer 0.6.4 --no-cubin", "")
    rc, out = check_output(capsys, "--target", "x86_64-py312")
    assert rc == 1 and "flashinfer: '0.6.4' -> 'latest'" in out


def test_lock_usage_errors(project, capsys):
    assert main("lock", "-o", "pylock.x.toml", "--target", "x86_64-py312") == 2
    assert main("lock", "--target", "nope") == 2
    assert "no target named 'nope'" in capsys.readouterr().err


# -- check: the good case ------------------------------------------------------------------------


def test_fresh_consistent_locks_pass(project, capsys):
    rc, out = check_output(capsys, "--today", "2026-03-10")
    assert rc == 0, out
    assert "ok: 3 lock files consistent and fresh" in out
    # explicit files, and discovery from a subdirectory
    (project / "sub").mkdir()
    rc, out = check_output(capsys, str(project / PYLOCK), str(project / TXT), "--today", "2026-03-10")
    assert rc == 0, out


def test_check_is_offline(served, project, capsys):
    srv = served[0]
    before = sum(len(s.log) for s in srv.values())
    assert main("check") == 0
    assert sum(len(s.log) for s in srv.values()) == before


# -- check: freshness ----------------------------------------------------------------------------


def test_stale_config_fails_with_the_regenerate_command(project, capsys):
    edit(project / "pyproject.toml", 'cuda = "cu130"', 'cuda = "cu130"\nwith = ["numpy"]')
    rc, out = check_output(capsys)
    assert rc == 1
    for path in (PYLOCK, TXT, ARM):
        assert f"error: {path}: stale" in out
    assert "with: [] -> ['numpy']" in out
    assert REGENERATE in out
    assert "regenerate: resolve-gpu-stack lock --target aarch64-py312" in out
    # regenerating makes it pass again
    assert main("lock") == 0
    assert check_output(capsys)[0] == 0


def test_regenerate_command_says_where_to_run_it(project, capsys, monkeypatch):
    edit(project / "pyproject.toml", 'cuda = "cu130"', 'cuda = "cu130"\nwith = ["numpy"]')
    monkeypatch.chdir(project / "constraints")
    rc, out = check_output(capsys, "--target", "x86_64-py312")
    assert rc == 1
    assert f"regenerate: cd {project} && resolve-gpu-stack lock --target x86_64-py312" in out


def test_hand_edited_inputs_table_is_caught(project, capsys):
    edit(project / PYLOCK, 'flashinfer = "latest"', 'flashinfer = "0.6.4"')
    rc, out = check_output(capsys, str(PYLOCK))
    assert rc == 1
    assert "recorded inputs do not match the recorded inputs-digest" in out


def test_missing_output_fails(project, capsys):
    (project / ARM).unlink()
    rc, out = check_output(capsys)
    assert rc == 1
    assert f"error: {ARM}: missing" in out and "resolve-gpu-stack lock --target aarch64-py312" in out


# -- check: one invariant at a time --------------------------------------------------------------


def test_cubin_version_edited_fails_naming_flashinfer_cubin(served, project, capsys):
    world = served[1]
    old = next(e.wheel for e in world.pages["simple/flashinfer-cubin/"] if e.wheel.filename.startswith("flashinfer_cubin-0.6.4"))
    new = next(e.wheel for e in world.pages["simple/flashinfer-cubin/"] if e.wheel.filename.startswith("flashinfer_cubin-0.6.5"))
    text = (project / PYLOCK).read_text()
    # a consistent hand-edit: version, file and hash all point at the real 0.6.4 wheel
    text = text.replace(new.filename, old.filename).replace(new.sha256, old.sha256).replace(f"size = {new.size}\n", f"size = {old.size}\n")
    text = re.sub(r'(name = "flashinfer-cubin"\nversion = )"0.6.5"', r'\1"0.6.4"', text)
    (project / PYLOCK).write_text(text)
    rc, out = check_output(capsys, str(PYLOCK))
    assert rc == 1
    assert "error: constraints/pylock.x86_64-py312.toml: flashinfer-cubin: version 0.6.4 != flashinfer-python 0.6.5" in out


def test_cubin_version_edited_in_one_place_only(project, capsys):
    text = (project / PYLOCK).read_text()
    (project / PYLOCK).write_text(text.replace('name = "flashinfer-cubin"\nversion = "0.6.5"', 'name = "flashinfer-cubin"\nversion = "0.6.4"', 1))
    rc, out = check_output(capsys, str(PYLOCK))
    assert rc == 1
    # the [[packages]] entry now contradicts its own wheel: reading the file (PEP 751 validation) says so
    assert re.search(
        r"Version in 'flashinfer_cubin-0\.6\.5-\S+' is not consistent with package version '0\.6\.4' in 'packages\[\d+\]\.wheels\[0\]' \(flashinfer-cubin\)",
        out,
    )


def test_constraints_pins_are_checked_for_alignment(project, capsys):
    edit(project / TXT, "flashinfer-cubin==0.6.5", "flashinfer-cubin==0.6.4")
    rc, out = check_output(capsys, str(TXT))
    assert rc == 1
    assert f"error: {TXT}: flashinfer-cubin: version 0.6.4 != flashinfer-python 0.6.5" in out


def test_jit_cache_label_must_match_torch_cuda_major(project, capsys):
    edit(project / TXT, "flashinfer-jit-cache==0.6.5+cu130", "flashinfer-jit-cache==0.6.5+cu129")
    rc, out = check_output(capsys, str(TXT))
    assert rc == 1
    assert "flashinfer-jit-cache: CUDA label cu129 does not match torch's CUDA major (cu130)" in out


def test_torch_abi_wheel_for_another_torch_fails(project, capsys):
    edit(
        project / TXT,
        "flashinfer-python==0.6.5  # index=pypi action=install coupling=agnostic",
        "flashinfer-python==0.6.5+cu124torch2.5  # index=pypi action=install coupling=torch-abi",
    )
    rc, out = check_output(capsys, str(TXT))
    assert rc == 1
    assert "flashinfer-python: 0.6.5+cu124torch2.5 is built for torch 2.5, not a torch nightly" in out


def test_constraints_index_lines_are_refused(project, capsys):
    edit(project / TXT, "\napache-tvm-ffi", "\n--extra-index-url https://mirror.example/simple/\napache-tvm-ffi")
    rc, out = check_output(capsys, str(TXT))
    assert rc == 1
    assert "option lines are not allowed in a constraints lock (--extra-index-url)" in out


def test_hash_removed_fails_naming_the_package(project, capsys):
    text = (project / PYLOCK).read_text()
    start = text.index('name = "numpy"')
    line = re.search(r'\[packages\.wheels\.hashes\]\nsha256 = "[0-9a-f]{64}"\n', text[start:])
    (project / PYLOCK).write_text(text[:start] + text[start:].replace(line.group(0), '[packages.wheels.hashes]\nmd5 = "0123"\n', 1))
    rc, out = check_output(capsys, str(PYLOCK))
    assert rc == 1
    assert "numpy: no sha256 for the file to install" in out
    # without a hashes table at all, the file does not even parse
    text = (project / PYLOCK).read_text().replace('[packages.wheels.hashes]\nmd5 = "0123"\n', "", 1)
    (project / PYLOCK).write_text(text)
    rc, out = check_output(capsys, str(PYLOCK))
    assert rc == 1
    assert re.search(r"Missing required value in 'packages\[\d+\]\.wheels\[0\]\.hashes' \(numpy\)", out)


def test_kept_torch_below_the_installed_floor_fails(project, capsys):
    text = (project / PYLOCK).read_text()
    # the kept torch is listed in [[packages]] too (with its wheel): move every mention but the recorded input
    text = text.replace("dev20260307", "dev20260306").replace('installed-torch = "2.12.0.dev20260306+cu130"', 'installed-torch = "2.12.0.dev20260307+cu130"')
    (project / PYLOCK).write_text(text)
    rc, out = check_output(capsys, str(PYLOCK))
    assert rc == 1
    assert "torch: 2.12.0.dev20260306+cu130 is lower than the installed 2.12.0.dev20260307+cu130 this lock was made for" in out
    # the constraints file records no inputs: the floor comes from the config's target
    edit(project / TXT, "torch==2.12.0.dev20260307+cu130", "torch==2.12.0.dev20260306+cu130")
    rc, out = check_output(capsys, str(TXT))
    assert rc == 1 and "torch: 2.12.0.dev20260306+cu130 is lower than the installed" in out


def test_package_from_the_wrong_index_fails(project, capsys):
    text = (project / PYLOCK).read_text()
    (project / PYLOCK).write_text(
        text.replace(
            'name = "numpy"\nversion = "2.2.0"\naction = "install"\ncoupling = "agnostic"\nindex = "pypi"',
            'name = "numpy"\nversion = "2.2.0"\naction = "install"\ncoupling = "agnostic"\nindex = "pytorch"',
        )
    )
    rc, out = check_output(capsys, str(PYLOCK))
    assert rc == 1
    assert "numpy: comes from index 'pytorch', but 'pypi' owns it" in out


def test_packages_index_url_must_be_the_owning_index(project, served, capsys):
    urls = served[2]
    text = (project / PYLOCK).read_text()
    block = text.index('name = "numpy"')
    (project / PYLOCK).write_text(text[:block] + text[block:].replace(f'index = "{urls["pypi"]}"', f'index = "{urls["pytorch"]}"', 1))
    rc, out = check_output(capsys, str(PYLOCK))
    assert rc == 1
    assert f"numpy: [[packages]] index {urls['pytorch']} is not the pypi index ({urls['pypi']})" in out


def test_credentials_in_a_url_fail_without_printing_them(project, served, capsys):
    base = served[2]["pypi"].replace("/simple/", "/")
    edit(project / PYLOCK, f'url = "{base}files/numpy', f'url = "{base.replace("http://", "http://alice:s3cret@")}files/numpy')
    rc, out = check_output(capsys, str(PYLOCK))
    assert rc == 1
    assert "numpy: URL carries credentials" in out or "numpy: wheel URL carries credentials" in out
    assert "s3cret" not in out and "alice" not in out


def test_duplicate_entries_fail(project, capsys):
    text = (project / PYLOCK).read_text()
    start = text.index('[[packages]]\nname = "numpy"')
    end = text.index("[[packages]]", start + 1)
    (project / PYLOCK).write_text(text[:end] + text[start:end] + text[end:])
    rc, out = check_output(capsys, str(PYLOCK))
    assert rc == 1
    assert "numpy: has 2 [[packages]] entries" in out
    edit(project / TXT, "numpy==2.2.0", "numpy==2.2.0\nnumpy==2.2.0")
    rc, out = check_output(capsys, str(TXT))
    assert rc == 1 and "numpy is pinned twice" in out


def test_wheel_file_must_be_the_locked_version(project, capsys):
    text = (project / PYLOCK).read_text()
    text = text.replace('name = "numpy"\nversion = "2.2.0"', 'name = "numpy"\nversion = "2.2.1"')
    (project / PYLOCK).write_text(text)
    rc, out = check_output(capsys, str(PYLOCK))
    assert rc == 1
    assert re.search(
        r"Version in 'numpy-2\.2\.0-py3-none-any\.whl' is not consistent with package version '2\.2\.1' in 'packages\[\d+\]\.wheels\[0\]' \(numpy\)", out
    )


def test_a_file_not_written_by_the_tool_fails(project, capsys):
    (project / "constraints" / "other.txt").write_text("numpy==2.2.0\n")
    rc, out = check_output(capsys, "constraints/other.txt")
    assert rc == 1 and "not written by resolve-gpu-stack" in out
    (project / "constraints" / "pylock.broken.toml").write_text("lock-version = [\n")
    rc, out = check_output(capsys, "constraints/pylock.broken.toml")
    assert rc == 1 and "not valid TOML" in out


def test_nothing_to_check_is_a_usage_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main("check") == 2
    assert "nothing to check" in capsys.readouterr().err


# -- retention -----------------------------------------------------------------------------------


def test_retention_warning_for_a_nightly_to_download(served, project, capsys):
    """A target without torch installed downloads the nightly: once it is past the PyTorch index's
    60 days, check warns (exit 0) that its URL will stop working."""
    edit(
        project / "pyproject.toml",
        'name = "aarch64-py312"',
        'name = "fresh"\noutput = ["constraints/fresh.txt"]\n[[tool.resolve-gpu-stack.target]]\nname = "aarch64-py312"',
    )
    assert main("lock", "--target", "fresh") == 0
    assert "torch==2.12.0.dev20260307+cu130  # index=pytorch action=install" in (project / "constraints/fresh.txt").read_text()
    rc, out = check_output(capsys, "--target", "fresh", "--today", "2026-05-06")
    assert rc == 0 and "warning" not in out  # 60 days old: not yet
    rc, out = check_output(capsys, "--target", "fresh", "--today", "2026-05-07")
    assert rc == 0, out
    assert (
        "warning: constraints/fresh.txt: torch: 2.12.0.dev20260307+cu130 was built on 2026-03-07 (61 days ago); the pytorch index deletes nightlies after about 60 days"
        in out
    )
    assert "1 warning" in out
    # a kept torch is never downloaded: no warning for it
    rc, out = check_output(capsys, "--target", "x86_64-py312", "--today", "2027-01-01")
    assert rc == 0 and "warning" not in out


def test_retention_uses_upload_time_for_nightly_files_without_a_date_in_the_version():
    triton = LockedPackage(
        name="triton",
        version=Version("3.7.0+git9c288bc5"),
        action=Action.INSTALL,
        index="pytorch",
        coupling=Coupling.AGNOSTIC,
        url="https://download.example/whl/nightly/triton-3.7.0+git9c288bc5-cp312-cp312-manylinux_2_28_x86_64.whl",
        upload_time="2026-03-01T04:00:00Z",
        sha256="0" * 64,
    )
    stable = LockedPackage(
        name="torch",
        version=Version("2.10.0+cu130"),
        action=Action.INSTALL,
        index="pytorch",
        coupling=Coupling.TORCH,
        url="https://download.example/whl/cu130/torch-2.10.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl",
        upload_time="2025-01-01T00:00:00Z",
    )
    found = retention_findings(Path("pylock.toml"), [triton, stable], DEFS, dt.date(2026, 6, 1))
    assert [(f.package, f.level) for f in found] == [("triton", "warning")]
    assert "built on 2026-03-01 (92 days ago)" in found[0].message
    assert build_date(Version("2.12.0.dev20261399"), None) is None  # not a date: no guess


# -- against the snapshot (offline) and the live index (--online) --------------------------------


@pytest.fixture
def snapshot_project(served, tmp_path, monkeypatch):
    """The project configured to resolve from a snapshot recorded from the world."""
    _, _, urls, _ = served
    project = tmp_path / "snap-project"
    project.mkdir()
    (project / "pyproject.toml").write_text(config_text(urls))
    record_snapshot(project, project / "snapshot")
    (project / "pyproject.toml").write_text(config_text(urls, snapshot="snapshot"))
    monkeypatch.chdir(project)
    assert main("lock", "--cache-dir", str(tmp_path / "cache")) == 0
    return project


def forge(text: str, package: str) -> str:
    """The lock text with the sha256 of ``package``'s wheel changed (still 64 hex digits)."""
    start = text.index(f'name = "{package}"')
    digest = re.search(r'sha256 = "([0-9a-f]{64})"', text[start:]).group(1)
    return text.replace(digest, ("0" if digest[0] != "0" else "1") + digest[1:])


@pytest.mark.parametrize(("package", "index"), [("flashinfer-cubin", "pypi"), ("flashinfer-jit-cache", "flashinfer")])
def test_a_changed_hash_is_caught_offline_against_the_snapshot(snapshot_project, served, capsys, package, index):
    """PyPI's JSON pages and FlashInfer's HTML pages alike, read from the snapshot only."""
    srv = served[0]
    before = sum(len(s.log) for s in srv.values())
    rc, out = check_output(capsys, "--today", "2026-03-10")
    assert rc == 0, out
    (snapshot_project / PYLOCK).write_text(forge((snapshot_project / PYLOCK).read_text(), package))
    rc, out = check_output(capsys, "--today", "2026-03-10")
    assert rc == 1
    assert f"{package}: sha256 " in out and f"differs from the {index} index's" in out and "(snapshot snapshot/)" in out
    assert out.count("error:") == 1
    assert sum(len(s.log) for s in srv.values()) == before  # all of it offline


def test_a_wheel_the_index_does_not_offer_is_caught(snapshot_project, capsys):
    edit(snapshot_project / PYLOCK, "numpy-2.2.0-py3-none-any.whl", "numpy-2.2.0-py3-none-manylinux_2_28_x86_64.whl", count=0)
    rc, out = check_output(capsys, "--today", "2026-03-10")
    assert rc == 1
    assert "numpy: numpy-2.2.0-py3-none-manylinux_2_28_x86_64.whl is not offered by the pypi index (snapshot snapshot/)" in out


def test_online_reports_drift_without_writing(served, project, capsys):
    srv, world, _, _ = served
    before = {p: (project / p).read_bytes() for p in (PYLOCK, TXT, ARM)}
    rc, out = check_output(capsys, "--online", "--cache-dir", str(project / ".cache"), "--today", "2026-03-10")
    assert rc == 0, out
    assert "drift" not in out
    add_flashinfer(world, "0.6.6")
    world.write(srv["flashinfer"].url)
    try:
        rc, out = check_output(capsys, "--online", "--cache-dir", str(project / ".cache2"), "--today", "2026-03-10")
    finally:  # the module's world goes back to what the other tests expect
        for page in ("simple/flashinfer-python/", "simple/flashinfer-cubin/", "fi/cu129/flashinfer-jit-cache/", "fi/cu130/flashinfer-jit-cache/"):
            world.pages[page] = [e for e in world.pages[page] if "0.6.6" not in e.wheel.filename]
        world.write(srv["flashinfer"].url)
    assert rc == 0, out
    assert "warning: constraints/pylock.x86_64-py312.toml: flashinfer-python: drift: the live index now gives 0.6.6, newer than the locked 0.6.5" in out
    assert "flashinfer-jit-cache: drift: the live index now gives 0.6.6+cu130, newer than the locked 0.6.5+cu130" in out
    assert {p: (project / p).read_bytes() for p in (PYLOCK, TXT, ARM)} == before


def test_check_lock_api_on_a_good_file(project):
    checked = check_lock(project / PYLOCK, DEFS, today=dt.date(2026, 3, 10))
    assert checked.findings == ()
    assert checked.plan is not None and checked.plan.package("flashinfer-python").version == Version("0.6.5")


# -- listed_lookup: the rows a lock uses, through the finder and the real parser ------------------


class _CountingFetcher:
    """Serves one PEP 691 page (two wheels and a row that is not a file) for every URL; counts fetches."""

    concurrent_calls = False

    def __init__(self) -> None:
        self.fetched: list[str] = []

    def fetch_pages(self, urls, *, index):
        import json as _json

        from resolve_gpu_stack.model import IndexPage, PageResponse

        files = [
            {
                "filename": f"numpy-2.2.0-cp312-cp312-manylinux_2_28_{arch}.whl",
                "url": f"/p/numpy-2.2.0-cp312-cp312-manylinux_2_28_{arch}.whl",
                "hashes": {"sha256": "ab" * 32},
            }
            for arch in ("x86_64", "aarch64")
        ]
        body = _json.dumps({"meta": {"api-version": "1.1"}, "name": "numpy", "files": [*files, 7]}).encode()
        self.fetched += list(urls)
        return {u: PageResponse(url=u, page=IndexPage(url=u, content=body, content_type="application/vnd.pypi.simple.v1+json")) for u in urls}


def test_listed_lookup_reads_each_page_once_for_every_plan(monkeypatch):
    from resolve_gpu_stack.data.definitions import RouteContext, load_definitions
    from resolve_gpu_stack.index import finder as finder_module
    from resolve_gpu_stack.index.finder import Finder
    from resolve_gpu_stack.lock.check import listed_lookup
    from resolve_gpu_stack.model import Action, Coupling, LockedPackage, LockPlan, TargetSummary

    def plan(arch: str) -> LockPlan:
        wheel = f"numpy-2.2.0-cp312-cp312-manylinux_2_28_{arch}.whl"
        pkg = LockedPackage(name="numpy", version=Version("2.2.0"), action=Action.INSTALL, index="pypi", coupling=Coupling.AGNOSTIC, filename=wheel)
        return LockPlan(target=TargetSummary(python="3.12", platform=f"{arch}-manylinux_2_28", cuda=None), packages=(pkg,))

    parsed: list[frozenset[str]] = []
    real = finder_module.parse_page
    monkeypatch.setattr(
        finder_module,
        "parse_page",
        lambda page, *, index, only=None, memo=None, **rows: parsed.append(frozenset(only)) or real(page, index=index, only=only, memo=memo, **rows),
    )
    fetcher = _CountingFetcher()
    defs = load_definitions().with_index_urls({"pypi": "https://pypi.example/simple/"})
    lookup = listed_lookup(Finder(fetcher, defs), [plan("x86_64"), plan("aarch64")])
    ctx = RouteContext(torch_channel="stable", cuda=None, flashinfer_channel="stable", torch_series=None)
    x86 = lookup("numpy", ctx, {"numpy-2.2.0-cp312-cp312-manylinux_2_28_x86_64.whl"})
    arm = lookup("numpy", ctx, {"numpy-2.2.0-cp312-cp312-manylinux_2_28_aarch64.whl"})
    assert [f.filename for f in x86] == ["numpy-2.2.0-cp312-cp312-manylinux_2_28_x86_64.whl"]
    assert [f.filename for f in arm] == ["numpy-2.2.0-cp312-cp312-manylinux_2_28_aarch64.whl"]
    assert x86[0].sha256 == "ab" * 32 and x86[0].index == "pypi"
    assert len(fetcher.fetched) == len(set(fetcher.fetched)) == len(parsed) >= 1  # each page fetched and parsed once
    assert parsed[0] == {"numpy-2.2.0-cp312-cp312-manylinux_2_28_x86_64.whl", "numpy-2.2.0-cp312-cp312-manylinux_2_28_aarch64.whl"}
    assert lookup("numpy", ctx, {"numpy-9.9-py3-none-any.whl"}) == []
    assert len(fetcher.fetched) == len(set(fetcher.fetched))  # a file no plan named: the page is parsed again, not fetched


# -- tampering: wheel URLs off their index, a kept torch that is not the installed one (issue 15) ----


@pytest.mark.parametrize(
    ("package", "moved", "says"),
    [
        ("numpy", "file:///tmp/files/", "its wheel URL is a file URL, not https"),
        ("numpy", "http://mirror.example/files/", "its wheel URL is plain http to a host that is not loopback"),
        ("flashinfer-jit-cache", "http://127.0.0.1:9/releases/download/v0.6.5/", "which the index does not send files to"),
        (
            "flashinfer-jit-cache",
            "https://evil.example/releases/download/v0.6.5/",
            "its wheel URL is on evil.example:443, which the index does not send files to",
        ),
    ],
)
def test_a_wheel_url_moved_off_its_index_fails(project, capsys, package, moved, says):
    text = (project / PYLOCK).read_text()
    start = text.index(f'name = "{package}"')
    url = re.search(r'url = "(http://[^"]+/)([^"/]+\.whl)"', text[start:])
    (project / PYLOCK).write_text(text[:start] + text[start:].replace(url.group(1), moved, 1))
    rc, out = check_output(capsys, str(PYLOCK))
    assert rc == 1, out
    assert f"{package}: " in out and says in out


@pytest.mark.parametrize("moved", ["dev20260305", "dev20260308"])
def test_a_kept_torch_is_exactly_the_installed_one(project, capsys, moved):
    """The torch entry moved consistently (version, wheel, pins); the recorded installed torch kept."""
    installed = "2.12.0.dev20260306+cu130"
    text = (project / ARM).read_text()
    assert f'installed-torch = "{installed}"' in text and 'action = "keep"' in text
    text = text.replace("dev20260306", moved).replace(f'installed-torch = "2.12.0.{moved}+cu130"', f'installed-torch = "{installed}"')
    (project / ARM).write_text(text.replace(f'installed-version = "2.12.0.{moved}+cu130"', f'installed-version = "{installed}"'))
    rc, out = check_output(capsys, str(ARM))
    assert rc == 1, out
    assert f"torch: the lock keeps torch 2.12.0.{moved}+cu130, but the installed torch it was made for is {installed}" in out


def test_a_hash_changed_in_its_last_digit_prints_both_digests_whole(snapshot_project, capsys):
    text = (snapshot_project / PYLOCK).read_text()
    start = text.index('name = "flashinfer-cubin"')
    digest = re.search(r'sha256 = "([0-9a-f]{64})"', text[start:]).group(1)
    forged = digest[:-1] + ("0" if digest[-1] != "0" else "1")
    (snapshot_project / PYLOCK).write_text(text.replace(digest, forged))
    rc, out = check_output(capsys, "--today", "2026-03-10")
    assert rc == 1
    assert f"flashinfer-cubin: sha256 {forged} differs from the pypi index's {digest}" in out


# -- lock writes all outputs or none (issue 13, item 6) -------------------------------------------


def test_lock_writes_every_output_or_none(project, capsys):
    (project / "ro").write_text("a file where a folder should be\n")  # fails as root too
    rc = main("lock", "--python", "3.12", "--installed", "torch==2.12.0.dev20260307+cu130", *_index_flags(project), "-o", "a.txt", "-o", "ro/pylock.x.toml")
    err = capsys.readouterr().err
    assert rc == 4, err
    assert "cannot write" in err and "ro/pylock.x.toml" in err and "nothing was written" in err
    assert not (project / "a.txt").exists()
    assert not [p.name for p in project.iterdir() if p.name.endswith(".tmp")]


def test_configured_lock_writes_every_target_or_none(project, capsys, monkeypatch):
    from resolve_gpu_stack.lock import files

    before = {p: (project / p).read_bytes() for p in (PYLOCK, TXT, ARM)}
    edit(project / "pyproject.toml", 'cuda = "cu130"', 'cuda = "cu130"\nflashinfer = "0.6.4"')
    real = files.os.replace

    def replace(src, dst):
        if str(dst).endswith(ARM.name):  # the last file: the others were already renamed into place
            raise OSError(30, "Read-only file system")
        return real(src, dst)

    monkeypatch.setattr(files.os, "replace", replace)
    rc = main("lock")
    err = capsys.readouterr().err
    assert rc == 4, err
    assert "Read-only file system" in err and "wrote" not in err
    assert {p: (project / p).read_bytes() for p in (PYLOCK, TXT, ARM)} == before
    assert not [p for p in (project / "constraints").iterdir() if p.name.endswith(".tmp")]


def _index_flags(project: Path) -> list[str]:
    """--index flags for the loopback world the project was locked against."""
    from resolve_gpu_stack.cli.config import load_config

    config = load_config(project / "pyproject.toml")
    return [w for name, url in config.indexes.items() for w in ("--index", f"{name}={url}")]


# -- a constraints file is checked against the pylock written with it (issue 13, item 5) ----------


@pytest.mark.parametrize("files", [(), (str(TXT),)])
def test_hand_edited_constraints_pin_fails(project, capsys, files):
    text = (project / TXT).read_text()
    pin = re.search(r"^numpy==(\S+)", text, re.M)
    assert pin is not None
    edit(project / TXT, f"numpy=={pin[1]}", "numpy==1.0")
    rc, out = check_output(capsys, *files)
    assert rc == 1, out
    assert f"numpy: pinned at 1.0, but {PYLOCK.name} (written with it) locks {pin[1]}" in out


def test_constraints_missing_or_extra_pins_fail(project, capsys):
    text = (project / TXT).read_text()
    line = next(x for x in text.splitlines() if x.startswith("numpy=="))
    (project / TXT).write_text(text.replace(line + "\n", "") + "six==1.0\n")
    rc, out = check_output(capsys)
    assert rc == 1, out
    assert "numpy: missing:" in out and "six: pinned at 1.0" in out


# -- kept packages in the pylock (issue 13, item 3) -----------------------------------------------


def test_a_kept_nightly_torch_is_listed_with_the_hash_learned_once(served, project, capsys):
    """The PyTorch page gives no sha256 (as the real nightly pages): `lock` learned it through the
    wheel cache, so the kept torch is listed at its installed version and hash, and `check` agrees."""
    _, world, _, _ = served
    wheel = next(e.wheel for e in world.pages["whl/nightly/cu130/torch/"] if "dev20260307" in e.wheel.filename and "x86_64" in e.wheel.filename)
    text = (project / PYLOCK).read_text()
    head = text.split("[tool.resolve-gpu-stack]")[0]
    assert 'name = "torch"\nversion = "2.12.0.dev20260307+cu130"' in head and wheel.sha256 in head
    assert "kept-unlisted" not in text
    rc, out = check_output(capsys, "--today", "2026-03-10")
    assert rc == 0 and "warning" not in out, out


def test_a_kept_package_the_lock_cannot_list_is_a_warning(project, capsys):
    text = (project / PYLOCK).read_text()
    start = text.index('[[packages]]\nname = "torch"')
    end = text.index("[[packages]]", start + 1) if "[[packages]]" in text[start + 1 :] else text.index("[tool.resolve-gpu-stack]")
    (project / PYLOCK).write_text(text[:start] + text[end:])
    rc, out = check_output(capsys, str(PYLOCK), "--today", "2026-03-10")
    assert rc == 0, out
    assert "warning: constraints/pylock.x86_64-py312.toml: torch: kept but not listed in [[packages]]" in out
    assert "`uv pip sync` of this lock would uninstall it" in out and "uv pip install -r" in out


# -- a configured snapshot replays PyPI under the user's PyPI (issue 13, item 2) ------------------


def test_configured_snapshot_lock_uses_the_users_pypi_and_stays_fresh_elsewhere(served, tmp_path, monkeypatch, capsys):
    _, _, urls, _ = served
    project = tmp_path / "snap-project"
    project.mkdir()
    (project / "pyproject.toml").write_text(config_text(urls))
    record_snapshot(project, project / "snapshot")
    (project / "pyproject.toml").write_text(config_text(urls, snapshot="snapshot"))  # no pypi: the user's is used
    monkeypatch.chdir(project)
    monkeypatch.setenv("PIP_INDEX_URL", urls["pypi"])
    assert main("lock", "--cache-dir", str(tmp_path / "cache")) == 0
    text = (project / PYLOCK).read_text()
    assert f'index = "{urls["pypi"]}"' in text and "snapshot.invalid" not in text.split("[tool.resolve-gpu-stack]")[0]
    numpy = re.search(r'url = "([^"]*numpy[^"]*\.whl)"', text)
    assert numpy is not None and numpy[1].startswith(urls["pypi"].split("/simple/")[0])
    # the machine's PyPI is not an input: on a machine with another PyPI the lock is still fresh
    monkeypatch.setenv("PIP_INDEX_URL", "https://mirror.example/simple/")
    rc, out = check_output(capsys, "--today", "2026-03-10")
    assert rc == 0, out


# -- the routing of a lock's files: its recorded inputs -----------------------------------------------


@pytest.mark.parametrize(
    ("inputs", "torch_channel", "flashinfer_channel"),
    [
        ({"torch": "test", "installed-torch": None, "flashinfer": "latest"}, "test", "stable"),  # a final release on the test channel
        ({"torch": "installed", "installed-torch": "2.12.0.dev20260307+cu130", "flashinfer": "nightly"}, "nightly", "nightly"),
        ({"torch": "2.11.0", "flashinfer": "0.6.5"}, "stable", "stable"),
        ({}, "stable", "stable"),  # nothing recorded (a hand-made file): read off the versions
        ({"torch": "weekly", "flashinfer": 7}, "stable", "stable"),  # unreadable: the same
    ],
)
def test_check_routes_a_locks_files_by_the_channels_its_inputs_recorded(inputs, torch_channel, flashinfer_channel):
    from resolve_gpu_stack.lock.check import route_context
    from resolve_gpu_stack.model import LockPlan, TargetSummary

    torch = LockedPackage(name="torch", version=Version("2.11.0+cu130"), action=Action.INSTALL, index="pytorch", coupling=Coupling.TORCH)
    plan = LockPlan(target=TargetSummary(python="3.12", platform="x86_64-manylinux_2_28", cuda="cu130"), packages=(torch,), inputs=inputs)
    ctx = route_context(plan)
    assert (ctx.torch_channel, ctx.flashinfer_channel, ctx.torch_series) == (torch_channel, flashinfer_channel, "2.11")


def test_a_fleets_targets_read_a_json_page_in_part_once_then_whole_once(monkeypatch):
    """The first target reads only its own rows of a JSON page; a second target with other tags has
    the page read whole, once, and every later target shares that read (the candidate factory's
    judge refuses what does not fit each): each is offered the wheel that fits it."""
    from packaging.tags import Tag

    from resolve_gpu_stack.data.definitions import RouteContext, load_definitions
    from resolve_gpu_stack.index import finder as finder_module
    from resolve_gpu_stack.index.finder import Finder

    parsed: list[str] = []
    real = finder_module.parse_page
    monkeypatch.setattr(finder_module, "parse_page", lambda page, **kw: parsed.append("part" if kw.get("keep") else "whole") or real(page, **kw))
    defs = load_definitions().with_index_urls({"pypi": "https://pypi.example/simple/"})
    finder = Finder(_CountingFetcher(), defs)
    ctx = RouteContext(torch_channel="stable", cuda=None, flashinfer_channel="stable", torch_series=None)

    def wheels(arch: str, python: str) -> list[str]:
        tags = frozenset({Tag(python, python, f"manylinux_2_28_{arch}")})
        return [o.file.filename for o in finder.offers("numpy", ctx, tags=tags, sdists=False)[0]]

    assert wheels("x86_64", "cp312") == ["numpy-2.2.0-cp312-cp312-manylinux_2_28_x86_64.whl"]
    assert parsed == ["part"]
    assert "numpy-2.2.0-cp312-cp312-manylinux_2_28_aarch64.whl" in wheels("aarch64", "cp312")
    assert "numpy-2.2.0-cp312-cp312-manylinux_2_28_x86_64.whl" in wheels("x86_64", "cp311")  # the whole page's
    assert parsed == ["part", "whole"]
