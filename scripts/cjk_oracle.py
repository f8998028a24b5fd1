"""Writes the reference phonemes and Kokoro token ids of the CJK corpora, from misaki 0.9.4:
what Kokoro v1.0's own pipeline (hexgrad's KPipeline) feeds the model for each sentence.

    .venv-cjk/bin/python scripts/cjk_oracle.py zh

reads tests/fixtures/cjk/zh-corpus.txt and writes tests/fixtures/cjk/zh.tsv (text, phonemes,
token ids), which tests hold our front end to without Python. Each language is one function
of LANGUAGES; the token ids come from the vocabulary of the kokoro-onnx fixture
(tests/fixtures/kokoro/reference.json), the table both Kokoro pipelines share.
"""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "cjk"


def vocabulary():
    reference = json.loads((ROOT / "tests/fixtures/kokoro/reference.json").read_text())
    return reference["vocab"]


def corpus(language):
    lines = (FIXTURES / f"{language}-corpus.txt").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def mandarin():
    """misaki's Mandarin G2P as Kokoro v1.0 (hexgrad/Kokoro-82M) builds it: no version, so the
    jieba + pypinyin path without the v1.1 front end (that one is Kokoro-82M-v1.1-zh's)."""
    from misaki import zh

    g2p = zh.ZHG2P(version=None)
    return lambda text: g2p(text)[0]


LANGUAGES = {"zh": mandarin}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in LANGUAGES:
        sys.exit(f"usage: cjk_oracle.py {{{','.join(LANGUAGES)}}}")
    language = sys.argv[1]
    phonemize = LANGUAGES[language]()
    vocab = vocabulary()
    rows = []
    for text in corpus(language):
        phonemes = phonemize(text)
        # KModel's tokenizer: symbols outside the vocabulary are dropped.
        ids = [vocab[c] for c in phonemes if c in vocab]
        assert "\t" not in text + phonemes and "\n" not in phonemes, text
        rows.append(f"{text}\t{phonemes}\t{' '.join(map(str, ids))}")
    out = FIXTURES / f"{language}.tsv"
    header = f"# misaki 0.9.4 ({language}); text, phonemes, Kokoro token ids. scripts/cjk_oracle.py\n"
    out.write_text(header + "\n".join(rows) + "\n", encoding="utf-8")
    print(f"{out}: {len(rows)} sentences")


if __name__ == "__main__":
    main()
