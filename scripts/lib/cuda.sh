# Shared by scripts/gpu-build.sh and deploy/Dockerfile.cuda: what a `--features cuda` build
# needs, without a system CUDA install. Sourced, not run.
#
# cuda_toolkit ROOT: the CUDA 13.0 toolkit as NVIDIA's pinned wheels
# (scripts/cuda-toolkit-requirements.txt, every hash checked), unpacked under
# $CUDA_TOOLKIT_DIR (default ROOT/target/cuda-toolkit) once; prints nothing when it is there.
cuda_toolkit() {
    local root=$1
    local toolkit=${CUDA_TOOLKIT_DIR:-$root/target/cuda-toolkit}
    local cuda=$toolkit/nvidia/cu13
    if [ ! -x "$cuda/bin/nvcc" ]; then
        echo "cuda: fetching the CUDA 13.0 toolkit wheels"
        rm -rf "$toolkit" && mkdir -p "$toolkit/wheels"
        python3 -m pip download -q --no-deps --only-binary=:all: --require-hashes \
            -r "$root/scripts/cuda-toolkit-requirements.txt" -d "$toolkit/wheels"
        local wheel lib
        for wheel in "$toolkit"/wheels/*.whl; do
            python3 -m zipfile -e "$wheel" "$toolkit"
        done
        rm -rf "$toolkit/wheels"
        chmod +x "$cuda"/bin/* "$cuda"/nvvm/bin/*
        for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcurand.so.10 libnvrtc.so.13; do
            ln -sf "$lib" "$cuda/lib/${lib%%.so*}.so"
        done
        ln -sfn lib "$cuda/lib64"
    fi
}

# cuda_build_environment ROOT: the toolkit (cuda_toolkit), exported for candle's build
# (CUDA_HOME, nvcc on PATH, the compute capability). candle links the driver (libcuda.so.1) at
# build time; where no driver is installed (a build machine, a Docker build stage) it links
# against a stub made from cudarc's own list of driver functions, and the real driver is
# loaded where the binary runs. Needs the workspace at ROOT (Cargo finds cudarc's sources).
cuda_build_environment() {
    local root=$1
    cuda_toolkit "$root"
    local cuda=${CUDA_TOOLKIT_DIR:-$root/target/cuda-toolkit}/nvidia/cu13
    export CUDA_HOME=$cuda CUDA_PATH=$cuda CUDA_ROOT=$cuda PATH=$cuda/bin:$PATH
    # Hopper (H100/H200) unless told otherwise; the driver compiles the PTX for newer chips.
    export CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-90} CUDARC_CUDA_VERSION=13000
    if [ ! -e /usr/lib/x86_64-linux-gnu/libcuda.so.1 ] && [ ! -e "$cuda/lib/stubs/libcuda.so" ]; then
        # Every driver function cudarc declares, as an empty export of a library named like
        # the driver: enough to link; never loaded.
        (cd "$root" && cargo fetch -q)
        local cudarc
        cudarc=$(cd "$root" && cargo metadata --format-version 1 --features cuda \
            | python3 -c 'import json,sys; print(next(p["manifest_path"] for p in json.load(sys.stdin)["packages"] if p["name"] == "cudarc").rsplit("/", 1)[0])')
        mkdir -p "$cuda/lib/stubs"
        grep -ohE '^\s+fn cu[A-Z][A-Za-z0-9_]*\(' "$cudarc/src/driver/sys/mod.rs" \
            | sed -E 's/^\s+fn //; s/\($//' | sort -u \
            | awk '{print "void " $1 "(void) {}"}' >"$cuda/lib/stubs/cuda_stub.c"
        cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$cuda/lib/stubs/libcuda.so" "$cuda/lib/stubs/cuda_stub.c"
    fi
    export LIBRARY_PATH=$cuda/lib:$cuda/lib/stubs:${LIBRARY_PATH:-}
}
