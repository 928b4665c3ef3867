"""HttpCache: entries survive, corruption is caught, keys carry no credentials, sharing is safe."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

from support.paths import SRC
from support.server import IndexServer

from resolve_gpu_stack.net.cache import HttpCache, cache_url, default_cache_dir, is_temp_name

PAGE = b"<html><body><a href='demo-1.0-py3-none-any.whl'>demo</a></body></html>"


def _entries(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_page_round_trip_with_validators(tmp_path: Path) -> None:
    cache = HttpCache(tmp_path)
    assert cache.get_page("https://idx.example/simple/demo/") is None
    cache.put_page(
        "https://idx.example/simple/demo/",
        PAGE,
        final_url="https://idx.example/simple/demo/",
        content_type="text/html; charset=utf-8",
        etag='"abc"',
        last_modified="Sat, 07 Mar 2026 10:00:00 GMT",
    )
    got = HttpCache(tmp_path).get_page("https://idx.example/simple/demo/")
    assert got is not None
    assert (got.content, got.content_type, got.etag, got.last_modified) == (
        PAGE,
        "text/html; charset=utf-8",
        '"abc"',
        "Sat, 07 Mar 2026 10:00:00 GMT",
    )
    # An HTML and a JSON answer for one URL are different entries.
    assert cache.get_page("https://idx.example/simple/demo/", variant="json") is None


def test_key_has_no_credentials_and_no_fragment(tmp_path: Path) -> None:
    assert cache_url("https://alice:s3cr3t@idx.example:8443/simple/x/?q=1#frag") == "https://idx.example:8443/simple/x/?q=1"
    cache = HttpCache(tmp_path)
    cache.put_page(
        "https://alice:s3cr3t@idx.example/simple/demo/",
        PAGE,
        final_url="https://alice:s3cr3t@idx.example/simple/demo/",
        content_type="text/html",
        etag='"1"',
        last_modified=None,
    )
    cache.put_metadata("https://alice:s3cr3t@idx.example/f/demo.whl", b"Name: demo\n", sha256="ab" * 32)
    hit = cache.get_page("https://idx.example/simple/demo/")
    assert hit is not None and hit.url == "https://idx.example/simple/demo/"
    assert cache.get_metadata("https://idx.example/f/demo.whl", sha256="ab" * 32) == b"Name: demo\n"
    for path in _entries(tmp_path):
        assert b"s3cr3t" not in path.read_bytes() and b"alice" not in path.read_bytes()


def test_metadata_entries_are_keyed_by_the_promised_digests(tmp_path: Path) -> None:
    cache = HttpCache(tmp_path)
    url = "https://files.example/demo-1.0-py3-none-any.whl"
    cache.put_metadata(url, b"Name: demo\nVersion: 1.0\n", metadata_sha256="11" * 32, sha256="22" * 32)
    assert cache.get_metadata(url, metadata_sha256="11" * 32, sha256="22" * 32) == b"Name: demo\nVersion: 1.0\n"
    # Re-published wheel (other digest): a miss, not the stale bytes.
    assert cache.get_metadata(url, metadata_sha256="33" * 32, sha256="22" * 32) is None
    assert cache.get_metadata(url) is None


def test_corrupted_body_is_detected_and_discarded(tmp_path: Path) -> None:
    cache = HttpCache(tmp_path)
    cache.put_page("https://idx.example/a/", PAGE, content_type="text/html", etag='"1"', last_modified=None)
    (entry,) = _entries(tmp_path)
    raw = bytearray(entry.read_bytes())
    raw[-5] ^= 0x20  # one flipped bit in the body, same length
    entry.write_bytes(bytes(raw))
    assert cache.get_page("https://idx.example/a/") is None
    assert not entry.exists()


def test_truncated_or_garbage_entries_are_misses(tmp_path: Path) -> None:
    cache = HttpCache(tmp_path)
    cache.put_metadata("https://f.example/a.whl", b"Name: a\n")
    (entry,) = _entries(tmp_path)
    entry.write_bytes(entry.read_bytes()[:-3])
    assert cache.get_metadata("https://f.example/a.whl") is None
    cache.put_metadata("https://f.example/a.whl", b"Name: a\n")
    entry.write_bytes(b"\x00\x01 not json at all")
    assert cache.get_metadata("https://f.example/a.whl") is None
    cache.put_metadata("https://f.example/a.whl", b"Name: a\n")
    assert cache.get_metadata("https://f.example/a.whl") == b"Name: a\n"


def test_unwritable_cache_does_not_fail_the_run(tmp_path: Path) -> None:
    (tmp_path / "metadata-v1").write_text("a file where a directory should be")
    cache = HttpCache(tmp_path)
    cache.put_metadata("https://f.example/a.whl", b"Name: a\n")  # logged, not raised
    assert cache.get_metadata("https://f.example/a.whl") is None


def test_default_cache_dir() -> None:
    assert default_cache_dir({"XDG_CACHE_HOME": "/xdg", "HOME": "/home/u"}) == Path("/xdg/resolve-gpu-stack")
    assert default_cache_dir({"XDG_CACHE_HOME": "relative", "HOME": "/home/u"}) == Path("/home/u/.cache/resolve-gpu-stack")
    assert default_cache_dir({"HOME": "/home/u"}) == Path("/home/u/.cache/resolve-gpu-stack")


def test_threads_writing_and_reading_one_entry_never_see_a_partial_file(tmp_path: Path) -> None:
    cache = HttpCache(tmp_path)
    bodies = [bytes([65 + i]) * (50_000 + i * 1000) for i in range(8)]
    seen: list[bytes | None] = []
    stop = threading.Event()

    def write(body: bytes) -> None:
        for _ in range(30):
            cache.put_page("https://idx.example/x/", body, content_type="text/html", etag=f'"{len(body)}"', last_modified=None)

    def read() -> None:
        while not stop.is_set():
            hit = cache.get_page("https://idx.example/x/")
            seen.append(None if hit is None else hit.content)

    readers = [threading.Thread(target=read) for _ in range(3)]
    writers = [threading.Thread(target=write, args=(b,)) for b in bodies]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert any(s is not None for s in seen)
    assert all(s is None or s in bodies for s in seen)
    assert [p.name for p in _entries(tmp_path) if is_temp_name(p.name)] == []
    final = cache.get_page("https://idx.example/x/")
    assert final is not None and final.content in bodies


CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from resolve_gpu_stack.net.cache import HttpCache
    from resolve_gpu_stack.net.http import HttpFetcher
    from resolve_gpu_stack.net.settings import FetchSettings, TransportSettings
    from resolve_gpu_stack.data.definitions import IndexDefinition

    base, root = sys.argv[1], Path(sys.argv[2])
    index = IndexDefinition(name="t", url=base, dialect="html", hosts=("*",), channels={})
    urls = [f"{base}p{i}/" for i in range(40)]
    with HttpFetcher(FetchSettings(transport=TransportSettings(max_connections=8, backoff_base=0.01)), cache=HttpCache(root)) as fetcher:
        for _ in range(3):
            got = fetcher.fetch_pages(urls, index=index)
            for i, url in enumerate(urls):
                assert got[url].page.content == f"<html><body>page {i} {'x' * 4000}</body></html>".encode(), url
    print("ok", fetcher.stats.cache_hits)
    """
)


def test_two_processes_share_one_cache_dir(tmp_path: Path) -> None:
    www, root = tmp_path / "www", tmp_path / "cache"
    for i in range(40):
        (www / f"p{i}").mkdir(parents=True)
        (www / f"p{i}" / "index.html").write_text(f"<html><body>page {i} {'x' * 4000}</body></html>")
    with IndexServer(www) as srv:
        procs = [subprocess.Popen([sys.executable, "-c", CHILD, srv.url, str(root)], stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
        outs = [p.communicate(timeout=60) for p in procs]
    for proc, (out, err) in zip(procs, outs):
        assert proc.returncode == 0, err.decode()
        assert out.startswith(b"ok ")
        assert int(out.split()[1]) >= 40  # later rounds were 304s served from the shared cache
    files = _entries(root)
    assert len(files) == 40 and not [p for p in files if is_temp_name(p.name)]
    cache = HttpCache(root)
    for i in range(40):
        hit = cache.get_page(f"{srv.url}p{i}/")
        assert hit is not None and hit.content.startswith(f"<html><body>page {i} ".encode())


def test_entries_are_written_without_fsync_and_directories_made_once(tmp_path: Path, monkeypatch) -> None:
    # A cache entry is checked (size, sha256) on every read, so a write need not wait for the disk.
    import os as os_module

    from resolve_gpu_stack.net import cache as cache_module

    def no_fsync(fd: int) -> None:
        raise AssertionError("a cache entry was fsynced")

    made: list[Path] = []
    real_mkdir = Path.mkdir

    def counting_mkdir(self: Path, *args, **kwargs) -> None:
        made.append(self)
        real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(cache_module.os, "fsync", no_fsync)
    monkeypatch.setattr(os_module, "fsync", no_fsync)
    monkeypatch.setattr(Path, "mkdir", counting_mkdir)
    cache = HttpCache(tmp_path)
    key = "https://f.example/a.whl"
    cache.put_metadata(key, b"Name: a\n")
    first = len(made)
    assert first >= 1  # the entry's directory (and its parents) on the first write
    cache.put_metadata(key, b"Name: a\nVersion: 1\n")
    assert len(made) == first  # the directory is there: no mkdir before the second write
    assert cache.get_metadata(key) == b"Name: a\nVersion: 1\n"


def test_an_entry_directory_removed_between_writes_is_made_again(tmp_path: Path) -> None:
    import shutil

    cache = HttpCache(tmp_path)
    cache.put_metadata("https://f.example/a.whl", b"Name: a\n")
    shutil.rmtree(tmp_path / "metadata-v1")  # another process cleared the cache
    cache.put_metadata("https://f.example/a.whl", b"Name: a\n")
    assert cache.get_metadata("https://f.example/a.whl") == b"Name: a\n"
    assert [p.name for p in _entries(tmp_path) if is_temp_name(p.name)] == []


def test_write_behind_entries_are_read_back_at_once_and_on_disk_after_close(tmp_path: Path) -> None:
    # The command's cache hands its entries to one writer thread: this process reads them back at
    # once, in the order written (a page written, dropped, written again), and every one is on disk
    # for the next process once the cache is closed.
    cache = HttpCache(tmp_path, write_behind=True)
    url = "https://idx.example/simple/demo/"
    for i in range(50):
        cache.put_metadata(f"https://f.example/a-{i}.whl", b"Name: a\nVersion: %d\n" % i)
    cache.put_page(url, PAGE, content_type="text/html", etag='"1"', last_modified=None)
    assert cache.get_page(url) is not None and cache.get_page(url).etag == '"1"'
    cache.drop_page(url)
    assert cache.get_page(url) is None
    cache.put_page(url, PAGE + b" ", content_type="text/html", etag='"2"', last_modified=None)
    assert cache.get_metadata("https://f.example/a-7.whl") == b"Name: a\nVersion: 7\n"
    cache.close()
    other = HttpCache(tmp_path)  # another process's view: what is on disk
    assert [other.get_metadata(f"https://f.example/a-{i}.whl") for i in range(50)] == [b"Name: a\nVersion: %d\n" % i for i in range(50)]
    page = other.get_page(url)
    assert page is not None and (page.content, page.etag) == (PAGE + b" ", '"2"')
    assert [p.name for p in _entries(tmp_path) if is_temp_name(p.name)] == []
    # after close the cache still works: a later write starts the writer again
    cache.put_metadata("https://f.example/late.whl", b"Name: late\n")
    cache.flush()
    assert other.get_metadata("https://f.example/late.whl") == b"Name: late\n"
    cache.close()


def test_write_behind_on_an_unwritable_cache_warns_and_never_fails(tmp_path: Path, caplog) -> None:
    (tmp_path / "metadata-v1").write_text("a file where a directory should be")
    cache = HttpCache(tmp_path, write_behind=True)
    cache.put_metadata("https://f.example/a.whl", b"Name: a\n")  # (read back from memory until the writer fails it)
    cache.close()
    assert cache.get_metadata("https://f.example/a.whl") is None  # it could not be written
    assert "cannot write cache entry" in caplog.text


def test_entries_lie_flat_and_an_earlier_versions_fanned_entry_is_still_read(tmp_path: Path) -> None:
    # One folder per kind, none per entry: a cold resolve makes 4 folders, not ~320.
    cache = HttpCache(tmp_path)
    for i in range(40):
        cache.put_metadata(f"https://f.example/a-{i}.whl", b"Name: a\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metadata-v1"]
    assert all(p.is_file() for p in (tmp_path / "metadata-v1").iterdir())
    # an entry an earlier version wrote under <aa>/ is read, and a dropped page goes from there too
    url = "https://idx.example/simple/demo/"
    cache.put_page(url, PAGE, content_type="text/html", etag='"1"', last_modified=None)
    [flat] = (tmp_path / "pages-v1").iterdir()
    fanned = tmp_path / "pages-v1" / flat.name[:2] / flat.name
    fanned.parent.mkdir()
    flat.rename(fanned)
    page = HttpCache(tmp_path).get_page(url)
    assert page is not None and page.etag == '"1"'
    HttpCache(tmp_path).drop_page(url)
    assert not fanned.exists() and HttpCache(tmp_path).get_page(url) is None


_IDENTITY = "from resolve_gpu_stack.net.cache import code_identity; print(code_identity())"


def _identity_of(src: Path) -> str:
    """The code identity a program run from ``src`` (a copy of the package) works out."""
    done = subprocess.run(
        [sys.executable, "-c", _IDENTITY], env={"PYTHONPATH": str(src), "PYTHONDONTWRITEBYTECODE": "1"}, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_stored_results_belong_to_the_code_that_made_them(tmp_path: Path) -> None:
    """A result is stored per code identity: an edit to any module, nested ones included, or a
    module added, makes another identity (so a checkout's edit never reuses an older plan); files
    that are not modules, and modules under a linked folder, do not count."""
    src = tmp_path / "src"
    shutil.copytree(SRC, src / "resolve_gpu_stack", ignore=shutil.ignore_patterns("__pycache__"))
    package = src / "resolve_gpu_stack"
    first = _identity_of(src)
    assert len(first) == 64 and _identity_of(src) == first
    (package / "notes.txt").write_text("not a module")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.py").write_text("")
    (package / "linked").symlink_to(outside, target_is_directory=True)
    assert _identity_of(src) == first
    nested = package / "net" / "client" / "errors.py"
    nested.write_text(nested.read_text() + "\n")
    second = _identity_of(src)
    assert second != first
    (package / "model" / "extra.py").write_text("")
    assert _identity_of(src) not in (first, second)
