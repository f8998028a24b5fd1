"""Writes the pinyin tables of our Mandarin front end (text::mandarin) into OUT_DIR from pypinyin
0.55.0, the dictionary misaki reads Mandarin with (both tables are pypinyin's data, MIT
licensed, from mozillazg's pinyin-data and phrase-pinyin-data):

    .venv-cjk/bin/python scripts/mandarin_dictionary.py OUT_DIR

(scripts/mandarin-assets.sh runs it from the pinned wheel into voices/mandarin; the tables are
installed assets, not committed.)

- characters.tsv: each ideograph of U+4E00..U+9FFF (the only ones misaki reads) and the one
  reading pypinyin gives it alone, in tone-number form (`de5`, `lv4`);
- phrases.tsv: each phrase of pypinyin's phrase table written in those ideographs, with its
  readings when they differ from its characters' own, else nothing: pypinyin still cuts words
  into those phrases (longest match first), so they are kept for the cut.

Every reading is pypinyin's own conversion (lazy_pinyin, TONE3, neutral tone as 5), as misaki
asks for it.
"""

import sys
from pathlib import Path

from pypinyin import Style, lazy_pinyin
from pypinyin.constants import PHRASES_DICT, PINYIN_DICT

HEADER = "# pypinyin 0.55.0 (MIT; data from mozillazg/pinyin-data, phrase-pinyin-data). scripts/mandarin_dictionary.py\n"


def is_ideograph(c):
    return "\u4e00" <= c <= "\u9fff"


def reading(text):
    return lazy_pinyin(text, style=Style.TONE3, neutral_tone_with_five=True)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: mandarin_dictionary.py OUT_DIR")
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    characters = {}
    for code in sorted(PINYIN_DICT):
        c = chr(code)
        if is_ideograph(c):
            characters[c] = reading(c)[0]
    rows = [f"{c}\t{r}" for c, r in characters.items()]
    (out / "characters.tsv").write_text(HEADER + "\n".join(rows) + "\n", encoding="utf-8")

    phrases = []
    for phrase in sorted(PHRASES_DICT):
        if len(phrase) < 2 or not all(is_ideograph(c) for c in phrase):
            continue
        ours = reading(phrase)
        assert len(ours) == len(phrase), phrase
        alone = [characters.get(c, c) for c in phrase]
        phrases.append(f"{phrase}\t{' '.join(ours) if ours != alone else ''}")
    (out / "phrases.tsv").write_text(HEADER + "\n".join(phrases) + "\n", encoding="utf-8")
    print(f"{len(characters)} characters, {len(phrases)} phrases")


if __name__ == "__main__":
    main()
