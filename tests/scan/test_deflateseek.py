"""A raw deflate stream entered in its middle (scan/deflateseek.py): the bytes given are the
member's own, at the offsets the stream's length places them, and a byte copied from the unknown
window before the entry point is a gap, never a wrong byte. Both inflaters."""

from __future__ import annotations

import random
import zlib

import pytest
from support.forgery import low_entropy

from resolve_gpu_stack.scan import deflateseek, inflate

MB = 2**20


@pytest.fixture(params=["isal", "zlib"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "isal" and inflate._isal is None:
        pytest.skip("isal is not installed")
    monkeypatch.setattr(inflate, "BACKEND", request.param)
    return str(request.param)


def _deflated(data: bytes, level: int = 6) -> bytes:
    c = zlib.compressobj(level, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


def _object_like(n: int, seed: int) -> bytes:
    """Text and code-like runs with repeats (back-references) between random bytes."""
    rng = random.Random(seed)
    words = [rng.randbytes(rng.randint(4, 40)) for _ in range(500)]
    out = bytearray()
    while len(out) < n:
        out += rng.choice(words) if rng.random() < 0.8 else rng.randbytes(rng.randint(1, 300))
    return bytes(out[:n])


def _check(data: bytes, runs: list[tuple[int, bytes]]) -> int:
    """Every byte given is the member's own at its offset; the count given."""
    for at, piece in runs:
        assert piece == data[at : at + len(piece)], f"wrong bytes at {at}"
    return sum(len(p) for _, p in runs)


@pytest.mark.parametrize(("make", "share"), [(_object_like, 0.5), (low_entropy, 0.0)])
@pytest.mark.parametrize("cut", [0.3, 0.7])
def test_a_stream_entered_in_its_middle_gives_the_members_own_bytes_where_they_are(make, share: float, cut: float, backend: str) -> None:  # type: ignore[no-untyped-def]
    """What is given is right; how much of it the window leaves is the data's (16 byte values
    repeat so densely that copies of copies reach back to the entry point everywhere)."""
    data = make(2 * MB, 1)
    comp = _deflated(data)
    entry = deflateseek.enter(comp[int(len(comp) * cut) :], len(data), search=MB)
    assert entry is not None
    assert 0 < entry.out_start < len(data) * (cut + 0.1)
    given = _check(data, deflateseek.exact_regions(entry, [(entry.out_start, len(data))]))
    assert given >= share * (len(data) - entry.out_start)


def test_stored_blocks_are_entered(backend: str) -> None:
    data = random.Random(2).randbytes(3 * MB)  # incompressible: zlib writes stored blocks
    comp = _deflated(data)
    entry = deflateseek.enter(comp[MB:], len(data), search=MB)
    assert entry is not None and entry.start.stored and entry.witness is not None and entry.witness.stored
    # given from the witness on: the next stored block, inflated on its own, gives the same bytes
    assert _check(data, deflateseek.exact_regions(entry, [(0, len(data))])) == len(data) - entry.witness_out


def test_bytes_copied_from_before_the_entry_point_are_left_out_not_guessed(backend: str) -> None:
    rng = random.Random(3)
    pool = rng.randbytes(4096)
    copies = b"".join(pool[o : o + 40] for o in (rng.randrange(4056) for _ in range(40_000)))  # every byte a copy of a copy
    literal = rng.randbytes(200_000)
    data = copies + literal
    comp = _deflated(data)
    entry = deflateseek.enter(comp[len(_deflated(copies)) // 3 :], len(data), search=MB)
    assert entry is not None and len(pool) < entry.out_start < len(copies)
    runs = deflateseek.exact_regions(entry, [(0, len(data))])
    given = _check(data, runs)
    assert given < len(literal) + 64 * 2**10  # the copies are not given
    assert any(at <= len(copies) + 8192 and at + len(p) == len(data) for at, p in runs)  # the literal end is


def test_regions_are_given_only_where_asked(backend: str) -> None:
    data = _object_like(4 * MB, 5)
    comp = _deflated(data)
    entry = deflateseek.enter(comp[len(comp) // 2 :], len(data), search=MB)
    assert entry is not None
    asked = [(3 * MB, 3 * MB + 100), (3 * MB + 50, 3 * MB + 5000), (4 * MB - 10, 4 * MB + 4096)]
    runs = deflateseek.exact_regions(entry, asked)
    _check(data, runs)
    assert [(at, at + len(p)) for at, p in runs] == [(3 * MB, 3 * MB + 5000), (4 * MB - 10, 4 * MB)]
    assert deflateseek.exact_regions(entry, [(0, 100)]) == []  # before the entry point: nothing


def test_garbage_and_a_stream_that_does_not_end_are_not_entered(backend: str) -> None:
    assert deflateseek.enter(random.Random(6).randbytes(256 * 2**10), 10 * MB, search=32 * 2**10) is None
    data = low_entropy(2 * MB, 7)
    comp = _deflated(data)
    assert deflateseek.enter(comp[len(comp) // 2 : -1000], len(data), search=256 * 2**10) is None  # cut before its end
    assert deflateseek.enter(comp[len(comp) // 2 :] + b"\x00" * 64, len(data), search=256 * 2**10) is None  # bytes after its end
    assert deflateseek.enter(comp[len(comp) // 2 :], 1000, search=256 * 2**10) is None  # longer than the member


def test_once_the_two_inflations_agree_the_rest_is_inflated_once_and_given_whole(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    data = _object_like(8 * MB, 8)
    comp = _deflated(data)
    entry = deflateseek.enter(comp[len(comp) // 2 :], len(data), search=MB)
    assert entry is not None
    produced = {0: 0, 1: 0}  # output bytes by window: 0x00 (first byte 0) or 0xFF

    class Counting:
        def __init__(self, window: bytes | None) -> None:
            self._inner, self._which = inflate.raw_inflater(window), 1 if window and window[0] == 0xFF else 0

        def decompress(self, data: bytes | memoryview, max_length: int = 0) -> bytes:
            out = self._inner.decompress(data, max_length)
            produced[self._which] += len(out)
            return out

        def __getattr__(self, name: str) -> object:
            return getattr(self._inner, name)

    monkeypatch.setattr(deflateseek, "raw_inflater", Counting)
    tail = len(data) - entry.out_start
    runs = deflateseek.exact_regions(entry, [(entry.out_start, len(data))])
    assert produced[0] >= tail and produced[1] < tail, produced  # (each entry's ran until its first pieces agreed)
    given = _check(data, runs)
    assert runs[-1][0] + len(runs[-1][1]) == len(data) and given > tail - 2 * deflateseek.STEP


@pytest.mark.parametrize("keep_from", [6 * MB, 7 * MB + 123])
def test_the_end_kept_while_an_entry_was_followed_gives_the_same_bytes_without_inflating_it_again(
    backend: str, monkeypatch: pytest.MonkeyPatch, keep_from: int
) -> None:
    """Entered with ``keep_from`` (the first byte that will be asked for), the output's end is
    kept as each entry is followed to the end: once the two windows agree, the rest of what is
    asked comes from it, byte for byte what inflating on gives, and is not inflated again."""
    data = _object_like(8 * MB, 8)
    comp = _deflated(data)
    asked = [(keep_from, keep_from + MB), (keep_from + MB + 5000, len(data) + 4096)]
    plain = deflateseek.enter(comp[len(comp) // 2 :], len(data), search=MB)
    keeping = deflateseek.enter(comp[len(comp) // 2 :], len(data), search=MB, keep_from=keep_from)
    assert plain is not None and keeping is not None
    assert (keeping.start, keeping.out_start, keeping.witness, keeping.witness_out) == (plain.start, plain.out_start, plain.witness, plain.witness_out)
    assert keeping.tail == data[keep_from:] and keeping.witness_tail == data[keep_from:]
    produced = [0]

    class Counting:
        def __init__(self, window: bytes | None) -> None:
            self._inner = inflate.raw_inflater(window)

        def decompress(self, data: bytes | memoryview, max_length: int = 0) -> bytes:
            out = self._inner.decompress(data, max_length)
            produced[0] += len(out)
            return out

        def __getattr__(self, name: str) -> object:
            return getattr(self._inner, name)

    monkeypatch.setattr(deflateseek, "raw_inflater", Counting)
    runs = deflateseek.exact_regions(keeping, asked)
    from_kept = produced[0]
    assert runs == deflateseek.exact_regions(plain, asked) and _check(data, runs) > 0
    assert from_kept < produced[0] - from_kept, (from_kept, produced[0] - from_kept)


def test_a_tail_that_holds_only_the_streams_last_block_is_entered_there(backend: str) -> None:
    """The last block's start is looked for after every other block's (a long tail never starts
    inside it): a tail that holds nothing else is still entered, at it."""
    first, last = _object_like(MB, 11), _object_like(12 * 2**10, 12)  # one block
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    c.compress(first)
    c.flush(zlib.Z_FULL_FLUSH)  # the block ends, on a byte, and nothing after it refers back
    tail = c.compress(last) + c.flush()
    assert list(deflateseek.block_starts(tail, search=len(tail))) == []  # no block but the last
    entry = deflateseek.enter(tail, len(first) + len(last), search=len(tail))
    assert entry is not None and entry.out_start == len(first) and not entry.start.stored
    # placed, but with no second block start to inflate the same bytes its own are not given: a
    # tail's first bits that are no block start can inflate to the end too (the caller reads the
    # member from its start)
    assert entry.witness is None and deflateseek.exact_regions(entry, [(len(first), len(first) + len(last))]) == []
