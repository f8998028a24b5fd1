#!/usr/bin/env bash
# Reproduces the scale-out figures in docs/performance.md: latency of a miss (synthesis), a
# Redis (L2) hit and a memory (L1) hit, and how often one replica's synthesis answers another
# replica's request when two replicas share Redis under load, against two without Redis.
# Needs redis-server (scripts/scaleout-deps.sh) and a build: cargo build --release --bins
# (PROFILE=debug uses the dev profile, which is optimized like release).
set -euo pipefail
cd "$(dirname "$0")/.."
PROFILE=${PROFILE:-release}
BIN=target/$PROFILE/omnivoice-server
LOADGEN=target/$PROFILE/loadgen
BASE_PORT=${BASE_PORT:-18950}
REDIS_PORT=$BASE_PORT
A="http://127.0.0.1:$((BASE_PORT + 1))"
B="http://127.0.0.1:$((BASE_PORT + 2))"
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

wait_for() { # url
    for _ in $(seq 1 300); do
        curl -sf "$1/health" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "server at $1 did not start" >&2
    exit 1
}
start_pair() { # extra server flags...
    "$BIN" --port "$((BASE_PORT + 1))" --log-level warn --max-concurrent 1 "$@" >/dev/null &
    PIDS+=($!)
    "$BIN" --port "$((BASE_PORT + 2))" --log-level warn --max-concurrent 1 "$@" >/dev/null &
    PIDS+=($!)
    wait_for "$A"
    wait_for "$B"
}
stop_pair() {
    kill "${PIDS[-1]}" "${PIDS[-2]}"
    wait "${PIDS[-1]}" "${PIDS[-2]}" 2>/dev/null || true
    unset 'PIDS[-1]' 'PIDS[-1]'
}
syntheses() { # url
    curl -sf "$1/metrics" | awk '$1 == "omnivoice_syntheses_total" { print $2 }'
}

redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no >/dev/null &
PIDS+=($!)
for _ in $(seq 1 100); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
REDIS="--redis-url redis://127.0.0.1:$REDIS_PORT/"

start_pair $REDIS
echo "## miss: 32 different phrases on A (synthesized, stored in memory and Redis)"
"$LOADGEN" --url "$A" -n 32 -c 1 --unique
echo "## L2 hit: the same 32 phrases on B (not in B's memory; found in Redis)"
"$LOADGEN" --url "$B" -n 32 -c 1 --unique
echo "## L1 hit: the same 32 phrases on B again (now in B's memory)"
"$LOADGEN" --url "$B" -n 32 -c 1 --unique
stop_pair

TEXT="Load spread over two replicas repeats a small set of phrases."
echo "## two replicas sharing Redis: 400 requests at concurrency 8, 41 phrases, round robin (odd, so each phrase reaches both)"
redis-cli -p "$REDIS_PORT" flushall >/dev/null
start_pair $REDIS
"$LOADGEN" --url "$A,$B" -n 400 -c 8 --distinct 41 --text "$TEXT"
echo "syntheses: A=$(syntheses "$A") B=$(syntheses "$B") (the 41 phrases need 41)"
stop_pair
echo "## the same without Redis"
start_pair
"$LOADGEN" --url "$A,$B" -n 400 -c 8 --distinct 41 --text "$TEXT"
echo "syntheses: A=$(syntheses "$A") B=$(syntheses "$B")"
stop_pair
