#!/usr/bin/env python3
"""The Higgs-Audio-v2 tokenizer's encode path, from the official code, for the Rust port.

Loads the tiny codec with the release geometry that `scripts/omnivoice_clone_fixture.py` wrote
(`clone/audio_tokenizer/`: 24 kHz, DAC ratios [8, 5, 4, 2, 3], HuBERT strides, semantic
downsample 2, 8 quantizers of 16 x 6) and runs `HiggsAudioV2TokenizerModel.encode` (transformers
5.24) on two seeded clips, writing crates/models/tests/fixtures/omnivoice/encoder.safetensors:

- `{name}.wave` [samples]: the clip, a whole number of 960-sample hops (12 and 5 frames).
- `{name}.semantic_features` [1, frames, 8]: `_extract_semantic_features`.
- `{name}.semantic` [1, 8, frames]: `encoder_semantic` of those.
- `{name}.acoustic` [1, 10, frames]: `acoustic_encoder`, padded by hop/2 each side when the
  official length check says so; `{name}.padded` [1]: 1 when it did (with whole hops at this
  geometry it does not).
- `{name}.fc` [frames, 18]: `fc` of the concatenation.
- `{name}.residual.{i}` [frames, 18]: what quantizer i saw.
- `{name}.codes` [8, frames] (i64): `encode`'s codes.
- `{name}.margin` [8, frames]: second-best minus best distance per position, as the official
  code computes distances (float32), so a port can skip positions where rounding may flip a pick.

    .venv-omnivoice-ref/bin/python scripts/omnivoice_encoder_fixtures.py
"""

import math
import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from transformers import HiggsAudioV2TokenizerModel

HERE = os.path.dirname(__file__)
FIXTURES = os.path.join(HERE, "..", "crates", "models", "tests", "fixtures", "omnivoice")
CHECKPOINT = os.path.join(FIXTURES, "clone", "audio_tokenizer")


def clip(samples: int, generator: torch.Generator) -> torch.Tensor:
    t = torch.arange(samples, dtype=torch.float64) / 24000
    tones = 0.4 * torch.sin(2 * math.pi * 220 * t) + 0.2 * torch.sin(2 * math.pi * 1700 * t + 0.5)
    noise = 0.1 * torch.randn(samples, generator=generator, dtype=torch.float64)
    return (tones + noise).to(torch.float32)


@torch.no_grad()
def main() -> None:
    model = HiggsAudioV2TokenizerModel.from_pretrained(CHECKPOINT).eval()
    generator = torch.Generator().manual_seed(2026)
    out = {}
    for name, frames in [("long", 12), ("short", 5)]:
        wave = clip(frames * model.config.hop_length, generator)
        x = wave.view(1, 1, -1)
        features = model._extract_semantic_features(x)
        semantic = model.encoder_semantic(features.transpose(1, 2))
        padded = model._get_conv1d_output_lengths(x.shape[2], model.acoustic_encoder) != semantic.shape[2]
        acoustic = model.acoustic_encoder(F.pad(x, (model.pad, model.pad)) if padded else x)
        fc = model.fc(torch.cat([acoustic, semantic], dim=1).transpose(1, 2))[0]
        residual = fc.unsqueeze(0).transpose(1, 2)
        margins = []
        for i, q in enumerate(model.quantizer.quantizers):
            out[f"{name}.residual.{i}"] = residual[0].transpose(0, 1).contiguous()
            h = q.project_in(residual.permute(0, 2, 1)).reshape(-1, model.config.codebook_dim)
            embed = q.codebook.embed.t()
            dist = h.pow(2).sum(1, keepdim=True) - 2 * h @ embed + embed.pow(2).sum(0, keepdim=True)
            two = dist.topk(2, dim=-1, largest=False).values
            margins.append(two[:, 1] - two[:, 0])
            residual = residual - q.decode(q.encode(residual))
        codes = model.encode(x, return_dict=False)[0]
        out.update({
            f"{name}.wave": wave,
            f"{name}.semantic_features": features.contiguous(),
            f"{name}.semantic": semantic.contiguous(),
            f"{name}.acoustic": acoustic.contiguous(),
            f"{name}.padded": torch.tensor([int(padded)]),
            f"{name}.fc": fc.contiguous(),
            f"{name}.codes": codes.contiguous(),
            f"{name}.margin": torch.stack(margins).contiguous(),
        })
        print(name, "frames", codes.shape, "padded", padded, "acoustic |max|", acoustic.abs().max().item(),
              "semantic |max|", semantic.abs().max().item(), "margin>1e-3",
              (torch.stack(margins) > 1e-3).float().mean().item())
    out = {k: v.clone().contiguous() for k, v in out.items()}
    save_file(out, os.path.join(FIXTURES, "encoder.safetensors"))


if __name__ == "__main__":
    main()
