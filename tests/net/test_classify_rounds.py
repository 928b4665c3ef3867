"""A wheel's ``.so`` members are read in rounds whose range requests overlap (issue 11 item 7: one
range per round trip made a 42-member wheel cost 44 round trips), within the byte budget; and scans
started while the closure is crawled are collected, not repeated, by ``classify_all``."""

from __future__ import annotations

import http.server
import random
import re
import threading
import time
from collections.abc import Iterator

import pytest
from packaging.utils import canonicalize_name
from packaging.version import Version
from support.elfbuild import synthetic_elf, wheel_bytes

from resolve_gpu_stack.data.definitions import load_definitions
from resolve_gpu_stack.model import IndexFile
from resolve_gpu_stack.net.http import HttpFetcher
from resolve_gpu_stack.net.scan.classify import RangeClassifier, within_budget
from resolve_gpu_stack.net.settings import FetchSettings, TransportSettings
from resolve_gpu_stack.scan.wheelscan.scanner import _merged

DEFS = load_definitions()

MEMBERS = 12


class _Counting(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    body = b""
    latency = 0.05
    in_flight = 0
    most = 0
    ranges = 0
    lock = threading.Lock()


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Counting

    def log_message(self, fmt: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        srv = self.server
        with srv.lock:
            srv.in_flight += 1
            srv.most = max(srv.most, srv.in_flight)
            srv.ranges += 1
        try:
            time.sleep(srv.latency)  # long enough that requests sent together are seen together
            body, size = srv.body, len(srv.body)
            m = re.fullmatch(r"bytes=(\d*)-(\d*)", self.headers.get("Range", ""))
            assert m is not None
            first, last = (size - int(m[2]), size - 1) if not m[1] else (int(m[1]), min(size - 1, int(m[2])))
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
            self.send_header("Content-Length", str(last - first + 1))
            self.end_headers()
            self.wfile.write(body[first : last + 1])
        finally:
            with srv.lock:
                srv.in_flight -= 1


def _serve(filler: int) -> Iterator[_Counting]:
    rng = random.Random(7)
    members: dict[str, bytes] = {}
    for i in range(MEMBERS):  # each .so apart from the others: a filler of incompressible bytes between
        members[f"demo/filler{i}.bin"] = rng.randbytes(filler)
        members[f"demo/_ops{i}.so"] = synthetic_elf(bits=64, big=False, needed=("libcudart.so.12", "libc.so.6"), lead=200 + i)
    srv = _Counting(("127.0.0.1", 0), _Handler)
    srv.body = wheel_bytes(members)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.fixture
def counting() -> Iterator[_Counting]:
    """Twelve CUDA .so members, each 100 KB from the next: too far apart to be one request."""
    yield from _serve(100_000)


@pytest.fixture
def close_members() -> Iterator[_Counting]:
    """The same members 2 KB apart."""
    yield from _serve(2_000)


def _file(srv: _Counting) -> IndexFile:
    host, port = srv.server_address[:2]
    url = f"http://{host!s}:{port}/demo-1.0-cp312-cp312-linux_x86_64.whl"
    return IndexFile(filename=url.rsplit("/", 1)[1], url=url, name=canonicalize_name("demo"), version=Version("1.0"), size=len(srv.body))


def test_one_wheels_member_ranges_are_requested_concurrently(counting: _Counting) -> None:
    with HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None) as fetcher:
        classify = RangeClassifier(fetcher.transport, None, DEFS.abi)
        found = classify(_file(counting))
    assert found.kind == "cuda", found.why
    # the tail and directory, then all twelve members' heads in one round: not 1 + 12 sequential reads
    assert counting.most >= MEMBERS - 1, counting.most
    assert classify.stats.wheels == 1 and classify.stats.bytes_read < len(counting.body)


def test_members_close_together_are_read_in_one_request(close_members: _Counting) -> None:
    """scipy's layout (a hundred small members, a few KB apart): one request for the round's heads,
    not one a member; the bytes in between are counted."""
    with HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None) as fetcher:
        classify = RangeClassifier(fetcher.transport, None, DEFS.abi)
        found = classify(_file(close_members))
    assert found.kind == "cuda", found.why
    assert close_members.ranges <= 3, close_members.ranges  # the tail (and directory), the members' heads
    assert classify.stats.bytes_read >= 12 * 2_000  # the bytes between the members crossed the wire and are counted


def test_a_rounds_near_ranges_are_joined_largest_span_first() -> None:
    ranges = [(5000, 5100), (0, 100), (200, 300), (200_000, 200_050)]
    assert _merged(ranges) == [(0, 5100), (200_000, 200_050)]  # 64 KiB apart at most: joined
    far = [(0, 100), (100_000, 100_300), (300_000, 300_050)]
    assert _merged(far) == [(100_000, 100_300), (0, 100), (300_000, 300_050)]  # none near: the largest first
    big = [(0, 6 * 2**20), (6 * 2**20 + 10, 12 * 2**20)]
    assert _merged(big) == big  # a span stays at most 8 MiB


def test_connections_bound_the_requests_in_flight(counting: _Counting) -> None:
    with HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None) as fetcher:
        classify = RangeClassifier(fetcher.transport, None, DEFS.abi, connections=3)
        found = classify(_file(counting))
    assert found.kind == "cuda"
    assert 2 <= counting.most <= 3, counting.most


def test_a_round_keeps_the_budget_for_the_first_member() -> None:
    ranges = [(0, 100), (200, 260), (300, 360), (400, 460)]
    assert within_budget(ranges, 99) == []  # the first does not fit: the budget is reached
    assert within_budget(ranges, 100) == [(0, 100)]  # the others only within half of what is left
    assert within_budget(ranges, 240) == [(0, 100), (200, 260), (300, 360)]
    assert within_budget(ranges, 10_000) == ranges


def test_a_tight_budget_reads_no_more_than_it(counting: _Counting) -> None:
    limit = 16 * 1024 + 4000  # the tail, then a member or two
    with HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None) as fetcher:
        classify = RangeClassifier(fetcher.transport, None, DEFS.abi, budget=lambda size: limit)
        found = classify(_file(counting))
    # nothing ties this CUDA wheel to torch (its METADATA, its name): the members read decide, and
    # the reason says the budget left some unread (a tied wheel stopped so is unknown: test_elf.py)
    assert found.kind == "cuda" and "budget" in found.why, found
    # the budget bounds the bytes of data asked for; bytes_read also counts each answer's status line
    # and headers (what crossed the wire): a few hundred bytes over it, never a member more
    assert 16 * 1024 < classify.stats.bytes_read <= limit + 1024
