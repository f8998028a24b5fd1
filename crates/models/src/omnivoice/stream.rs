//! A text spoken as a stream: its first piece as soon as it can be, and one voice throughout.
//!
//! The official code speaks a text under its chunking threshold in one pass, so its first
//! audio exists only when the whole text's does. A stream cannot wait for that, and it must
//! not speak each sentence as an utterance of its own either: each would get its own length
//! estimate and, without a reference, its own randomly chosen voice.
//!
//! So a streamed text is spoken as the official chunked path speaks a long one, with a short
//! chunk 0: the first sentence ([`first_piece`]) is generated alone and handed on as soon as
//! it is decoded; every later piece (the rest of the text, or the rest of its first chunk and
//! its later chunks when the text is long) is generated with the first piece's text and frames
//! as its reference, all of them together, so they share their decoding steps. A clone keeps
//! its own reference for every piece, as the official chunked path does.
//!
//! Lengths are the whole text's: every piece gets its share of the whole text's estimate (or
//! `duration`), by the estimator's own character weights. Estimated on its own, a short piece
//! would be stretched (the estimator gives utterances under 2 s room for their edges), and a
//! piece estimated from the first would carry the first's stretch along.

use candle_core::{Result, Tensor};

use super::duration::weight;
use super::generate::Decoder;
use super::post::Streamed;
use super::text::first_piece;
use super::tts::{Piece, Prepared, Spoken, Tts};

/// The shortest first piece, in characters: a shorter first sentence takes the next along,
/// since a word or two is too little voice for the rest to continue from.
pub const FIRST_PIECE_MIN_CHARS: usize = 10;
/// The longest first piece: a longer first sentence is cut at its clauses.
pub const FIRST_PIECE_MAX_CHARS: usize = 100;

impl Tts {
    /// The texts a streamed item is spoken in, in order: its first piece, then the rest. One
    /// text: the item is spoken whole.
    pub fn stream_pieces(&self, item: &Prepared) -> Vec<String> {
        let rate = f64::from(self.frame_rate);
        let mut chunks = item.texts(rate);
        match first_piece(&chunks[0], FIRST_PIECE_MIN_CHARS, FIRST_PIECE_MAX_CHARS) {
            Some((first, rest)) => {
                chunks[0] = rest;
                chunks.insert(0, first);
                chunks
            }
            None if chunks.len() == 1 => vec![item.text.clone()],
            None => chunks,
        }
    }

    /// Synthesizes `item` as a stream, seeded by `seed`: each piece's audio, post-processed
    /// as a stream ([`Streamed`]), handed to `emit` as soon as it is decoded, the first with
    /// what later utterances need to continue in its voice ([`Spoken`]); `emit` answers
    /// whether anyone still listens, and the rest is not computed once nobody does. One piece
    /// is [`Tts::synthesize`]'s audio.
    pub fn synthesize_streamed(
        &self,
        item: &Prepared,
        seed: u64,
        decoder: &dyn Decoder,
        emit: &mut dyn FnMut(Vec<f32>, Option<Spoken>) -> bool,
    ) -> Result<()> {
        let pieces = self.stream_pieces(item);
        let rms = item.reference.as_ref().map(|r| r.rms);
        let mut post = Streamed::new(item.post(), self.sample_rate, rms);
        let last = pieces.len() - 1;
        self.synthesize_pieces(item, &pieces, seed, decoder, &mut |index, codes, raw| {
            let spoken = (index == 0).then(|| Spoken {
                text: pieces[0].clone(),
                codes: codes.clone(),
            });
            emit(post.piece(&raw, index == 0, index == last), spoken)
        })
    }

    /// Generates `pieces` of `item` (the first alone, then the rest together, from the item's
    /// reference or else from the first) and hands each to `emit` in order with its frames
    /// [C, T] and the codec's audio of them, until `emit` answers false.
    pub(super) fn synthesize_pieces(
        &self,
        item: &Prepared,
        pieces: &[String],
        seed: u64,
        decoder: &dyn Decoder,
        emit: &mut dyn FnMut(usize, &Tensor, Vec<f32>) -> bool,
    ) -> Result<()> {
        let Some((first, rest)) = pieces.split_first() else {
            return Ok(());
        };
        let reference = item.reference_prompt();
        let share = |text: &str| share_of(item, text, rest.is_empty());
        let prompt = self.prompt_for(item, first, reference, share(first))?;
        let frames = self.decode_round(vec![Piece::new(prompt, item, seed, 0)], decoder)?;
        let first_codes = &frames[0];
        let keep_going = {
            let _computing = crate::spare::computing();
            emit(0, first_codes, self.decode(first_codes)?)
        };
        if !keep_going || rest.is_empty() {
            return Ok(());
        }
        // A clone's reference, or the utterance this one follows; else the first piece.
        let reference = reference.unwrap_or((first.as_str(), first_codes));
        let round = rest
            .iter()
            .enumerate()
            .map(|(k, text)| {
                let prompt = self.prompt_for(item, text, Some(reference), share(text))?;
                Ok(Piece::new(prompt, item, seed, k + 1))
            })
            .collect::<Result<Vec<_>>>()?;
        let frames = self.decode_round(round, decoder)?;
        let _computing = crate::spare::computing();
        for (k, codes) in frames.iter().enumerate() {
            if !emit(k + 1, codes, self.decode(codes)?) {
                break;
            }
        }
        Ok(())
    }
}

/// A piece's frames: its share of the whole item's, by the estimator's weights (all of them
/// when it is the whole item).
fn share_of(item: &Prepared, piece: &str, alone: bool) -> usize {
    let whole = weight(&item.text);
    if alone || whole <= 0.0 {
        return item.frames();
    }
    ((item.frames() as f64 * weight(piece) / whole) as usize).max(1)
}
