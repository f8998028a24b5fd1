//! One request's sentences on their way through the batcher, a few at a time.
//!
//! Only a small window of a request's sentences waits in the batcher's queue ahead of what has
//! been delivered: the next sentence is submitted as one is taken. A long request then never
//! crowds out others, its place in line comes round again after each sentence, and when its
//! client goes away (the `Synthesis` is dropped) the sentences not yet submitted are never
//! computed at all.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::oneshot;

use super::{await_reply, submit_error, SpeechError};
use crate::batch::{Batcher, Reply, Ticket};
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
    queued: VecDeque<oneshot::Receiver<Reply>>,
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
            window,
            total,
        };
        synthesis.fill(first_alone)?;
        Ok(synthesis)
    }

    /// The next sentence's audio, in order; `None` after the last.
    pub async fn next(&mut self) -> Option<Result<Pcm, SpeechError>> {
        let reply = self.queued.pop_front()?;
        if let Err(e) = self.fill(false) {
            return Some(Err(e));
        }
        Some(await_reply(reply).await)
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
