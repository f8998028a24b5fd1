#!/usr/bin/env bash
# The peer benchmark of docs/performance.md §2: this server (release build) against Piper's own
# HTTP server (piper.http_server from the pinned piper-tts in .venv-piper, onnxruntime), both on
# loopback with the same voice file, driven by loadgen with unique texts (every request a
# synthesis; our cache off) at concurrency 1, 4 and 16. Prints audio seconds per wall second and
# p50/p99 latency side by side, with ours/Piper ratios. A benchmark, not a test: a few minutes.
#
# Usage: scripts/bench-vs-piper.sh [extra flags for omnivoice-server...]
# Environment: VOICE (default voices/en_US-joe-medium.onnx), PORT, PIPER_PORT, ROUNDS (requests
# per concurrency level = ROUNDS × concurrency, at least 8; default 4), REPEATS (runs of every
# level on each side, reported as medians; default 3).
set -euo pipefail
cd "$(dirname "$0")/.."
VOICE=${VOICE:-voices/en_US-joe-medium.onnx}
VOICE_ID=$(basename "$VOICE" .onnx)
PORT=${PORT:-18910}
PIPER_PORT=${PIPER_PORT:-18911}
ROUNDS=${ROUNDS:-4}
REPEATS=${REPEATS:-3}
OURS="http://127.0.0.1:$PORT"
PIPER="http://127.0.0.1:$PIPER_PORT"

[ -f "$VOICE" ] || { echo "bench-vs-piper: $VOICE is missing (scripts/setup.sh fetches it)" >&2; exit 1; }
scripts/piper-venv.sh >&2
cargo build --release --bin omnivoice-server --bin loadgen >&2
LOADGEN=target/release/loadgen
# $work, pids, cleanup on exit, wait_for.
source scripts/bench-lib.sh

# Ours: the voice's own settings, no cache, so every unique text is synthesized.
target/release/omnivoice-server --port "$PORT" --log-level warn --no-cache \
    --voices-dir "$(dirname "$VOICE")" --preload "piper/$VOICE_ID" "$@" >/dev/null &
pids+=($!)
# Piper: its defaults (onnxruntime's own thread pool, Flask's threaded dev server) and the same
# 0.2 s pause between sentences that ours puts in, so both produce the same audio per text.
.venv-piper/bin/python -m piper.http_server --host 127.0.0.1 --port "$PIPER_PORT" \
    -m "$VOICE" --sentence-silence 0.2 >"$work/piper.log" 2>&1 &
pids+=($!)
wait_for "$OURS/health" "omnivoice-server" 300 0.1
wait_for "$PIPER/info" "piper.http_server" 300 0.1

run() { # name concurrency repeat loadgen-args...
    local name=$1 c=$2 r=$3
    shift 3
    local n=$(( ROUNDS * c < 8 ? 8 : ROUNDS * c ))
    local out="$work/$name-$c-$r.txt"
    # Each side, level and repeat gets its own texts: nothing is ever a repeat.
    "$LOADGEN" -n "$n" -c "$c" --unique --warmup 1 --voice "$VOICE_ID" \
        --text "Run $name $c $r. The quick brown fox jumps over the lazy dog near the river bank." \
        "$@" >"$out"
    if ! grep -q " failed=0" "$out"; then
        echo "bench-vs-piper: failed requests against $name:" >&2
        cat "$out" >&2
        exit 1
    fi
    echo "## $name, concurrency $c, repeat $r"
    cat "$out"
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
# The two sides alternate, level by level, REPEATS times: load from other jobs on a shared
# machine then falls on both, and the medians below set single bursts aside.
for r in $(seq 1 "$REPEATS"); do
    for c in 1 4 16; do
        run ours "$c" "$r" --url "$OURS"
        run piper "$c" "$r" --url "$PIPER" --api piper
    done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

python3 - "$work" "$VOICE_ID" "$REPEATS" <<'PY'
import datetime, pathlib, re, statistics, sys
work, voice, repeats = pathlib.Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])

def median(name, c, key):
    values = []
    for r in range(1, repeats + 1):
        text = (work / f"{name}-{c}-{r}.txt").read_text()
        values.append(float(re.search(rf"{key}=([0-9.]+)", text).group(1)))
    return statistics.median(values)

print(f"# omnivoice-server vs piper.http_server, {voice}, unique texts, WAV, "
      f"median of {repeats}, {datetime.date.today()}")
print("| concurrency | ours audio s/s | piper audio s/s | ratio | ours p50 ms | piper p50 ms "
      "| ratio | ours p99 ms | piper p99 ms | ratio |")
print("|---|---|---|---|---|---|---|---|---|---|")
for c in (1, 4, 16):
    row = [str(c)]
    for key, digits in (("audio_s_per_wall_s", 1), ("p50", 0), ("p99", 0)):
        ours, piper = median("ours", c, key), median("piper", c, key)
        row += [f"{ours:.{digits}f}", f"{piper:.{digits}f}", f"{ours / piper:.2f}x"]
    print("| " + " | ".join(row) + " |")
print("(audio: higher is better; latency: lower is better; ratios are ours / piper)")
PY
