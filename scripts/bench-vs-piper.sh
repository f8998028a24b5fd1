#!/usr/bin/env bash
# The peer benchmark of docs/performance.md §2: this server (release build) against Piper's own
# HTTP server (piper.http_server from the pinned piper-tts in .venv-piper, onnxruntime), both on
# loopback with the same voice file, driven by loadgen with unique texts (every request a
# synthesis; our cache off) at concurrency 1, 4 and 16. Prints audio seconds per wall second and
# p50/p99 latency side by side, with ours/Piper ratios. A benchmark, not a test: a few minutes.
#
# Usage: scripts/bench-vs-piper.sh [extra flags for omnivoice-server...]
# Environment: VOICE (default voices/en_US-joe-medium.onnx), PORT, PIPER_PORT, ROUNDS (requests
# per concurrency level = ROUNDS × concurrency, at least 8; default 4).
set -euo pipefail
cd "$(dirname "$0")/.."
VOICE=${VOICE:-voices/en_US-joe-medium.onnx}
VOICE_ID=$(basename "$VOICE" .onnx)
PORT=${PORT:-18910}
PIPER_PORT=${PIPER_PORT:-18911}
ROUNDS=${ROUNDS:-4}
OURS="http://127.0.0.1:$PORT"
PIPER="http://127.0.0.1:$PIPER_PORT"

[ -f "$VOICE" ] || { echo "bench-vs-piper: $VOICE is missing (scripts/setup.sh fetches it)" >&2; exit 1; }
scripts/piper-venv.sh >&2
cargo build --release --bin omnivoice-server --bin loadgen >&2
LOADGEN=target/release/loadgen
work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

wait_for() { # url what
    for _ in $(seq 1 300); do
        curl -sf -o /dev/null "$1" && return 0
        sleep 0.1
    done
    echo "bench-vs-piper: $2 did not start" >&2
    exit 1
}

# Ours: the voice's own settings, no cache, so every unique text is synthesized.
target/release/omnivoice-server --port "$PORT" --log-level warn --no-cache \
    --voices-dir "$(dirname "$VOICE")" --preload "piper/$VOICE_ID" "$@" >/dev/null &
pids+=($!)
# Piper: its defaults (onnxruntime's own thread pool, Flask's threaded dev server) and the same
# 0.2 s pause between sentences that ours puts in, so both produce the same audio per text.
.venv-piper/bin/python -m piper.http_server --host 127.0.0.1 --port "$PIPER_PORT" \
    -m "$VOICE" --sentence-silence 0.2 >"$work/piper.log" 2>&1 &
pids+=($!)
wait_for "$OURS/health" "omnivoice-server"
wait_for "$PIPER/info" "piper.http_server"

run() { # name concurrency loadgen-args...
    local name=$1 c=$2
    shift 2
    local n=$(( ROUNDS * c < 8 ? 8 : ROUNDS * c ))
    # Each side and level gets its own texts: nothing is ever a repeat.
    "$LOADGEN" -n "$n" -c "$c" --unique --warmup 1 --voice "$VOICE_ID" \
        --text "Run $name $c. The quick brown fox jumps over the lazy dog near the river bank." \
        "$@" >"$work/$name-$c.txt"
    if ! grep -q " failed=0" "$work/$name-$c.txt"; then
        echo "bench-vs-piper: failed requests against $name:" >&2
        cat "$work/$name-$c.txt" >&2
        exit 1
    fi
}
field() { # file key (from "key=value" pairs in loadgen's output)
    grep -o "$2=[0-9.]*" "$1" | head -1 | cut -d= -f2
}

for c in 1 4 16; do
    run ours "$c" --url "$OURS"
    run piper "$c" --url "$PIPER" --api piper
done

for c in 1 4 16; do
    for name in ours piper; do
        echo "## $name, concurrency $c"
        cat "$work/$name-$c.txt"
    done
done
echo
echo "# omnivoice-server vs piper.http_server, $VOICE_ID, unique texts, WAV, $(date -u +%F)"
printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' concurrency \
    "ours audio s/s" "piper audio s/s" "ratio" "ours p50 ms" "piper p50 ms" "ratio" \
    "ours p99 ms" "piper p99 ms" "ratio"
echo "|---|---|---|---|---|---|---|---|---|---|"
for c in 1 4 16; do
    o="$work/ours-$c.txt" p="$work/piper-$c.txt"
    python3 - "$c" "$(field "$o" audio_s_per_wall_s)" "$(field "$p" audio_s_per_wall_s)" \
        "$(field "$o" p50)" "$(field "$p" p50)" "$(field "$o" p99)" "$(field "$p" p99)" <<'PY'
import sys
c, ot, pt, o50, p50, o99, p99 = sys.argv[1], *map(float, sys.argv[2:])
print(f"| {c} | {ot:.1f} | {pt:.1f} | {ot / pt:.2f}x | {o50:.0f} | {p50:.0f} | {o50 / p50:.2f}x "
      f"| {o99:.0f} | {p99:.0f} | {o99 / p99:.2f}x |")
PY
done
echo "(audio ratio: ours / piper, higher is better; latency ratios: ours / piper, lower is better)"
