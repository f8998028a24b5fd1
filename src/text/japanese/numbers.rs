//! Numbers read in Japanese, as misaki reads them before tagging: each run of digits becomes
//! its kana reading (2024 → にせんにじゅうよん), with the sound changes of 300, 600, 800,
//! 3000, 8000 and of 1000 inside a larger number (さんびゃく, ろっぴゃく, いっせん …), up to
//! nine digits. Longer runs, which misaki does not read, are read digit by digit.

const DIGITS: [&str; 10] = [
    "ゼロ",
    "いち",
    "に",
    "さん",
    "よん",
    "ご",
    "ろく",
    "なな",
    "はち",
    "きゅう",
];
const TEN: &str = "じゅう";
const HUNDRED: &str = "ひゃく";
const THOUSAND: &str = "せん";
const TEN_THOUSAND: &str = "まん";
const HUNDRED_MILLION: &str = "おく";
/// The longest run read as one number.
const MAX_DIGITS: usize = 9;

fn digit(d: u8) -> &'static str {
    DIGITS[(d - b'0') as usize]
}

/// 0–99 from two digits (a leading 0 reads the second digit alone).
fn tens(n: &[u8]) -> String {
    match n {
        [b'0', d] => digit(*d).to_string(),
        [b'1', b'0'] => TEN.to_string(),
        [b'1', d] => format!("{TEN}{}", digit(*d)),
        [t, b'0'] => format!("{}{TEN}", digit(*t)),
        [t, d] => format!("{}{TEN}{}", digit(*t), digit(*d)),
        _ => String::new(),
    }
}

/// 100–999 from three digits, the first not 0.
fn hundreds(n: &[u8]) -> String {
    let mut out = match n[0] {
        b'1' => HUNDRED.to_string(),
        b'3' => "さんびゃく".to_string(),
        b'6' => "ろっぴゃく".to_string(),
        b'8' => "はっぴゃく".to_string(),
        d => format!("{}{HUNDRED}", digit(d)),
    };
    if &n[1..] != b"00" {
        if n[1] == b'0' {
            out.push_str(digit(n[2]));
        } else {
            out.push_str(&tens(&n[1..]));
        }
    }
    out
}

/// Up to four digits; a leading 1 of a thousand is いっせん inside a larger number.
fn thousands(n: &[u8], stand_alone: bool) -> String {
    let n = match n.iter().position(|&d| d != b'0') {
        Some(first) => &n[first..],
        None => return String::new(),
    };
    match n.len() {
        1 => return digit(n[0]).to_string(),
        2 => return tens(n),
        3 => return hundreds(n),
        _ => {}
    }
    let mut out = match n[0] {
        b'1' if stand_alone => THOUSAND.to_string(),
        b'1' => "いっせん".to_string(),
        b'3' => "さんぜん".to_string(),
        b'8' => "はっせん".to_string(),
        d => format!("{}{THOUSAND}", digit(d)),
    };
    if &n[1..] != b"000" {
        if n[1] == b'0' {
            out.push_str(&tens(&n[2..]));
        } else {
            out.push_str(&hundreds(&n[1..]));
        }
    }
    out
}

/// Five to nine digits: the ten-thousands (and hundred-millions) before the last four.
fn large(n: &[u8]) -> String {
    let (high, low) = n.split_at(n.len() - 4);
    let mut out = match high.len() {
        1 => digit(high[0]).to_string(),
        2 => tens(high),
        3 => hundreds(high),
        4 => thousands(high, false),
        _ => {
            let mut out = format!("{}{HUNDRED_MILLION}", digit(high[0]));
            out.push_str(&thousands(&high[1..], false));
            if &high[1..] == b"0000" {
                return out + &thousands(low, false);
            }
            out
        }
    };
    out.push_str(TEN_THOUSAND);
    out + &thousands(low, false)
}

/// The reading of a run of ASCII digits.
pub(super) fn read_number(digits: &str) -> String {
    let bytes = digits.as_bytes();
    if bytes.len() > MAX_DIGITS {
        return bytes.iter().map(|&d| digit(d)).collect();
    }
    let first = bytes
        .iter()
        .position(|&d| d != b'0')
        .unwrap_or(bytes.len() - 1);
    let n = &bytes[first..];
    match n.len() {
        1 => digit(n[0]).to_string(),
        2 => tens(n),
        3 => hundreds(n),
        4 => thousands(n, true),
        _ => large(n),
    }
}

#[cfg(test)]
mod tests {
    use super::read_number;

    /// Readings a Japanese speaker checks at a glance, with each sound change and each zero
    /// case once (not copied from misaki: the oracle test compares whole sentences).
    #[test]
    fn numbers_read_with_their_sound_changes() {
        for (digits, kana) in [
            ("0", "ゼロ"),
            ("007", "なな"),
            ("10", "じゅう"),
            ("15", "じゅうご"),
            ("40", "よんじゅう"),
            ("99", "きゅうじゅうきゅう"),
            ("100", "ひゃく"),
            ("105", "ひゃくご"),
            ("300", "さんびゃく"),
            ("650", "ろっぴゃくごじゅう"),
            ("800", "はっぴゃく"),
            ("1000", "せん"),
            ("1500", "せんごひゃく"),
            ("3000", "さんぜん"),
            ("8008", "はっせんはち"),
            ("2024", "にせんにじゅうよん"),
            ("10000", "いちまん"),
            ("11000", "いちまんいっせん"),
            ("120000", "じゅうにまん"),
            ("10000000", "いっせんまん"),
            ("100000000", "いちおく"),
            ("120000000", "いちおくにせんまん"),
            (
                "123456789",
                "いちおくにせんさんびゃくよんじゅうごまんろくせんななひゃくはちじゅうきゅう",
            ),
            ("1234567890", "いちにさんよんごろくななはちきゅうゼロ"),
        ] {
            assert_eq!(read_number(digits), kana, "{digits}");
        }
    }
}
