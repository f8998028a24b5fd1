#!/usr/bin/env bash
# Regenerates crates/models/tests/fixtures/vits/: reference audio from onnxruntime for the default voice at
# noise_scale 0 and noise_w 0 (deterministic), one file pair per sentence:
#   <name>.ids  comma-separated phoneme ids,  <name>.f32  little-endian float32 samples.
# Usage: VITS_REF_VENV=/path/to/venv scripts/make-vits-fixtures.sh
# The venv needs onnxruntime + numpy (see the shared piper_reference_setup.sh); the espeak-ng
# CLI must be installed. VITS_REF_TOOL overrides the path of piper_reference.py.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${VITS_REF_VENV:?set VITS_REF_VENV to the reference venv}"
TOOL="${VITS_REF_TOOL:-../shared/tools/piper_reference.py}"
VOICE="${VITS_VOICE:-voices/en_US-joe-medium}"
OUT=crates/models/tests/fixtures/vits
mkdir -p "$OUT"

sentences=(
    "Hi."
    "The quick brown fox jumps over the lazy dog."
    "Hello world, this is a test of the speech server."
    "Wait! Is it ready? Yes; mostly: it works, and it sounds natural enough for a first try."
)

for i in "${!sentences[@]}"; do
    name="$OUT/sentence$i"
    "$VENV/bin/python" "$TOOL" --onnx "$VOICE.onnx" --config "$VOICE.onnx.json" \
        --text "${sentences[$i]}" --noise-scale 0 --noise-w 0 --length-scale 1 \
        --threads 1 --repeat 1 --out-f32 "$name.f32" --out-json "$name.json" >/dev/null
    "$VENV/bin/python" -c 'import json, sys; print(",".join(map(str, json.load(open(sys.argv[1]))["ids"])))' \
        "$name.json" >"$name.ids"
    rm "$name.json"
    echo "$name: $(wc -c <"$name.f32") bytes of audio, $(tr ',' '\n' <"$name.ids" | wc -l) ids"
done
