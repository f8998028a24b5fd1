//! Where a streamed utterance's first phrase ends, so that its first audio comes after a few
//! words instead of after the whole sentence.
//!
//! An engine that needs a whole utterance before any of its audio exists (Kokoro: the
//! decoder's instance norms see all of it) can only start sooner by speaking a shorter
//! utterance first. The cut goes where a speaker could breathe, so that the join is not heard:
//! after the first clause when that clause is short, else in a long clause after a handful of
//! words, before a conjunction, a relative pronoun or a preposition. Never inside a number
//! (the words a rewrite made of `$5.50`), inside a name ("Bank of America") or inside words
//! said with given phonemes: those are the `protected` byte ranges and the capitalized runs.
//! A sentence too short to gain from a cut is not cut.

use super::english::is_number_word;
use std::ops::Range;

/// Fewest words before a cut at a clause mark: a lone "Sure," makes too little audio to
/// cover the computation of what follows it.
const MIN_CLAUSE_WORDS: usize = 3;
/// Fewest words before a cut inside a clause.
const MIN_BREATH_WORDS: usize = 4;
/// Most words before any cut: the first audio must come soon.
const MAX_FIRST_WORDS: usize = 8;
/// Fewest words after a cut: less is not worth a join.
const MIN_REST_WORDS: usize = 3;

/// Marks after which a clause ends.
const CLAUSE_MARKS: &[char] = &[',', ';', ':', '—', '–'];
/// Closing quotes and brackets that stay with the word before a cut.
const CLOSERS: &[char] = &['"', '\'', '”', '’', '»', ')', ']', '}'];
const OPENERS: &[char] = &['"', '\'', '“', '‘', '«', '(', '[', '{'];

/// Words a new clause starts with: a speaker breathes before them.
const CONJUNCTIONS: &[&str] = &[
    "and", "but", "or", "nor", "so", "yet", "because", "although", "though", "while", "whereas",
    "unless", "until", "since", "if", "when", "whenever", "wherever", "once", "which", "who",
    "whom", "whose", "where", "that",
];
/// Prepositions: a weaker place to breathe, taken when no conjunction is in reach. "of" binds
/// too tightly ("a cup of tea") to be one.
const PREPOSITIONS: &[&str] = &[
    "about",
    "above",
    "across",
    "after",
    "against",
    "along",
    "among",
    "around",
    "at",
    "before",
    "behind",
    "below",
    "beneath",
    "beside",
    "between",
    "beyond",
    "by",
    "during",
    "except",
    "for",
    "from",
    "in",
    "inside",
    "into",
    "near",
    "on",
    "onto",
    "outside",
    "over",
    "past",
    "through",
    "throughout",
    "to",
    "toward",
    "towards",
    "under",
    "upon",
    "with",
    "within",
    "without",
];
/// Words after which "to" starts an infinitive ("want to go"), no phrase of its own.
const BEFORE_INFINITIVE: &[&str] = &[
    "want", "wants", "wanted", "need", "needs", "needed", "have", "has", "had", "going", "able",
    "trying", "try", "tried", "like", "love", "used", "ought", "got", "seem", "seems", "hope",
    "plan", "plans", "decided", "wish",
];
/// Articles skipped when looking at the word a preposition governs ("Lord of the Rings").
const ARTICLES: &[&str] = &["the", "a", "an"];

/// Where the rest of `text` starts when its first phrase is spoken apart (a byte offset at the
/// start of a word; the first phrase is `text[..cut]` without its trailing space), or `None`
/// when the text is better spoken whole. `protected`: byte ranges no cut may fall inside.
pub fn first_phrase_end(text: &str, protected: &[Range<usize>]) -> Option<usize> {
    let words = words(text);
    let count = words.len();
    // The boundary after word `i` (1-based count of words before it) may be a cut when both
    // sides keep enough words and nothing spans it.
    let open = |i: usize| {
        let (before, after) = (&words[i - 1], &words[i]);
        i + MIN_REST_WORDS <= count
            && !protected
                .iter()
                .any(|r| r.start < after.start && r.end > before.end)
            && !has_digit(&text[before.clone()])
            && !has_digit(&text[after.clone()])
    };
    let last = MAX_FIRST_WORDS.min(count.saturating_sub(MIN_REST_WORDS));
    let clause =
        (MIN_CLAUSE_WORDS..=last).find(|&i| open(i) && ends_clause(&text[words[i - 1].clone()]));
    if clause.is_some() {
        return clause.map(|i| words[i].start);
    }
    let breath = |list: &[&str]| {
        (MIN_BREATH_WORDS..=last)
            .find(|&i| open(i) && breathes_before(text, &words, i, list))
            .map(|i| words[i].start)
    };
    breath(CONJUNCTIONS).or_else(|| breath(PREPOSITIONS))
}

/// Byte ranges of the whitespace-separated words of `text`.
fn words(text: &str) -> Vec<Range<usize>> {
    let mut words = Vec::new();
    let mut start = None;
    for (at, c) in text.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(s)) => {
                words.push(s..at);
                start = None;
            }
            (false, None) => start = Some(at),
            _ => {}
        }
    }
    if let Some(s) = start {
        words.push(s..text.len());
    }
    words
}

fn has_digit(word: &str) -> bool {
    word.chars().any(|c| c.is_ascii_digit())
}

/// The word as compared with the lists: lowercase, without the quotes, brackets and
/// punctuation around it.
fn bare(word: &str) -> String {
    word.trim_start_matches(OPENERS)
        .trim_end_matches(CLOSERS)
        .trim_end_matches(|c: char| c.is_ascii_punctuation())
        .to_lowercase()
}

/// Whether `word` ends a clause (`,` `;` `:` or a dash after it, closers aside).
fn ends_clause(word: &str) -> bool {
    word.trim_end_matches(CLOSERS).ends_with(CLAUSE_MARKS)
}

/// Whether the word after `i` words is one of `list`, written in lowercase (capitalized, it
/// is part of a title or name), and a cut before it splits no name or number.
fn breathes_before(text: &str, words: &[Range<usize>], i: usize, list: &[&str]) -> bool {
    let raw = text[words[i].clone()].trim_start_matches(OPENERS);
    if !raw.starts_with(|c: char| c.is_lowercase()) {
        return false;
    }
    let word = bare(raw);
    if !list.contains(&word.as_str()) {
        return false;
    }
    let before = bare(&text[words[i - 1].clone()]);
    if word == "to" && BEFORE_INFINITIVE.contains(&before.as_str()) {
        return false;
    }
    // A number's words joined by "and" ("one hundred and five").
    let next = words
        .get(i + 1)
        .map(|w| bare(&text[w.clone()]))
        .unwrap_or_default();
    // "one hundred and five" is one number, not two phrases.
    if is_number_word(&before) && is_number_word(&next) {
        return false;
    }
    // A name with a small word inside ("Bank of America", "Lord of the Rings"): the word
    // before is capitalized (not as the sentence's first) and so is the next that is no
    // article.
    let capitalized = |w: &Range<usize>| {
        text[w.clone()]
            .trim_start_matches(OPENERS)
            .starts_with(char::is_uppercase)
    };
    let governed = words[i + 1..]
        .iter()
        .find(|w| !ARTICLES.contains(&bare(&text[(*w).clone()]).as_str()));
    let inside_name = i >= 2 && capitalized(&words[i - 1]) && governed.is_some_and(capitalized);
    !inside_name
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two phrases `text` is cut into, or the text whole.
    fn cut(text: &str) -> (String, String) {
        cut_protecting(text, &[])
    }

    fn cut_protecting(text: &str, protected: &[Range<usize>]) -> (String, String) {
        match first_phrase_end(text, protected) {
            Some(at) => (text[..at].trim_end().to_string(), text[at..].to_string()),
            None => (text.to_string(), String::new()),
        }
    }

    fn range_of(text: &str, words: &str) -> Range<usize> {
        let at = text.find(words).unwrap();
        at..at + words.len()
    }

    #[test]
    fn a_short_first_clause_is_the_first_phrase() {
        assert_eq!(
            cut("When the meeting ends, we will send everyone a summary of the decisions."),
            (
                "When the meeting ends,".into(),
                "we will send everyone a summary of the decisions.".into()
            )
        );
        assert_eq!(
            cut("Well; that settles it for the rest of us today."),
            (
                "Well; that settles it".into(),
                "for the rest of us today.".into()
            ),
            "a one-word clause is too short: a breath point after it instead"
        );
    }

    #[test]
    fn a_long_clause_is_cut_before_a_conjunction_then_a_preposition() {
        assert_eq!(
            cut("The quick brown fox jumps over the lazy dog."),
            (
                "The quick brown fox jumps".into(),
                "over the lazy dog.".into()
            )
        );
        assert_eq!(
            cut("Sure, I can help you book a table for two at seven tonight."),
            (
                "Sure, I can help you book a table".into(),
                "for two at seven tonight.".into()
            )
        );
        // A conjunction in reach wins over an earlier preposition.
        assert_eq!(
            cut("I looked at the old report and the new one twice over."),
            (
                "I looked at the old report".into(),
                "and the new one twice over.".into()
            )
        );
        // No "to" of an infinitive, and never past eight words.
        assert_eq!(
            cut("We really want to visit the museum with my parents tomorrow."),
            (
                "We really want to visit the museum".into(),
                "with my parents tomorrow.".into()
            )
        );
        let (first, _) =
            cut("Please remember my very long grocery list today because shops close early.");
        assert!(
            first.split_whitespace().count() <= MAX_FIRST_WORDS,
            "{first}"
        );
    }

    #[test]
    fn no_breath_point_in_reach_means_no_cut() {
        let text = "Beautiful bright yellow sunflowers grew tall everywhere outside today.";
        assert_eq!(cut(text), (text.into(), String::new()));
    }

    #[test]
    fn very_short_sentences_are_spoken_whole() {
        for text in [
            "Okay.",
            "Hello there, world.",
            "Yes, and then we left.",
            "Sure, go ahead now.",
        ] {
            assert_eq!(cut(text), (text.into(), String::new()), "{text}");
        }
    }

    #[test]
    fn numbers_are_never_cut() {
        let text = "The invoice says one hundred and five dollars for the repair.";
        let (first, rest) = cut(text);
        assert!(!first.ends_with("hundred"), "{first} | {rest}");
        // The words a rewrite made of "$5.50", protected as one.
        let text = "You owe me five dollars and fifty cents for the coffee today.";
        let number = range_of(text, "five dollars and fifty cents");
        let (first, rest) = cut_protecting(text, std::slice::from_ref(&number));
        assert!(
            first.len() <= number.start || first.len() >= number.end,
            "{first} | {rest}"
        );
        assert_eq!(first, "You owe me five dollars and fifty cents");
        // Digits left in the text are never a side of a cut.
        let text = "Call me on 555 and I will tell you everything tonight.";
        let (first, _) = cut(text);
        assert!(!first.ends_with("555"), "{first}");
    }

    #[test]
    fn names_are_never_cut() {
        let text = "Yesterday I opened an account at Bank of America with my sister.";
        assert_eq!(
            cut(text),
            (
                "Yesterday I opened an account".into(),
                "at Bank of America with my sister.".into()
            )
        );
        let text = "My friend Anna loves Tales from the Crypt every single summer.";
        let (first, rest) = cut(text);
        assert!(!first.ends_with("Tales"), "{first} | {rest}");
        // A capitalized small word is part of a title.
        let text = "Last night we all watched Gone With The Wind together at home.";
        let (first, rest) = cut(text);
        assert!(!first.ends_with("Gone"), "{first} | {rest}");
    }

    #[test]
    fn words_said_with_given_phonemes_are_never_cut() {
        let text = "Please give a warm welcome to Kokoro and friends on the stage tonight.";
        // Unprotected, the conjunction is the better place…
        assert_eq!(cut(text).0, "Please give a warm welcome to Kokoro");
        // …but not inside words said with given phonemes.
        let given = range_of(text, "Kokoro and friends");
        let (first, rest) = cut_protecting(text, &[given]);
        assert_eq!(first, "Please give a warm welcome", "{first} | {rest}");
        assert_eq!(rest, "to Kokoro and friends on the stage tonight.");
    }

    #[test]
    fn phrases_joined_give_the_text() {
        for text in [
            "Sure, I can help you book a table for two at seven tonight.",
            "  The quick brown fox   jumps over the lazy dog.  ",
            "“Well,” she said, “that is not what I meant at all.”",
        ] {
            if let Some(at) = first_phrase_end(text, &[]) {
                assert!(text.is_char_boundary(at));
                let rejoined = format!("{} {}", text[..at].trim_end(), &text[at..]);
                let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
                assert_eq!(squash(&rejoined), squash(text));
                assert!(!text[at..].starts_with(char::is_whitespace));
            }
        }
    }
}
