#!/usr/bin/env bash
# Time to first audio of streamed responses, for one or more server binaries in one run
# (docs/performance.md §3). Each binary serves on loopback with the cache off; loadgen sends
# a single long sentence (about 250 characters, no clause break) and a short one, streamed as
# pcm, one request at a time. Rounds alternate the binaries so that machine load moves all
# alike: compare them within a round.
#   scripts/bench-first-audio.sh [BINARY...]   (default: target/release/omnivoice-server)
set -euo pipefail
cd "$(dirname "$0")/.."
binaries=("$@")
[ ${#binaries[@]} -gt 0 ] || binaries=(target/release/omnivoice-server)
loadgen=${LOADGEN:-target/release/loadgen}
rounds=${ROUNDS:-2}
requests=${REQUESTS:-6}
port=${PORT:-18931}
long="The old lighthouse keeper walked slowly along the narrow rocky path that wound its way up the steep green hill toward the tall white tower where he had spent nearly forty years watching the great ships pass by through the long dark nights of every winter"
short="The quick brown fox jumps over the lazy dog."

for round in $(seq "$rounds"); do
    for bin in "${binaries[@]}"; do
        "$bin" --port "$port" --cache-enabled false --preload en_US-joe-medium --log-level warn &
        server=$!
        until curl -sf "http://127.0.0.1:$port/health/ready" >/dev/null; do sleep 0.2; done
        for case in long short; do
            text=$([ "$case" = long ] && echo "$long" || echo "$short")
            echo "round=$round binary=$bin case=$case chars=${#text}"
            "$loadgen" --url "http://127.0.0.1:$port" -n "$requests" -c 1 --warmup 1 \
                --stream --format pcm --text "$text" | grep -E "latency_ms|first_byte_fraction"
        done
        kill "$server"; wait "$server" 2>/dev/null || true
    done
done
