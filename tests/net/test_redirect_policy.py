"""Issue 15 item 4: a redirect never leads to a cloud metadata, link-local or private address
(unless the request began on one), on any hop, and the refusal names the hop and happens before
any connection; ``*.localhost`` names connect to loopback without asking DNS."""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path

import pytest
from support.doors import run_cli
from support.faults import PATHS, StoryRun
from support.lock_faults import ALWAYS, assert_clean_failure, old_locks
from support.server import Fault, IndexServer
from support.stack_world import build_story_world

from resolve_gpu_stack.errors import CrawlError
from resolve_gpu_stack.net.urlpolicy import check_redirect

pytestmark = pytest.mark.usefixtures("fast_backoff")  # retries without the exponential wait (conftest.py)


@pytest.fixture
def outside(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every connect to a non-loopback address, refused (never sent) and recorded."""
    attempts: list[object] = []
    real = socket.socket.connect

    def guarded(self: socket.socket, address: object) -> None:
        host = address[0] if isinstance(address, tuple) else None
        if isinstance(host, str):
            try:
                loopback = ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
            except ValueError:
                loopback = False
            if not loopback:
                attempts.append(address)
                raise OSError("test guard: no traffic leaves loopback")
        real(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    return attempts


TARGETS = [
    ("https://169.254.169.254/latest/meta-data/", "a cloud metadata address"),
    ("http://169.254.169.254/latest/meta-data/", "a cloud metadata address"),
    ("https://metadata.google.internal/computeMetadata/v1/", "a cloud metadata address"),
    ("https://[fd00:ec2::254]/latest/meta-data/", "a cloud metadata address"),
    ("https://2852039166/latest/meta-data/", "a cloud metadata address"),  # 169.254.169.254 as one number
    ("https://[::ffff:169.254.169.254]/", "a cloud metadata address"),
    ("https://169.254.10.1/x", "a link-local address"),
    ("https://[fe80::1]/x", "a link-local address"),
    ("https://10.1.2.3/x", "a private-network address"),
    ("https://172.16.0.1/x", "a private-network address"),
    ("https://192.168.1.1/x", "a private-network address"),
    ("https://[fc00::1]/x", "a private-network address"),
]


@pytest.mark.parametrize("where", ["page", "wheel"])
@pytest.mark.parametrize(("target", "kind"), TARGETS, ids=[t[0] for t in TARGETS])
def test_a_redirect_to_an_internal_address_is_refused_before_any_connect(
    run: StoryRun, capsys, outside: list[object], target: str, kind: str, where: str
) -> None:
    old_locks(run)
    path = getattr(PATHS, where)
    run.srv.script(path, [Fault(status=302, headers={"Location": target})] * ALWAYS)
    rc, out, err = run.lock(capsys)
    assert_clean_failure(run, rc, out, err, code=3, url_path=path, words=(f"redirected to {target}, {kind}; refused",))
    assert outside == [], "no connection may be attempted to the redirect target"
    assert len(run.gets(path)) == 1, "a refused redirect is not retried"


def test_the_error_names_the_hop_that_failed(run: StoryRun, capsys, outside: list[object]) -> None:
    """page -> /hop/ (same server) -> metadata: the refusal names /hop/ and where the chain began."""
    old_locks(run)
    hop = "/hop/"
    run.srv.script(PATHS.page, [Fault(status=302, headers={"Location": hop})] * ALWAYS)
    run.srv.script(hop, [Fault(status=307, headers={"Location": "https://169.254.169.254/latest/meta-data/"})] * ALWAYS)
    rc, out, err = run.lock(capsys)
    assert_clean_failure(
        run,
        rc,
        out,
        err,
        code=3,
        url_path=hop,
        words=(
            f"error: {run.srv.url}hop/: redirected to https://169.254.169.254/latest/meta-data/, a cloud metadata address; refused",
            f"(redirect chain from {run.srv.url}{PATHS.page.lstrip('/')})",
        ),
    )
    assert outside == []


def test_an_index_on_a_private_network_may_redirect_within_it() -> None:
    check_redirect("https://10.0.0.5/simple/x/", "https://10.0.0.6/files/x.whl")
    check_redirect("https://10.0.0.6/a", "https://192.168.1.1/b", first="https://10.0.0.5/simple/x/")
    check_redirect("https://idx.example/simple/x/", "https://files.example/x.whl")  # public: fine
    check_redirect("http://127.0.0.1:8000/simple/", "http://localhost:9000/x.whl")  # loopback: fine
    with pytest.raises(CrawlError, match="a private-network address; refused"):
        check_redirect("https://10.0.0.6/a", "https://10.0.0.7/b", first="https://idx.example/simple/x/")


def test_a_dot_localhost_index_connects_to_loopback_without_dns(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch, outside: list[object]) -> None:
    asked: list[str] = []
    real = socket.getaddrinfo

    def no_dns(host, *args, **kwargs):  # type: ignore[no-untyped-def]
        name = host.decode("ascii") if isinstance(host, bytes) else host  # an ASCII name is asked as bytes
        if isinstance(name, str) and name.rstrip(".").endswith(".localhost"):
            asked.append(name)
            raise socket.gaierror(socket.EAI_NONAME, "test guard: *.localhost went to the resolver")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    world = build_story_world(tmp_path / "www")
    with IndexServer(world.root) as srv:
        base = srv.url.replace("127.0.0.1", "idx.localhost")
        world.write(base)  # the pages link to idx.localhost too
        run = StoryRun(root=tmp_path, world=world, srv=srv)
        rc, _, err = run_cli(capsys, *run.argv("lock", base=base))
        assert rc == 0, err
        assert asked == [] and outside == []
        assert run.gets(PATHS.page) and run.gets(PATHS.wheel), "the index and its files were asked, on loopback"
