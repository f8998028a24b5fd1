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
//!
//! pypinyin's tables (`characters.tsv`, `phrases.tsv`) are installed assets, not part of the
//! source: `scripts/mandarin-assets.sh` (run by `scripts/setup.sh`) writes them from the
//! sha256-pinned pypinyin 0.55.0 wheel into `voices/mandarin/` ([`dir`]; the server's
//! `--mandarin-dir`). They are read once, when the first Mandarin voice loads, and shared.
//! Without them the server still runs, and lists the Mandarin voices as unsupported
//! ([`missing`] says why).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

mod numbers;
mod pinyin;
mod punctuation;
mod syllables;
mod words;

/// Whether misaki reads `c` as Mandarin: an ideograph of the CJK Unified Ideographs block.
pub fn is_read_as_mandarin(c: char) -> bool {
    ('\u{4e00}'..='\u{9fff}').contains(&c)
}

/// The script that installs the pinyin tables.
pub const SETUP_SCRIPT: &str = "scripts/mandarin-assets.sh";

/// The files of the pinyin tables, in [`dir`].
pub const TABLES: [&str; 2] = ["characters.tsv", "phrases.tsv"];

static DIR: OnceLock<PathBuf> = OnceLock::new();

/// Reads the pinyin tables from `dir` (the server's `--mandarin-dir`). Only before their first
/// use; `false` when the directory was already fixed.
pub fn set_dir(dir: impl Into<PathBuf>) -> bool {
    DIR.set(dir.into()).is_ok()
}

/// The directory of the pinyin tables: the one [`set_dir`] gave, else [`default_dir`].
pub fn dir() -> &'static Path {
    DIR.get_or_init(default_dir)
}

/// `$OMNIVOICE_MANDARIN_DIR`, else `$OMNIVOICE_VOICES_DIR/mandarin`, else `voices/mandarin`:
/// where `scripts/mandarin-assets.sh` installs the tables.
pub fn default_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("OMNIVOICE_MANDARIN_DIR") {
        return dir.into();
    }
    std::env::var_os("OMNIVOICE_VOICES_DIR")
        .map_or_else(|| PathBuf::from("voices"), PathBuf::from)
        .join("mandarin")
}

/// Why the pinyin tables of `dir` cannot be read (a file missing), naming the script that
/// installs them; `None` when they are there.
pub fn missing_in(dir: &Path) -> Option<String> {
    let absent: Vec<&str> = TABLES
        .into_iter()
        .filter(|name| !dir.join(name).is_file())
        .collect();
    (!absent.is_empty()).then(|| {
        format!(
            "Mandarin needs the pinyin tables ({}) in {}, which {SETUP_SCRIPT} installs (scripts/setup.sh runs it).",
            absent.join(", "),
            dir.display()
        )
    })
}

/// [`missing_in`] the tables' [`dir`].
pub fn missing() -> Option<String> {
    missing_in(dir())
}

/// Loads the dictionaries (segmenter and pinyin) now rather than at the first sentence; the
/// error says why the pinyin tables could not be read.
pub fn preload() -> Result<(), String> {
    words::preload();
    pinyin::preload()
}

/// The phonemes of `text`, in misaki's symbols for Mandarin. Without the pinyin tables
/// ([`missing`]) the ideographs have none: the server refuses Mandarin voices then.
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
