#!/usr/bin/env bash
# Prepares the OpenAPI tests (tests/openapi.rs) and the subtitle tests (tests/subtitles.rs):
# .venv-api, a Python virtual environment with the pinned openapi-spec-validator, schemathesis
# and the reference subtitle parsers webvtt-py and srt (tests/api-tools/requirements.txt).
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib/prepare.sh
pinned_venv api-venv .venv-api tests/api-tools/requirements.txt
