#!/usr/bin/env bash
# Prepares .venv-kokoro-ref, the pinned reference front ends (kokoro-onnx, misaki) that
# scripts/kokoro_tokens_reference.py runs to regenerate tests/fixtures/kokoro/reference.json.
# Idempotent: an up-to-date venv is kept. Not needed by any test.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib/prepare.sh
pinned_venv kokoro-ref-venv .venv-kokoro-ref scripts/kokoro-ref-requirements.txt
