#!/usr/bin/env bash
# Creates .venv-wyoming with the pinned reference Wyoming client (tests/wyoming/requirements.txt),
# which tests/wyoming/client_test.py drives the server with. Idempotent: an existing venv with the
# pinned version is kept. Prints the venv's python on success.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${WYOMING_VENV:-.venv-wyoming}"
REQUIREMENTS=tests/wyoming/requirements.txt
PINNED=$(sed -n 's/^wyoming==\([0-9.]*\).*/\1/p' "$REQUIREMENTS")

if [ -x "$VENV/bin/python" ] \
    && [ "$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("wyoming"))' 2>/dev/null)" = "$PINNED" ]; then
    echo "$VENV/bin/python"
    exit 0
fi

if ! python3 -m venv --help >/dev/null 2>&1; then
    echo "wyoming-venv: python3 with the venv module is needed (Debian: apt-get install python3-venv)" >&2
    exit 1
fi
rm -rf "$VENV"
python3 -m venv "$VENV" >&2
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --require-hashes \
    -r "$REQUIREMENTS" >&2
echo "$VENV/bin/python"
