#!/usr/bin/env bash
# The GPU checks, ready for a machine with an NVIDIA GPU, the CUDA toolkit (nvcc) and Rust:
#   1. builds the workspace with `--features cuda` (candle's CUDA kernels compile with nvcc);
#   2. runs the models crate's tests (they run on the CPU there too: they prove the CUDA build
#      changes nothing on the CPU path);
#   3. starts the server with `--device auto` and checks that it chose cuda and says why, then
#      speaks one request on the GPU and checks the WAV that comes back;
#   4. runs the model bench (`benches/vits.rs`) for the timings docs/performance.md reports.
# Output goes to ${OUT:-target/gpu-check}. Exits non-zero on the first failed step.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-target/gpu-check}
mkdir -p "$out"
command -v nvcc >/dev/null || { echo "gpu-check: nvcc is missing (the CUDA toolkit)" >&2; exit 1; }
command -v cargo >/dev/null || { echo "gpu-check: cargo is missing" >&2; exit 1; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/gpu.txt"

echo "== build (--features cuda)"
cargo build --release --features cuda,bench-kernels --bins --benches 2>&1 | tail -n 3

echo "== models crate tests"
cargo test --release -p omnivoice-models --features cuda,bench-kernels 2>&1 | tee "$out/models-tests.log" | tail -n 5

echo "== server on --device auto"
port=18890
target/release/omnivoice-server --port "$port" --device auto --log-format json >"$out/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do
    curl -fsS "http://127.0.0.1:$port/health/ready" >/dev/null 2>&1 && break
    sleep 1
done
grep -q '"device auto: built with cuda and device 0 opened"' "$out/server.log" \
    || { echo "gpu-check: --device auto did not choose cuda:"; grep -i device "$out/server.log"; exit 1; }
curl -fsS "http://127.0.0.1:$port/v1/audio/speech" -H 'Content-Type: application/json' \
    -d '{"model":"piper","voice":"en_US-joe-medium","input":"Speech computed on the GPU.","response_format":"wav","stream":false}' \
    -o "$out/gpu.wav"
python3 - "$out/gpu.wav" <<'PY'
import sys, wave, array, math
with wave.open(sys.argv[1]) as w:
    samples = array.array("h", w.readframes(w.getnframes()))
    seconds = w.getnframes() / w.getframerate()
rms = math.sqrt(sum(s * s for s in samples) / max(len(samples), 1))
print(f"gpu.wav: {seconds:.2f} s, rms {rms:.0f}")
assert 0.8 < seconds < 5 and rms > 100, "the GPU audio is empty or of the wrong length"
PY
kill $server; trap - EXIT

echo "== model bench"
cargo bench --features cuda,bench-kernels --bench vits -- sentence 2>&1 | tee "$out/bench.log" | tail -n 20
echo "gpu-check: all steps passed"
