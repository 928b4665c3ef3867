"""Issue 15 item 2: an overall deadline per request. A server that trickles its headers or its
body a byte at a time never trips the per-read timeout; the deadline (REQUEST_DEADLINE_FACTOR x
--timeout, plus credit for bytes received) ends it, names it, and does not retry it."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.faults import PATHS, StoryRun
from support.lock_faults import ALWAYS, assert_clean_failure, old_locks
from support.server import Fault, IndexServer

from resolve_gpu_stack.errors import CrawlError
from resolve_gpu_stack.net import deadline
from resolve_gpu_stack.net.settings import TransportSettings
from resolve_gpu_stack.net.transport import Transport

pytestmark = pytest.mark.usefixtures("fast_backoff")  # retries without the exponential wait (conftest.py)


def test_the_deadline_is_derived_from_the_timeout() -> None:
    transport = Transport(TransportSettings(timeout=2.0, trust_env=False))
    try:
        assert transport.deadline == 2.0 * deadline.REQUEST_DEADLINE_FACTOR == 8.0
    finally:
        transport.close()


TRICKLES = {
    "body": lambda: Fault(trickle=0.05),
    "headers": lambda: Fault(trickle_headers=0.05),
}


@pytest.mark.parametrize("where", ["page", "wheel"])
@pytest.mark.parametrize("what", list(TRICKLES))
def test_a_trickled_answer_ends_at_the_deadline(run: StoryRun, capsys, what: str, where: str) -> None:
    """20 bytes a second, each read well within --timeout 0.5: the 2 s deadline ends the request."""
    old_locks(run)
    path = getattr(PATHS, where)
    run.timeout = 0.5
    run.srv.script(path, [TRICKLES[what]()] * ALWAYS)
    began = time.monotonic()
    rc, out, err = run.lock(capsys)
    took = time.monotonic() - began
    assert_clean_failure(run, rc, out, err, code=3, url_path=path, words=("no complete answer within 2 s", "x --timeout 0.5 s"))
    assert len(run.gets(path)) == 1, "a request past its deadline is not retried"
    assert took < 2 + 3, f"took {took:.1f} s"


def test_a_slow_but_steady_download_earns_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """1 KiB every 0.1 s (10 KiB/s) for 3 s, over a 1 s deadline: the transfer-rate credit (2 KiB/s
    here) keeps it going; the same answer a byte at a time does not."""
    body = bytes(range(256)) * 120  # 30 KiB
    (tmp_path / "f.bin").write_bytes(body)
    transport = Transport(TransportSettings(timeout=0.25, retries=0, trust_env=False, min_transfer_rate=2048))
    with IndexServer(tmp_path) as srv:
        url = srv.url + "f.bin"
        srv.script("/f.bin", [Fault(trickle=0.1, trickle_size=1024), Fault(trickle=0.1)])
        resp, _ = transport.open(url, {})
        try:
            assert transport.read_body(resp, url, 2**20, "file") == body
        finally:
            transport.finish(resp)
        resp, _ = transport.open(url, {})
        began = time.monotonic()
        try:
            with pytest.raises(CrawlError, match="no complete answer within 1 s"):
                transport.read_body(resp, url, 2**20, "file")
        finally:
            transport.finish(resp)
        assert time.monotonic() - began < 2.5
    transport.close()


def test_a_stalled_read_ends_at_the_deadline_after_reads_at_the_full_timeout() -> None:
    """The socket keeps the per-read timeout while the deadline is far (it is told once, not at
    every read), and is given what is left once the deadline is nearer: reads that went at the
    full timeout leave no longer wait behind."""
    import socket

    ours, theirs = socket.socketpair()
    try:
        due = deadline.Deadline(seconds=1.0, min_rate=1e9)
        due.body_phase()
        sock = deadline.DeadlineSocket(ours, 0.5, due)
        buffer = memoryview(bytearray(64))
        for _ in range(3):  # reads well within the deadline: at the 0.5 s timeout
            theirs.sendall(b"x" * 16)
            assert sock.recv_into(buffer) == 16
        assert ours.gettimeout() == 0.5
        time.sleep(0.7)  # 0.3 s of the deadline left, less than the timeout
        with pytest.raises(TimeoutError):
            sock.recv_into(buffer)  # the peer is silent: the read waited what was left, not 0.5 s
        assert (ours.gettimeout() or 0) < 0.31
        with pytest.raises(TimeoutError, match="no complete answer within 1 s"):
            sock.recv_into(buffer)  # past the deadline: no wait at all
    finally:
        ours.close()
        theirs.close()


ASCII_NAMES = ["127.0.0.1", "localhost", "files.example.org.", "a" * 63 + ".example", "::1", ""]
REFUSED_NAMES = ["a..example", ".example", "a" * 64, "x." + "a" * 64]


@pytest.mark.parametrize("host", ASCII_NAMES)
def test_an_ascii_host_is_looked_up_as_the_idna_codec_spells_it(host: str) -> None:
    assert deadline.lookup_name(host) == host.encode("idna")


@pytest.mark.parametrize("host", [*REFUSED_NAMES, "bücher.example"])
def test_other_hosts_go_to_the_idna_codec_and_its_errors_stay(host: str) -> None:
    assert deadline.lookup_name(host) == host
    if host in REFUSED_NAMES:
        with pytest.raises(UnicodeError):
            socket.getaddrinfo(deadline.lookup_name(host), 80)


def test_a_plain_http_connection_loads_no_idna_codec() -> None:
    """The first connection of a plain-HTTP run asks for its address without the IDNA codec
    (``encodings.idna``, ``stringprep``, ``unicodedata``): ~1.3 ms before the first request."""
    code = (
        "import socket, sys\n"
        "from resolve_gpu_stack.net import deadline\n"
        "server = socket.create_server(('127.0.0.1', 0))\n"
        "deadline.open_tcp('127.0.0.1', server.getsockname()[1], 5.0).close()\n"
        "print(sorted(m for m in ('encodings.idna', 'stringprep') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
