//! The pronunciation dictionary: words and phrases said as their owner wants, whatever the
//! rules or espeak-ng would make of them.
//!
//! An entry says a word either with IPA phonemes (`Kokoro` → `kˈoʊkəɹoʊ`) or with a respelling,
//! an alias (`nginx` → "engine x"). Entries match whole words, ignoring case unless told, and
//! the longest match wins; the matches become [`Claim`]s that the English rules step around.
//! This module is the dictionary as data: its file formats, its validation and its matching.
//! Keeping it current, on disk and over HTTP, is the pipeline's business.

use std::collections::HashMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::pronunciation::{Claim, Say};

/// Most entries a dictionary holds: matching stays cheap and a file stays readable.
pub const MAX_ENTRIES: usize = 10_000;
/// Longest word or phrase, alias or IPA, in characters.
pub const MAX_FIELD_CHARS: usize = 200;

/// One word or phrase and how to say it: `ipa` or `alias`, exactly one of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// The word or phrase as written; spaces in it match any run of whitespace.
    pub word: String,
    /// How it is said, in IPA (`/…/` around it is allowed, as inline phonemes write it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipa: Option<String>,
    /// Words said in its place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    /// A language tag (`en`, `en-GB`): the entry applies to voices of that language only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    /// Whether `word` matches only as written (`US` but not "us").
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub case_sensitive: bool,
}

/// Why entries were refused, naming the entry and field as `entries[3].ipa`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct LexiconError {
    /// The field at fault, as a client wrote it (`entries[3].ipa`; `entries` for the list).
    pub field: String,
    pub message: String,
}

impl LexiconError {
    fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Entries, checked and indexed for matching. Cheap to share: requests hold the one they
/// started with, so a change never reaches a request half way.
#[derive(Debug, Clone, Default)]
pub struct Lexicon {
    entries: Vec<Entry>,
    /// Entries by the lower case of their first character, longest word first.
    by_first: HashMap<char, Vec<usize>>,
}

impl Lexicon {
    /// Checks every entry (an error names the first bad one) and tidies it: whitespace
    /// becomes single spaces and the IPA loses the slashes around it. Two entries for the
    /// same word and language are an error.
    pub fn new(entries: Vec<Entry>) -> Result<Self, LexiconError> {
        if entries.len() > MAX_ENTRIES {
            return Err(LexiconError::new(
                "entries",
                format!(
                    "the dictionary holds at most {MAX_ENTRIES} entries, not {}",
                    entries.len()
                ),
            ));
        }
        let entries = entries
            .into_iter()
            .enumerate()
            .map(|(i, entry)| tidy(entry, i))
            .collect::<Result<Vec<_>, _>>()?;
        let mut seen = HashMap::new();
        for (i, entry) in entries.iter().enumerate() {
            if let Some(first) = seen.insert(identity(entry), i) {
                return Err(LexiconError::new(
                    format!("entries[{i}].word"),
                    format!(
                        "'{}' is in the dictionary twice (entries {first} and {i}) for the same language",
                        entry.word
                    ),
                ));
            }
        }
        let mut by_first: HashMap<char, Vec<usize>> = HashMap::new();
        for (i, entry) in entries.iter().enumerate() {
            let first = entry
                .word
                .chars()
                .next()
                .expect("tidied words are not empty");
            by_first.entry(fold(first)).or_default().push(i);
        }
        for list in by_first.values_mut() {
            list.sort_by_key(|&i| std::cmp::Reverse(entries[i].word.len()));
        }
        Ok(Self { entries, by_first })
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// These entries with `changes` put in (an entry for the same word and language is
    /// replaced), checked as [`new`](Self::new) checks; `changes` are named `entries[i]`.
    pub fn with(&self, changes: Vec<Entry>) -> Result<Self, LexiconError> {
        let changes = changes
            .into_iter()
            .enumerate()
            .map(|(i, entry)| tidy(entry, i))
            .collect::<Result<Vec<_>, _>>()?;
        let replaced: std::collections::HashSet<_> = changes.iter().map(identity).collect();
        let mut entries: Vec<Entry> = self
            .entries
            .iter()
            .filter(|e| !replaced.contains(&identity(e)))
            .cloned()
            .collect();
        entries.extend(changes);
        Self::new(entries)
    }

    /// These entries without the ones for `word` (any language, or only `language`'s);
    /// `None` when there is none.
    pub fn without(&self, word: &str, language: Option<&str>) -> Option<Self> {
        let word = collapse(word);
        let keep: Vec<Entry> = self
            .entries
            .iter()
            .filter(|e| {
                let same_word = if e.case_sensitive {
                    e.word == word
                } else {
                    e.word.to_lowercase() == word.to_lowercase()
                };
                let same_language = language.is_none_or(|l| {
                    e.language
                        .as_deref()
                        .is_some_and(|el| el.eq_ignore_ascii_case(l))
                });
                !(same_word && same_language)
            })
            .cloned()
            .collect();
        if keep.len() == self.entries.len() {
            return None;
        }
        Some(Self::new(keep).expect("a subset of valid entries is valid"))
    }

    /// The entries that apply in `sentence` for a voice of `language`, as claims on the words
    /// they match: leftmost first, the longest at each place, never overlapping.
    pub fn claims(&self, sentence: &str, language: &str) -> Vec<Claim> {
        self.matches(sentence, language)
            .map(|(written, entry)| Claim {
                written,
                say: match (&entry.ipa, &entry.alias) {
                    (Some(ipa), _) => Say::Phonemes(ipa.clone()),
                    (None, Some(alias)) => Say::Alias(alias.clone()),
                    (None, None) => unreachable!("tidied entries say one or the other"),
                },
            })
            .collect()
    }

    /// A digest of the entries that apply in `text` for `language` (empty when none do): what
    /// cached audio of `text` depends on, so that changing an entry makes only the audio it
    /// affects miss.
    pub fn digest_of(&self, text: &str, language: &str) -> String {
        if self.entries.is_empty() {
            return String::new();
        }
        let mut used: Vec<&Entry> = self.matches(text, language).map(|(_, e)| e).collect();
        if used.is_empty() {
            return String::new();
        }
        used.sort_by(|a, b| (&a.word, &a.language).cmp(&(&b.word, &b.language)));
        used.dedup();
        let canonical = serde_json::to_vec(&used).expect("entries serialize");
        let digest = Sha256::digest(&canonical);
        digest[..12].iter().map(|b| format!("{b:02x}")).collect()
    }

    fn matches<'a>(
        &'a self,
        text: &'a str,
        language: &'a str,
    ) -> impl Iterator<Item = (Range<usize>, &'a Entry)> + 'a {
        let mut at = 0;
        std::iter::from_fn(move || {
            if self.entries.is_empty() {
                return None;
            }
            while at < text.len() {
                let c = text[at..].chars().next().expect("at a char boundary");
                let found = self.by_first.get(&fold(c)).and_then(|list| {
                    list.iter().map(|&i| &self.entries[i]).find_map(|entry| {
                        (applies(entry, language))
                            .then(|| match_at(text, at, entry))
                            .flatten()
                            .map(|end| (at..end, entry))
                    })
                });
                match found {
                    Some((range, entry)) => {
                        at = range.end;
                        return Some((range, entry));
                    }
                    None => at += c.len_utf8(),
                }
            }
            None
        })
    }
}

/// A dictionary file that is not the JSON or TOML it should be.
#[derive(Debug, thiserror::Error)]
pub enum FileFormatError {
    #[error("not a dictionary in JSON")]
    Json(#[source] serde_json::Error),
    #[error("not a dictionary in TOML")]
    Toml(#[source] toml::de::Error),
}

/// Reads a dictionary file: JSON (`{"entries": […]}` or a bare list) when the name ends in
/// `.json`, else TOML (`[[entries]]` tables).
pub fn parse_file(name: &str, content: &str) -> Result<Vec<Entry>, FileFormatError> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        #[serde(default)]
        entries: Vec<Entry>,
    }
    if name.to_ascii_lowercase().ends_with(".json") {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Json {
            List(Vec<Entry>),
            File(File),
        }
        match serde_json::from_str::<Json>(content) {
            Ok(Json::List(entries)) | Ok(Json::File(File { entries })) => Ok(entries),
            Err(_) => serde_json::from_str::<File>(content)
                .map(|f| f.entries)
                .map_err(FileFormatError::Json),
        }
    } else {
        toml::from_str::<File>(content)
            .map(|f| f.entries)
            .map_err(FileFormatError::Toml)
    }
}

/// The file [`parse_file`] reads back as `entries`, in the format `name` says.
pub fn file_content(name: &str, entries: &[Entry]) -> String {
    #[derive(Serialize)]
    struct File<'a> {
        entries: &'a [Entry],
    }
    if name.to_ascii_lowercase().ends_with(".json") {
        let mut json = serde_json::to_string_pretty(&File { entries }).expect("entries serialize");
        json.push('\n');
        json
    } else {
        let body = toml::to_string(&File { entries }).expect("entries serialize");
        format!("# omnivoice-server pronunciation dictionary (written by the server).\n{body}")
    }
}

/// The end of `entry`'s word matched at byte `at` of `text`, when it is there as whole words.
fn match_at(text: &str, at: usize, entry: &Entry) -> Option<usize> {
    let before = text[..at].chars().next_back();
    let word = &entry.word;
    let first = word.chars().next()?;
    if first.is_alphanumeric() && before.is_some_and(char::is_alphanumeric) {
        return None;
    }
    let mut rest = text[at..].char_indices().peekable();
    for w in word.chars() {
        if w == ' ' {
            let mut spaces = 0;
            while rest.next_if(|(_, c)| c.is_whitespace()).is_some() {
                spaces += 1;
            }
            if spaces == 0 {
                return None;
            }
            continue;
        }
        let (_, c) = rest.next()?;
        let same = if entry.case_sensitive {
            c == w
        } else {
            c == w || c.to_lowercase().eq(w.to_lowercase())
        };
        if !same {
            return None;
        }
    }
    let end = rest.peek().map_or(text.len(), |&(i, _)| at + i);
    let last = word.chars().next_back()?;
    let after = text[end..].chars().next();
    if last.is_alphanumeric() && after.is_some_and(char::is_alphanumeric) {
        return None;
    }
    Some(end)
}

/// Whether `entry` is for voices of `language` (`en` covers `en-US`).
fn applies(entry: &Entry, language: &str) -> bool {
    entry.language.as_deref().is_none_or(|wanted| {
        let (wanted, language) = (wanted.to_ascii_lowercase(), language.to_ascii_lowercase());
        language == wanted
            || language
                .strip_prefix(&wanted)
                .is_some_and(|rest| rest.starts_with(['-', '_']))
    })
}

/// What makes two entries the same entry: the word (its case too, when that matters) and
/// the language.
fn identity(entry: &Entry) -> (String, Option<String>) {
    let word = if entry.case_sensitive {
        entry.word.clone()
    } else {
        entry.word.to_lowercase()
    };
    (
        word,
        entry.language.as_ref().map(|l| l.to_ascii_lowercase()),
    )
}

fn fold(c: char) -> char {
    c.to_lowercase().next().unwrap_or(c)
}

fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Entry `i` checked and tidied.
fn tidy(mut entry: Entry, i: usize) -> Result<Entry, LexiconError> {
    let field = |name: &str| format!("entries[{i}].{name}");
    entry.word = collapse(&entry.word);
    check_text(&entry.word, &field("word"))?;
    if !entry.word.chars().any(char::is_alphanumeric) {
        return Err(LexiconError::new(
            field("word"),
            format!("'{}' has no letter or digit to match", entry.word),
        ));
    }
    match (&mut entry.ipa, &mut entry.alias) {
        (Some(_), Some(_)) | (None, None) => {
            return Err(LexiconError::new(
                field("ipa"),
                format!(
                    "the entry for '{}' needs exactly one of 'ipa' and 'alias'",
                    entry.word
                ),
            ))
        }
        (Some(ipa), None) => {
            let trimmed = ipa.trim();
            let bare = trimmed
                .strip_prefix('/')
                .and_then(|s| s.strip_suffix('/'))
                .unwrap_or(trimmed);
            *ipa = collapse(bare);
            check_text(ipa, &field("ipa"))?;
            check_ipa(ipa).map_err(|message| LexiconError::new(field("ipa"), message))?;
        }
        (None, Some(alias)) => {
            *alias = collapse(alias);
            check_text(alias, &field("alias"))?;
        }
    }
    if let Some(language) = &entry.language {
        let valid = language.split(['-', '_']).enumerate().all(|(n, part)| {
            let len_ok = if n == 0 {
                (2..=3).contains(&part.len())
            } else {
                (1..=8).contains(&part.len())
            };
            len_ok && part.chars().all(|c| c.is_ascii_alphanumeric())
        });
        if !valid {
            return Err(LexiconError::new(
                field("language"),
                format!("'{language}' is not a language tag such as 'en' or 'en-GB'"),
            ));
        }
    }
    Ok(entry)
}

fn check_text(text: &str, field: &str) -> Result<(), LexiconError> {
    let chars = text.chars().count();
    if chars == 0 {
        return Err(LexiconError::new(field, "must not be empty"));
    }
    if chars > MAX_FIELD_CHARS {
        return Err(LexiconError::new(
            field,
            format!("is {chars} characters long; the limit is {MAX_FIELD_CHARS}"),
        ));
    }
    if let Some(c) = text.chars().find(|c| c.is_control()) {
        return Err(LexiconError::new(
            field,
            format!("holds the control character U+{:04X}", c as u32),
        ));
    }
    Ok(())
}

/// Whether `ipa` is made of phonetic symbols: letters (IPA's are letters, and so are misaki's
/// capitals), modifier letters (stress, length), combining diacritics, ties, spaces and
/// syllable dots. Digits and punctuation are not phonemes. Whether a voice can say every
/// symbol is its own question, asked when a request uses the entry.
pub fn check_ipa(ipa: &str) -> Result<(), String> {
    let phonetic = |c: char| {
        c.is_alphabetic()
            || ('\u{300}'..='\u{36f}').contains(&c)
            || ('\u{2b0}'..='\u{2ff}').contains(&c)
            || ('\u{1d00}'..='\u{1dbf}').contains(&c)
            || matches!(c, ' ' | '.' | '‿' | '\u{361}' | '\u{35c}')
    };
    match ipa.chars().position(|c| !phonetic(c)) {
        None => Ok(()),
        Some(at) => {
            let c = ipa.chars().nth(at).expect("a position in the string");
            Err(format!(
                "'{c}' (U+{:04X}, character {} of /{ipa}/) is not a phonetic symbol",
                c as u32,
                at + 1
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipa(word: &str, ipa: &str) -> Entry {
        Entry {
            word: word.into(),
            ipa: Some(ipa.into()),
            alias: None,
            language: None,
            case_sensitive: false,
        }
    }

    fn alias(word: &str, alias: &str) -> Entry {
        Entry {
            alias: Some(alias.into()),
            ipa: None,
            ..ipa(word, "")
        }
    }

    fn claimed(lexicon: &Lexicon, text: &str, language: &str) -> Vec<(String, Say)> {
        lexicon
            .claims(text, language)
            .into_iter()
            .map(|c| (text[c.written].to_string(), c.say))
            .collect()
    }

    #[test]
    fn whole_words_match_ignoring_case_and_the_longest_wins() {
        let lexicon = Lexicon::new(vec![
            alias("nginx", "engine x"),
            alias("New York", "the big apple"),
            alias("New", "brand new"),
            ipa("Kokoro", "/kˈoʊkəɹoʊ/"),
        ])
        .unwrap();
        assert_eq!(
            claimed(
                &lexicon,
                "NGINX in New   York, new nginxes, Kokoro's.",
                "en-US"
            ),
            [
                ("NGINX".into(), Say::Alias("engine x".into())),
                ("New   York".into(), Say::Alias("the big apple".into())),
                ("new".into(), Say::Alias("brand new".into())),
                ("Kokoro".into(), Say::Phonemes("kˈoʊkəɹoʊ".into())),
            ],
            "'nginxes' is another word; the slashes are dropped"
        );
        assert!(lexicon.claims("renew unkokoro", "en").is_empty());
    }

    #[test]
    fn case_and_language_narrow_an_entry() {
        let lexicon = Lexicon::new(vec![
            Entry {
                case_sensitive: true,
                ..alias("US", "United States")
            },
            Entry {
                language: Some("de".into()),
                ..alias("Hund", "Hunt")
            },
            alias("C++", "C plus plus"),
        ])
        .unwrap();
        assert_eq!(claimed(&lexicon, "us and US", "en").len(), 1);
        assert_eq!(claimed(&lexicon, "ein Hund", "de-DE").len(), 1);
        assert!(claimed(&lexicon, "ein Hund", "en-US").is_empty());
        assert!(claimed(&lexicon, "ein Hund", "dea").is_empty());
        assert_eq!(
            claimed(&lexicon, "I write C++.", "en"),
            [("C++".into(), Say::Alias("C plus plus".into()))],
            "a word that ends in symbols needs no boundary after them"
        );
    }

    #[test]
    fn bad_entries_name_the_field() {
        let cases: Vec<(Entry, &str, &str)> = vec![
            (ipa("", "a"), "entries[0].word", "empty"),
            (ipa("...", "a"), "entries[0].word", "no letter"),
            (
                Entry {
                    alias: Some("x".into()),
                    ..ipa("a", "b")
                },
                "entries[0].ipa",
                "exactly one",
            ),
            (
                Entry {
                    ipa: None,
                    ..ipa("a", "b")
                },
                "entries[0].ipa",
                "exactly one",
            ),
            (ipa("a", "k1t"), "entries[0].ipa", "'1'"),
            (ipa("a", "k<t>"), "entries[0].ipa", "'<'"),
            (ipa("a", "//"), "entries[0].ipa", "empty"),
            (alias("a", &"x".repeat(201)), "entries[0].alias", "limit"),
            (alias("a", "x\u{7}"), "entries[0].alias", "control"),
            (
                Entry {
                    language: Some("english!".into()),
                    ..alias("a", "b")
                },
                "entries[0].language",
                "language tag",
            ),
        ];
        for (entry, field, says) in cases {
            let error = Lexicon::new(vec![entry.clone()]).unwrap_err();
            assert_eq!(error.field, field, "{entry:?}");
            assert!(error.message.contains(says), "{entry:?}: {}", error.message);
        }
        let twice = Lexicon::new(vec![alias("Tom", "a"), alias("tom", "b")]).unwrap_err();
        assert_eq!(twice.field, "entries[1].word");
        let many = vec![alias("a", "b"); MAX_ENTRIES + 1];
        assert_eq!(Lexicon::new(many).unwrap_err().field, "entries");
    }

    #[test]
    fn changes_replace_the_same_word_and_removal_finds_it() {
        let lexicon = Lexicon::new(vec![alias("Tom", "Thomas"), alias("Ann", "Anne")]).unwrap();
        let changed = lexicon
            .with(vec![alias("TOM", "Tommy"), ipa("Zoë", "zˈoʊi")])
            .unwrap();
        let words: Vec<&str> = changed.entries().iter().map(|e| e.word.as_str()).collect();
        assert_eq!(words, ["Ann", "TOM", "Zoë"]);
        assert_eq!(
            claimed(&changed, "tom", "en"),
            [("tom".into(), Say::Alias("Tommy".into()))]
        );
        assert!(changed.without("nobody", None).is_none());
        let fewer = changed.without("tom", None).unwrap();
        assert_eq!(fewer.entries().len(), 2);
        assert!(changed.without("ann", Some("de")).is_none(), "not German");
    }

    #[test]
    fn the_digest_changes_only_with_entries_the_text_uses() {
        let lexicon = Lexicon::new(vec![alias("Tom", "Thomas"), alias("Ann", "Anne")]).unwrap();
        let text = "Tom is here.";
        let before = lexicon.digest_of(text, "en");
        assert!(!before.is_empty());
        assert_eq!(lexicon.digest_of("Nobody is here.", "en"), "");
        let other = lexicon.with(vec![alias("Ann", "Annie")]).unwrap();
        assert_eq!(
            other.digest_of(text, "en"),
            before,
            "Ann is not in the text"
        );
        let changed = lexicon.with(vec![alias("Tom", "Tommy")]).unwrap();
        assert_ne!(changed.digest_of(text, "en"), before);
    }

    #[test]
    fn files_round_trip_in_both_formats() {
        let entries = vec![
            ipa("Kokoro", "kˈoʊkəɹoʊ"),
            Entry {
                language: Some("en-GB".into()),
                case_sensitive: true,
                ..alias("SQL", "sequel")
            },
        ];
        for name in ["lexicon.toml", "lexicon.json", "LEXICON.JSON"] {
            let content = file_content(name, &entries);
            assert_eq!(parse_file(name, &content).unwrap(), entries, "{name}");
        }
        let bare = r#"[{"word": "a", "alias": "b"}]"#;
        assert_eq!(parse_file("x.json", bare).unwrap().len(), 1);
        let unknown = "[[entries]]\nword = \"a\"\nalais = \"b\"\n";
        let error = parse_file("x.toml", unknown).unwrap_err();
        assert!(matches!(error, FileFormatError::Toml(_)), "{error:?}");
        let cause = std::error::Error::source(&error).unwrap().to_string();
        assert!(cause.contains("alais"), "{cause}");
    }
}
