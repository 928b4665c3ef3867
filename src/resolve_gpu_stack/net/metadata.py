"""Wheel METADATA over a ``Transport``: from the cache, a PEP 658 sidecar, or the zip itself.

In order: the on-disk cache (a wheel is immutable: no request); the ``<wheel>.metadata`` sidecar
when the page advertised one (its digest checked; a 403, 404 or 410 there means: read the wheel,
logged at INFO); else range reads of the remote zip (its tail,
central directory and METADATA member, via ``scan/zipmeta.py``); else, when the server ignores
``Range``, the whole wheel streamed to a temporary file (size and sha256 checked), said in a
warning. Nothing unverified is cached. Whatever the zip bytes are, a failure to read them is a
``CrawlError`` (or ``IntegrityError``) naming the URL, never what ``zipfile`` or zlib raised.
"""

from __future__ import annotations

import hashlib
import logging
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import CrawlError, IntegrityError
from ..model import IndexFile
from ..scan import zipmeta
from ..urls import redact_url, without_fragment
from .cache import HttpCache
from .client import Response
from .transport import Transport, content_range, raise_if_gone

log = logging.getLogger(__name__)

MAX_CENTRAL_DIRECTORY = 64 * 2**20
# An sdist's PKG-INFO is read from the whole archive (a --build package with no wheel): at most this
# many bytes are downloaded for it (vLLM's sdist is ~10 MB, FlashAttention's ~8 MB).
MAX_SDIST_BYTES = 512 * 2**20
# A wheel whose server ignores Range is downloaded whole to read METADATA: at most the size its index
# page lists, else at most this many bytes (torch's largest wheel is ~900 MB).
MAX_WHOLE_WHEEL = 2 * 2**30
# Answers to a ``.metadata`` sidecar that mean "read the wheel instead": gone, or refused (PyTorch's
# R2 host answers 403 for some sidecars it lists; the wheel itself may still be served).
SIDECAR_MISSING = frozenset({403, 404, 410})


@dataclass(frozen=True, slots=True)
class _Span:
    """Bytes of a file read by range, from ``start``, and the whole file's size."""

    start: int
    data: bytes
    total: int  # size of the whole file
    source: str = ""  # the URL that answered (after redirects): later ranges go straight there

    def slice(self, start: int, end: int) -> bytes | None:
        if self.start <= start and end <= self.start + len(self.data):
            return self.data[start - self.start : end - self.start]
        return None


@dataclass(frozen=True, slots=True)
class _Whole:
    """A wheel's METADATA taken from its whole download."""

    metadata: bytes  # read from a whole download: the server ignored Range


class TailMemo:
    """The zip tails METADATA range reads received, by wheel URL (without fragment), kept in
    memory for the classifier (``net/scan/classify.py``): a native wheel's scan starts from the same
    tail, so it need not ask for it again. Bounded: the oldest tails go past ``max_bytes``.
    Thread-safe."""

    def __init__(self, max_bytes: int = 16 * 2**20) -> None:
        self._max_bytes = max_bytes
        self._held = 0
        self._tails: OrderedDict[str, tuple[int, bytes, int]] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, url: str, start: int, data: bytes, total: int) -> None:
        if len(data) > self._max_bytes:
            return
        with self._lock:
            old = self._tails.pop(url, None)
            if old is not None:
                self._held -= len(old[1])
            self._tails[url] = (start, data, total)
            self._held += len(data)
            while self._held > self._max_bytes:
                _, (_, dropped, _) = self._tails.popitem(last=False)
                self._held -= len(dropped)

    def get(self, url: str) -> tuple[int, bytes, int] | None:
        """(start, bytes, file size) of the tail read from ``url``, or None."""
        with self._lock:
            return self._tails.get(url)


def _keeps_tail(file: IndexFile) -> bool:
    """Whether the classifier may scan ``file``: not a pure-Python (``none-any``) wheel."""
    return not file.filename.endswith("-none-any.whl")


class MetadataReader:
    """Reads the METADATA of one wheel at a time (safe from several threads at once)."""

    def __init__(
        self,
        transport: Transport,
        cache: HttpCache | None,
        *,
        max_bytes: int,
        say: Callable[[str], None],
        tails: TailMemo | None = None,
    ) -> None:
        self._transport = transport
        self._cache = cache
        self._max_bytes = max_bytes
        self._say = say  # progress and warnings a user should see
        self._tails = tails  # native wheels' tails, for the classifier

    def fetch(self, file: IndexFile) -> bytes:
        """The ``*.dist-info/METADATA`` bytes of ``file`` (see the module docstring)."""
        url = without_fragment(file.url)
        self._transport.check_allowed(url)
        digest = file.metadata_sha256 if file.has_metadata else None
        if self._cache:
            hit = self._cache.get_metadata(url, metadata_sha256=digest, sha256=file.sha256)
            if hit is not None:
                self._transport.stats.add(cache_hits=1)
                return hit
        data = self._fetch_sidecar(url + ".metadata", digest) if file.has_metadata else None
        if data is None:
            data = self._range_metadata(url, file) if file.is_wheel else self._sdist_metadata(url, file)
        if self._cache:
            self._cache.put_metadata(url, data, metadata_sha256=digest, sha256=file.sha256)
        return data

    # -- PEP 658 --------------------------------------------------------------------------------
    def _fetch_sidecar(self, url: str, digest: str | None) -> bytes | None:
        """PEP 658 ``<wheel>.metadata``, digest-checked; None when the server has none (404/410)."""
        transport = self._transport

        def attempt() -> bytes | None:
            resp, _ = transport.open(url, {})
            try:
                if resp.status_code in SIDECAR_MISSING:
                    log.info("%s: no metadata sidecar (%d); reading the wheel instead", redact_url(url), resp.status_code)
                    return None
                transport.check_status(resp, url, ok=(200, 203))
                return transport.read_body(resp, url, self._max_bytes, "METADATA")
            finally:
                transport.finish(resp)

        data = transport.retrying(url, attempt)
        if data is not None and digest and hashlib.sha256(data).hexdigest() != digest.lower():
            raise IntegrityError(
                redact_url(url),
                f"sha256 {hashlib.sha256(data).hexdigest()} does not match {digest} promised by the index page",
                hint="the index or a proxy served stale or altered metadata; nothing was cached",
            )
        return data

    # -- range reads ----------------------------------------------------------------------------
    def _range_metadata(self, url: str, file: IndexFile) -> bytes:
        """METADATA from the tail, central directory and member of the remote zip."""
        tail = self._range(url, f"bytes=-{zipmeta.TAIL_BYTES}", None, file)
        if isinstance(tail, _Whole):
            return tail.metadata
        if self._tails is not None and _keeps_tail(file):
            self._tails.put(url, tail.start, tail.data, tail.total)
        try:
            return self._from_spans(url, tail, file)
        except zipmeta.MemberTooLarge as exc:
            raise IntegrityError(redact_url(url), f"refusing METADATA: {exc}") from None
        except zipmeta.ZipError as exc:
            raise CrawlError(redact_url(url), f"cannot read METADATA from the wheel: {exc}") from None
        except zipmeta.DECODE_ERRORS as exc:  # hostile bytes past the checks above: still the documented error
            raise CrawlError(redact_url(url), f"cannot read METADATA from the wheel: {zipmeta.describe(exc)}") from None

    def _from_spans(self, url: str, tail: _Span, file: IndexFile) -> bytes:
        """The member, reading more ranges when the tail does not hold the directory or member."""
        eocd = zipmeta.find_eocd(tail.data, tail.total)
        if eocd.cd_size > MAX_CENTRAL_DIRECTORY:
            raise zipmeta.ZipError(f"central directory of {eocd.cd_size} bytes is over the {MAX_CENTRAL_DIRECTORY}-byte cap")
        spans = [tail]
        cd = self._directory(url, tail, eocd, file, spans)
        if isinstance(cd, _Whole):
            return cd.metadata
        entry = zipmeta.metadata_member(zipmeta.parse_central_directory(cd, eocd, names=zipmeta.may_be_metadata))
        zipmeta.check_member_size(entry, self._max_bytes)
        start, end = zipmeta.member_span(entry, tail.total)
        for _ in range(2):
            blob = next((b for s in spans if (b := s.slice(start, end)) is not None), None)
            if blob is None:
                got = self._need(url, tail.source, start, end, file)
                if isinstance(got, _Whole):
                    return got.metadata
                spans.append(got)
                blob = got.data
            try:
                return zipmeta.inflate_member(blob, entry, max_size=self._max_bytes)
            except zipmeta.NeedMoreBytes as more:
                end = min(start + more.needed, tail.total)
        raise zipmeta.ZipError(f"{entry.name}: local header larger than expected")

    def _directory(self, url: str, tail: _Span, eocd: zipmeta.EndOfCentralDirectory, file: IndexFile, spans: list[_Span]) -> bytes | _Whole:
        """The central directory's bytes: in the tail, or read before it (the span read joins
        ``spans``); the whole file when the server sent it instead."""
        cd_end = eocd.cd_offset + eocd.cd_size
        cd = tail.slice(eocd.cd_offset, cd_end)
        if cd is not None:
            return cd
        got = self._need(url, tail.source, eocd.cd_offset, tail.start, file)
        if isinstance(got, _Whole):
            return got
        spans.append(_Span(start=got.start, data=got.data + tail.data, total=tail.total, source=tail.source))
        return spans[-1].slice(eocd.cd_offset, cd_end) or b""

    def _need(self, url: str, source: str, start: int, end: int, file: IndexFile) -> _Span | _Whole:
        return self._range(url, f"bytes={start}-{end - 1}", start, file, via=source)

    def _range(self, url: str, spec: str, start: int | None, file: IndexFile, *, via: str = "") -> _Span | _Whole:
        """One range request (``start`` None: a suffix range). A 200 means the whole file came."""
        transport = self._transport

        def attempt() -> _Span | _Whole:
            resp, final = transport.open(via or url, {"Range": spec, "Accept-Encoding": "identity"})
            try:
                if resp.status_code == 200:
                    return _Whole(self._metadata_from_whole(resp, url, file))
                raise_if_gone(resp, url, "wheel")
                transport.check_status(resp, url, ok=(206,))
                span = content_range(resp, url, spec, start)
                want = span[1] - span[0] + 1
                data = transport.read_body(resp, url, want, "range")
            finally:
                transport.finish(resp)
            if len(data) != want:
                raise CrawlError(redact_url(url), f"range {spec} answered {len(data)} bytes, Content-Range says {want}")
            return _Span(start=span[0], data=data, total=span[2], source=final)

        return transport.retrying(url, attempt)

    # -- sdists (--build) -----------------------------------------------------------------------
    def _sdist_metadata(self, url: str, file: IndexFile) -> bytes:
        """An sdist's PKG-INFO: the whole archive streamed to a temporary file (size and sha256
        checked against the page, at most ``MAX_SDIST_BYTES``), PKG-INFO read from it."""
        from ..index.sdist import SdistError, read_pkg_info  # an sdist only (--build NAME): +4 ms on a plain resolve

        transport = self._transport
        cap = min(file.size, MAX_SDIST_BYTES) if file.size is not None else MAX_SDIST_BYTES
        said = f"the {file.size} bytes its index page lists" if file.size is not None else f"the {cap}-byte cap for an sdist"

        def attempt() -> bytes:
            resp, _ = transport.open(url, {"Accept-Encoding": "identity"})
            try:
                raise_if_gone(resp, url, "sdist")
                transport.check_status(resp, url, ok=(200,))
                digest = hashlib.sha256()

                with tempfile.TemporaryFile(prefix="resolve-gpu-stack-sdist-") as tmp:
                    n = transport.stream_to(resp, url, tmp, digest, "sdist", limit=cap, over_limit=f"the server sent more than {said}; stopped")
                    _check_whole(url, file, n, digest.hexdigest())
                    tmp.seek(0)
                    try:
                        return read_pkg_info(tmp, file.filename)
                    except SdistError as exc:
                        raise CrawlError(redact_url(url), f"cannot read PKG-INFO from the sdist: {exc}") from None
            finally:
                transport.finish(resp)

        data = transport.retrying(url, attempt)
        self._say(f"read the metadata of {file.filename} from the whole sdist (a --build package with no wheel for the target)")
        return data

    # -- whole file -----------------------------------------------------------------------------
    def _metadata_from_whole(self, resp: Response, url: str, file: IndexFile) -> bytes:
        """The server ignored Range: stream the wheel to a temporary file and read METADATA there."""
        size = resp.headers.get("content-length")
        label = f"{int(size) / 2**20:.1f} MB" if size and size.isdigit() else "unknown size"
        self._say(f"server ignored Range for {file.filename}; downloading the whole wheel ({label})")
        cap = file.size if file.size is not None else MAX_WHOLE_WHEEL
        said = f"the {file.size} bytes its index page lists" if file.size is not None else f"the {MAX_WHOLE_WHEEL}-byte cap for a whole wheel"
        digest = hashlib.sha256()

        with tempfile.TemporaryFile(prefix="resolve-gpu-stack-") as tmp:  # unlinked: nothing is left behind, whatever happens
            n = self._transport.stream_to(
                resp, url, tmp, digest, "download", limit=cap, over_limit=f"the server ignored Range and sent more than {said}; stopped"
            )
            _check_whole(url, file, n, digest.hexdigest())
            tmp.seek(0)
            try:
                data = zipmeta.read_metadata_from_zip(tmp, max_size=self._max_bytes)
            except zipmeta.MemberTooLarge as exc:
                raise IntegrityError(redact_url(url), f"refusing METADATA: {exc}") from None
            except zipmeta.ZipError as exc:
                raise CrawlError(redact_url(url), f"cannot read METADATA from the wheel: {exc}") from None
        self._transport.stats.add(full_downloads=1)
        message = f"server ignored Range; downloaded the whole wheel ({n / 2**20:.1f} MB) to read its metadata: {redact_url(url)}"
        log.warning("%s", message)
        self._say(message)
        return data


def _check_whole(url: str, file: IndexFile, size: int, sha256: str) -> None:
    """A whole file downloaded (a wheel whose server ignored Range, an sdist) is the one its index
    page lists: its size and sha256, when the page gives them."""
    if file.size is not None and size != file.size:
        raise IntegrityError(redact_url(url), f"downloaded {size} bytes, the index page says {file.size}")
    if file.sha256 and sha256 != file.sha256.lower():
        raise IntegrityError(redact_url(url), f"sha256 {sha256} does not match {file.sha256} from the index page")


__all__ = ["MAX_CENTRAL_DIRECTORY", "SIDECAR_MISSING", "MetadataReader", "TailMemo"]
