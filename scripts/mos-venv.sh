#!/usr/bin/env bash
# Prepares .venv-mos, a Python virtual environment with DNSMOS (speechmos, pinned with its
# dependencies in scripts/mos-requirements.txt; the models are in the wheel), for the Kokoro
# precision gate: tests/kokoro_gate.rs scores our speech with it (scripts/dnsmos.py; run by
# scripts/test.sh) and scripts/kokoro-gate.sh scores both sides. Idempotent: an up-to-date venv
# is kept.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib/prepare.sh
pinned_venv mos-venv .venv-mos scripts/mos-requirements.txt
