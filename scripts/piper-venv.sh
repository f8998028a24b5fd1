#!/usr/bin/env bash
# Prepares the peer benchmark (scripts/bench-vs-piper.sh): .venv-piper, a Python virtual
# environment with the pinned piper-tts and its HTTP server (benches/piper/requirements.txt).
# Idempotent: an up-to-date venv is kept. Not needed by any test.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! python3 -m venv --help >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ]; then
        echo "piper-venv: installing python3-venv"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    else
        echo "piper-venv: python3-venv is missing. Run:" >&2
        echo "  sudo apt-get install -y python3-venv" >&2
        exit 1
    fi
fi

venv=.venv-piper
requirements=benches/piper/requirements.txt
stamp="$venv/.requirements"
# Reinstall only when the pinned requirements changed since the last run.
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && cmp -s "$requirements" "$stamp"; then
    echo "piper-venv: $venv is up to date"
    exit 0
fi
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
cp "$requirements" "$stamp"
echo "piper-venv: $venv ready"
