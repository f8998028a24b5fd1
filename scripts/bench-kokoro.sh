#!/usr/bin/env bash
# Kokoro-82M per sentence: kokoro-onnx (onnxruntime, the same int8 file, .venv-kokoro) before
# and after the native bench (crates/models/benches/kokoro.rs), both on one thread, so the
# ratio comes from one run on a noisy machine. Figures go to docs/performance.md.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/kokoro-assets.sh >/dev/null
scripts/kokoro-venv.sh >/dev/null
model=voices/kokoro/kokoro-v1.0.int8.onnx
fixture=crates/models/tests/fixtures/kokoro/hello.npz
reference() { .venv-kokoro/bin/python scripts/kokoro_onnx_bench.py --model "$model" --fixture "$fixture" --threads "$1"; }
reference 1
RAYON_NUM_THREADS=1 cargo bench -p omnivoice-models --bench kokoro -- --noplot
reference 1
