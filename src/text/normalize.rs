//! Light clean-up of request text before it is split and phonemized.
//!
//! Clients often send what a chat model wrote: markdown, emoji, typographic quotes. espeak-ng
//! would read `**` or `#` aloud or stumble over them, so the markup goes while every word stays.
//! Numbers, dates and currency are left alone: espeak-ng reads them better than a hand-written
//! expander would, in every language it supports.

use unicode_normalization::UnicodeNormalization;

/// Strips markdown syntax, emoji and control characters, unifies quotes, dashes and ellipses,
/// and collapses whitespace to single spaces. Headings and list items without final
/// punctuation get a period so that they are spoken as separate phrases.
pub fn normalize(text: &str) -> String {
    let text: String = text.nfc().collect();
    let mut lines = Vec::new();
    let mut in_code_fence = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(info) = code_fence_info(trimmed) {
            // The fence goes; its info string ("rust") is a word and stays.
            in_code_fence = !in_code_fence;
            lines.push(clean_inline(info));
            continue;
        }
        if in_code_fence {
            lines.push(clean_inline(line));
            continue;
        }
        if is_horizontal_rule(trimmed) {
            continue;
        }
        let (body, is_block) = strip_block_marker(trimmed);
        let mut cleaned = clean_inline(body);
        if is_block {
            terminate_phrase(&mut cleaned);
        }
        lines.push(cleaned);
    }
    lines
        .join("\n")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// For a code fence line (```` ``` ```` or `~~~`), the text after the fence marks.
fn code_fence_info(line: &str) -> Option<&str> {
    ["```", "~~~"].iter().find_map(|fence| {
        line.strip_prefix(fence)
            .map(|rest| rest.trim_start_matches(fence.chars().next().unwrap_or('`')))
    })
}

/// `---`, `***`, `___` (three or more, spaces allowed) on a line of their own.
fn is_horizontal_rule(line: &str) -> bool {
    let marks: String = line.chars().filter(|c| !c.is_whitespace()).collect();
    marks.len() >= 3
        && ['-', '*', '_']
            .iter()
            .any(|&m| marks.chars().all(|c| c == m))
}

/// Removes a heading, blockquote or bullet marker at the start of a line. Returns the rest and
/// whether the line was a heading or list item (a phrase of its own).
fn strip_block_marker(line: &str) -> (&str, bool) {
    let mut line = line;
    while let Some(rest) = line.strip_prefix('>') {
        line = rest.trim_start();
    }
    let hashes = line.chars().take_while(|&c| c == '#').count();
    if (1..=6).contains(&hashes) {
        let rest = &line[hashes..];
        if rest.is_empty() || rest.starts_with(char::is_whitespace) {
            return (rest.trim().trim_end_matches('#').trim_end(), true);
        }
    }
    for bullet in ["- ", "* ", "+ ", "• ", "· "] {
        if let Some(rest) = line.strip_prefix(bullet) {
            let rest = rest.trim_start();
            // Task-list boxes are markup too.
            let rest = ["[ ] ", "[x] ", "[X] "]
                .iter()
                .find_map(|b| rest.strip_prefix(b))
                .unwrap_or(rest);
            return (rest, true);
        }
    }
    (line, false)
}

/// Adds a period to a phrase that does not already end in punctuation.
fn terminate_phrase(phrase: &mut String) {
    let trimmed_len = phrase.trim_end().len();
    phrase.truncate(trimmed_len);
    if let Some(last) = phrase.chars().last() {
        if last.is_alphanumeric() || matches!(last, ')' | '"' | '\'' | '%') {
            phrase.push('.');
        }
    }
}

/// Inline clean-up of one line: links, code spans, emphasis, symbols.
fn clean_inline(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        // Images `![alt](url)` and links `[text](url)` keep only their text.
        if c == '[' || (c == '!' && chars.get(i + 1) == Some(&'[')) {
            let open = if c == '!' { i + 1 } else { i };
            if let Some((label_end, link_end)) = find_link(&chars, open) {
                out.push_str(&clean_inline(
                    &chars[open + 1..label_end].iter().collect::<String>(),
                ));
                i = link_end + 1;
                continue;
            }
        }
        // Autolinks `<https://…>` keep the address.
        if c == '<' {
            if let Some(len) = autolink_len(&chars[i..]) {
                out.extend(&chars[i + 1..i + len - 1]);
                i += len;
                continue;
            }
        }
        if c == '`' {
            i += 1;
            continue;
        }
        if matches!(c, '*' | '_' | '~') {
            let run = chars[i..].iter().take_while(|&&x| x == c).count();
            if is_emphasis_run(&chars, i, run, c) {
                i += run;
                continue;
            }
            out.extend(&chars[i..i + run]);
            i += run;
            continue;
        }
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

/// For `[` at `open`: the index of the matching `]` and of the `)` closing `(url)` right after.
fn find_link(chars: &[char], open: usize) -> Option<(usize, usize)> {
    let mut depth = 0;
    let mut label_end = None;
    for (j, &c) in chars.iter().enumerate().skip(open) {
        match c {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth == 0 {
                    label_end = Some(j);
                    break;
                }
            }
            _ => {}
        }
    }
    let label_end = label_end?;
    if chars.get(label_end + 1) != Some(&'(') {
        return None;
    }
    let close = chars[label_end + 2..].iter().position(|&c| c == ')')?;
    let destination: String = chars[label_end + 2..label_end + 2 + close].iter().collect();
    // A destination has no spaces (except before a quoted title: `(url "title")`) and no
    // brackets; anything else is prose in parentheses and stays.
    let (url, title) = destination
        .trim()
        .split_once(char::is_whitespace)
        .map_or((destination.trim(), None), |(u, t)| (u, Some(t)));
    if url.contains(['[', ']', '<', '>']) {
        return None;
    }
    if let Some(title) = title {
        let title = title.trim();
        let quoted = title.len() >= 2
            && ((title.starts_with('"') && title.ends_with('"'))
                || (title.starts_with('\'') && title.ends_with('\'')));
        if !quoted {
            return None;
        }
    }
    Some((label_end, label_end + 2 + close))
}

fn autolink_len(chars: &[char]) -> Option<usize> {
    let end = chars.iter().position(|&c| c == '>')?;
    let inner: String = chars[1..end].iter().collect();
    let is_link = inner.starts_with("http://")
        || inner.starts_with("https://")
        || inner.starts_with("mailto:");
    (is_link && !inner.contains(char::is_whitespace)).then_some(end + 1)
}

/// Whether a run of `*`, `_` or `~` opens or closes emphasis (and can go) rather than being
/// text: emphasis hugs a word on exactly one side ("**bold**"), while "2 * 3", "snake_case"
/// and "~5 km" are left alone.
fn is_emphasis_run(chars: &[char], start: usize, run: usize, mark: char) -> bool {
    if mark == '~' && run != 2 {
        return false;
    }
    let before = start.checked_sub(1).map(|j| chars[j]);
    let after = chars.get(start + run).copied();
    let is_word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric());
    let is_space = |c: Option<char>| c.is_none_or(|c| c.is_whitespace());
    let opens = !is_space(after) && !is_word(before);
    let closes = !is_space(before) && !is_word(after);
    opens || closes
}

enum Replacement {
    Char(char),
    Str(&'static str),
}

fn unify_char(c: char, before: Option<char>, after: Option<char>) -> Option<Replacement> {
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
fn is_dropped(c: char) -> bool {
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

#[cfg(test)]
mod tests {
    use super::normalize;

    #[test]
    fn strips_emphasis_and_code() {
        assert_eq!(
            normalize("This is **bold** and *it*."),
            "This is bold and it."
        );
        assert_eq!(normalize("__Under__ _score_ ~~gone~~"), "Under score gone");
        assert_eq!(normalize("Run `cargo test` now."), "Run cargo test now.");
        assert_eq!(normalize("***Both*** here"), "Both here");
    }

    #[test]
    fn keeps_arithmetic_and_identifiers() {
        assert_eq!(normalize("2 * 3 = 6"), "2 * 3 = 6");
        assert_eq!(
            normalize("call snake_case_name please"),
            "call snake_case_name please"
        );
        assert_eq!(normalize("about ~5 km"), "about ~5 km");
        assert_eq!(normalize("a*b*c"), "a*b*c");
    }

    #[test]
    fn links_keep_their_text() {
        assert_eq!(
            normalize("See [the docs](https://example.org/a_b) for more."),
            "See the docs for more."
        );
        assert_eq!(normalize("![a cat](cat.png) sleeps"), "a cat sleeps");
        assert_eq!(
            normalize("Mail <mailto:me@example.org> or <https://x.org>"),
            "Mail mailto:me@example.org or https://x.org"
        );
        assert_eq!(normalize("Use [brackets] freely"), "Use [brackets] freely");
        assert_eq!(normalize("[**bold link**](u)"), "bold link");
        assert_eq!(normalize("[docs](https://x.org \"The docs\")"), "docs");
        assert_eq!(normalize("[a](not a link) b"), "[a](not a link) b");
    }

    #[test]
    fn headings_and_lists_become_phrases() {
        assert_eq!(
            normalize("# Title\nSome text.\n## Part two ##\n"),
            "Title. Some text. Part two."
        );
        assert_eq!(
            normalize("Shopping:\n- apples\n- pears!\n* plums\n+ figs\n  - [x] done"),
            "Shopping: apples. pears! plums. figs. done."
        );
        assert_eq!(normalize("> quoted line\n> more"), "quoted line more");
        assert_eq!(normalize("#hashtag stays"), "#hashtag stays");
    }

    #[test]
    fn rules_and_fences_go_but_code_words_stay() {
        assert_eq!(
            normalize("Intro\n---\n```rust\nlet x = 1;\n```\nEnd"),
            "Intro rust let x = 1; End"
        );
    }

    #[test]
    fn drops_emoji_and_control_characters() {
        assert_eq!(normalize("Great job 👍🏽! 🎉🎉"), "Great job !");
        assert_eq!(normalize("flag 🇩🇪 and ❤️ love"), "flag and love");
        assert_eq!(normalize("a\u{0007}b\u{200B}c\u{FEFF}"), "abc");
        assert_eq!(normalize("keycap 1\u{FE0F}\u{20E3} done"), "keycap 1 done");
    }

    #[test]
    fn unifies_quotes_dashes_and_ellipses() {
        assert_eq!(
            normalize("“Hi,” she said… ‘ok’"),
            "\"Hi,\" she said... 'ok'"
        );
        assert_eq!(normalize("don’t"), "don't");
        assert_eq!(
            normalize("one – two — three ― four"),
            "one — two — three — four"
        );
        assert_eq!(normalize("1990–1995"), "1990-1995");
        assert_eq!(normalize("wait--what"), "wait—what");
        assert_eq!(normalize("−5 degrees"), "-5 degrees");
    }

    #[test]
    fn keeps_numbers_dates_and_currency() {
        let text = "On 2024-05-17 it cost $3.50 (€3,20) at 10:30, i.e. 15% off.";
        assert_eq!(normalize(text), text);
    }

    #[test]
    fn collapses_whitespace() {
        assert_eq!(normalize("  a \t b\n\n\nc\u{00A0}d  "), "a b c d");
        assert_eq!(normalize(""), "");
        assert_eq!(normalize(" \n\t "), "");
    }

    #[test]
    fn composes_decomposed_text() {
        assert_eq!(normalize("cafe\u{0301}"), "café");
    }

    #[test]
    fn survives_generated_markup() {
        let tokens = [
            "**",
            "*",
            "_",
            "__",
            "~~",
            "`",
            "```",
            "[",
            "](",
            ")",
            "![",
            "<https://a.b>",
            "<",
            ">",
            "#",
            "\n",
            "- ",
            "word",
            "Ünï",
            "👍",
            "\u{200D}",
            "“",
            "’",
            "–",
            "--",
            "…",
            " ",
            "\t",
            "3.5",
            "\u{0007}",
        ];
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        for round in 0..500 {
            let mut text = String::new();
            for _ in 0..(round % 40) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                text.push_str(tokens[(state % tokens.len() as u64) as usize]);
            }
            let out = normalize(&text);
            assert_eq!(out.trim(), out, "{text:?}");
            assert!(
                !out.contains("  ") && !out.contains('\n'),
                "{text:?} -> {out:?}"
            );
            assert!(!out.contains('👍') && !out.contains('\u{0007}'), "{text:?}");
            assert_eq!(
                out.matches("word").count(),
                text.matches("word").count(),
                "{text:?} -> {out:?}"
            );
        }
    }

    #[test]
    fn never_drops_words() {
        let text = "**Note:** see [link](http://a.b) - then `run` it; 3 * 4 is _twelve_.";
        let words = |s: &str| {
            s.split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty() && *w != "http" && *w != "a" && *w != "b")
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        assert_eq!(words(&normalize(text)), words(text));
    }
}
