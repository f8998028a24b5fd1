#!/usr/bin/env bash
# Prepares the third-party SDK test (tests/sdk.rs, tests/sdk/sdk_test.py): .venv-sdk, a Python
# virtual environment with the pinned omnivoice-server-api client and its dependencies, each
# checked against its sha256 (tests/sdk/requirements.txt).
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib/prepare.sh
pinned_venv sdk-venv .venv-sdk tests/sdk/requirements.txt --require-hashes
