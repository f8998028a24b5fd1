//! The official text handling around generation, reproduced exactly: how the target (and a
//! reference's) text is cleaned before tokenizing, which bracketed tags are non-verbal sounds,
//! how a long text is cut into chunks at punctuation, and how the chunks' audio is joined.
//!
//! The model only ever saw text cleaned this way, and the chunk boundaries decide the audio,
//! so every rule follows the official code's, including its whitespace and abbreviation quirks.

/// The non-verbal tags the official model knows (`[laughter]` …): each is tokenized on its own
/// so that its ids do not depend on the text around it.
pub const NONVERBAL_TAGS: [&str; 13] = [
    "laughter",
    "sigh",
    "confirmation-en",
    "question-en",
    "question-ah",
    "question-oh",
    "question-ei",
    "question-yi",
    "surprise-ah",
    "surprise-oh",
    "surprise-wa",
    "surprise-yo",
    "dissatisfaction-hnn",
];

/// Python's `str.isspace` (and `\s` of its `re`): Unicode's White_Space plus the four
/// information separators U+001C–U+001F.
pub(crate) fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `str.strip()`.
pub(crate) fn py_strip(s: &str) -> &str {
    s.trim_matches(is_py_space)
}

/// The CJK Unified Ideographs block, the official code's test for Chinese.
pub(crate) fn is_cjk(c: char) -> bool {
    ('\u{4e00}'..='\u{9fff}').contains(&c)
}

/// The official `_combine_text`: the reference's text (when given) and the target's, joined by
/// a space; line breaks dropped, full-width parentheses made ASCII, runs of spaces and tabs
/// made one space, and whitespace beside a CJK ideograph removed.
pub fn combine_text(text: &str, ref_text: Option<&str>) -> String {
    let joined = match ref_text {
        Some(r) if !r.is_empty() => format!("{} {}", py_strip(r), py_strip(text)),
        _ => py_strip(text).to_string(),
    };
    let mut collapsed = String::with_capacity(joined.len());
    let mut in_blank = false;
    for c in joined.chars() {
        let c = match c {
            '\r' | '\n' => continue,
            '\u{ff08}' => '(',
            '\u{ff09}' => ')',
            c => c,
        };
        if c == ' ' || c == '\t' {
            if !in_blank {
                collapsed.push(' ');
            }
            in_blank = true;
        } else {
            collapsed.push(c);
            in_blank = false;
        }
    }
    // A whitespace run goes when the character before or after it is an ideograph.
    let chars: Vec<char> = collapsed.chars().collect();
    let mut out = String::with_capacity(collapsed.len());
    let mut i = 0;
    while i < chars.len() {
        if !is_py_space(chars[i]) {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let end = (i..chars.len())
            .find(|&j| !is_py_space(chars[j]))
            .unwrap_or(chars.len());
        let before = i > 0 && is_cjk(chars[i - 1]);
        let after = end < chars.len() && is_cjk(chars[end]);
        if !(before || after) {
            out.extend(&chars[i..end]);
        }
        i = end;
    }
    out
}

/// `text` cut around the known non-verbal tags (as the official pattern finds them, case
/// sensitive): `(piece, is_tag)` in order, empty pieces left out.
pub(crate) fn split_nonverbal(text: &str) -> Vec<(&str, bool)> {
    let mut parts = Vec::new();
    let mut last = 0;
    let mut at = 0;
    while let Some(open) = text[at..].find('[').map(|p| at + p) {
        let tag = NONVERBAL_TAGS.iter().find(|tag| {
            let rest = &text[open + 1..];
            rest.starts_with(**tag) && rest[tag.len()..].starts_with(']')
        });
        match tag {
            Some(tag) => {
                let end = open + tag.len() + 2;
                if open > last {
                    parts.push((&text[last..open], false));
                }
                parts.push((&text[open..end], true));
                last = end;
                at = end;
            }
            None => at = open + 1,
        }
    }
    if last < text.len() {
        parts.push((&text[last..], false));
    }
    parts
}

/// The bracketed words of `text` that look like non-verbal tags but are not ones the model
/// knows, each once, in order (for a warning such as `X-Unknown-Nonverbal-Tags`): the Python
/// omnivoice-server's `find_unknown_nonverbal_tags`, with two corrections to agree with the
/// model: the list is the model's 13 tags (not also `breath` and `sniff`, which it reads as
/// plain text), and case matters (`[Laughter]` is plain text to the model, so it is reported,
/// as written).
pub fn unknown_nonverbal_tags(text: &str) -> Vec<String> {
    let mut unknown: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        // `[a-zA-Z][a-zA-Z0-9_-]*]`
        let len = after
            .char_indices()
            .find(|&(i, c)| {
                !(c.is_ascii_alphabetic()
                    || (i > 0 && (c.is_ascii_digit() || c == '_' || c == '-')))
            })
            .map_or(after.len(), |(i, _)| i);
        if len > 0 && after[len..].starts_with(']') {
            let word = &after[..len];
            if !NONVERBAL_TAGS.contains(&word) && !unknown.iter().any(|u| u == word) {
                unknown.push(word.to_string());
            }
            rest = &after[len + 1..];
        } else {
            rest = after;
        }
    }
    unknown
}

const SPLIT_PUNCTUATION: &str = ".,;:!?。，；：！？";
const CLOSING_MARKS: &str = "\"'“”‘’）]》>」】";
/// Words whose period does not end a sentence.
const ABBREVIATIONS: [&str; 53] = [
    "Mr.", "Mrs.", "Ms.", "Dr.", "Prof.", "Sr.", "Jr.", "Rev.", "Fr.", "Hon.", "Pres.", "Gov.",
    "Capt.", "Gen.", "Sen.", "Rep.", "Col.", "Maj.", "Lt.", "Cmdr.", "Sgt.", "Cpl.", "Co.",
    "Corp.", "Inc.", "Ltd.", "Est.", "Dept.", "St.", "Ave.", "Blvd.", "Rd.", "Mt.", "Ft.", "No.",
    "Jan.", "Feb.", "Mar.", "Apr.", "Aug.", "Sep.", "Sept.", "Oct.", "Nov.", "Dec.", "i.e.",
    "e.g.", "vs.", "Vs.", "Etc.", "approx.", "fig.", "def.",
];

/// The official `chunk_text_punctuation`: sentences end at punctuation (not at an
/// abbreviation's period; punctuation and closing marks that follow stay with the sentence),
/// then consecutive sentences are merged while they fit in `chunk_len` characters, then chunks
/// under `min_chunk_len` are merged into the one before (the first into the second).
pub fn chunk_text(text: &str, chunk_len: usize, min_chunk_len: Option<usize>) -> Vec<String> {
    let sentences = clauses(text);

    let mut merged: Vec<Vec<char>> = Vec::new();
    let mut chunk: Vec<char> = Vec::new();
    for sentence in sentences {
        if chunk.len() + sentence.len() <= chunk_len {
            chunk.extend(sentence);
        } else {
            if !chunk.is_empty() {
                merged.push(chunk);
            }
            chunk = sentence;
        }
    }
    if !chunk.is_empty() {
        merged.push(chunk);
    }

    let finals = match min_chunk_len {
        None => merged,
        Some(min) => {
            let first_short = merged.first().is_some_and(|c| c.len() < min);
            let mut finals: Vec<Vec<char>> = Vec::new();
            for (i, chunk) in merged.into_iter().enumerate() {
                if (i == 1 && first_short) || (chunk.len() < min && !finals.is_empty()) {
                    finals.last_mut().expect("not empty").extend(chunk);
                } else {
                    finals.push(chunk);
                }
            }
            finals
        }
    };
    finals
        .into_iter()
        .map(|c| py_strip(&c.into_iter().collect::<String>()).to_string())
        .filter(|c| !c.is_empty())
        .collect()
}

/// The pieces the official chunker cuts a text into before merging them: each ends at
/// punctuation (`,` and `;` too, so a piece is a clause), with the punctuation and closing
/// marks that follow it; an abbreviation's period ends none.
fn clauses(text: &str) -> Vec<Vec<char>> {
    let mut sentences: Vec<Vec<char>> = Vec::new();
    let mut current: Vec<char> = Vec::new();
    for c in text.chars() {
        let splits = SPLIT_PUNCTUATION.contains(c);
        if current.is_empty() && !sentences.is_empty() && (splits || CLOSING_MARKS.contains(c)) {
            sentences.last_mut().expect("not empty").push(c);
            continue;
        }
        current.push(c);
        if splits {
            let abbreviation = c == '.' && {
                let so_far: String = current.iter().collect();
                so_far
                    .split(is_py_space)
                    .rfind(|w| !w.is_empty())
                    .is_some_and(|w| ABBREVIATIONS.contains(&w))
            };
            if !abbreviation {
                sentences.push(std::mem::take(&mut current));
            }
        }
    }
    if !current.is_empty() {
        sentences.push(current);
    }
    sentences
}

/// Where a sentence ends, of the chunker's punctuation (commas and colons end clauses).
const SENTENCE_END: &str = ".!?。！？";

/// A streamed text's first piece and the rest of it, both stripped: the first sentence (at the
/// chunker's boundaries, so abbreviations hold), extended by the next while shorter than
/// `min_chars`; of a sentence longer than `max_chars`, the clauses that fit in it (at least
/// one). `None` when that is the whole text: it is spoken as one piece.
pub fn first_piece(text: &str, min_chars: usize, max_chars: usize) -> Option<(String, String)> {
    let clauses = clauses(text);
    let mut taken = 0;
    let mut len = 0;
    for clause in &clauses {
        if taken > 0 && len + clause.len() > max_chars {
            break;
        }
        taken += 1;
        len += clause.len();
        let ends_sentence = clause
            .iter()
            .rev()
            .find(|c| !CLOSING_MARKS.contains(**c) && !is_py_space(**c))
            .is_some_and(|c| SENTENCE_END.contains(*c));
        if ends_sentence && py_strip(&clause_text(&clauses[..taken])).chars().count() >= min_chars {
            break;
        }
    }
    let first = py_strip(&clause_text(&clauses[..taken])).to_string();
    let rest = py_strip(&clause_text(&clauses[taken..])).to_string();
    (!first.is_empty() && !rest.is_empty()).then_some((first, rest))
}

fn clause_text(clauses: &[Vec<char>]) -> String {
    clauses.iter().flatten().collect()
}

/// The official `cross_fade_chunks`: each join fades the audio so far out and the next chunk
/// in over 0.1 s, with 0.1 s of silence between them (0.3 s of join in all).
pub fn cross_fade(chunks: &[Vec<f32>], sample_rate: u32) -> Vec<f32> {
    let Some((first, rest)) = chunks.split_first() else {
        return Vec::new();
    };
    let fade = join_fade(sample_rate);
    let mut merged = first.clone();
    for chunk in rest {
        fade_out_before_join(&mut merged, fade);
        append_after_join(&mut merged, chunk, fade);
    }
    merged
}

/// Samples of each fade of a [`cross_fade`] join, and of the silence between them.
pub(super) fn join_fade(sample_rate: u32) -> usize {
    (0.3 * f64::from(sample_rate)) as usize / 3
}

/// The audio before a join: its last `fade` samples faded out (all of it, when shorter).
pub(super) fn fade_out_before_join(audio: &mut [f32], fade: usize) {
    let n = fade.min(audio.len());
    let from = audio.len() - n;
    for (x, w) in audio[from..].iter_mut().zip(linspace(1.0, 0.0, n)) {
        *x *= w;
    }
}

/// What follows a join, onto `merged`: `fade` samples of silence, then `chunk` with its first
/// `fade` samples faded in.
pub(super) fn append_after_join(merged: &mut Vec<f32>, chunk: &[f32], fade: usize) {
    merged.resize(merged.len() + fade, 0.0);
    let ramp = linspace(0.0, 1.0, fade.min(chunk.len()));
    merged.extend(
        chunk
            .iter()
            .enumerate()
            .map(|(i, &x)| ramp.get(i).map_or(x, |w| x * w)),
    );
}

/// numpy's `linspace(start, stop, n, dtype=float32)`: computed in f64, the last point exact.
pub(super) fn linspace(start: f64, stop: f64, n: usize) -> Vec<f32> {
    match n {
        0 => return Vec::new(),
        1 => return vec![start as f32],
        _ => {}
    }
    let step = (stop - start) / (n - 1) as f64;
    (0..n)
        .map(|i| {
            if i + 1 == n {
                stop as f32
            } else {
                (i as f64 * step + start) as f32
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_split_out_only_when_known_and_exact() {
        let parts = split_nonverbal("a[laughter]b[Laughter][sigh][sigh");
        assert_eq!(
            parts,
            [
                ("a", false),
                ("[laughter]", true),
                ("b[Laughter]", false),
                ("[sigh]", true),
                ("[sigh", false)
            ]
        );
        assert_eq!(split_nonverbal(""), []);
    }

    #[test]
    fn unknown_tags_are_listed_once_in_order() {
        let text = "[laugh] ok [laughter] [breath] [laugh] [Sigh] [1x] [a_b-2] [x y]";
        assert_eq!(
            unknown_nonverbal_tags(text),
            ["laugh", "breath", "Sigh", "a_b-2"]
        );
        assert!(unknown_nonverbal_tags("[sigh] [question-en]").is_empty());
    }

    #[test]
    fn linspace_is_numpys() {
        assert!(linspace(1.0, 0.0, 0).is_empty());
        assert_eq!(linspace(1.0, 0.0, 1), [1.0]);
        assert_eq!(linspace(0.0, 1.0, 3), [0.0, 0.5, 1.0]);
        assert_eq!(linspace(1.0, 0.0, 4)[1], (1.0f64 - 1.0 / 3.0) as f32);
    }
}
