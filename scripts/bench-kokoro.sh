#!/usr/bin/env bash
# Kokoro-82M per sentence: kokoro-onnx (onnxruntime, the same int8 file, .venv-kokoro) before
# and after the native bench (crates/models/benches/kokoro.rs), on one core each and then on
# all cores each, so every ratio comes from one run on a noisy machine. The native bench runs
# with the server's allocator settings (src/allocator.rs) as glibc tunables. Figures go to
# docs/performance.md.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/kokoro-assets.sh >/dev/null
scripts/kokoro-venv.sh >/dev/null
model=voices/kokoro/kokoro-v1.0.int8.onnx
fixture=crates/models/tests/fixtures/kokoro/hello.npz
cores=$(nproc)
export GLIBC_TUNABLES=glibc.malloc.arena_max=2:glibc.malloc.mmap_threshold=67108864:glibc.malloc.trim_threshold=1073741824
# $1: intra-op threads; the rest: a command prefix (taskset).
reference() {
    local threads=$1; shift
    "$@" .venv-kokoro/bin/python scripts/kokoro_onnx_bench.py --model "$model" --fixture "$fixture" --threads "$threads"
}
native() { "$@" cargo bench -q -p omnivoice-models --bench kokoro -- --noplot 2>&1 | grep -E "^kokoro/|time:|SNR"; }
cargo bench -p omnivoice-models --bench kokoro --no-run

echo "## one core (taskset -c 0)"
reference 1 taskset -c 0
RAYON_NUM_THREADS=1 native taskset -c 0
reference 1 taskset -c 0

echo "## all $cores cores"
reference "$cores" env
native env
reference "$cores" env
