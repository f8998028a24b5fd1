#!/usr/bin/env python3
"""oneDNN's bf16 matrix products at OmniVoice's linear shapes, through PyTorch: a bf16
`torch.nn.Linear` on the CPU runs oneDNN's matmul (AMX tiles where the CPU has them), which is
what the official code computes with when given `dtype=torch.bfloat16`. One thread, thread CPU
time, best of 7: the figures `kernels::tile_gemm`'s speed test prints for ours.

    .venv-omnivoice-ref/bin/python scripts/onednn_linear_rates.py
"""

import time

import torch

SHAPES = [(290, 1024, 4096), (290, 1024, 3072), (290, 3072, 1024), (290, 1024, 2048), (290, 1024, 8200),
          (2320, 1024, 3072)]


def main() -> None:
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, oneDNN {torch.backends.mkldnn.is_available() and 'available'}")
    for n, k, m in SHAPES:
        x = torch.randn(n, k).bfloat16()
        linear = torch.nn.Linear(k, m, bias=False).bfloat16()
        with torch.inference_mode():
            for _ in range(3):
                linear(x)
            best = float("inf")
            for _ in range(7):
                start = time.thread_time()
                linear(x)
                best = min(best, time.thread_time() - start)
        print(f"{n}×{k}×{m}: {n * k * m / best * 1e-9:.0f} GMAC/s")


if __name__ == "__main__":
    main()
