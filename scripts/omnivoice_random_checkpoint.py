#!/usr/bin/env python3
"""Writes an OmniVoice checkpoint directory at the released model's size, with seeded random
weights, made by the official classes (omnivoice 0.2.1, transformers 5.24).

The real checkpoint cannot be reached from these machines, but what a server costs in memory
and time depends on the shapes, not on the weights' values: the Qwen3-0.6B body (28 layers,
hidden 1024, MLP 3072, 16 query / 8 key-value heads of 128, vocabulary 151,676), 8 × 1025 audio
ids, and the Higgs-Audio-v2 codec as released (DAC ratios [8, 5, 4, 2, 3]: 24 kHz at 25 frames
a second, 8 quantizers of 1024 × 64, a HuBERT-base semantic model). The tokenizer is the small
one of the end-to-end fixture (crates/models/tests/fixtures/omnivoice/e2e): its ids all fall
inside the released vocabulary. The directory is laid out as users have theirs, so the server
loads it with `--omnivoice-dir`. It is about 2.9 GB, in f32; never commit it.

    scripts/omnivoice-ref-venv.sh
    .venv-omnivoice-ref/bin/python scripts/omnivoice_random_checkpoint.py [OUT]
        (default OUT: target/omnivoice-released-random)

Used by scripts/bench-memory.sh (docs/performance.md §18) for OmniVoice's peak memory.
"""

import os
import shutil
import sys

import torch
from transformers import DacFeatureExtractor, HiggsAudioV2TokenizerConfig, HiggsAudioV2TokenizerModel, Qwen3Config

from omnivoice.models.omnivoice import OmniVoice, OmniVoiceConfig

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
E2E = os.path.join(ROOT, "crates", "models", "tests", "fixtures", "omnivoice", "e2e")
AUDIO_VOCAB, CODEBOOKS = 1025, 8


def backbone(out: str) -> None:
    llm = Qwen3Config(
        vocab_size=151676, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
        num_attention_heads=16, num_key_value_heads=8, head_dim=128, rms_norm_eps=1e-6,
        rope_theta=1e6, max_position_embeddings=40960, tie_word_embeddings=False,
        attention_bias=False,
    )
    config = OmniVoiceConfig(
        audio_vocab_size=AUDIO_VOCAB, audio_mask_id=AUDIO_VOCAB - 1,
        num_audio_codebook=CODEBOOKS, llm_config=llm,
    )
    config.llm_config._attn_implementation = "sdpa"
    model = OmniVoice(config).eval()
    # transformers' initializer gives weights of std 0.02; scaled by fan-in instead, the
    # activations keep a speech-like range through 28 layers (the scores only pick ids here).
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.fill_(1.0)
            else:
                p.copy_(torch.randn_like(p) / p.shape[-1] ** 0.5)
    model.save_pretrained(out, safe_serialization=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(E2E, name), os.path.join(out, name))


def codec(out: str) -> None:
    config = HiggsAudioV2TokenizerConfig(
        sample_rate=24000,
        codebook_size=1024,
        codebook_dim=64,
        # 8 quantizers at the highest bandwidth: 1000 · 2 // (25 frames/s · 10 bits).
        target_bandwidths=[0.5, 1, 1.5, 2],
        acoustic_model_config=dict(
            encoder_hidden_size=64, downsampling_ratios=[8, 5, 4, 2, 3], decoder_hidden_size=1024,
            upsampling_ratios=[8, 5, 4, 2, 3], hidden_size=256,
        ),
        # HuBERT-base at 16 kHz gives 50 frames/s; two of them make one codec frame.
        downsample_factor=2,
    )
    assert config.frame_rate == 25 and config.num_quantizers == CODEBOOKS, (
        config.frame_rate, config.num_quantizers)
    model = HiggsAudioV2TokenizerModel(config).eval()
    with torch.no_grad():
        codes = torch.randint(0, 1024, (1, CODEBOOKS, 25))
        peak = model.decode(codes).audio_values.abs().max()
        last = model.acoustic_decoder.conv2
        # A random DAC decoder's output grows by orders of magnitude: bring it to ±0.5.
        last.weight.mul_(0.5 / peak)
        last.bias.mul_(0.5 / peak)
    audio = os.path.join(out, "audio_tokenizer")
    model.save_pretrained(audio, safe_serialization=True)
    DacFeatureExtractor(sampling_rate=24000, hop_length=960).save_pretrained(audio)


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target", "omnivoice-released-random")
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(20261206)
    backbone(out)
    codec(out)
    print(f"omnivoice_random_checkpoint: wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
