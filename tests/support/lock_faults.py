"""`lock -o` on the story world while the server misbehaves: the old lock files, and the two endings
(a good lock, or one clear error with nothing written) every fault test asserts."""

from __future__ import annotations

import hashlib
from pathlib import Path
from urllib.parse import quote

import pytest

from resolve_gpu_stack.lock.constraints import OVERRIDES_HEADER
from support.faults import PATHS, StoryRun, story_run

OLD = {
    "pylock.x.toml": b"# the lock from yesterday\n",
    "constraints.txt": b"# yesterday's constraints\n",
    "overrides.txt": b"# yesterday's overrides\n",
}


@pytest.fixture
def run(tmp_path: Path):
    with story_run(tmp_path) as r:
        yield r


def old_locks(run: StoryRun) -> None:
    run.lock_path.parent.mkdir(parents=True, exist_ok=True)
    for name, data in OLD.items():
        (run.lock_path.parent / name).write_bytes(data)


def assert_good_lock(run: StoryRun, rc: int, err: str) -> None:
    assert rc == 0, err
    text = run.lock_path.read_text()
    torch_sha = hashlib.sha256(run.served(PATHS.wheel)).hexdigest()
    assert torch_sha in text, "the lock must hold the sha256 of the real torch wheel"
    assert 'version = "0.6.5+cu130"' in text and "99.0.0" not in text
    assert "flashinfer-jit-cache==0.6.5+cu130" in run.constraints_path.read_text()
    assert run.cache_problems() == []
    assert run.overrides_path.read_text().startswith(OVERRIDES_HEADER), "lock writes the overrides file beside the constraints"
    assert sorted(p.name for p in run.lock_path.parent.iterdir()) == ["constraints.txt", "overrides.txt", "pylock.x.toml"]


def assert_clean_failure(run: StoryRun, rc: int, out: str, err: str, *, code: int, url_path: str | None, words: tuple[str, ...]) -> None:
    """One clear error naming the URL and the cause; nothing corrupted, nothing written."""
    assert rc == code, err
    assert "Traceback" not in err and out == ""
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, err
    if url_path is not None:
        assert url_path in errors[0] or quote(url_path) in errors[0], errors[0]
    for word in words:
        assert word in err, f"{word!r} not in {err!r}"
    assert run.outputs() == OLD, "a failed run must leave the old lock files byte-identical"
    assert sorted(p.name for p in run.lock_path.parent.iterdir()) == sorted(OLD), "no temp lock file"
    assert run.cache_problems() == []


# A fault "that does not go away" answers every request for its URL (more than any run asks).
ALWAYS = 40
