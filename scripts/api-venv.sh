#!/usr/bin/env bash
# Prepares the OpenAPI tests (tests/openapi.rs) and the subtitle tests (tests/subtitles.rs):
# .venv-api, a Python virtual environment with the pinned openapi-spec-validator, schemathesis
# and the reference subtitle parsers webvtt-py and srt (tests/api-tools/requirements.txt).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! python3 -m venv --help >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ]; then
        echo "api-venv: installing python3-venv"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    else
        echo "api-venv: python3-venv is missing. Run:" >&2
        echo "  sudo apt-get install -y python3-venv" >&2
        exit 1
    fi
fi

venv=.venv-api
requirements=tests/api-tools/requirements.txt
stamp="$venv/.requirements"
# Reinstall only when the pinned requirements changed since the last run.
if [ -x "$venv/bin/schemathesis" ] && [ -f "$stamp" ] && cmp -s "$requirements" "$stamp"; then
    echo "api-venv: $venv is up to date"
    exit 0
fi
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
cp "$requirements" "$stamp"
echo "api-venv: $venv ready"
