#!/usr/bin/env bash
# The Mandarin front end against misaki 0.9.4 in the same run, on the oracle corpus
# (tests/fixtures/cjk/zh-corpus.txt): time per sentence, dictionary load time and resident
# size. misaki runs before and after ours, so a noisy machine shows in the spread. The Rust
# bench builds with the dev profile (opt-level 3, as tests run). Figures go to
# docs/performance.md.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/cjk-venv.sh >/dev/null
cargo bench --profile dev --bench mandarin --no-run 2>/dev/null
echo "## misaki 0.9.4 (Python)"
.venv-cjk/bin/python scripts/mandarin_bench.py 2>/dev/null
echo "## ours (text::mandarin)"
cargo bench -q --profile dev --bench mandarin 2>/dev/null
echo "## misaki 0.9.4 (Python), again"
.venv-cjk/bin/python scripts/mandarin_bench.py 2>/dev/null
