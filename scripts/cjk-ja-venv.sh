#!/usr/bin/env bash
# Prepares the Japanese oracle: .venv-cjk-ja, a Python virtual environment with misaki 0.9.4's
# `ja` front end running offline (scripts/cjk-ja-requirements.txt, every package pinned by
# sha256). scripts/cjk_oracle_ja.py uses it to write tests/fixtures/cjk/ja.tsv (committed), and
# the Japanese benchmark (scripts/bench-japanese.sh) times misaki with it. Idempotent: an
# up-to-date venv is kept.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib/prepare.sh
pinned_venv cjk-ja-venv .venv-cjk-ja scripts/cjk-ja-requirements.txt --require-hashes
