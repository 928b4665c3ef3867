"""Micro-benchmark: classifying a wheel with a large shared object from a few of its bytes.

    python bench/elfscan.py [--size MB] [--repeat N]

Builds (C compiler needed) shared objects padded with ``--size`` MB of random bytes in
``.rodata`` (so ``.dynamic`` lies past them, as in a kernel library), packs them into wheels and
classifies each through ``index.wheelscan.scan_wheel`` with an in-memory ``read(start, end)``.
Two of them also export ``--symbols`` functions with long names, which makes their dynamic string
table about 1 MB with the needed names at its end, as in a real kernel library (sgl-kernel's
``common_ops``: 850 KB from byte 177 KB). Prints, per wheel: its size, the bytes and range reads the scan needed, the share of the wheel
read, and the scan's median wall time (no network: add ``reads`` x the round trip for HTTP).
Figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from elfbuild import CUDART, CountingReader, compile_so, have_cc, stub_libraries, wheel_bytes  # noqa: E402

from resolve_gpu_stack.index.wheelscan import scan_wheel  # noqa: E402

TORCH = ("libtorch_cpu.so", "libc10.so", CUDART)


def wheels(root: Path, size: int, symbols: int) -> dict[str, bytes]:
    libs = stub_libraries(root / "libs")
    torch_real = compile_so(root, "kernels_syms.so", libs, links=TORCH, pad=size, seed=5, symbols=symbols)
    cuda_real = compile_so(root, "comm_syms.so", libs, links=(CUDART,), pad=size, seed=6, symbols=symbols)
    torch_big = compile_so(root, "kernels.so", libs, links=TORCH, pad=size, seed=1)
    cuda_big = compile_so(root, "comm.so", libs, links=(CUDART,), pad=size, seed=2)
    cuda_rx = compile_so(root, "comm_rx.so", libs, links=(CUDART,), pad=size, seed=3, flags=("-Wl,-z,noseparate-code",))
    small_cuda = compile_so(root, "mscclpp.so", libs, links=(CUDART,), pad=4 * 2**20, seed=4)
    plain = compile_so(root, "plain.so", libs)
    return {
        "torch-linked .so, deflated": wheel_bytes({"k/kernels.abi3.so": torch_big}),
        "torch-linked .so, stored": wheel_bytes({"k/kernels.abi3.so": torch_big}, method=zipfile.ZIP_STORED),
        "CUDA-only .so (first segment read-only)": wheel_bytes({"k/comm.so": cuda_big}),
        "CUDA-only .so (code in first segment)": wheel_bytes({"k/comm.so": cuda_rx}),
        "CUDA-only + plain, no torch (all scanned)": wheel_bytes({"k/comm.so": cuda_big, "k/mscclpp.so": small_cuda, "k/plain.so": plain}),
        "torch + CUDA-only + plain (stops early)": wheel_bytes({"k/kernels.abi3.so": torch_big, "k/mscclpp.so": small_cuda, "k/plain.so": plain}),
        f"torch-linked .so, {symbols} symbols": wheel_bytes({"k/kernels.abi3.so": torch_real}),
        f"CUDA-only .so, {symbols} symbols": wheel_bytes({"k/comm.so": cuda_real}),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=float, default=50.0, help="padding of each large .so, in MB (default 50)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--symbols", type=int, default=20000, help="exported symbols of the realistic objects (dynamic string table ~1 MB)")
    args = parser.parse_args()
    if not have_cc():
        print("no C compiler (cc): nothing to measure")
        return 1
    with tempfile.TemporaryDirectory(prefix="elfscan-") as tmp:
        built = wheels(Path(tmp), int(args.size * 2**20), args.symbols)
    print(f"{'wheel':44} {'size MB':>8} {'read KB':>8} {'share':>7} {'reads':>5} {'ms':>7}  kind (member:stop)")
    for label, data in built.items():
        times = []
        for _ in range(args.repeat):
            reader = CountingReader(data)
            t0 = time.perf_counter()
            result = scan_wheel(reader, len(data))
            times.append(time.perf_counter() - t0)
        stops = ", ".join(f"{m.name.rsplit('/', 1)[-1]}:{m.stop}" for m in result.members)
        print(
            f"{label:44} {len(data) / 2**20:8.1f} {reader.bytes / 1024:8.1f} {reader.bytes / len(data):7.2%} "
            f"{reader.calls:5d} {statistics.median(times) * 1000:7.2f}  {result.kind} ({stops})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
