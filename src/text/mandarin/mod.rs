//! Mandarin text → the phonemes Kokoro v1.0's Mandarin voices (`zf_*`, `zm_*`) were trained
//! on: what misaki 0.9.4's Mandarin G2P writes for Kokoro v1.0 (its front end without a
//! version; the v1.1 one is for another model). One stage per file:
//!
//! 1. [`numbers`]: numbers, dates, money amounts, percentages in Mandarin words (cn2an's way);
//! 2. [`punctuation`]: Chinese marks → the model's clause breaks;
//! 3. the text is cut into runs of ideographs and runs of anything else, which pass as they
//!    are (the model's tokenizer keeps the marks and spaces it has symbols for);
//! 4. [`words`]: each run of ideographs → words (jieba);
//! 5. [`pinyin`]: each word → pinyin with tones (pypinyin's dictionary);
//! 6. [`syllables`]: each syllable → IPA with tone arrows.
//!
//! Words are a space apart, the syllables of a word are not. No tone sandhi is applied: the
//! front end these voices learnt from gives each syllable its dictionary tone (misaki applies
//! sandhi only in its v1.1 front end), and the fixture (tests/fixtures/cjk/zh.tsv) holds us to
//! that front end.

mod numbers;
mod pinyin;
mod punctuation;
mod syllables;
mod words;

/// Whether misaki reads `c` as Mandarin: an ideograph of the CJK Unified Ideographs block.
pub fn is_read_as_mandarin(c: char) -> bool {
    ('\u{4e00}'..='\u{9fff}').contains(&c)
}

/// Loads the dictionaries (segmenter and pinyin) now rather than at the first sentence.
pub fn preload() {
    words::preload();
    pinyin::preload();
}

/// The phonemes of `text`, in misaki's symbols for Mandarin.
pub fn phonemize(text: &str) -> String {
    if text.trim().is_empty() {
        return String::new();
    }
    let text = numbers::write_out(text);
    let text = punctuation::clause_breaks(&text);
    let mut out = String::with_capacity(text.len() * 2);
    for (ideographs, run) in runs(&text) {
        if !ideographs {
            out.push_str(run);
            continue;
        }
        for (n, word) in words::words(run).into_iter().enumerate() {
            if n > 0 {
                out.push(' ');
            }
            for syllable in pinyin::syllables(word) {
                out.push_str(&syllables::symbols(syllable).unwrap_or_default());
            }
        }
    }
    out
}

/// `text` cut into runs of ideographs (`true`) and runs of anything else (`false`).
fn runs(text: &str) -> Vec<(bool, &str)> {
    let mut runs: Vec<(bool, &str)> = Vec::new();
    let mut start = 0;
    let mut current = None;
    for (at, c) in text.char_indices() {
        let ideograph = is_read_as_mandarin(c);
        match current {
            Some(kind) if kind != ideograph => {
                runs.push((kind, &text[start..at]));
                start = at;
            }
            _ => {}
        }
        current = Some(ideograph);
    }
    if let Some(kind) = current {
        runs.push((kind, &text[start..]));
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_alternate_between_ideographs_and_the_rest() {
        assert_eq!(
            runs("我用AI来, 合成"),
            [
                (true, "我用"),
                (false, "AI"),
                (true, "来"),
                (false, ", "),
                (true, "合成")
            ]
        );
        assert!(runs("").is_empty());
    }

    #[test]
    fn sentences_read_with_words_apart_and_marks_kept() {
        assert_eq!(phonemize("你好，世界！"), "ni↓xau↓, ʂɨ↘ʨje↘!");
        assert_eq!(phonemize("  "), "");
    }
}
