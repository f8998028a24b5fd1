#!/usr/bin/env bash
# Time to first audio of streamed responses, for one or more server binaries in one run
# (docs/performance.md §3). Each binary serves on loopback with the cache off; loadgen sends
# each case streamed as pcm, one request at a time, to each binary in turn.
#
# ENGINE=piper (default): a single long sentence (about 250 characters, no clause break) and a
# short one, with the Piper voice (each line: p50 of REQUESTS requests, default 6).
# ENGINE=kokoro: Kokoro (voices/kokoro, af_heart), the sentences of issue #45 ("Okay.", the
# fox, the table for two, 22 words with one comma) and ten agent-style replies (p50 of
# REQUESTS requests, default 5).
# Each line: `round=… case=… binary=… chars=… ttfb_ms=… total_ms=…` (first byte and whole
# response, p50).
#   scripts/bench-first-audio.sh [BINARY...]   (default: target/release/omnivoice-server)
set -euo pipefail
cd "$(dirname "$0")/.."
binaries=("$@")
[ ${#binaries[@]} -gt 0 ] || binaries=(target/release/omnivoice-server)
loadgen=${LOADGEN:-target/release/loadgen}
engine=${ENGINE:-piper}
rounds=${ROUNDS:-2}
port=${PORT:-18931}

if [ "$engine" = kokoro ]; then
    requests=${REQUESTS:-5}
    cases=(
        "Okay."
        "The quick brown fox jumps over the lazy dog."
        "Sure, I can help you book a table for two at seven tonight."
        "When you get to the station tomorrow morning, take the second exit and walk straight ahead until you reach the big fountain."
        "Sure thing, I have booked your table for seven o'clock tonight."
        "I'm sorry, but I couldn't find any flights that leave before noon."
        "Your package is on its way and should arrive by Thursday afternoon."
        "Let me check that for you, it will only take a moment."
        "The weather tomorrow looks sunny with a high of about seventy degrees."
        "Got it, I've added milk, eggs and bread to your shopping list."
        "You have three new messages, and one of them is from your manager."
        "I can transfer you to a specialist who can help with your billing question."
        "Your appointment with Doctor Lee is confirmed for Monday at nine thirty."
        "Great question, the museum is open every day except Tuesday from ten until six."
    )
    server_args=(--kokoro-dir voices/kokoro --preload af_heart)
    client_args=(--model kokoro --voice af_heart)
else
    requests=${REQUESTS:-6}
    cases=(
        "The old lighthouse keeper walked slowly along the narrow rocky path that wound its way up the steep green hill toward the tall white tower where he had spent nearly forty years watching the great ships pass by through the long dark nights of every winter"
        "The quick brown fox jumps over the lazy dog."
    )
    server_args=(--preload en_US-joe-medium)
    client_args=()
fi

# Every binary serves at once, each on its own port (PORT, PORT+1, …), and each case is sent to
# one after the other: requests go one at a time, so only one server computes at a time, and
# a change in the machine's load falls on all of them alike.
servers=()
for i in "${!binaries[@]}"; do
    "${binaries[$i]}" --port $((port + i)) --cache-enabled false "${server_args[@]}" \
        --log-level warn &
    servers+=($!)
done
trap 'kill "${servers[@]}" 2>/dev/null || true' EXIT
for i in "${!binaries[@]}"; do
    until curl -sf "http://127.0.0.1:$((port + i))/health/ready" >/dev/null; do sleep 0.2; done
done
for round in $(seq "$rounds"); do
    for c in "${!cases[@]}"; do
        text=${cases[$c]}
        for i in "${!binaries[@]}"; do
            result=$("$loadgen" --url "http://127.0.0.1:$((port + i))" -n "$requests" -c 1 \
                --warmup 1 --stream --format pcm "${client_args[@]}" --text "$text")
            # "latency_ms p50=… p95=… p99=… | ttfb_ms p50=…"
            total=$(grep -oE "latency_ms p50=[0-9.]+" <<<"$result" | cut -d= -f2)
            ttfb=$(grep -oE "ttfb_ms p50=[0-9.]+" <<<"$result" | cut -d= -f2)
            echo "round=$round case=$c binary=${binaries[$i]} chars=${#text} ttfb_ms=$ttfb total_ms=$total"
        done
    done
done
