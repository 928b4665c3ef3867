#!/usr/bin/env bash
# Record the serving frameworks' PyPI part (SGLang and vLLM as of 2026-03-07) into the bundled
# snapshot, with the tool itself: every PyPI page and METADATA file those resolves read, and the
# range-read scans of their native wheels (manifest "scans"). The PyTorch and FlashInfer parts are
# replayed from the snapshot (reconstruct_2026_03_07.py); what it lacks is fetched live. PyPI's URL
# comes from pip's / uv's configuration (never written here). Pages are cut to files uploaded on or
# before 2026-03-07 that could serve the recorded targets (manifest "cut": their Pythons and glibc
# Linux machines, pure wheels, sdists).
#
#     .venv/bin/python -m pip install -e . && bash indexes/snapshots/tools/record_frameworks_2026_03_07.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
SNAP=indexes/snapshots/2026-03-07
TARGET=(--python 3.12 --platform x86_64-manylinux_2_28 --installed torch==2.12.0.dev20260307+cu130)
record() { .venv/bin/resolve-gpu-stack snapshot --snapshot "$SNAP" --output "$SNAP" --exclude-newer 2026-03-07 "${TARGET[@]}" --abi-mismatch warn --format json "$@" >/dev/null; }
# The recorded targets so far (aarch64 and other Pythons replay too): seed the cut with them.
.venv/bin/python - "$SNAP/manifest.json" <<'PY'
import json, sys
path = sys.argv[1]
data = json.load(open(path))
data.setdefault("cut", {"pythons": ["3.10", "3.11", "3.12", "3.13", "3.14"], "machines": ["aarch64", "x86_64"]})
open(path, "w").write(json.dumps(data, indent=1, sort_keys=True) + "\n")
PY
# sglang 0.5.9 pins cuda-python==12.9 (cuda-bindings 12.9), torch's cu130 nightly needs cuda-bindings 13.
record --with "sglang==0.5.9" --override "cuda-python>=13" --flashinfer 0.6.3
record --with sglang --override "cuda-python>=13" --flashinfer 0.6.3
# vLLM pins flashinfer-python==0.5.2, whose jit-cache METADATA the reconstructed part does not store.
record --with vllm --flashinfer 0.6.5
# Replaying rewrote the reconstructed METADATA it read (cut to the resolver's fields): restore it.
.venv/bin/python indexes/snapshots/tools/reconstruct_2026_03_07.py
du -sh "$SNAP"
