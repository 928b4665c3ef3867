"""Issue 48: a forged wheel is never planned, inspected or installed as "runs".

``evilkern``'s ``.so`` truly imports ``c10::stand_in_missing()``, which the kept torch does not
export; 6 MiB of stored padding hide a second, self-consistent chain of deflate blocks (35 stored,
then a fixed-Huffman block holding the tables with that name renamed) that rejoins the real stream
(``tests/support/forgery.py``). A reader that enters the stream near the member's end, checking that two
inflations after windows of 0x00 and 0xFF agree, enters the fake chain and reads the renamed
table: "runs". That is shown here against the reader (``ElfStream`` with ``seek``, which the kept
torch's exports still use), then every door is driven over a loopback world with the forged wheel
beside the abi world's packages: the verdict rests on a read from the member's start, and install
reads it again from the verified file, so a lock that claims "runs" (recorded by the old reader,
or edited) is refused before anything is installed, naming both readings.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
import zlib
from pathlib import Path

import pytest
import tomllib
from support.abi_doors import DECLARED, WHY, _assert_refused, _end_first_abi, installed_names, venv_with_the_kept_torch
from support.abi_world import NIGHTLY, have_cxx
from support.doors import index_flags, run_cli
from support.forgery import MISSING, RENAMED, readelf_symbols
from support.paths import REPO

from resolve_gpu_stack.net.cache import HttpCache
from resolve_gpu_stack.net.scan.classify import SCAN_SCHEMA
from resolve_gpu_stack.scan import deflateseek, zipmeta
from resolve_gpu_stack.scan.elfstream import ElfStream
from resolve_gpu_stack.scan.wheelscan import scan_wheel

pytestmark = pytest.mark.skipif(not have_cxx(), reason="needs a C++ compiler to build the shared objects")

MB = 2**20


def _fed(size: int, comp: bytes, *, seek: bool) -> ElfStream:
    stream = ElfStream(zipmeta.DEFLATED, size, len(comp), seek=seek)
    while (span := stream.wanted(len(comp))) is not None:
        end = span[1] if stream.reading_end else min(span[1], span[0] + 512 * 2**10)
        stream.feed(span[0], comp[span[0] : end])
    return stream


def _imports(stream: ElfStream) -> list[str]:
    assert stream.structure is not None and stream.structure.symbols is not None, stream.error
    return [s for s in stream.structure.symbols.imports if "stand_in_missing" in s]


def test_the_forgery_imports_the_missing_name_and_no_longer_fools_a_read_entered_at_the_end(forged, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The truth (a plain inflation, and readelf/nm where installed) and the attack: the hidden
    chain inflates to the end after either window, the same bytes, so the window check alone let
    the end-first reader take the renamed table (before 2026-12-07). A second block start, inflated
    on its own, does not give those bytes: none is given, and the end-first reader reads the truth."""
    _, _, _, member = forged
    assert zlib.decompressobj(-15).decompress(member.deflated) == member.data
    so = tmp_path / "forged.so"
    so.write_bytes(member.data)
    found = readelf_symbols(so)
    if found is not None:
        assert MISSING.decode() in found[0] and RENAMED.decode() not in found[0], found
    # the hidden chain inflates to the end after either window, the same bytes
    outs = []
    for window in (bytes(32 * 2**10), b"\xff" * 32 * 2**10):
        d = zlib.decompressobj(-15, zdict=window)
        outs.append(d.decompress(b"\x00" + member.deflated[member.fake_entry :]))
        assert d.eof and not d.unused_data
    t0, t1 = member.tables
    size = len(member.data)
    tables = outs[0][len(outs[0]) - (size - t0) : len(outs[0]) - (size - t1)]  # placed by the output's length
    assert outs[0] == outs[1] and RENAMED in tables and MISSING not in tables
    entry = deflateseek.enter(member.deflated[-2 * MB :], len(member.data), search=deflateseek.SEARCH_STEP * 64)
    assert entry is not None and entry.start.stored
    given = b"".join(b for _, b in deflateseek.exact_regions(entry, [member.tables]))
    assert RENAMED not in given  # the window check holds for the chain; the witness does not agree
    assert _imports(_fed(len(member.data), member.deflated, seek=True)) == [MISSING.decode()]  # the attack fails
    assert _imports(_fed(len(member.data), member.deflated, seek=False)) == [MISSING.decode()]  # read from the start


def _raw_member(path: Path, name: str) -> tuple[bytes, bytes]:
    """(the member ``name``'s inflated bytes, its raw deflate data) of the wheel at ``path``."""
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(name)
        data = zf.read(name)
    blob = path.read_bytes()
    local = info.header_offset
    start = local + 30 + int.from_bytes(blob[local + 26 : local + 28], "little") + int.from_bytes(blob[local + 28 : local + 30], "little")
    return data, blob[start : start + info.compress_size]


def test_a_witness_is_no_proof_of_a_block_boundary_so_the_wheel_scan_reads_from_the_start(forged, capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``evilpair``: the same object, its hidden chain with two fake stored headers in each real
    stored block. Entering its last 2 MB, the first block start is a fake one and the second, the
    witness, is fake too: they agree, and the bytes given are the renamed table (an end-first read
    of a wheel would say "runs"). So a wheel's verdict never rests on a member's end (issue 53,
    tilelang's 33.7 MB read from its start): the scan and every door read the truth."""
    from resolve_gpu_stack.data.definitions import load_definitions

    world, srv, path, _ = forged
    pair = next(path.parent.glob("evilpair-*.whl"))
    data, raw = _raw_member(pair, "evilpair/_C.so")
    assert zlib.decompressobj(-15).decompress(raw) == data and MISSING in data and RENAMED not in data  # the truth
    entry = deflateseek.enter(raw[-2 * MB :], len(data), search=deflateseek.SEARCH_STEP * 64)
    assert entry is not None and entry.witness is not None
    name = data.rfind(MISSING)  # in the tables at the member's end (patchelf's layout)
    given = deflateseek.exact_regions(entry, [(name, name + len(MISSING))])
    assert given == [(name, RENAMED)]  # both block starts are the forger's: they agree on its name
    assert _imports(_fed(len(data), raw, seek=True)) == [RENAMED.decode()]  # an end-first read is fooled
    assert _imports(_fed(len(data), raw, seek=False)) == [MISSING.decode()]
    whole = pair.read_bytes()
    abi = scan_wheel(lambda a, b: whole[a:b], len(whole)).abi(load_definitions().abi)
    assert MISSING.decode() in abi.cxx and RENAMED.decode() not in abi.cxx
    target = [*DECLARED[:6], *index_flags(srv.url), "--cache-dir", str(tmp_path / "c")]
    code, out, err = run_cli(capsys, "inspect", "evilpair==1.0", *target, "--format", "json")  # by URL: range reads
    report = json.loads(out)
    assert code == 1 and "Traceback" not in err, err
    assert report["verdict"]["runs"] is False and WHY in report["verdict"]["refusal"], report["verdict"]
    code, out, err = run_cli(capsys, "resolve", *DECLARED, *index_flags(srv.url), "--cache-dir", str(tmp_path / "c"), "--with", "evilpair", "--format", "json")
    assert code == 1 and out == "" and "evilpair 1.0" in err and WHY in err and "Traceback" not in err, err


def test_the_wheel_scan_reads_the_member_from_its_start(forged) -> None:  # type: ignore[no-untyped-def]
    from resolve_gpu_stack.data.definitions import load_definitions

    _, _, path, _ = forged
    data = path.read_bytes()
    abi = scan_wheel(lambda a, b: data[a:b], len(data)).abi(load_definitions().abi)
    assert abi.kind == "torch" and MISSING.decode() in abi.cxx and RENAMED.decode() not in abi.cxx


def test_resolve_lock_candidates_and_inspect_refuse_it(forged, capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    world, srv, path, _ = forged
    flags = [*DECLARED, *index_flags(srv.url), "--cache-dir", str(tmp_path / "c")]
    code, out, err = run_cli(capsys, "resolve", *flags, "--with", "evilkern", "--format", "json")
    _assert_refused(code, err)
    assert out == ""
    lock = tmp_path / "pylock.evil.toml"
    code, _, err = run_cli(capsys, "lock", *flags, "--with", "evilkern", "-o", str(lock))
    _assert_refused(code, err)
    assert not lock.exists()
    target = [*DECLARED[:6], *index_flags(srv.url), "--cache-dir", str(tmp_path / "c")]
    code, out, err = run_cli(capsys, "candidates", "evilkern", *target, "--format", "json")
    assert code == 0, err
    [row] = json.loads(out)["files"]
    assert row["fits_target"] is False and row["abi"].startswith("locked"), row
    untied = next(path.parent.glob("evilguess-*.whl"))  # a local file is read by structure: no guess from names
    for subject in ("evilkern==1.0", str(path), str(untied)):  # by URL (range reads), and local files
        code, out, err = run_cli(capsys, "inspect", subject, *target, "--format", "json")
        report = json.loads(out)
        assert code == 1 and "Traceback" not in err, (subject, err)
        assert report["verdict"]["runs"] is False and WHY in report["verdict"]["refusal"], (subject, report["verdict"])


def _poisoned_cache(cache: Path, path: Path) -> None:
    """The scan cache as the end-first reader left it: evilkern's scan read by entering the member
    near its end (what a tool before this fix recorded), under the wheel's sha256."""
    from resolve_gpu_stack.net.cache import HttpCache
    from resolve_gpu_stack.net.scan.classify import ScanRecord

    data = path.read_bytes()
    abi = _end_first_abi(path)
    http = HttpCache(cache)
    http.put_scan(f"sha256={hashlib.sha256(data).hexdigest()}", json.dumps(ScanRecord(abi=abi).to_dict(), sort_keys=True).encode())
    http.close()


@pytest.mark.slow
def test_install_and_install_lock_read_the_verdict_again_from_the_verified_file(forged, capsys, tmp_path, uv_env) -> None:  # type: ignore[no-untyped-def]
    """A plan that says "runs" (its scan recorded by the end-first reader) installs nothing: the
    downloaded file, read from its start, refuses it, and the message names both readings. The
    same for ``install --lock`` of a lock that says so (``check`` cannot tell: it reads no wheel)."""
    world, srv, path, _ = forged
    python, before = venv_with_the_kept_torch(world, srv, tmp_path / "venv", uv_env)
    cache = tmp_path / "c"
    _poisoned_cache(cache, path)
    flags = ["--python", python, "--flashinfer", "none", *index_flags(srv.url), "--cache-dir", str(cache)]
    lock = tmp_path / "pylock.evil.toml"
    code, _, err = run_cli(capsys, "lock", *flags, "--with", "evilkern", "-o", str(lock))
    assert code == 0, err  # the poisoned verdict: "runs"
    packages = tomllib.loads(lock.read_text())["tool"]["resolve-gpu-stack"]["packages"]
    row = next(p for p in packages if p["name"] == "evilkern")
    assert row["abi"] == "locked" and "abi-refusal" not in row and row["abi-torch"] == NIGHTLY
    have = installed_names(python, uv_env)
    for argv in (["install", *flags, "--with", "evilkern"], ["install", "--lock", str(lock), "--python", python, "--cache-dir", str(cache)]):
        code, out, err = run_cli(capsys, *argv, "--format", "json")
        assert code == 1 and out == "" and "Traceback" not in err, err
        assert "evilkern 1.0: planned as locked, runs" in err and WHY in err and "read from its start" in err, err
        assert installed_names(python, uv_env) == have
    assert {p: p.read_bytes() for p in before} == before
    # the dry runs download nothing: the plan's verdict shows, the install is what is guarded
    code, _, err = run_cli(capsys, "install", "--dry-run", *flags, "--with", "evilkern", "--format", "json")
    assert code == 0, err


@pytest.mark.slow
def test_install_refuses_it_at_the_plan_and_an_untied_copy_at_the_verified_file(forged, capsys, tmp_path, uv_env) -> None:  # type: ignore[no-untyped-def]
    """``evilkern`` is refused by the plan (dry run and real). ``evilguess`` holds the same object
    in a wheel nothing ties to torch: the plan's scan judges such a wheel's members by the library
    names in their first bytes (no torch name there: the tables were moved), a guess; install reads
    every member of the verified file by its structure, and refuses it, naming both readings."""
    world, srv, _, _ = forged
    python, _ = venv_with_the_kept_torch(world, srv, tmp_path / "venv", uv_env)
    flags = ["--python", python, "--flashinfer", "none", *index_flags(srv.url), "--cache-dir", str(tmp_path / "c")]
    have = installed_names(python, uv_env)
    for extra in (["--dry-run"], []):
        code, out, err = run_cli(capsys, "install", *flags, *extra, "--with", "evilkern", "--format", "json")
        _assert_refused(code, err)
    code, out, err = run_cli(capsys, "install", *flags, "--with", "evilguess", "--format", "json")
    assert code == 1 and out == "" and "Traceback" not in err, err
    assert "evilguess 1.0: planned as " in err and "read from its start: locked, refused" in err and WHY in err, err
    assert installed_names(python, uv_env) == have


def test_wheelhouse_refuses_a_lock_whose_verdict_the_file_does_not_hold(forged, capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``evilguess``'s lock says it needs no torch (the plan's scan guessed from the names in its
    first bytes); the wheelhouse reads the verified file by structure before it publishes anything:
    it links torch, and the export is refused, no page and no lock written. (The kept torch is on
    the nodes, not here: a version-locked wheel's imports are confirmed by ``install --lock``.)"""
    world, srv, _, _ = forged
    flags = [*DECLARED, *index_flags(srv.url), "--cache-dir", str(tmp_path / "c")]
    lock = tmp_path / "pylock.guess.toml"
    code, _, err = run_cli(capsys, "lock", *flags, "--with", "evilguess", "-o", str(lock))
    assert code == 0, err
    row = next(p for p in tomllib.loads(lock.read_text())["tool"]["resolve-gpu-stack"]["packages"] if p["name"] == "evilguess")
    assert "abi" not in row and row["coupling"] == "agnostic", row
    house = tmp_path / "house"
    code, out, err = run_cli(capsys, "wheelhouse", str(lock), "--output", str(house), "--cache-dir", str(tmp_path / "c"), "--format", "json")
    assert code == 1 and out == "" and "Traceback" not in err, err
    assert "wheelhouse refused" in err and "evilguess 1.0: planned as agnostic" in err and "read from its start: locked" in err, err
    assert not (house / lock.name).exists() and not list(house.glob("simple/*/index.html"))


def test_a_verdict_replayed_from_an_older_readers_record_is_locked_and_checked_as_provisional(capsys, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The bundled 2026-12-01 snapshot's scans were recorded by the reader that entered members
    near their end (schema 3): a lock made from it records ``abi-read = "recorded"`` on each
    verdict, and ``check`` notes them as provisional (install reads them again from the files)."""
    snapshot = REPO / "indexes" / "snapshots" / "2026-12-01"
    monkeypatch.chdir(tmp_path)
    argv = ["--python", "3.12", "--platform", "x86_64-manylinux_2_34", "--installed", "torch==2.15.0", "--torch", "installed"]
    argv += ["--with", "sglang", "--no-cubin", "--no-jit-cache", "--snapshot", str(snapshot), "--cache-dir", str(tmp_path / "c")]
    code, _, err = run_cli(capsys, "lock", *argv, "-o", "pylock.sglang.toml")
    assert code == 0, err
    packages = tomllib.loads((tmp_path / "pylock.sglang.toml").read_text())["tool"]["resolve-gpu-stack"]["packages"]
    provisional = sorted(p["name"] for p in packages if p.get("abi-read") == "recorded")
    assert "sglang-kernel" in provisional, provisional
    code, out, err = run_cli(capsys, "check", "pylock.sglang.toml")
    assert code == 0, err
    said = out + err
    assert "sglang-kernel" in said and "its verdict is provisional" in said, said


def test_an_untied_wheels_verdict_from_first_bytes_is_unverified_at_every_plan_door(forged, capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``evilguess``: the forged object in a wheel nothing ties to torch. At plan time its members are
    judged by the library names in their first bytes (no torch name there: the tables were moved),
    a guess the forger steers; every door that judges it without its whole file marks the verdict
    unverified, never "runs": resolve (JSON ``read: names``, the table), lock -o (``abi-read``),
    check (a note), candidates, inspect by name (``runs`` null). Install and wheelhouse read it
    again from the verified file (the tests above)."""
    world, srv, _, _ = forged
    flags = [*DECLARED, *index_flags(srv.url), "--cache-dir", str(tmp_path / "c")]
    code, out, err = run_cli(capsys, "resolve", *flags, "--with", "evilguess", "--format", "json")
    assert code == 0, err
    row = next(p for p in json.loads(out)["packages"] if p["name"] == "evilguess")
    assert row["abi"] is not None and row["abi"]["read"] == "names" and row["abi"]["refusal"] is None, row
    code, out, err = run_cli(capsys, "resolve", *flags, "--with", "evilguess", "--format", "table")
    assert code == 0, err
    assert next(line for line in out.splitlines() if " evilguess " in f" {line} ").split()[-1] == "UNVERIFIED", out
    lock = tmp_path / "pylock.guess.toml"
    code, _, err = run_cli(capsys, "lock", *flags, "--with", "evilguess", "-o", str(lock))
    assert code == 0, err
    locked = next(p for p in tomllib.loads(lock.read_text())["tool"]["resolve-gpu-stack"]["packages"] if p["name"] == "evilguess")
    assert locked["abi-read"] == "names" and "abi-refusal" not in locked, locked
    # (check also compares the lock with the snapshot this world stands on, which it is not: those findings are not evilguess's)
    findings = _check_findings(capsys, lock, world, srv, tmp_path)
    mine = [f for f in findings if f.get("package") == "evilguess" and "snapshot" not in f["message"]]
    assert [f["level"] for f in mine] == ["note"] and mine[0]["message"].startswith(
        "its verdict is unverified: judged from the library names in the first bytes"
    ), mine
    target = [*DECLARED[:6], *index_flags(srv.url), "--cache-dir", str(tmp_path / "c")]
    code, out, err = run_cli(capsys, "candidates", "evilguess", *target, "--format", "json")
    assert code == 0, err
    [candidate] = json.loads(out)["files"]
    assert candidate["abi"].startswith("no torch (unverified: judged from the library names"), candidate
    code, out, err = run_cli(capsys, "inspect", "evilguess==1.0", *target, "--format", "json")
    verdict = json.loads(out)["verdict"]
    assert verdict["runs"] is None and verdict["read"] == "names", verdict


def _check_findings(capsys, lock: Path, world, srv, tmp_path: Path) -> list[dict]:  # type: ignore[no-untyped-def]
    _, out, _ = run_cli(capsys, "check", str(lock), *index_flags(srv.url), "--cache-dir", str(tmp_path / "c"), "--format", "json")
    return list(json.loads(out)["findings"])


def _as_schema_4_wrote_it(entry: bytes) -> bytes:
    """A scan cache entry as the reader before ``read = names`` wrote it: scan schema 4, no ``read``
    key (a guess from the names in first bytes said nothing of it)."""
    data = json.loads(entry)
    assert data["schema"] == SCAN_SCHEMA and data.pop("read") == "names", data
    return json.dumps({**data, "schema": 4}, sort_keys=True).encode()


def test_a_guess_cached_before_it_was_marked_is_scanned_again_and_unverified(forged, capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A user's scan cache made before guesses were marked holds evilguess's "no torch" without a
    ``read`` key. It is not taken as read from the start: resolve (JSON, table), lock -o and
    candidates scan the wheel again (range reads on the loopback server) and say unverified."""
    world, srv, _, _ = forged
    [wheel] = sorted((world.root / "files").glob("evilguess-1.0-*.whl"))
    key = f"sha256={hashlib.sha256(wheel.read_bytes()).hexdigest()}"
    fresh = tmp_path / "fresh"
    code, _, err = run_cli(capsys, "resolve", *DECLARED, *index_flags(srv.url), "--cache-dir", str(fresh), "--with", "evilguess", "--format", "json")
    assert code == 0, err
    written = HttpCache(fresh).get_scan(key)
    assert written is not None
    old = _as_schema_4_wrote_it(written)

    def seeded(name: str) -> list[str]:
        cache = tmp_path / name
        HttpCache(cache).put_scan(key, old)
        assert HttpCache(cache).get_scan(key) == old
        return ["--cache-dir", str(cache)]

    def ranges_on_the_wheel() -> int:
        return sum(1 for _, path, headers in srv.log if path.endswith(wheel.name) and any(k.lower() == "range" for k in headers))

    flags = [*DECLARED, *index_flags(srv.url)]
    before = ranges_on_the_wheel()
    code, out, err = run_cli(capsys, "resolve", *flags, *seeded("c1"), "--with", "evilguess", "--format", "json")
    assert code == 0, err
    row = next(p for p in json.loads(out)["packages"] if p["name"] == "evilguess")
    assert row["abi"] is not None and row["abi"]["read"] == "names" and row["abi"]["refusal"] is None, row
    assert ranges_on_the_wheel() > before  # scanned again, not answered by the old entry
    again = HttpCache(tmp_path / "c1").get_scan(key)
    assert again is not None and json.loads(again)["schema"] == SCAN_SCHEMA and json.loads(again)["read"] == "names"
    code, out, err = run_cli(capsys, "resolve", *flags, *seeded("c2"), "--with", "evilguess", "--format", "table")
    assert code == 0, err
    assert next(line for line in out.splitlines() if " evilguess " in f" {line} ").split()[-1] == "UNVERIFIED", out
    lock = tmp_path / "pylock.guess.toml"
    code, _, err = run_cli(capsys, "lock", *flags, *seeded("c3"), "--with", "evilguess", "-o", str(lock))
    assert code == 0, err
    locked = next(p for p in tomllib.loads(lock.read_text())["tool"]["resolve-gpu-stack"]["packages"] if p["name"] == "evilguess")
    assert locked["abi-read"] == "names", locked
    code, out, err = run_cli(capsys, "candidates", "evilguess", *DECLARED[:6], *index_flags(srv.url), *seeded("c4"), "--format", "json")
    assert code == 0, err
    [candidate] = json.loads(out)["files"]
    assert "unverified" in candidate["abi"], candidate
