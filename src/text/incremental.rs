//! Sentence splitting for text that arrives in pieces (a language model's tokens, Wyoming's
//! `synthesize-chunk`s, a WebSocket text stream), so speech can start with the first sentence
//! instead of after the last chunk.
//!
//! Chunks end anywhere, mid-word or right after a period that may yet turn out to be "Dr." or
//! "3.14", so a sentence is handed out only once the text after it settles where it ends. The
//! rules are those of [`split_sentences`]: fed the same text in any chunking, a
//! [`SentenceBuffer`] yields the same sentences as splitting the whole text at once, unless it
//! had to speak early because of its length or wait limit. A whole text is normalized before
//! it is split, so streamed text goes through a [`StreamNormalizer`] first, which hands out
//! the normalization of the whole text in pieces. Both are pure and synchronous: the caller
//! passes the time in and owns the timer.

use std::time::{Duration, Instant};

use super::normalize::Context;
use super::split::split_sentences;

/// Clause marks after which text held too long may be spoken before its sentence ends.
const CLAUSE_MARKS: &[char] = &[',', ';', ':', '—', '–'];

/// Collects streamed text and hands out complete sentences in order.
#[derive(Debug, Clone)]
pub struct SentenceBuffer {
    /// Text received but not yet handed out; it starts at a sentence or piece boundary.
    pending: String,
    max_chars: usize,
    max_wait: Option<Duration>,
    /// Since when the pending text has waited for its sentence to end.
    waiting_since: Option<Instant>,
}

impl SentenceBuffer {
    /// A buffer that never holds more than `max_sentence_chars` characters (at least 1) of
    /// text, whitespace after it aside, between calls: longer sentences come out in pieces cut
    /// as [`split_sentences`] cuts them. With
    /// `max_wait`, text that has waited that long for its sentence to end may be spoken up to
    /// its last clause mark (see [`SentenceBuffer::flush_overdue`]).
    pub fn new(max_sentence_chars: usize, max_wait: Option<Duration>) -> Self {
        Self {
            pending: String::new(),
            max_chars: max_sentence_chars.max(1),
            max_wait,
            waiting_since: None,
        }
    }

    /// Adds `chunk` (received at `now`) and returns the sentences it completed, in order.
    pub fn push(&mut self, chunk: &str, now: Instant) -> Vec<String> {
        self.push_before(chunk, "", now)
    }

    /// As [`push`](Self::push), where `next` is how the text is known to go on without being
    /// received for good (the start of the next sentence): it only settles where the
    /// sentences before it end.
    pub fn push_before(&mut self, chunk: &str, next: &str, now: Instant) -> Vec<String> {
        self.pending.push_str(chunk);
        let done = self.take_complete(next);
        self.rearm(now, !done.is_empty());
        done
    }

    /// When the pending text will have waited `max_wait`; `None` without a wait limit or
    /// pending text.
    pub fn deadline(&self) -> Option<Instant> {
        Some(self.waiting_since? + self.max_wait?)
    }

    /// Once the [`deadline`](Self::deadline) has passed, hands out what can be spoken of the
    /// pending text without waiting for more: all of it if it already ends like a sentence,
    /// else everything up to its last clause mark. With neither, the text keeps waiting and
    /// the deadline moves on by `max_wait`. Before the deadline it returns nothing.
    pub fn flush_overdue(&mut self, now: Instant) -> Vec<String> {
        if self.deadline().is_none_or(|deadline| now < deadline) {
            return Vec::new();
        }
        let cut = if ends_like_a_sentence(&self.pending) {
            self.pending.len()
        } else {
            last_clause_cut(&self.pending).unwrap_or(0)
        };
        let done = split_sentences(&self.pending[..cut], self.max_chars);
        let rest = &self.pending[cut..];
        let start = cut + rest.len() - rest.trim_start().len();
        self.pending.drain(..start);
        self.rearm(now, true);
        done
    }

    /// Hands out everything still pending: the end of the text has come.
    pub fn finish(&mut self) -> Vec<String> {
        let rest = split_sentences(&self.pending, self.max_chars);
        self.pending.clear();
        self.waiting_since = None;
        rest
    }

    /// The text received but not handed out yet.
    pub fn pending(&self) -> &str {
        &self.pending
    }

    /// Hands out the sentences whose end is settled, and the leading pieces of a pending
    /// sentence that has grown past the length limit.
    fn take_complete(&mut self, next: &str) -> Vec<String> {
        let text = format!("{}{next}", self.pending);
        let spans = split_sentences(&text, usize::MAX);
        // The boundary before the last span is settled only once the span holds a character
        // that decides it (a lowercase letter would have joined the sentences): openers and
        // whitespace do not.
        let decided = spans
            .last()
            .is_some_and(|last| last.chars().any(char::is_alphanumeric));
        let held = if decided { 1 } else { 2 }.min(spans.len());
        let complete = &spans[..spans.len() - held];

        let mut cursor = 0;
        let mut done = Vec::new();
        for sentence in complete {
            let end = skip_piece(&text, cursor, sentence);
            if end > self.pending.len() {
                break; // it lies in `next`
            }
            cursor = end;
            done.extend(split_sentences(sentence, self.max_chars));
        }
        let rest = &self.pending[cursor..];
        if rest.trim_end().chars().count() > self.max_chars {
            let mut pieces = split_sentences(rest, self.max_chars);
            pieces.pop(); // the tail may still grow
            for piece in &pieces {
                cursor = skip_piece(&self.pending, cursor, piece);
            }
            done.extend(pieces);
        }
        let start =
            cursor + self.pending[cursor..].len() - self.pending[cursor..].trim_start().len();
        self.pending.drain(..start);
        done
    }

    /// Starts the wait clock when text begins to wait, restarts it when something was handed
    /// out, and stops it when nothing is pending.
    fn rearm(&mut self, now: Instant, handed_out: bool) {
        if self.pending.trim().is_empty() {
            self.waiting_since = None;
        } else if handed_out || self.waiting_since.is_none() {
            self.waiting_since = Some(now);
        }
    }
}

/// The byte position just after `piece`, which follows `cursor` in `text` after whitespace
/// (the splitter's pieces are trimmed slices of its input, in order).
fn skip_piece(text: &str, cursor: usize, piece: &str) -> usize {
    let rest = &text[cursor..];
    // Only whitespace comes before the piece, and a trimmed piece starts with none.
    let at = rest.find(piece);
    debug_assert_eq!(
        at,
        Some(rest.len() - rest.trim_start().len()),
        "{piece:?} in {rest:?}"
    );
    cursor + at.map_or(rest.len(), |at| at + piece.len())
}

/// Whether `text` would end a sentence here whatever followed: probed by appending a
/// capitalized word, which splits off only after a real sentence end ("Dr." and "3." stay).
fn ends_like_a_sentence(text: &str) -> bool {
    const PROBE: &str = "X";
    let spans = split_sentences(&format!("{text} {PROBE}"), usize::MAX);
    spans.len() >= 2 && spans.last().is_some_and(|last| last == PROBE)
}

/// The byte position just after the last clause mark that is followed by whitespace.
fn last_clause_cut(text: &str) -> Option<usize> {
    text.char_indices()
        .rev()
        .find(|&(b, c)| {
            CLAUSE_MARKS.contains(&c)
                && text[b + c.len_utf8()..].starts_with(char::is_whitespace)
                && !text[..b].trim().is_empty()
        })
        .map(|(b, c)| b + c.len_utf8())
}

/// Texts appended to the line received so far to see whether its normalization up to a cut
/// can still change: another word (a heading's trailing `#`s and a list item's final period
/// depend on how the line ends), the rest of a horizontal rule, the ends of a link whose `[`
/// (or an autolink's or a tag's `<`) is already in (with and without a title), and the
/// closing marks of emphasis and code spans opened before the cut (after a word, and between
/// punctuation, where CommonMark pairs them by other rules).
const PROBES: &[&str] = &[
    "", " x", "x", " x #", " - -", " * *", " _ _", "](x)", "]](x)", "]]](x)", ")", "\")", "')",
    "(x)", "\"x\")", " \"x\")", "'x')", " 'x')", ">", "*", "x*", "**", "x**", "***", "x***", "_",
    "x_", "__", "x__", "~~", "x~~", "`", "x`", "``", "x``", "]", "][]", "][x]", "x]", "x](x)",
    "x]]", "-->", "\"", "'", "](/x/)", "x](/x/)", "/)",
    // Marks between punctuation both open and close, which pairs them differently.
    "._.", ".__.", ".*.", ".**.", ".~~.", "._", ".*", ".__", ".**",
];

/// [`PROBES`], and the closers of every run of marks on `line`: a code span closes only on a
/// run of as many backticks as opened it, however many that is.
fn probes(line: &str) -> Vec<String> {
    let mut probes: Vec<String> = PROBES.iter().map(|probe| probe.to_string()).collect();
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let run = chars[i..].iter().take_while(|&&x| x == c).count();
        if matches!(c, '`' | '*' | '_' | '~') && run > 2 {
            let marks: String = chars[i..i + run].iter().collect();
            for probe in [marks.clone(), format!("x{marks}"), format!(".{marks}.")] {
                if !probes.contains(&probe) {
                    probes.push(probe);
                }
            }
        }
        i += run;
    }
    probes
}

/// Normalizes text that arrives in pieces exactly as [`normalize`] normalizes the whole text,
/// handing the result out in pieces as soon as they are settled.
///
/// [`normalize`] works line by line (only the [`Context`] a line leaves open, a code fence,
/// an HTML comment or block, carries over to the next), and within a line what a span of
/// text reads as can depend on what comes later on it: a link's or an emphasis's end, and the
/// line's end (headings, list items, rules). So a line is normalized from its start each time text arrives, and the text up to
/// its last whitespace is handed out once appending more to the line (probed with
/// [`probes`]) cannot change how it normalizes. What was handed out is then replaced by a
/// stand-in that keeps the line's kind, so a long line is not normalized again and again.
#[derive(Debug, Clone, Default)]
pub struct StreamNormalizer {
    /// The stand-in for what was handed out of the current line, then the rest of the line
    /// received so far (raw).
    line: String,
    /// Raw bytes of the stand-in at the start of `line`, and of its normalization.
    stand_in: usize,
    stand_in_normalized: usize,
    /// What the current line is read in (a code fence, an HTML comment or block, or text).
    context: Context,
    /// Whether anything was handed out: what follows is then separated by a space.
    started: bool,
}

impl StreamNormalizer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `piece` and returns the normalized text that it settled (possibly nothing). All
    /// pieces returned, joined, are the normalization of all text received.
    pub fn push(&mut self, piece: &str) -> String {
        let mut out = String::new();
        let mut rest = piece;
        while let Some(newline) = rest.find('\n') {
            self.line.push_str(&rest[..newline]);
            self.end_line(&mut out);
            rest = &rest[newline + 1..];
        }
        self.line.push_str(rest);
        self.settle(&mut out);
        out
    }

    /// Hands out the rest of the current line as if it ended here.
    pub fn finish(&mut self) -> String {
        let mut out = String::new();
        self.end_line(&mut out);
        out
    }

    /// Characters received and not handed out yet.
    pub fn pending_chars(&self) -> usize {
        self.line[self.stand_in..].chars().count()
    }

    /// How the normalized text goes on after what was handed out, up to its first letter or
    /// digit, when nothing that may follow can change that: enough to settle where the
    /// sentence before it ends (see [`SentenceBuffer::push_before`]). Empty when unknown.
    pub fn peek(&self) -> String {
        if !self.started {
            return String::new();
        }
        let start_of = |line: &str| {
            let normalized = self.normalized(line);
            let tail = normalized.get(self.stand_in_normalized..)?.trim_start();
            let (at, c) = tail.char_indices().find(|&(_, c)| c.is_alphanumeric())?;
            // A link or an autolink may yet lose its marks, however it ends.
            if tail[..at].contains(['[', '<']) {
                return None;
            }
            Some(format!(" {}", &tail[..at + c.len_utf8()]))
        };
        let Some(peek) = start_of(&self.line) else {
            return String::new();
        };
        let stable = probes(&self.line)
            .iter()
            .all(|probe| start_of(&format!("{}{probe}", self.line)).as_ref() == Some(&peek));
        if stable {
            peek
        } else {
            String::new()
        }
    }

    fn normalized(&self, line: &str) -> String {
        self.context.normalize(line)
    }

    /// Appends `text` (the next part of the whole normalization) to `out`.
    fn emit(&mut self, text: &str, out: &mut String) {
        let text = text.trim_start();
        if text.is_empty() {
            return;
        }
        if self.started {
            out.push(' ');
        }
        out.push_str(text);
        self.started = true;
    }

    /// The line is complete: the rest of its normalization, and the fence state after it.
    fn end_line(&mut self, out: &mut String) {
        let line = std::mem::take(&mut self.line);
        let line = line.strip_suffix('\r').unwrap_or(&line);
        let normalized = self.normalized(line);
        let rest = normalized
            .get(self.stand_in_normalized..)
            .unwrap_or_default();
        self.emit(rest, out);
        self.context = self.context.after(line);
        self.stand_in = 0;
        self.stand_in_normalized = 0;
    }

    /// Hands out the line up to its last whitespace if nothing that can follow changes how
    /// that part normalizes.
    fn settle(&mut self, out: &mut String) {
        if self.context.reads_whole(&self.line) {
            return;
        }
        let Some((cut, space)) = self.line[self.stand_in..]
            .char_indices()
            .rev()
            .find(|&(_, c)| c.is_whitespace())
        else {
            return;
        };
        let cut = self.stand_in + cut;
        if self.context.after(&self.line[..cut]) != self.context.after("x") {
            // A line that opens or closes a fence, comment or HTML block: the stand-in would
            // lose its marks (and such lines are short).
            return;
        }
        if !self.context.has_text(&self.line[..cut]) {
            // Only markers so far ("1. ", "> "): what comes next may still open a block of
            // its own (a comment, a fence), which it would not after the stand-in's word.
            return;
        }
        let settled = self.normalized(&self.line[..cut]);
        if settled.len() <= self.stand_in_normalized {
            return;
        }
        let stand_in = self.stand_in_for(&self.line[..cut + space.len_utf8()]);
        let shorter = format!("{stand_in}{}", &self.line[cut..]);
        let stand_in_normalized = self.normalized(stand_in).len();
        // What may follow normalizes the same after the settled text as after the stand-in.
        let stable = probes(&self.line).iter().all(|probe| {
            let later = self.normalized(&format!("{}{probe}", self.line));
            let rest = later.strip_prefix(settled.as_str());
            let rest_after_stand_in = self.normalized(&format!("{shorter}{probe}"));
            rest.is_some_and(|rest| {
                rest.chars().next().is_none_or(char::is_whitespace)
                    && rest_after_stand_in.get(stand_in_normalized..) == Some(rest)
            })
        });
        if !stable {
            return;
        }
        self.emit(
            settled.get(self.stand_in_normalized..).unwrap_or_default(),
            out,
        );
        self.line = shorter;
        self.stand_in = stand_in.len();
        self.stand_in_normalized = stand_in_normalized;
    }

    /// A short line start that normalizes the rest of a line as `line_start` (which ends in
    /// whitespace) does: as a
    /// heading's, a list item's or a plain line's. What was handed out of a heading or list
    /// item ends so that it gets no final period; so does the stand-in.
    fn stand_in_for(&self, line_start: &str) -> &'static str {
        let ends = |probe: &str, end: &str| {
            self.normalized(&format!("{line_start}{probe}"))
                .ends_with(end)
        };
        if !ends("x", "x.") {
            "x"
        } else if ends("x #", "x.") {
            "# x."
        } else {
            "- x."
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::normalize;

    const MAX: usize = 400;

    const TEXT: &str = "Mr. Smith met Dr. Jones at 3.14 p.m. on St. Mary's day. They talked, e.g. \
        about the U.S. economy! He said \"Stop.\" Then he left. (It was late.) “Really?” she \
        asked. Wait... what? Well… Fine.\n\nA new paragraph\nstill same. J. R. R. Tolkien \
        wrote it; read it. Ünïcödé text 日本語 ends here";

    fn feed(chunks: &[&str], max_chars: usize) -> Vec<String> {
        let mut buffer = SentenceBuffer::new(max_chars, None);
        let now = Instant::now();
        let mut out = Vec::new();
        for chunk in chunks {
            out.extend(buffer.push(chunk, now));
            let held = buffer.pending().trim_end().chars().count();
            assert!(
                held <= max_chars,
                "{held} chars pending over the limit of {max_chars}"
            );
        }
        out.extend(buffer.finish());
        out
    }

    /// `text` cut at the given char positions.
    fn chunks_at(text: &str, cuts: &[usize]) -> Vec<String> {
        let chars: Vec<char> = text.chars().collect();
        let mut out = Vec::new();
        let mut start = 0;
        for &cut in cuts.iter().chain([chars.len()].iter()) {
            out.push(chars[start..cut].iter().collect());
            start = cut;
        }
        out
    }

    fn as_strs(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }

    #[test]
    fn any_single_cut_gives_the_sentences_of_the_whole_text() {
        let whole = split_sentences(TEXT, MAX);
        assert!(
            whole.len() > 10,
            "the sample text should have many sentences"
        );
        for cut in 0..=TEXT.chars().count() {
            let chunks = chunks_at(TEXT, &[cut]);
            assert_eq!(feed(&as_strs(&chunks), MAX), whole, "cut at char {cut}");
        }
    }

    #[test]
    fn one_char_at_a_time_and_random_chunks_give_the_same_sentences() {
        let whole = split_sentences(TEXT, MAX);
        let singles: Vec<String> = TEXT.chars().map(String::from).collect();
        assert_eq!(feed(&as_strs(&singles), MAX), whole);

        let len = TEXT.chars().count();
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..200 {
            let mut cuts = Vec::new();
            let mut at = 0;
            loop {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                at += 1 + (state % 9) as usize;
                if at >= len {
                    break;
                }
                cuts.push(at);
            }
            let chunks = chunks_at(TEXT, &cuts);
            assert_eq!(feed(&as_strs(&chunks), MAX), whole, "cuts {cuts:?}");
        }
    }

    #[test]
    fn a_sentence_comes_out_as_soon_as_the_next_one_begins() {
        let mut buffer = SentenceBuffer::new(MAX, None);
        let now = Instant::now();
        assert!(buffer.push("Hello the", now).is_empty());
        assert!(
            buffer.push("re. ", now).is_empty(),
            "the next word could be lowercase"
        );
        assert_eq!(buffer.push("How a", now), ["Hello there."]);
        assert_eq!(buffer.pending(), "How a");
        assert_eq!(buffer.push("re you? Fi", now), ["How are you?"]);
        assert_eq!(buffer.finish(), ["Fi"]);
        assert_eq!(buffer.pending(), "");
    }

    #[test]
    fn abbreviations_and_decimals_at_a_chunk_end_do_not_split() {
        let mut buffer = SentenceBuffer::new(MAX, None);
        let now = Instant::now();
        assert!(buffer.push("I met Dr.", now).is_empty());
        assert!(buffer.push(" Smith at 3.", now).is_empty());
        assert_eq!(
            buffer.push("14 today. Bye", now),
            ["I met Dr. Smith at 3.14 today."]
        );
        assert_eq!(buffer.finish(), ["Bye"]);

        let mut buffer = SentenceBuffer::new(MAX, None);
        assert!(buffer.push("We met in the U.S. ", now).is_empty());
        assert_eq!(
            buffer.push("last year. Then", now),
            ["We met in the U.S. last year."]
        );
    }

    #[test]
    fn an_opening_quote_does_not_settle_the_previous_sentence() {
        // "…left. “really?” she asked." is one sentence: the word after the quote is lowercase.
        let text = "He left. \"really?\" she asked. Done";
        let chunks = chunks_at(text, &[10]);
        assert_eq!(chunks[0], "He left. \"");
        assert_eq!(feed(&as_strs(&chunks), MAX), split_sentences(text, MAX));
        let mut buffer = SentenceBuffer::new(MAX, None);
        assert!(buffer.push(&chunks[0], Instant::now()).is_empty());
    }

    #[test]
    fn pending_text_never_exceeds_the_limit() {
        let text = "word ".repeat(400) + "end. " + &"x".repeat(150) + " tail";
        let chunks: Vec<String> = text
            .chars()
            .collect::<Vec<_>>()
            .chunks(7)
            .map(|c| c.iter().collect())
            .collect();
        for max in [10, 33, 100] {
            let pieces = feed(&as_strs(&chunks), max);
            for piece in &pieces {
                assert!(piece.chars().count() <= max, "{piece:?} over {max}");
                assert!(!piece.is_empty());
            }
            let squeeze = |s: &str| s.split_whitespace().collect::<String>();
            assert_eq!(squeeze(&pieces.concat()), squeeze(&text));
        }
    }

    #[test]
    fn a_long_chunk_comes_out_in_pieces_at_once() {
        let mut buffer = SentenceBuffer::new(20, None);
        let out = buffer.push(&"abc ".repeat(50), Instant::now());
        assert!(out.len() >= 8, "{out:?}");
        assert!(buffer.pending().chars().count() <= 20);
    }

    #[test]
    fn overdue_text_is_spoken_up_to_its_last_clause() {
        let wait = Duration::from_millis(500);
        let t0 = Instant::now();
        let mut buffer = SentenceBuffer::new(MAX, Some(wait));
        assert_eq!(buffer.deadline(), None);
        assert!(buffer.push("Well, let me think; about", t0).is_empty());
        assert_eq!(buffer.deadline(), Some(t0 + wait));
        assert!(buffer.flush_overdue(t0 + wait / 2).is_empty());
        let t1 = t0 + wait;
        assert_eq!(buffer.flush_overdue(t1), ["Well, let me think;"]);
        assert_eq!(buffer.pending(), "about");
        assert_eq!(buffer.deadline(), Some(t1 + wait));
        // No clause mark left: it keeps waiting, and the deadline moves on.
        let t2 = t1 + wait;
        assert!(buffer.flush_overdue(t2).is_empty());
        assert_eq!(buffer.deadline(), Some(t2 + wait));
        assert_eq!(buffer.push(" it. Next", t2), ["about it."]);
        assert_eq!(buffer.finish(), ["Next"]);
        assert_eq!(buffer.deadline(), None);
    }

    #[test]
    fn an_overdue_finished_sentence_is_spoken_whole_but_an_abbreviation_waits() {
        let wait = Duration::from_millis(100);
        let t0 = Instant::now();
        let mut buffer = SentenceBuffer::new(MAX, Some(wait));
        assert!(buffer.push("How can I help? ", t0).is_empty());
        assert_eq!(buffer.flush_overdue(t0 + wait), ["How can I help?"]);
        assert_eq!(buffer.deadline(), None);

        assert!(buffer.push("Ask Dr.", t0).is_empty());
        assert!(buffer.flush_overdue(t0 + wait * 2).is_empty());
        assert_eq!(buffer.push(" Who. X", t0), ["Ask Dr. Who."]);
    }

    #[test]
    fn without_a_wait_limit_there_is_no_deadline() {
        let mut buffer = SentenceBuffer::new(MAX, None);
        let t0 = Instant::now();
        buffer.push("Hello, there", t0);
        assert_eq!(buffer.deadline(), None);
        assert!(buffer
            .flush_overdue(t0 + Duration::from_secs(3600))
            .is_empty());
    }

    #[test]
    fn empty_and_blank_input_give_nothing() {
        assert!(feed(&[], MAX).is_empty());
        assert!(feed(&["", "  ", "\n\n", " "], MAX).is_empty());
        let mut buffer = SentenceBuffer::new(MAX, Some(Duration::from_secs(1)));
        buffer.push("   ", Instant::now());
        assert_eq!(
            buffer.deadline(),
            None,
            "whitespace does not wait to be spoken"
        );
    }

    /// Markup of every kind normalize knows, cut by sentences, links and lines.
    const MARKUP: &str = "# Intro ##\nMr. **Smith** paid $3.50, i.e. *less*. See [the docs. Really](https://x.org/a_b \"T\") \
        or <https://a.b/c>! Then `code.` ran -- fast\u{301}.\n\n- apples. pears\n* [x] done\n\
        > quoted. **bold\nline** 1990–1995 👍 ok…\n---\n* * *\n```rust\nlet x = 1; - no\n# no\n```\n\
        ## Part two ## more\r\nEnd (really). [a [b](c) d](e) [brackets] stay. 2 * 3 = 6 e.g. this \
        [Kokoro](/kˈOkəɹO/) and [New York](/nuː jˈɔɹk/) said [so](/x y) too";

    fn normalize_in(chunks: &[&str]) -> String {
        let mut stream = StreamNormalizer::new();
        let mut out = String::new();
        for chunk in chunks {
            out.push_str(&stream.push(chunk));
        }
        out.push_str(&stream.finish());
        assert_eq!(stream.pending_chars(), 0);
        out
    }

    #[test]
    fn streamed_text_normalizes_as_the_whole_text_in_any_chunking() {
        let whole = normalize(MARKUP);
        for cut in 0..=MARKUP.chars().count() {
            let chunks = chunks_at(MARKUP, &[cut]);
            assert_eq!(normalize_in(&as_strs(&chunks)), whole, "cut at char {cut}");
        }
        let singles: Vec<String> = MARKUP.chars().map(String::from).collect();
        assert_eq!(normalize_in(&as_strs(&singles)), whole);
        let len = MARKUP.chars().count();
        let mut state: u64 = 0x2545_F491_4F6C_DD1D;
        for _ in 0..300 {
            let mut cuts = Vec::new();
            let mut at = 0;
            loop {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                at += 1 + (state % 12) as usize;
                if at >= len {
                    break;
                }
                cuts.push(at);
            }
            let chunks = chunks_at(MARKUP, &cuts);
            assert_eq!(normalize_in(&as_strs(&chunks)), whole, "cuts {cuts:?}");
        }
    }

    #[test]
    fn settled_text_comes_out_before_the_line_ends() {
        let mut stream = StreamNormalizer::new();
        assert_eq!(stream.push("Hello **there**. How"), "Hello there.");
        assert_eq!(stream.pending_chars(), " How".chars().count());
        // A link may still close: its text waits.
        assert_eq!(stream.push(" are [the docs. And"), "");
        assert_eq!(stream.push(" more](x) now"), " How are the docs. And more");
        assert_eq!(stream.finish(), " now");
    }

    #[test]
    fn generated_markup_normalizes_as_the_whole_text_in_pieces() {
        let tokens = [
            "**",
            "*",
            "_",
            "__",
            "~~",
            "`",
            "```",
            "~~~",
            "[",
            "](",
            ")",
            "![",
            "]",
            "(",
            "<https://a.b>",
            "<",
            ">",
            "#",
            "##",
            "\n",
            "\n\n",
            "- ",
            "* ",
            "> ",
            "[x] ",
            "---",
            "word",
            "Word",
            "Dr.",
            "e.g.",
            "3.14",
            ".",
            "!",
            "?",
            ",",
            ";",
            "\"",
            "'",
            "“",
            "’",
            "–",
            "--",
            "…",
            " ",
            "  ",
            "\t",
            "\r\n",
            "1990",
            "Ünï",
            "e\u{301}",
            "👍",
            "\u{200B}",
            "<div>",
            "<b>",
            "</b>",
            "<here>",
            "<!--",
            "-->",
            "|",
            "| ",
            " |",
            "|---|",
            "===",
            "````",
            "[1]",
            "[x]: y",
            "1. ",
        ];
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        for round in 0..8000 {
            let text: String = (0..(round % 60))
                .map(|_| tokens[next(tokens.len())])
                .collect();
            let whole = normalize(&text);
            let len = text.chars().count();
            let mut cuts: Vec<usize> = (0..next(10)).map(|_| next(len + 1)).collect();
            cuts.sort_unstable();
            let chunks = chunks_at(&text, &cuts);
            assert_eq!(
                normalize_in(&as_strs(&chunks)),
                whole,
                "{text:?} cut at {cuts:?}"
            );
        }
    }
}
