//! How many frames to generate for a text: the official rule-based estimate.
//!
//! Each character weighs what it takes to say relative to a Latin letter (a CJK ideograph 3,
//! a Devanagari letter 1.8, a digit 3.5, a space 0.2, a combining mark nothing); the text's
//! weight over the reference's gives its length from the reference's frames (without a
//! reference, "Nice to meet you." at 25 frames). Short results are stretched along a cube-root
//! curve below 50 frames, which leaves room for a short utterance's edges.

use unicode_general_category::{get_general_category, GeneralCategory};

/// The reference the official code falls back to without one of the request's own.
const DEFAULT_REFERENCE: (&str, usize) = ("Nice to meet you.", 25);
/// Frames below which estimates are stretched, and how strongly (the curve's root).
const LOW_THRESHOLD: f64 = 50.0;
const BOOST: f64 = 3.0;

/// Frames for `text`, given a reference's text and frames (the default one when `None` or
/// empty), at `speed` (above 1 is faster). At least 1.
pub fn target_frames(text: &str, reference: Option<(&str, usize)>, speed: f64) -> usize {
    let (ref_text, ref_frames) = reference
        .filter(|(t, _)| !t.is_empty())
        .unwrap_or(DEFAULT_REFERENCE);
    let mut estimate = estimate(text, ref_text, ref_frames as f64);
    if speed > 0.0 && speed != 1.0 {
        estimate /= speed;
    }
    (estimate as i64).max(1) as usize
}

fn estimate(text: &str, ref_text: &str, ref_frames: f64) -> f64 {
    if ref_frames <= 0.0 || ref_text.is_empty() {
        return 0.0;
    }
    let ref_weight = weight(ref_text);
    if ref_weight == 0.0 {
        return 0.0;
    }
    let per_frame = ref_weight / ref_frames;
    let estimate = weight(text) / per_frame;
    if estimate < LOW_THRESHOLD {
        LOW_THRESHOLD * (estimate / LOW_THRESHOLD).powf(1.0 / BOOST)
    } else {
        estimate
    }
}

/// The text's weight: its characters' weights summed in order.
pub fn weight(text: &str) -> f64 {
    text.chars().map(char_weight).sum()
}

/// Kinds of script, each with its weight.
#[derive(Clone, Copy)]
enum Script {
    Latin,
    /// Greek, Cyrillic, Armenian, Georgian: alphabets like Latin.
    Alphabet,
    /// Arabic and Hebrew.
    Abjad,
    Indic,
    ThaiLao,
    KhmerMyanmar,
    Hangul,
    Kana,
    /// CJK ideographs and Bopomofo.
    Logograph,
    /// Ethiopic and Yi.
    Syllable,
    Other,
}

impl Script {
    fn weight(self) -> f64 {
        match self {
            Script::Latin | Script::Alphabet | Script::Other => 1.0,
            Script::Abjad | Script::ThaiLao => 1.5,
            Script::Indic | Script::KhmerMyanmar => 1.8,
            Script::Kana => 2.2,
            Script::Hangul => 2.5,
            Script::Logograph | Script::Syllable => 3.0,
        }
    }
}

/// The last code point of each run of blocks and the script kind of the run, in order
/// (characters past the last run: CJK in the upper planes, else other).
const BLOCKS: &[(u32, Script)] = {
    use Script::*;
    &[
        (0x02AF, Latin),
        (0x058F, Alphabet),
        (0x08FF, Abjad),
        (0x0DFF, Indic),
        (0x0EFF, ThaiLao),
        (0x0FFF, Indic),
        (0x109F, KhmerMyanmar),
        (0x10FF, Alphabet),
        (0x11FF, Hangul),
        (0x139F, Syllable),
        (0x177F, Other),
        (0x17FF, KhmerMyanmar),
        (0x18FF, Other),
        (0x19DF, Indic),
        (0x19FF, KhmerMyanmar),
        (0x1C7F, Indic),
        (0x1CBF, Alphabet),
        (0x1CFF, Indic),
        (0x1DBF, Latin),
        (0x1DFF, Other),
        (0x1EFF, Latin),
        (0x30FF, Kana),
        (0x312F, Logograph),
        (0x318F, Hangul),
        (0x9FFF, Logograph),
        (0xA4CF, Syllable),
        (0xA63F, Other),
        (0xA69F, Alphabet),
        (0xA6FF, Other),
        (0xA7FF, Latin),
        (0xA82F, Indic),
        (0xA87F, Other),
        (0xA95F, Indic),
        (0xA97F, Hangul),
        (0xA9DF, Indic),
        (0xA9FF, KhmerMyanmar),
        (0xAA5F, Indic),
        (0xAA7F, KhmerMyanmar),
        (0xAAFF, Indic),
        (0xAB2F, Syllable),
        (0xAB6F, Latin),
        (0xABBF, Other),
        (0xABFF, Indic),
        (0xD7AF, Hangul),
        (0xFAFF, Logograph),
        (0xFDFF, Abjad),
        (0xFE6F, Other),
        (0xFEFF, Abjad),
        (0xFFEF, Latin),
    ]
};

fn char_weight(c: char) -> f64 {
    use GeneralCategory as G;
    const SPACE: f64 = 0.2;
    const MARK: f64 = 0.0;
    const PUNCTUATION: f64 = 0.5;
    const DIGIT: f64 = 3.5;
    let code = c as u32;
    if c.is_ascii_alphabetic() {
        return Script::Latin.weight();
    }
    if c == ' ' {
        return SPACE;
    }
    // Arabic's tatweel only stretches a letter.
    if c == '\u{0640}' {
        return MARK;
    }
    match get_general_category(c) {
        G::NonspacingMark | G::SpacingMark | G::EnclosingMark => return MARK,
        G::ConnectorPunctuation
        | G::DashPunctuation
        | G::OpenPunctuation
        | G::ClosePunctuation
        | G::InitialPunctuation
        | G::FinalPunctuation
        | G::OtherPunctuation
        | G::MathSymbol
        | G::CurrencySymbol
        | G::ModifierSymbol
        | G::OtherSymbol => return PUNCTUATION,
        G::SpaceSeparator | G::LineSeparator | G::ParagraphSeparator => return SPACE,
        G::DecimalNumber | G::LetterNumber | G::OtherNumber => return DIGIT,
        _ => {}
    }
    let run = BLOCKS.partition_point(|&(end, _)| end < code);
    match BLOCKS.get(run) {
        Some(&(_, script)) => script.weight(),
        None if code > 0x20000 => Script::Logograph.weight(),
        None => Script::Other.weight(),
    }
}
