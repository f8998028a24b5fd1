#!/usr/bin/env bash
# Builds, on this machine, what scripts/gpu-check.sh runs on a GPU machine: the server and the
# OmniVoice model bench with `--features cuda`, stripped and compressed into .gpu/, with the
# official OmniVoice package's wheels for its same-run reference. A GPU machine often has the
# NVIDIA driver, CUDA's libraries and PyTorch but no Rust, and can fetch nothing: everything
# it runs travels in .gpu/ (about 20 MB).
#
# The CUDA 13.0 toolkit comes as NVIDIA's pinned wheels, unpacked under target/cuda-toolkit,
# with a stub of the driver to link against where none is installed (scripts/lib/cuda.sh, which
# deploy/Dockerfile.cuda shares): no system CUDA install is needed.
#
#     scripts/gpu-build.sh            # then, on the GPU machine: scripts/gpu-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
. scripts/lib/cuda.sh
cuda_build_environment "$root"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target/cuda}
cargo fetch -q

echo "gpu-build: building (--features cuda)"
cargo build --release --features cuda --bin omnivoice-server
cargo build --release -p omnivoice-models --features cuda --bench omnivoice
bench=$(ls -t "$CARGO_TARGET_DIR"/release/deps/omnivoice-* | grep -v '\.d$' | head -n 1)
mkdir -p .gpu/whl
strip -o .gpu/omnivoice-server "$CARGO_TARGET_DIR/release/omnivoice-server"
strip -o .gpu/omnivoice-bench "$bench"
# The server's own shared libraries (espeak-ng and what it pulls in, libopus) and espeak-ng's
# data: GPU images rarely have them. glibc, libstdc++ and CUDA's come from that machine.
rm -rf .gpu/lib && mkdir -p .gpu/lib
ldd .gpu/omnivoice-server | awk '$3 ~ /^\// {print $3}' \
    | grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|libcuda|libcudart|libcublas|libcublasLt|libcurand|libnvrtc)\.so' \
    | xargs -r cp -L -t .gpu/lib
cp -r "$(dirname "$(ldconfig -p | awk '/libespeak-ng.so.1 / {print $NF; exit}')")/espeak-ng-data" .gpu/lib/
tar -C .gpu -cJf .gpu/lib.tar.xz lib && rm -rf .gpu/lib
xz -f -T0 .gpu/omnivoice-server .gpu/omnivoice-bench
# The official package and what it imports beyond PyTorch's image, for the same-run reference.
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform any -d .gpu/whl \
    omnivoice==0.2.1 pydub==0.25.1 soundfile==0.13.1 cffi==2.0.0 pycparser==2.23
du -sh .gpu
echo "gpu-build: done; run scripts/gpu-check.sh on the GPU machine with .gpu/ beside it"
