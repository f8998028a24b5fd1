#!/usr/bin/env python3
"""Writes tests/fixtures/cjk/ja.tsv: what misaki 0.9.4's Japanese front end makes of each
sentence of tests/fixtures/cjk/ja-corpus.txt, for tests/japanese_g2p.rs to hold the server's
Japanese G2P (src/text/japanese/) to.

Usage (the venv comes from scripts/cjk-ja-venv.sh):
    .venv-cjk-ja/bin/python scripts/cjk_oracle_ja.py
    .venv-cjk-ja/bin/python scripts/cjk_oracle_ja.py --stdin < sentences.txt

With --stdin, misaki's phonemes of each line of stdin go to stdout, one line each (for
tests/japanese_asr.rs, which has kokoro-onnx speak them, and scripts/bench-japanese.sh,
which times them: the time to stderr).

misaki.ja.JAG2P() is what Kokoro's pipeline builds for its `j` voices; its default path
("cutlet") tags the text with fugashi (MeCab) over UniDic and romanizes the readings. UniDic
comes from unidic-lite here (the `unidic` package downloads its dictionary at first use; this
runs offline). Each line: the sentence, misaki's phonemes, and the Kokoro token ids of those
phonemes (symbols outside Kokoro's vocabulary dropped, as Kokoro's pipeline drops them; the
vocabulary is kokoro-onnx's, tests/fixtures/kokoro/reference.json).
"""

import contextlib
import json
import sys
import time
from pathlib import Path

# pyopenjtalk-plus (which misaki's ja.py imports) prints a notice on stdout at import; stdout
# carries only phonemes.
with contextlib.redirect_stdout(sys.stderr):
    from misaki import ja

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests/fixtures/cjk/ja-corpus.txt"
OUT = ROOT / "tests/fixtures/cjk/ja.tsv"
# Passes over the sentences with --stdin; the median pass is reported.
PASSES = 7


def phonemize_stdin():
    g2p = ja.JAG2P()
    texts = [t for t in sys.stdin.read().splitlines() if t.strip()]
    g2p(texts[0])  # warm: the first call loads what the tagger loads lazily
    times = []
    for _ in range(PASSES):
        start = time.perf_counter()
        out = [g2p(t)[0] for t in texts]
        times.append(time.perf_counter() - start)
    for phonemes in out:
        print(phonemes)
    median = sorted(times)[PASSES // 2]
    print(f"misaki: {len(texts)} sentences in {median:.6f} s (median of {PASSES} passes)",
          file=sys.stderr)


def main():
    if "--stdin" in sys.argv[1:]:
        return phonemize_stdin()
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
