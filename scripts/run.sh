#!/usr/bin/env bash
# From a fresh checkout to a speaking server: installs the system libraries and the default
# voice (scripts/setup.sh), builds in release mode and serves on http://127.0.0.1:8880.
# Extra arguments go to the server, e.g. scripts/run.sh --port 9000 --api-key secret
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec cargo run --release --bin omnivoice-server -- "$@"
