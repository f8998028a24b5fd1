#!/usr/bin/env bash
# Builds, on this machine, what scripts/gpu-check.sh runs on a GPU machine: the server and the
# OmniVoice model bench with `--features cuda`, stripped and compressed into .gpu/, with the
# official OmniVoice package's wheels for its same-run reference. A GPU machine often has the
# NVIDIA driver, CUDA's libraries and PyTorch but no Rust, and can fetch nothing: everything
# it runs travels in .gpu/ (about 20 MB).
#
# The CUDA 13.0 toolkit comes as NVIDIA's pinned wheels (scripts/cuda-toolkit-requirements.txt),
# unpacked under target/cuda-toolkit: no system CUDA install is needed. candle links the driver
# (libcuda.so.1) at build time; a machine without one links against a stub made from cudarc's
# own list of driver functions, and the real driver is loaded on the GPU machine.
#
#     scripts/gpu-build.sh            # then, on the GPU machine: scripts/gpu-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
toolkit=${CUDA_TOOLKIT_DIR:-$root/target/cuda-toolkit}
cuda=$toolkit/nvidia/cu13
if [ ! -x "$cuda/bin/nvcc" ]; then
    echo "gpu-build: fetching the CUDA 13.0 toolkit wheels"
    rm -rf "$toolkit" && mkdir -p "$toolkit/wheels"
    python3 -m pip download -q --no-deps --only-binary=:all: --require-hashes \
        -r scripts/cuda-toolkit-requirements.txt -d "$toolkit/wheels"
    for wheel in "$toolkit"/wheels/*.whl; do
        python3 -m zipfile -e "$wheel" "$toolkit"
    done
    chmod +x "$cuda"/bin/* "$cuda"/nvvm/bin/*
    (cd "$cuda/lib" && for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 \
        libcurand.so.10 libnvrtc.so.13; do ln -sf "$lib" "${lib%%.so*}.so"; done)
    ln -sfn lib "$cuda/lib64"
fi
export CUDA_HOME=$cuda CUDA_PATH=$cuda CUDA_ROOT=$cuda PATH=$cuda/bin:$PATH
# Hopper (H100/H200) unless told otherwise; the driver compiles the PTX for newer chips.
export CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-90} CUDARC_CUDA_VERSION=13000
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target/cuda}
cargo fetch -q
if [ ! -e /usr/lib/x86_64-linux-gnu/libcuda.so.1 ] && [ ! -e "$cuda/lib/stubs/libcuda.so" ]; then
    # Every driver function cudarc declares, as an empty export of a library named like the
    # driver: enough to link; never loaded.
    cudarc=$(cargo metadata --format-version 1 --features cuda \
        | python3 -c 'import json,sys; print(next(p["manifest_path"] for p in json.load(sys.stdin)["packages"] if p["name"] == "cudarc").rsplit("/", 1)[0])')
    mkdir -p "$cuda/lib/stubs"
    grep -ohE '^\s+fn cu[A-Z][A-Za-z0-9_]*\(' "$cudarc/src/driver/sys/mod.rs" \
        | sed -E 's/^\s+fn //; s/\($//' | sort -u \
        | awk '{print "void " $1 "(void) {}"}' >"$cuda/lib/stubs/cuda_stub.c"
    cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$cuda/lib/stubs/libcuda.so" "$cuda/lib/stubs/cuda_stub.c"
fi
export LIBRARY_PATH=$cuda/lib:$cuda/lib/stubs:${LIBRARY_PATH:-}

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
