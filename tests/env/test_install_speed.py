"""Install speed without losing a check: the wheel cache skips re-hashing an unchanged file, and
the interpreter is probed in the background, once per run where the run allows it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from support.wheels import build_wheel

import resolve_gpu_stack.net.wheelcache as wheelcache
from resolve_gpu_stack.env.probe import inspect_environment, start_probe
from resolve_gpu_stack.errors import UsageError
from resolve_gpu_stack.net.download import WheelCache, store_local


@pytest.fixture
def stored(tmp_path: Path):
    wheel = build_wheel(tmp_path / "src", "flashinfer-cubin", "0.6.5", "py3-none-any", padding=50_000)
    cache = WheelCache(tmp_path / "wheels")
    hit = store_local(wheel.path, sha256=wheel.sha256, size=wheel.size, cache=cache)
    return wheel, cache, hit


def count_hashing(monkeypatch) -> list[Path]:
    calls: list[Path] = []
    real = wheelcache.file_sha256

    def counted(path: Path):
        calls.append(path)
        return real(path)

    monkeypatch.setattr(wheelcache, "file_sha256", counted)
    return calls


def test_an_unchanged_cache_entry_is_not_hashed_again(stored, monkeypatch):
    wheel, cache, hit = stored
    calls = count_hashing(monkeypatch)
    again = cache.lookup(wheel.sha256, wheel.filename, wheel.size)
    assert again == hit and calls == []


def test_a_rewritten_entry_with_its_old_mtime_is_hashed_and_dropped(stored, monkeypatch):
    wheel, cache, hit = stored
    st = hit.path.stat()
    data = bytearray(hit.path.read_bytes())
    data[-100] ^= 0xFF  # same size, same mtime: only the ctime tells
    hit.path.write_bytes(bytes(data))
    os.utime(hit.path, ns=(st.st_atime_ns, st.st_mtime_ns))
    calls = count_hashing(monkeypatch)
    assert cache.lookup(wheel.sha256, wheel.filename, wheel.size) is None
    assert calls == [hit.path] and not hit.path.exists()


def test_an_entry_without_a_record_is_hashed_once_then_trusted(stored, monkeypatch):
    wheel, cache, hit = stored
    for record in (cache.root / "verified").rglob("*.json"):
        record.unlink()
    calls = count_hashing(monkeypatch)
    assert cache.lookup(wheel.sha256, wheel.filename, wheel.size) == hit
    assert cache.lookup(wheel.sha256, wheel.filename, wheel.size) == hit
    assert calls == [hit.path]


def test_a_wrong_size_is_a_miss_without_hashing(stored, monkeypatch):
    wheel, cache, hit = stored
    calls = count_hashing(monkeypatch)
    assert cache.lookup(wheel.sha256, wheel.filename, wheel.size + 1) is None
    assert calls == [] and not hit.path.exists()


def test_a_background_probe_answers_what_inspect_environment_does():
    probe = start_probe(sys.executable)
    env = probe.result()
    assert probe.result() is env  # one subprocess, one answer
    assert env.target == inspect_environment(sys.executable).target


def test_a_background_probe_checks_the_path_at_once(tmp_path: Path):
    with pytest.raises(UsageError, match="no such file"):
        start_probe(tmp_path / "nope")


def test_a_closed_probe_leaves_no_process():
    probe = start_probe(sys.executable)
    proc = probe._proc
    probe.close()
    assert proc is not None and proc.returncode is not None
    with pytest.raises(UsageError):
        probe.result()
