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
use crate::engine::{Pcm, SynthesisItem, Voice, VoiceKey};

/// Sentences of one request queued ahead of the one being taken, for engines that compute
/// items one after another: enough that a worker never waits for the next, few enough that
/// other requests get their turn. Engines that compute a batch at once get a whole batch.
const WINDOW: usize = 2;

pub(super) struct Synthesis {
    batcher: Batcher,
    ticket: Ticket,
    key: VoiceKey,
    voice: Arc<dyn Voice>,
    unsubmitted: VecDeque<SynthesisItem>,
    queued: VecDeque<mpsc::UnboundedReceiver<Reply>>,
    /// The sentence [`next_piece`](Self::next_piece) is handing on, and whether any of it came.
    current: Option<(mpsc::UnboundedReceiver<Reply>, bool)>,
    window: usize,
    total: usize,
}

impl Synthesis {
    /// Submits the first window; `first_alone` puts the very first sentence on its own so
    /// that it starts at once on an idle server.
    pub fn start(
        batcher: Batcher,
        ticket: Ticket,
        key: VoiceKey,
        voice: Arc<dyn Voice>,
        items: VecDeque<SynthesisItem>,
        first_alone: bool,
    ) -> Result<Self, SpeechError> {
        let total = items.len();
        let window = if voice.computes_batches_at_once() {
            batcher.max_batch_size().max(WINDOW)
        } else {
            WINDOW
        };
        let mut synthesis = Self {
            batcher,
            ticket,
            key,
            voice,
            unsubmitted: items,
            queued: VecDeque::new(),
            current: None,
            window,
            total,
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
                        if pcm.words.is_some() {
                            sentence.words = pcm.words;
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
                Ok(Delivery::Piece(pcm))
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
        let items: Vec<SynthesisItem> = self.unsubmitted.drain(..take).collect();
        let receivers = self
            .batcher
            .submit(&mut self.ticket, &self.key, &self.voice, items, first_alone)
            .map_err(submit_error)?;
        self.queued.extend(receivers);
        Ok(())
    }
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
