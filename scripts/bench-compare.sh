#!/usr/bin/env bash
# Whole-body throughput and latency of two or more server binaries in one run
# (docs/performance.md §3c). Each binary serves on loopback with the cache off; loadgen sends
# unique two-sentence texts (WAV, whole bodies) at concurrency 1 and 16. Rounds alternate the
# binaries so that machine load moves all alike: compare them within a round. Extra server
# arguments (e.g. --precision f32) go after `--`.
#   scripts/bench-compare.sh BINARY... [-- SERVER-ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
binaries=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do binaries+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
[ ${#binaries[@]} -gt 0 ] || { echo "usage: $0 BINARY... [-- SERVER-ARGS...]" >&2; exit 2; }
loadgen=${LOADGEN:-target/release/loadgen}
rounds=${ROUNDS:-3}
port=${PORT:-18950}

for round in $(seq "$rounds"); do
    for bin in "${binaries[@]}"; do
        "$bin" --port "$port" --log-level warn --no-cache --voices-dir voices \
            --preload piper/en_US-joe-medium "$@" >/dev/null 2>&1 &
        server=$!
        until curl -sf -o /dev/null "http://127.0.0.1:$port/health"; do sleep 0.1; done
        for c in 1 16; do
            n=$(( c < 8 ? 8 : 3 * c ))
            result=$("$loadgen" --url "http://127.0.0.1:$port" -n "$n" -c "$c" --unique --warmup 1 \
                --voice en_US-joe-medium \
                --text "Round $round at $c. The quick brown fox jumps over the lazy dog near the river bank.")
            echo "round=$round concurrency=$c binary=$bin" \
                "$(grep -oE 'audio_s_per_wall_s=[0-9.]+' <<<"$result")" \
                "$(grep -oE 'latency_ms p50=[0-9.]+' <<<"$result")"
        done
        kill "$server"; wait "$server" 2>/dev/null || true
    done
done
