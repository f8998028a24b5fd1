//! One request's sentences on their way through the batcher, a few at a time.
//!
//! Only a small window of a request's sentences waits in the batcher's queue ahead of what has
//! been delivered: the next sentence is submitted as one is taken. A long request then never
//! crowds out others, its place in line comes round again after each sentence, and when its
//! client goes away (the `Synthesis` is dropped) the sentences not yet submitted are never
//! computed at all.
//!
//! Each sentence's audio arrives whole, or, when a listener plays it as it comes, in pieces:
//! [`Synthesis::next_piece`] hands those on as they arrive.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc;

use super::{submit_error, Failure, SpeechError};
use crate::batch::{BatchError, Batcher, Reply, Ticket};
use crate::engine::{Pcm, SynthesisItem, Voice, VoiceKey, WordTiming};

/// Sentences of one request queued ahead of the one being taken, for engines that compute
/// items one after another: enough that a worker never waits for the next, few enough that
/// other requests get their turn. Engines that compute a batch at once get a whole batch.
const WINDOW: usize = 2;

pub(super) struct Synthesis {
    batcher: Batcher,
    ticket: Ticket,
    /// The voices that read the sentences (most often one).
    voices: Vec<(VoiceKey, Arc<dyn Voice>)>,
    /// Each sentence not yet submitted, with the index of its voice.
    unsubmitted: VecDeque<(usize, SynthesisItem)>,
    queued: VecDeque<mpsc::UnboundedReceiver<Reply>>,
    /// The sentence [`next_piece`](Self::next_piece) is handing on, and whether any of it came.
    current: Option<(mpsc::UnboundedReceiver<Reply>, bool)>,
    window: usize,
    total: usize,
    /// The rate every sentence is handed on at: a voice of another rate is resampled.
    rate: u32,
}

impl Synthesis {
    /// Submits the first window; `first_alone` puts the very first sentence on its own so
    /// that it starts at once on an idle server.
    pub fn start(
        batcher: Batcher,
        ticket: Ticket,
        voices: Vec<(VoiceKey, Arc<dyn Voice>)>,
        items: VecDeque<(usize, SynthesisItem)>,
        rate: u32,
        first_alone: bool,
    ) -> Result<Self, SpeechError> {
        let total = items.len();
        let window = if voices.iter().all(|(_, v)| v.computes_batches_at_once()) {
            batcher.max_batch_size().max(WINDOW)
        } else {
            WINDOW
        };
        let mut synthesis = Self {
            batcher,
            ticket,
            voices,
            unsubmitted: items,
            queued: VecDeque::new(),
            current: None,
            window,
            total,
            rate,
        };
        synthesis.fill(first_alone)?;
        Ok(synthesis)
    }

    /// The next sentence's audio, whole, in order; `None` after the last.
    pub async fn next(&mut self) -> Option<Result<Pcm, SpeechError>> {
        let started = Instant::now();
        let mut whole: Option<Pcm> = None;
        loop {
            match self.next_piece().await? {
                Ok(Delivery::Piece(pcm)) => match whole.as_mut() {
                    None => whole = Some(pcm),
                    Some(sentence) => {
                        sentence.samples.extend_from_slice(&pcm.samples);
                        // Pieces that carry words each carry their own (a first phrase spoken
                        // apart), timed from the sentence's start.
                        match (sentence.words.as_mut(), pcm.words) {
                            (Some(words), Some(more)) => words.extend(more),
                            (None, more) => sentence.words = more,
                            (Some(_), None) => {}
                        }
                    }
                },
                Ok(Delivery::SentenceEnd) => break,
                Err(e) => return Some(Err(e)),
            }
        }
        tracing::trace!(waited_s = started.elapsed().as_secs_f64(), "utterance done");
        whole.map(Ok)
    }

    /// The next piece of the sentences' audio, in order, as it arrives; a sentence's pieces
    /// are followed by [`Delivery::SentenceEnd`]. `None` after the last sentence.
    pub async fn next_piece(&mut self) -> Option<Result<Delivery, SpeechError>> {
        if self.current.is_none() {
            let reply = self.queued.pop_front()?;
            if let Err(e) = self.fill(false) {
                return Some(Err(e));
            }
            self.current = Some((reply, false));
        }
        let (reply, any) = self.current.as_mut().expect("a current sentence");
        let delivery = match reply.recv().await {
            Some(Ok(pcm)) => {
                *any = true;
                resampled(pcm, self.rate).map(Delivery::Piece)
            }
            Some(Err(e)) => Err(speech_error(e)),
            // Closed behind its last piece; closed with nothing sent: the worker is gone.
            None if *any => Ok(Delivery::SentenceEnd),
            None => Err(speech_error(BatchError::Shutdown)),
        };
        if !matches!(delivery, Ok(Delivery::Piece(_))) {
            self.current = None;
        }
        Some(delivery)
    }

    /// Every sentence's audio, in order.
    pub async fn collect(mut self) -> Result<Vec<Pcm>, SpeechError> {
        let mut pieces = Vec::with_capacity(self.total);
        while let Some(piece) = self.next().await {
            pieces.push(piece?);
        }
        Ok(pieces)
    }

    fn fill(&mut self, first_alone: bool) -> Result<(), SpeechError> {
        let room = self.window.saturating_sub(self.queued.len());
        let take = room.min(self.unsubmitted.len());
        if take == 0 {
            return Ok(());
        }
        let mut taken: VecDeque<(usize, SynthesisItem)> = self.unsubmitted.drain(..take).collect();
        let mut first_alone = first_alone;
        // Each run of sentences of one voice goes in as one submission.
        while let Some(&(voice, _)) = taken.front() {
            let run = taken.iter().take_while(|(v, _)| *v == voice).count();
            let items: Vec<SynthesisItem> = taken.drain(..run).map(|(_, item)| item).collect();
            let (key, engine_voice) = &self.voices[voice];
            let receivers = self
                .batcher
                .submit(&mut self.ticket, key, engine_voice, items, first_alone)
                .map_err(submit_error)?;
            self.queued.extend(receivers);
            first_alone = false;
        }
        Ok(())
    }
}

/// `pcm` at `rate`, its word timings moved along. A voice of another rate (one reading
/// another language) computes its sentences whole, so each is resampled in one go.
fn resampled(pcm: Pcm, rate: u32) -> Result<Pcm, SpeechError> {
    if pcm.sample_rate == rate {
        return Ok(pcm);
    }
    let from = pcm.sample_rate;
    let samples = crate::audio::resample::resample(&pcm.samples, from, rate).map_err(|e| {
        SpeechError::Engine(Failure::new(
            format_args!("resampling {from} Hz audio to {rate} Hz failed"),
            e,
        ))
    })?;
    let moved = |at: usize| {
        let at = (at as u64 * u64::from(rate) / u64::from(from.max(1))) as usize;
        at.min(samples.len())
    };
    let words = pcm.words.map(|words| {
        words
            .into_iter()
            .map(|word| WordTiming {
                start: moved(word.start),
                end: moved(word.end),
                text: word.text,
            })
            .collect()
    });
    Ok(Pcm {
        samples,
        sample_rate: rate,
        words,
        continuity: pcm.continuity,
    })
}

/// What [`Synthesis::next_piece`] hands on.
pub(super) enum Delivery {
    /// The next stretch of the current sentence's audio; one of them carries its words.
    Piece(Pcm),
    /// The current sentence is complete.
    SentenceEnd,
}

fn speech_error(e: BatchError) -> SpeechError {
    match e {
        BatchError::Shutdown => SpeechError::ShuttingDown,
        other => SpeechError::Engine(Failure::of(other)),
    }
}
