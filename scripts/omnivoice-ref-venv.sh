#!/usr/bin/env bash
# Prepares .venv-omnivoice-ref, the official OmniVoice package (omnivoice 0.2.1 on torch and
# transformers, pinned) that scripts/omnivoice_fixtures.py runs to regenerate
# crates/models/tests/fixtures/omnivoice/. About 5.6 GB installed. Idempotent. Not needed by any test.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib/prepare.sh
pinned_venv omnivoice-ref-venv .venv-omnivoice-ref scripts/omnivoice-ref-requirements.txt
