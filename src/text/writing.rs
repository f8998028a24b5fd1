//! Which writing system a sentence is in, where that decides who may read it: text in Chinese
//! ideographs or Japanese kana is never handed to a voice that cannot read them (espeak-ng
//! spells each ideograph as "Chinese letter"); it goes to a voice that speaks its language,
//! is refused, or, a stray ideograph in other text, is left out.

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

fn is_cjk(c: char) -> bool {
    is_ideograph(c) || is_kana(c)
}

/// The language (`zh`, `ja`) of a sentence written mostly (at least half its letters) in
/// ideographs or kana: Japanese when it has kana, else Chinese. `None` for any other
/// sentence, which a stray ideograph does not change.
pub fn cjk_language(sentence: &str) -> Option<&'static str> {
    let (mut letters, mut cjk, mut kana) = (0usize, 0usize, false);
    for c in sentence.chars().filter(|c| c.is_alphabetic()) {
        letters += 1;
        if is_cjk(c) {
            cjk += 1;
            kana |= is_kana(c);
        }
    }
    match cjk > 0 && cjk * 2 >= letters {
        false => None,
        true if kana => Some("ja"),
        true => Some("zh"),
    }
}

/// `text` without its ideographs and kana, each run of them a space, for a voice that would
/// spell them out; `None` when it has none.
pub fn without_cjk(text: &str) -> Option<String> {
    if !text.chars().any(is_cjk) {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match is_cjk(c) {
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
        _ => "another language",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentences_mostly_in_ideographs_or_kana_are_chinese_or_japanese() {
        assert_eq!(cjk_language("你好世界今天天气很好"), Some("zh"));
        assert_eq!(cjk_language("我们用AI来合成语音。"), Some("zh"));
        assert_eq!(cjk_language("こんにちは、世界。"), Some("ja"));
        assert_eq!(cjk_language("東京に行きます"), Some("ja"));
        assert_eq!(cjk_language("I visited 北京 last year."), None);
        assert_eq!(cjk_language("Hello, world."), None);
        assert_eq!(cjk_language("123 !?"), None);
        assert_eq!(cjk_language(""), None);
    }

    #[test]
    fn stray_ideographs_leave_a_space() {
        assert_eq!(
            without_cjk("I visited 北京 last year.").as_deref(),
            Some("I visited  last year.")
        );
        assert_eq!(without_cjk("a中b").as_deref(), Some("a b"));
        assert_eq!(without_cjk("plain"), None);
    }
}
