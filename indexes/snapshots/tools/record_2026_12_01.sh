#!/usr/bin/env bash
# Record the December snapshot (today's world, 2026-12-01) from today's PyPI, with the tool itself:
# every PyPI page and METADATA file the resolves below read, and the range-read scans of their
# native wheels (manifest "scans"), cut to files uploaded on or before 2026-12-01.
#
# The story is the one most users start from: `pip install torch` (PyPI's torch 2.15.0: no +cuNNN
# label, its METADATA pins cuda-toolkit[...]==13.2.2, i.e. cu132), then SGLang or vLLM on it.
# The PyTorch and FlashInfer indexes cannot be reached from here: their part of the snapshot (the
# PyTorch index's stable cu132 torch page, where the declared target reads torch 2.15.0's METADATA
# and exports, and FlashInfer's cu130 jit-cache page) must be in $SNAP before this runs, rebuilt as
# tools/reconstruct_2026_03_07.py rebuilds March's; what the snapshot lacks is fetched live, and a
# page of those indexes fetched live fails the run. (Reading the PyTorch index as a flat mirror of
# PyPI does not work: PyPI's files are on a host the PyTorch index does not use, and are refused.)
# flashinfer-cubin's last PyPI release is 0.6.13 and sglang 0.5.23 pins FlashInfer 0.7.2, so the
# framework plans leave cubin out (--no-cubin). PyPI's URL comes from pip's / uv's configuration
# (never written here).
#
# Run it after the scanner reads symbol tables at the end of a library (torch 2.15.0's
# libtorch_cpu.so keeps them at about 443 MB: today.md), else the kept torch's exports are unread.
#
#     .venv/bin/python -m pip install -e . && bash indexes/snapshots/tools/record_2026_12_01.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
SNAP=indexes/snapshots/2026-12-01
# PyPI's torch 2.15.0 has no +cuNNN label; a declared target says its CUDA (its cuda-toolkit==13.2.2 pin).
TARGET=(--python 3.12 --platform x86_64-manylinux_2_28 --installed torch==2.15.0 --cuda cu132 --torch installed)
if [ ! -f "$SNAP/manifest.json" ]; then
  echo "$SNAP/manifest.json: missing: rebuild the PyTorch and FlashInfer part of the snapshot first (see above)" >&2
  exit 1
fi
record() {
  .venv/bin/resolve-gpu-stack snapshot --snapshot "$SNAP" --output "$SNAP" --exclude-newer 2026-12-01 "${TARGET[@]}" \
    --abi-mismatch warn --format json "$@" >/dev/null
}
record  # FlashInfer alone on the kept torch: jit-cache +cu130
record --with sglang --no-cubin
record --with vllm --no-cubin
du -sh "$SNAP"
