//! A loaded Piper voice: text to phoneme ids, ids to audio (whole, in batches, or in windows
//! as a stream takes it), and when each word is said.

use std::cell::RefCell;

use super::PhonemeType;
use crate::engine::{
    EngineError, Pcm, Phonemes, Pronunciation, SynthesisItem, Voice, VoiceInfo, WordTiming,
};
use crate::espeak;
use crate::metrics as m;
use crate::params::SynthesisParams;
use crate::text::phonemize::{phonemize_with, PhonemeIdMap};
use crate::text::words::{spoken_words, words_by_source, SpokenWord};
use omnivoice_models::spare;
use omnivoice_models::vits::{Sampling, Vits, VitsInput};
use omnivoice_models::ModelError;

pub struct PiperVoice {
    pub(super) info: VoiceInfo,
    pub(super) model: Vits,
    pub(super) phonemes: PhonemeIdMap,
    pub(super) phoneme_type: PhonemeType,
    pub(super) espeak_voice: String,
    /// The voice's duration multiplier; the noise defaults live in the model's config.
    pub(super) length_scale: f32,
}

impl Voice for PiperVoice {
    fn info(&self) -> &VoiceInfo {
        &self.info
    }

    fn computes_batches_at_once(&self) -> bool {
        !self.model.device().is_cpu()
    }

    fn phonemes(
        &self,
        text: &str,
        pronunciations: &[Pronunciation],
        language: Option<&str>,
    ) -> Result<Phonemes, EngineError> {
        let ipa = self.phoneme_string(text, pronunciations, language)?;
        Ok(Phonemes {
            ids: self.phonemes.ids(&ipa),
            phonemes: ipa,
        })
    }

    fn unsayable(&self, ipa: &str, _language: Option<&str>) -> Option<char> {
        self.phonemes.first_unknown(ipa)
    }

    /// An espeak voice reads any language espeak-ng has; a `text` voice only its own letters.
    fn reads_language(&self, language: &str) -> bool {
        self.phoneme_type == PhonemeType::Espeak && espeak::voice_of_language(language).is_some()
    }

    fn synthesize_each(
        &self,
        batch: &[SynthesisItem],
        done: &mut dyn FnMut(usize, Pcm),
    ) -> Result<(), EngineError> {
        // Phonemization is this thread's work too: no other worker may borrow its core.
        let _computing = spare::computing();
        // Every item becomes one or more model inputs ("pieces"), in item order.
        let mut inputs = Vec::with_capacity(batch.len());
        let mut owners = Vec::with_capacity(batch.len());
        // Where each phoneme character went, for the items that want word timings.
        let mut traces = Vec::with_capacity(batch.len());
        let mut ipas = Vec::with_capacity(batch.len());
        for (index, item) in batch.iter().enumerate() {
            let (pieces, ipa) = self.model_inputs(item)?;
            for (input, trace) in pieces {
                inputs.push(input);
                owners.push(index);
                traces.push(trace);
            }
            ipas.push(ipa);
        }
        // On a GPU one padded forward pass computes a whole batch in parallel; passes hold as
        // many pieces as the batch has items, so a split item never makes a pass larger than a
        // batch of unsplit ones. On a CPU the kernels go through the inputs one after another
        // anyway, so padding is pure extra work (measured 2.75× slower for 8 mixed sentences,
        // docs/performance.md), and running pieces one by one also lets each item be answered
        // as soon as it is done. Same audio either way: batch equivalence is tested.
        let per_pass = if self.model.device().is_cpu() {
            1
        } else {
            batch.len()
        };
        let rate = self.model.sample_rate();
        let hop = self.model.config().hop_length;
        let mut samples = Vec::new();
        // Per phoneme character of the current item: its first and one-past-last sample.
        let mut spans: Vec<Option<(usize, usize)>> = Vec::new();
        for (pass, chunk) in inputs.chunks(per_pass).enumerate() {
            let audio = self.model.synthesize_timed(chunk).map_err(failed)?;
            for (offset, piece) in audio.into_iter().enumerate() {
                let i = pass * per_pass + offset;
                let owner = owners[i];
                if batch[owner].word_timings {
                    spans.resize(ipas[owner].chars().count(), None);
                    trace_chars(
                        &mut spans,
                        &traces[i],
                        &piece.frames_per_id,
                        hop,
                        samples.len(),
                    );
                }
                samples.extend_from_slice(&piece.samples);
                if owners.get(i + 1) != Some(&owner) {
                    let item = &batch[owner];
                    let words = if item.word_timings {
                        let words = self.word_timings(item, &ipas[owner], &spans)?;
                        spans.clear();
                        Some(words)
                    } else {
                        None
                    };
                    let pcm = Pcm {
                        samples: std::mem::take(&mut samples),
                        sample_rate: rate,
                        words,
                        continuity: None,
                    };
                    done(owner, pcm);
                }
            }
        }
        Ok(())
    }

    fn synthesize_in_pieces(
        &self,
        item: &SynthesisItem,
        piece: &mut dyn FnMut(Pcm) -> bool,
    ) -> Result<(), EngineError> {
        if !self.model.device().is_cpu() {
            // A GPU computes the whole utterance in about the time of one window.
            return self.synthesize_each(std::slice::from_ref(item), &mut |_, pcm| {
                piece(pcm);
            });
        }
        let _computing = spare::computing();
        let (inputs, ipa) = self.model_inputs(item)?;
        let rate = self.model.sample_rate();
        let hop = self.model.config().hop_length;
        let passes = inputs.len();
        let mut spans: Vec<Option<(usize, usize)>> = Vec::new();
        // The words, once the last pass's durations are known: they go out with its first
        // chunk, so that a listener can show each word as its audio plays.
        let words: RefCell<Option<Result<Vec<WordTiming>, EngineError>>> = RefCell::new(None);
        let mut offset = 0;
        for (pass, (input, trace)) in inputs.into_iter().enumerate() {
            let mut listening = true;
            let done = self
                .model
                .synthesize_windowed_timed(
                    &input,
                    FIRST_WINDOW_FRAMES,
                    LATER_WINDOW_FRAMES,
                    &mut |frames_per_id| {
                        if !item.word_timings {
                            return;
                        }
                        spans.resize(ipa.chars().count(), None);
                        trace_chars(&mut spans, &trace, frames_per_id, hop, offset);
                        if pass + 1 == passes {
                            *words.borrow_mut() = Some(self.word_timings(item, &ipa, &spans));
                        }
                    },
                    &mut |chunk| {
                        let mut pcm = Pcm::new(chunk.to_vec(), rate);
                        let mut known = words.borrow_mut();
                        if matches!(*known, Some(Ok(_))) {
                            pcm.words = known.take().and_then(Result::ok);
                        }
                        drop(known);
                        listening = piece(pcm);
                        listening
                    },
                )
                .map_err(failed)?;
            if !listening {
                return Ok(());
            }
            offset += done.samples;
        }
        if let Some(Err(e)) = words.into_inner() {
            return Err(e);
        }
        Ok(())
    }
}

/// The model's view of a request's knobs, with this model input's own seed.
fn sampling(params: &SynthesisParams, seed: u64) -> Sampling {
    Sampling {
        speed: params.speed,
        seed,
        speaker: params.speaker,
        noise_scale: params.noise_scale,
        noise_w: params.noise_w,
    }
}

fn failed(e: ModelError) -> EngineError {
    EngineError::synthesis(e)
}

/// Frames in the first window of an utterance computed in pieces (16 frames: 0.19 s of audio
/// for a 22 kHz voice), then in every later one: the first is small so that it is ready
/// soon, the later ones large so that halos recomputed at window edges cost little (4–10 %,
/// docs/performance.md §9).
const FIRST_WINDOW_FRAMES: usize = 16;
const LATER_WINDOW_FRAMES: usize = 128;

/// Which phoneme ids each traced phoneme character of a model input became.
type CharTrace = Vec<(usize, std::ops::Range<usize>)>;

impl PiperVoice {
    /// The espeak-ng voice that phonemizes text in `language`: the voice's own when `None`.
    fn espeak_voice(&self, language: Option<&str>) -> &str {
        language
            .and_then(espeak::voice_of_language)
            .unwrap_or(&self.espeak_voice)
    }

    /// The model inputs an item becomes (more than one when its phoneme ids exceed a pass),
    /// each with where its phoneme characters went (for word timings; empty when the item
    /// asks for none), and the item's phonemes.
    fn model_inputs(
        &self,
        item: &SynthesisItem,
    ) -> Result<(Vec<(VitsInput, CharTrace)>, String), EngineError> {
        let ipa =
            self.phoneme_string(&item.text, &item.pronunciations, item.language.as_deref())?;
        let noise_w = item.params.noise_w.unwrap_or(self.model.config().noise_w);
        let limit = ids_per_pass(item.params.speed, self.length_scale, noise_w);
        let pieces = self.phonemes.traced_pieces(&ipa, limit);
        if pieces.len() > 1 {
            metrics::counter!(m::UTTERANCES_SPLIT).increment(1);
        }
        let inputs = pieces
            .into_iter()
            .enumerate()
            .map(|(n, piece)| {
                metrics::histogram!(m::UTTERANCE_PHONEME_IDS).record(piece.ids.len() as f64);
                let input = VitsInput {
                    ids: piece.ids,
                    length_scale: self.length_scale,
                    // Piece 0 keeps the item's seed: an unsplit item sounds as it always did.
                    sampling: sampling(
                        &item.params,
                        item.params.item_seed().wrapping_add(n as u64),
                    ),
                };
                let trace = if item.word_timings {
                    piece.chars
                } else {
                    Vec::new()
                };
                (input, trace)
            })
            .collect();
        Ok((inputs, ipa))
    }

    /// What the model is given for `text`, one character per symbol: espeak-ng's IPA, or a
    /// `text` voice's characters of the text.
    /// A `text` voice has no phonemes to give words: it reads `pronunciations`' words as
    /// written.
    fn phoneme_string(
        &self,
        text: &str,
        pronunciations: &[Pronunciation],
        language: Option<&str>,
    ) -> Result<String, EngineError> {
        match self.phoneme_type {
            PhonemeType::Espeak => {
                phonemize_with(text, pronunciations, self.espeak_voice(language))
                    .map_err(EngineError::synthesis)
            }
            PhonemeType::Text => Ok(self.phonemes.read_text(text).phonemes),
        }
    }

    /// The words of `text` with their spans of `ipa`, its [`phoneme_string`](Self::phoneme_string).
    fn spoken_words(
        &self,
        item: &SynthesisItem,
        ipa: &str,
    ) -> Result<Vec<SpokenWord>, EngineError> {
        let text = &item.text;
        match self.phoneme_type {
            PhonemeType::Espeak => {
                let voice = self.espeak_voice(item.language.as_deref());
                spoken_words(text, ipa, voice, &item.pronunciations).map_err(EngineError::synthesis)
            }
            PhonemeType::Text => Ok(words_by_source(
                text,
                &self.phonemes.read_text(text).sources,
            )),
        }
    }

    /// When each spoken word of `text` starts and ends, from the samples its phoneme
    /// characters got (`spans`, indexed like the characters of `ipa`).
    fn word_timings(
        &self,
        item: &SynthesisItem,
        ipa: &str,
        spans: &[Option<(usize, usize)>],
    ) -> Result<Vec<WordTiming>, EngineError> {
        let words = self.spoken_words(item, ipa)?;
        let mut previous_end = 0;
        Ok(words
            .into_iter()
            .map(|word| {
                let mut timed = spans[word.phonemes].iter().flatten();
                let (start, end) = match timed.next() {
                    Some(&(start, end)) => (start, timed.last().map_or(end, |&(_, end)| end)),
                    None => (previous_end, previous_end),
                };
                let start = start.max(previous_end);
                let end = end.max(start);
                previous_end = end;
                WordTiming {
                    text: word.text,
                    start,
                    end,
                }
            })
            .collect())
    }
}

/// Records in `spans` the samples each traced character got in a piece whose ids lasted
/// `frames_per_id` frames of `hop` samples and that starts at sample `offset` of the item.
fn trace_chars(
    spans: &mut [Option<(usize, usize)>],
    chars: &[(usize, std::ops::Range<usize>)],
    frames_per_id: &[usize],
    hop: usize,
    offset: usize,
) {
    let mut before = Vec::with_capacity(frames_per_id.len() + 1);
    before.push(0);
    for frames in frames_per_id {
        before.push(before.last().copied().unwrap_or(0) + frames);
    }
    let at = |id: usize| offset + before[id.min(frames_per_id.len())] * hop;
    for (char, ids) in chars {
        let (start, end) = (at(ids.start), at(ids.end));
        if let Some(span) = spans.get_mut(*char) {
            let merged = span.map_or((start, end), |(s, e)| (s.min(start), e.max(end)));
            *span = Some(merged);
        }
    }
}

/// Most phoneme ids in one forward pass at the voice's natural rate. The model's work and
/// memory grow with its input (memory with the audio it makes, ≈ 10 MiB per second; the text
/// encoder's attention with the square of the ids), so an utterance with more ids is cut into
/// pieces at word boundaries and their audio joined. English averages 38 ids per second of
/// audio with `en_US-joe-medium` (docs/performance.md), so this is ≈ 20 s of audio: far more
/// than a sentence needs, and the 400-character utterances of unpunctuated text stay bounded.
pub const MAX_IDS_PER_PASS: usize = 768;

/// The fewest ids a pass is cut to however slow the speech: a few words.
pub(super) const MIN_IDS_PER_PASS: usize = 64;

/// Piper's usual `noise_w`; more duration noise makes phonemes longer on average.
const USUAL_NOISE_W: f32 = 0.8;

/// The id limit for speech made longer by `speed` < 1, the voice's `length_scale` > 1 or a
/// `noise_w` above the usual: as many ids as make ≈ 20 s of audio at that rate, so slow speech
/// does not make a pass longer. Measured: 768 ids at noise_w 2 gave 2.15× the audio of
/// noise_w 0.8, hence one more "speed unit" per unit of noise_w above the usual.
pub(super) fn ids_per_pass(speed: f32, length_scale: f32, noise_w: f32) -> usize {
    let longer = length_scale / speed * (1.0 + (noise_w - USUAL_NOISE_W).max(0.0));
    ((MAX_IDS_PER_PASS as f32 / longer.max(1.0)) as usize).clamp(MIN_IDS_PER_PASS, MAX_IDS_PER_PASS)
}
