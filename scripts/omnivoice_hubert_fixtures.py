#!/usr/bin/env python3
"""HuBERT and torchaudio's resampler as the Higgs-Audio-v2 tokenizer's encoder uses them.

The codec's `_extract_semantic_features` (transformers 5.24) resamples the clip to 16 kHz with
`torchaudio.functional.resample`, pads it by 160 samples each side, runs its HuBERT
(`semantic_model`, a `HubertModel`) with `output_hidden_states=True`, averages all hidden states
and keeps every `semantic_downsample_factor`-th frame. This writes, from the official code,
crates/models/tests/fixtures/omnivoice/hubert.safetensors:

- `resample.{from}.{to}.{n}`: `torchaudio.functional.resample` (defaults) of the first `n`
  samples of `resample.wave` (tones and noise, peak ≈ 1.2), from `from` Hz to `to` Hz.
- `e2e.*`: the tiny codec of `e2e/audio_tokenizer/` (hidden 8, conv_dim [8, 8], one layer, a
  positional convolution of 4 taps in 2 groups, saved as `parametrizations.weight.original0/1`)
  on a batch of two seeded clips at its 11025 Hz: `wave` [2, 1, N], `resampled` [2, M] (16 kHz),
  `input` [2, M + 320] (what the HuBERT sees), `hidden_state.{i}` [2, frames, 8], `mean` and
  `semantic_features` (what `_extract_semantic_features` returns; checked here to be `mean`
  with every `semantic_downsample_factor`-th frame kept).
- `wide.*`: what that tiny config leaves untried, on a second, seeded `HubertModel`
  (`HubertConfig(...)`, its JSON as `save_pretrained` writes it in `hubert_wide_config.json`): three feature convolutions with biases,
  three transformer layers of 4 heads, an odd positional kernel (5 taps, nothing trimmed) in 4
  groups, and the positional weight under the older names `weight_g`/`weight_v` (as in
  checkpoints saved before torch's parametrizations). Weights `wide.weights.<name>`, `input`
  [2, 800], `hidden_state.{i}`.

Weights are redrawn wider than transformers' init (std 0.02 leaves attention uniform and every
layer near the identity) so that each product and norm moves the result.

    .venv-omnivoice-ref/bin/python scripts/omnivoice_hubert_fixtures.py
"""

import math
import os

import torch
import torchaudio
from safetensors.torch import save_file
from transformers import HiggsAudioV2TokenizerModel, HubertConfig, HubertModel

OUT = os.path.join(os.path.dirname(__file__), "..", "crates", "models", "tests", "fixtures", "omnivoice")

RATE_PAIRS = [
    (24000, 16000),
    (11025, 16000),
    (44100, 24000),
    (48000, 24000),
    (8000, 24000),
    (16000, 24000),
    (22050, 24000),
]
LENGTHS = [1, 2, 5, 37, 441, 1500]

WIDE = dict(
    hidden_size=16,
    num_hidden_layers=3,
    num_attention_heads=4,
    intermediate_size=24,
    conv_dim=[6, 8, 8],
    conv_kernel=[10, 3, 2],
    conv_stride=[5, 2, 2],
    conv_bias=True,
    num_conv_pos_embeddings=5,
    num_conv_pos_embedding_groups=4,
    feat_extract_norm="group",
    feat_proj_layer_norm=True,
    do_stable_layer_norm=False,
)


def test_wave(n: int, rate: float, generator: torch.Generator) -> torch.Tensor:
    """Two tones and noise, peak about 1.2."""
    t = torch.arange(n, dtype=torch.float64) / rate
    tones = 0.5 * torch.sin(2 * math.pi * 440 * t) + 0.25 * torch.sin(2 * math.pi * 3100 * t + 0.3)
    noise = 0.15 * torch.randn(n, generator=generator, dtype=torch.float64)
    return (tones + noise).to(torch.float32)


def widen(model: torch.nn.Module, generator: torch.Generator) -> None:
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layer_norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=generator))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=generator))
            else:
                fan_in = p[0].numel() if p.dim() > 1 else 1
                p.copy_(torch.randn(p.shape, generator=generator) * (1.5 / math.sqrt(fan_in)))


def resample_cases(out: dict) -> None:
    generator = torch.Generator().manual_seed(20261203)
    wave = test_wave(max(LENGTHS), 16000, generator)
    out["resample.wave"] = wave
    for src, dst in RATE_PAIRS:
        for n in LENGTHS:
            out[f"resample.{src}.{dst}.{n}"] = torchaudio.functional.resample(wave[:n], src, dst).contiguous()


def e2e_cases(out: dict) -> None:
    codec = HiggsAudioV2TokenizerModel.from_pretrained(os.path.join(OUT, "e2e", "audio_tokenizer")).eval()
    config = codec.config
    assert config.sample_rate != config.semantic_sample_rate, "the resampling must be on the path"
    assert config.semantic_model_config.num_conv_pos_embeddings % 2 == 0, "an even positional kernel"
    names = [k for k in codec.state_dict() if k.startswith("semantic_model.encoder.pos_conv_embed")]
    assert any("parametrizations.weight.original0" in k for k in names), names

    generator = torch.Generator().manual_seed(20261204)
    n = config.sample_rate // 4
    wave = torch.stack([test_wave(n, config.sample_rate, generator) for _ in range(2)])[:, None, :]
    with torch.no_grad():
        official = codec._extract_semantic_features(wave)
        resampled = torchaudio.functional.resample(wave[:, 0, :], config.sample_rate, config.semantic_sample_rate)
        hubert_input = torch.nn.functional.pad(resampled, (160, 160))
        states = codec.semantic_model(hubert_input, output_hidden_states=True).hidden_states
    mean = torch.stack(states, dim=1).mean(dim=1)
    factor = config.semantic_downsample_factor
    assert len(states) == config.semantic_model_config.num_hidden_layers + 1
    assert torch.equal(official, mean[:, ::factor, :]), "the pieces put back together are the official features"

    out["e2e.wave"] = wave.contiguous()
    out["e2e.resampled"] = resampled.contiguous()
    out["e2e.input"] = hubert_input.contiguous()
    for i, state in enumerate(states):
        out[f"e2e.hidden_state.{i}"] = state.contiguous()
    out["e2e.mean"] = mean.contiguous()
    out["e2e.semantic_features"] = official.contiguous()
    out["e2e.semantic_downsample_factor"] = torch.tensor([factor], dtype=torch.int64)
    print(f"e2e: wave {tuple(wave.shape)}, HuBERT input {tuple(hubert_input.shape)}, "
          f"{len(states)} states {tuple(states[0].shape)}, features {tuple(official.shape)} (every {factor}th)")


def wide_cases(out: dict) -> None:
    torch.manual_seed(20261205)
    config = HubertConfig(**WIDE)
    model = HubertModel(config).eval()
    widen(model, torch.Generator().manual_seed(20261206))
    weights = {}
    for name, tensor in model.state_dict().items():
        if name == "masked_spec_embed":
            continue
        name = name.replace("parametrizations.weight.original0", "weight_g")
        name = name.replace("parametrizations.weight.original1", "weight_v")
        weights[f"wide.weights.{name}"] = tensor.contiguous()
    assert "wide.weights.encoder.pos_conv_embed.conv.weight_g" in weights, sorted(weights)

    # The older names load into the same model: what the test reads is what ran.
    reloaded = HubertModel(config).eval()
    state = {k.removeprefix("wide.weights."): v for k, v in weights.items()}
    missing, unexpected = reloaded.load_state_dict(
        {k.replace("conv.weight_g", "conv.parametrizations.weight.original0")
          .replace("conv.weight_v", "conv.parametrizations.weight.original1"): v for k, v in state.items()},
        strict=False,
    )
    assert not unexpected and missing in ([], ["masked_spec_embed"]), (missing, unexpected)

    generator = torch.Generator().manual_seed(20261207)
    hubert_input = torch.stack([test_wave(800, 16000, generator) for _ in range(2)])
    with torch.no_grad():
        states = model(hubert_input, output_hidden_states=True).hidden_states
        again = reloaded(hubert_input, output_hidden_states=True).hidden_states
    assert all(torch.equal(a, b) for a, b in zip(states, again))
    assert len(states) == WIDE["num_hidden_layers"] + 1
    out.update(weights)
    out["wide.input"] = hubert_input
    for i, s in enumerate(states):
        out[f"wide.hidden_state.{i}"] = s.contiguous()
    print(f"wide: input {tuple(hubert_input.shape)}, {len(states)} states {tuple(states[0].shape)}")
    config.to_json_file(os.path.join(OUT, "hubert_wide_config.json"))


def main() -> None:
    out: dict = {}
    resample_cases(out)
    e2e_cases(out)
    wide_cases(out)
    path = os.path.join(OUT, "hubert.safetensors")
    save_file(out, path)
    print(f"{path}: {os.path.getsize(path)} bytes, {len(out)} tensors")


if __name__ == "__main__":
    main()
