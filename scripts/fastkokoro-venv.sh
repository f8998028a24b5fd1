#!/usr/bin/env bash
# Prepares the peer of the Kokoro server benchmark (scripts/bench-kokoro-server.sh):
# .venv-fastkokoro, a Python virtual environment with the pinned fastkokoro and its dependencies
# (scripts/fastkokoro-requirements.txt; about 1.2 GB, a few minutes to install). Idempotent: an
# up-to-date venv is kept. No test needs it.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib/prepare.sh
pinned_venv fastkokoro-venv .venv-fastkokoro scripts/fastkokoro-requirements.txt
