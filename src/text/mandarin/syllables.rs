//! A pinyin syllable (tone number last: `zhong1`, `lv4`, `de5`) → the symbols Kokoro v1.0's
//! Mandarin voices were trained on: misaki's IPA for pinyin (after pinyin-to-ipa), with each
//! tone an arrow after the syllable's vowel (`→` first, `↗` second, `↓` third, `↘` fourth,
//! nothing for the neutral tone) and the apical vowels of `zhi`/`zi` written `ɨ`.
//!
//! Spellings are first undone as the pinyin scheme writes them (`yu` is `ü`, `gui` is `uei`,
//! `ju` is `jü`), so that each initial and final has one reading.

/// The symbols of `syllable`; `None` for a spelling that is no pinyin syllable.
pub(super) fn symbols(syllable: &str) -> Option<String> {
    let (letters, tone) = match syllable.char_indices().last()? {
        (at, d) if d.is_ascii_digit() => (&syllable[..at], tone_mark(d)?),
        _ => (syllable, ""),
    };
    let letters = letters.replace('v', "ü");
    if let Some(whole) = whole_syllable(&letters, tone) {
        return Some(whole);
    }
    let initial = initial_of(&letters);
    let final_ = final_of(initial, &letters[initial.len()..])?;
    let (glide, vowel, coda) = match (initial, final_.as_str()) {
        ("zh" | "ch" | "sh" | "r" | "z" | "c" | "s", "i") => ("", "ɨ", ""),
        (_, other) => final_parts(other)?,
    };
    Some(format!(
        "{}{glide}{vowel}{tone}{coda}",
        initial_symbols(initial)
    ))
}

fn tone_mark(digit: char) -> Option<&'static str> {
    Some(match digit {
        '1' => "→",
        '2' => "↗",
        '3' => "↓",
        '4' => "↘",
        '5' => "",
        _ => return None,
    })
}

/// Interjections and syllabic consonants, which pinyin-to-ipa reads whole.
fn whole_syllable(letters: &str, tone: &str) -> Option<String> {
    let (before, nucleus) = match letters {
        "io" => ("j", "ɔ"),
        "ê" => ("", "ɛ"),
        "er" => ("", "ɚ"),
        "o" => ("", "ɔ"),
        "hm" => ("h", "m"),
        "hng" => ("h", "ŋ"),
        "m" => ("", "m"),
        "n" => ("", "n"),
        "ng" => ("", "ŋ"),
        _ => return None,
    };
    Some(format!("{before}{nucleus}{tone}"))
}

/// The initial of the scheme's strict reading: `y` and `w` are spellings of finals, not
/// initials.
fn initial_of(letters: &str) -> &str {
    for two in ["zh", "ch", "sh"] {
        if letters.starts_with(two) {
            return two;
        }
    }
    match letters.chars().next() {
        Some(c) if "bpmfdtnlgkhjqxrzcs".contains(c) => &letters[..1],
        _ => "",
    }
}

/// The final as the scheme defines it, its spelling undone.
fn final_of(initial: &str, rest: &str) -> Option<String> {
    let mut final_ = rest.to_string();
    if initial.is_empty() {
        if let Some(after) = rest.strip_prefix('y') {
            final_ = match after.chars().next() {
                Some('u' | 'ü') => format!("ü{}", &after[after.chars().next()?.len_utf8()..]),
                Some('i') => after.to_string(),
                _ => format!("i{after}"),
            };
        } else if let Some(after) = rest.strip_prefix('w') {
            final_ = match after.starts_with('u') {
                true => after.to_string(),
                false => format!("u{after}"),
            };
        }
    } else {
        if matches!(initial, "j" | "q" | "x") {
            if let Some(after) = rest.strip_prefix('u') {
                final_ = format!("ü{after}");
            }
        }
        final_ = match final_.as_str() {
            "iu" => "iou".into(),
            "ui" => "uei".into(),
            "un" => "uen".into(),
            _ => final_,
        };
    }
    final_parts(&final_).map(|_| final_)
}

/// A final as glide, vowel (the tone follows it) and coda.
fn final_parts(final_: &str) -> Option<(&'static str, &'static str, &'static str)> {
    Some(match final_ {
        "a" => ("", "a", ""),
        "ai" => ("", "ai", ""),
        "an" => ("", "a", "n"),
        "ang" => ("", "a", "ŋ"),
        "ao" => ("", "au", ""),
        "e" => ("", "ɤ", ""),
        "ei" => ("", "ei", ""),
        "en" => ("", "ə", "n"),
        "eng" => ("", "ə", "ŋ"),
        "i" => ("", "i", ""),
        "ia" => ("j", "a", ""),
        "ian" => ("j", "ɛ", "n"),
        "iang" => ("j", "a", "ŋ"),
        "iao" => ("j", "au", ""),
        "ie" => ("j", "e", ""),
        "in" => ("", "i", "n"),
        "iou" => ("j", "ou", ""),
        "ing" => ("", "i", "ŋ"),
        "iong" => ("j", "ʊ", "ŋ"),
        "ong" => ("", "ʊ", "ŋ"),
        "ou" => ("", "ou", ""),
        "u" => ("", "u", ""),
        "uei" => ("w", "ei", ""),
        "ua" => ("w", "a", ""),
        "uai" => ("w", "ai", ""),
        "uan" => ("w", "a", "n"),
        "uen" => ("w", "ə", "n"),
        "uang" => ("w", "a", "ŋ"),
        "ueng" => ("w", "ə", "ŋ"),
        "uo" | "o" => ("w", "o", ""),
        "ü" => ("", "y", ""),
        "üe" => ("ɥ", "e", ""),
        "üan" => ("ɥ", "ɛ", "n"),
        "ün" => ("", "y", "n"),
        _ => return None,
    })
}

fn initial_symbols(initial: &str) -> &'static str {
    match initial {
        "b" => "p",
        "p" => "pʰ",
        "m" => "m",
        "f" => "f",
        "d" => "t",
        "t" => "tʰ",
        "n" => "n",
        "l" => "l",
        "g" => "k",
        "k" => "kʰ",
        "h" => "x",
        "j" => "ʨ",
        "q" => "ʨʰ",
        "x" => "ɕ",
        "zh" => "\u{ab67}",
        "ch" => "\u{ab67}ʰ",
        "sh" => "ʂ",
        "r" => "ɻ",
        "z" => "ʦ",
        "c" => "ʦʰ",
        "s" => "s",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::symbols;

    /// Readings from misaki 0.9.4's own output for these syllables (tests/fixtures/cjk/zh.tsv
    /// holds them in sentences).
    #[test]
    fn spellings_are_undone_before_reading() {
        for (pinyin, expected) in [
            ("ni3", "ni↓"),
            ("hao3", "xau↓"),
            ("shi4", "ʂɨ↘"),
            ("zi5", "ʦɨ"),
            ("ri4", "ɻɨ↘"),
            ("yuan2", "ɥɛ↗n"),
            ("xue2", "ɕɥe↗"),
            ("qu4", "ʨʰy↘"),
            ("lv4", "ly↘"),
            ("you3", "jou↓"),
            ("liu2", "ljou↗"),
            ("gui4", "kwei↘"),
            ("lun2", "lwə↗n"),
            ("wen4", "wə↘n"),
            ("yi1", "i→"),
            ("ying1", "i→ŋ"),
            ("wu3", "u↓"),
            ("er4", "ɚ↘"),
            ("bo1", "pwo→"),
            ("zhong1", "\u{ab67}ʊ→ŋ"),
            ("de5", "tɤ"),
        ] {
            assert_eq!(symbols(pinyin).as_deref(), Some(expected), "{pinyin}");
        }
        assert_eq!(symbols("xyz9"), None);
        assert_eq!(symbols("bx1"), None);
    }
}
