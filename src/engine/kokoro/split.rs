//! An utterance's tokens cut into model inputs of at most [`MAX_TOKENS`], and the tokens of
//! each written word, so that word timestamps follow from the durations the model gives each
//! token.
//!
//! Kokoro reads at most 510 tokens at once (ALBERT's 512 positions less the two pads), but
//! the server gives one pass fewer ([`pass_pieces`]): a pass holds all of its audio in the
//! decoder and generator at once, so its memory grows with the audio it makes, and slow speech
//! makes more audio of the same tokens. Every piece is spoken as a whole utterance with its
//! own intonation, so cuts go where a speaker would pause: after a sentence's end
//! (`. ! ? …`), else after `:` or `;`, else after `,` or `—` (the order of hexgrad's
//! pipeline), a closing `)` or `”` staying with what it closes; else between words; inside a
//! word only when one word alone is longer than a piece. As in hexgrad's pipeline, the last
//! such place in the window is taken, however early.
//!
//! Each token keeps the character of espeak's IPA it came from (as Piper's traced pieces keep
//! theirs), and [`word_tokens`] aligns the text's words to that IPA with the same alignment as
//! Piper's word timings ([`crate::text::words::spoken_words`]).

use std::ops::Range;

use super::language::Language;
use super::phonemes::{Phonemes, PhonemizeError};
use super::vocab;
pub use super::vocab::MAX_TOKENS;
use crate::text::Pronunciation;

/// Most tokens in one pass at speed 1 or faster. A pass needs about 20 MiB per second of
/// the audio it makes (measured with the int8 model on the CPU: 15 s of audio from one pass
/// raised the peak RSS by 293 MiB), and English or spelled-out text makes 12–20 tokens a
/// second at speed 1, so this is 12–21 s of audio, at most ≈ 420 MiB a pass: two passes at
/// once (one per core) stay well inside the server's 1.5 GB bound. All 510 tokens would be
/// 25–43 s and ≈ 860 MiB a pass. Kokoro-FastAPI aims at 175–250 tokens a chunk, too; a
/// sentence needs this many only past 40-odd words, and is then cut at a clause mark.
pub const PASS_TOKENS: usize = 250;

/// The fewest tokens a pass is cut to however slow the speech: a few words.
const MIN_PASS_TOKENS: usize = 32;

/// The token limit of one pass at `speed`: the model divides its durations by the speed, so
/// speech slower than 1 gets proportionally fewer tokens a pass and as much audio as at
/// speed 1. Without this, speed 0.25 made four times the audio in one pass (20 ideographs,
/// read "Chinese letter" each: a peak RSS of 1.9 GB and rising; 955 MiB with it).
pub fn tokens_per_pass(speed: f32) -> usize {
    let slower = if speed.is_finite() && speed > 0.0 {
        (1.0 / speed).max(1.0)
    } else {
        1.0
    };
    ((PASS_TOKENS as f32 / slower) as usize).clamp(MIN_PASS_TOKENS, PASS_TOKENS)
}

/// [`pieces`] of at most [`tokens_per_pass`]`(speed)` tokens, the model inputs of an
/// utterance, each counted in `omnivoice_kokoro_pass_tokens` (and a cut utterance in
/// `omnivoice_utterances_split_total`), so that an operator and the bounded-work tests see
/// that no pass exceeds the limit.
pub fn pass_pieces(phonemes: &Phonemes, speed: f32) -> Vec<Piece> {
    let pieces = pieces(phonemes, tokens_per_pass(speed));
    if pieces.len() > 1 {
        metrics::counter!(crate::metrics::UTTERANCES_SPLIT).increment(1);
    }
    for piece in &pieces {
        metrics::histogram!(crate::metrics::KOKORO_PASS_TOKENS).record(piece.tokens.len() as f64);
    }
    pieces
}

/// Where a cut is best, best first: sentence ends, then `:`/`;`, then `,`/`—`.
const CUT_AFTER: [&[char]; 3] = [&['.', '!', '?', '…'], &[':', ';'], &[',', '—']];
/// Closers that stay with the mark before them.
const CLOSERS: &[char] = &[')', '”'];
const SPACE: char = ' ';

/// One model input: token ids without the pads, and where each came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    pub tokens: Vec<u32>,
    /// For each token, the index of the character of [`Phonemes::espeak`] it was made from.
    pub sources: Vec<usize>,
}

impl Piece {
    /// The piece's symbols as text, for logs.
    pub fn phonemes(&self) -> String {
        self.tokens
            .iter()
            .filter_map(|&t| vocab::symbol(t))
            .collect()
    }
}

/// One token with its symbol and source.
#[derive(Debug, Clone, Copy)]
struct Token {
    symbol: char,
    id: u32,
    source: usize,
}

/// The tokens of `phonemes` (misaki symbols the vocabulary has; the others are dropped) in
/// pieces of at most `max_tokens` (at least 1), cut as the module says. Spaces at a cut are
/// dropped, so no piece starts or ends with one. No tokens, no pieces.
pub fn pieces(phonemes: &Phonemes, max_tokens: usize) -> Vec<Piece> {
    let tokens: Vec<Token> = phonemes
        .traced()
        .filter_map(|(symbol, source)| vocab::id(symbol).map(|id| Token { symbol, id, source }))
        .collect();
    let max = max_tokens.max(1);
    let mut pieces = Vec::new();
    let mut start = 0;
    loop {
        while tokens.get(start).is_some_and(|t| t.symbol == SPACE) {
            start += 1;
        }
        let rest = &tokens[start..];
        if rest.is_empty() {
            return pieces;
        }
        let end = if rest.len() <= max {
            rest.len()
        } else {
            cut(rest, max)
        };
        let mut piece = &rest[..end];
        while let [head @ .., last] = piece {
            if last.symbol != SPACE {
                break;
            }
            piece = head;
        }
        pieces.push(Piece {
            tokens: piece.iter().map(|t| t.id).collect(),
            sources: piece.iter().map(|t| t.source).collect(),
        });
        start += end;
    }
}

/// Where to end the first piece of `rest` (longer than `max`): 1..=max.
fn cut(rest: &[Token], max: usize) -> usize {
    for marks in CUT_AFTER {
        // A mark at 0 would make a piece of punctuation alone.
        if let Some(at) = (1..max).rev().find(|&i| marks.contains(&rest[i].symbol)) {
            let mut end = at + 1;
            while end < max && CLOSERS.contains(&rest[end].symbol) {
                end += 1;
            }
            return end;
        }
    }
    // A space just past the window is the best word boundary: all before it fits.
    (1..=max)
        .rev()
        .find(|&i| rest[i].symbol == SPACE)
        .unwrap_or(max)
}

/// A written word and the tokens spoken for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WordTokens {
    /// Byte range of the word in the text.
    pub text: Range<usize>,
    /// Its tokens, counted over all pieces one after another (piece 0's tokens, then piece
    /// 1's …, pads not counted); empty, at the previous word's end, when none could be placed.
    pub tokens: Range<usize>,
}

/// The written words of `text` that are spoken, each with its tokens in `pieces` (made from
/// `phonemes`, the phonemes of `text` in `language`). The time of a word is the sum of the
/// durations the model gives its tokens.
pub fn word_tokens(
    text: &str,
    phonemes: &Phonemes,
    pieces: &[Piece],
    language: Language,
    pronunciations: &[Pronunciation],
) -> Result<Vec<WordTokens>, PhonemizeError> {
    if language == Language::Mandarin {
        return Ok(whole_text_as_one_word(text, pieces));
    }
    let voice = language
        .espeak_voice()
        .ok_or(PhonemizeError::Unsupported(language))?;
    // Marks are no sounds: as spaces they stay out of the alignment and keep every index.
    let ipa: String = phonemes
        .espeak
        .chars()
        .map(|c| {
            if super::phonemes::is_mark(c) {
                SPACE
            } else {
                c
            }
        })
        .collect();
    let words = crate::text::words::spoken_words(text, &ipa, voice, pronunciations)?;
    let sources = pieces.iter().flat_map(|p| p.sources.iter().copied());
    let mut spans: Vec<Option<Range<usize>>> = vec![None; words.len()];
    // Both in order: the word of each token is found by walking the words once.
    let mut word = 0;
    for (token, source) in sources.enumerate() {
        while word < words.len() && words[word].phonemes.end <= source {
            word += 1;
        }
        if word == words.len() {
            break;
        }
        if words[word].phonemes.contains(&source) {
            let span = spans[word].get_or_insert(token..token + 1);
            span.end = token + 1;
        }
    }
    let mut end = 0;
    Ok(words
        .into_iter()
        .zip(spans)
        .map(|(word, span)| {
            let tokens = span.unwrap_or(end..end);
            end = tokens.end;
            WordTokens {
                text: word.text,
                tokens,
            }
        })
        .collect())
}

/// Mandarin has no espeak IPA to align its written words to: its text is one word, all its
/// tokens, so that word timings still cover the audio.
fn whole_text_as_one_word(text: &str, pieces: &[Piece]) -> Vec<WordTokens> {
    let tokens: usize = pieces.iter().map(|p| p.sources.len()).sum();
    let trimmed = text.trim();
    if trimmed.is_empty() || tokens == 0 {
        return Vec::new();
    }
    let start = text.len() - text.trim_start().len();
    vec![WordTokens {
        text: start..start + trimmed.len(),
        tokens: 0..tokens,
    }]
}

#[cfg(test)]
mod tests {
    use super::super::phonemes::phonemize;
    use super::*;

    /// Phonemes whose misaki symbols are `text` as written (tests of the cutting alone).
    fn written(text: &str) -> Phonemes {
        Phonemes::verbatim(text)
    }

    fn texts(pieces: &[Piece]) -> Vec<String> {
        pieces.iter().map(Piece::phonemes).collect()
    }

    #[test]
    fn short_input_is_one_piece_and_empty_input_none() {
        let p = pieces(&written("həlˈO wˈɜɹld."), MAX_TOKENS);
        assert_eq!(texts(&p), ["həlˈO wˈɜɹld."]);
        assert_eq!(p[0].tokens, vocab::tokenize("həlˈO wˈɜɹld."));
        assert!(pieces(&written(""), MAX_TOKENS).is_empty());
        assert!(pieces(&written("   "), MAX_TOKENS).is_empty());
        // Characters the model has no symbol for are dropped before counting.
        assert_eq!(texts(&pieces(&written("ab«»\ncd"), 4)), ["abcd"]);
    }

    #[test]
    fn cuts_prefer_sentences_then_clauses_then_words() {
        // 20 tokens: "aa, bb. cc; dd ee ff"
        let text = "aa, bb. cc; dd ee ff";
        assert_eq!(
            texts(&pieces(&written(text), 19)),
            ["aa, bb.", "cc; dd ee ff"]
        );
        let text = "aa, bb cc; dd ee ff hh";
        assert_eq!(
            texts(&pieces(&written(text), 21)),
            ["aa, bb cc;", "dd ee ff hh"]
        );
        let text = "aa, bb cc dd ee ff";
        assert_eq!(
            texts(&pieces(&written(text), 17)),
            ["aa,", "bb cc dd ee ff"]
        );
        let text = "aa bb cc dd ee ff";
        assert_eq!(texts(&pieces(&written(text), 10)), ["aa bb cc", "dd ee ff"]);
        // A space right after the window: everything before it fits.
        assert_eq!(texts(&pieces(&written("aaa bbb"), 3)), ["aaa", "bbb"]);
    }

    #[test]
    fn closers_stay_with_their_mark() {
        let text = "(aa bb.) cc “dd?” ee ff";
        assert_eq!(
            texts(&pieces(&written(text), 10)),
            ["(aa bb.)", "cc “dd?”", "ee ff"]
        );
        // The closer must fit too.
        assert_eq!(
            texts(&pieces(&written(text), 7)),
            ["(aa bb.", ") cc", "“dd?”", "ee ff"]
        );
    }

    #[test]
    fn a_word_longer_than_a_piece_is_cut_anywhere() {
        let word = "a".repeat(25);
        let p = pieces(&written(&format!("b {word} b")), 10);
        assert_eq!(texts(&p), ["b", "aaaaaaaaaa", "aaaaaaaaaa", "aaaaa b"]);
        // A limit of 0 still makes progress.
        assert_eq!(texts(&pieces(&written("ab"), 0)), ["a", "b"]);
    }

    #[test]
    fn every_token_is_kept_in_order_within_the_limit() {
        let text: String = (0..4000)
            .map(|i: usize| match (i * 7919 + 3) % 23 {
                0..=3 => ' ',
                4 => ',',
                5 => '.',
                6 => ')',
                7 => '—',
                8..=12 => 'ə',
                _ => 't',
            })
            .collect();
        let phonemes = written(&text);
        let chars: Vec<char> = text.chars().collect();
        let letters: Vec<usize> = (0..chars.len()).filter(|&i| chars[i] != ' ').collect();
        for max in [1, 7, 50, 509, 510, 4000] {
            let p = pieces(&phonemes, max);
            let kept: Vec<usize> = p
                .iter()
                .flat_map(|p| p.sources.iter().copied())
                .filter(|&s| chars[s] != ' ')
                .collect();
            assert_eq!(kept, letters, "max {max}");
            for piece in &p {
                assert!(!piece.tokens.is_empty() && piece.tokens.len() <= max.max(1));
                assert_ne!(piece.phonemes().chars().next(), Some(' '));
                assert_ne!(piece.phonemes().chars().last(), Some(' '));
            }
        }
    }

    #[test]
    fn slower_speech_gets_fewer_tokens_a_pass() {
        assert_eq!(tokens_per_pass(1.0), PASS_TOKENS);
        assert_eq!(tokens_per_pass(4.0), PASS_TOKENS);
        assert_eq!(tokens_per_pass(0.5), PASS_TOKENS / 2);
        assert_eq!(tokens_per_pass(0.25), PASS_TOKENS / 4);
        // Tokens × (1 / speed) stays at most what speed 1 allows, down to the floor.
        for speed in [0.25f32, 0.3, 0.37, 0.5, 0.8, 0.99, 1.0, 2.0] {
            let tokens = tokens_per_pass(speed);
            assert!(tokens as f32 / speed.min(1.0) <= PASS_TOKENS as f32 + 1e-3);
            assert!((MIN_PASS_TOKENS..=PASS_TOKENS).contains(&tokens), "{speed}");
        }
        const { assert!(PASS_TOKENS <= MAX_TOKENS) };
        for odd in [0.0, -1.0, f32::NAN, f32::INFINITY, 0.01] {
            assert!((MIN_PASS_TOKENS..=PASS_TOKENS).contains(&tokens_per_pass(odd)));
        }
    }

    /// An utterance of 600 tokens (a long unpunctuated run of words) becomes passes within
    /// the limit at every speed: three at speed 1, nine or more at 0.25.
    #[test]
    fn pass_pieces_keep_every_pass_within_the_limit() {
        let text = "chinese letter ".repeat(40); // 600 symbols
        let phonemes = written(text.trim_end());
        assert_eq!(pieces(&phonemes, MAX_TOKENS.max(600)).len(), 1);
        for (speed, at_least) in [(1.0f32, 3), (0.5, 5), (0.25, 9), (4.0, 3)] {
            let p = pass_pieces(&phonemes, speed);
            assert!(p.len() >= at_least, "speed {speed}: {} pieces", p.len());
            let limit = tokens_per_pass(speed);
            assert!(p.iter().all(|p| p.tokens.len() <= limit), "speed {speed}");
            // Cut between words: every piece is whole words.
            for piece in &p {
                let words = piece.phonemes();
                assert!(
                    words.split(' ').all(|w| w == "chinese" || w == "letter"),
                    "speed {speed}: {words}"
                );
            }
        }
    }

    #[test]
    fn words_get_their_own_tokens_across_pieces() {
        let text = "Hello world, this is a test.";
        let phonemes = phonemize(text, Language::AmericanEnglish).unwrap();
        assert_eq!(phonemes.misaki, "həlˈO wˈɜɹld, ðɪs ɪz ə tˈɛst.");
        for max in [MAX_TOKENS, 12] {
            let p = pieces(&phonemes, max);
            let all: Vec<u32> = p.iter().flat_map(|p| p.tokens.clone()).collect();
            let words = word_tokens(text, &phonemes, &p, Language::AmericanEnglish, &[]).unwrap();
            let said: Vec<(&str, String)> = words
                .iter()
                .map(|w| {
                    let symbols = all[w.tokens.clone()]
                        .iter()
                        .filter_map(|&t| vocab::symbol(t))
                        .collect();
                    (&text[w.text.clone()], symbols)
                })
                .collect();
            let expected = [
                ("Hello", "həlˈO"),
                ("world", "wˈɜɹld"),
                ("this", "ðɪs"),
                ("is", "ɪz"),
                ("a", "ə"),
                ("test", "tˈɛst"),
            ];
            let said: Vec<(&str, &str)> = said.iter().map(|(w, s)| (*w, s.as_str())).collect();
            assert_eq!(said, expected, "max {max}");
        }
    }
}
