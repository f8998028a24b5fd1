#!/usr/bin/env python3
"""Transcribes WAV files offline with faster-whisper (Whisper base, CPU, int8) and prints JSON.

Exists so tests can check what the server says with an independent listener: tests/asr.rs
measures the word error rate of synthesized speech and compares the server's word timestamps
with Whisper's. The model directory is the one scripts/asr-venv.sh assembles; nothing is
downloaded. Run with that venv's python:

    .venv-asr/bin/python scripts/asr.py a.wav b.wav

Output: [{"file": ..., "text": ..., "duration_s": ..., "language": ..., "words": [{"word",
"start", "end", "probability"}]}], one entry per file, in order. Words keep Whisper's spelling (leading space
and punctuation stripped); times are seconds from the start of the file.
"""

import argparse
import json
import os
import pathlib
import sys

# Never reach for a model hub: the model is a local directory.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from faster_whisper import WhisperModel  # noqa: E402

DEFAULT_MODEL = pathlib.Path(__file__).resolve().parent.parent / ".venv-asr" / "whisper-base"


def transcribe(model: WhisperModel, path: str, language: str = "en") -> dict:
    """`language` "auto" lets Whisper tell the language, which the result then names."""
    # Beam search at temperature 0 without sampled fallbacks, so the same audio gives the same
    # words; no conditioning on earlier text, so one misheard phrase does not steer the rest.
    segments, info = model.transcribe(
        path,
        language=None if language == "auto" else language,
        beam_size=5,
        temperature=0.0,
        condition_on_previous_text=False,
        word_timestamps=True,
        vad_filter=False,
    )
    text_parts, words = [], []
    for segment in segments:
        text_parts.append(segment.text.strip())
        for word in segment.words or []:
            words.append(
                {
                    "word": word.word.strip(),
                    "start": round(word.start, 3),
                    "end": round(word.end, 3),
                    "probability": round(word.probability, 3),
                }
            )
    return {
        "file": path,
        "text": " ".join(text_parts),
        "duration_s": round(info.duration, 3),
        "language": info.language,
        "words": words,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wav", nargs="+", help="WAV files to transcribe")
    parser.add_argument("--model", default=str(DEFAULT_MODEL), help="CTranslate2 model directory")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads")
    parser.add_argument("--language", default="en",
                        help="the language spoken (zh, ja, en; tests/asr_mandarin.rs, "
                             "tests/japanese_asr.rs), or auto for Whisper to tell")
    args = parser.parse_args()
    if not (pathlib.Path(args.model) / "model.bin").exists():
        print(f"asr: no model in {args.model}: run scripts/asr-venv.sh", file=sys.stderr)
        return 2
    model = WhisperModel(args.model, device="cpu", compute_type="int8", cpu_threads=args.threads)
    heard = [transcribe(model, path, args.language) for path in args.wav]
    json.dump(heard, sys.stdout, indent=1, ensure_ascii=False)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
