#!/usr/bin/env python3
"""The official codec's decode in bfloat16, the peer our bf16 codec decode is judged by.

A Higgs-Audio-v2 codec (transformers' `HiggsAudioV2TokenizerModel`, the class OmniVoice decodes
with) with the release's upsampling ratios [8, 5, 4, 2, 3] and 8 quantizers, scaled down in
width (decoder 128 channels, not 1024; codebooks of 64 × 8) so that its weights are a small
fixture, with seeded random weights; only the decoding half's tensors are kept. Writes crates/models/tests/fixtures/omnivoice/codec_bf16/: the codec as
`save_pretrained` writes it, and `decode.safetensors` with some codes and the audio the official
`decode` gives for them in float32 and in bfloat16 (`model.to(torch.bfloat16)`, what a PyTorch
user passing `dtype=torch.bfloat16` runs).

    scripts/omnivoice-ref-venv.sh
    .venv-omnivoice-ref/bin/python scripts/omnivoice_codec_bf16_fixture.py
"""

import os
import sys

import torch
from safetensors.torch import load_file, save_file
from transformers import HiggsAudioV2TokenizerConfig, HiggsAudioV2TokenizerModel

OUT = os.path.join(
    os.path.dirname(__file__), "..", "crates", "models", "tests", "fixtures", "omnivoice", "codec_bf16"
)


def main() -> None:
    torch.manual_seed(20261206)
    torch.set_num_threads(2)
    config = HiggsAudioV2TokenizerConfig(
        sample_rate=24000,
        codebook_size=64,
        codebook_dim=8,
        # 8 quantizers at the highest bandwidth: 1000 · 1.2 // (25 frames/s · 6 bits).
        target_bandwidths=[1.2],
        acoustic_model_config=dict(
            encoder_hidden_size=2,
            downsampling_ratios=[8, 5, 4, 2, 3],
            decoder_hidden_size=128,
            upsampling_ratios=[8, 5, 4, 2, 3],
            hidden_size=64,
        ),
        semantic_model_config=dict(
            hidden_size=8,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=16,
            conv_dim=[8, 8],
            conv_stride=[5, 2],
            conv_kernel=[10, 3],
            num_conv_pos_embeddings=4,
            num_conv_pos_embedding_groups=2,
        ),
        downsample_factor=2,
    )
    model = HiggsAudioV2TokenizerModel(config).eval()
    assert config.num_quantizers == 8, config.num_quantizers
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("alpha"):
                # Trained Snake frequencies spread around 1.
                p.copy_(0.5 + torch.rand_like(p))
            else:
                # Variance 1 / fan-in, as trained convolutions keep their signals' scale.
                fan_in = p[0].numel() if p.dim() > 1 else p.shape[-1]
                p.copy_(torch.randn_like(p) / max(fan_in, 1) ** 0.5)
        for q in model.quantizer.quantizers:
            q.codebook.embed.copy_(torch.randn_like(q.codebook.embed))
    frames = 10
    codes = torch.randint(0, config.codebook_size, (1, 8, frames))
    with torch.no_grad():
        # A random decoder's output grows through its blocks: bring it to ±0.5.
        peak = model.decode(codes).audio_values.abs().max()
        last = model.acoustic_decoder.conv2
        last.weight.mul_(0.5 / peak)
        last.bias.mul_(0.5 / peak)
        audio = model.decode(codes).audio_values
    model.save_pretrained(OUT, safe_serialization=True)
    # Only what decoding reads: the encoders' weights would be most of the file.
    path = os.path.join(OUT, "model.safetensors")
    kept = {
        name: tensor.contiguous()
        for name, tensor in load_file(path).items()
        if name.startswith(("acoustic_decoder.", "fc2.")) or ".codebook." in name or ".project_out." in name
    }
    save_file(kept, path, metadata={"format": "pt"})
    half = model.to(torch.bfloat16)
    with torch.no_grad():
        audio_bf16 = half.decode(codes).audio_values.float()
    error = (audio_bf16 - audio).abs().max() / audio.abs().max()
    save_file(
        {
            "audio_codes": codes[0].to(torch.int64).contiguous(),  # [8, T]
            "audio": audio[0, 0].to(torch.float32).contiguous(),  # [T · 960]
            "audio_bf16": audio_bf16[0, 0].contiguous(),
        },
        os.path.join(OUT, "decode.safetensors"),
        metadata={"made_by": "scripts/omnivoice_codec_bf16_fixture.py", "torch": torch.__version__},
    )
    print(
        f"codec: {frames} frames -> {audio.shape[-1]} samples, peak {audio.abs().max():.3f}; "
        f"official bf16 against f32: {error:.4f} of the peak",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
