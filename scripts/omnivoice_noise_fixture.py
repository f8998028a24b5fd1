#!/usr/bin/env python3
"""The official decoding loop with both temperatures on, and every uniform it drew.

With `position_temperature` and `class_temperature` above 0 the official loop
(`OmniVoice._generate_iterative`, omnivoice 0.2.1) draws `torch.rand_like` uniforms in
`_gumbel_sample`, so its frames can only be compared with ours if ours are fed the same
uniforms. This records each draw, in order, and writes them beside the frames they led to
(crates/models/tests/fixtures/omnivoice/generate_noise.safetensors), so that the port's
Gumbel sampling of ids and of positions (top-10 % filter, temperatures, which uniform goes with
which position and id) is checked exactly, not only the greedy path of `generate.safetensors`.

It reuses the tiny checkpoint and the two prompts of `generate.safetensors` (made by
`scripts/omnivoice_fixtures.py`) instead of re-running that script, which rewrites every
fixture:

    .venv-omnivoice-ref/bin/python scripts/omnivoice_noise_fixture.py
"""

import os
import sys
from types import SimpleNamespace

import torch
from safetensors.torch import load_file, save_file

from omnivoice.models.omnivoice import OmniVoice, OmniVoiceConfig, OmniVoiceGenerationConfig

OUT = os.path.join(os.path.dirname(__file__), "..", "crates", "models", "tests", "fixtures", "omnivoice")
NUM_STEP = 6


def load_model() -> OmniVoice:
    tiny = os.path.join(OUT, "tiny")
    config = OmniVoiceConfig.from_pretrained(tiny)
    config.llm_config._attn_implementation = "sdpa"
    model = OmniVoice(config).eval()
    weights = load_file(os.path.join(tiny, "model.safetensors"))
    missing, unexpected = model.load_state_dict(weights, strict=False)
    # Tied or buffer-only names aside, every weight must come from the file.
    assert not unexpected, unexpected
    assert all("rotary" in name or "inv_freq" in name for name in missing), missing
    return model


def run(model, prompts, config):
    """`_generate_iterative` on `prompts`, handed to it as `_prepare_inference_inputs` would."""
    queue = [dict(p) for p in prompts]
    model._prepare_inference_inputs = lambda *args, **kwargs: queue.pop(0)
    n = len(prompts)
    task = SimpleNamespace(
        batch_size=n,
        texts=["a"] * n,
        target_lens=[p["frames"] for p in prompts],
        ref_texts=[None] * n,
        ref_audio_tokens=[None] * n,
        langs=[None] * n,
        instructs=[None] * n,
    )
    with torch.no_grad():
        return model._generate_iterative(task, config)


def generate_prompts():
    """`generate.safetensors` and its two prompts, as `run` takes them."""
    f = load_file(os.path.join(OUT, "generate.safetensors"))
    prompts = [
        {
            "input_ids": f[f"prompt_{i}"].unsqueeze(0),
            "audio_mask": f[f"prompt_audio_{i}"].to(torch.bool).unsqueeze(0),
            "frames": f[f"frames_{i}"].shape[1],
        }
        for i in range(2)
    ]
    return f, prompts


def main() -> None:
    model = load_model()
    f, prompts = generate_prompts()

    # The weights and prompts are the ones generate.safetensors was made from only if the
    # greedy loop still gives its frames.
    greedy_config = OmniVoiceGenerationConfig(
        num_step=NUM_STEP, position_temperature=0.0, class_temperature=0.0
    )
    greedy = run(model, prompts, greedy_config)
    for i, frames in enumerate(greedy):
        assert torch.equal(frames, f[f"frames_{i}"]), i

    config = OmniVoiceGenerationConfig(
        num_step=NUM_STEP,
        guidance_scale=2.0,
        t_shift=0.1,
        layer_penalty_factor=5.0,
        position_temperature=5.0,
        class_temperature=0.7,
    )
    draws = []
    rand_like = torch.rand_like

    def recording(t, *args, **kwargs):
        u = rand_like(t, *args, **kwargs)
        draws.append(u.clone())
        return u

    torch.manual_seed(20261204)
    torch.rand_like = recording
    try:
        frames = run(model, prompts, config)
    finally:
        torch.rand_like = rand_like

    # The official order: per step, per item (every one fixes positions at every step here),
    # class noise over all [1, C, T, V] then position noise over all [1, C, T].
    codebooks, vocab = model.config.num_audio_codebook, model.config.audio_vocab_size
    assert len(draws) == NUM_STEP * len(prompts) * 2, len(draws)
    tensors = {}
    for i, p in enumerate(prompts):
        t = p["frames"]
        classes = [draws[(step * len(prompts) + i) * 2] for step in range(NUM_STEP)]
        positions = [draws[(step * len(prompts) + i) * 2 + 1] for step in range(NUM_STEP)]
        assert all(u.shape == (1, codebooks, t, vocab) for u in classes), [u.shape for u in classes]
        assert all(u.shape == (1, codebooks, t) for u in positions), [u.shape for u in positions]
        # [steps, C, T, V] and [steps, C, T]: every position's, decoded ones included.
        tensors[f"class_uniforms_{i}"] = torch.cat(classes).to(torch.float32).contiguous()
        tensors[f"position_uniforms_{i}"] = torch.cat(positions).to(torch.float32).contiguous()
        tensors[f"frames_{i}"] = frames[i].to(torch.int64).contiguous()
        # The noise must matter: the greedy frames differ.
        assert not torch.equal(frames[i], greedy[i]), i
    save_file(
        tensors,
        os.path.join(OUT, "generate_noise.safetensors"),
        metadata={
            "made_by": "scripts/omnivoice_noise_fixture.py",
            "prompts": "generate.safetensors",
            "num_step": str(NUM_STEP),
            "guidance_scale": str(config.guidance_scale),
            "t_shift": str(config.t_shift),
            "layer_penalty_factor": str(config.layer_penalty_factor),
            "position_temperature": str(config.position_temperature),
            "class_temperature": str(config.class_temperature),
            "torch": torch.__version__,
        },
    )
    shapes = [tuple(x.shape) for x in frames]
    print(f"generate_noise: frames {shapes}, {len(draws)} draws", file=sys.stderr)


if __name__ == "__main__":
    main()
