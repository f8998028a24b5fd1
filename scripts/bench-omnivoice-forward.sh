#!/usr/bin/env bash
# One OmniVoice generation step at the released size (seeded random weights, a 5 s design
# utterance's 290 positions): the official forward (omnivoice 0.2.1, torch, 2 threads) in f32
# and in bfloat16, and ours in bf16, alternated in one run so that their ratios hold on a
# noisy machine. Needs .venv-omnivoice-ref (scripts/omnivoice-ref-venv.sh).
#   scripts/bench-omnivoice-forward.sh [rounds (default 2)] [another bench binary to compare]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-2}
other=${2:-}
python=.venv-omnivoice-ref/bin/python
[ -x "$python" ] || { echo "run scripts/omnivoice-ref-venv.sh first" >&2; exit 1; }
ours=$(cargo bench -p omnivoice-models --bench omnivoice --no-run 2>&1 \
    | sed -n 's/.*Executable benches\/omnivoice.rs (\(.*\))/\1/p')
export GLIBC_TUNABLES=glibc.malloc.arena_max=2:glibc.malloc.mmap_threshold=67108864:glibc.malloc.trim_threshold=1073741824
echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$rounds"); do
    echo "## round $round"
    for dtype in float32 bfloat16; do
        printf 'official %s: ' "$dtype"
        DTYPE=$dtype "$python" scripts/omnivoice_bench_reference.py | tail -1
    done
    OMNIVOICE_BENCH_PROFILE=bf16 "$ours" --bench | grep forward | sed 's/^/ours /'
    if [ -n "$other" ]; then
        OMNIVOICE_BENCH_PROFILE=bf16 "$other" --bench | grep forward | sed 's/^/other /'
    fi
done
