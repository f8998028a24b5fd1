#!/usr/bin/env python3
"""Fixtures for OmniVoice's voice cloning, made by the official code (omnivoice 0.2.1,
transformers 5.24, pydub), at the tiny end-to-end codec's 11025 samples/s and hop 63 (see
`omnivoice_text_fixtures.py` for why not slower: pydub resamples anything under 11025 Hz that
`remove_silence` joins).

- `reference.safetensors`: what `create_voice_clone_prompt` does to a waveform already at the
  codec's rate, rule by rule, on seeded speech-like clips (bursts with silences of several
  lengths at the edges and in the middle; a quiet one, a loud one that clips, one with no
  silence, one that is only a noise floor): its `ref_rms`, the quiet clip scaled, the length
  after `remove_silence(mid_sil=200, lead_sil=100, trail_sil=200)`, and the waveform cut to
  whole hops, which is what the codec encodes; and `add_punctuation` on transcripts.
- `reference_long.safetensors`: a 21.6 s clip (stored as 16-bit samples, so exactly) through
  `trim_long_audio(trim_threshold=20)`, which only runs without a transcript, then the rest.
- `clone.safetensors`: `create_voice_clone_prompt(ref_audio=(wave, sr), ref_text=...)` on the
  `e2e/` checkpoint, then `generate(..., voice_clone_prompt=...)` with both temperatures 0
  (deterministic) on one batch: a short text, a text with an instruct, a long text that is
  chunked, and a quiet reference. Each prompt's codes, text and RMS, and each output.

    .venv-omnivoice-ref/bin/python scripts/omnivoice_clone_fixtures.py
"""

import json
import os
import sys

import numpy as np
import torch
from safetensors.torch import save_file

ROOT = os.path.join(os.path.dirname(__file__), "..")
OUT = os.path.join(ROOT, "crates", "models", "tests", "fixtures", "omnivoice")
E2E = os.path.join(OUT, "e2e")
RATE = 11025
HOP = 63


def clip(rng, layout, level):
    """Speech-like bursts (a wobbling tone with harmonics under a noisy envelope) and pauses
    over a −70 dB noise floor. `layout`: ('s', ms) silence or ('v', ms) voice, in order."""
    parts = []
    for kind, ms in layout:
        n = RATE * ms // 1000
        floor = rng.standard_normal(n) * 10 ** (-70 / 20)
        if kind == "s":
            parts.append(floor)
            continue
        t = np.arange(n) / RATE
        f0 = rng.uniform(110, 260) * (1 + 0.05 * np.sin(2 * np.pi * 3 * t))
        phase = 2 * np.pi * np.cumsum(f0) / RATE
        voice = sum(np.sin(k * phase) / k for k in range(1, 5)) + 0.3 * rng.standard_normal(n)
        envelope = np.sin(np.pi * np.arange(n) / n) ** 0.5
        parts.append(floor + level * envelope * voice / 2)
    return np.concatenate(parts).astype(np.float32)


def prompt_steps(wave, ref_text, preprocess=True):
    """`create_voice_clone_prompt` up to the codec, its rules one by one (the calls as the
    official code makes them)."""
    from omnivoice.utils.audio import remove_silence, trim_long_audio

    steps = {}
    ref_wav = wave[np.newaxis, :]
    ref_rms = float(np.sqrt(np.mean(ref_wav**2)))
    steps["rms"] = ref_rms
    if 0 < ref_rms < 0.1:
        ref_wav = ref_wav * 0.1 / ref_rms
    steps["scaled"] = ref_wav[0]
    if preprocess:
        if ref_text is None:
            ref_wav = trim_long_audio(ref_wav, RATE, trim_threshold=20.0)
        steps["trimmed"] = ref_wav[0]
        ref_wav = remove_silence(ref_wav, RATE, mid_sil=200, lead_sil=100, trail_sil=200)
        steps["silence_removed"] = ref_wav[0]
    clip_size = int(ref_wav.shape[-1] % HOP)
    ref_wav = ref_wav[:, :-clip_size] if clip_size > 0 else ref_wav
    steps["prepared"] = ref_wav[0]
    return steps


def official_prepared(model, wave, text):
    """What the official `create_voice_clone_prompt` encodes, caught at the codec."""
    seen = {}
    encode = model.audio_tokenizer.encode

    def spy(x, *args, **kwargs):
        seen["wave"] = x.detach().cpu().numpy().reshape(-1).copy()
        return encode(x, *args, **kwargs)

    model.audio_tokenizer.encode = spy
    try:
        prompt = model.create_voice_clone_prompt(ref_audio=(torch.from_numpy(wave), RATE), ref_text=text)
    finally:
        model.audio_tokenizer.encode = encode
    return prompt, seen["wave"]


CLIPS = {
    # name: (seed, layout, level)
    "speech": (1, [("s", 600), ("v", 250), ("s", 150), ("v", 200), ("s", 700), ("v", 300), ("s", 400)], 0.6),
    "quiet": (2, [("s", 120), ("v", 300), ("s", 350), ("v", 250), ("s", 90)], 0.05),
    "loud": (3, [("s", 250), ("v", 400), ("s", 260), ("v", 300), ("s", 230)], 2.5),
    "no_silence": (4, [("v", 500), ("v", 400)], 0.5),
    "floor_only": (5, [("s", 900)], 0.0),
}
TEXTS = ["Hello there", "  done.  ", "Why?", "你好", "你好！", "", "x,", "Hi…", "end\u3002 "]


def reference_fixture(model):
    from omnivoice.utils.text import add_punctuation

    tensors = {}
    for name, (seed, layout, level) in CLIPS.items():
        wave = clip(np.random.default_rng(seed), layout, level)
        steps = prompt_steps(wave, "Some words.")
        tensors[f"{name}.input"] = torch.from_numpy(wave)
        tensors[f"{name}.rms"] = torch.tensor([steps["rms"]], dtype=torch.float64)
        tensors[f"{name}.silence_removed_len"] = torch.tensor([len(steps["silence_removed"])])
        if steps["rms"] < 0.1:
            tensors[f"{name}.scaled"] = torch.from_numpy(np.ascontiguousarray(steps["scaled"]))
        if len(steps["silence_removed"]) == 0:
            continue
        tensors[f"{name}.prepared"] = torch.from_numpy(np.ascontiguousarray(steps["prepared"]))
        # The steps above are the official function's, to the sample.
        _, encoded = official_prepared(model, wave, "Some words.")
        assert np.array_equal(encoded, steps["prepared"]), name
        # Without preprocessing: the RMS scaling and the cut to whole hops alone.
        raw = prompt_steps(wave, "Some words.", preprocess=False)["prepared"]
        assert np.array_equal(raw, steps["scaled"][: len(raw)]) and len(raw) % HOP == 0, name
        print(f"{name}: {len(wave)} -> {len(steps['silence_removed'])} -> {len(steps['prepared'])},"
              f" rms {steps['rms']:.4f}", file=sys.stderr)
    # A silent clip: its RMS is 0, so nothing scales it, and silence removal leaves nothing.
    try:
        official_prepared(model, np.zeros(RATE, dtype=np.float32), "Some words.")
        raise AssertionError("a silent reference was accepted")
    except ValueError as e:
        assert "empty after silence removal" in str(e), e
    punctuated = [add_punctuation(t) for t in TEXTS]
    save_file(tensors, os.path.join(OUT, "reference.safetensors"), metadata={
        "made_by": "scripts/omnivoice_clone_fixtures.py",
        "rate": str(RATE), "hop": str(HOP),
        "punctuation": json.dumps(list(zip(TEXTS, punctuated)), ensure_ascii=False),
    })

    # 21.6 s, mostly pauses (bursts every 1.03 s, so that the cut is not at a whole second), stored as 16-bit samples.
    rng = np.random.default_rng(6)
    layout = []
    for i in range(21):
        layout += [("v", 200 + 30 * (i % 5)), ("s", 830 - 30 * (i % 5))]
    wave = clip(rng, layout, 0.8)
    pcm = (wave * 32768.0).clip(-32768, 32767).astype(np.int16)
    wave = pcm.astype(np.float32) / 32768.0
    steps = prompt_steps(wave, None)
    kept = prompt_steps(wave, "A transcript.")
    # trim_long_audio keeps a prefix of the (16-bit) input.
    trimmed = steps["trimmed"]
    assert np.array_equal(trimmed, wave[: len(trimmed)])
    prepared = steps["prepared"]
    assert np.array_equal(np.round(prepared * 32768.0), prepared * 32768.0)
    long_tensors = {
        "input_pcm": torch.from_numpy(pcm.view(np.uint8).copy()),
        "rms": torch.tensor([steps["rms"]], dtype=torch.float64),
        "trimmed_len": torch.tensor([len(trimmed)]),
        "silence_removed_len": torch.tensor([len(steps["silence_removed"])]),
        "prepared_pcm": torch.from_numpy((prepared * 32768.0).astype(np.int16).view(np.uint8).copy()),
        # With a transcript nothing is trimmed.
        "with_text_prepared_len": torch.tensor([len(kept["prepared"])]),
    }
    save_file(long_tensors, os.path.join(OUT, "reference_long.safetensors"), metadata={
        "made_by": "scripts/omnivoice_clone_fixtures.py",
        "rate": str(RATE), "hop": str(HOP),
    })
    print(f"long: {len(wave)} -> {len(trimmed)} -> {len(prepared)}; with text {len(kept['prepared'])}",
          file=sys.stderr)


# (text, language, instruct, reference clip, reference transcript)
CLONE_ITEMS = [
    ("Nice to meet you, my friend.", "en", None, "speech", "Hello there, how are you today"),
    ("Then a second one comes along.", None, "male, low pitch", "speech", "Hello there, how are you today"),
    ("The first sentence is short. Then a second one comes along, and a third follows it! "
     "At last the fourth closes the text.", "en", None, "loud", "Why? Because I said so"),
    ("Quietly now.", "en", None, "quiet", "I am quiet, very quiet today"),
]
CLONE_CONFIG = dict(num_step=6, position_temperature=0.0, class_temperature=0.0,
                    audio_chunk_threshold=1.0, audio_chunk_duration=0.5)
CLONE_CLIPS = {
    "speech": (11, [("s", 200), ("v", 180), ("s", 260), ("v", 150), ("s", 250)], 0.6),
    "loud": (12, [("s", 150), ("v", 120), ("s", 100), ("v", 140), ("s", 150)], 2.0),
    "quiet": (13, [("s", 130), ("v", 200), ("s", 300), ("v", 100), ("s", 150)], 0.04),
}


def clone_fixture(model):
    from omnivoice.models.omnivoice import OmniVoiceGenerationConfig

    prompts = {}
    tensors = {}
    for name, (seed, layout, level) in CLONE_CLIPS.items():
        text = next(t for _, _, _, c, t in CLONE_ITEMS if c == name)
        wave = clip(np.random.default_rng(seed), layout, level)
        prompt, encoded = official_prepared(model, wave, text)
        prompts[name] = prompt
        tensors[f"{name}.input"] = torch.from_numpy(wave)
        tensors[f"{name}.prepared"] = torch.from_numpy(encoded)
        tensors[f"{name}.codes"] = prompt.ref_audio_tokens.to(torch.int64).cpu()
        tensors[f"{name}.rms"] = torch.tensor([prompt.ref_rms], dtype=torch.float64)
        print(f"{name}: {len(wave)} samples -> codes {tuple(prompt.ref_audio_tokens.shape)},"
              f" text {prompt.ref_text!r}, rms {prompt.ref_rms:.4f}", file=sys.stderr)
    config = OmniVoiceGenerationConfig(**CLONE_CONFIG)
    audios = model.generate(
        text=[t for t, _, _, _, _ in CLONE_ITEMS],
        language=[l for _, l, _, _, _ in CLONE_ITEMS],
        instruct=[i for _, _, i, _, _ in CLONE_ITEMS],
        voice_clone_prompt=[prompts[c] for _, _, _, c, _ in CLONE_ITEMS],
        generation_config=config,
    )
    for i, a in enumerate(audios):
        tensors[f"audio_{i}"] = torch.from_numpy(np.asarray(a, dtype=np.float32).copy())
    save_file(tensors, os.path.join(OUT, "clone.safetensors"), metadata={
        "made_by": "scripts/omnivoice_clone_fixtures.py",
        "items": json.dumps(CLONE_ITEMS, ensure_ascii=False),
        "ref_texts": json.dumps({n: p.ref_text for n, p in prompts.items()}, ensure_ascii=False),
        "config": json.dumps(CLONE_CONFIG),
    })
    print(f"clone: {[a.shape for a in audios]}", file=sys.stderr)


def fit_semantic_frames(codec):
    """The tiny codec of `e2e/` was made to decode: its semantic branch (a 2-layer HuBERT of
    stride 10 at 16 kHz) does not give one frame per hop, so its encoder cannot concatenate
    the two branches. Its features are stretched (nearest) to the acoustic frame count; what
    the codes are does not matter here (the Rust side has no encoder), only that they are the
    official pipeline's for this codec."""
    extract = codec._extract_semantic_features

    def fitted(input_values):
        features = extract(input_values)  # [B, T', D]
        frames = input_values.shape[-1] // HOP
        return torch.nn.functional.interpolate(
            features.transpose(1, 2), size=frames, mode="nearest").transpose(1, 2)

    codec._extract_semantic_features = fitted


def main() -> None:
    from omnivoice.models.omnivoice import OmniVoice

    model = OmniVoice.from_pretrained(E2E, dtype=torch.float32).eval()
    fit_semantic_frames(model.audio_tokenizer)
    assert model.sampling_rate == RATE and model.audio_tokenizer.config.hop_length == HOP
    reference_fixture(model)
    clone_fixture(model)


if __name__ == "__main__":
    main()
