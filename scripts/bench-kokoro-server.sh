#!/usr/bin/env bash
# The Kokoro server benchmarks of docs/performance.md §11, in one run on one machine, so that
# the ratios hold on a shared, noisy host:
#   1. throughput at concurrency 1, 4 and 16 with unique texts (every request a synthesis; our
#      cache off), this server against fastkokoro (an OpenAI-compatible Kokoro server on
#      onnxruntime, pinned in .venv-fastkokoro), both on loopback with the same int8 model and
#      voice packs, levels alternating between the two; plus kokoro-onnx called in a loop
#      (one call at a time, .venv-kokoro) on the concurrency-1 texts;
#   2. time to first audio of a short sentence, streamed as pcm, one request at a time;
#   3. peak RSS (VmHWM) of a fresh server with Kokoro and the default Piper voice both loaded,
#      after one request on each, and of both servers after the load levels.
# Prints markdown tables. A benchmark, not a test: about eight minutes on 2 cores (REPEATS=1).
#
# Usage: scripts/bench-kokoro-server.sh [extra flags for omnivoice-server, e.g. --precision f32]
# Environment: PORT, PEER_PORT (loopback ports), REPEATS (runs of every level on each side,
# reported as medians; default 1), NO_BUILD=1 (use the release binaries as they are).
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${PORT:-18920}
PEER_PORT=${PEER_PORT:-18921}
REPEATS=${REPEATS:-1}
OURS="http://127.0.0.1:$PORT"
PEER="http://127.0.0.1:$PEER_PORT"
BIN=target/release/omnivoice-server
LOADGEN=target/release/loadgen
KOKORO=voices/kokoro
VOICE=af_heart
SHORT="The quick brown fox jumps over the lazy dog."

scripts/kokoro-assets.sh >&2
scripts/kokoro-venv.sh >&2
scripts/fastkokoro-venv.sh >&2
[ -n "${NO_BUILD:-}" ] || cargo build --release --bin omnivoice-server --bin loadgen >&2
[ -f voices/en_US-joe-medium.onnx ] || { echo "bench-kokoro-server: the default Piper voice is missing (scripts/setup.sh)" >&2; exit 1; }

# $work, pids, cleanup on exit, wait_for.
source scripts/bench-lib.sh
peak_rss_mib() { awk '/^VmHWM:/ { printf "%.0f", $2 / 1024 }' "/proc/$1/status"; }
speak() { # url model voice text: one whole WAV request, failing loudly
    curl -sf -o /dev/null "$1/v1/audio/speech" -H 'Content-Type: application/json' \
        -d "{\"model\": \"$2\", \"voice\": \"$3\", \"input\": \"$4\", \"response_format\": \"wav\"}"
}

# fastkokoro reads one .npz of packs: the same kokoro-js files, made once into its venv.
npz=.venv-fastkokoro/voices-kokoro-js.npz
if [ ! -f "$npz" ]; then
    .venv-kokoro/bin/python - "$KOKORO/voices" "$npz" <<'PY'
import pathlib, sys
import numpy as np
d = pathlib.Path(sys.argv[1])
np.savez(sys.argv[2], **{p.stem: np.fromfile(p, dtype="<f4").reshape(510, 1, 256) for p in sorted(d.glob("*.bin"))})
PY
fi

# 3 first: a fresh server with Kokoro (the default engine) and Piper, one request on each.
"$BIN" --port "$PORT" --log-level warn --no-cache --kokoro-dir "$KOKORO" \
    --preload "$VOICE" --preload piper/en_US-joe-medium "$@" >/dev/null &
fresh=$!
pids+=("$fresh")
wait_for "$OURS/health" "omnivoice-server" 600 0.2
speak "$OURS" kokoro "$VOICE" "$SHORT"
speak "$OURS" piper en_US-joe-medium "$SHORT"
fresh_rss=$(peak_rss_mib "$fresh")
kill "$fresh"; wait "$fresh" 2>/dev/null || true

# Ours: Kokoro as installed (the default engine), cache off. The peer: fastkokoro's defaults
# (onnxruntime with its own thread pool; one synthesis at a time: its handler runs the model
# on the event loop) on our int8 file and packs, offline, its simplified-graph cache in its venv.
"$BIN" --port "$PORT" --log-level warn --no-cache --kokoro-dir "$KOKORO" "$@" >/dev/null &
ours_pid=$!
pids+=("$ours_pid")
HF_HUB_OFFLINE=1 FASTKOKORO_HOST=127.0.0.1 FASTKOKORO_PORT="$PEER_PORT" \
    FASTKOKORO_MODEL_PATH="$KOKORO/kokoro-v1.0.int8.onnx" FASTKOKORO_VOICES_PATH="$npz" \
    FASTKOKORO_CACHE_DIR=.venv-fastkokoro/cache \
    .venv-fastkokoro/bin/fastkokoro >"$work/fastkokoro.log" 2>&1 &
peer_pid=$!
pids+=("$peer_pid")
wait_for "$OURS/health" "omnivoice-server" 600 0.2
wait_for "$PEER/health" "fastkokoro (see its log: .venv-fastkokoro/bin/fastkokoro)" 600 0.2

run() { # name concurrency repeat loadgen-args...
    local name=$1 c=$2 r=$3
    shift 3
    local n=$(( c < 8 ? 8 : c ))
    local out="$work/$name-$c-$r.txt"
    # The same texts on both sides; each level and repeat its own, so nothing repeats.
    "$LOADGEN" -n "$n" -c "$c" --unique --warmup 1 --model kokoro --voice "$VOICE" \
        --text "Round $r, level $c. The quick brown fox jumps over the lazy dog near the river bank." \
        "$@" >"$out"
    if ! grep -q " failed=0" "$out"; then
        echo "bench-kokoro-server: failed requests against $name:" >&2
        cat "$out" >&2
        exit 1
    fi
    echo "## $name, concurrency $c, repeat $r"
    cat "$out"
}

loop() { # repeat: kokoro-onnx in one process, one call after another, on the level-1 texts
    local r=$1
    python3 - "$work" "$r" "$VOICE" <<'PY' >"$work/jobs-$r.json"
import json, sys
work, r, voice = sys.argv[1:]
text = f"Round {r}, level 1. The quick brown fox jumps over the lazy dog near the river bank."
# A first call to warm onnxruntime up, then the eight texts loadgen sends at concurrency 1.
texts = [f"{text} Number 99."] + [f"{text} Number {i}." for i in range(8)]
print(json.dumps([{"voice": voice, "lang": "en-us", "text": t, "wav": f"{work}/loop-{i}.wav"}
                  for i, t in enumerate(texts)]))
PY
    .venv-kokoro/bin/python scripts/kokoro_onnx_speak.py --kokoro-dir "$KOKORO" \
        <"$work/jobs-$r.json" | tail -n +2 >"$work/loop-$r.txt"
    echo "## kokoro-onnx loop, repeat $r"
    cat "$work/loop-$r.txt"
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$REPEATS"); do
    for c in 1 4 16; do
        run ours "$c" "$r" --url "$OURS"
        run fastkokoro "$c" "$r" --url "$PEER"
        [ "$c" -ne 1 ] || loop "$r"
    done
done
# First audio: three rounds that alternate the sides, so a change in load falls on both.
for t in 1 2 3; do
    for name in ours fastkokoro; do
        url=$([ "$name" = ours ] && echo "$OURS" || echo "$PEER")
        "$LOADGEN" --url "$url" -n 4 -c 1 --warmup 1 --stream --format pcm --model kokoro \
            --voice "$VOICE" --text "$SHORT" >"$work/ttfa-$name-$t.txt"
        echo "## $name, first audio, streamed pcm, round $t"
        cat "$work/ttfa-$name-$t.txt"
    done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
ours_rss=$(peak_rss_mib "$ours_pid")
peer_rss=$(peak_rss_mib "$peer_pid")
echo

python3 - "$work" "$REPEATS" "$fresh_rss" "$ours_rss" "$peer_rss" "$*" <<'PY'
import datetime, pathlib, re, statistics, sys
work, repeats = pathlib.Path(sys.argv[1]), int(sys.argv[2])
fresh_rss, ours_rss, peer_rss, flags = sys.argv[3:7]

def value(text, key):
    if key == "req_per_s":  # loadgen rounds it to 0.01: recomputed from its counts
        return value(text, " ok") / value(text, "wall_s")
    return float(re.search(rf"{key}=([0-9.]+)", text).group(1))

def median(name, c, key):
    return statistics.median(
        value((work / f"{name}-{c}-{r}.txt").read_text(), key) for r in range(1, repeats + 1))

print(f"# Kokoro af_heart, omnivoice-server {flags or '(defaults)'} vs fastkokoro 0.7.0, unique "
      f"texts, WAV, median of {repeats}, {datetime.date.today()}")
print()
# Both sides speak the same texts, so requests per second is the throughput to compare; the
# audio they make for a text differs (ours speaks each sentence as its own input, with the
# model's lead and trail silence and a pause between; kokoro-onnx and fastkokoro trim), so
# audio seconds per wall second are shown with each side's audio per request.
print("| concurrency | ours req/s | fastkokoro req/s | ratio | ours p50 ms | fastkokoro p50 ms "
      "| ratio | ours p99 ms | fastkokoro p99 ms | ratio | audio s/s ours, fastkokoro | audio s per request ours, fastkokoro |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
def per_request(name, c):
    return median(name, c, "audio_s_per_wall_s") / median(name, c, "req_per_s")
for c in (1, 4, 16):
    row = [str(c)]
    for key, digits in (("req_per_s", 3), ("p50", 0), ("p99", 0)):
        ours, peer = median("ours", c, key), median("fastkokoro", c, key)
        row += [f"{ours:.{digits}f}", f"{peer:.{digits}f}", f"**{ours / peer:.2f}x**"]
    row.append(f"{median('ours', c, 'audio_s_per_wall_s'):.2f}, {median('fastkokoro', c, 'audio_s_per_wall_s'):.2f}")
    row.append(f"{per_request('ours', c):.2f}, {per_request('fastkokoro', c):.2f}")
    print("| " + " | ".join(row) + " |")

# kokoro-onnx in a loop: audio and time of each call; the p50/p99 of the calls themselves.
audio, took = [], []
for r in range(1, repeats + 1):
    for line in (work / f"loop-{r}.txt").read_text().splitlines():
        a, t = re.search(r": ([0-9.]+) s of audio in ([0-9.]+) s", line).groups()
        audio.append(float(a)); took.append(float(t))
loop_rps = len(took) / sum(took)
ours_rps, ours_p50, ours_p99 = (median("ours", 1, k) for k in ("req_per_s", "p50", "p99"))
loop_p50, loop_p99 = 1000 * statistics.median(took), 1000 * max(took)
print(f"| 1, vs kokoro-onnx loop | {ours_rps:.3f} | {loop_rps:.3f} | **{ours_rps / loop_rps:.2f}x** "
      f"| {ours_p50:.0f} | {loop_p50:.0f} | {ours_p50 / loop_p50:.2f}x "
      f"| {ours_p99:.0f} | {loop_p99:.0f} | {ours_p99 / loop_p99:.2f}x "
      f"| {median('ours', 1, 'audio_s_per_wall_s'):.2f}, {sum(audio) / sum(took):.2f} "
      f"| {per_request('ours', 1):.2f}, {statistics.mean(audio):.2f} |")
print("(req/s: higher is better; latency: lower is better; ratios are ours / peer; the loop row's "
      "peer is kokoro-onnx's `create` calls alone, one after another, no HTTP; its p99 is the slowest call)")
print()

print("| first audio, streamed pcm, short sentence, 3 rounds of 4 | ttfb p50 per round, ms | median | total p50 (median), ms |")
print("|---|---|---|---|")
ttfa = {}
for name in ("ours", "fastkokoro"):
    texts = [(work / f"ttfa-{name}-{t}.txt").read_text() for t in (1, 2, 3)]
    rounds = [float(re.search(r"ttfb_ms p50=([0-9.]+)", x).group(1)) for x in texts]
    ttfa[name] = statistics.median(rounds)
    total = statistics.median(value(x, "p50") for x in texts)
    print(f"| {name} | {', '.join(f'{v:.0f}' for v in rounds)} | {ttfa[name]:.0f} | {total:.0f} |")
print(f"| ratio ours / fastkokoro | | **{ttfa['ours'] / ttfa['fastkokoro']:.2f}x** | |")
print()

print("| peak RSS (VmHWM) | MiB |")
print("|---|---|")
print(f"| ours, fresh: Kokoro ({'af_heart'}) and Piper (en_US-joe-medium) loaded, one request each | {fresh_rss} |")
print(f"| ours, after the load levels (Kokoro only) | {ours_rss} |")
print(f"| fastkokoro, after the load levels | {peer_rss} |")
PY
