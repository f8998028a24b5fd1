//! Japanese text as misaki cleans it before tagging: a wave dash before a number is "から"
//! (10〜20 = from 10 to 20), the small katakana of Ainu are their full-size kana, NFKC folds
//! full-width Latin and digits and half-width katakana, three curly quotes become straight
//! ones (as mojimoji does after NFKC), and each run of digits becomes its kana reading with a
//! space before it.

use unicode_normalization::UnicodeNormalization;

use super::numbers::read_number;

/// The small katakana of U+31F0…U+31FF and the kana each stands for.
const SMALL_KATAKANA: [(char, char); 16] = [
    ('ㇰ', 'ク'),
    ('ㇱ', 'シ'),
    ('ㇲ', 'ス'),
    ('ㇳ', 'ト'),
    ('ㇴ', 'ヌ'),
    ('ㇵ', 'ハ'),
    ('ㇶ', 'ヒ'),
    ('ㇷ', 'フ'),
    ('ㇸ', 'ヘ'),
    ('ㇹ', 'ホ'),
    ('ㇺ', 'ム'),
    ('ㇻ', 'ラ'),
    ('ㇼ', 'リ'),
    ('ㇽ', 'ル'),
    ('ㇾ', 'レ'),
    ('ㇿ', 'ロ'),
];

fn is_digit(c: char) -> bool {
    c.is_ascii_digit() || ('０'..='９').contains(&c)
}

pub(super) fn normalize(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut dashed = String::with_capacity(text.len());
    for (i, &c) in chars.iter().enumerate() {
        if matches!(c, '〜' | '～') && chars.get(i + 1).copied().is_some_and(is_digit) {
            dashed.push_str("から");
        } else if let Some(&(_, kana)) = SMALL_KATAKANA.iter().find(|(small, _)| *small == c) {
            dashed.push(kana);
        } else {
            dashed.push(c);
        }
    }
    let folded: String = dashed
        .nfkc()
        .map(|c| match c {
            '\u{2018}' => '`',
            '\u{2019}' => '\'',
            '\u{201d}' => '"',
            c => c,
        })
        .collect();
    let mut out = String::with_capacity(folded.len() * 2);
    let mut rest = folded.as_str();
    while let Some(start) = rest.find(|c: char| c.is_ascii_digit()) {
        out.push_str(&rest[..start]);
        let len = rest[start..]
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len() - start);
        out.push(' ');
        out.push_str(&read_number(&rest[start..start + len]));
        rest = &rest[start + len..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::normalize;

    #[test]
    fn digits_become_kana_and_width_is_folded() {
        assert_eq!(normalize("ＡＢ１２"), "AB じゅうに");
        assert_eq!(normalize("10〜20"), " じゅうから にじゅう");
        assert_eq!(normalize("ｶﾀｶﾅ"), "カタカナ");
        assert_eq!(normalize("ㇰ”"), "ク\"");
    }
}
