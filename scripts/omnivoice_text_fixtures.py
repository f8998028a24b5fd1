#!/usr/bin/env python3
"""Fixtures for OmniVoice's text side and its whole `generate`, made by the official code
(omnivoice 0.2.1, transformers 5.24).

Qwen's tokenizer cannot be downloaded here, so this trains a small byte-level BPE with the
structure transformers 5's `Qwen2Tokenizer` gives every Qwen checkpoint (NFC, the Qwen split
regex, byte-level, no post-processor) and OmniVoice's 7 added special tokens, and builds a
tiny end-to-end checkpoint around it (`e2e/`: the network, that tokenizer, and a small codec
at 11025 samples/s and 175 frames/s), loadable by the official
`OmniVoice.from_pretrained`. Then it records what the official code gives for:

- `text.json`: prompt ids (`_prepare_inference_inputs` after `_resolve_language` and
  `_resolve_instruct`), `_resolve_instruct`, `_resolve_language`, `_combine_text`,
  `chunk_text_punctuation`;
- `cross_fade.safetensors`: `cross_fade_chunks` on random chunks;
- `e2e.safetensors`: `OmniVoice.generate` with both temperatures 0 (deterministic) on a batch
  of a voice-design item, an auto item and a long item that is chunked.

It also writes the language table the Rust side embeds
(`crates/models/src/omnivoice/languages.tsv`, from `omnivoice.utils.lang_map`).

    .venv-omnivoice-ref/bin/python scripts/omnivoice_text_fixtures.py
"""

import json
import os
import re
import sys

import numpy as np
import torch
from safetensors.torch import save_file

ROOT = os.path.join(os.path.dirname(__file__), "..")
OUT = os.path.join(ROOT, "crates", "models", "tests", "fixtures", "omnivoice")
E2E = os.path.join(OUT, "e2e")

SPECIALS = [
    "<|denoise|>",
    "<|lang_start|>",
    "<|lang_end|>",
    "<|instruct_start|>",
    "<|instruct_end|>",
    "<|text_start|>",
    "<|text_end|>",
]
# What transformers 5's Qwen2Tokenizer splits with (tokenization_qwen2.py).
QWEN_SPLIT = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

CORPUS = [
    "Hello world. Nice to meet you. How are you today?",
    "The quick brown fox jumps over the lazy dog, again and again!",
    "I'm sure they'll say it's fine; we've done this before.",
    "Mr. Smith went to Washington on Jan. 5th, 2024 at 10:45 a.m.",
    "Bonjour à tous, ça va très bien. Merci beaucoup!",
    "Guten Tag, wie geht es Ihnen? Schön, Sie zu sehen.",
    "Привет, как дела? Всё хорошо, спасибо.",
    "你好，世界。今天天气很好，我们去公园散步吧！",
    "こんにちは世界。お元気ですか？",
    "안녕하세요 세계",
    "مرحبا بالعالم",
    "[laughter] That was funny. [sigh] Oh well. [question-en] Really?",
    "male, female, young adult, elderly, high pitch, whisper, british accent",
    "男，女，青年，老年，高音调，耳语，四川话",
    "English Chinese French German Japanese en zh fr de ja None",
]


def tokenizer_files() -> None:
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=420,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS * 3, trainer)
    tok.add_special_tokens(SPECIALS)
    os.makedirs(E2E, exist_ok=True)
    tok.save(os.path.join(E2E, "tokenizer.json"))
    with open(os.path.join(E2E, "tokenizer_config.json"), "w") as f:
        json.dump(
            {
                "tokenizer_class": "Qwen2Tokenizer",
                "eos_token": "<|endoftext|>",
                "pad_token": "<|endoftext|>",
                "unk_token": None,
                "bos_token": None,
                "add_prefix_space": False,
                "model_max_length": 32768,
                "extra_special_tokens": SPECIALS,
            },
            f,
            indent=2,
        )
    print(f"tokenizer: {tok.get_vocab_size()} ids", file=sys.stderr)


def checkpoint() -> None:
    """The tiny network of `omnivoice_fixtures.py` with this tokenizer's vocabulary, and a tiny
    codec at 11025 samples/s with hop 63 (175 frames/s). Not the release's 24 kHz and 25 frames/s
    (ratios [8, 5, 4, 2, 3] would make the audio too long for a fixture) but not below 11025
    either: the official `remove_silence` joins its pieces onto `AudioSegment.silent(0)`, which
    is 11025 Hz, and pydub resamples everything slower up to that."""
    from tokenizers import Tokenizer
    from transformers import DacFeatureExtractor, HiggsAudioV2TokenizerConfig, HiggsAudioV2TokenizerModel, Qwen3Config

    from omnivoice.models.omnivoice import OmniVoice, OmniVoiceConfig

    vocab = Tokenizer.from_file(os.path.join(E2E, "tokenizer.json")).get_vocab_size()
    torch.manual_seed(20261205)
    llm = Qwen3Config(
        vocab_size=vocab, hidden_size=32, intermediate_size=72, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=12, max_position_embeddings=512,
        rms_norm_eps=1e-6, rope_theta=1e6, tie_word_embeddings=False, attention_bias=False,
    )
    config = OmniVoiceConfig(audio_vocab_size=17, audio_mask_id=16, num_audio_codebook=8, llm_config=llm)
    config.llm_config._attn_implementation = "sdpa"
    model = OmniVoice(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) / p.shape[-1] ** 0.5)
    model.save_pretrained(E2E, safe_serialization=True)

    rate = 11025
    codec_config = HiggsAudioV2TokenizerConfig(
        sample_rate=rate,
        codebook_size=16,
        codebook_dim=6,
        # 8 quantizers: 1000 · 5.7 // (175 frames/s · 4 bits).
        target_bandwidths=[2.8, 5.7],
        acoustic_model_config=dict(
            encoder_hidden_size=4, downsampling_ratios=[7, 9], decoder_hidden_size=24,
            upsampling_ratios=[7, 9], hidden_size=10,
        ),
        semantic_model_config=dict(
            hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16,
            conv_dim=[8, 8], conv_stride=[5, 2], conv_kernel=[10, 3], num_conv_pos_embeddings=4,
            num_conv_pos_embedding_groups=2,
        ),
        downsample_factor=1,
    )
    assert codec_config.frame_rate == 175 and codec_config.num_quantizers == 8
    codec = HiggsAudioV2TokenizerModel(codec_config).eval()
    with torch.no_grad():
        for name, p in codec.named_parameters():
            if name.endswith("alpha"):
                p.copy_(0.5 + torch.rand_like(p))
            else:
                p.copy_(torch.randn_like(p) / max(p.shape[-1], 1) ** 0.5)
        for q in codec.quantizer.quantizers:
            q.codebook.embed.copy_(torch.randn_like(q.codebook.embed))
        codes = torch.randint(0, 16, (1, 8, 40))
        peak = codec.decode(codes).audio_values.abs().max()
        last = codec.acoustic_decoder.conv2
        last.weight.mul_(0.5 / peak)
        last.bias.mul_(0.5 / peak)
    audio_dir = os.path.join(E2E, "audio_tokenizer")
    codec.save_pretrained(audio_dir, safe_serialization=True)
    DacFeatureExtractor(sampling_rate=rate, hop_length=63).save_pretrained(audio_dir)


def load_official():
    from omnivoice.models.omnivoice import OmniVoice

    model = OmniVoice.from_pretrained(E2E, dtype=torch.float32).eval()
    assert model.sampling_rate == 11025, model.sampling_rate
    assert model.audio_tokenizer.config.frame_rate == 175
    return model


def check_tokenizer_files(model) -> None:
    """The tokenizer transformers builds (Qwen2Tokenizer from vocab and merges) and the file as
    it stands must agree, or the Rust side (which reads the file) checks the wrong thing."""
    from tokenizers import Tokenizer

    raw = Tokenizer.from_file(os.path.join(E2E, "tokenizer.json"))
    for text in CORPUS + ["<|lang_start|>en<|lang_end|>", "  two  spaces\n\nand\tnew lines ", "é e\u0301"]:
        ours = raw.encode(text).ids
        theirs = model.text_tokenizer(text).input_ids
        assert ours == theirs, (text, ours, theirs)


INSTRUCTS = [
    "male", "Female", "  male , young adult ", "male, british accent", "female,british accent",
    "male，young adult", "男", "男，青年", "女, 四川话", "male, 河南话", "女, british accent",
    "MALE, HIGH PITCH", "very low pitch", "very high pitch, whisper", "middle-aged, female",
    "teenager", "child, low pitch", "elderly, moderate pitch, whisper", "耳语，老年",
    "极低音调", "中年，女，极高音调", "东北话", "石家庄话，男", ",male,", "，，女，，",
    "male,,female", "male, female", "男，male", "child, elderly", "高音调, low pitch",
    "四川话, 河南话", "british accent, american accent", "四川话, british accent",
    "mal", "femal", "britsh accent", "whisperr", "河南", "old", "young", "male, yuong adult",
    "hight pitch", "indian", "accent", "xyz", "男人", "四川", "male, qqq, femail",
    "Whisper", "american  accent", "Japanese Accent", "korean accent, female, child",
    "portuguese accent, male", "russian accent, elderly, very low pitch", "canadian accent",
    "australian accent, whisper", "chinese accent", "宁夏话，老年", "甘肃话", "青岛话，女，耳语",
    "", "   ", "，", "male\tfemale", "young adult female",
]

LANGUAGES = [
    None, "None", "none", "NONE", "en", "EN", "English", "english", "ENGLISH", "zh", "Chinese",
    "ja", "japanese", "fr", "French", "de", "German", "yue", "Cantonese", "klingon", "eng", "",
    "aja (benin)", "Aja (Benin)", "arbëreshë albanian", "ömie", "Zulu", "xx", "sq", "Albanian",
    "abkhazian", "kbt", " en", "en ",
]

CHUNKS = [
    ("Hello world. This is a test. Another sentence here!", 20, 3),
    ("Hello world. This is a test. Another sentence here!", 5, 3),
    ("Mr. Smith met Dr. Jones at St. Paul's. They talked.", 20, 3),
    ("No. 5 is e.g. the best, i.e. the one. Yes.", 10, 3),
    ("你好，世界。今天天气很好！我们去公园吧？好的。", 8, 3),
    ("A. B. C. D. E.", 3, 3),
    ("He said \"wow!\" and left.) Then (nothing) happened...", 12, 3),
    ("Short. Then a much longer sentence that goes on and on without end, and more.", 15, 3),
    ("no punctuation at all in this text whatsoever", 10, 3),
    ("", 10, 3),
    ("   ...   ", 10, 3),
    ("Hi. Hello there, my friend; how are you: fine!", 6, 3),
    ("Hi. Hello there, my friend; how are you: fine!", 6, None),
    ("Hi. Hello there, my friend; how are you: fine!", 6, 10),
    ("“Quoted.” ‘Single.’ 「Japanese」 【Brackets】 》end《", 8, 3),
    ("One! Two? Three. Four; Five: Six, Seven.", 1, 2),
    ("Etc. Vs. vs. approx. fig. def. Sept. Sep.", 10, 3),
    ("[laughter] Oh. [sigh] Well, that's it.", 12, 3),
    ("Line one.\nLine two.\n\nLine three!", 10, 3),
    ("Α. Β. Γ. Ω.", 4, 3),
    ("x.", 1, 3),
    ("a, b, c, d, e, f, g, h", 4, 5),
]

PROMPTS = [
    # (text, lang, instruct, ref_text, ref_frames, denoise, frames)
    ("Hello world.", None, None, None, 0, True, 5),
    ("Hello world.", "en", None, None, 0, True, 5),
    ("Hello world.", "English", "male, british accent", None, 0, True, 5),
    ("你好，世界。", "Chinese", "female, young adult", None, 0, True, 4),
    ("你好 世界 ok 好", "zh", "男", None, 0, True, 3),
    ("Bonjour à tous.", "fr", "female, whisper", None, 0, True, 6),
    ("[laughter] That was funny. [sigh] Oh well.", "en", None, None, 0, True, 7),
    ("好[laughter]笑[question-en]", None, "女，四川话", None, 0, True, 3),
    ("[laugh] not a tag [Laughter]", None, None, None, 0, True, 2),
    ("Line one.\nLine two.\r\n\tand\ttabs   here", "en", None, None, 0, True, 4),
    ("（括号） and （more）", None, None, None, 0, True, 2),
    ("  padded  ", None, "elderly", "Nice to meet you.", 3, True, 5),
    ("After the reference.", "en", None, "你好 世界", 2, True, 4),
    ("After the reference.", "en", None, "Ref text.", 3, False, 4),
    ("<|text_end|> inside", None, None, None, 0, True, 2),
    ("", None, None, None, 0, True, 1),
    ("[laughter]", None, None, None, 0, True, 2),
    ("I'm sure they'll say it's fine; 2024!", "English", "very high pitch", None, 0, True, 3),
]


def text_fixtures(model) -> None:
    import omnivoice.models.omnivoice as ov
    from omnivoice.utils.lang_map import LANG_NAME_TO_ID
    from omnivoice.utils.text import chunk_text_punctuation
    from omnivoice.utils.voice_design import _ZH_RE

    with open(os.path.join(ROOT, "crates", "models", "src", "omnivoice", "languages.tsv"), "w") as f:
        f.write("# omnivoice 0.2.1 utils/lang_map.py LANG_NAME_TO_ID: lowercase name, tab, id\n")
        for name, lang in sorted(LANG_NAME_TO_ID.items()):
            assert "\t" not in name and "\n" not in name
            f.write(f"{name}\t{lang}\n")

    instructs = []
    line = re.compile(r"^  '(.*)' -> '(.*)' \(unsupported(?:; did you mean '(.*)'\?)?\)$")
    for text in INSTRUCTS:
        for use_zh in (False, True):
            case = {"instruct": text, "use_zh": use_zh}
            try:
                case["result"] = ov._resolve_instruct(text, use_zh=use_zh)
            except ValueError as e:
                message = str(e)
                if message.startswith("Unsupported"):
                    items = [list(m.groups()) for m in map(line.match, message.split("\n")) if m]
                    assert items, message
                    case["unknown"] = items
                elif message.startswith("Cannot mix"):
                    case["error"] = "dialect_and_accent"
                else:
                    assert message.startswith("Conflicting"), message
                    case["conflicts"] = [
                        re.findall(r"'([^']*)'", group) for group in message.split(": ", 1)[1].split(". Each")[0].split("; ")
                    ]
            instructs.append(case)

    languages = [{"language": lang, "result": ov._resolve_language(lang)} for lang in LANGUAGES]

    chunks = [
        {"text": t, "chunk_len": n, "min_chunk_len": m, "chunks": chunk_text_punctuation(t, n, m)}
        for t, n, m in CHUNKS
    ]

    combine = []
    for text, ref in [("a  b", None), (" 你 好 ", "ref  text "), ("x\r\ny", "中 文"), ("（a）\t\tb", ""),
                      ("end 中", None), ("中\u3000文 a\u00a0中", None), ("a \n b", None)]:
        combine.append({"text": text, "ref_text": ref, "result": ov._combine_text(text, ref_text=ref)})

    prompts = []
    gen = torch.Generator().manual_seed(5)
    for text, lang, instruct, ref_text, ref_frames, denoise, frames in PROMPTS:
        lang_id = ov._resolve_language(lang)
        use_zh = bool(text and _ZH_RE.search(text))
        resolved = ov._resolve_instruct(instruct, use_zh=use_zh)
        ref = torch.randint(0, 16, (8, ref_frames), generator=gen) if ref_frames else None
        inputs = model._prepare_inference_inputs(text, frames, ref_text, ref, lang_id, resolved, denoise)
        prompts.append({
            "text": text, "language": lang, "instruct": instruct, "ref_text": ref_text,
            "ref_frames": ref.tolist() if ref is not None else None, "denoise": denoise,
            "frames": frames, "ids": inputs["input_ids"][0].tolist(),
            "audio": inputs["audio_mask"][0].to(torch.int64).tolist(),
        })

    with open(os.path.join(OUT, "text.json"), "w", encoding="utf-8") as f:
        json.dump({"made_by": "scripts/omnivoice_text_fixtures.py", "instructs": instructs,
                   "languages": languages, "chunks": chunks, "combine": combine, "prompts": prompts},
                  f, ensure_ascii=False, indent=0)
    print(f"text: {len(instructs)} instructs, {len(languages)} languages, {len(chunks)} chunkings, "
          f"{len(prompts)} prompts", file=sys.stderr)


def cross_fade() -> None:
    from omnivoice.utils.audio import cross_fade_chunks

    rng = np.random.default_rng(20261206)
    tensors = {}
    for case, (rate, lengths) in enumerate([(150, [40, 33, 60]), (100, [5, 50]), (24000, [2500, 2600]),
                                            (150, [20]), (150, [10, 1, 30])]):
        chunks = [rng.standard_normal((1, n)).astype(np.float32) for n in lengths]
        out = cross_fade_chunks([c.copy() for c in chunks], rate)
        for i, c in enumerate(chunks):
            tensors[f"case{case}_chunk{i}"] = torch.from_numpy(c[0].copy())
        tensors[f"case{case}_out"] = torch.from_numpy(np.asarray(out[0], dtype=np.float32).copy())
        tensors[f"case{case}_rate"] = torch.tensor([rate], dtype=torch.int64)
    save_file(tensors, os.path.join(OUT, "cross_fade.safetensors"),
              metadata={"made_by": "scripts/omnivoice_text_fixtures.py"})


E2E_ITEMS = [
    # text, language, instruct
    ("Hello there, nice to meet you.", "English", "female, british accent"),
    ("你好，今天天气很好。", None, None),
    ("The first sentence is short. Then a second one comes along, and a third follows it! "
     "At last the fourth closes the text.", "en", "male, low pitch"),
]
E2E_CONFIG = dict(num_step=6, position_temperature=0.0, class_temperature=0.0,
                  audio_chunk_threshold=0.5, audio_chunk_duration=0.25)


def end_to_end(model) -> None:
    from omnivoice.models.omnivoice import OmniVoiceGenerationConfig

    config = OmniVoiceGenerationConfig(**E2E_CONFIG)
    texts = [t for t, _, _ in E2E_ITEMS]
    langs = [l for _, l, _ in E2E_ITEMS]
    instructs = [i for _, _, i in E2E_ITEMS]
    audios = model.generate(text=texts, language=langs, instruct=instructs, generation_config=config)
    tensors = {f"audio_{i}": torch.from_numpy(np.asarray(a, dtype=np.float32).copy()) for i, a in enumerate(audios)}
    # One item alone at a fixed duration, with speed (ignored under a duration) and no denoise.
    alone = model.generate(text="Just one item.", language="de", duration=0.4, speed=1.5,
                           generation_config=OmniVoiceGenerationConfig(**E2E_CONFIG, denoise=False,
                                                                       postprocess_output=False))
    tensors["audio_duration"] = torch.from_numpy(np.asarray(alone[0], dtype=np.float32).copy())
    save_file(tensors, os.path.join(OUT, "e2e.safetensors"), metadata={
        "made_by": "scripts/omnivoice_text_fixtures.py",
        "items": json.dumps(E2E_ITEMS, ensure_ascii=False),
        "config": json.dumps(E2E_CONFIG),
    })
    print(f"e2e: {[a.shape for a in audios]} + {alone[0].shape}", file=sys.stderr)


def main() -> None:
    tokenizer_files()
    checkpoint()
    model = load_official()
    check_tokenizer_files(model)
    text_fixtures(model)
    cross_fade()
    end_to_end(model)


if __name__ == "__main__":
    main()
