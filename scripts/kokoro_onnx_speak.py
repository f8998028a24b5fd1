#!/usr/bin/env python3
"""Speaks texts with kokoro-onnx (onnxruntime on the same int8 Kokoro file) into WAV files.

Why: tests/asr.rs holds our Kokoro engine to the reference implementation's intelligibility,
so it needs the reference's own audio for the same sentences and voices, made the way a
kokoro-onnx user makes it (`Kokoro.create`: its espeak-ng front end, its voice-row choice, its
silence trim), from the files this repository installs (scripts/kokoro-assets.sh). Nothing is
downloaded. Run with the venv of scripts/kokoro-venv.sh:

    .venv-kokoro/bin/python scripts/kokoro_onnx_speak.py --kokoro-dir voices/kokoro < jobs.json

stdin: [{"voice": "af_heart", "lang": "en-us", "text": "...", "wav": "out.wav"}, ...]; a job
with "phonemes" instead of "lang" and "text" speaks those, as a kokoro-onnx user with misaki
does (`create(phonemes, is_phonemes=True)`): misaki's Mandarin and Japanese phonemes, for
tests/asr_mandarin.rs and tests/japanese_asr.rs (kokoro-onnx's own front end has neither).
Each job becomes a 24 kHz mono 16-bit WAV. stdout: one line per job, `WAV: A s of audio in
T s` (T: the `create` call alone), which scripts/bench-kokoro-server.sh reads for kokoro-onnx
called in a loop.
"""

import argparse
import json
import sys
import tempfile
import time
import wave
from pathlib import Path

import numpy as np
from kokoro_onnx import Kokoro


def write_wav(path: str, audio: np.ndarray, rate: int) -> None:
    pcm = (np.clip(audio, -1.0, 1.0) * 32767.0).round().astype("<i2")
    with wave.open(path, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(pcm.tobytes())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kokoro-dir", type=Path, required=True,
                        help="holds kokoro-v1.0.int8.onnx and voices/<id>.bin")
    args = parser.parse_args()
    jobs = json.load(sys.stdin)
    model = args.kokoro_dir / "kokoro-v1.0.int8.onnx"
    with tempfile.TemporaryDirectory() as tmp:
        # kokoro-onnx reads one .npz of packs; the kokoro-js files are the same packs, raw f32.
        npz = Path(tmp) / "voices.npz"
        names = sorted({job["voice"] for job in jobs})
        packs = {n: np.fromfile(args.kokoro_dir / "voices" / f"{n}.bin", dtype="<f4")
                 .reshape(510, 1, 256) for n in names}
        np.savez(npz, **packs)
        kokoro = Kokoro(str(model), str(npz))
        for job in jobs:
            start = time.perf_counter()
            if "phonemes" in job:
                audio, rate = kokoro.create(job["phonemes"], voice=job["voice"], is_phonemes=True)
            else:
                audio, rate = kokoro.create(job["text"], voice=job["voice"], lang=job["lang"])
            took = time.perf_counter() - start
            write_wav(job["wav"], audio, rate)
            print(f"{job['wav']}: {audio.size / rate:.3f} s of audio in {took:.3f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
