//! Character-level clean-up: quotes, dashes and ellipses unified, characters that cannot be
//! spoken dropped, and emphasis marks that hug a word on one side removed.

/// Character-level clean-up of the spoken text: quotes, dashes, ellipses, symbols.
pub(super) fn unify(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '-' && chars.get(i + 1) == Some(&'-') && chars.get(i + 2) != Some(&'-') {
            // A typed em dash: "word--word" or "word -- word".
            out.push('—');
            i += 2;
            continue;
        }
        match unify_char(
            c,
            chars.get(i.wrapping_sub(1)).copied(),
            chars.get(i + 1).copied(),
        ) {
            Some(Replacement::Char(r)) => out.push(r),
            Some(Replacement::Str(s)) => out.push_str(s),
            None => {}
        }
        i += 1;
    }
    out
}

pub(super) enum Replacement {
    Char(char),
    Str(&'static str),
}

pub(super) fn unify_char(
    c: char,
    before: Option<char>,
    after: Option<char>,
) -> Option<Replacement> {
    use Replacement::{Char, Str};
    let between_digits =
        before.is_some_and(|b| b.is_ascii_digit()) && after.is_some_and(|a| a.is_ascii_digit());
    Some(match c {
        '“' | '”' | '„' | '‟' | '«' | '»' | '″' | '〝' | '〞' | '＂' => Char('"'),
        '‘' | '’' | '‚' | '‛' | '′' | '‹' | '›' | '＇' => Char('\''),
        // A range "1990–1995" keeps a hyphen; elsewhere dashes are one clause-separating dash.
        '–' | '‒' if between_digits => Char('-'),
        '–' | '‒' | '—' | '―' | '⸺' | '⸻' => Char('—'),
        '−' | '‐' | '‑' => Char('-'),
        '…' => Str("..."),
        '\t' | '\n' | '\r' => Char(' '),
        c if is_dropped(c) => return None,
        c if c.is_whitespace() => Char(' '),
        c => Char(c),
    })
}

/// Control and invisible formatting characters, and emoji with their modifiers: nothing in
/// them can be spoken.
pub(super) fn is_dropped(c: char) -> bool {
    let cp = c as u32;
    c.is_control()
        || matches!(cp,
            0x200B..=0x200F | 0x2060..=0x206F | 0xFEFF // zero-width, direction marks
            | 0xFE00..=0xFE0F // variation selectors
            | 0x1F000..=0x1FAFF // emoji, pictographs, flags, skin tones
            | 0x2600..=0x27BF // misc symbols, dingbats
            | 0x2B00..=0x2BFF // arrows and stars (⭐)
            | 0x231A..=0x231B | 0x23E9..=0x23FA // watch, hourglass, media keys
            | 0x25A0..=0x25FF // geometric shapes used as bullets
            | 0xE0000..=0xE007F // emoji tag sequences
            | 0x20E3 // keycap
        )
}

/// The text without its emphasis marks: runs of `*` or `_` (and `~~`) that hug a word on one
/// side only. Whether CommonMark pairs two runs into emphasis can depend on marks much later
/// on the line, so the choice is made by each run's neighbours alone, which text streamed in
/// pieces knows as soon as the run is followed by anything. `2 * 3`, `a*b*c`, `snake_case`
/// and `un**believ**able` keep theirs, so no two words become one.
pub(super) fn drop_marks(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let run = chars[i..].iter().take_while(|&&x| x == c).count();
        let is_mark = matches!(c, '*' | '_') || (c == '~' && run == 2);
        let is_word = |c: Option<&char>| c.is_some_and(|c| c.is_alphanumeric());
        let before = i.checked_sub(1).and_then(|j| chars.get(j));
        if !(is_mark && is_word(before) != is_word(chars.get(i + run))) {
            out.extend(&chars[i..i + run]);
        }
        i += run;
    }
    out
}
