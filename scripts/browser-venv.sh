#!/usr/bin/env bash
# Prepares the real-browser test of the playground (tests/browser/playground_test.py):
#   1. headless Chromium and its WebDriver from Debian (chromium, chromium-driver) — installed
#      when run as root, otherwise the exact apt command is printed and the script stops;
#   2. .venv-browser, a Python virtual environment with the pinned selenium client.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(chromium chromium-driver)
python3 -m venv --help >/dev/null 2>&1 || APT_PACKAGES+=(python3-venv)
missing=()
for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ]; then
        echo "browser-venv: installing ${missing[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    else
        echo "browser-venv: missing system packages. Run:" >&2
        echo "  sudo apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
fi

venv=.venv-browser
requirements=tests/browser/requirements.txt
stamp="$venv/.requirements"
# Reinstall only when the pinned requirements changed since the last run.
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && cmp -s "$requirements" "$stamp"; then
    echo "browser-venv: $venv is up to date"
    exit 0
fi
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
cp "$requirements" "$stamp"
echo "browser-venv: $venv ready"
