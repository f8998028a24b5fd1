#!/usr/bin/env python3
"""Fixtures for whole texts (several sentences) made by the official code (omnivoice 0.2.1,
transformers 5.24), on the tiny checkpoint with the release's codec geometry
(`crates/models/tests/fixtures/omnivoice/clone`: 24 kHz, 25 frames/s), with both temperatures
0, which makes generation deterministic.

1. `tests/fixtures/omnivoice_paragraphs/{cases.json, expected.safetensors}`: what
   `OmniVoice.generate()` says for multi-sentence texts: a design, auto, a language, a
   duration, a speed, a clone (the clip of `tests/fixtures/omnivoice_clone/reference.wav`), a
   text whose estimate crosses the default 30 s threshold (chunked, chunk 0 the reference of
   the rest), and a text forced through the chunked path by small `audio_chunk_threshold` and
   `audio_chunk_duration`. The server's tests hold its whole bodies to them.

2. `crates/models/tests/fixtures/omnivoice/stream.safetensors`: the official chunked path run
   with the server's streaming split (the texts in STREAM_CASES): the first piece alone, then
   every later piece with the first piece's text and tokens as its reference (or the clone's
   own reference), all in one batch, as `_generate_chunked._run_batch` does it, each piece as
   long as its share of the whole text's estimate (by the estimator's character weights).
   Per piece: its tokens and the codec's audio of them, before post-processing.

Audio is stored as 16-bit (the official float audio rounded; 1.5e-5 at most), which keeps the
30-second case small.

    .venv-omnivoice-ref/bin/python scripts/omnivoice_paragraph_fixture.py
"""

import json
import os
import sys

import numpy as np
import torch
from safetensors.torch import save_file

ROOT = os.path.join(os.path.dirname(__file__), "..")
FIXTURES = os.path.join(ROOT, "crates", "models", "tests", "fixtures", "omnivoice")
CLONE = os.path.join(FIXTURES, "clone")
CLIP = os.path.join(ROOT, "tests", "fixtures", "omnivoice_clone", "reference.wav")
OUT = os.path.join(ROOT, "tests", "fixtures", "omnivoice_paragraphs")
REF_TEXT = "This is my own voice"

LONG = (
    "Once upon a time, in a small village by the sea, there lived an old fisherman and his "
    "wife. Every morning he rowed out past the harbour wall, and every evening he came home "
    "with a basket of silver fish. The neighbours said that he knew the water better than "
    "anyone alive. One grey morning the wind turned cold, and the waves grew tall and dark. "
    "His wife begged him to stay at home, but he only smiled and pushed the boat into the "
    "surf. By noon the sky was black, and the whole village stood on the shore to watch. "
    "Nobody spoke until a small white sail appeared between the waves, and then everyone "
    "cheered at once."
)

CASES = [
    {"name": "design", "instruct": "female, low pitch, british accent",
     "text": "The weather is lovely today. We should walk to the park. Bring a coat, just in case."},
    {"name": "auto", "text": "Hello there. How are you today? I am fine, thank you."},
    {"name": "language", "language": "en",
     "text": "Good morning to you. The train leaves at nine. Please be on time."},
    {"name": "duration", "duration": 5.0, "instruct": "male",
     "text": "This sentence should last as long as asked. And so should this one."},
    {"name": "speed", "speed": 1.3, "instruct": "male",
     "text": "Speak these words a little faster. Then stop for a moment."},
    {"name": "clone", "clone": True,
     "text": "This is a longer message. It has three sentences. All in my voice."},
    {"name": "long", "instruct": "female", "text": LONG},
    {"name": "chunked", "instruct": "female", "audio_chunk_threshold": 1.0,
     "audio_chunk_duration": 2.0,
     "text": "First, a short opening line. Then a second sentence follows. Finally, a third one ends it."},
]
NUM_STEP = 4

# The server's streaming split of three of them (the Rust test checks that it splits so).
STREAM_CASES = [
    {"name": "design", "pieces": ["The weather is lovely today.",
                                  "We should walk to the park. Bring a coat, just in case."]},
    {"name": "auto", "pieces": ["Hello there.", "How are you today? I am fine, thank you."]},
    {"name": "clone", "pieces": ["This is a longer message.",
                                 "It has three sentences. All in my voice."]},
]


def config(case):
    from omnivoice.models.omnivoice import OmniVoiceGenerationConfig

    fields = {k: case[k] for k in ("audio_chunk_threshold", "audio_chunk_duration") if k in case}
    return OmniVoiceGenerationConfig(num_step=NUM_STEP, position_temperature=0.0,
                                     class_temperature=0.0, **fields)


def generate(model, case, prompt):
    return model.generate(
        text=case["text"], instruct=case.get("instruct"), language=case.get("language"),
        duration=case.get("duration"), speed=case.get("speed"),
        voice_clone_prompt=prompt if case.get("clone") else None,
        generation_config=config(case))[0]


def as_int16(audio) -> torch.Tensor:
    audio = np.asarray(audio, np.float64)
    return torch.from_numpy(np.clip(np.round(audio * 32768), -32768, 32767).astype(np.int16))


def streamed(model, case, pieces, prompt):
    """The official chunked path's `_run_batch`, with the server's pieces: the first alone at
    its share of the whole estimate, then the rest in one batch with their reference."""
    from omnivoice.models.omnivoice import GenerationTask

    gen_config = config(case)
    task = model._preprocess_all(
        text=case["text"], language=case.get("language"), instruct=case.get("instruct"),
        voice_clone_prompt=prompt if case.get("clone") else None,
        speed=case.get("speed"), duration=case.get("duration"))
    estimator = model.duration_estimator
    whole = estimator.calculate_total_weight(case["text"])

    def share(text):
        return max(1, int(task.target_lens[0] * estimator.calculate_total_weight(text) / whole))

    user_ref = task.ref_audio_tokens[0]

    def run(texts, ref_tokens, ref_texts):
        n = len(texts)
        sub = GenerationTask(batch_size=n, texts=texts, target_lens=[share(t) for t in texts],
                             langs=[task.langs[0]] * n, instructs=[task.instructs[0]] * n,
                             ref_texts=ref_texts, ref_audio_tokens=ref_tokens,
                             ref_rms=[task.ref_rms[0]] * n)
        return model._generate_iterative(sub, gen_config)

    first = run([pieces[0]], [user_ref], [task.ref_texts[0]])[0]
    rest = pieces[1:]
    if user_ref is not None:
        later = run(rest, [user_ref] * len(rest), [task.ref_texts[0]] * len(rest))
    else:
        later = run(rest, [first] * len(rest), [pieces[0]] * len(rest))
    out = {}
    for k, tokens in enumerate([first] + later):
        audio = model.audio_tokenizer.decode(tokens.unsqueeze(0)).audio_values[0, 0]
        out[f"{case['name']}.tokens_{k}"] = tokens.to(torch.int64).contiguous()
        out[f"{case['name']}.audio_{k}"] = audio.float().contiguous()
        print(f"  piece {k}: {tuple(tokens.shape)} {pieces[k]!r}", file=sys.stderr)
    return out


def main() -> None:
    from omnivoice.models.omnivoice import OmniVoice

    torch.set_num_threads(2)
    model = OmniVoice.from_pretrained(CLONE, dtype=torch.float32).eval()
    prompt = model.create_voice_clone_prompt(ref_audio=CLIP, ref_text=REF_TEXT)
    os.makedirs(OUT, exist_ok=True)
    tensors = {}
    with torch.no_grad():
        for case in CASES:
            audio = generate(model, case, prompt)
            tensors[f"audio_{case['name']}"] = as_int16(audio)
            print(f"{case['name']}: {np.asarray(audio).shape}", file=sys.stderr)
        pieces = {}
        by_name = {c["name"]: c for c in CASES}
        for stream in STREAM_CASES:
            print(f"stream {stream['name']}", file=sys.stderr)
            pieces.update(streamed(model, by_name[stream["name"]], stream["pieces"], prompt))
    save_file(tensors, os.path.join(OUT, "expected.safetensors"),
              metadata={"made_by": "scripts/omnivoice_paragraph_fixture.py"})
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        json.dump({"ref_text": REF_TEXT, "num_step": NUM_STEP, "sample_rate": model.sampling_rate,
                   "cases": CASES}, f, indent=1)
    pieces["clone.ref_codes"] = prompt.ref_audio_tokens.to(torch.int64).contiguous()
    save_file(pieces, os.path.join(FIXTURES, "stream.safetensors"), metadata={
        "made_by": "scripts/omnivoice_paragraph_fixture.py",
        "cases": json.dumps([{**by_name[s["name"]], "pieces": s["pieces"]} for s in STREAM_CASES]),
        "num_step": str(NUM_STEP),
        "ref_text": prompt.ref_text,
        "ref_rms": repr(prompt.ref_rms),
    })


if __name__ == "__main__":
    main()
