#!/usr/bin/env bash
# Prepares the peer benchmark (scripts/bench-vs-piper.sh): .venv-piper, a Python virtual
# environment with the pinned piper-tts and its HTTP server (benches/piper/requirements.txt).
# Idempotent: an up-to-date venv is kept. Not needed by any test.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib/prepare.sh
pinned_venv piper-venv .venv-piper benches/piper/requirements.txt
