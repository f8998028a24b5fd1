#!/usr/bin/env python3
"""Times the official OmniVoice `generate` (omnivoice 0.2.1) on a checkpoint directory: one
design-mode utterance at 32 steps with guidance 2, on 2 threads, in float32 or bfloat16 (what
a PyTorch user passes as `dtype`: the body's weights and activations; the official loader
keeps the codec in float32). A short warm-up first; then `runs` timed generations, and the
fastest is printed with the audio's length.

    .venv-omnivoice-ref/bin/python scripts/omnivoice_generate_reference.py CHECKPOINT float32|bfloat16 [runs] [steps]

The text and voice are `scripts/bench-omnivoice-vs-official.sh`'s, so that our server, which
estimates the duration by the same rule, generates the same number of frames.
"""

import sys
import time

import torch

from omnivoice.models.omnivoice import OmniVoice

TEXT = "The old lighthouse keeper walked slowly along the narrow path toward the tower."
INSTRUCT = "female, young adult"


def main() -> None:
    checkpoint, dtype = sys.argv[1], getattr(torch, sys.argv[2])
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    steps = int(sys.argv[4]) if len(sys.argv) > 4 else 32
    torch.set_num_threads(2)
    model = OmniVoice.from_pretrained(checkpoint, dtype=dtype).eval()
    with torch.inference_mode():
        model.generate(text="Hello.", instruct=INSTRUCT, num_step=2, guidance_scale=2.0)
        best, seconds = float("inf"), 0.0
        for _ in range(runs):
            start = time.perf_counter()
            audio = model.generate(text=TEXT, instruct=INSTRUCT, num_step=steps, guidance_scale=2.0)
            best = min(best, time.perf_counter() - start)
            seconds = audio[0].shape[-1] / model.sampling_rate
    print(f"official {sys.argv[2]}: {best:.2f} s for {seconds:.2f} s of audio (RTF {best / seconds:.2f}), best of {runs}")


if __name__ == "__main__":
    main()
