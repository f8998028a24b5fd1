#!/usr/bin/env bash
# Prepares the real-browser test of the playground (tests/browser/playground_test.py):
#   1. headless Chromium and its WebDriver from Debian (chromium, chromium-driver) — installed
#      when run as root, otherwise the exact apt command is printed and the script stops;
#   2. .venv-browser, a Python virtual environment with the pinned selenium client.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib/prepare.sh
require_packages browser-venv chromium chromium-driver
if ! command -v chromedriver >/dev/null 2>&1; then
    echo "browser-venv: chromium-driver is installed but chromedriver is not on PATH" >&2
    exit 1
fi
pinned_venv browser-venv .venv-browser tests/browser/requirements.txt
