//! A word of ideographs → its pinyin, one syllable per ideograph, as pypinyin reads it for
//! misaki: the word is cut again into the longest phrases of pypinyin's phrase table (from
//! the left, a phrase only where the table has one), each phrase read as the table says and
//! every other ideograph by its own most common reading. The neutral tone is `5`, `ü` is `v`.
//!
//! The tables are pypinyin 0.55.0's (MIT licensed; scripts/mandarin_dictionary.py writes them,
//! scripts/mandarin-assets.sh installs them in [`super::dir`]), read and parsed once, on first
//! use, and shared by every request.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::OnceLock;

use parking_lot::Mutex;

struct Dictionary {
    /// Each ideograph's reading alone.
    characters: HashMap<char, &'static str>,
    /// Each phrase's readings, or `None` where they are its characters' own.
    phrases: HashMap<&'static str, Option<Vec<&'static str>>>,
    /// Every beginning of a phrase (the phrases included), which the cut walks along.
    prefixes: HashSet<&'static str>,
}

/// The tables of [`super::dir`], read on the first call that finds them; the error (files
/// missing or unreadable) is not kept, so tables installed later are read then.
fn dictionary() -> Result<&'static Dictionary, String> {
    static DICTIONARY: OnceLock<Dictionary> = OnceLock::new();
    static LOADING: Mutex<()> = Mutex::new(());
    if let Some(dictionary) = DICTIONARY.get() {
        return Ok(dictionary);
    }
    let _loading = LOADING.lock();
    if let Some(dictionary) = DICTIONARY.get() {
        return Ok(dictionary);
    }
    let dictionary = load(super::dir())?;
    Ok(DICTIONARY.get_or_init(|| dictionary))
}

/// Reads and parses the tables of `dir`; their text is kept for good (the maps borrow it).
fn load(dir: &Path) -> Result<Dictionary, String> {
    if let Some(why) = super::missing_in(dir) {
        return Err(why);
    }
    let read = |name: &str| -> Result<&'static str, String> {
        let path = dir.join(name);
        std::fs::read_to_string(&path)
            .map(|text| &*Box::leak(text.into_boxed_str()))
            .map_err(|e| format!("{}: {e}", path.display()))
    };
    let [characters, phrases] = super::TABLES;
    let (characters, phrases) = (read(characters)?, read(phrases)?);
    let rows = |table: &'static str| {
        table
            .lines()
            .filter(|line| !line.starts_with('#'))
            .filter_map(|line| line.split_once('\t'))
    };
    let characters = rows(characters)
        .filter_map(|(c, reading)| Some((c.chars().next()?, reading)))
        .collect();
    let mut phrase_map = HashMap::new();
    let mut prefixes = HashSet::new();
    for (phrase, readings) in rows(phrases) {
        let readings = (!readings.is_empty()).then(|| readings.split(' ').collect());
        phrase_map.insert(phrase, readings);
        for (at, _) in phrase.char_indices().skip(1) {
            prefixes.insert(&phrase[..at]);
        }
        prefixes.insert(phrase);
    }
    Ok(Dictionary {
        characters,
        phrases: phrase_map,
        prefixes,
    })
}

/// Loads the tables now (they load on first use otherwise): for a server that would rather
/// pay at startup, and for the benchmark that measures it.
pub fn preload() -> Result<(), String> {
    dictionary().map(|_| ())
}

/// The pinyin of each ideograph of `word` (ideographs only), in order; an ideograph the
/// tables lack has none (every one, where the tables are not installed).
pub(super) fn syllables(word: &str) -> Vec<&'static str> {
    let Ok(dictionary) = dictionary() else {
        return Vec::new();
    };
    let mut out = Vec::with_capacity(word.chars().count());
    for piece in cut(word, dictionary) {
        match dictionary.phrases.get(piece) {
            Some(Some(readings)) => out.extend(readings.iter().copied()),
            _ => out.extend(
                piece
                    .chars()
                    .filter_map(|c| dictionary.characters.get(&c).copied()),
            ),
        }
    }
    out
}

/// pypinyin's cut of a word: the longest phrase from the left while the text read so far
/// begins some phrase; a single ideograph where no phrase begins here; and, when the rest of
/// the word begins a phrase without holding one, the rest ideograph by ideograph.
fn cut<'a>(word: &'a str, dictionary: &Dictionary) -> Vec<&'a str> {
    let mut pieces = Vec::new();
    let mut rest = word;
    while !rest.is_empty() {
        let mut longest = None;
        let mut ran_out = true;
        for end in rest
            .char_indices()
            .skip(1)
            .map(|(at, _)| at)
            .chain([rest.len()])
        {
            let candidate = &rest[..end];
            if !dictionary.prefixes.contains(candidate) {
                ran_out = false;
                break;
            }
            if dictionary.phrases.contains_key(candidate) {
                longest = Some(end);
            }
        }
        match longest {
            Some(end) => {
                pieces.push(&rest[..end]);
                rest = &rest[end..];
            }
            None if ran_out => {
                pieces.extend(
                    rest.char_indices()
                        .map(|(at, c)| &rest[at..at + c.len_utf8()]),
                );
                rest = "";
            }
            None => {
                let first = rest.chars().next().map_or(0, char::len_utf8);
                pieces.push(&rest[..first]);
                rest = &rest[first..];
            }
        }
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phrases_choose_readings_that_characters_alone_would_not() {
        preload().expect("the pinyin tables (scripts/mandarin-assets.sh)");
        // 行 alone is xing2; in 银行 it is hang2. 长 alone is chang2; in 长大 zhang3.
        assert_eq!(syllables("行"), ["xing2"]);
        assert_eq!(syllables("银行"), ["yin2", "hang2"]);
        assert_eq!(syllables("长大"), ["zhang3", "da4"]);
        assert_eq!(syllables("的"), ["de5"]);
        assert_eq!(syllables("女"), ["nv3"]);
        assert!(syllables("abc").is_empty());
    }

    #[test]
    fn the_cut_takes_the_longest_phrase_from_the_left() {
        let dictionary = dictionary().expect("the pinyin tables (scripts/mandarin-assets.sh)");
        assert_eq!(cut("中华人民共和国", dictionary), ["中华人民共和国"]);
        let pieces = cut("银行行长", dictionary);
        assert_eq!(pieces.concat(), "银行行长");
        assert_eq!(pieces[0], "银行");
    }

    #[test]
    fn missing_tables_are_an_error_naming_the_setup_script() {
        let empty = tempfile::tempdir().unwrap();
        let Err(why) = load(empty.path()) else {
            panic!("tables read from an empty directory");
        };
        assert!(why.contains(super::super::SETUP_SCRIPT), "{why}");
        assert!(
            why.contains("characters.tsv") && why.contains("phrases.tsv"),
            "{why}"
        );
    }
}
