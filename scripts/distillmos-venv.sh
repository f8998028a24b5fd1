#!/usr/bin/env bash
# Prepares .venv-distillmos, a Python virtual environment with DistillMOS and torch (pinned in
# scripts/distillmos-requirements.txt; the weights are in the distillmos wheel), for
# scripts/kokoro-gate.sh (scripts/distillmos_score.py). About 6 GB installed, so no test needs
# it and scripts/test.sh does not run it. Idempotent: an up-to-date venv is kept.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib/prepare.sh
pinned_venv distillmos-venv .venv-distillmos scripts/distillmos-requirements.txt
