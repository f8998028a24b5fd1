# Sourced by the server benchmarks (bench-vs-piper.sh, bench-kokoro-server.sh,
# bench-omnivoice-vs-official.sh): a scratch
# directory `$work`, the servers they start in the background (`pids+=($!)`) stopped and the
# directory removed on exit, and `wait_for` to poll a server until it answers.

work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

# wait_for URL WHAT TRIES DELAY: polls URL TRIES times, DELAY seconds apart; exits naming WHAT
# if it never answers.
wait_for() {
    for _ in $(seq 1 "$3"); do
        curl -sf -o /dev/null "$1" && return 0
        sleep "$4"
    done
    echo "$(basename "$0" .sh): $2 did not start" >&2
    exit 1
}
