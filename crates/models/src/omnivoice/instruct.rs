//! What a request may say about the voice and the language, checked and normalized exactly as
//! the official `_resolve_instruct` and `_resolve_language` do, so that the model sees the
//! strings it was trained on.
//!
//! The official code raises on a bad instruct (its message is kept here as structured
//! errors), but only warns on an unknown language and goes on without one; here an unknown
//! language is an error too, so that a server can refuse it rather than ignore it.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::text::{is_cjk, py_strip};

/// The voice-design attributes by category: (category, English item, Chinese item). Within a
/// category at most one item may be given. Accents exist only in English, dialects only in
/// Chinese.
const ITEMS: &[(&str, Option<&str>, Option<&str>)] = &[
    ("gender", Some("male"), Some("男")),
    ("gender", Some("female"), Some("女")),
    ("age", Some("child"), Some("儿童")),
    ("age", Some("teenager"), Some("少年")),
    ("age", Some("young adult"), Some("青年")),
    ("age", Some("middle-aged"), Some("中年")),
    ("age", Some("elderly"), Some("老年")),
    ("pitch", Some("very low pitch"), Some("极低音调")),
    ("pitch", Some("low pitch"), Some("低音调")),
    ("pitch", Some("moderate pitch"), Some("中音调")),
    ("pitch", Some("high pitch"), Some("高音调")),
    ("pitch", Some("very high pitch"), Some("极高音调")),
    ("style", Some("whisper"), Some("耳语")),
    ("accent", Some("american accent"), None),
    ("accent", Some("british accent"), None),
    ("accent", Some("australian accent"), None),
    ("accent", Some("chinese accent"), None),
    ("accent", Some("canadian accent"), None),
    ("accent", Some("indian accent"), None),
    ("accent", Some("korean accent"), None),
    ("accent", Some("portuguese accent"), None),
    ("accent", Some("russian accent"), None),
    ("accent", Some("japanese accent"), None),
    ("dialect", None, Some("河南话")),
    ("dialect", None, Some("陕西话")),
    ("dialect", None, Some("四川话")),
    ("dialect", None, Some("贵州话")),
    ("dialect", None, Some("云南话")),
    ("dialect", None, Some("桂林话")),
    ("dialect", None, Some("济南话")),
    ("dialect", None, Some("石家庄话")),
    ("dialect", None, Some("甘肃话")),
    ("dialect", None, Some("宁夏话")),
    ("dialect", None, Some("青岛话")),
    ("dialect", None, Some("东北话")),
];

/// One category of voice-design attributes, for a listing of what a voice may be asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstructCategory {
    /// `gender`, `age`, `pitch`, `style`, `accent` or `dialect`.
    pub name: &'static str,
    pub english: Vec<&'static str>,
    pub chinese: Vec<&'static str>,
}

/// Every valid instruct item by category, in the official order.
pub fn instruct_categories() -> Vec<InstructCategory> {
    let mut categories: Vec<InstructCategory> = Vec::new();
    for &(name, en, zh) in ITEMS {
        if categories.last().is_none_or(|c| c.name != name) {
            categories.push(InstructCategory {
                name,
                english: Vec::new(),
                chinese: Vec::new(),
            });
        }
        let category = categories.last_mut().expect("pushed");
        category.english.extend(en);
        category.chinese.extend(zh);
    }
    categories
}

/// An instruct item that is not one of the valid ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownItem {
    /// As written.
    pub raw: String,
    /// Trimmed and lowercased, as it was looked up.
    pub normalized: String,
    /// The closest valid item (difflib's `get_close_matches`, cutoff 0.6), if any is close.
    pub suggestion: Option<String>,
}

/// Why an instruct was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InstructError {
    #[error("unsupported instruct items: {}; use only English items separated by \", \" or only Chinese items separated by \"，\"", describe(.0))]
    Unknown(Vec<UnknownItem>),
    #[error("a Chinese dialect and an English accent cannot be mixed in one instruct (dialects are for Chinese speech, accents for English)")]
    DialectAndAccent,
    /// Each group holds the items (as normalized) given for one category.
    #[error("conflicting instruct items within a category: {}; each category (gender, age, pitch, style, accent, dialect) allows at most one", conflicts(.0))]
    Conflict(Vec<Vec<String>>),
}

fn describe(items: &[UnknownItem]) -> String {
    items
        .iter()
        .map(|u| match &u.suggestion {
            Some(s) => format!("'{}' (did you mean '{s}'?)", u.raw),
            None => format!("'{}'", u.raw),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn conflicts(groups: &[Vec<String>]) -> String {
    groups
        .iter()
        .map(|g| {
            g.iter()
                .map(|x| format!("'{x}'"))
                .collect::<Vec<_>>()
                .join(" vs ")
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn all_valid() -> impl Iterator<Item = &'static str> {
    ITEMS
        .iter()
        .flat_map(|&(_, en, zh)| en.into_iter().chain(zh))
}

fn category_of(item: &str) -> Option<&'static str> {
    ITEMS
        .iter()
        .find(|&&(_, en, zh)| en == Some(item) || zh == Some(item))
        .map(|&(name, _, _)| name)
}

/// The official `_resolve_instruct`: the instruct's items (split at `,` or `，`), validated,
/// all in Chinese when `use_zh` (the text has an ideograph) or a dialect is given, else all in
/// English (an accent forces English), joined by `，` if any item is Chinese, else by `, `.
/// `None` for an empty instruct.
pub fn resolve_instruct(instruct: &str, use_zh: bool) -> Result<Option<String>, InstructError> {
    let instruct = py_strip(instruct);
    if instruct.is_empty() {
        return Ok(None);
    }
    let mut unknown = Vec::new();
    let mut items: Vec<String> = Vec::new();
    for raw in instruct.split([',', '，']) {
        // The separator's pattern, `\s*[,，]\s*`, takes the whitespace beside it.
        let raw = py_strip(raw);
        if raw.is_empty() {
            continue;
        }
        let normalized = raw.to_lowercase();
        if all_valid().any(|v| v == normalized) {
            items.push(normalized);
        } else {
            let suggestion = close_match(&normalized, all_valid()).map(str::to_string);
            unknown.push(UnknownItem {
                raw: raw.to_string(),
                normalized,
                suggestion,
            });
        }
    }
    if !unknown.is_empty() {
        return Err(InstructError::Unknown(unknown));
    }
    let has_dialect = items.iter().any(|n| n.ends_with('话'));
    let has_accent = items.iter().any(|n| n.contains(" accent"));
    if has_dialect && has_accent {
        return Err(InstructError::DialectAndAccent);
    }
    let use_zh = has_dialect || (use_zh && !has_accent);
    let items: Vec<String> = items
        .into_iter()
        .map(|n| {
            let translated = ITEMS.iter().find_map(|&(_, en, zh)| match (en, zh) {
                (Some(en), Some(zh)) if use_zh && n == en => Some(zh),
                (Some(en), Some(zh)) if !use_zh && n == zh => Some(en),
                _ => None,
            });
            translated.map_or(n, str::to_string)
        })
        .collect();
    let mut groups = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for &(name, _, _) in ITEMS {
        if seen.contains(&name) {
            continue;
        }
        seen.push(name);
        let hits: Vec<String> = items
            .iter()
            .filter(|n| category_of(n) == Some(name))
            .cloned()
            .collect();
        if hits.len() > 1 {
            groups.push(hits);
        }
    }
    if !groups.is_empty() {
        return Err(InstructError::Conflict(groups));
    }
    let chinese = items.iter().any(|n| n.chars().any(is_cjk));
    Ok(Some(items.join(if chinese { "，" } else { ", " })))
}

/// difflib's `get_close_matches(word, possibilities, n=1, cutoff=0.6)`: the possibility of
/// the highest `SequenceMatcher(None, possibility, word).ratio()`, the greatest string among
/// equal ratios (its `heapq.nlargest` over `(ratio, possibility)`).
fn close_match<'a>(word: &str, possibilities: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let word: Vec<char> = word.chars().collect();
    let mut best: Option<(f64, &str)> = None;
    for p in possibilities {
        let chars: Vec<char> = p.chars().collect();
        let ratio = similarity(&chars, &word);
        if ratio < 0.6 {
            continue;
        }
        if best.is_none_or(|(r, s)| ratio > r || (ratio == r && p > s)) {
            best = Some((ratio, p));
        }
    }
    best.map(|(_, p)| p)
}

/// `SequenceMatcher(None, a, b).ratio()`: 2·M / (|a| + |b|), M the characters of the matching
/// blocks difflib finds (the longest match, earliest in `a` then in `b`, then the same on each
/// side of it). No junk: difflib's automatic junk applies only from 200 characters of `b`, and
/// [`resolve_instruct`]'s words are short; longer ones may differ from difflib's ratio.
fn similarity(a: &[char], b: &[char]) -> f64 {
    let total = a.len() + b.len();
    if total == 0 {
        return 1.0;
    }
    2.0 * matching(a, b) as f64 / total as f64
}

fn matching(a: &[char], b: &[char]) -> usize {
    // The longest common block, the earliest in `a`, then in `b` (difflib's scan keeps the
    // first strictly longer one).
    let (mut best_i, mut best_j, mut best) = (0, 0, 0);
    let mut previous = vec![0usize; b.len() + 1];
    for (i, &x) in a.iter().enumerate() {
        let mut row = vec![0usize; b.len() + 1];
        for (j, &y) in b.iter().enumerate() {
            if x == y {
                let k = previous[j] + 1;
                row[j + 1] = k;
                if k > best {
                    (best_i, best_j, best) = (i + 1 - k, j + 1 - k, k);
                }
            }
        }
        previous = row;
    }
    if best == 0 {
        return 0;
    }
    best + matching(&a[..best_i], &b[..best_j]) + matching(&a[best_i + best..], &b[best_j + best..])
}

/// The official language table (`omnivoice.utils.lang_map`, written by
/// `scripts/omnivoice_text_fixtures.py`): lowercase name, tab, id.
const LANGUAGES: &str = include_str!("languages.tsv");

fn names() -> &'static HashMap<&'static str, &'static str> {
    static NAMES: OnceLock<HashMap<&'static str, &'static str>> = OnceLock::new();
    NAMES.get_or_init(|| {
        LANGUAGES
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .filter_map(|l| l.split_once('\t'))
            .collect()
    })
}

/// Every language the model knows: (id, lowercase name), sorted by name. Some ids have
/// several names.
pub fn languages() -> Vec<(&'static str, &'static str)> {
    let mut all: Vec<(&str, &str)> = names().iter().map(|(&n, &id)| (id, n)).collect();
    all.sort_by_key(|&(id, name)| (name, id));
    all
}

/// The literal the official code takes for "no language": `None`, in any case.
pub fn is_none_literal(language: &str) -> bool {
    language.eq_ignore_ascii_case("none")
}

/// A language nobody knows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown language '{0}': give a language id (such as 'en', 'zh', 'ja', 'de') or its English name (such as 'English', 'Chinese')")]
pub struct LanguageError(pub String);

/// The official `_resolve_language`: an id as it is, or a name in any case, to the id;
/// `None` for the literal `None` in any case. Beyond the official code: an id in another case
/// (`EN`) is accepted, and an unknown language is an error where the official code warns and
/// drops it.
pub fn resolve_language(language: &str) -> Result<Option<&'static str>, LanguageError> {
    if is_none_literal(language) {
        return Ok(None);
    }
    let names = names();
    if let Some(&id) = names.values().find(|&&id| id == language) {
        return Ok(Some(id));
    }
    let lower = language.to_lowercase();
    if let Some(&id) = names.get(lower.as_str()) {
        return Ok(Some(id));
    }
    names
        .values()
        .find(|&&id| id.to_lowercase() == lower)
        .map(|&id| Some(id))
        .ok_or_else(|| LanguageError(language.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ratio_is_difflibs() {
        // difflib.SequenceMatcher(None, a, b).ratio() for these pairs.
        let ratio = |a: &str, b: &str| {
            let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
            similarity(&a, &b)
        };
        assert_eq!(ratio("abcd", "bcde"), 0.75);
        assert_eq!(ratio("male", "mal"), 6.0 / 7.0);
        // The first longest block decides what is left on each side: "ab" then nothing,
        // where a "b…a" pairing would find 2 as well.
        assert_eq!(ratio("abxba", "ba"), 4.0 / 7.0);
        assert_eq!(ratio("", ""), 1.0);
        assert_eq!(ratio("qwerty", "zx"), 0.0);
    }

    #[test]
    fn categories_list_every_item_once() {
        let categories = instruct_categories();
        let names: Vec<&str> = categories.iter().map(|c| c.name).collect();
        assert_eq!(
            names,
            ["gender", "age", "pitch", "style", "accent", "dialect"]
        );
        let count: usize = categories
            .iter()
            .map(|c| c.english.len() + c.chinese.len())
            .sum();
        assert_eq!(count, all_valid().count());
        assert_eq!(categories[4].english.len(), 10);
        assert_eq!(categories[5].chinese.len(), 12);
    }

    #[test]
    fn the_language_table_is_whole() {
        assert!(names().len() > 600, "{}", names().len());
        assert_eq!(resolve_language("EN").unwrap(), Some("en"));
        assert!(is_none_literal("nOnE"));
        let error = resolve_language("klingon").unwrap_err().to_string();
        assert!(error.contains("'klingon'"), "{error}");
    }
}
