//! Addresses and code as they are read aloud: `https://example.com/docs` "example dot com
//! slash docs", `jane.doe@example.com` "jane dot doe at example dot com", `report.pdf` "report
//! dot P D F", `snake_case_name` "snake case name", `camelCase` "camel case".

use super::{Cursor, Words};

/// Endings read as words; other endings of up to four letters are spelled.
const SAID_ENDINGS: &[(&str, &str)] = &[
    ("com", "com"),
    ("org", "org"),
    ("net", "net"),
    ("edu", "edu"),
    ("gov", "gov"),
    ("json", "jason"),
    ("zip", "zip"),
];

/// File name extensions a bare `name.ext` is recognised by.
const FILE_EXTENSIONS: &[&str] = &[
    "pdf", "txt", "md", "rs", "py", "js", "ts", "tsx", "jsx", "json", "html", "htm", "css", "csv",
    "png", "jpg", "jpeg", "gif", "svg", "mp3", "mp4", "wav", "ogg", "flac", "zip", "tar", "gz",
    "exe", "doc", "docx", "xls", "xlsx", "ppt", "pptx", "toml", "yaml", "yml", "sh", "cpp", "go",
    "java", "rb", "xml", "sql", "log",
];

/// Top-level domains a bare `name.tld` is recognised by.
const DOMAINS: &[&str] = &[
    "com", "org", "net", "io", "dev", "edu", "gov", "co", "uk", "ai", "app",
];

pub(super) fn read(cursor: &Cursor) -> Option<Words> {
    if !cursor.at_word_start() {
        return None;
    }
    let chunk = chunk(cursor.rest());
    let words = url(chunk)
        .or_else(|| email(chunk))
        .or_else(|| file_or_domain(chunk))
        .or_else(|| identifier(chunk))?;
    Some(Words::new(cursor.tokens_in(chunk.len()), words))
}

/// The text up to the next space, without the punctuation that closes a sentence or clause
/// after it.
fn chunk(rest: &str) -> &str {
    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let trimmed = rest[..end].trim_end_matches([
        '.', ',', ';', ':', '!', '?', ')', ']', '}', '"', '\'', '’', '”',
    ]);
    // A call's parentheses are part of it: `get_user()`.
    if trimmed.ends_with('(') && rest[trimmed.len()..].starts_with(')') {
        &rest[..trimmed.len() + 1]
    } else {
        trimmed
    }
}

fn url(chunk: &str) -> Option<String> {
    let lower = chunk.to_ascii_lowercase();
    let rest = ["https://", "http://"]
        .iter()
        .find_map(|scheme| lower.starts_with(scheme).then(|| &chunk[scheme.len()..]))
        .or_else(|| lower.starts_with("www.").then_some(chunk))?;
    let (address, query) = match rest.split_once('?') {
        Some((address, query)) => (address, Some(query)),
        None => (rest, None),
    };
    let mut parts = address.trim_end_matches('/').split('/');
    let host = parts.next().filter(|h| h.contains('.') || !h.is_empty())?;
    let mut words = vec![domain(host)];
    for part in parts.filter(|p| !p.is_empty()) {
        words.push("slash".to_string());
        words.push(path_part(part));
    }
    if let Some(query) = query {
        words.push("question mark".to_string());
        words.push(
            query
                .replace('=', " equals ")
                .replace('&', " and ")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
        );
    }
    Some(words.join(" "))
}

fn email(chunk: &str) -> Option<String> {
    let (local, host) = chunk.split_once('@')?;
    let local_ok = !local.is_empty()
        && local
            .chars()
            .all(|c| c.is_alphanumeric() || "._%+-".contains(c));
    if !local_ok || !host.contains('.') || host.starts_with('.') || host.ends_with('.') {
        return None;
    }
    if !host
        .chars()
        .all(|c| c.is_alphanumeric() || ".-".contains(c))
    {
        return None;
    }
    Some(format!("{} at {}", dotted(local), domain(host)))
}

/// `report.pdf`, `example.com`.
fn file_or_domain(chunk: &str) -> Option<String> {
    let (name, ending) = chunk.rsplit_once('.')?;
    let known = FILE_EXTENSIONS.contains(&ending) || DOMAINS.contains(&ending);
    let name_ok = !name.is_empty()
        && name.starts_with(|c: char| c.is_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || "._-".contains(c));
    (known && name_ok).then(|| domain(chunk))
}

/// `snake_case_name`, `camelCaseName`, `get_user()`.
fn identifier(chunk: &str) -> Option<String> {
    let name = chunk.strip_suffix("()").unwrap_or(chunk);
    let called = name.len() < chunk.len();
    if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
        return None;
    }
    if name.contains('_') {
        let words: Vec<&str> = name.split('_').filter(|w| !w.is_empty()).collect();
        return (words.len() > 1 || called).then(|| words.join(" "));
    }
    let humps = camel_humps(name)?;
    (humps.len() > 1 || called).then(|| humps.join(" "))
}

/// `camelCaseName` → camel, case, name: a lower-case start of two letters or more, then
/// capitalised humps of two letters or more.
fn camel_humps(name: &str) -> Option<Vec<String>> {
    if !name.chars().all(char::is_alphabetic) || !name.starts_with(char::is_lowercase) {
        return None;
    }
    let mut humps: Vec<String> = vec![String::new()];
    for c in name.chars() {
        if c.is_uppercase() {
            humps.push(String::new());
        }
        humps.last_mut()?.extend(c.to_lowercase());
    }
    humps
        .iter()
        .all(|h| h.chars().count() >= 2)
        .then_some(humps)
}

/// A host or file name: its parts joined by "dot", the last one spelled if it is short and no
/// word.
fn domain(host: &str) -> String {
    let parts: Vec<&str> = host.split('.').collect();
    let last = parts.len() - 1;
    parts
        .iter()
        .enumerate()
        .map(|(i, part)| {
            if part.eq_ignore_ascii_case("www") {
                "W W W".to_string()
            } else if i == last && last > 0 {
                ending(part)
            } else {
                path_part(part)
            }
        })
        .collect::<Vec<_>>()
        .join(" dot ")
}

fn ending(part: &str) -> String {
    let lower = part.to_ascii_lowercase();
    if let Some((_, said)) = SAID_ENDINGS.iter().find(|(e, _)| *e == lower) {
        return said.to_string();
    }
    if part.len() <= 4 && part.chars().all(|c| c.is_ascii_alphanumeric()) {
        return spell(part);
    }
    part.to_string()
}

fn spell(part: &str) -> String {
    part.chars()
        .map(|c| c.to_ascii_uppercase().to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A piece of a path or a local part: separators as words.
fn path_part(part: &str) -> String {
    part.replace(['-', '_'], " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn dotted(local: &str) -> String {
    local
        .split('.')
        .map(path_part)
        .collect::<Vec<_>>()
        .join(" dot ")
}

#[cfg(test)]
mod tests {
    use super::super::said as spoken;

    #[test]
    fn addresses_and_code_are_read_aloud() {
        for (written, said) in [
            ("https://example.com", "example dot com"),
            (
                "https://example.com/docs/intro",
                "example dot com slash docs slash intro",
            ),
            ("www.example.org", "W W W dot example dot org"),
            ("jane.doe@example.com", "jane dot doe at example dot com"),
            ("report.pdf", "report dot P D F"),
            ("main.rs", "main dot R S"),
            ("data.json", "data dot jason"),
            ("snake_case_name", "snake case name"),
            ("camelCaseName", "camel case name"),
            ("get_user()", "get user"),
        ] {
            assert_eq!(
                spoken(&format!("See {written}.")),
                format!("See {said}."),
                "{written}"
            );
        }
        assert_eq!(
            spoken("See iPhone and e.g. this."),
            "See iPhone and for example this."
        );
    }
}
