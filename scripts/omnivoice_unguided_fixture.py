#!/usr/bin/env python3
"""The official greedy decoding loop without guidance (`guidance_scale` 0).

With `guidance_scale` 0 the official loop (`OmniVoice._generate_iterative`, omnivoice 0.2.1)
still runs every unconditional row through the model and mixes it in with weight 0. The port
leaves those rows out of its forward; these frames check that nothing else changes. Writes
crates/models/tests/fixtures/omnivoice/generate_unguided.safetensors, from the tiny checkpoint
and the two prompts of `generate.safetensors`:

    .venv-omnivoice-ref/bin/python scripts/omnivoice_unguided_fixture.py
"""

import os
import sys

import torch
from safetensors.torch import save_file

from omnivoice.models.omnivoice import OmniVoiceGenerationConfig

sys.path.insert(0, os.path.dirname(__file__))
from omnivoice_noise_fixture import NUM_STEP, OUT, generate_prompts, load_model, run  # noqa: E402


def main() -> None:
    model = load_model()
    f, prompts = generate_prompts()
    config = OmniVoiceGenerationConfig(
        num_step=NUM_STEP, guidance_scale=0.0, position_temperature=0.0, class_temperature=0.0
    )
    frames = run(model, prompts, config)
    tensors = {}
    for i, ours in enumerate(frames):
        # Guidance must matter at this size, or the fixture checks nothing.
        assert not torch.equal(ours, f[f"frames_{i}"]), i
        tensors[f"frames_{i}"] = ours.to(torch.int64).contiguous()
    save_file(
        tensors,
        os.path.join(OUT, "generate_unguided.safetensors"),
        metadata={
            "made_by": "scripts/omnivoice_unguided_fixture.py",
            "prompts": "generate.safetensors",
            "num_step": str(NUM_STEP),
            "guidance_scale": str(config.guidance_scale),
            "t_shift": str(config.t_shift),
            "layer_penalty_factor": str(config.layer_penalty_factor),
            "torch": torch.__version__,
        },
    )
    print(f"generate_unguided: frames {[tuple(x.shape) for x in frames]}", file=sys.stderr)


if __name__ == "__main__":
    main()
