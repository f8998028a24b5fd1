//! Speech with word timestamps: the whole body, and when each word of the input is spoken.
//!
//! Captions, karaoke-style highlighting and lip sync need to know which word is heard when.
//! The engine reports where each word of an utterance lies in that utterance's audio; here
//! those times move onto the joined body (sentence pauses included, exactly as
//! [`join`](super::join) places the sentences) and the words back onto the text the client
//! sent. The engine saw the sentence as it is read (`$5.50` written out as "five dollars fifty
//! cents"): the words of one rewrite become the one word they stand for, timed from the first
//! to the last. And the sentence itself was normalized (markup gone, quotes unified), so each
//! word is found again in the original, in order, and reported as written there with its
//! character offsets.

use std::ops::Range;

use bytes::Bytes;

use super::{encode_joined, join, Job, SpeechError, SpeechService, Utterance, Utterances};
use crate::engine::{Pcm, WordTiming};
use crate::metrics as m;

/// The whole body of a job and its words' timestamps.
#[derive(Debug, Clone)]
pub struct TimedSpeech {
    pub audio: Bytes,
    pub sample_rate: u32,
    pub duration_s: f64,
    /// Every spoken word, in order; times never go back and never overlap.
    pub words: Vec<WordStamp>,
}

/// A word of the input and when it is heard.
#[derive(Debug, Clone, PartialEq)]
pub struct WordStamp {
    /// The word as written in the input (`"$100"`, `"didn’t"`), surrounding punctuation aside.
    pub word: String,
    pub start_s: f64,
    pub end_s: f64,
    /// Its position in the input, in characters (Unicode scalar values): `input.chars()
    /// .skip(char_start).take(char_end - char_start)` is `word`.
    pub char_start: usize,
    pub char_end: usize,
    /// Which utterance (a sentence, or a clause of a long one) it is spoken in, from 0: where
    /// the engine paused, so where captions may break.
    pub sentence: usize,
}

impl SpeechService {
    /// Synthesizes the whole body, as [`speak`](Self::speak) would with the same seed, with
    /// the timestamps of its words. Not cached: the body is, but its timings are not kept.
    pub async fn speak_with_words(&self, job: Job) -> Result<TimedSpeech, SpeechError> {
        let timed = self.timed_words(&job).await?;
        let audio = encode_joined(&job, &timed.pieces, &job.script().pauses()).await?;
        m::add_audio_seconds(audio.duration_s);
        Ok(TimedSpeech {
            audio: audio.bytes,
            sample_rate: audio.sample_rate,
            duration_s: audio.duration_s,
            words: timed.words,
        })
    }

    /// Synthesizes the job's sentences with word timings, and places its words on the body
    /// they join into; encoding that body is left to the caller, which may not need it.
    pub(super) async fn timed_words(&self, job: &Job) -> Result<TimedWords, SpeechError> {
        let request = Utterances::of_input(job, true);
        metrics::counter!(m::SYNTHESES_TOTAL).increment(1);
        let texts = request.script.utterances.clone();
        let pauses = request.script.pauses();
        let mut finder = Finder::within(job.input(), request.script.text_ranges.clone());
        let pieces = self
            .start_utterances(job, request, false)
            .await?
            .collect()
            .await?;
        // Engines say up front whether they time words (`Voice::times_words`); one that
        // said so and still gave none is refused the same way.
        if pieces.iter().any(|piece| piece.words.is_none()) {
            return Err(super::no_word_timings(job.voice().key.engine()));
        }
        let rate = job.voice().sample_rate;
        let (starts, end) = join::sentence_starts(&pieces, &pauses, rate);
        let mut words = Vec::new();
        for (sentence, ((piece, start), utterance)) in
            pieces.iter().zip(&starts).zip(&texts).enumerate()
        {
            let timings = piece.words.as_deref().unwrap_or_default();
            words.extend(finder.place(utterance, timings, *start, rate, sentence));
        }
        Ok(TimedWords {
            duration_s: end as f64 / f64::from(rate),
            pieces,
            words,
        })
    }
}

/// A job's sentence audio with its words placed on the body they join into.
pub(super) struct TimedWords {
    pub pieces: Vec<Pcm>,
    pub words: Vec<WordStamp>,
    /// Length of the joined body in seconds.
    pub duration_s: f64,
}

/// Finds normalized words again in the original text, left to right.
pub(super) struct Finder {
    original: String,
    /// Where words may be found (SSML: the text between the tags); `None`: anywhere.
    ranges: Option<Vec<Range<usize>>>,
    /// Byte position after the last word found, and how many characters precede it.
    cursor: usize,
    chars_before: usize,
}

impl Finder {
    #[cfg(test)]
    pub fn new(original: &str) -> Self {
        Self::within(original, None)
    }

    /// A finder that looks for words inside `ranges` of `original` only, when given.
    pub fn within(original: &str, ranges: Option<Vec<Range<usize>>>) -> Self {
        Self {
            original: original.to_string(),
            ranges,
            cursor: 0,
            chars_before: 0,
        }
    }

    /// Whether a word may be found at `start..end` of the original.
    fn allowed(&self, start: usize, end: usize) -> bool {
        self.ranges.as_ref().is_none_or(|ranges| {
            ranges
                .iter()
                .any(|range| range.start <= start && end <= range.end)
        })
    }

    /// The words of sentence number `sentence` (whose spoken text the engine timed), which
    /// starts at sample `sentence_start` of the audio at `rate`, found in the original.
    pub fn place(
        &mut self,
        utterance: &Utterance,
        timings: &[WordTiming],
        sentence_start: usize,
        rate: u32,
        sentence: usize,
    ) -> Vec<WordStamp> {
        let seconds = |samples: usize| samples as f64 / f64::from(rate);
        let spoken = &utterance.spoken;
        let mut stamps: Vec<WordStamp> = Vec::new();
        // The rewrite the last stamp came from: the words after it in the same rewrite only
        // stretch that stamp.
        let mut last_rewrite = None;
        for timing in timings {
            let Some(said) = spoken.text.get(timing.text.clone()) else {
                continue;
            };
            let rewrite = spoken.rewrite_of(&timing.text);
            let end_s = seconds(sentence_start + timing.end);
            if let (Some(rewrite), Some(last)) = (rewrite, stamps.last_mut()) {
                if last_rewrite == Some(rewrite.spoken.start) {
                    last.end_s = last.end_s.max(end_s);
                    continue;
                }
            }
            last_rewrite = rewrite.map(|r| r.spoken.start);
            // A rewrite may take an abbreviation's period (`Dr.`): a word is reported without
            // the punctuation around it.
            let word = rewrite
                .and_then(|r| utterance.written.get(r.written.clone()))
                .map(|w| w.trim_matches(|c: char| ".,;:!?".contains(c)))
                .filter(|w| !w.is_empty())
                .unwrap_or(said);
            let (word, char_start, char_end) = self.find(word);
            stamps.push(WordStamp {
                word,
                start_s: seconds(sentence_start + timing.start),
                end_s,
                char_start,
                char_end,
                sentence,
            });
        }
        stamps
    }

    /// The next occurrence of `word` after the previous one (quotes and dashes compared by
    /// kind, as normalization unified them): the original's spelling and character range. A
    /// word that cannot be found (normalization changed more than punctuation) keeps its
    /// normalized spelling and gets an empty range where the search stands.
    fn find(&mut self, word: &str) -> (String, usize, usize) {
        let rest = &self.original[self.cursor..];
        let cursor = self.cursor;
        let found = rest.char_indices().find_map(|(at, _)| {
            matches_at(&rest[at..], word)
                .filter(|len| self.allowed(cursor + at, cursor + at + len))
                .map(|len| (at, len))
        });
        let Some((at, len)) = found else {
            return (word.to_string(), self.chars_before, self.chars_before);
        };
        let written = &rest[at..at + len];
        let start = self.chars_before + rest[..at].chars().count();
        let end = start + written.chars().count();
        self.cursor += at + len;
        self.chars_before = end;
        (written.to_string(), start, end)
    }
}

/// The byte length of the prefix of `text` that spells `word`, if it does.
fn matches_at(text: &str, word: &str) -> Option<usize> {
    let mut text_chars = text.char_indices();
    for expected in word.chars() {
        let (_, c) = text_chars.next()?;
        if fold(c) != fold(expected) {
            return None;
        }
    }
    Some(text_chars.next().map_or(text.len(), |(at, _)| at))
}

/// Characters as normalization unifies them: quotes by kind, every dash one dash.
fn fold(c: char) -> char {
    match c {
        '“' | '”' | '„' | '‟' | '«' | '»' | '″' | '〝' | '〞' | '＂' => '"',
        '‘' | '’' | '‚' | '‛' | '′' | '‹' | '›' | '＇' => '\'',
        '–' | '‒' | '—' | '―' | '⸺' | '⸻' | '−' | '‐' | '‑' => '-',
        c => c,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_in_markup_are_never_found() {
        let original = "<speak><s>speak</s> <sub alias=\"x\">s</sub></speak>";
        let text = |word: &str, after: &str| {
            let at = original.find(&format!("{word}{after}")).unwrap();
            at..at + word.len()
        };
        let ranges = vec![text("speak", "</s>"), text("s", "</sub>")];
        let mut finder = Finder::within(original, Some(ranges.clone()));
        let (word, start, end) = finder.find("speak");
        assert_eq!((word.as_str(), start..end), ("speak", ranges[0].clone()));
        // The next "s" that is text, not the `s` of `</s>` or of `<sub`.
        let (_, start, end) = finder.find("s");
        assert_eq!(start..end, ranges[1]);
    }

    #[test]
    fn words_are_found_in_order_with_their_written_spelling() {
        let original = "**Don’t** pay $100 — don't!  Naïve café";
        let mut finder = Finder::new(original);
        let chars: Vec<char> = original.chars().collect();
        for (normalized, written) in [
            ("Don't", "Don’t"),
            ("pay", "pay"),
            ("$100", "$100"),
            ("don't", "don't"),
            ("Naïve", "Naïve"),
            ("café", "café"),
        ] {
            let (word, start, end) = finder.find(normalized);
            assert_eq!(word, written);
            assert_eq!(chars[start..end].iter().collect::<String>(), written);
        }
        // Not there: an empty range where the search stands, nothing skipped.
        let (word, start, end) = finder.find("zebra");
        assert_eq!(
            (word.as_str(), start, end),
            ("zebra", chars.len(), chars.len())
        );
    }
}
