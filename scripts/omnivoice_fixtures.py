#!/usr/bin/env python3
"""Fixtures for the OmniVoice port, made by the official code (omnivoice 0.2.1).

The real checkpoint cannot be reached from these machines, so the port is checked the way
candle's own ports are: against the official model at a small configuration with seeded random
weights. This writes crates/models/tests/fixtures/omnivoice/tiny/ as users have a checkpoint directory
(`config.json` and `model.safetensors`, by the official `save_pretrained`), and
`forward.safetensors`: one classifier-free-guidance batch built exactly as
`OmniVoice._generate_iterative` builds it (conditional rows, then unconditional rows that hold
only the target frames, padded, with its 4-D boolean mask), and the audio logits the official
`OmniVoice.forward` gives for it. Beside them, `tiny/audio_tokenizer/` is a small Higgs-Audio-v2
codec (transformers' `HiggsAudioV2TokenizerModel`, the class OmniVoice decodes with) and
`decode.safetensors` some codes with the audio its `decode` gives.

    scripts/omnivoice-ref-venv.sh
    .venv-omnivoice-ref/bin/python scripts/omnivoice_fixtures.py
"""

import os
import sys

import torch
from safetensors.torch import save_file
from transformers import HiggsAudioV2TokenizerConfig, HiggsAudioV2TokenizerModel, Qwen3Config

from omnivoice.models.omnivoice import OmniVoice, OmniVoiceConfig

OUT = os.path.join(os.path.dirname(__file__), "..", "crates", "models", "tests", "fixtures", "omnivoice")

# Small, but every size distinct, so that a transposed or mixed-up weight cannot pass: GQA
# (4 query heads on 2 KV heads), head_dim apart from hidden / heads, a text vocabulary larger
# than the audio mask id (the text embedding is also looked up at audio positions).
AUDIO_VOCAB = 33  # ids 0..31 and the mask id 32
CODEBOOKS = 8
LLM = dict(
    vocab_size=80,
    hidden_size=32,
    intermediate_size=72,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=12,
    max_position_embeddings=256,
    rms_norm_eps=1e-6,
    rope_theta=1e6,
    tie_word_embeddings=False,
    attention_bias=False,
)


def main() -> None:
    torch.manual_seed(20261202)
    llm = Qwen3Config(**LLM)
    config = OmniVoiceConfig(
        audio_vocab_size=AUDIO_VOCAB,
        audio_mask_id=AUDIO_VOCAB - 1,
        num_audio_codebook=CODEBOOKS,
        llm_config=llm,
    )
    config.llm_config._attn_implementation = "sdpa"
    model = OmniVoice(config).eval()
    # transformers' init (std 0.02) leaves the logits tiny: widen every weight so that the
    # products, the norms and the attention all matter to the result.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) / p.shape[-1] ** 0.5)
    tiny = os.path.join(OUT, "tiny")
    model.save_pretrained(tiny, safe_serialization=True)

    # Two items, as _generate_iterative batches them: c_len positions (text, then T masked or
    # partly decoded audio frames) conditional, the last T of them unconditional.
    mask_id = AUDIO_VOCAB - 1
    items = [(13, 5), (9, 4)]  # (c_len, target frames)
    b = len(items)
    max_len = max(c for c, _ in items)
    ids = torch.full((2 * b, CODEBOOKS, max_len), mask_id, dtype=torch.long)
    audio = torch.zeros((2 * b, max_len), dtype=torch.bool)
    attention = torch.zeros((2 * b, 1, max_len, max_len), dtype=torch.bool)
    for i, (c_len, t_len) in enumerate(items):
        row = torch.full((CODEBOOKS, c_len), mask_id, dtype=torch.long)
        text = c_len - t_len
        row[:, :text] = torch.randint(0, LLM["vocab_size"], (text,))
        # Some frames already decoded, the rest still masked.
        frames = torch.randint(0, AUDIO_VOCAB - 1, (CODEBOOKS, t_len))
        keep = torch.rand(CODEBOOKS, t_len) < 0.5
        row[:, text:] = torch.where(keep, frames, torch.full_like(frames, mask_id))
        row_audio = torch.zeros(c_len, dtype=torch.bool)
        row_audio[text:] = True
        ids[i, :, :c_len] = row
        audio[i, :c_len] = row_audio
        attention[i, :, :c_len, :c_len] = True
        ids[b + i, :, :t_len] = row[:, -t_len:]
        audio[b + i, :t_len] = row_audio[-t_len:]
        attention[b + i, :, :t_len, :t_len] = True
        if max_len > t_len:
            pad = torch.arange(t_len, max_len)
            attention[b + i, :, pad, pad] = True
    with torch.no_grad():
        logits = model(input_ids=ids, audio_mask=audio, attention_mask=attention).logits
    lengths = [c for c, _ in items] + [t for _, t in items]
    save_file(
        {
            # [2B, C, L] ids, [2B, L] audio positions, [2B] valid lengths, as batched.
            "input_ids": ids.to(torch.int64).contiguous(),
            "audio_mask": audio.to(torch.uint8).contiguous(),
            "lengths": torch.tensor(lengths, dtype=torch.int64),
            # [2B, C, L, V]: valid up to each row's length.
            "logits": logits.to(torch.float32).contiguous(),
        },
        os.path.join(OUT, "forward.safetensors"),
        metadata={
            "made_by": "scripts/omnivoice_fixtures.py",
            "omnivoice": "0.2.1",
            "torch": torch.__version__,
        },
    )
    print(f"wrote {tiny} and forward.safetensors; logits {tuple(logits.shape)}", file=sys.stderr)
    generation(model, ids, audio, items)
    post_processing(model)
    durations()
    codec(tiny)


def generation(model, ids, audio, items) -> None:
    """The official decoding loop (`_generate_iterative`) on the same two prompts, all target
    frames masked, with both temperatures 0: deterministic, so the frames must match exactly.
    The prompts are handed to the loop as `_prepare_inference_inputs` would (its tokenizer is
    not what is checked here)."""
    from types import SimpleNamespace

    from omnivoice.models.omnivoice import OmniVoiceGenerationConfig

    mask_id = model.config.audio_mask_id
    prompts = []
    for i, (c_len, t_len) in enumerate(items):
        row = ids[i, :, :c_len].clone()
        row[:, c_len - t_len :] = mask_id
        prompts.append({"input_ids": row.unsqueeze(0), "audio_mask": audio[i : i + 1, :c_len]})
    model._prepare_inference_inputs = lambda *args, **kwargs: prompts.pop(0)
    task = SimpleNamespace(
        batch_size=len(items),
        texts=["a", "b"],
        target_lens=[t for _, t in items],
        ref_texts=[None, None],
        ref_audio_tokens=[None, None],
        langs=[None, None],
        instructs=[None, None],
    )
    config = OmniVoiceGenerationConfig(num_step=6, position_temperature=0.0, class_temperature=0.0)
    with torch.no_grad():
        frames = model._generate_iterative(task, config)
    tensors = {f"frames_{i}": f.to(torch.int64).contiguous() for i, f in enumerate(frames)}
    for i, (c_len, t_len) in enumerate(items):
        row = ids[i, :, :c_len].clone()
        row[:, c_len - t_len :] = mask_id
        tensors[f"prompt_{i}"] = row.to(torch.int64).contiguous()
        tensors[f"prompt_audio_{i}"] = audio[i, :c_len].to(torch.uint8).contiguous()
    save_file(
        tensors,
        os.path.join(OUT, "generate.safetensors"),
        metadata={
            "made_by": "scripts/omnivoice_fixtures.py",
            "num_step": "6",
            "guidance_scale": str(config.guidance_scale),
            "t_shift": str(config.t_shift),
            "layer_penalty_factor": str(config.layer_penalty_factor),
        },
    )
    print(f"generation: frames {[tuple(f.shape) for f in frames]}", file=sys.stderr)


def post_processing(model) -> None:
    """The official `_post_process_audio` (pydub's silence trimming, the level, fades and
    padding) on a signal of tone bursts and pauses of several lengths, with a faint noise floor
    and a length that is no whole number of milliseconds."""
    import numpy as np

    from omnivoice.models.omnivoice import OmniVoiceGenerationConfig

    rate = 24000
    model.sampling_rate = rate
    # Short pieces, so that the fixture stays about 1 MB.
    rng = np.random.default_rng(20261204)
    parts = []
    for kind, ms in [("quiet", 230), ("tone", 300), ("quiet", 640), ("tone", 150),
                     ("quiet", 250), ("tone", 200), ("quiet", 1050), ("tone", 90),
                     ("quiet", 310)]:
        n = rate * ms // 1000
        t = np.arange(n) / rate
        if kind == "tone":
            envelope = np.sin(np.pi * np.arange(n) / n)
            parts.append(0.3 * envelope * np.sin(2 * np.pi * (180 + ms) * t))
        else:
            parts.append(10 ** (-70 / 20) * rng.standard_normal(n))
    signal = np.concatenate(parts + [np.zeros(13)]).astype(np.float32)
    tensors = {"input": torch.from_numpy(signal.copy())}
    cases = {
        "peak": (None, True),
        "quiet_reference": (0.05, True),
        "untrimmed": (0.5, False),
    }
    for name, (ref_rms, trim) in cases.items():
        config = OmniVoiceGenerationConfig(postprocess_output=trim)
        out = model._post_process_audio(signal[np.newaxis, :].copy(), ref_rms=ref_rms, gen_config=config)
        tensors[name] = torch.from_numpy(np.asarray(out[0], dtype=np.float32).copy())
        print(f"post {name}: {signal.shape[0]} -> {out.shape[-1]} samples", file=sys.stderr)
    # Cut inside a tone, no whole number of milliseconds: pydub's slice to the end then reaches
    # past the samples and fills the rest of the last millisecond with silence.
    cut = signal[: rate * 1300 // 1000 + 13].copy()
    tensors["cut_input"] = torch.from_numpy(cut.copy())
    out = model._post_process_audio(cut[np.newaxis, :].copy(), ref_rms=None, gen_config=OmniVoiceGenerationConfig())
    tensors["cut"] = torch.from_numpy(np.asarray(out[0], dtype=np.float32).copy())
    print(f"post cut: {cut.shape[0]} -> {out.shape[-1]} samples", file=sys.stderr)
    save_file(tensors, os.path.join(OUT, "post.safetensors"), metadata={"made_by": "scripts/omnivoice_fixtures.py"})


def durations() -> None:
    """The official rule-based duration estimate (`RuleDurationEstimator`, through
    `_estimate_target_tokens`) for texts in many scripts, with and without a reference."""
    import json

    from omnivoice.models.omnivoice import OmniVoice as Official
    from omnivoice.utils.duration import RuleDurationEstimator

    texts = [
        "Hello world.", "Nice to meet you.", "The 3 quick foxes, at 10:45!", "",
        "   ", "Ça va? Très bien — merci.", "Привет, как дела?", "Γειά σου κόσμε",
        "Բարև աշխարհ", "שלום עולם", "مرحبا بالعالم", "مـــرحبا", "नमस्ते दुनिया",
        "হ্যালো বিশ্ব", "வணக்கம் உலகம்", "สวัสดีชาวโลก", "ສະບາຍດີ", "မင်္ဂလာပါ",
        "სალამი მსოფლიო", "안녕하세요 세계", "こんにちは世界", "カタカナ", "你好，世界。",
        "ሰላም ልዑል", "ꆈꌠꁱꂷ", "ᏣᎳᎩ", "Xin chào thế giới", "e\u0301te\u0301",
        "𠀀𠀁𠀂", "🙂👍 ok", "½ ² ٣ ૫", "\t\nnew\u00a0line", "ꦲꦏ꧀ꦱꦫ", "ᠮᠣᠩᠭᠣᠯ",
        "Ⅻ chapters", "ＡＢＣ full width", "A" * 120,
    ]
    estimator = RuleDurationEstimator()
    stub = type("Stub", (), {"duration_estimator": estimator})()
    cases = []
    for text in texts:
        for ref_text, ref_tokens, speed in [(None, None, 1.0), (None, None, 1.3),
                                            ("Bonjour à tous.", 40, 1.0), ("你好", 12, 0.8)]:
            cases.append({
                "text": text, "ref_text": ref_text, "ref_tokens": ref_tokens, "speed": speed,
                "weight": estimator.calculate_total_weight(text),
                "tokens": Official._estimate_target_tokens(stub, text, ref_text, ref_tokens, speed),
            })
    with open(os.path.join(OUT, "durations.json"), "w", encoding="utf-8") as f:
        json.dump({"made_by": "scripts/omnivoice_fixtures.py", "cases": cases}, f,
                  ensure_ascii=False, indent=0)
    print(f"durations: {len(cases)} cases", file=sys.stderr)


def codec(tiny: str) -> None:
    """A small codec of the released shape: 8 quantizers, odd and even upsampling ratios (the
    output padding differs), weight norm on every convolution as the release has it."""
    torch.manual_seed(20261203)
    config = HiggsAudioV2TokenizerConfig(
        sample_rate=24000,
        codebook_size=16,
        codebook_dim=6,
        # 8 quantizers: 1000 · 128 // (frame rate 4000 · 4 bits).
        target_bandwidths=[64, 128],
        acoustic_model_config=dict(
            encoder_hidden_size=4,
            downsampling_ratios=[2, 3],
            decoder_hidden_size=24,
            upsampling_ratios=[3, 2],
            hidden_size=10,
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
        downsample_factor=1,
    )
    model = HiggsAudioV2TokenizerModel(config).eval()
    assert config.num_quantizers == 8, config.num_quantizers
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("alpha"):
                p.copy_(0.5 + torch.rand_like(p))
            elif "original0" in name:  # weight norm's magnitude
                p.copy_(0.5 + 0.5 * torch.rand_like(p))
            else:
                p.copy_(torch.randn_like(p) / max(p.shape[-1], 1) ** 0.5)
        for q in model.quantizer.quantizers:
            q.codebook.embed.copy_(torch.randn_like(q.codebook.embed))
    frames = 7
    codes = torch.randint(0, config.codebook_size, (1, 8, frames))
    with torch.no_grad():
        # A random decoder grows its signal through every block: scale the last convolution
        # (weight and bias) so that the output peaks at 0.5.
        peak = model.decode(codes).audio_values.abs().max()
        last = model.acoustic_decoder.conv2
        weight = last.parametrizations.weight.original0 if hasattr(last, "parametrizations") else last.weight
        weight.mul_(0.5 / peak)
        last.bias.mul_(0.5 / peak)
        audio = model.decode(codes).audio_values
    model.save_pretrained(os.path.join(tiny, "audio_tokenizer"), safe_serialization=True)
    # The same codec with weight norm on every convolution (torch's parametrizations), the
    # layout a training checkpoint has: the same audio from magnitude and direction.
    model.apply_weight_norm()
    with torch.no_grad():
        normed = model.decode(codes).audio_values
    assert torch.allclose(normed, audio, atol=1e-6), (normed - audio).abs().max()
    model.save_pretrained(os.path.join(OUT, "codec_weight_norm"), safe_serialization=True)
    save_file(
        {
            "audio_codes": codes[0].to(torch.int64).contiguous(),  # [8, T]
            "audio": audio[0, 0].to(torch.float32).contiguous(),  # [T · hop]
        },
        os.path.join(OUT, "decode.safetensors"),
        metadata={"made_by": "scripts/omnivoice_fixtures.py", "torch": torch.__version__},
    )
    print(f"codec: {frames} frames -> {audio.shape[-1]} samples, peak {audio.abs().max():.3f}", file=sys.stderr)


if __name__ == "__main__":
    main()
