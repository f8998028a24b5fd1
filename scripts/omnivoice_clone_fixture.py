#!/usr/bin/env python3
"""The end-to-end cloning fixture for the server's tests, made by the official code
(omnivoice 0.2.1, transformers 5.24).

It writes a reference clip as a client would upload it (`reference.wav`: 16 kHz, 16-bit, a
quiet voiced signal between silences, so that resampling, the RMS rule and silence removal
all act), then has the official `OmniVoice.generate(text, ref_audio=<that file>, ref_text=…)`
speak with a tiny checkpoint (`crates/models/tests/fixtures/omnivoice/clone`) with both
temperatures 0, which makes generation deterministic.

That checkpoint is the end-to-end one's network and tokenizer (`e2e/`) with a codec of its
own: `e2e/`'s codec cannot encode (its semantic branch runs at another frame rate than its
acoustic one, which only matters to `encode`). This one has the release's geometry (24 kHz,
DAC ratios [8, 5, 4, 2, 3], HuBERT's convolution strides, 25 frames/s, so every frame count
and padding rule of the release is exercised) at tiny widths. `expected.safetensors` holds
the official audio of each case and the reference's codes; `cases.json` the requests.

    .venv-omnivoice-ref/bin/python scripts/omnivoice_clone_fixture.py
"""

import json
import os
import sys

import numpy as np
import soundfile as sf
import torch
from safetensors.torch import save_file

ROOT = os.path.join(os.path.dirname(__file__), "..")
FIXTURES = os.path.join(ROOT, "crates", "models", "tests", "fixtures", "omnivoice")
E2E = os.path.join(FIXTURES, "e2e")
CLONE = os.path.join(FIXTURES, "clone")
OUT = os.path.join(ROOT, "tests", "fixtures", "omnivoice_clone")

RATE = 16_000
REF_TEXT = "This is my own voice"
# One sentence each, so the server (which speaks sentence by sentence) makes the same single
# call the official code makes.
CASES = [
    {"name": "plain", "text": "Say hello to everyone here", "num_step": 4},
    {"name": "slower", "text": "Read this one more slowly", "num_step": 4, "speed": 0.8,
     "language": "en"},
]


def reference_clip() -> np.ndarray:
    """1.6 s: 0.3 s of silence, 1 s of a quiet vowel-like tone with a syllable rhythm, and
    0.3 s of silence (RMS about 0.03, below the official 0.1 floor)."""
    rng = np.random.default_rng(11)
    t = np.arange(int(RATE * 1.0)) / RATE
    pitch = 140 + 20 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(pitch) / RATE
    voiced = sum(np.sin(k * phase) / k for k in range(1, 8))
    envelope = 0.5 * (1 - np.cos(2 * np.pi * 4 * t)) ** 1.5
    voiced = 0.05 * voiced * envelope + 0.002 * rng.standard_normal(t.size)
    silence = np.zeros(int(RATE * 0.3))
    clip = np.concatenate([silence, voiced, silence]).astype(np.float32)
    # As a client's file holds it: 16-bit.
    return np.round(clip * 32767).astype(np.int16)


def calibrate_encoder(codec) -> None:
    """Random convolutions grow the encoder's output by orders of magnitude (1e16 through the
    DAC encoder), and then every frame picks the same codes. Scales each convolution of both
    encoder branches, in the order they run, so that its output has unit spread on a voiced
    input (data-dependent initialisation), which makes the codes vary from frame to frame."""
    t = torch.arange(24_000 * 2) / 24_000
    probe = (0.3 * torch.sin(2 * torch.pi * 150 * t) * (1 + torch.sin(2 * torch.pi * 3 * t))
             + 0.05 * torch.randn(t.shape))[None, None, :]
    for branch in (codec.acoustic_encoder, codec.encoder_semantic):
        for conv in [m for m in branch.modules() if isinstance(m, torch.nn.Conv1d)]:
            seen = []
            handle = conv.register_forward_hook(lambda _m, _i, out: seen.append(out.std().item()))
            codec.encode(probe)
            handle.remove()
            conv.weight.mul_(1.0 / seen[0])
            if conv.bias is not None:
                conv.bias.mul_(1.0 / seen[0])


def checkpoint() -> None:
    import shutil

    from transformers import DacFeatureExtractor, HiggsAudioV2TokenizerConfig, HiggsAudioV2TokenizerModel

    os.makedirs(CLONE, exist_ok=True)
    for name in ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]:
        shutil.copyfile(os.path.join(E2E, name), os.path.join(CLONE, name))
    torch.manual_seed(20261203)
    rate = 24_000
    config = HiggsAudioV2TokenizerConfig(
        sample_rate=rate,
        codebook_size=16,
        codebook_dim=6,
        # 8 quantizers: 1000 · 0.8 // (25 frames/s · 4 bits).
        target_bandwidths=[0.4, 0.8],
        acoustic_model_config=dict(
            encoder_hidden_size=2, downsampling_ratios=[8, 5, 4, 2, 3], decoder_hidden_size=64,
            upsampling_ratios=[8, 5, 4, 2, 3], hidden_size=10,
        ),
        semantic_model_config=dict(
            hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=16,
            conv_dim=[8] * 7, conv_stride=[5, 2, 2, 2, 2, 2, 2], conv_kernel=[10, 3, 3, 3, 3, 2, 2],
            num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=2,
        ),
        downsample_factor=320,
    )
    assert config.frame_rate == 25 and config.num_quantizers == 8, (config.frame_rate, config.num_quantizers)
    assert config.semantic_downsample_factor == 2
    codec = HiggsAudioV2TokenizerModel(config).eval()
    with torch.no_grad():
        for name, p in codec.named_parameters():
            if name.endswith("alpha"):
                p.copy_(0.5 + torch.rand_like(p))
            else:
                p.copy_(torch.randn_like(p) / max(p.shape[-1], 1) ** 0.5)
        for q in codec.quantizer.quantizers:
            q.codebook.embed.copy_(torch.randn_like(q.codebook.embed))
        calibrate_encoder(codec)
        codes = torch.randint(0, 16, (1, 8, 20))
        peak = codec.decode(codes).audio_values.abs().max()
        last = codec.acoustic_decoder.conv2
        last.weight.mul_(0.5 / peak)
        last.bias.mul_(0.5 / peak)
    audio_dir = os.path.join(CLONE, "audio_tokenizer")
    codec.save_pretrained(audio_dir, safe_serialization=True)
    DacFeatureExtractor(sampling_rate=rate, hop_length=960).save_pretrained(audio_dir)


def main() -> None:
    from omnivoice.models.omnivoice import OmniVoice, OmniVoiceGenerationConfig

    checkpoint()
    os.makedirs(OUT, exist_ok=True)
    wav_path = os.path.join(OUT, "reference.wav")
    sf.write(wav_path, reference_clip(), RATE, subtype="PCM_16")

    model = OmniVoice.from_pretrained(CLONE, dtype=torch.float32).eval()
    prompt = model.create_voice_clone_prompt(ref_audio=wav_path, ref_text=REF_TEXT)
    tensors = {"codes": prompt.ref_audio_tokens.to(torch.int64).contiguous()}
    for case in CASES:
        config = OmniVoiceGenerationConfig(num_step=case["num_step"], position_temperature=0.0,
                                           class_temperature=0.0)
        audio = model.generate(text=case["text"], ref_audio=wav_path, ref_text=REF_TEXT,
                               language=case.get("language"), speed=case.get("speed", 1.0),
                               generation_config=config)[0]
        tensors[f"audio_{case['name']}"] = torch.from_numpy(np.asarray(audio, np.float32).copy())
        print(f"{case['name']}: {np.asarray(audio).shape}", file=sys.stderr)
    save_file(tensors, os.path.join(OUT, "expected.safetensors"), metadata={
        "made_by": "scripts/omnivoice_clone_fixture.py",
        "ref_rms": repr(prompt.ref_rms),
        "ref_text": prompt.ref_text,
    })
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        json.dump({"ref_text": REF_TEXT, "sample_rate": model.sampling_rate, "cases": CASES},
                  f, indent=1)
    print(f"codes {tuple(prompt.ref_audio_tokens.shape)}, ref_rms {prompt.ref_rms:.4f}, "
          f"ref_text {prompt.ref_text!r}", file=sys.stderr)


if __name__ == "__main__":
    main()
