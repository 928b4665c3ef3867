"""The classification of a framework's native wheels runs as many scans at once as the transport
has connections (issue 11 item 7: at 50 ms per response, 8 at a time made it a third of the resolve)."""

from __future__ import annotations

import threading

from packaging.utils import canonicalize_name
from packaging.version import Version

from resolve_gpu_stack.model import IndexFile
from resolve_gpu_stack.model.abi import WheelAbi
from resolve_gpu_stack.resolver.coupling import CLASSIFY_THREADS, classify_all


def test_scans_run_concurrently_up_to_the_connection_count():
    assert CLASSIFY_THREADS >= 32
    barrier = threading.Barrier(32, timeout=5)

    def classifier(file: IndexFile) -> WheelAbi:
        barrier.wait()  # breaks (BrokenBarrierError) unless 32 scans are in flight together
        return WheelAbi(kind="unknown", why=file.filename)

    files = [
        IndexFile(
            filename=f"p{i}-1.0-cp312-cp312-linux_x86_64.whl",
            url=f"http://x/p{i}-1.0-cp312-cp312-linux_x86_64.whl",
            name=canonicalize_name(f"p{i}"),
            version=Version("1.0"),
        )
        for i in range(64)
    ]
    got = classify_all(files, classifier)
    assert len(got) == 64 and all(c.why.startswith("p") for c in got.values())
