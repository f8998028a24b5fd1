#!/usr/bin/env bash
# Reproduces the server figures in docs/performance.md: batching on vs off at concurrency
# 1, 4 and 16 (unique texts, cache off), cache-hit throughput, and time to first audio for a
# ~1000-character input streamed vs whole. Needs a release build (cargo build --release).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=target/release/omnivoice-server
LOADGEN=target/release/loadgen
PORT=${PORT:-18900}
URL="http://127.0.0.1:$PORT"

start() { # extra server flags...
    "$BIN" --port "$PORT" --log-level warn "$@" >/dev/null &
    SERVER=$!
    for _ in $(seq 1 200); do
        curl -sf "$URL/health" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "server did not start" >&2
    exit 1
}
stop() { kill "$SERVER"; wait "$SERVER" 2>/dev/null || true; }

for mode in "--batch-enabled" "--no-batch"; do
    start "$mode" --no-cache
    for c in 1 4 16; do
        n=$(( c < 4 ? 8 : 2 * c ))
        echo "## $mode concurrency $c"
        "$LOADGEN" --url "$URL" -n "$n" -c "$c" --unique --warmup 1
    done
    stop
done

start
echo "## cache hits (same text), concurrency 16"
"$LOADGEN" --url "$URL" -n 2000 -c 16 --warmup 1
echo "## cache off, same text, concurrency 16 (baseline for the cache figures)"
stop
start --no-cache
"$LOADGEN" --url "$URL" -n 32 -c 16 --warmup 1
stop

start --no-cache
LONG=$(python3 -c 'print(("Streaming matters when the text is long. A listener should hear the first sentence early. " * 12)[:1000])')
for stream in "--stream" ""; do
    echo "## 1000-character input, ${stream:-whole body}"
    "$LOADGEN" --url "$URL" -n 3 -c 1 --format mp3 $stream --text "$LONG" --unique
done
stop
