//! Which writing system a sentence is in, where that decides who may read it. A voice of a
//! language not written in it spells such text letter by letter (espeak-ng says "Chinese
//! letter" for each ideograph, "Hebrew shin", "kappa alpha", "pe er"), which no listener
//! wants: the text goes to a voice that speaks its language, is refused, or, a stray word in
//! other text, is left out.

/// Whether `c` is a Chinese ideograph (the unified blocks, their extensions and
/// compatibility forms, and 〇).
pub fn is_ideograph(c: char) -> bool {
    matches!(c,
        '\u{3007}'
        | '\u{3400}'..='\u{4dbf}'
        | '\u{4e00}'..='\u{9fff}'
        | '\u{f900}'..='\u{faff}'
        | '\u{20000}'..='\u{3134f}')
}

/// Whether `c` is Japanese kana (hiragana, katakana, half-width katakana).
pub fn is_kana(c: char) -> bool {
    matches!(c,
        '\u{3041}'..='\u{309f}'
        | '\u{30a0}'..='\u{30ff}'
        | '\u{31f0}'..='\u{31ff}'
        | '\u{ff66}'..='\u{ff9f}')
}

/// Whether `c` is a Korean syllable block or jamo.
pub fn is_hangul(c: char) -> bool {
    matches!(c,
        '\u{1100}'..='\u{11ff}'
        | '\u{3130}'..='\u{318f}'
        | '\u{ac00}'..='\u{d7af}')
}

/// A writing system that voices of languages written otherwise spell out letter by letter.
/// (Latin needs no entry; Devanagari, Georgian, Armenian and others espeak-ng transliterates
/// into words of a kind, which is as well as such a voice can.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writing {
    /// Chinese ideographs, also written in Japanese.
    Han,
    /// Japanese kana.
    Kana,
    Hangul,
    Arabic,
    Hebrew,
    Cyrillic,
    Greek,
    Thai,
}

impl Writing {
    /// The writing system `c` belongs to, when it is one of these.
    pub fn of(c: char) -> Option<Self> {
        Some(match c {
            c if is_ideograph(c) => Self::Han,
            c if is_kana(c) => Self::Kana,
            c if is_hangul(c) => Self::Hangul,
            '\u{0600}'..='\u{06ff}'
            | '\u{0750}'..='\u{077f}'
            | '\u{08a0}'..='\u{08ff}'
            | '\u{fb50}'..='\u{fdff}'
            | '\u{fe70}'..='\u{feff}' => Self::Arabic,
            '\u{0590}'..='\u{05ff}' | '\u{fb1d}'..='\u{fb4f}' => Self::Hebrew,
            '\u{0400}'..='\u{052f}' | '\u{1c80}'..='\u{1c8f}' | '\u{a640}'..='\u{a69f}' => {
                Self::Cyrillic
            }
            '\u{0370}'..='\u{03ff}' | '\u{1f00}'..='\u{1fff}' => Self::Greek,
            '\u{0e00}'..='\u{0e7f}' => Self::Thai,
            _ => return None,
        })
    }

    /// The languages (primary subtags) written in it, the most widely read first: the one
    /// assumed when the text does not tell.
    pub fn languages(self) -> &'static [&'static str] {
        match self {
            Self::Han => &["zh", "ja"],
            Self::Kana => &["ja"],
            Self::Hangul => &["ko"],
            Self::Arabic => &["ar", "fa", "ur", "ps", "ku", "sd", "ug"],
            Self::Hebrew => &["he", "yi"],
            Self::Cyrillic => &["ru", "uk", "bg", "sr", "mk", "be", "kk", "ky", "tt", "ba"],
            Self::Greek => &["el", "grc"],
            Self::Thai => &["th"],
        }
    }

    /// Whether a voice of `language` (a primary subtag) reads it as words: a Chinese voice
    /// reads kana as a Japanese voice reads ideographs, closely enough for a stray one.
    pub fn read_by(self, language: &str) -> bool {
        match self {
            Self::Han | Self::Kana => ["zh", "ja"].contains(&language),
            _ => self.languages().contains(&language),
        }
    }
}

/// The language (a primary subtag) of a sentence written mostly (at least half its letters)
/// in one of the [`Writing`] systems: Japanese when ideographs come with any kana, Chinese
/// for ideographs alone; among the languages of Cyrillic or Arabic letters, the one the text
/// surely looks like (whatlang's trigrams), else the first. `None` for any other sentence, which a
/// stray foreign word does not change.
pub fn foreign_language(sentence: &str) -> Option<&'static str> {
    let mut letters = 0usize;
    let mut counts = [0usize; 8];
    for c in sentence.chars().filter(|c| c.is_alphabetic()) {
        letters += 1;
        if let Some(writing) = Writing::of(c) {
            counts[writing as usize] += 1;
        }
    }
    let cjk = counts[Writing::Han as usize] + counts[Writing::Kana as usize];
    if cjk > 0 && cjk * 2 >= letters {
        return Some(match counts[Writing::Kana as usize] {
            0 => "zh",
            _ => "ja",
        });
    }
    let (index, most) = counts.iter().enumerate().max_by_key(|(_, n)| **n)?;
    if *most == 0 || most * 2 < letters {
        return None;
    }
    let writing = [
        Writing::Han,
        Writing::Kana,
        Writing::Hangul,
        Writing::Arabic,
        Writing::Hebrew,
        Writing::Cyrillic,
        Writing::Greek,
        Writing::Thai,
    ][index];
    let languages = writing.languages();
    // A guess whatlang is unsure of (short text) keeps the first.
    let told = whatlang::detect(sentence)
        .filter(whatlang::Info::is_reliable)
        .and_then(|info| match info.lang().code() {
            // Iranian Persian, which ISO 639-1 knows as Persian.
            "pes" => Some("fa"),
            code => isolang::Language::from_639_3(code)?.to_639_1(),
        })
        .and_then(|code| languages.iter().find(|l| **l == code));
    Some(told.copied().unwrap_or(languages[0]))
}

/// `text` without the letters a voice of `language` would spell out, each run of them a
/// space; `None` when it has none.
pub fn without_unreadable(text: &str, language: &str) -> Option<String> {
    let unreadable = |c: char| Writing::of(c).is_some_and(|w| !w.read_by(language));
    if !text.chars().any(unreadable) {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match unreadable(c) {
            true if !out.ends_with(' ') => out.push(' '),
            true => {}
            false => out.push(c),
        }
    }
    Some(out)
}

/// The language's name in English, for messages.
pub fn language_name(tag: &str) -> &'static str {
    match tag {
        "zh" => "Chinese",
        "ja" => "Japanese",
        "ko" => "Korean",
        "ar" => "Arabic",
        "fa" => "Persian",
        "ur" => "Urdu",
        "he" => "Hebrew",
        "ru" => "Russian",
        "uk" => "Ukrainian",
        "bg" => "Bulgarian",
        "sr" => "Serbian",
        "el" => "Greek",
        "th" => "Thai",
        _ => "another language",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentences_mostly_in_ideographs_or_kana_are_chinese_or_japanese() {
        assert_eq!(foreign_language("你好世界今天天气很好"), Some("zh"));
        assert_eq!(foreign_language("我们用AI来合成语音。"), Some("zh"));
        assert_eq!(foreign_language("こんにちは、世界。"), Some("ja"));
        assert_eq!(foreign_language("東京に行きます"), Some("ja"));
        assert_eq!(foreign_language("I visited 北京 last year."), None);
        assert_eq!(foreign_language("Hello, world."), None);
        assert_eq!(foreign_language("123 !?"), None);
        assert_eq!(foreign_language(""), None);
    }

    #[test]
    fn sentences_in_other_spelled_out_writing_systems_name_their_language() {
        assert_eq!(foreign_language("안녕하세요 여러분"), Some("ko"));
        assert_eq!(foreign_language("مرحبا بكم في بيتنا الجميل"), Some("ar"));
        assert_eq!(foreign_language("שלום עולם, מה שלומך היום?"), Some("he"));
        assert_eq!(foreign_language("Καλημέρα κόσμε, τι κάνεις;"), Some("el"));
        assert_eq!(foreign_language("สวัสดีครับ ยินดีต้อนรับ"), Some("th"));
        assert_eq!(
            foreign_language("Привет, как у тебя дела сегодня?"),
            Some("ru")
        );
        // Cyrillic that reads as Ukrainian is Ukrainian.
        assert_eq!(
            foreign_language("Доброго ранку, як справи? Це дуже гарний день і я щасливий."),
            Some("uk")
        );
        // Devanagari is transliterated, not spelled: no entry.
        assert_eq!(foreign_language("नमस्ते दुनिया"), None);
        assert_eq!(foreign_language("I love борщ and blini."), None);
    }

    #[test]
    fn stray_letters_a_voice_would_spell_leave_a_space() {
        assert_eq!(
            without_unreadable("I visited 北京 last year.", "en").as_deref(),
            Some("I visited  last year.")
        );
        assert_eq!(without_unreadable("a中b", "en").as_deref(), Some("a b"));
        assert_eq!(without_unreadable("plain", "en"), None);
        assert_eq!(
            without_unreadable("Tchaikovsky (Чайковский) wrote it.", "en").as_deref(),
            Some("Tchaikovsky ( ) wrote it.")
        );
        // A voice of the language keeps them, and a Chinese voice keeps kana.
        assert_eq!(without_unreadable("Чайковский", "ru"), None);
        assert_eq!(without_unreadable("北京とです", "zh"), None);
        assert_eq!(without_unreadable("Привет", "el").as_deref(), Some(" "));
    }
}
