#!/usr/bin/env python3
"""Scores WAV files with DNSMOS (Microsoft's non-intrusive speech-quality model) and prints JSON.

Why: a reduced precision for Kokoro is judged by the quality of the model people actually run,
kokoro-onnx's int8 file, not by its distance from our own f32 (docs/performance.md §11a).
DNSMOS is the light one of the two quality oracles: the ONNX models ship inside the speechmos
wheel and run on onnxruntime, so tests/kokoro_gate.rs runs it. Nothing is downloaded. Run with
the venv of scripts/mos-venv.sh:

    .venv-mos/bin/python scripts/dnsmos.py a.wav b.wav

Output: [{"file", "ovrl", "sig", "bak", "p808"}], one entry per file, in order. Each file is
resampled to 16 kHz (what DNSMOS was trained on); speechmos repeats clips shorter than its
9.01 s window until they fill it, so a sentence is scored as a whole.
"""

import argparse
import json
import sys

import librosa
import numpy as np
from speechmos import dnsmos


def score(path: str) -> dict:
    audio, _ = librosa.load(path, sr=16000)
    audio = np.clip(audio, -1.0, 1.0)
    result = dnsmos.run(audio, sr=16000)
    return {
        "file": path,
        "ovrl": round(float(result["ovrl_mos"]), 4),
        "sig": round(float(result["sig_mos"]), 4),
        "bak": round(float(result["bak_mos"]), 4),
        "p808": round(float(result["p808_mos"]), 4),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wav", nargs="+", help="WAV files to score")
    args = parser.parse_args()
    json.dump([score(path) for path in args.wav], sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
