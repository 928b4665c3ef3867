"""Faults end to end: `resolve-gpu-stack lock -o ...` on the story world while the loopback server
misbehaves on an index page, a METADATA sidecar, a range read or a wheel download.

Every case ends in success after retries, or in one clear error (exit 3: an index could not be
reached or answered garbage; exit 1: no plan exists) that names the URL and the cause. After
every run the cache holds only entries whose bodies match their digests and are what the server
really holds, no temporary file anywhere, and no lock file was written (an old one stays
byte-identical).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from support.doors import run_cli
from support.faults import PATHS, StoryRun, cache_problems, gzipped, partial_files, story_run
from support.lock_faults import ALWAYS, assert_clean_failure, assert_good_lock, old_locks
from support.server import Fault, IndexServer

pytestmark = pytest.mark.usefixtures("fast_backoff")  # retries without the exponential wait (conftest.py)


LOCATIONS = ("page", "metadata", "range", "wheel")


def body_of(run: StoryRun, where: str) -> bytes:
    if where == "range":  # the tail read asks for more than the whole (small) wheel: all of it
        return run.served(PATHS.range)
    return run.served(getattr(PATHS, where))


# -- transient faults: the run succeeds after retries --------------------------------------------

TRANSIENT = {
    "500-502-503": lambda run, where: [Fault(status=500), Fault(status=502), Fault(status=503)],
    "reset-before-answer": lambda run, where: [Fault(reset=True)],
    "reset-mid-body": lambda run, where: [Fault(reset_after=len(body_of(run, where)) // 2)],
    "short-body": lambda run, where: [Fault(truncate_to=len(body_of(run, where)) // 2)],
    "stall-before-answer": lambda run, where: [Fault(delay=1.2)],
    "stall-mid-body": lambda run, where: [Fault(stall_after=len(body_of(run, where)) // 2, delay=1.2)],
    "gzip-encoded": lambda run, where: [Fault(body=gzipped(body_of(run, where)), headers={"Content-Encoding": "gzip"})],
}


@pytest.mark.parametrize("where", LOCATIONS)
@pytest.mark.parametrize("fault", list(TRANSIENT))
def test_transient_fault_then_success(run: StoryRun, capsys, where: str, fault: str) -> None:
    path = getattr(PATHS, where)
    run.timeout = 0.5  # the stalls (1.2 s) must time out; loopback answers are far faster
    run.srv.script(path, TRANSIENT[fault](run, where))
    rc, _, err = run.lock(capsys)
    assert_good_lock(run, rc, err)
    assert len(run.gets(path)) == (4 if fault == "500-502-503" else 1 if fault == "gzip-encoded" else 2)


@pytest.mark.parametrize("where", LOCATIONS)
def test_429_waits_for_retry_after(run: StoryRun, capsys, where: str) -> None:
    path = getattr(PATHS, where)
    run.srv.script(path, [Fault(status=429, headers={"Retry-After": "1"})])
    start = time.monotonic()
    rc, _, err = run.lock(capsys)
    assert_good_lock(run, rc, err)
    assert len(run.gets(path)) == 2 and time.monotonic() - start >= 1.0


@pytest.mark.parametrize("where", LOCATIONS)
def test_redirect_to_another_host_is_followed(run: StoryRun, capsys, where: str) -> None:
    """The release-asset case: the file (or page) lives on another host; the redirect is followed."""
    path = getattr(PATHS, where)
    with IndexServer(run.world.root) as other:
        # a page's relative links follow it to its new host, which must be one the index uses (the
        # same host name); a file may move to any host (GitHub's release-asset storage)
        host = other.url if where == "page" else other.url.replace("127.0.0.1", "localhost")
        elsewhere = host + path.lstrip("/")
        run.srv.script(path, [Fault(status=302, headers={"Location": elsewhere})])
        rc, _, err = run.lock(capsys)
        assert_good_lock(run, rc, err)
        assert len(other.requests_for(path)) >= 1


def test_server_ignoring_range_downloads_whole_wheels_and_says_so(run: StoryRun, capsys, caplog) -> None:
    run.srv.ignore_ranges = True
    rc, _, err = run.lock(capsys)
    assert_good_lock(run, rc, err)
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("server ignored Range" in m and "numpy-2.2.0-py3-none-any.whl" in m for m in warned)


# -- faults that do not go away: one clear error, exit 3 -----------------------------------------


PERSISTENT = [
    # (where, fault, timeout, words in the error)
    ("page", Fault(status=503), 10.0, ("503 Service Unavailable after 5 attempts",)),
    ("page", Fault(status=429, headers={"Retry-After": "0"}), 10.0, ("429 Too Many Requests after 5 attempts",)),
    ("metadata", Fault(reset=True), 10.0, ("connection reset", "tried 5 times")),
    ("range", Fault(truncate_to=100), 10.0, ("body truncated: 100 of", "tried 5 times")),
    ("wheel", Fault(delay=0.8), 0.3, ("timed out after 0.3 s (tried 5 times)",)),
]


@pytest.mark.parametrize(("where", "fault", "timeout", "words"), PERSISTENT, ids=[f"{p[0]}-{i}" for i, p in enumerate(PERSISTENT)])
def test_persistent_fault_is_one_clear_error(run: StoryRun, capsys, where: str, fault: Fault, timeout: float, words: tuple[str, ...]) -> None:
    old_locks(run)
    path = getattr(PATHS, where)
    run.timeout = timeout
    run.srv.script(path, [fault] * ALWAYS)
    rc, out, err = run.lock(capsys)
    assert_clean_failure(run, rc, out, err, code=3, url_path=path, words=words)
    # five attempts, once: a lookup whose retries are spent is not repeated by a later round (a
    # reset on a pooled connection is sent once more on a fresh one within its attempt: at most one more)
    assert 5 <= len(run.gets(path)) <= (6 if fault.reset else 5)


def test_download_reset_every_time_leaves_only_resumable_bytes_and_the_next_run_resumes(run: StoryRun, capsys) -> None:
    old_locks(run)
    wheel = run.served(PATHS.wheel)
    run.srv.script(PATHS.wheel, [Fault(reset_after=len(wheel) // 3)] + [Fault(reset_after=1)] * 4)
    rc, out, err = run.lock(capsys)
    assert_clean_failure(run, rc, out, err, code=3, url_path=PATHS.wheel, words=("tried 5 times",))
    [part] = partial_files(run.cache)
    assert wheel.startswith(part.read_bytes()) and 0 < part.stat().st_size < len(wheel)
    have = part.stat().st_size
    rc, _, err = run.lock(capsys)
    assert_good_lock(run, rc, err)
    assert run.gets(PATHS.wheel)[-1].get("Range") == f"bytes={have}-"
    assert partial_files(run.cache) == []


# -- garbage answers: not retried, one clear error ------------------------------------------------


def _redirect_loop(run: StoryRun, path: str) -> None:
    """path -> path?a -> path?a: the client must see the loop, not follow it ten times."""
    run.srv.script(path, [Fault(status=302, headers={"Location": path + "?a"})] * ALWAYS)


GARBAGE = [
    (
        "page",
        "not-an-index-page",
        lambda run, p: run.srv.script(p, ALWAYS * [Fault(body=b"\x89PNG\r\n\x1a\n" + bytes(200), headers={"Content-Type": "image/png"})]),
        ("not an index page", "image/png"),
    ),
    ("page", "giant-page", lambda run, p: run.srv.script(p, ALWAYS * [Fault(body=b"<html>" + b" " * (64 * 2**20))]), ("over the 67108864-byte cap",)),
    (
        "page",
        "gzip-bomb-page",
        lambda run, p: run.srv.script(p, ALWAYS * [Fault(body=gzipped(b"<html>" + b" " * (65 * 2**20)), headers={"Content-Encoding": "gzip"})]),
        ("over the 67108864-byte cap; stopped reading",),
    ),
    (
        "metadata",
        "giant-metadata",
        lambda run, p: run.srv.script(p, ALWAYS * [Fault(body=b"Name: torch\n" + b" " * (16 * 2**20))]),
        ("METADATA is", "over the 5242880-byte cap"),
    ),
    (
        "metadata",
        "digest-mismatch",
        lambda run, p: run.srv.script(
            p, ALWAYS * [Fault(body=b"Metadata-Version: 2.1\nName: torch\nVersion: 2.12.0.dev20260307+cu130\nRequires-Dist: evil\n")]
        ),
        ("does not match", "promised by the index page", "nothing was cached"),
    ),
    ("page", "redirect-loop", _redirect_loop, ("redirect loop",)),
    ("metadata", "redirect-loop", _redirect_loop, ("redirect loop",)),
    ("range", "redirect-loop", _redirect_loop, ("redirect loop",)),
    ("wheel", "redirect-loop", _redirect_loop, ("redirect loop",)),
    (
        "wheel",
        "vanished-nightly",
        lambda run, p: run.srv.script(p, ALWAYS * [Fault(status=404)]),
        ("404 Not Found: the index lists this file but the server does not have it",),
    ),
    ("page", "401-no-credentials", lambda run, p: run.srv.script(p, ALWAYS * [Fault(status=401)]), ("401 Unauthorized", "hint: the index wants credentials")),
    ("jit_cache_page", "403-required-page", lambda run, p: run.srv.script(p, ALWAYS * [Fault(status=403)]), ("403 Forbidden",)),
    ("jit_cache_wheel", "403-release-asset", lambda run, p: run.srv.script(p, ALWAYS * [Fault(status=403)]), ("403 Forbidden",)),
]


@pytest.mark.parametrize(("where", "case", "make", "words"), GARBAGE, ids=[f"{g[0]}-{g[1]}" for g in GARBAGE])
def test_garbage_answer_is_one_clear_error(run: StoryRun, capsys, where: str, case: str, make, words: tuple[str, ...]) -> None:
    old_locks(run)
    path = getattr(PATHS, where)
    make(run, path)
    rc, out, err = run.lock(capsys)
    assert_clean_failure(run, rc, out, err, code=3, url_path=path, words=words)
    hops = 2 if case == "redirect-loop" else 1
    assert len(run.gets(path)) % hops == 0 and len(run.gets(path)) <= 4 * hops  # never retried within a lookup


def test_403_on_the_optional_legacy_page_is_a_note_not_an_error(run: StoryRun, capsys) -> None:
    """S3-style mirrors answer 403 for a missing object: on the optional AOT page that means "not
    here" (a warning and a note); the same 403 on a required page stays an error (above)."""
    run.srv.script(PATHS.legacy_page, [Fault(status=403)] * ALWAYS)
    rc, out, err = run.lock(capsys)
    assert rc == 0, err
    assert "torch2.12/flashinfer-python/ answered 403 Forbidden (no torch-ABI-bound AOT wheels" in run.lock_path.read_text()


def test_wheel_whose_bytes_do_not_match_the_page_sha256(tmp_path: Path, capsys) -> None:
    """PyPI lists numpy with a sha256; the server holds other bytes (and ignores Range, so the
    resolver must read the whole file): refused, nothing cached, no lock."""
    with story_run(tmp_path) as run:
        old_locks(run)
        real = run.served(PATHS.range)
        (run.world.root / PATHS.range.lstrip("/")).write_bytes(real.replace(b"numpy", b"numpz"))
        run.srv.ignore_ranges = True
        rc, out, err = run.lock(capsys)
        published = hashlib.sha256(real).hexdigest()
        assert_clean_failure(run, rc, out, err, code=3, url_path=PATHS.range, words=("sha256", published, "from the index page"))
        assert not [p for p in run.cache.rglob("metadata-v1/*") if p.is_file() and b"Name: numpy" in p.read_bytes()]


def test_jit_cache_page_that_lists_nothing_is_no_plan_not_an_unreachable_index(run: StoryRun, capsys) -> None:
    """A captive portal / an empty mirror: the index answered, it just offers no jit-cache. Exit 1."""
    old_locks(run)
    run.srv.script(PATHS.jit_cache_page, [Fault(body=b"<!DOCTYPE html><html><body><form>Sign in</form></body></html>")] * ALWAYS)
    rc, out, err = run.lock(capsys)
    assert_clean_failure(
        run,
        rc,
        out,
        err,
        code=1,
        url_path=None,
        words=("no FlashInfer version has every requested component", "no flashinfer-jit-cache for cu130 at 0.6.5", "hint: try --no-jit-cache"),
    )


def test_missing_jit_cache_page_is_no_plan(run: StoryRun, capsys) -> None:
    old_locks(run)
    run.srv.script(PATHS.jit_cache_page, [Fault(status=404)] * ALWAYS)
    rc, out, err = run.lock(capsys)
    assert_clean_failure(
        run, rc, out, err, code=1, url_path=None, words=("no FlashInfer version has every requested component", "no flashinfer-jit-cache for cu130 at 0.6.5")
    )


def test_missing_torch_page_keeps_the_installed_torch_and_says_why(run: StoryRun, capsys) -> None:
    """No torch page (a mirror without this CUDA variant): the installed torch is kept, never
    replaced by something else, and the plan says so."""
    run.srv.script(PATHS.page, [Fault(status=404)] * ALWAYS)
    rc, out, err = run_cli(capsys, *run.argv("resolve", "--format", "json"))
    assert rc == 0, err
    plan = json.loads(out)
    torch = next(p for p in plan["packages"] if p["name"] == "torch")
    assert (torch["action"], torch["version"]) == ("keep", "2.12.0.dev20260305+cu130")
    assert any("2.12.0.dev20260305+cu130 is kept; it is not on the index any more" in n for n in plan["notes"]), plan["notes"]


# -- https -> http ----------------------------------------------------------------------------------


@pytest.fixture
def tls_server(cert: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch):
    """A factory of loopback servers speaking TLS with a throwaway certificate the client trusts."""
    import ssl

    cert_file, key = cert
    monkeypatch.setenv("SSL_CERT_FILE", str(cert_file))  # read by httpx (trust_env) when the client is made
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key)

    def make(root: Path) -> tuple[IndexServer, str]:
        srv = IndexServer(root)
        srv._httpd.socket = context.wrap_socket(srv._httpd.socket, server_side=True)
        return srv, srv.url.replace("http://", "https://")

    return make


def test_redirect_from_https_to_plain_http_is_refused(run: StoryRun, capsys, tls_server) -> None:
    old_locks(run)
    secure, base = tls_server(run.world.root)
    with secure:
        argv = [a.replace(f"pytorch={run.srv.url}", f"pytorch={base}") for a in run.argv("lock")]
        rc, _, err = run_cli(capsys, *argv)
        assert rc == 0, err  # the https index works
        assert secure.requests_for(PATHS.page) and not run.gets(PATHS.page)
        old_locks(run)
        secure.script(PATHS.page, [Fault(status=302, headers={"Location": run.srv.url + PATHS.page.lstrip("/")})] * ALWAYS)
        rc, out, err = run_cli(capsys, *argv, "--cache-dir", str(run.root / "cold-cache"))
        assert_clean_failure(
            run, rc, out, err, code=3, url_path=PATHS.page, words=(f"error: {base}whl/nightly/cu130/torch/: redirected from https to plain http", "refused")
        )
        assert not run.gets(PATHS.page)  # the plain http URL was never asked


# -- install ------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_install_resumes_a_reset_download_and_a_dead_one_changes_nothing(tmp_path: Path, capsys, monkeypatch) -> None:
    """`install` downloads every wheel itself: a reset mid-download is resumed (Range) and the
    install completes; a download that never works is one clear error and the venv is untouched."""
    import shutil

    from support import install_world
    from support.doors import index_flags

    if not install_world._glibc_ok() or not Path(install_world.UV).exists():
        pytest.skip("needs Linux with glibc >= 2.28 and uv next to this interpreter")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.setenv("UV_PYTHON_DOWNLOADS", "never")
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    env = dict(os.environ)
    world = install_world.build_world(tmp_path / "www")
    [jit] = (world.root / "releases" / "download" / "v0.6.5").glob(f"flashinfer_jit_cache-0.6.5+cu130-*{install_world.PLAT}.whl")
    path = "/releases/download/v0.6.5/" + jit.name
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        torch = install_world.torch_wheel(world, install_world.NIGHTLY)
        cache = tmp_path / "cache"
        flags = [*index_flags(srv.url), "--cache-dir", str(cache), "--format", "json"]
        python = install_world.make_venv(tmp_path / "venv", env, torch)
        rc, _, err = run_cli(capsys, "resolve", "--python", python, *flags)  # METADATA now in the cache:
        assert rc == 0, err  # the install's only request for the jit-cache wheel is its download
        warm = tmp_path / "warm-cache"
        shutil.copytree(cache, warm)

        srv.script(path, [Fault(reset_after=jit.stat().st_size // 2), Fault(status=503)])
        mark = len(srv.log)
        rc, out, err = run_cli(capsys, "install", "--python", python, *flags)
        assert rc == 0, err
        assert install_world.installed(python)["flashinfer-jit-cache"] == "0.6.5+cu130"
        asked = [h.get("Range") for m, p, h in srv.log[mark:] if unquote(urlsplit(p).path) == path]
        assert len(asked) == 3 and asked[0] is None and asked[2] and asked[2].startswith("bytes=")  # resumed
        assert cache_problems(cache, world.root) == []

        other = install_world.make_venv(tmp_path / "other", env, torch)
        before = install_world.installed(other)
        srv.script(path, [Fault(status=503)] * ALWAYS)
        rc, out, err = run_cli(capsys, "install", "--python", other, *index_flags(srv.url), "--cache-dir", str(warm), "--format", "json")
        assert rc == 3 and out == "", err
        assert f"{jit.name}: 503 Service Unavailable after 5 attempts" in err
        assert install_world.installed(other) == before
        assert cache_problems(warm, world.root) == []
