#!/usr/bin/env python3
"""Writes tests/fixtures/cjk/ja.tsv: what misaki 0.9.4's Japanese front end makes of each
sentence of tests/fixtures/cjk/ja-corpus.txt, for tests/japanese_g2p.rs to hold the server's
Japanese G2P (src/text/japanese/) to.

Usage (the venv comes from scripts/cjk-ja-venv.sh):
    .venv-cjk-ja/bin/python scripts/cjk_oracle_ja.py

misaki.ja.JAG2P() is what Kokoro's pipeline builds for its `j` voices; its default path
("cutlet") tags the text with fugashi (MeCab) over UniDic and romanizes the readings. UniDic
comes from unidic-lite here (the `unidic` package downloads its dictionary at first use; this
runs offline). Each line: the sentence, misaki's phonemes, and the Kokoro token ids of those
phonemes (symbols outside Kokoro's vocabulary dropped, as Kokoro's pipeline drops them; the
vocabulary is kokoro-onnx's, tests/fixtures/kokoro/reference.json).
"""

import json
from pathlib import Path


from misaki import ja

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests/fixtures/cjk/ja-corpus.txt"
OUT = ROOT / "tests/fixtures/cjk/ja.tsv"


def main():
    vocab = json.loads((ROOT / "tests/fixtures/kokoro/reference.json").read_text())["vocab"]
    g2p = ja.JAG2P()
    info = g2p.cutlet.tagger.dictionary_info[0]
    assert "unidic_lite" in info["filename"], info
    lines = [
        "# misaki 0.9.4 JAG2P() (cutlet: fugashi 1.5.2 over unidic-lite 1.0.8, %s); "
        "regenerate with scripts/cjk_oracle_ja.py"
        % info["filename"].split("site-packages/")[-1],
        "# text\tphonemes\ttoken ids",
    ]
    for text in CORPUS.read_text(encoding="utf-8").splitlines():
        if not text.strip():
            continue
        phonemes, _ = g2p(text)
        ids = [vocab[c] for c in phonemes if c in vocab]
        assert "\t" not in phonemes and "\n" not in phonemes, phonemes
        lines.append("\t".join([text, phonemes, " ".join(map(str, ids))]))
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {len(lines) - 2} sentences to {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
