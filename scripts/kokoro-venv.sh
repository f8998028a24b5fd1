#!/usr/bin/env bash
# Prepares the Kokoro reference: .venv-kokoro, a Python virtual environment with the pinned
# onnx, onnxruntime, numpy and kokoro-onnx (scripts/kokoro-requirements.txt). Used by
# scripts/kokoro_reference.py (which regenerates crates/models/tests/fixtures/kokoro/; the
# fixtures are committed), by scripts/bench-kokoro*.sh, and by tests/asr.rs, which has
# kokoro-onnx speak the sentences it holds our engine to (scripts/kokoro_onnx_speak.py; run by
# scripts/test.sh). Idempotent: an up-to-date venv is kept.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib/prepare.sh
pinned_venv kokoro-venv .venv-kokoro scripts/kokoro-requirements.txt
