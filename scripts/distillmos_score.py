#!/usr/bin/env python3
"""Scores WAV files with DistillMOS (a distilled XLS-R speech-quality model) and prints JSON.

Why: the second quality oracle of the Kokoro precision gate (scripts/kokoro-gate.sh,
docs/performance.md §11a), beside DNSMOS. Its weights ship inside the distillmos wheel, but it
needs torch, so it runs in this script and not in the test suite. Nothing is downloaded. Run
with the venv of scripts/distillmos-venv.sh:

    .venv-distillmos/bin/python scripts/distillmos_score.py a.wav b.wav

Output: [{"file", "mos"}], one entry per file, in order; each file resampled to 16 kHz.
"""

import argparse
import contextlib
import json
import sys

import distillmos
import numpy as np
import soundfile
import torch
import torchaudio


def load_16k(path: str) -> torch.Tensor:
    audio, rate = soundfile.read(path, dtype="float32", always_2d=True)
    wave = torch.from_numpy(np.ascontiguousarray(audio.mean(axis=1)))
    if rate != 16000:
        wave = torchaudio.functional.resample(wave, rate, 16000)
    return wave


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wav", nargs="+", help="WAV files to score")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    # The model announces its weights on stdout, which carries the JSON.
    with contextlib.redirect_stdout(sys.stderr):
        model = distillmos.ConvTransformerSQAModel()
    model.eval()
    results = []
    with torch.no_grad():
        for path in args.wav:
            mos = model(load_16k(path)[None])
            results.append({"file": path, "mos": round(float(mos.reshape(-1)[0]), 4)})
    json.dump(results, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
