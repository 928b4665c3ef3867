"""Trust nothing a server sends, end to end (issue 15, items 1, 5 and 15): `lock -o` on the story
world while the loopback server sends a login page, another wheel, a corrupt zip or a 403 where a
wheel or its metadata should be. Each case ends in a good lock or in one clear error naming the
URL (exit 3), with nothing unverified pinned or left in the cache."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import zipfile
from pathlib import Path
from urllib.parse import unquote

import pytest
from support.faults import NEW_NIGHTLY, PATHS, TORCH_FILE, StoryRun, partial_files, replace_pypi_wheel, story_run, wheel_with_metadata
from support.hostile_inputs import corrupt_wheel
from support.lock_faults import ALWAYS, assert_clean_failure, assert_good_lock, old_locks
from support.server import Fault

from resolve_gpu_stack.net import download

NUMPY_FILE = PATHS.range.rsplit("/", 1)[1]


pytestmark = pytest.mark.usefixtures("fast_backoff")  # retries without the exponential wait (conftest.py)


def learnt_records(run: StoryRun, filename: str = TORCH_FILE) -> list[dict]:
    """The wheel cache's learnt digests of ``filename`` (other nightlies, e.g. triton, learn theirs)."""
    records = [json.loads(p.read_text()) for p in (run.cache / "wheels" / "urls").glob("*.json")]
    return [r for r in records if unquote(r["url"]).endswith("/" + filename)]


def cached_wheels(run: StoryRun, filename: str = TORCH_FILE) -> list[Path]:
    return sorted((run.cache / "wheels" / "sha256").rglob(filename))


# -- 1. a learnt hash pins only the wheel the file name says ----------------------------------------

LOGIN_PAGE = b"<html><body><form>Sign in to the proxy</form></body></html>"
OTHER_VERSION = wheel_with_metadata(TORCH_FILE, b"Metadata-Version: 2.1\nName: torch\nVersion: 2.11.0\n")
OTHER_PROJECT = wheel_with_metadata(TORCH_FILE, b"Metadata-Version: 2.1\nName: evil\nVersion: " + NEW_NIGHTLY.encode() + b"\n")

NOT_THE_WHEEL = [
    ("login-page", LOGIN_PAGE, "not an intact wheel"),
    ("other-version", OTHER_VERSION, "METADATA says torch 2.11.0, its file name torch " + NEW_NIGHTLY),
    ("other-project", OTHER_PROJECT, "METADATA says evil"),
    ("no-metadata", b"PK\x05\x06" + bytes(18), "no *.dist-info/METADATA"),
]


@pytest.mark.parametrize(("case", "body", "words"), NOT_THE_WHEEL, ids=[c[0] for c in NOT_THE_WHEEL])
def test_a_learnt_hash_is_never_recorded_for_what_is_not_the_wheel(run: StoryRun, capsys, case: str, body: bytes, words: str) -> None:
    """The nightly torch has no hash on its page: the lock hashes the download, which must first be
    the wheel its name says. Anything else is discarded, named with its URL, and pinned nowhere."""
    old_locks(run)
    run.srv.script(PATHS.wheel, [Fault(body=body, headers={"Content-Type": "application/octet-stream"})] * ALWAYS)
    rc, out, err = run.lock(capsys)
    assert_clean_failure(run, rc, out, err, code=3, url_path=PATHS.wheel, words=(words, "no sha256 was recorded"))
    assert learnt_records(run) == [] and cached_wheels(run) == []
    assert partial_files(run.cache) == []
    assert len(run.gets(PATHS.wheel)) == 1  # a wrong file is not retried


def test_an_unlisted_file_over_the_cap_is_not_written_or_pinned(run: StoryRun, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    old_locks(run)
    monkeypatch.setattr(download, "MAX_UNLISTED_BYTES", 1000)
    rc, out, err = run.lock(capsys)
    assert_clean_failure(run, rc, out, err, code=3, url_path=PATHS.wheel, words=("over the 1000-byte cap",))
    assert learnt_records(run) == [] and cached_wheels(run) == []


def test_an_endless_unlisted_body_stops_at_the_cap(run: StoryRun, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """No Content-Length to refuse up front: the download stops once the cap is passed."""
    old_locks(run)
    monkeypatch.setattr(download, "MAX_UNLISTED_BYTES", 4096)
    run.srv.script(PATHS.wheel, [Fault(body=b"\0" * 200_000, chunked=True)] * ALWAYS)
    rc, out, err = run.lock(capsys)
    assert_clean_failure(run, rc, out, err, code=3, url_path=PATHS.wheel, words=("more than 4096 bytes", "stopped"))
    assert learnt_records(run) == [] and partial_files(run.cache) == []


def test_a_bad_file_learnt_before_does_not_poison_later_runs(run: StoryRun, capsys, caplog) -> None:
    """A cache written before these checks holds a login page under a learnt digest: the next run
    re-checks it, drops it and its record, downloads the real wheel and pins that."""
    rc, _, err = run.lock(capsys)
    assert_good_lock(run, rc, err)
    [record] = learnt_records(run)
    cache = download.WheelCache.under(run.cache)
    bad_sha = hashlib.sha256(LOGIN_PAGE).hexdigest()
    poisoned = cache.path_for(bad_sha, TORCH_FILE)
    poisoned.parent.mkdir(parents=True)
    poisoned.write_bytes(LOGIN_PAGE)
    write_old_record(cache, record["url"], bad_sha, len(LOGIN_PAGE))
    for p in (run.cache / "wheels" / "sha256").rglob(TORCH_FILE):
        if p != poisoned:
            p.unlink()
    before = len(run.gets(PATHS.wheel))
    rc, _, err = run.lock(capsys)
    assert_good_lock(run, rc, err)
    assert bad_sha not in run.lock_path.read_text() and not poisoned.exists()
    assert len(run.gets(PATHS.wheel)) == before + 1  # downloaded again
    [record] = learnt_records(run)
    assert record["sha256"] == hashlib.sha256(run.served(PATHS.wheel)).hexdigest()
    assert any("is not the wheel its name says" in r.getMessage() for r in caplog.records)


def write_old_record(cache: download.WheelCache, url: str, sha256: str, size: int) -> None:
    """A learnt digest as an older version recorded it: without saying how its file was checked."""
    path = cache.root / "urls" / (cache.url_key(url) + ".json")
    path.write_text(json.dumps({"url": url, "sha256": sha256, "size": size}))


# -- 5. every failure while reading a wheel is the documented error ---------------------------------


CORRUPTIONS = ("bad-deflate", "unknown-method", "encrypted", "non-utf8-name")


@pytest.mark.parametrize("ranges", [False, True], ids=["server-ignores-range", "range-reads"])
@pytest.mark.parametrize("how", CORRUPTIONS)
def test_a_corrupt_wheel_is_one_clear_error_naming_its_url(tmp_path: Path, capsys, how: str, ranges: bool) -> None:
    """numpy (hash listed, so the bytes are what the index promised) has a broken METADATA member:
    read by ranges or whole, it is exit 3 naming the wheel, never a traceback."""

    def build(world) -> None:
        real = (world.root / PATHS.range.lstrip("/")).read_bytes()
        replace_pypi_wheel(world, NUMPY_FILE, corrupt_wheel(real, how))

    with story_run(tmp_path, build=build) as run:
        old_locks(run)
        run.srv.ignore_ranges = not ranges
        rc, out, err = run.lock(capsys)
        if ranges and how == "non-utf8-name":  # range reads decode names leniently and read METADATA fine
            assert rc == 0, err
            return
        assert_clean_failure(run, rc, out, err, code=3, url_path=PATHS.range, words=("cannot read METADATA from the wheel",))


@pytest.mark.parametrize("how", CORRUPTIONS)
def test_a_corrupt_download_is_one_clear_error_naming_its_url(run: StoryRun, capsys, how: str) -> None:
    """The nightly torch (no hash: its sha256 is learnt) downloads as a corrupt zip."""
    old_locks(run)
    run.srv.script(PATHS.wheel, [Fault(body=corrupt_wheel(run.served(PATHS.wheel), how), headers={"Content-Type": "application/octet-stream"})] * ALWAYS)
    rc, out, err = run.lock(capsys)
    assert_clean_failure(run, rc, out, err, code=3, url_path=PATHS.wheel, words=("not an intact wheel", "no sha256 was recorded"))
    assert learnt_records(run) == []


# -- 15. a 403 on a .metadata sidecar falls back to the range read -----------------------------------


def test_403_on_a_metadata_sidecar_falls_back_to_range_reads(run: StoryRun, capsys, caplog) -> None:
    caplog.set_level(logging.INFO, logger="resolve_gpu_stack.net.metadata")
    run.srv.script(PATHS.metadata, [Fault(status=403)] * ALWAYS)
    rc, _, err = run.lock(capsys)
    assert_good_lock(run, rc, err)
    assert len(run.gets(PATHS.metadata)) == 1  # not retried
    assert any(h.get("Range") for h in run.gets(PATHS.wheel)), "METADATA read from the wheel by ranges"
    assert any("no metadata sidecar (403); reading the wheel instead" in r.getMessage() and r.levelname == "INFO" for r in caplog.records)


# -- issue 22, item 4: a learnt hash only for an intact wheel (every member's CRC) --------------------


def with_a_corrupt_member(data: bytes) -> bytes:
    """The wheel ``data`` plus a stored member whose bytes no longer match its CRC: still a valid
    zip with the right METADATA (what the older checks looked at), but not an intact wheel."""
    src = zipfile.ZipFile(io.BytesIO(data))
    buf = io.BytesIO()
    payload = b"\x7fELF" + bytes(range(256)) * 8
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as out:
        out.writestr(zipfile.ZipInfo("torch/lib/libtorch_stub.so"), payload, compress_type=zipfile.ZIP_STORED)
        for info in src.infolist():
            out.writestr(info, src.read(info))
    broken = bytearray(buf.getvalue())
    at = bytes(broken).index(payload) + 100
    broken[at] ^= 0xFF
    return bytes(broken)


def test_a_wheel_with_one_corrupt_member_is_never_pinned(run: StoryRun, capsys) -> None:
    """The nightly torch (no index hash) arrives as a valid zip whose METADATA is right and one of
    whose members fails its CRC: no sha256 is learnt or cached (before: pinned, and every later
    run reused the bad file); once the server sends the real wheel, the next lock pins that."""
    old_locks(run)
    run.srv.script(PATHS.wheel, [Fault(body=with_a_corrupt_member(run.served(PATHS.wheel)), headers={"Content-Type": "application/octet-stream"})])
    rc, out, err = run.lock(capsys)
    assert_clean_failure(run, rc, out, err, code=3, url_path=PATHS.wheel, words=("torch/lib/libtorch_stub.so fails its CRC check", "no sha256 was recorded"))
    assert learnt_records(run) == [] and cached_wheels(run) == []
    assert run.srv.faults.get(PATHS.wheel) == []  # sent once, not retried; from here on the server sends the real wheel
    rc, _, err = run.lock(capsys)
    assert_good_lock(run, rc, err)
    [record] = learnt_records(run)
    assert record["sha256"] == hashlib.sha256(run.served(PATHS.wheel)).hexdigest() and record["checked"] == "metadata+crc"


def test_a_cached_wheel_with_a_corrupt_member_is_dropped_and_fetched_again(run: StoryRun, capsys, caplog) -> None:
    """A cache an older version filled holds, under a learnt digest, a wheel with one corrupt
    member (it passed the older METADATA-only check): the next run checks every CRC, drops it and
    its record, downloads the real wheel and pins that; a record written after the full check is
    trusted without reading the file again."""
    rc, _, err = run.lock(capsys)
    assert_good_lock(run, rc, err)
    [record] = learnt_records(run)
    cache = download.WheelCache.under(run.cache)
    bad = with_a_corrupt_member(run.served(PATHS.wheel))
    bad_sha = hashlib.sha256(bad).hexdigest()
    poisoned = cache.path_for(bad_sha, TORCH_FILE)
    poisoned.parent.mkdir(parents=True)
    poisoned.write_bytes(bad)
    write_old_record(cache, record["url"], bad_sha, len(bad))
    before = len(run.gets(PATHS.wheel))
    rc, _, err = run.lock(capsys)
    assert_good_lock(run, rc, err)
    assert bad_sha not in run.lock_path.read_text() and not poisoned.exists()
    assert len(run.gets(PATHS.wheel)) == before + 1
    assert any("fails its CRC check" in r.getMessage() for r in caplog.records)
    rc, _, err = run.lock(capsys)  # the new record says the file was checked whole: reused as it is
    assert_good_lock(run, rc, err)
    assert len(run.gets(PATHS.wheel)) == before + 1
