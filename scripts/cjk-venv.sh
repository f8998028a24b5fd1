#!/usr/bin/env bash
# Prepares the CJK reference: .venv-cjk, a Python virtual environment with misaki 0.9.4 and its
# Mandarin front end (scripts/cjk-requirements.txt, every package pinned by sha256). Used by
# scripts/cjk_oracle.py, which regenerates tests/fixtures/cjk/ (committed), and by the Mandarin
# front-end benchmark (scripts/bench-mandarin.sh). The pinyin tables need no venv:
# scripts/mandarin-assets.sh writes them from the pinned pypinyin wheel alone. Idempotent: an
# up-to-date venv is kept.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib/prepare.sh
pinned_venv cjk-venv .venv-cjk scripts/cjk-requirements.txt --require-hashes
