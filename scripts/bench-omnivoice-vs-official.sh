#!/usr/bin/env bash
# OmniVoice against the official code, one after another in one run, on a checkpoint at the
# released size with seeded random weights (the real one is out of reach here; the cost of
# a generation does not depend on the weights' values): one design-mode utterance (≈ 5 s) at
# 32 steps with guidance 2. The official `generate` (omnivoice 0.2.1, torch, 2 threads) in
# float32 and bfloat16, then this server over HTTP (streamed off, cache off, the precision
# `auto` picks), and the ratios. CI does not run it. Needs .venv-omnivoice-ref
# (scripts/omnivoice-ref-venv.sh) and a release build.
#   scripts/bench-omnivoice-vs-official.sh [runs (default 2)]
# Env: SERVER (default target/release/omnivoice-server), OMNIVOICE_CHECKPOINT (default
# target/omnivoice-released-random, written by scripts/omnivoice_random_checkpoint.py when
# missing), SKIP_F32=1 leaves out the official float32 run (≈ 45 s a generation on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-2}
python=.venv-omnivoice-ref/bin/python
server=${SERVER:-target/release/omnivoice-server}
checkpoint=${OMNIVOICE_CHECKPOINT:-target/omnivoice-released-random}
port=${PORT:-18956}
url=http://127.0.0.1:$port
[ -x "$python" ] || { echo "run scripts/omnivoice-ref-venv.sh first" >&2; exit 1; }
[ -x "$server" ] || { echo "build it first: cargo build --release --bin omnivoice-server" >&2; exit 1; }
[ -f "$checkpoint/model.safetensors" ] || "$python" scripts/omnivoice_random_checkpoint.py "$checkpoint"
text=$(sed -n 's/^TEXT = "\(.*\)"$/\1/p' scripts/omnivoice_generate_reference.py)
voice=$(sed -n 's/^INSTRUCT = "\(.*\)"$/\1/p' scripts/omnivoice_generate_reference.py)

echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores," \
    "flags: $(grep -o -m3 -w 'amx_bf16\|avx512_bf16\|avx2' /proc/cpuinfo | sort -u | xargs)," \
    "load $(cut -d' ' -f1-3 /proc/loadavg)"
official() { "$python" scripts/omnivoice_generate_reference.py "$checkpoint" "$1" "$runs" 2>/dev/null | tail -1; }
f32_line=""
[ "${SKIP_F32:-0}" = 1 ] || { f32_line=$(official float32); echo "$f32_line"; }
bf16_line=$(official bfloat16)
echo "$bf16_line"

source scripts/bench-lib.sh
GLIBC_TUNABLES=glibc.malloc.arena_max=2 "$server" serve --port "$port" --data-dir "$work" \
    --omnivoice-dir "$checkpoint" --cache-enabled false --request-timeout-s 900 \
    --log-level warn &
pids+=($!)
# Loading 2.4 GB of weights and the warm-up take a minute or two on 2 cores.
wait_for "$url/health/ready" "the server" 600 0.5
body="{\"model\":\"omnivoice\",\"voice\":\"$voice\",\"input\":\"$text\",\"num_step\":32,\"guidance_scale\":2.0,\"response_format\":\"pcm\"}"
best=""
audio=""
for _ in $(seq "$runs"); do
    out=$(curl -s -o "$work/audio.pcm" -w '%{http_code} %{time_total}' --max-time 900 \
        -H 'Content-Type: application/json' -d "$body" "$url/v1/audio/speech")
    [ "${out%% *}" = 200 ] || { echo "ours: HTTP ${out%% *}" >&2; exit 1; }
    t=${out#* }
    # 16-bit mono at 24 kHz.
    audio=$(awk -v b="$(stat -c %s "$work/audio.pcm")" 'BEGIN { print b / 48000 }')
    best=$(awk -v a="${best:-1e9}" -v b="$t" 'BEGIN { print (b < a) ? b : a }')
done
printf 'ours (server, precision auto): %.2f s for %.2f s of audio (RTF %.2f), best of %s\n' \
    "$best" "$audio" "$(awk -v t="$best" -v a="$audio" 'BEGIN { print t / a }')" "$runs"
secs() { sed -n 's/^official [a-z0-9]*: \([0-9.]*\) s.*/\1/p' <<<"$1"; }
awk -v o="$best" -v b="$(secs "$bf16_line")" 'BEGIN { printf "ours / official bfloat16: %.2f\n", o / b }'
[ -z "$f32_line" ] || awk -v o="$best" -v f="$(secs "$f32_line")" \
    'BEGIN { printf "ours / official float32: %.2f\n", o / f }'
