#!/usr/bin/env bash
# The Kokoro precision gate (docs/performance.md §11a): our server in each precision against
# kokoro-onnx's int8 file on 3 voices x 20 sentences, judged by DNSMOS, DistillMOS and offline
# Whisper (scripts/kokoro_gate.py says how). Prepares the venvs and the server binary first.
# Extra arguments go to scripts/kokoro_gate.py: --precisions f32,bf16,int8 (the default),
# --write-fixture (rewrites tests/fixtures/kokoro_gate/kokoro-onnx.json, kokoro-onnx's DNSMOS
# scores, which tests/kokoro_gate.rs holds `auto` to).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/kokoro-assets.sh >/dev/null
scripts/kokoro-venv.sh >/dev/null
scripts/asr-venv.sh >/dev/null
scripts/mos-venv.sh >/dev/null
scripts/distillmos-venv.sh >/dev/null
cargo build --bin omnivoice-server >&2
python3 scripts/kokoro_gate.py --binary target/debug/omnivoice-server "$@"
