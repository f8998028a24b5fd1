//! Text → Kokoro's phonemes: espeak-ng's IPA with the text's punctuation kept, rewritten into
//! the symbols of misaki, the phonemizer Kokoro was trained with.
//!
//! Kokoro v1.0 learnt its English from misaki's dictionaries, which write diphthongs as one
//! capital letter (`A` = eɪ, `I` = aɪ, `O` = oʊ …) and flaps as `T`; for words they lack, and
//! for Spanish, French, Hindi, Italian and Portuguese altogether, misaki asks espeak-ng and
//! rewrites its IPA into those symbols with a small table. That rewriting is reproduced here
//! (the tests check it rule by rule against misaki 0.9.4), so the model reads the symbols it
//! was trained on rather than raw IPA; the raw IPA, which is what kokoro-onnx feeds its model,
//! is kept beside it, since word timings align the text's words to espeak's IPA.
//!
//! Both kokoro-onnx and misaki hand the text to the phonemizer package, which cuts it at every
//! punctuation mark, phonemizes the pieces between marks one by one and puts the marks back as
//! written. The same is done here, with one change: a `.`, `,` or `:` between two digits is no
//! mark, so "3.14", "5,000" and "10:30" are read as numbers, not as "three. fourteen" or
//! "five, zero zero zero".
//!
//! Mandarin is no espeak language here: `crate::text::mandarin` writes misaki's Mandarin
//! symbols directly, and both fields of [`Phonemes`] are those.
//!
//! espeak-ng's multi-letter phonemes come with a tie (`a͡ɪ`) so that the rewriting tells the
//! diphthong of "buy" from an `a` followed by an `ɪ`; misaki writes the tie as `^`, and so do
//! the rules below.
//!
//! Two more differences from kokoro-onnx: the `(en)` markers espeak puts around a word it reads
//! in another language are removed (as misaki removes them; kokoro-onnx would feed their
//! letters to the model), and whitespace inside punctuation runs becomes a space. This server
//! links the system's espeak-ng 1.51, kokoro-onnx and misaki bundle 1.52; on the fixture's
//! sentences the two differ only in `oː`/`ɔː` ("four"), which misaki's rewriting makes equal.

use unicode_normalization::UnicodeNormalization;

use super::language::Language;
use crate::espeak::{self, EspeakError, TIE};
use crate::text::phonemize::given_in;
use crate::text::Pronunciation;
// misaki removes the markers too; kokoro-onnx would hand their letters to the model.
use crate::text::phonemize::strip_language_flags;

/// What phonemizer treats as punctuation: kept as written, never handed to espeak.
const MARKS: &[char] = &[
    ';', ':', ',', '.', '!', '?', '¡', '¿', '—', '…', '"', '«', '»', '“', '”', '(', ')', '{', '}',
    '[', ']',
];
/// Marks that are part of a number when a digit stands on both sides.
const NUMBER_SEPARATORS: &[char] = &['.', ',', ':'];

/// misaki's notation for espeak's tie.
const MISAKI_TIE: char = '^';

/// An utterance's phonemes, in espeak's IPA and in misaki's symbols.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Phonemes {
    /// espeak-ng's IPA (stress kept, no ties) with the punctuation marks of the text: what
    /// kokoro-onnx's tokenizer makes of the text before it drops what is not in the vocabulary,
    /// and what a written word's own phonemization is aligned to for word timings.
    pub espeak: String,
    /// The same in misaki's symbols: what the model reads (after [`super::vocab::tokenize`]).
    pub misaki: String,
    /// For each character of `misaki`, the index of the character of `espeak` it was made
    /// from (a rewrite such as `a͡ɪ` → `I` gives its letter the first one's).
    sources: Vec<usize>,
}

impl Phonemes {
    /// The characters of [`misaki`](Self::misaki), each with the index of the character of
    /// [`espeak`](Self::espeak) it came from.
    pub fn traced(&self) -> impl Iterator<Item = (char, usize)> + '_ {
        self.misaki.chars().zip(self.sources.iter().copied())
    }
}

impl Phonemes {
    /// Phonemes a dictionary G2P wrote in misaki's symbols: they stand for the IPA too, each
    /// symbol its own source.
    fn from_symbols(misaki: String) -> Self {
        Self {
            sources: (0..misaki.chars().count()).collect(),
            espeak: misaki.clone(),
            misaki,
        }
    }

    /// Phonemes that are `text` itself (for tests of what comes after phonemization).
    #[cfg(test)]
    pub(super) fn verbatim(text: &str) -> Self {
        Self {
            espeak: text.to_string(),
            misaki: text.to_string(),
            sources: (0..text.chars().count()).collect(),
        }
    }
}

/// Whether `c` is one of the punctuation marks kept from the text (no sound of its own).
pub(super) fn is_mark(c: char) -> bool {
    MARKS.contains(&c)
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PhonemizeError {
    #[error("{0} voices need a dictionary phonemizer, which this server does not have for {0}")]
    Unsupported(Language),
    #[error(transparent)]
    Espeak(#[from] EspeakError),
}

/// The phonemes of `text` in `language`; Japanese and Mandarin are
/// [`PhonemizeError::Unsupported`].
pub fn phonemize(text: &str, language: Language) -> Result<Phonemes, PhonemizeError> {
    phonemize_with(text, language, &[])
}

/// [`phonemize`], with each of `pronunciations` said with its own IPA (rewritten into
/// misaki's symbols like espeak's: misaki's own symbols, `O` for `oʊ`, pass through).
pub fn phonemize_with(
    text: &str,
    language: Language,
    pronunciations: &[Pronunciation],
) -> Result<Phonemes, PhonemizeError> {
    if language == Language::Japanese {
        // Japanese readings come from the dictionary alone: given pronunciations are IPA for
        // espeak's languages, not kana, so they are not applied.
        let g2p = crate::text::japanese::loaded().ok_or(PhonemizeError::Unsupported(language))?;
        return Ok(Phonemes::from_symbols(g2p.phonemize(text)));
    }
    if language == Language::Mandarin {
        return Ok(mandarin(text, pronunciations));
    }
    let voice = language
        .espeak_voice()
        .ok_or(PhonemizeError::Unsupported(language))?;
    let mut tied = String::with_capacity(text.len() * 2);
    let mut at = 0;
    for pronunciation in given_in(text, pronunciations) {
        push_text(&mut tied, &text[at..pronunciation.text.start], voice)?;
        if !tied.is_empty() && !tied.ends_with(' ') {
            tied.push(' ');
        }
        tied.push_str(&tie(&pronunciation.ipa));
        at = pronunciation.text.end;
    }
    push_text(&mut tied, &text[at..], voice)?;
    let tied = tied.trim();

    let mut espeak = String::with_capacity(tied.len());
    let mut symbols = Vec::with_capacity(tied.len());
    let mut next = 0;
    for c in tied.chars() {
        if c == TIE {
            symbols.push(Symbol {
                c: MISAKI_TIE,
                source: next.max(1) - 1,
            });
        } else {
            espeak.push(c);
            symbols.push(Symbol { c, source: next });
            next += 1;
        }
    }
    let symbols = rewrite(symbols, language);
    Ok(Phonemes {
        espeak,
        misaki: symbols.iter().map(|s| s.c).collect(),
        sources: symbols.iter().map(|s| s.source).collect(),
    })
}

/// Mandarin through its dictionary G2P, which writes misaki's symbols itself: both fields
/// are those symbols, each its own source. A given pronunciation's IPA stands where its words
/// were, a space apart from its neighbours.
fn mandarin(text: &str, pronunciations: &[Pronunciation]) -> Phonemes {
    let mut symbols = String::with_capacity(text.len() * 2);
    let mut at = 0;
    for pronunciation in given_in(text, pronunciations) {
        symbols.push_str(&crate::text::mandarin::phonemize(
            &text[at..pronunciation.text.start],
        ));
        if !symbols.is_empty() && !symbols.ends_with(' ') {
            symbols.push(' ');
        }
        symbols.push_str(pronunciation.ipa.trim());
        symbols.push(' ');
        at = pronunciation.text.end;
    }
    symbols.push_str(&crate::text::mandarin::phonemize(&text[at..]));
    let symbols = symbols.trim().to_string();
    Phonemes {
        espeak: symbols.clone(),
        sources: (0..symbols.chars().count()).collect(),
        misaki: symbols,
    }
}

/// The first symbol of `ipa` that a voice of `language` has no token for, once rewritten as
/// [`phonemize_with`] rewrites it.
pub fn unsayable(ipa: &str, language: Language) -> Option<char> {
    let symbols = tie(ipa)
        .chars()
        .filter(|&c| c != TIE)
        .enumerate()
        .map(|(source, c)| Symbol { c, source })
        .collect();
    rewrite(symbols, language)
        .into_iter()
        .map(|s| s.c)
        .find(|&c| c != ' ' && super::vocab::id(c).is_none())
}

/// Given IPA with espeak's ties on the pairs misaki's tables rewrite as one symbol, which a
/// person writing IPA leaves out (`eɪ`, not `e͡ɪ`).
fn tie(ipa: &str) -> String {
    const PAIRS: &[(char, char)] = &[
        ('a', 'ɪ'),
        ('a', 'ʊ'),
        ('e', 'ɪ'),
        ('e', 'ə'),
        ('ɔ', 'ɪ'),
        ('o', 'ʊ'),
        ('ə', 'ʊ'),
        ('d', 'ʒ'),
        ('d', 'z'),
        ('t', 'ʃ'),
        ('t', 's'),
    ];
    let ipa: String = ipa.nfc().collect();
    let mut out = String::with_capacity(ipa.len() + 4);
    let mut previous = None;
    for c in ipa.chars() {
        if previous.is_some_and(|p| PAIRS.contains(&(p, c))) {
            out.push(TIE);
        }
        if c != TIE {
            out.push(c);
        }
        previous = (c != TIE).then_some(c);
    }
    out
}

/// Appends the tied IPA of `text` (cut as phonemizer cuts it) to `tied`.
fn push_text(tied: &mut String, text: &str, voice: &str) -> Result<(), PhonemizeError> {
    let after_given = !tied.is_empty();
    for (n, segment) in segments(text).into_iter().enumerate() {
        match segment {
            Segment::Marks(marks) => {
                // Other whitespace is a space to the model: a newline would glue two words.
                tied.extend(
                    marks
                        .chars()
                        .map(|c| if c.is_whitespace() { ' ' } else { c }),
                )
            }
            Segment::Words(words) => {
                let clauses = espeak::text_to_tied_phoneme_clauses(words, voice)?;
                let mut first = true;
                for (ipa, _) in clauses {
                    for word in strip_language_flags(&ipa).split_whitespace() {
                        // Words right after given phonemes are a word of their own.
                        let glued = n == 0 && after_given && !tied.ends_with(' ');
                        if !first || glued {
                            tied.push(' ');
                        }
                        first = false;
                        tied.push_str(word);
                    }
                }
            }
        }
    }
    Ok(())
}

/// A piece of the text: punctuation kept as written, or words for espeak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Segment<'a> {
    Marks(&'a str),
    Words(&'a str),
}

/// `text` cut as phonemizer cuts it: every maximal run of punctuation marks and whitespace that
/// holds at least one mark is a [`Segment::Marks`], whitespace around it included; the text
/// between such runs is [`Segment::Words`].
fn segments(text: &str) -> Vec<Segment<'_>> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let is_mark = |i: usize| {
        let c = chars[i].1;
        if !MARKS.contains(&c) {
            return false;
        }
        let digit_before = i > 0 && chars[i - 1].1.is_numeric();
        let digit_after = chars.get(i + 1).is_some_and(|&(_, c)| c.is_numeric());
        !(NUMBER_SEPARATORS.contains(&c) && digit_before && digit_after)
    };
    let mut segments = Vec::new();
    let mut words_start = 0;
    let mut i = 0;
    while i < chars.len() {
        if !(chars[i].1.is_whitespace() || is_mark(i)) {
            i += 1;
            continue;
        }
        let run_start = i;
        let mut has_mark = false;
        while i < chars.len() && (chars[i].1.is_whitespace() || is_mark(i)) {
            has_mark |= is_mark(i);
            i += 1;
        }
        if has_mark {
            let from = chars[run_start].0;
            let to = chars.get(i).map_or(text.len(), |&(at, _)| at);
            if words_start < from {
                segments.push(Segment::Words(&text[words_start..from]));
            }
            segments.push(Segment::Marks(&text[from..to]));
            words_start = to;
        }
    }
    if words_start < text.len() {
        segments.push(Segment::Words(&text[words_start..]));
    }
    segments
}

/// One character being rewritten, with the character of the IPA it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Symbol {
    c: char,
    source: usize,
}

/// One step of misaki's rewriting, applied to the whole string at once.
#[derive(Debug, Clone, Copy)]
enum Rule {
    /// Every occurrence, left to right, never overlapping, never re-read (Python's
    /// `str.replace`).
    Replace(&'static str, &'static str),
    /// A syllabic consonant (`n̩`) becomes schwa + consonant (`ᵊn`), and stray syllabic marks go.
    Syllabic,
}

use Rule::{Replace, Syllabic};

/// misaki's English espeak table (`EspeakFallback`), in the order misaki applies it: longest
/// key first, so that `e͡ɪ` becomes `A` before a lone `e` does. Stops before a syllabic `n̩`
/// (`ʔn̩` in "button") keep their `ʔ`, which the last rules turn into `t`.
const ENGLISH: &[Rule] = &[
    Replace("ʔˌn\u{329}", "ʔn"),
    Replace("ʔn\u{329}", "ʔn"),
    Replace("a^ɪ", "I"),
    Replace("a^ʊ", "W"),
    Replace("d^ʒ", "ʤ"),
    Replace("e^ɪ", "A"),
    Replace("t^ʃ", "ʧ"),
    Replace("ɔ^ɪ", "Y"),
    Replace("ə^l", "ᵊl"),
    Replace("ʲo", "jo"),
    Replace("ʲə", "jə"),
    Replace("e", "A"),
    Replace("ʲ", ""),
    Replace("ɚ", "əɹ"),
    Replace("r", "ɹ"),
    Replace("x", "k"),
    Replace("ç", "k"),
    Replace("ɐ", "ə"),
    Replace("ɬ", "l"),
    Replace("\u{303}", ""),
    Syllabic,
];

/// British English after [`ENGLISH`]. misaki's `e͡ə` → `ɛː` never fires (the `e` is an `A` by
/// then) and `iə` → `ɪə` only meets an untied pair; both are kept as misaki has them, since
/// misaki's output is what is being reproduced.
const BRITISH: &[Rule] = &[
    Replace("e^ə", "ɛː"),
    Replace("iə", "ɪə"),
    Replace("ə^ʊ", "Q"),
];

/// American English after [`ENGLISH`]: `oʊ` is `O`, r-coloured vowels lose their length, and
/// no vowel is long.
const AMERICAN: &[Rule] = &[
    Replace("o^ʊ", "O"),
    Replace("ɜːɹ", "ɜɹ"),
    Replace("ɜː", "ɜɹ"),
    Replace("ɪə", "iə"),
    Replace("ː", ""),
];

/// Both Englishes, last: espeak before 1.52 writes `o` where misaki has `ɔ`; flaps are `T` and
/// glottal stops `t` (misaki's v1.0 convention); ties go.
const ENGLISH_LAST: &[Rule] = &[
    Replace("o", "ɔ"),
    Replace("ɾ", "T"),
    Replace("ʔ", "t"),
    Replace("^", ""),
];

/// misaki's table for every other espeak language (`EspeakG2P`), in its order (by key). Angle
/// quotes become curly ones first, which the model has symbols for; hyphens espeak leaves go.
const OTHER: &[Rule] = &[
    Replace("«", "“"),
    Replace("»", "”"),
    Replace("a^ɪ", "I"),
    Replace("a^ʊ", "W"),
    Replace("d^z", "ʣ"),
    Replace("d^ʒ", "ʤ"),
    Replace("e^ɪ", "A"),
    Replace("o^ʊ", "O"),
    Replace("s^s", "S"),
    Replace("t^s", "ʦ"),
    Replace("t^ʃ", "ʧ"),
    Replace("ɔ^ɪ", "Y"),
    Replace("ə^ʊ", "Q"),
    Replace("^", ""),
    Replace("-", ""),
];

fn rules(language: Language) -> Vec<Rule> {
    match language {
        Language::AmericanEnglish => [ENGLISH, AMERICAN, ENGLISH_LAST].concat(),
        Language::BritishEnglish => [ENGLISH, BRITISH, ENGLISH_LAST].concat(),
        _ => OTHER.to_vec(),
    }
}

fn rewrite(mut symbols: Vec<Symbol>, language: Language) -> Vec<Symbol> {
    for rule in rules(language) {
        symbols = apply(rule, &symbols);
    }
    symbols
}

fn apply(rule: Rule, symbols: &[Symbol]) -> Vec<Symbol> {
    let mut out = Vec::with_capacity(symbols.len() + 8);
    match rule {
        Replace(from, to) => {
            let from: Vec<char> = from.chars().collect();
            let mut i = 0;
            while i < symbols.len() {
                let matched = &symbols[i..(i + from.len()).min(symbols.len())];
                if matched.len() == from.len()
                    && matched.iter().map(|s| s.c).eq(from.iter().copied())
                {
                    // The k-th new letter comes from the k-th old one that is no tie (the
                    // last one when the replacement is longer).
                    let letters: Vec<usize> = matched
                        .iter()
                        .filter(|s| s.c != MISAKI_TIE)
                        .map(|s| s.source)
                        .collect();
                    for (k, c) in to.chars().enumerate() {
                        let source = letters[k.min(letters.len().saturating_sub(1))];
                        out.push(Symbol { c, source });
                    }
                    i += from.len();
                } else {
                    out.push(symbols[i]);
                    i += 1;
                }
            }
        }
        Syllabic => {
            const MARK: char = '\u{329}';
            let mut i = 0;
            while i < symbols.len() {
                let here = symbols[i];
                if !here.c.is_whitespace() && symbols.get(i + 1).is_some_and(|s| s.c == MARK) {
                    out.push(Symbol {
                        c: 'ᵊ',
                        source: here.source,
                    });
                    out.push(here);
                    i += 2;
                } else {
                    if here.c != MARK {
                        out.push(here);
                    }
                    i += 1;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::vocab::tokenize;
    use super::*;

    /// The rewriting of `ipa`, trimmed first as misaki (and [`phonemize`]) trims espeak's
    /// output.
    fn rewritten(ipa: &str, language: Language) -> String {
        let symbols = ipa
            .trim()
            .chars()
            .enumerate()
            .map(|(source, c)| Symbol { c, source })
            .collect();
        rewrite(symbols, language).iter().map(|s| s.c).collect()
    }

    /// Every row of misaki's own rewriting (its espeak backend replaced by one that returns
    /// the input), for its three tables.
    #[test]
    fn rewriting_is_misaki_s_row_by_row() {
        let reference = super::super::reference();
        let rows = reference["mapping"].as_array().unwrap();
        assert!(rows.len() > 100);
        let mut failures = Vec::new();
        for row in rows {
            let input = row["input"].as_str().unwrap();
            let language = match row["table"].as_str().unwrap() {
                "en-us" => Language::AmericanEnglish,
                "en-gb" => Language::BritishEnglish,
                "espeak" => Language::Spanish,
                other => panic!("table {other}"),
            };
            let ours = rewritten(input, language);
            if ours != row["output"].as_str().unwrap() {
                failures.push(format!("{row}: ours {ours:?}"));
            }
        }
        assert!(failures.is_empty(), "{failures:#?}");
    }

    #[test]
    fn every_table_key_is_exercised_by_the_fixture() {
        let reference = super::super::reference();
        let inputs: Vec<&str> = reference["mapping"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| row["input"].as_str().unwrap())
            .collect();
        for rule in [ENGLISH, BRITISH, AMERICAN, ENGLISH_LAST, OTHER].concat() {
            if let Replace(from, _) = rule {
                assert!(
                    inputs.iter().any(|i| i.contains(from)) || from == "^",
                    "no fixture row for {from:?}"
                );
            }
        }
    }

    #[test]
    fn sources_point_at_the_ipa_letters_rewritten() {
        let symbols: Vec<Symbol> = "bˈa^ɪ bˈʌʔn\u{329}"
            .chars()
            .filter(|&c| c != '^')
            .enumerate()
            .map(|(source, c)| Symbol { c, source })
            .collect();
        // Put the tie back where it was, with the source of the letter before it.
        let mut tied = symbols.clone();
        tied.insert(3, Symbol { c: '^', source: 2 });
        let out = rewrite(tied, Language::AmericanEnglish);
        let text: String = out.iter().map(|s| s.c).collect();
        assert_eq!(text, "bˈI bˈʌtn");
        let sources: Vec<usize> = out.iter().map(|s| s.source).collect();
        // b ˈ a ɪ ␠ b ˈ ʌ ʔ n ̩  →  b ˈ I ␠ b ˈ ʌ t n
        assert_eq!(sources, [0, 1, 2, 4, 5, 6, 7, 8, 9]);
    }

    #[test]
    fn segments_follow_phonemizer_and_keep_numbers_whole() {
        use Segment::{Marks, Words};
        assert_eq!(
            segments("Hello world. This is a test."),
            [
                Words("Hello world"),
                Marks(". "),
                Words("This is a test"),
                Marks(".")
            ]
        );
        assert_eq!(
            segments("\"Hi ,\" she said —  (ok)"),
            [
                Marks("\""),
                Words("Hi"),
                Marks(" ,\" "),
                Words("she said"),
                Marks(" —  ("),
                Words("ok"),
                Marks(")")
            ]
        );
        assert_eq!(
            segments("3.14, 5,000 and 10:30. 7. Then,8"),
            [
                Words("3.14"),
                Marks(", "),
                Words("5,000 and 10:30"),
                Marks(". "),
                Words("7"),
                Marks(". "),
                Words("Then"),
                Marks(","),
                Words("8")
            ]
        );
        assert_eq!(segments("..."), [Marks("...")]);
        assert_eq!(segments("no marks at all"), [Words("no marks at all")]);
        assert!(segments("").is_empty());
    }

    /// The sentences of the fixture, through the system's espeak-ng: the IPA and ids equal
    /// kokoro-onnx's tokenizer, the symbols equal misaki's espeak G2P. Both references ran
    /// with the whole-numbers mark pattern (the one difference the module documents); where
    /// that changes nothing, the fixture's plain kokoro-onnx output is the same.
    #[test]
    fn sentences_match_kokoro_onnx_and_misaki() {
        let reference = super::super::reference();
        let mut failures = Vec::new();
        let mut english = 0;
        for sentence in reference["sentences"].as_array().unwrap() {
            let text = sentence["text"].as_str().unwrap();
            let language = match sentence["lang"].as_str().unwrap() {
                "en-us" => Language::AmericanEnglish,
                "en-gb" => Language::BritishEnglish,
                "es" => Language::Spanish,
                "fr-fr" => Language::French,
                "hi" => Language::Hindi,
                "it" => Language::Italian,
                "pt-br" => Language::BrazilianPortuguese,
                other => panic!("language {other}"),
            };
            let ours = phonemize(text, language).unwrap();
            if ours.misaki != sentence["misaki_whole_numbers"].as_str().unwrap() {
                failures.push(format!("{text}: misaki {:?}", ours.misaki));
            }
            if let Some(ids) = sentence.get("ids_whole_numbers") {
                english += 1;
                let ids: Vec<u32> = serde_json::from_value(ids.clone()).unwrap();
                if tokenize(&ours.espeak) != ids {
                    failures.push(format!("{text}: ids of {:?}", ours.espeak));
                }
                assert_eq!(
                    ours.espeak,
                    sentence["kokoro_onnx_whole_numbers"].as_str().unwrap()
                );
            }
        }
        assert_eq!(english, 13);
        assert!(failures.is_empty(), "{failures:#?}");
    }

    #[test]
    fn traced_characters_come_from_the_ipa() {
        let ours = phonemize("I don't know, do you?", Language::AmericanEnglish).unwrap();
        let ipa: Vec<char> = ours.espeak.chars().collect();
        let traced: Vec<(char, usize)> = ours.traced().collect();
        assert_eq!(traced.len(), ours.misaki.chars().count());
        assert!(traced.windows(2).all(|w| w[0].1 <= w[1].1), "in order");
        for (c, source) in traced {
            // Marks, spaces and stress are never rewritten: they point at themselves.
            assert!(source < ipa.len());
            if ",?ˈ ".contains(c) {
                assert_eq!(ipa[source], c, "{:?}", ours);
            }
        }
    }

    #[test]
    fn given_ipa_is_rewritten_into_misaki_s_symbols() {
        let text = "Say Kokoro, please.";
        let start = text.find("Kokoro").unwrap();
        let given = |ipa: &str| {
            [Pronunciation {
                text: start..start + "Kokoro".len(),
                ipa: ipa.into(),
            }]
        };
        let american = Language::AmericanEnglish;
        // Plain IPA and misaki's own symbols say the same.
        let from_ipa = phonemize_with(text, american, &given("kˈoʊkəɹoʊ")).unwrap();
        let from_misaki = phonemize_with(text, american, &given("kˈOkəɹO")).unwrap();
        assert_eq!(from_ipa.misaki, from_misaki.misaki);
        let say = phonemize("Say", american).unwrap().misaki;
        let please = phonemize("please.", american).unwrap().misaki;
        assert_eq!(from_ipa.misaki, format!("{say} kˈOkəɹO, {please}"));
        // British English has its own diphthong.
        let british = phonemize_with(text, Language::BritishEnglish, &given("kˈəʊkəɹəʊ")).unwrap();
        assert!(british.misaki.contains("kˈQkəɹQ"), "{}", british.misaki);
        // Words after the given ones stay apart from them.
        let glued = "Kokoro said";
        let out = phonemize_with(
            glued,
            american,
            &[Pronunciation {
                text: 0..6,
                ipa: "kˈOkəɹO".into(),
            }],
        )
        .unwrap();
        assert!(out.misaki.starts_with("kˈOkəɹO s"), "{}", out.misaki);

        assert_eq!(unsayable("kˈoʊkəɹoʊ", american), None);
        assert_eq!(unsayable("kˈOkəɹO", american), None);
        assert_eq!(unsayable("kⱱa", american), Some('ⱱ'));
    }

    #[test]
    fn japanese_is_refused() {
        assert_eq!(
            phonemize("こんにちは", Language::Japanese),
            Err(PhonemizeError::Unsupported(Language::Japanese))
        );
    }

    #[test]
    fn mandarin_is_read_by_its_dictionary_g2p() {
        let ours = phonemize("你好，世界！", Language::Mandarin).unwrap();
        assert_eq!(ours.misaki, "ni↓xau↓, ʂɨ↘ʨje↘!");
        assert_eq!(ours.traced().count(), ours.misaki.chars().count());
        let text = "我叫小明。";
        let start = text.find("小明").unwrap();
        let given = [Pronunciation {
            text: start..start + "小明".len(),
            ipa: "ɕjau↓mi↗ŋ".into(),
        }];
        let named = phonemize_with(text, Language::Mandarin, &given).unwrap();
        assert_eq!(named.misaki, "wo↓ ʨjau↘ ɕjau↓mi↗ŋ .");
    }

    #[test]
    fn empty_and_punctuation_only_text() {
        let empty = phonemize("  ", Language::AmericanEnglish).unwrap();
        assert_eq!((empty.espeak.as_str(), empty.misaki.as_str()), ("", ""));
        let marks = phonemize("…?!", Language::Spanish).unwrap();
        assert_eq!(marks.misaki, "…?!");
        // A newline inside a mark run is a space, not a character the model drops.
        let lines = phonemize("One.\nTwo.", Language::AmericanEnglish).unwrap();
        assert!(lines.misaki.contains(". "), "{lines:?}");
    }
}
