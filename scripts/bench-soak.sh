#!/usr/bin/env bash
# Whether the server's memory levels off under steady load (issue #45, docs/performance.md §11):
# Kokoro behind OpenAI's names, a 32 MB cache, two workers, concurrency 16, 70 % of the texts
# unique, for SOAK_SECONDS (600). RSS is sampled every 5 s; the figures are the RSS when the
# warm-up ends (the first fifth of the run), at the end, the growth between them and the peak.
#   scripts/bench-soak.sh [BINARY]   (default target/release/omnivoice-server)
# Env: LOADGEN (target/release/loadgen), PORT (18957), SOAK_SECONDS (600), EXTRA (more server
# flags, e.g. to compare a setting).
set -euo pipefail
cd "$(dirname "$0")/.."
server=${1:-target/release/omnivoice-server}
loadgen=${LOADGEN:-target/release/loadgen}
port=${PORT:-18957}
seconds=${SOAK_SECONDS:-600}
url=http://127.0.0.1:$port
data=$(mktemp -d)
# shellcheck disable=SC2086
"$server" serve --port "$port" --data-dir "$data" --max-concurrent 2 --cache-max-mb 32 \
    --log-level warn ${EXTRA:-} &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$data"' EXIT
until curl -sf "$url/health/ready" >/dev/null; do
    kill -0 "$pid" 2>/dev/null || { echo "bench-soak: the server did not start" >&2; exit 1; }
    sleep 0.5
done
rss() { awk '/^VmRSS:/ { printf "%.0f", $2 / 1024 }' "/proc/$pid/status"; }
echo "CPU: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo); $(nproc) cores"
echo "idle after start: $(rss) MiB"

# Rounds of requests until the time is up; every round's texts are new for 70 % of them
# (--distinct cycles texts with a number appended, and the rounds differ by their text).
samples=$data/rss
(
    while kill -0 "$pid" 2>/dev/null; do
        echo "$(date +%s) $(rss)" >>"$samples"
        sleep 5
    done
) &
sampler=$!
started=$(date +%s)
round=0
while [ $(($(date +%s) - started)) -lt "$seconds" ]; do
    round=$((round + 1))
    "$loadgen" --url "$url" -n 200 -c 16 --distinct 140 --model tts-1 --voice alloy \
        --format mp3 --text "Round $round of the soak keeps the server busy with one more sentence" |
        grep -oE "(failed|req_per_s)=[0-9.]+" | tr '\n' ' ' || true
    echo "(round $round, $(rss) MiB)"
done
kill "$sampler" 2>/dev/null || true
awk -v start="$started" -v warm="$((seconds / 5))" '
    { t = $1 - start; if (t >= warm && !base) base = $2; if ($2 > peak) peak = $2; last = $2 }
    END { printf "after warm-up %d MiB, at the end %d MiB (%+.1f %%), peak %d MiB\n",
          base, last, 100 * (last - base) / base, peak }' "$samples"
