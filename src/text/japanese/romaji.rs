//! Kana readings → the symbols Kokoro's Japanese voices were trained on: misaki's romanizer
//! (its adaptation of cutlet) reproduced, since those voices learnt misaki's symbols, its
//! grouping of words and its spaces, not IPA in general.
//!
//! Each word's reading (in hiragana) is written kana by kana: the table below for single kana
//! and for kana with a small kana after them, `ː` for the long-vowel mark, `ʔ` for the small
//! っ, ん by the sound after it (m, ŋ, ɲ, n or ɴ). Words that misaki's list keeps whole are
//! joined first; punctuation decides the spaces around it.

use std::collections::HashSet;

/// A word of the tagged text: what was written, its reading in hiragana, and its class
/// (6 for a word with a reading, else MeCab's character class: 3 for symbols).
#[derive(Debug, Clone)]
pub(super) struct Word {
    pub surface: String,
    pub reading: String,
    pub class: u8,
}

/// The class of a word the romanizer reads from its reading.
pub(super) const READ_CLASS: u8 = 6;
const SYMBOL_CLASS: u8 = 3;

/// Kana and marks → symbols: the symbol set of Kokoro's Japanese training data.
const KANA: &[(&str, &str)] = &[
    ("ぁ", "a"),
    ("あ", "a"),
    ("ぃ", "i"),
    ("い", "i"),
    ("ぅ", "ɯ"),
    ("う", "ɯ"),
    ("ぇ", "e"),
    ("え", "e"),
    ("ぉ", "o"),
    ("お", "o"),
    ("か", "ka"),
    ("が", "ɡa"),
    ("き", "kʲi"),
    ("ぎ", "ɡʲi"),
    ("く", "kɯ"),
    ("ぐ", "ɡɯ"),
    ("け", "ke"),
    ("げ", "ɡe"),
    ("こ", "ko"),
    ("ご", "ɡo"),
    ("さ", "sa"),
    ("ざ", "ʣa"),
    ("し", "ɕi"),
    ("じ", "ʥi"),
    ("す", "sɨ"),
    ("ず", "zɨ"),
    ("せ", "se"),
    ("ぜ", "ʣe"),
    ("そ", "so"),
    ("ぞ", "ʣo"),
    ("た", "ta"),
    ("だ", "da"),
    ("ち", "ʨi"),
    ("ぢ", "ʥi"),
    ("つ", "ʦɨ"),
    ("づ", "zɨ"),
    ("て", "te"),
    ("で", "de"),
    ("と", "to"),
    ("ど", "do"),
    ("な", "na"),
    ("に", "ɲi"),
    ("ぬ", "nɯ"),
    ("ね", "ne"),
    ("の", "no"),
    ("は", "ha"),
    ("ば", "ba"),
    ("ぱ", "pa"),
    ("ひ", "çi"),
    ("び", "bʲi"),
    ("ぴ", "pʲi"),
    ("ふ", "ɸɯ"),
    ("ぶ", "bɯ"),
    ("ぷ", "pɯ"),
    ("へ", "he"),
    ("べ", "be"),
    ("ぺ", "pe"),
    ("ほ", "ho"),
    ("ぼ", "bo"),
    ("ぽ", "po"),
    ("ま", "ma"),
    ("み", "mʲi"),
    ("む", "mɯ"),
    ("め", "me"),
    ("も", "mo"),
    ("ゃ", "ja"),
    ("や", "ja"),
    ("ゅ", "jɯ"),
    ("ゆ", "jɯ"),
    ("ょ", "jo"),
    ("よ", "jo"),
    ("ら", "ɾa"),
    ("り", "ɾʲi"),
    ("る", "ɾɯ"),
    ("れ", "ɾe"),
    ("ろ", "ɾo"),
    ("ゎ", "βa"),
    ("わ", "βa"),
    ("ゐ", "i"),
    ("ゑ", "e"),
    ("を", "o"),
    ("ゔ", "vɯ"),
    ("ゕ", "ka"),
    ("ゖ", "ke"),
    ("ヷ", "va"),
    ("ヸ", "vʲi"),
    ("ヹ", "ve"),
    ("ヺ", "vo"),
    ("いぇ", "je"),
    ("うぃ", "βi"),
    ("うぇ", "βe"),
    ("うぉ", "βo"),
    ("きぇ", "kʲe"),
    ("きゃ", "kʲa"),
    ("きゅ", "kʲɨ"),
    ("きょ", "kʲo"),
    ("ぎゃ", "ɡʲa"),
    ("ぎゅ", "ɡʲɨ"),
    ("ぎょ", "ɡʲo"),
    ("くぁ", "kᵝa"),
    ("くぃ", "kᵝi"),
    ("くぇ", "kᵝe"),
    ("くぉ", "kᵝo"),
    ("ぐぁ", "ɡᵝa"),
    ("ぐぃ", "ɡᵝi"),
    ("ぐぇ", "ɡᵝe"),
    ("ぐぉ", "ɡᵝo"),
    ("しぇ", "ɕe"),
    ("しゃ", "ɕa"),
    ("しゅ", "ɕɨ"),
    ("しょ", "ɕo"),
    ("じぇ", "ʥe"),
    ("じゃ", "ʥa"),
    ("じゅ", "ʥɨ"),
    ("じょ", "ʥo"),
    ("ちぇ", "ʨe"),
    ("ちゃ", "ʨa"),
    ("ちゅ", "ʨɨ"),
    ("ちょ", "ʨo"),
    ("ぢゃ", "ʥa"),
    ("ぢゅ", "ʥɨ"),
    ("ぢょ", "ʥo"),
    ("つぁ", "ʦa"),
    ("つぃ", "ʦʲi"),
    ("つぇ", "ʦe"),
    ("つぉ", "ʦo"),
    ("てぃ", "tʲi"),
    ("てゅ", "tʲɨ"),
    ("でぃ", "dʲi"),
    ("でゅ", "dʲɨ"),
    ("とぅ", "tɯ"),
    ("どぅ", "dɯ"),
    ("にぇ", "ɲe"),
    ("にゃ", "ɲa"),
    ("にゅ", "ɲɨ"),
    ("にょ", "ɲo"),
    ("ひぇ", "çe"),
    ("ひゃ", "ça"),
    ("ひゅ", "çɨ"),
    ("ひょ", "ço"),
    ("びゃ", "bʲa"),
    ("びゅ", "bʲɨ"),
    ("びょ", "bʲo"),
    ("ぴゃ", "pʲa"),
    ("ぴゅ", "pʲɨ"),
    ("ぴょ", "pʲo"),
    ("ふぁ", "ɸa"),
    ("ふぃ", "ɸʲi"),
    ("ふぇ", "ɸe"),
    ("ふぉ", "ɸo"),
    ("ふゅ", "ɸʲɨ"),
    ("ふょ", "ɸʲo"),
    ("みゃ", "mʲa"),
    ("みゅ", "mʲɨ"),
    ("みょ", "mʲo"),
    ("りゃ", "ɾʲa"),
    ("りゅ", "ɾʲɨ"),
    ("りょ", "ɾʲo"),
    ("ゔぁ", "va"),
    ("ゔぃ", "vʲi"),
    ("ゔぇ", "ve"),
    ("ゔぉ", "vo"),
    ("ゔゅ", "bʲɨ"),
    ("ゔょ", "bʲo"),
    ("。", "."),
    ("、", ","),
    ("？", "?"),
    ("！", "!"),
    ("「", "\u{201c}"),
    ("」", "\u{201d}"),
    ("『", "\u{201c}"),
    ("』", "\u{201d}"),
    ("：", ":"),
    ("；", ";"),
    ("（", "("),
    ("）", ")"),
    ("《", "("),
    ("》", ")"),
    ("【", "["),
    ("】", "]"),
    ("・", " "),
    ("，", ","),
    ("～", "—"),
    ("〜", "—"),
    ("—", "—"),
    ("«", "\u{201c}"),
    ("»", "\u{201d}"),
    ("\u{309a}", ""),
    ("\u{3099}", ""),
];

const SMALL_KANA: &[char] = &['ゃ', 'ゅ', 'ょ', 'ぁ', 'ぃ', 'ぅ', 'ぇ', 'ぉ'];
const ITERATION_MARKS: &[char] = &['〃', '々', 'ゝ', 'ゞ', 'ヽ'];
const VOICELESS: &str = "かきくけこさしすせそたちつてとはひふへほ";
const VOICED: &str = "がぎぐげござじずぜぞだぢづでどばびぶべぼ";

/// The symbol table, looked up by one kana or two.
pub(super) struct Romanizer {
    table: std::collections::HashMap<&'static str, &'static str>,
    whole_words: HashSet<String>,
    /// Characters of the longest of `whole_words`.
    longest_word: usize,
}

struct Piece {
    text: String,
    space: bool,
}

impl Romanizer {
    pub fn new(whole_words: HashSet<String>) -> Self {
        Self {
            table: KANA.iter().copied().collect(),
            longest_word: whole_words
                .iter()
                .map(|w| w.chars().count())
                .max()
                .unwrap_or(0),
            whole_words,
        }
    }

    pub fn whole_words(&self) -> usize {
        self.whole_words.len()
    }

    fn get(&self, key: &str) -> Option<&'static str> {
        self.table.get(key).copied()
    }

    fn get_char(&self, c: char) -> Option<&'static str> {
        self.get(c.encode_utf8(&mut [0; 4]))
    }

    fn pair(&self, a: char, b: char) -> Option<&'static str> {
        let mut key = String::with_capacity(8);
        key.push(a);
        key.push(b);
        self.get(&key)
    }

    /// The symbols of `words`, spaced and punctuated as misaki writes them.
    pub fn romanize(&self, words: &[Word]) -> String {
        let words = self.join_whole_words(words);
        let mut pieces: Vec<Piece> = Vec::with_capacity(words.len());
        for word in &words {
            let text = self.word(word);
            let surface = word.surface.as_str();
            let mut piece = Piece { text, space: false };
            if "「『«".contains(surface) || "([".contains(piece.text.as_str()) {
                if let Some(previous) = pieces.last_mut() {
                    previous.space = true;
                }
            } else if "」』»".contains(surface) || "]).,?!:".contains(piece.text.as_str()) {
                if let Some(previous) = pieces.last_mut() {
                    previous.space = false;
                }
                piece.space = true;
            } else {
                piece.space = piece.text != " ";
            }
            pieces.push(piece);
        }
        let mut out = String::new();
        for piece in &pieces {
            out.extend(piece.text.chars().filter(|&c| c != 'っ'));
            if piece.space {
                out.push(' ');
            }
        }
        tidy(&out)
    }

    /// Runs of words of one class that misaki's list holds as one word become that word,
    /// longest first.
    fn join_whole_words(&self, words: &[Word]) -> Vec<Word> {
        let mut joined = Vec::with_capacity(words.len());
        let mut i = 0;
        while i < words.len() {
            let run_end = (i + 1..words.len())
                .find(|&z| words[z].class != words[i].class)
                .unwrap_or(words.len());
            // No listed word is longer than the longest: runs beyond it need no look-up,
            // which keeps a long run of one class linear rather than quadratic.
            let mut longest_end = i + 1;
            let mut chars = words[i].surface.chars().count();
            while longest_end < run_end {
                chars += words[longest_end].surface.chars().count();
                if chars > self.longest_word {
                    break;
                }
                longest_end += 1;
            }
            let end = (i + 1..=longest_end).rev().find(|&j| {
                let surface: String = words[i..j].iter().map(|w| w.surface.as_str()).collect();
                self.whole_words.contains(&surface)
            });
            match end {
                Some(j) => {
                    joined.push(Word {
                        surface: words[i..j].iter().map(|w| w.surface.as_str()).collect(),
                        reading: words[i..j].iter().map(|w| w.reading.as_str()).collect(),
                        class: words[i].class,
                    });
                    i = j;
                }
                None => {
                    joined.push(words[i].clone());
                    i += 1;
                }
            }
        }
        joined
    }

    fn word(&self, word: &Word) -> String {
        if word.surface.is_ascii() {
            return word.surface.clone();
        }
        if word.class == SYMBOL_CLASS {
            return word
                .surface
                .chars()
                .map(|c| {
                    self.get_char(c)
                        .map_or_else(|| c.to_string(), str::to_string)
                })
                .collect();
        }
        if word.class != READ_CLASS {
            return String::new();
        }
        let kana: Vec<char> = word.reading.chars().collect();
        let mut out = String::new();
        for (i, &k) in kana.iter().enumerate() {
            let previous = i.checked_sub(1).map(|p| kana[p]);
            let next = kana.get(i + 1).copied();
            self.kana(previous, k, next, &mut out);
        }
        out
    }

    /// One kana's symbols, which depend on the kana either side.
    fn kana(&self, previous: Option<char>, k: char, next: Option<char>, out: &mut String) {
        if ITERATION_MARKS.contains(&k) {
            match (k, previous) {
                // misaki repeats the kana itself here, not its symbols.
                ('ゝ' | 'ヽ', Some(p)) => out.push(p),
                ('ゞ', Some(p)) => {
                    if let Some(i) = VOICELESS.chars().position(|v| v == p) {
                        let voiced = VOICED.chars().nth(i).unwrap_or(p);
                        out.push_str(self.get_char(voiced).unwrap_or_default());
                    }
                }
                _ => {}
            }
            return;
        }
        if let Some(symbols) = previous.and_then(|p| self.pair(p, k)) {
            out.push_str(symbols);
            return;
        }
        if next.is_some_and(|n| self.pair(k, n).is_some()) {
            return;
        }
        if let Some(small) = next.filter(|n| SMALL_KANA.contains(n)) {
            if k != 'っ' {
                let base = self.get_char(k).unwrap_or_default();
                let mut base = base.chars();
                base.next_back();
                out.push_str(base.as_str());
                out.push_str(self.get_char(small).unwrap_or_default());
            }
            return;
        }
        if SMALL_KANA.contains(&k) {
            return;
        }
        match k {
            'ー' => out.push('ː'),
            'っ' => out.push('ʔ'),
            'ん' => out.push(self.syllabic_n(next)),
            _ => out.push_str(self.get_char(k).unwrap_or_default()),
        }
    }

    /// ん takes the place of the sound after it.
    fn syllabic_n(&self, next: Option<char>) -> char {
        let Some(following) = next.and_then(|n| self.get_char(n)) else {
            return 'ɴ';
        };
        match following.chars().next() {
            Some('m' | 'p' | 'b') => 'm',
            Some('k' | 'ɡ') => 'ŋ',
            Some('ɲ' | 'ʨ' | 'ʥ') => 'ɲ',
            Some('n' | 't' | 'd' | 'ɾ' | 'z') => 'n',
            _ => 'ɴ',
        }
    }
}

/// One space between words, none at the ends, parentheses as «», and a glottal stop bound to
/// the words either side of it (unless punctuation or an opening quote is there).
fn tidy(text: &str) -> String {
    let mut collapsed = String::with_capacity(text.len());
    for word in text.split_whitespace() {
        if !collapsed.is_empty() {
            collapsed.push(' ');
        }
        collapsed.push_str(word);
    }
    let chars: Vec<char> = collapsed
        .chars()
        .map(|c| match c {
            '(' => '«',
            ')' => '»',
            c => c,
        })
        .collect();
    let mut out = String::with_capacity(collapsed.len());
    for (i, &c) in chars.iter().enumerate() {
        if c == ' ' {
            let previous = i.checked_sub(1).map(|p| chars[p]);
            let next = chars.get(i + 1).copied();
            let before_stop =
                next == Some('ʔ') && !previous.is_some_and(|p| "!\",.:;?»—…”".contains(p));
            let after_stop = previous == Some('ʔ') && !next.is_some_and(|n| "\"«“".contains(n));
            if before_stop || after_stop {
                continue;
            }
        }
        out.push(c);
    }
    out
}
