//! The dynamic batcher: turns concurrent utterances into batched forward passes.
//!
//! One task owns the queue ([`queue::State`]) and is fed by a command channel, so no lock guards
//! the batching decision. It hands batches to at most `workers` blocking threads at a time; each
//! utterance gets its audio (or its batch's error) back on its own channel, whole or, for a
//! listener waiting to play it, in pieces as they are computed. A caller
//! that stops waiting (client gone, request timed out) drops its receiver, and the entry is
//! dropped before it is computed.
//!
//! Admission is per request, not per sentence: [`Batcher::admit`] hands out a [`Ticket`]
//! while fewer than `queue_size` requests are in progress, and a request then submits its
//! sentences a few at a time on that ticket. One long request can therefore neither fill the
//! queue alone nor be refused on an idle server, and the queue stays short enough for the
//! round-robin order of [`queue::State`] to let short requests through between its sentences.

mod drain;
mod pace;
mod queue;

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use std::time::Duration;

use tokio::sync::mpsc;
// Tokio's clock throughout, so that the max-wait timer and the times it is compared with are
// one clock, which tests can pause and advance.
use tokio::time::Instant;

use crate::config::BatchSettings;
use crate::engine::{SynthesisItem, Voice, VoiceKey, Wanted};
use crate::metrics as m;
use drain::DrainRate;
use pace::Pace;
pub use queue::{BatchError, Reply};
use queue::{Entry, Respond, State};

/// Handle to the batcher task; cheap to clone.
#[derive(Clone)]
pub struct Batcher {
    commands: mpsc::UnboundedSender<Vec<Entry<Work>>>,
    /// Utterances in the queue.
    depth: Arc<AtomicUsize>,
    in_flight: Arc<AtomicUsize>,
    drain: Arc<Mutex<DrainRate>>,
    pace: Arc<Mutex<Pace>>,
    admission: Arc<Admission>,
    max_size: usize,
}

/// Requests in progress, and the sentences they have yet to submit.
struct Admission {
    capacity: usize,
    admitted: AtomicUsize,
    unsubmitted: AtomicUsize,
    next_request: AtomicU64,
}

/// One admitted request's place in the batcher; dropping it (the request finished, failed or
/// was abandoned) frees the place.
pub struct Ticket {
    admission: Arc<Admission>,
    request: u64,
    unsubmitted: usize,
}

impl Ticket {
    /// Sentences of this request not submitted yet.
    pub fn unsubmitted(&self) -> usize {
        self.unsubmitted
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.admission
            .unsubmitted
            .fetch_sub(self.unsubmitted, Ordering::SeqCst);
        self.admission.admitted.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What a worker needs to compute one queued utterance.
struct Work {
    voice: Arc<dyn Voice>,
    item: SynthesisItem,
}

/// Why utterances were not queued.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SubmitError {
    /// No room: the queue would drain enough for the request in about `retry_after`.
    #[error("the queue is full")]
    Full { retry_after: Duration },
    /// The batcher task is gone (it panicked, or the server is shutting down): nothing queued
    /// now would ever be computed.
    #[error("the batcher has stopped")]
    Stopped,
}

impl Batcher {
    /// Starts the batcher task on the current runtime.
    pub fn start(settings: &BatchSettings, workers: usize) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let depth = Arc::new(AtomicUsize::new(0));
        let in_flight = Arc::new(AtomicUsize::new(0));
        let workers = workers.max(1);
        let drain = Arc::new(Mutex::new(DrainRate::new(workers)));
        let pace = Arc::new(Mutex::new(Pace::default()));
        // One request never takes every worker: with two or more, one stays free for
        // whoever comes next.
        let per_request = workers.saturating_sub(1).max(1);
        let state = State::new(
            settings.max_size,
            Duration::from_millis(settings.timeout_ms),
            per_request,
        );
        tokio::spawn(run(
            state,
            rx,
            workers,
            depth.clone(),
            in_flight.clone(),
            drain.clone(),
            pace.clone(),
        ));
        Self {
            commands: tx,
            depth,
            in_flight,
            drain,
            pace,
            admission: Arc::new(Admission {
                capacity: settings.queue_size.max(1),
                admitted: AtomicUsize::new(0),
                unsubmitted: AtomicUsize::new(0),
                next_request: AtomicU64::new(0),
            }),
            max_size: settings.max_size.max(1),
        }
    }

    /// Most utterances in one batch.
    pub fn max_batch_size(&self) -> usize {
        self.max_size
    }

    /// Admits a request of `sentences` utterances, or says when to come back: at most
    /// `queue_size` requests are in progress at once, however long each is.
    pub fn admit(&self, sentences: usize) -> Result<Ticket, SubmitError> {
        if self.commands.is_closed() {
            return Err(SubmitError::Stopped);
        }
        let admission = &self.admission;
        admission
            .admitted
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < admission.capacity).then_some(n + 1)
            })
            .map_err(|_| {
                let backlog = admission.unsubmitted.load(Ordering::SeqCst) + self.queue_depth();
                SubmitError::Full {
                    retry_after: self.drain.lock().time_to_drain(backlog),
                }
            })?;
        admission.unsubmitted.fetch_add(sentences, Ordering::SeqCst);
        Ok(Ticket {
            admission: admission.clone(),
            request: admission.next_request.fetch_add(1, Ordering::Relaxed),
            unsubmitted: sentences,
        })
    }

    /// Queues some of an admitted request's utterances together (so they can share batches)
    /// and returns one receiver per utterance, in order.
    ///
    /// `first_alone` queues the first utterance ahead of the rest, so that on an idle server it
    /// starts at once on its own: a streamed response then sends its first audio after one
    /// sentence instead of after a whole batch.
    pub fn submit(
        &self,
        ticket: &mut Ticket,
        voice_key: &VoiceKey,
        voice: &Arc<dyn Voice>,
        items: Vec<SynthesisItem>,
        first_alone: bool,
    ) -> Result<Vec<mpsc::UnboundedReceiver<Reply>>, SubmitError> {
        let n = items.len();
        let counted = n.min(ticket.unsubmitted);
        ticket.unsubmitted -= counted;
        self.admission
            .unsubmitted
            .fetch_sub(counted, Ordering::SeqCst);
        self.depth.fetch_add(n, Ordering::SeqCst);
        let now = Instant::now();
        let mut receivers = Vec::with_capacity(n);
        let mut entries: Vec<Entry<Work>> = items
            .into_iter()
            .map(|item| {
                let (respond, rx) = mpsc::unbounded_channel();
                receivers.push(rx);
                Entry {
                    voice_key: voice_key.clone(),
                    request: ticket.request,
                    cost: item.text.chars().count(),
                    respond,
                    queued_at: now,
                    work: Work {
                        voice: voice.clone(),
                        item,
                    },
                }
            })
            .collect();
        let rest = if first_alone && entries.len() > 1 {
            entries.split_off(1)
        } else {
            Vec::new()
        };
        let sent = self.commands.send(entries).is_ok()
            && (rest.is_empty() || self.commands.send(rest).is_ok());
        if !sent {
            self.depth.fetch_sub(n, Ordering::SeqCst);
            return Err(SubmitError::Stopped);
        }
        metrics::gauge!(m::QUEUE_DEPTH).set(self.depth.load(Ordering::SeqCst) as f64);
        Ok(receivers)
    }

    /// Requests admitted and not finished.
    pub fn requests_in_progress(&self) -> usize {
        self.admission.admitted.load(Ordering::SeqCst)
    }

    /// Utterances waiting for a worker.
    pub fn queue_depth(&self) -> usize {
        self.depth.load(Ordering::SeqCst)
    }

    /// Batches being computed right now.
    pub fn batches_in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// Seconds of compute per second of `engine`'s audio on one worker, as measured on the
    /// batches so far; `None` before its first.
    pub fn real_time_factor(&self, engine: &str) -> Option<f64> {
        self.pace.lock().real_time_factor(engine)
    }

    /// Counts `audio_seconds` of `engine`'s audio that took `took` on one worker outside any
    /// batch (a voice's warm-up) towards its pace.
    pub fn record_pace(&self, engine: &str, took: Duration, audio_seconds: f64) {
        self.pace.lock().record(engine, took, audio_seconds);
    }
}

async fn run(
    mut state: State<Work>,
    mut commands: mpsc::UnboundedReceiver<Vec<Entry<Work>>>,
    workers: usize,
    depth: Arc<AtomicUsize>,
    in_flight: Arc<AtomicUsize>,
    drain: Arc<Mutex<DrainRate>>,
    pace: Arc<Mutex<Pace>>,
) {
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<Vec<u64>>();
    let mut running = 0usize;
    let mut open = true;
    loop {
        while running < workers {
            let decision = state.next_batch(Instant::now(), running == 0);
            let left = decision.abandoned + decision.batch.len();
            if left > 0 {
                depth.fetch_sub(left, Ordering::SeqCst);
                metrics::gauge!(m::QUEUE_DEPTH).set(depth.load(Ordering::SeqCst) as f64);
            }
            if decision.abandoned > 0 {
                metrics::counter!(m::REJECTED, "reason" => "abandoned")
                    .increment(decision.abandoned as u64);
            }
            if decision.batch.is_empty() {
                break;
            }
            running += 1;
            in_flight.store(running, Ordering::SeqCst);
            let done = done_tx.clone();
            let (drain, pace) = (drain.clone(), pace.clone());
            let requests = decision.requests;
            tokio::task::spawn_blocking(move || {
                let (items, started) = (decision.batch.len(), Instant::now());
                let engine = decision.batch[0].voice_key.engine().to_string();
                let audio_seconds = compute(decision.batch);
                let took = started.elapsed();
                drain.lock().record(items, took);
                pace.lock().record(&engine, took, audio_seconds);
                let _ = done.send(requests);
            });
        }
        if !open && state.is_empty() && running == 0 {
            return;
        }
        let deadline = state.next_deadline().filter(|_| running < workers);
        tokio::select! {
            command = commands.recv(), if open => match command {
                Some(entries) => entries.into_iter().for_each(|e| state.append(e)),
                None => open = false,
            },
            Some(requests) = done_rx.recv() => {
                running -= 1;
                in_flight.store(running, Ordering::SeqCst);
                state.finished(&requests);
            }
            _ = sleep_until(deadline), if deadline.is_some() => {}
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    if let Some(at) = deadline {
        tokio::time::sleep_until(at).await;
    }
}

/// Runs one batch on the calling (blocking) thread and answers every entry; returns the seconds
/// of audio it made. A panic inside the engine fails this batch only.
fn compute(batch: Vec<Entry<Work>>) -> f64 {
    let started = Instant::now();
    for entry in &batch {
        metrics::histogram!(m::QUEUE_WAIT_SECONDS)
            .record(started.duration_since(entry.queued_at).as_secs_f64());
    }
    metrics::histogram!(m::BATCH_SIZE).record(batch.len() as f64);
    metrics::counter!(m::BATCHES_TOTAL).increment(1);

    let voice = batch[0].work.voice.clone();
    let (items, replies): (Vec<SynthesisItem>, Vec<Respond>) =
        batch.into_iter().map(|e| (e.work.item, e.respond)).unzip();
    // A listener waiting to play an item gets it in pieces, where the engine computes items
    // one after another anyway, or computes items apart together (OmniVoice's steps); a
    // padded pass (a GPU) computes the whole batch at once.
    let apart = voice.streams_items_apart();
    let in_pieces =
        (apart || !voice.computes_batches_at_once()) && items.iter().any(|i| i.in_pieces);
    let mut audio_seconds = 0.0;
    let (items, replies) = if in_pieces {
        let (pieces, rest): (Vec<_>, Vec<_>) = items
            .into_iter()
            .zip(replies)
            .partition(|(item, _)| item.in_pieces);
        let (items, replies): (Vec<_>, Vec<_>) = rest.into_iter().unzip();
        if apart {
            // Each on a thread of its own, waiting for the voice that computes them together.
            std::thread::scope(|scope| {
                let pieces: Vec<_> = pieces
                    .into_iter()
                    .map(|(item, respond)| {
                        let voice = voice.as_ref();
                        scope.spawn(move || compute_in_pieces(voice, &item, respond))
                    })
                    .collect();
                if !items.is_empty() {
                    audio_seconds += compute_each(voice.as_ref(), &items, replies);
                }
                // A thread that panicked answered its listener already (or never will).
                audio_seconds += pieces
                    .into_iter()
                    .map(|piece| piece.join().unwrap_or(0.0))
                    .sum::<f64>();
            });
            (Vec::new(), Vec::new())
        } else {
            for (item, respond) in pieces {
                audio_seconds += compute_in_pieces(voice.as_ref(), &item, respond);
            }
            (items, replies)
        }
    } else {
        (items, replies)
    };
    if !items.is_empty() {
        audio_seconds += compute_each(voice.as_ref(), &items, replies);
    }
    metrics::histogram!(m::INFERENCE_SECONDS).record(started.elapsed().as_secs_f64());
    audio_seconds
}

/// One `synthesize_each` call for `items`; whatever it does not answer gets its failure.
/// Returns the seconds of audio it answered with.
fn compute_each(voice: &dyn Voice, items: &[SynthesisItem], replies: Vec<Respond>) -> f64 {
    // Weak, so that watching a reply channel never holds it open behind its last audio.
    let watched: Vec<_> = replies.iter().map(Respond::downgrade).collect();
    let wanted = Wanted::new(move || {
        watched
            .iter()
            .any(|reply| reply.upgrade().is_some_and(|r| !r.is_closed()))
    });
    let mut replies: Vec<Option<Respond>> = replies.into_iter().map(Some).collect();
    let mut audio_seconds = 0.0;
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let mut done = |index: usize, pcm: crate::engine::Pcm| {
            // Taken, so the channel closes behind the audio: the item is complete.
            if let Some(reply) = replies.get_mut(index).and_then(Option::take) {
                audio_seconds += pcm.duration_s();
                let _ = reply.send(Ok(pcm));
            }
        };
        voice.synthesize_each_while(items, &mut done, &wanted)
    }));
    let failure = failure(voice, items.len(), outcome);
    for reply in replies.into_iter().flatten() {
        let _ = reply.send(Err(failure.clone()));
    }
    audio_seconds
}

/// One item, its pieces sent as they come; a failure after some pieces still reaches the
/// listener, so a cut-off stream never passes for a complete one. Returns the seconds of
/// audio it sent.
fn compute_in_pieces(voice: &dyn Voice, item: &SynthesisItem, respond: Respond) -> f64 {
    let watched = respond.downgrade();
    let wanted = Wanted::new(move || watched.upgrade().is_some_and(|r| !r.is_closed()));
    let (mut sent, mut audio_seconds) = (false, 0.0);
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
        voice.synthesize_in_pieces_while(
            item,
            &mut |pcm| {
                sent = true;
                audio_seconds += pcm.duration_s();
                respond.send(Ok(pcm)).is_ok()
            },
            &wanted,
        )
    }));
    if sent && matches!(outcome, Ok(Ok(()))) {
        return audio_seconds;
    }
    let _ = respond.send(Err(failure(voice, 1, outcome)));
    audio_seconds
}

/// What the items an engine call left unanswered get: the call's error, or "no audio".
fn failure(
    voice: &dyn Voice,
    size: usize,
    outcome: std::thread::Result<Result<(), crate::engine::EngineError>>,
) -> BatchError {
    match outcome {
        Ok(Ok(())) => BatchError::Engine("the engine returned no audio for this item".into()),
        Ok(Err(e)) => BatchError::Engine(e.to_string()),
        Err(_) => {
            tracing::error!(voice = %voice.info().id, size, "engine panicked");
            BatchError::Panicked
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batcher with room for `queue_size` requests, one worker, on its own runtime.
    fn started(queue_size: usize) -> (tokio::runtime::Runtime, Batcher) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let settings = BatchSettings {
            enabled: true,
            max_size: 4,
            timeout_ms: 1,
            queue_size,
        };
        let batcher = runtime.block_on(async { Batcher::start(&settings, 1) });
        (runtime, batcher)
    }

    #[test]
    fn a_batcher_whose_task_is_gone_says_it_stopped() {
        let (runtime, batcher) = started(8);
        drop(runtime); // the task dies with its runtime, as it would after a panic
        assert_eq!(batcher.admit(1).err(), Some(SubmitError::Stopped));
    }

    #[test]
    fn admission_counts_requests_not_sentences() {
        let (_runtime, batcher) = started(2);
        // A request far longer than the queue is admitted on an idle server.
        let long = batcher.admit(1000).expect("one request always fits");
        let short = batcher.admit(1).expect("a second request fits");
        assert_eq!(batcher.requests_in_progress(), 2);
        match batcher.admit(1) {
            Err(SubmitError::Full { retry_after }) => {
                // 1001 utterances ahead at the initial 0.25 s each: capped at a minute.
                assert_eq!(retry_after, Duration::from_secs(60));
            }
            other => panic!("expected a full queue, got {:?}", other.err()),
        }
        drop(long);
        let third = batcher
            .admit(1)
            .expect("a finished request frees its place");
        drop((short, third));
        assert_eq!(batcher.requests_in_progress(), 0);
    }

    #[test]
    fn submitting_counts_down_what_is_left() {
        let (runtime, batcher) = started(2);
        runtime.block_on(async {
            let voice: Arc<dyn Voice> = Arc::new(NoVoice);
            let key = VoiceKey::new("none", "none");
            let mut ticket = batcher.admit(5).unwrap();
            let receivers = batcher
                .submit(
                    &mut ticket,
                    &key,
                    &voice,
                    vec![SynthesisItem::new("a"); 2],
                    false,
                )
                .unwrap();
            assert_eq!(receivers.len(), 2);
            assert_eq!(ticket.unsubmitted(), 3);
            assert_eq!(batcher.admission.unsubmitted.load(Ordering::SeqCst), 3);
            drop(receivers); // abandoned: never computed
            drop(ticket);
            assert_eq!(batcher.admission.unsubmitted.load(Ordering::SeqCst), 0);
        });
    }

    /// A test voice's description: English, 16 kHz, one speaker.
    fn test_info(id: &str) -> crate::engine::VoiceInfo {
        crate::engine::VoiceInfo {
            id: id.into(),
            engine: "test".into(),
            language: "en".into(),
            sample_rate: 16_000,
            speakers: vec![],
            gender: None,
            unsupported: None,
            design: None,
        }
    }

    /// A voice that reports each batch it starts, and holds a batch containing "hold" until
    /// the test lets it go.
    struct GatedVoice {
        info: crate::engine::VoiceInfo,
        started: mpsc::UnboundedSender<Vec<String>>,
        gate: Mutex<std::sync::mpsc::Receiver<()>>,
    }

    impl Voice for GatedVoice {
        fn info(&self) -> &crate::engine::VoiceInfo {
            &self.info
        }
        fn synthesize_each(
            &self,
            batch: &[SynthesisItem],
            done: &mut dyn FnMut(usize, crate::engine::Pcm),
        ) -> Result<(), crate::engine::EngineError> {
            let texts: Vec<String> = batch.iter().map(|i| i.text.clone()).collect();
            let hold = texts.iter().any(|t| t.contains("hold"));
            let _ = self.started.send(texts);
            if hold {
                let _ = self.gate.lock().recv();
            }
            for index in 0..batch.len() {
                done(index, crate::engine::Pcm::new(vec![0.5; 10], 16_000));
            }
            Ok(())
        }
    }

    /// A batcher with two workers and a 50 ms wait for companions, a gated voice, and what it
    /// started, in order; dropping `release` lets held batches go.
    struct Paused {
        batcher: Batcher,
        voice: Arc<dyn Voice>,
        started: mpsc::UnboundedReceiver<Vec<String>>,
        release: std::sync::mpsc::Sender<()>,
    }

    const WAIT: Duration = Duration::from_millis(50);

    /// On its own runtime, whose clock is paused: it moves only when the test advances it.
    fn paused(max_size: usize) -> (tokio::runtime::Runtime, Paused) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap();
        let settings = BatchSettings {
            enabled: true,
            max_size,
            timeout_ms: WAIT.as_millis() as u64,
            queue_size: 8,
        };
        let batcher = runtime.block_on(async { Batcher::start(&settings, 2) });
        let (started_tx, started) = mpsc::unbounded_channel();
        let (release, gate) = std::sync::mpsc::channel();
        let voice: Arc<dyn Voice> = Arc::new(GatedVoice {
            info: test_info("gated"),
            started: started_tx,
            gate: Mutex::new(gate),
        });
        let paused = Paused {
            batcher,
            voice,
            started,
            release,
        };
        (runtime, paused)
    }

    impl Paused {
        /// Queues `texts` as one new request; returns its ticket and receivers.
        fn submit(&self, texts: &[&str]) -> (Ticket, Vec<mpsc::UnboundedReceiver<Reply>>) {
            let mut ticket = self.batcher.admit(texts.len()).unwrap();
            let items = texts.iter().map(|t| SynthesisItem::new(*t)).collect();
            let key = VoiceKey::new("test", "gated");
            let receivers = self
                .batcher
                .submit(&mut ticket, &key, &self.voice, items, false)
                .unwrap();
            (ticket, receivers)
        }

        /// Queues more sentences of the request of `ticket`.
        fn more(&self, ticket: &mut Ticket, texts: &[&str]) -> Vec<mpsc::UnboundedReceiver<Reply>> {
            let items = texts.iter().map(|t| SynthesisItem::new(*t)).collect();
            let key = VoiceKey::new("test", "gated");
            self.batcher
                .submit(ticket, &key, &self.voice, items, false)
                .unwrap()
        }
    }

    /// Lets the batcher task run whatever is ready, without moving the clock.
    async fn settle() {
        for _ in 0..16 {
            tokio::task::yield_now().await;
        }
    }

    #[test]
    fn a_lone_request_on_an_idle_batcher_starts_without_waiting_on_the_clock() {
        let (runtime, mut p) = paused(4);
        runtime.block_on(async {
            let t0 = Instant::now();
            let _queued = p.submit(&["alone"]);
            assert_eq!(p.started.recv().await.unwrap(), ["alone"]);
            assert_eq!(
                Instant::now() - t0,
                Duration::ZERO,
                "no timer was waited for"
            );
        });
    }

    #[test]
    fn while_a_batch_runs_the_next_waits_for_companions_until_the_deadline() {
        let (runtime, mut p) = paused(4);
        runtime.block_on(async {
            let _busy = p.submit(&["hold"]);
            assert_eq!(p.started.recv().await.unwrap(), ["hold"]);
            let t0 = Instant::now();
            let _first = p.submit(&["first"]);
            settle().await;
            tokio::time::advance(WAIT - Duration::from_millis(1)).await;
            settle().await;
            assert_eq!(
                p.batcher.batches_in_flight(),
                1,
                "still waiting for companions"
            );
            assert_eq!(p.batcher.queue_depth(), 1);
            let _second = p.submit(&["second"]);
            tokio::time::advance(Duration::from_millis(1)).await;
            settle().await;
            assert_eq!(p.batcher.batches_in_flight(), 2, "the deadline has come");
            assert_eq!(
                p.started.recv().await.unwrap(),
                ["first", "second"],
                "the oldest's deadline takes whoever came meanwhile"
            );
            assert_eq!(Instant::now() - t0, WAIT);
        });
        drop(p.release); // before the runtime, which waits for the held batch
    }

    #[test]
    fn a_full_batch_starts_before_the_deadline() {
        let (runtime, mut p) = paused(2);
        runtime.block_on(async {
            let _busy = p.submit(&["hold"]);
            assert_eq!(p.started.recv().await.unwrap(), ["hold"]);
            let t0 = Instant::now();
            let _one = p.submit(&["one"]);
            let _two = p.submit(&["two"]);
            assert_eq!(p.started.recv().await.unwrap(), ["one", "two"]);
            assert_eq!(Instant::now() - t0, Duration::ZERO, "full: no wait");
        });
        drop(p.release); // before the runtime, which waits for the held batch
    }

    #[test]
    fn a_newcomers_first_sentence_goes_before_older_requests_later_ones() {
        for max_size in [1, 4] {
            let (runtime, mut p) = paused(max_size);
            runtime.block_on(async {
                // Two older requests, each computing its first sentence (one per worker)…
                let (mut a, _a1) = p.submit(&["hold a1"]);
                assert_eq!(p.started.recv().await.unwrap(), ["hold a1"]);
                let (mut b, _b1) = p.submit(&["hold b1"]);
                // (Batching, it waits for companions until the deadline.)
                settle().await;
                tokio::time::advance(WAIT).await;
                assert_eq!(p.started.recv().await.unwrap(), ["hold b1"]);
                // …and queueing their later ones, when a newcomer arrives.
                let _later = (p.more(&mut a, &["a2", "a3"]), p.more(&mut b, &["b2", "b3"]));
                let _c = p.submit(&["c1", "c2"]);
                settle().await;
                // The first worker to be free computes the newcomer's first sentence first.
                p.release.send(()).unwrap();
                tokio::time::advance(WAIT).await;
                let next = p.started.recv().await.unwrap();
                assert_eq!(next[0], "c1", "batches of up to {max_size}: {next:?}");
                assert!(next.len() <= max_size);
            });
            drop(p.release); // before the runtime, which waits for the held batch
        }
    }

    /// Reports what `wanted` says when its batch starts, again each time the test opens the
    /// gate, and once more when it turns false (or after 10 s).
    struct WatchingVoice {
        info: crate::engine::VoiceInfo,
        seen: std::sync::mpsc::Sender<bool>,
        gate: Mutex<std::sync::mpsc::Receiver<()>>,
    }

    impl Voice for WatchingVoice {
        fn info(&self) -> &crate::engine::VoiceInfo {
            &self.info
        }
        fn synthesize_each(
            &self,
            _: &[SynthesisItem],
            _: &mut dyn FnMut(usize, crate::engine::Pcm),
        ) -> Result<(), crate::engine::EngineError> {
            unreachable!("the batcher says who waits")
        }
        fn synthesize_each_while(
            &self,
            _: &[SynthesisItem],
            _: &mut dyn FnMut(usize, crate::engine::Pcm),
            wanted: &Wanted,
        ) -> Result<(), crate::engine::EngineError> {
            let _ = self.seen.send(wanted.still());
            let _ = self.gate.lock().recv();
            let _ = self.seen.send(wanted.still());
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while wanted.still() && std::time::Instant::now() < deadline {
                std::thread::yield_now();
            }
            let _ = self.seen.send(wanted.still());
            Err(crate::engine::EngineError::synthesis("given up"))
        }
    }

    #[test]
    fn a_batch_is_wanted_until_its_last_caller_hangs_up() {
        let (runtime, batcher) = started(8);
        let (seen_tx, seen) = std::sync::mpsc::channel();
        let (open, gate) = std::sync::mpsc::channel();
        let voice: Arc<dyn Voice> = Arc::new(WatchingVoice {
            info: test_info("watching"),
            seen: seen_tx,
            gate: Mutex::new(gate),
        });
        let seen = Arc::new(Mutex::new(seen));
        // What the voice reports next, waited for off the runtime the batcher runs on.
        let next = || {
            let seen = seen.clone();
            async move {
                tokio::task::spawn_blocking(move || {
                    seen.lock().recv_timeout(Duration::from_secs(20)).unwrap()
                })
                .await
                .unwrap()
            }
        };
        runtime.block_on(async {
            let key = VoiceKey::new("test", "watching");
            let mut ticket = batcher.admit(2).unwrap();
            let items = vec![SynthesisItem::new("a"), SynthesisItem::new("b")];
            let mut receivers = batcher
                .submit(&mut ticket, &key, &voice, items, false)
                .unwrap();
            assert!(next().await, "both wait at the start");
            drop(receivers.remove(0));
            open.send(()).unwrap();
            assert!(next().await, "one still waits");
            drop(receivers);
            assert!(!next().await, "nobody waits");
        });
    }

    /// Never asked to compute anything: these tests only queue.
    struct NoVoice;

    impl Voice for NoVoice {
        fn info(&self) -> &crate::engine::VoiceInfo {
            unreachable!("not computed in these tests")
        }
        fn synthesize_each(
            &self,
            _: &[SynthesisItem],
            _: &mut dyn FnMut(usize, crate::engine::Pcm),
        ) -> Result<(), crate::engine::EngineError> {
            unreachable!("not computed in these tests")
        }
    }
}
