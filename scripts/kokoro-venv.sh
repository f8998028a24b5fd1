#!/usr/bin/env bash
# Prepares the Kokoro reference (scripts/kokoro_reference.py, which regenerates
# crates/models/tests/fixtures/kokoro/): .venv-kokoro, a Python virtual environment with the
# pinned onnx, onnxruntime, numpy and kokoro-onnx (scripts/kokoro-requirements.txt).
# Idempotent: an up-to-date venv is kept. No test needs it; the fixtures are committed.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib/prepare.sh
pinned_venv kokoro-venv .venv-kokoro scripts/kokoro-requirements.txt
