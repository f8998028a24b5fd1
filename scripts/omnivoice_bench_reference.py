"""Times the official OmniVoice forward (omnivoice 0.2.1, torch, f32, SDPA) at the released
model's size with seeded random weights, on the batch one generation step of a 5 s design-mode
utterance runs: a 165-position conditional row (40 text tokens, 125 frames) and the 125 frames
alone, padded to one [2, 8, 165] batch with its block mask, as `_generate_iterative` builds it.
Prints the best of 3 forwards, in seconds, on `torch.set_num_threads(THREADS)` (default 2).
With `DEVICE=cuda` it runs on the GPU instead (the best of 10, synchronized), in `DTYPE`
(`float32`, the default, or `bfloat16`), with `TF32=1` letting f32 products use TF32, and
`BATCH=n` stacks n utterances' steps in the batch ([2n, 8, 165]).

    /path/to/.venv-omnivoice-ref/bin/python scripts/omnivoice_bench_reference.py

`crates/models/benches/omnivoice.rs` times ours on the same shapes; run both in one session.
"""

import os
import time

import torch
from transformers import Qwen3Config

from omnivoice.models.omnivoice import OmniVoice, OmniVoiceConfig

TEXT, FRAMES, CODEBOOKS, AUDIO_VOCAB = 40, 125, 8, 1025


def main() -> None:
    torch.set_num_threads(int(os.environ.get("THREADS", "2")))
    torch.manual_seed(7)
    llm = Qwen3Config(
        vocab_size=151676, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
        num_attention_heads=16, num_key_value_heads=8, head_dim=128, rms_norm_eps=1e-6,
        rope_theta=1e6, max_position_embeddings=4096,
    )
    config = OmniVoiceConfig(
        audio_vocab_size=AUDIO_VOCAB, audio_mask_id=AUDIO_VOCAB - 1,
        num_audio_codebook=CODEBOOKS, llm_config=llm,
    )
    config.llm_config._attn_implementation = "sdpa"
    device = torch.device(os.environ.get("DEVICE", "cpu"))
    dtype = getattr(torch, os.environ.get("DTYPE", "float32"))
    torch.backends.cuda.matmul.allow_tf32 = os.environ.get("TF32") == "1"
    model = OmniVoice(config).eval().to(device=device, dtype=dtype)
    c_len = TEXT + FRAMES
    mask_id = AUDIO_VOCAB - 1
    ids = torch.full((2, CODEBOOKS, c_len), mask_id, dtype=torch.long)
    ids[0, :, :TEXT] = torch.randint(0, 151669, (TEXT,))
    audio = torch.zeros((2, c_len), dtype=torch.bool)
    audio[0, TEXT:] = True
    audio[1, :FRAMES] = True
    attention = torch.zeros((2, 1, c_len, c_len), dtype=torch.bool)
    attention[0, :, :, :] = True
    attention[1, :, :FRAMES, :FRAMES] = True
    pad = torch.arange(FRAMES, c_len)
    attention[1, :, pad, pad] = True
    batch = int(os.environ.get("BATCH", "1"))
    ids, audio = ids.repeat(batch, 1, 1).to(device), audio.repeat(batch, 1).to(device)
    attention = attention.repeat(batch, 1, 1, 1).to(device)
    on_gpu = device.type == "cuda"
    runs = 10 if on_gpu else 3
    times = []
    with torch.no_grad():
        model(input_ids=ids, audio_mask=audio, attention_mask=attention)
        for _ in range(runs):
            if on_gpu:
                torch.cuda.synchronize()
            started = time.perf_counter()
            model(input_ids=ids, audio_mask=audio, attention_mask=attention)
            if on_gpu:
                torch.cuda.synchronize()
            times.append(time.perf_counter() - started)
    where = (f"{torch.cuda.get_device_name()}, {os.environ.get('DTYPE', 'float32')}"
             f"{', TF32' if torch.backends.cuda.matmul.allow_tf32 else ''}"
             if on_gpu else f"{torch.get_num_threads()} threads")
    print(f"official forward, [{2 * batch}, 8, {c_len}] padded, {where}: "
          f"{min(times):.4f} s (best of {runs})")


if __name__ == "__main__":
    main()
