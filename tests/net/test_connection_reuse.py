"""The HTTP client keeps its connection across 304s and 404s (an unread body, however empty,
would cost a new TCP and TLS handshake per page revalidation). Real HTTP on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

from support.server import IndexServer
from support.stack_world import build_story_world

from resolve_gpu_stack.data.definitions import load_definitions
from resolve_gpu_stack.net import deadline
from resolve_gpu_stack.net.cache import HttpCache
from resolve_gpu_stack.net.http import HttpFetcher
from resolve_gpu_stack.net.settings import FetchSettings, TransportSettings


def test_connections_survive_304_and_404(tmp_path: Path, monkeypatch):
    world = build_story_world(tmp_path / "www")
    connects = []
    real = deadline.open_tcp

    def counting(host, port, timeout):
        connects.append((host, port))
        return real(host, port, timeout)

    monkeypatch.setattr(deadline, "open_tcp", counting)
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        defs = load_definitions().with_index_urls(world.index_urls(srv.url))
        pages = [srv.url + "simple/numpy/", srv.url + "simple/no-such-project/", srv.url + "simple/packaging/"]
        with HttpFetcher(FetchSettings(transport=TransportSettings(max_connections=1)), cache=HttpCache(tmp_path / "cache")) as fetcher:
            for _ in range(3):  # 200, 404, 200; then 304, 404, 304; twice
                for url in pages:
                    fetcher.fetch_pages([url], index=defs.indexes["pypi"])
        assert len(srv.log) == 9
    assert len(connects) == 1
