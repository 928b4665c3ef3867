"""Micro-benchmark: classifying a wheel with a large shared object from a few of its bytes.

    python bench/elfscan.py [--size MB] [--repeat N] [--wheels WHEEL ...] [--no-synthetic]

Builds (C compiler needed) shared objects padded with ``--size`` MB of random bytes in
``.rodata`` (so ``.dynamic`` lies past them, as in a kernel library), packs them into wheels and
classifies each through ``scan.wheelscan.scan_wheel`` with an in-memory ``read(start, end)``.
Two of them also export ``--symbols`` functions with long names, which makes their dynamic string
table about 1 MB with the needed names at its end, as in a real kernel library (sgl-kernel's
``common_ops``: 850 KB from byte 177 KB). Prints, per wheel: its size, the bytes and range reads the scan needed, the share of the wheel
read, and the scan's median wall time (no network: add ``rounds`` x the round trip for HTTP).

``--wheels``: real wheels on disk, read through a counting reader over the local file as the HTTP
layer would (rounds of range reads, up to 64 members at once): bytes read over the wheel's bytes,
the verdict (``WheelScan.abi``) and the per-member counts. Then the two hostile wheels of
``elfbuild.hostile_wheels`` (4,000 ``.so`` members: sharing one deflate stream, or each inflating
to 8 MB with nothing to find) and the time each scan takes to give up (the limit is 2 s).
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

from support.elfbuild import CUDART, CountingReader, compile_so, have_cc, hostile_wheels, stub_libraries, wheel_bytes  # noqa: E402

from resolve_gpu_stack.data.definitions import load_definitions  # noqa: E402
from resolve_gpu_stack.scan.wheelscan import WheelScanner, scan_wheel  # noqa: E402
from resolve_gpu_stack.scan.zipmeta import ZipError  # noqa: E402

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


class FileReader:
    """``read(start, end)`` over a local file, counting calls and bytes (what range requests would)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.calls = 0
        self.bytes = 0

    def __call__(self, start: int, end: int) -> bytes:
        with self.path.open("rb") as f:
            f.seek(start)
            data = f.read(end - start)
        self.calls += 1
        self.bytes += len(data)
        return data


def real_wheels(paths: list[Path]) -> None:
    rules = load_definitions().abi
    print(f"{'wheel':58} {'size MB':>8} {'read KB':>8} {'share':>7} {'rounds':>6} {'reads':>5} {'ms':>6}  verdict")
    total_read = total_size = 0
    for path in paths:
        reader = FileReader(path)
        size = path.stat().st_size
        scanner = WheelScanner(size, parallel=64)  # as net/scan/classify.py drives it
        rounds = 0
        t0 = time.perf_counter()
        while ranges := scanner.next_ranges():
            rounds += 1
            for start, end in ranges:
                scanner.feed(start, reader(start, end))
        result = scanner.result()
        elapsed = time.perf_counter() - t0
        abi = result.abi(rules)
        total_read += reader.bytes
        total_size += size
        majors = ",".join(map(str, abi.cuda_majors)) or "-"
        print(
            f"{path.name[:58]:58} {size / 2**20:8.1f} {reader.bytes / 1024:8.1f} {reader.bytes / size:7.2%} {rounds:6d} {reader.calls:5d} "
            f"{elapsed * 1000:6.1f}  {abi.kind} (CUDA {majors})"
        )
        for m in abi.members:
            build = f" build {m.build}" if m.build else ""
            print(f"    {m.name[:70]:70} shim {m.shim:3d}  C++ {len(m.cxx):3d}{build}")
    if total_size:
        print(f"{'all':58} {total_size / 2**20:8.1f} {total_read / 1024:8.1f} {total_read / total_size:7.2%}")


def hostile() -> None:
    for label, data in hostile_wheels().items():
        t0 = time.perf_counter()
        try:
            result = scan_wheel(CountingReader(data), len(data), parallel=64)
            outcome = f"{result.kind}: {result.limited}"
        except ZipError as exc:
            outcome = f"not a readable zip: {exc}"
        print(f"{label:44} {len(data) / 2**20:6.1f} MB  {(time.perf_counter() - t0) * 1000:7.1f} ms  {outcome}")


def synthetic(args: argparse.Namespace) -> None:
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=float, default=50.0, help="padding of each large .so, in MB (default 50)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--symbols", type=int, default=20000, help="exported symbols of the realistic objects (dynamic string table ~1 MB)")
    parser.add_argument("--wheels", nargs="*", type=Path, default=[], help="real wheels on disk to scan (bytes read over wheel bytes, verdicts)")
    parser.add_argument("--no-synthetic", action="store_true", help="skip the compiled synthetic wheels")
    args = parser.parse_args()
    if not args.no_synthetic:
        if have_cc():
            synthetic(args)
        else:
            print("no C compiler (cc): no synthetic wheels")
    if args.wheels:
        print()
        real_wheels(args.wheels)
    print()
    hostile()
    return 0


if __name__ == "__main__":
    sys.exit(main())
