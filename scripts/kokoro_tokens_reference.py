#!/usr/bin/env python3
"""Writes tests/fixtures/kokoro/reference.json: what the official Kokoro front ends make of
text, for the unit tests of src/engine/kokoro/ to compare against (and three small numpy
files beside it for the voice pack reader).

Usage (the venv comes from scripts/kokoro-ref-venv.sh):
    .venv-kokoro-ref/bin/python scripts/kokoro_tokens_reference.py

Three references, each computed by the packages themselves:
- `vocab`: kokoro-onnx's symbol table (its config.json).
- `mapping`: misaki's espeak-to-misaki rewriting (EspeakFallback for English, EspeakG2P for
  the other espeak languages) applied to given espeak strings. misaki only rewrites what its
  espeak backend returns, so the backend is replaced by one that returns the input: the
  rewrite itself, entry by entry, without espeak in the way.
- `sentences`: whole texts through kokoro-onnx's Tokenizer (phonemes and ids) and through
  misaki's espeak G2P (phonemes), each with the system's libespeak-ng (the one the server
  links) and with the espeak-ng 1.52 that espeakng-loader bundles (kept where it differs).
  Both front ends hand the text to phonemizer, which phonemizes the pieces between punctuation
  marks one by one; the server does the same except that a '.', ',' or ':' between two digits
  is no mark ("3.14", "5,000", "10:30" are read as numbers, not cut in two). The `whole_numbers`
  variants are the same front ends with phonemizer's mark pattern changed that way, so the
  server's output can be checked exactly on such text too.
"""

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

SYSTEM_LIBRARY = "/usr/lib/x86_64-linux-gnu/libespeak-ng.so.1"
SYSTEM_DATA = "/usr/lib/x86_64-linux-gnu/espeak-ng-data"

# phonemizer's default marks with '.', ',' and ':' kept out of the mark class when a digit is
# on both sides.
WHOLE_NUMBERS_MARKS = re.compile(
    r'(\s*(?:[;!?¡¿—…"«»“”(){}\[\]]|(?<!\d)[.,:]|[.,:](?!\d))+\s*)+'
)

SENTENCES = {
    "en-us": [
        "Hello world. This is a test.",
        "I don't think we'll make it; it's already half past ten.",
        'She said, "Wait!" — then left… Why?',
        "The year 1999 had 365 days, and 42 was the answer.",
        "It costs $20, or about 15 euros.",
        "Can't, won't, shouldn't've: contractions everywhere!",
        "(Parentheses) and “curly quotes” are kept.",
        "Dr. Smith lives at 221B Baker Street.",
        "Numbers like 3.14 and 5,000 are read whole, at 10:30.",
        "The little nation's butter, along with a nutshell, is here; go home!",
    ],
    "en-gb": [
        "Hello world. This is a test.",
        "The air is here; go home, and don't be late!",
        "Colour, theatre and 2,500 litres of water.",
    ],
    "es": [
        "¡Hola! ¿Qué tal? Tengo 3,5 kilos de (buenas) naranjas.",
        "El niño comió «churros» y chocolate.",
    ],
    "fr-fr": [
        "Bonjour, un bon vin blanc. J'ai 25 ans !",
        "« Où est-il ? » demanda-t-elle.",
    ],
    "hi": ["नमस्ते दुनिया, आप कैसे हैं?", "मेरे पास 12 किताबें हैं।"],
    "it": ["Ciao, come stai? Ho 7 gatti e un cane.", "Perché no? È già tardi."],
    "pt-br": [
        "Não sei, coração. Mãe, irmã e avô!",
        "São 10:30 e custa 2,50 reais.",
    ],
}

# espeak strings in misaki's notation ('^' ties the letters of one phoneme). Each rewrite entry
# alone and in a word, then real espeak output with several entries at once.
ENGLISH_MAPPING_INPUTS = [
    "ʔˌn̩", "ʔn̩", "a^ɪ", "a^ʊ", "d^ʒ", "e^ɪ", "e", "t^ʃ", "ɔ^ɪ", "ə^l", "ʲo", "ʲə", "ʲ",
    "ɚ", "r", "x", "ç", "ɐ", "ɬ", "ɐ̃", "n̩", "ˈn̩", " n̩", "e^ə", "iə", "i^ə", "ɪə", "ɪ^ə",
    "ə^ʊ", "o^ʊ", "ɜːɹ", "ɜː", "ː", "o", "ɾ", "ʔ", "tʃ", "aɪ", "dʒ",
    "bˈʌʔn̩", "bˈʌʔˌn̩z", "lˈɪɾə^l", "ɐlˈɔŋ", "nˈe^ɪʃən", "hˈe^ə", "ɡˈə^ʊ", "nˈʌtʃɛl",
    "t^ʃˈuː", "mjˈuːʲə", "lˈɔx", "bˈʌɾɚ", "wˈɜːld", "bˈɜːɹd", "hˈi^ə", "ðˈe^əɹ",
    "həlˈo^ʊ wˈɜːld, ðɪs ɪz ɐ tˈɛst.", "ˈa^ɪ ɡˈɑːt ɪt", "bˈɔ^ɪ", "ʒˈɑ̃ɹ",
]
ESPEAK_MAPPING_INPUTS = [
    "a^ɪ", "a^ʊ", "d^z", "d^ʒ", "e^ɪ", "o^ʊ", "ə^ʊ", "s^s", "t^s", "t^ʃ", "ɔ^ɪ",
    "aɪ", "ts", "tʃ", "-", "a-b", "«x»", "(x)", "“x”", "nˌɐ̃^ʊ̃ sˈe^ɪ", "pˈit^sa", "ɾ", "ʔ",
    "e", "o", "r", "x", "ː", "n̩", "ɐ̃", "ʲ",
]


def tokenizer_phonemes(text, lang, whole_numbers, library, data):
    """kokoro-onnx's Tokenizer.phonemize, optionally with the whole-numbers mark pattern."""
    from kokoro_onnx.config import EspeakConfig
    from kokoro_onnx.tokenizer import Tokenizer

    import phonemizer.punctuation

    tokenizer = Tokenizer(EspeakConfig(lib_path=library, data_path=data))
    # phonemizer keeps the backends it made; a fresh one sees the mark pattern set here.
    cache = sys.modules["phonemizer.phonemize"]._PHONEMIZER_CACHE
    cache.clear()
    if not whole_numbers:
        return tokenizer, tokenizer.phonemize(text, lang)
    original = phonemizer.punctuation.Punctuation.__init__

    def patched(self, marks=None):
        original(self)
        self._marks_re = WHOLE_NUMBERS_MARKS

    phonemizer.punctuation.Punctuation.__init__ = patched
    try:
        return tokenizer, tokenizer.phonemize(text, lang)
    finally:
        phonemizer.punctuation.Punctuation.__init__ = original
        cache.clear()


def misaki_g2p(lang):
    from misaki.espeak import EspeakFallback, EspeakG2P

    if lang in ("en-us", "en-gb"):
        fallback = EspeakFallback(british=lang == "en-gb")

        class Token:
            def __init__(self, text):
                self.text = text

        return fallback.backend, lambda text: fallback(Token(text))[0]
    g2p = EspeakG2P(language=lang)
    return g2p.backend, lambda text: g2p(text)[0]


def collect(library, data):
    """Everything that depends on the espeak build, for one build."""
    import misaki.espeak  # noqa: F401  (it points phonemizer at the bundled espeak on import)
    from phonemizer.backend import EspeakBackend
    from phonemizer.backend.espeak.wrapper import EspeakWrapper

    EspeakWrapper.set_library(library)
    EspeakWrapper.set_data_path(data)
    out = {"espeak": ".".join(map(str, EspeakBackend.version())), "sentences": []}
    for lang, texts in SENTENCES.items():
        backend, g2p = misaki_g2p(lang)
        default_marks = backend._punctuator._marks_re
        for text in texts:
            entry = {"lang": lang, "text": text}
            for whole, suffix in ((False, ""), (True, "_whole_numbers")):
                backend._punctuator._marks_re = WHOLE_NUMBERS_MARKS if whole else default_marks
                entry["misaki" + suffix] = g2p(text)
                if lang.startswith("en"):
                    tokenizer, phonemes = tokenizer_phonemes(text, lang, whole, library, data)
                    entry["kokoro_onnx" + suffix] = phonemes
                    entry["ids" + suffix] = tokenizer.tokenize(phonemes)
            out["sentences"].append(entry)
    return out


class EchoBackend:
    """Stands in for misaki's espeak backend: 'phonemizes' a text into itself."""

    def phonemize(self, texts):
        return list(texts)


def mapping():
    from misaki.espeak import EspeakFallback, EspeakG2P

    class Token:
        def __init__(self, text):
            self.text = text

    rows = []
    for british, table in ((False, "en-us"), (True, "en-gb")):
        fallback = EspeakFallback(british=british)
        fallback.backend = EchoBackend()
        for ipa in ENGLISH_MAPPING_INPUTS:
            rows.append({"table": table, "input": ipa, "output": fallback(Token(ipa))[0]})
    g2p = EspeakG2P(language="es")
    g2p.backend = EchoBackend()
    for ipa in ESPEAK_MAPPING_INPUTS:
        # EspeakG2P turns '(' ')' into '«' '»' before phonemizing and back after; the echo
        # sees the turned text, as espeak would.
        rows.append({"table": "espeak", "input": ipa, "output": g2p(ipa)[0]})
    return rows


def numpy_fixtures(out):
    """Small files written by numpy itself, for the pack reader's tests: a .npy of the wrong
    shape, an archive numpy compressed, an archive whose member has the wrong shape."""
    import numpy as np

    small = (np.arange(2 * 256, dtype=np.float32) / 256).reshape(2, 1, 256)
    np.save(out / "shape-2x1x256.npy", small)
    np.savez_compressed(out / "compressed.npz", af_zip=np.zeros((510, 1, 256), np.float32))
    np.savez(out / "wrong-shape.npz", bf_wide=np.zeros((5, 1, 256), np.float32))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="tests/fixtures/kokoro/reference.json")
    parser.add_argument("--collect", nargs=2, metavar=("LIBRARY", "DATA"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.collect:
        json.dump(collect(*args.collect), sys.stdout, ensure_ascii=False)
        return

    import espeakng_loader
    import importlib.metadata as metadata

    def run(library, data):
        # One process per espeak build: phonemizer keeps one loaded library per process.
        done = subprocess.run(
            [sys.executable, __file__, "--collect", library, data],
            check=True, capture_output=True, text=True,
        )
        return json.loads(done.stdout)

    system = run(SYSTEM_LIBRARY, SYSTEM_DATA)
    bundled = run(espeakng_loader.get_library_path(), espeakng_loader.get_data_path())
    for ours, theirs in zip(system["sentences"], bundled["sentences"]):
        for key in ("kokoro_onnx", "misaki", "kokoro_onnx_whole_numbers", "misaki_whole_numbers"):
            if key in ours and ours[key] != theirs[key]:
                ours[key + "_espeak_" + bundled["espeak"].replace(".", "_")] = theirs[key]

    from kokoro_onnx.config import DEFAULT_VOCAB

    fixture = {
        "generated_by": "scripts/kokoro_tokens_reference.py",
        "packages": {
            name: metadata.version(name)
            for name in ("kokoro-onnx", "misaki", "phonemizer-fork", "espeakng-loader")
        },
        "espeak": system["espeak"],
        "espeak_bundled": bundled["espeak"],
        "vocab": DEFAULT_VOCAB,
        "mapping": mapping(),
        "sentences": system["sentences"],
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    numpy_fixtures(Path(args.out).parent)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(fixture, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{args.out}: {len(fixture['mapping'])} mapping rows, {len(fixture['sentences'])} sentences")


if __name__ == "__main__":
    main()
