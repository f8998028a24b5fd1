#!/usr/bin/env bash
# The GPU checks, on a machine with an NVIDIA GPU, its driver, CUDA 13's libraries (cuBLAS,
# cuRAND, NVRTC; PyTorch's cu13 wheels ship them) and PyTorch, with .gpu/ from
# scripts/gpu-build.sh beside it (no Rust needed there):
#   1. the server on `--device auto` (it must choose cuda) with OmniVoice's e2e checkpoint (the official code's
#      small checkpoint, crates/models/tests/fixtures/omnivoice/e2e), in f32 and in bf16: each
#      must say it runs on cuda, speak a seeded request to a WAV of the same length as the CPU's,
#      and agree with the CPU's WAV where the precision allows;
#   2. the model bench on the GPU (`OMNIVOICE_BENCH_DEVICE=cuda`): real-size random weights,
#      the CPU's logits against the GPU's, then one forward, generation at 32 and 16 steps, and
#      1, 8 and 32 utterances in one generate, per precision; then the codec's decode;
#   3. the official forward (omnivoice 0.2.1, PyTorch) on the same GPU and shapes, same run.
# Output goes to ${OUT:-target/gpu-check}. A failed step does not stop the others (device time
# is scarce); the script exits non-zero if any failed.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-target/gpu-check}
mkdir -p "$out" /tmp/gpu-check
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/gpu.txt"
for f in omnivoice-server omnivoice-bench; do
    xz -dc ".gpu/$f.xz" >"/tmp/gpu-check/$f" && chmod +x "/tmp/gpu-check/$f"
done
# CUDA 13's libraries, wherever PyTorch's wheels put them.
libs=$(find / -xdev \( -name 'libcublas.so.13' -o -name 'libcurand.so.10' -o -name 'libnvrtc.so.13' \
    -o -name 'libcudart.so.13' \) -not -path '/proc/*' 2>/dev/null | xargs -rn1 dirname | sort -u | paste -sd:)
tar -C /tmp/gpu-check -xJf .gpu/lib.tar.xz
export LD_LIBRARY_PATH=$libs:${LD_LIBRARY_PATH:-}
echo "CUDA libraries from: $libs"

failed=""
(
echo "== 1. the server on the GPU, OmniVoice's e2e checkpoint"
checkpoint=crates/models/tests/fixtures/omnivoice/e2e
speak() { # device precision port
    # The carried libraries for the server alone: Python (below) keeps the machine's own.
    LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/tmp/gpu-check/lib ESPEAK_DATA_PATH=/tmp/gpu-check/lib \
        /tmp/gpu-check/omnivoice-server --port "$3" --device "$1" --precision "$2" \
        --omnivoice-dir "$checkpoint" --voices-dir /tmp/gpu-check/no-voices \
        --default-engine omnivoice --no-cache --log-format json >"$out/server-$1-$2.log" 2>&1 &
    local server=$!
    for _ in $(seq 1 120); do
        curl -fsS "http://127.0.0.1:$3/health" >/dev/null 2>&1 && break
        sleep 0.5
    done
    curl -fsS "http://127.0.0.1:$3/v1/audio/speech" -H 'Content-Type: application/json' \
        -d '{"model":"omnivoice","voice":"alloy","input":"Speech computed on the GPU.","response_format":"wav","seed":7,"num_step":16}' \
        -o "/tmp/gpu-check/$1-$2.wav" || { kill $server; cat "$out/server-$1-$2.log"; return 1; }
    kill $server
    wait $server 2>/dev/null || true
}
speak cpu f32 18890
speak auto f32 18891
speak auto bf16 18892
grep -q '"device auto: built with cuda and device 0 opened"' "$out/server-auto-f32.log" \
    || { echo "gpu-check: --device auto did not choose cuda:"; grep -i device "$out/server-auto-f32.log"; exit 1; }
grep -h '"OmniVoice model loaded"' "$out"/server-auto-*.log
python3 - /tmp/gpu-check/cpu-f32.wav /tmp/gpu-check/auto-f32.wav /tmp/gpu-check/auto-bf16.wav <<'PY'
import sys, wave
import numpy as np
def read(path):
    with wave.open(path) as w:
        return np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16).astype(np.float64)
cpu = read(sys.argv[1])
for path in sys.argv[2:]:
    gpu = read(path)
    assert len(gpu) == len(cpu), f"{path}: {len(gpu)} samples, the CPU's {len(cpu)}"
    rms = np.sqrt(np.mean(gpu ** 2))
    corr = np.corrcoef(cpu, gpu)[0, 1]
    print(f"{path}: {len(gpu)} samples as on the CPU, rms {rms:.0f}, correlation with the CPU's {corr:.4f}")
    assert rms > 10, f"{path} is silent"
PY
) || failed="$failed server"

echo "== 2. the model bench on the GPU"
OMNIVOICE_BENCH_DEVICE=cuda /tmp/gpu-check/omnivoice-bench --bench 2>&1 | tee "$out/bench.log" \
    || failed="$failed bench"

echo "== 3. the official forward on the same GPU"
if [ -d .gpu/whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/gpu-check/site .gpu/whl/*.whl
    for run in "float32" "float32 TF32=1" "bfloat16" "bfloat16 BATCH=8" "bfloat16 BATCH=32"; do
        set -- $run
        env PYTHONPATH=/tmp/gpu-check/site DEVICE=cuda DTYPE="$1" ${2:-} \
            python3 scripts/omnivoice_bench_reference.py 2>&1 | tee -a "$out/reference.log" \
            || failed="$failed reference"
    done
fi
[ -z "$failed" ] || { echo "gpu-check: failed:$failed"; exit 1; }
echo "gpu-check: all steps passed"
