#!/usr/bin/env bash
# Peak memory (VmHWM) of the server as the deployment images run it, per engine set, for the
# memory requests and limits in deploy/ (docs/performance.md §18):
#   cpu        Kokoro behind OpenAI's names and Piper's default voice (omnivoice-server:cpu);
#   omnivoice  the same, plus OmniVoice from a checkpoint at the released size
#              (scripts/omnivoice_random_checkpoint.py writes one of seeded random weights).
# The server runs with the deployments' settings (2 workers, a 256 MB memory cache, no Redis).
# Three phases, each one's peak printed: the engines loaded (one request each), the hostile
# inputs of tests/bounded_work.rs at their full sizes plus the longest input the server takes,
# four at a time, then a soak at concurrency 16 with 70 % unique texts.
# Two peaks: VmHWM, which counts the pages of model files mapped while they load (clean page
# cache, which a container's memory limit reclaims rather than kill for), and the peak of
# anonymous memory (RssAnon, sampled every 100 ms), which a limit must hold.
#   scripts/bench-memory.sh cpu|omnivoice
# Env: SERVER (default target/release/omnivoice-server), LOADGEN (target/release/loadgen),
# OMNIVOICE_CHECKPOINT (default target/omnivoice-released-random), SOAK_REQUESTS (default 600),
# OMNIVOICE_REQUESTS (default 4, sent at once: one batch), OMNIVOICE_STEPS (default 16: the
# steps change the time, not the memory), SKIP_HOSTILE=1 (when another run measured it).
set -euo pipefail
cd "$(dirname "$0")/.."
set_name=${1:?usage: scripts/bench-memory.sh cpu|omnivoice}
server=${SERVER:-target/release/omnivoice-server}
loadgen=${LOADGEN:-target/release/loadgen}
checkpoint=${OMNIVOICE_CHECKPOINT:-target/omnivoice-released-random}
port=${PORT:-18955}
url=http://127.0.0.1:$port
data=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$data"' EXIT

args=(serve --port "$port" --data-dir "$data" --max-concurrent 2 --cache-max-mb 256
      --request-timeout-s 900 --log-level warn)
case $set_name in
    cpu) ;;
    omnivoice) args+=(--omnivoice-dir "$checkpoint") ;;
    *) echo "bench-memory: unknown engine set $set_name (cpu or omnivoice)" >&2; exit 2 ;;
esac
"$server" "${args[@]}" &
pid=$!
# The anonymous peak, sampled from the start (loading included) into a file.
anon_peak_file=$data/anon-peak
(
    max=0
    while [ -e "/proc/$pid/status" ]; do
        now=$(awk '/^RssAnon:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || echo 0)
        if [ "${now:-0}" -gt "$max" ]; then max=$now; echo "$max" >"$anon_peak_file"; fi
        sleep 0.1
    done
) &
until curl -sf "$url/health/ready" >/dev/null; do
    kill -0 "$pid" 2>/dev/null || { echo "bench-memory: the server did not start" >&2; exit 1; }
    sleep 0.5
done
peak() {
    awk '/^VmHWM:/ { printf "VmHWM %.0f MiB", $2 / 1024 }' "/proc/$pid/status"
    awk '{ printf ", anonymous peak %.0f MiB", $1 / 1024 }' "$anon_peak_file"
}

speak() { # JSON body → status code
    curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
        --max-time 900 -d "$1" "$url/v1/audio/speech"
}
echo "engine set: $set_name; CPU: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
speak '{"model":"tts-1","voice":"alloy","input":"Hello there, how are you today?"}' >/dev/null
speak '{"model":"piper","voice":"en_US-joe-medium","input":"Hello there, how are you today?"}' >/dev/null
if [ "$set_name" = omnivoice ]; then
    speak '{"model":"omnivoice","voice":"female, young adult","input":"Hello there.","num_step":8}' >/dev/null
fi
echo "loaded, one request each: $(peak)"

# The hostile inputs, at tests/bounded_work.rs's full (Piper) sizes, on both CPU engines, and
# the longest input the server takes (--max-input-chars, 4,096 by default) at speed 0.25.
[ "${SKIP_HOSTILE:-0}" = 1 ] || python3 - "$url" <<'PY'
import concurrent.futures, json, sys, urllib.request
url = sys.argv[1]
def cjk(n, offset):
    return "".join(chr(0x4E00 + (offset + i * 37) % 2000) for i in range(n))
prose = ("The old lighthouse keeper walked slowly along the narrow rocky path that wound its "
         "way up the steep green hill toward the tall white tower ")
inputs = [cjk(56, 0), "مرحبا بالعالم كيف حالك اليوم " * 3, "Yes " + "😀🎉👍🔥🚀" * 400 + " no",
          "abcdefghij" * 100, "1234567890" * 40,
          "https://example.com/" + "very/long/path/" * 6 + "?q=" + "x1y2z3" * 5, "!?.,;:-—…" * 440]
jobs = []
for model, voice in (("tts-1", "alloy"), ("piper", "en_US-joe-medium")):
    jobs += [dict(model=model, voice=voice, input=text) for text in inputs]
    jobs.append(dict(model=model, voice=voice, input=(prose * 40)[:4096], speed=0.25))
def send(body):
    request = urllib.request.Request(f"{url}/v1/audio/speech", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=900) as answer:
            return answer.status, len(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, 0
    except OSError as e:  # a broken or timed-out answer: counted, not fatal
        print("hostile set:", type(e).__name__, e, file=sys.stderr)
        return 0, 0
with concurrent.futures.ThreadPoolExecutor(4) as pool:
    answers = list(pool.map(send, jobs))
print("hostile set:", sum(1 for s, _ in answers if s == 200), "of", len(answers), "answered 200;",
      sum(n for _, n in answers) >> 20, "MiB of audio")
PY
echo "after the hostile set: $(peak)"

if [ "$set_name" = omnivoice ]; then
    # One batch of OmniVoice utterances (about 10 s of speech each) in design mode, while the
    # CPU engines keep answering.
    n=${OMNIVOICE_REQUESTS:-4}
    steps=${OMNIVOICE_STEPS:-16}
    speakers=()
    for i in $(seq "$n"); do
        speak "{\"model\":\"omnivoice\",\"voice\":\"male, elderly, low pitch\",\"num_step\":$steps,\"input\":\"Request $i. The old lighthouse keeper walked slowly along the narrow rocky path, toward the tall white tower where he had spent nearly forty years.\"}" &
        speakers+=($!)
    done
    # A request over --request-timeout-s is reported by curl's status, not fatal here.
    wait "${speakers[@]}" || true
    echo
    echo "after $n OmniVoice utterances at once: $(peak)"
fi

# The soak: concurrency 16, 70 % of texts unique, Kokoro behind OpenAI's names.
requests=${SOAK_REQUESTS:-600}
"$loadgen" --url "$url" -n "$requests" -c 16 --distinct $((requests * 7 / 10)) \
    --model tts-1 --voice alloy --format mp3 | grep -E "requests|errors|rps" || true
echo "after a soak of $requests requests at concurrency 16: $(peak)"
echo "resident now: $(awk '/^VmRSS:/ { printf "%.0f", $2 / 1024 }' "/proc/$pid/status") MiB"
