//! The batching decision, as plain data and a plain function.
//!
//! [`State`] holds the utterances waiting for a worker; [`State::next_batch`] decides what runs
//! now. Nothing here is async or reads a clock (times are tokio's, handed in), so unit tests drive every rule
//! (lone requests go at once, batches fill up to the limit, the oldest never waits longer than
//! the timeout, requests take turns, similar lengths go together, abandoned entries are
//! dropped) step by step.
//!
//! Taking turns: an entry's *rank* is how many entries of its own request are queued ahead of
//! it, and among equal ranks the request served longest ago (or never) goes first. Batches are
//! filled and computed in that order, so every waiting request gets its next sentence in
//! before any request gets its second, and a short request behind a long one waits for one of
//! the long request's sentences, not for all of them (TGI's router is fair the same way).
//! And no request computes on more than `per_request` workers at once, so with several
//! workers one is always free for a newcomer instead of all of them on one long request.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use tokio::sync::mpsc;
// Tokio's clock, which tests can pause and advance: the batcher sleeps on it.
use tokio::time::Instant;

use crate::engine::{Pcm, VoiceKey};

/// What a queued utterance receives: its audio, in one piece or in several consecutive ones
/// (for items computed [in pieces](crate::engine::SynthesisItem::in_pieces)), or an error. The
/// channel closes after the last.
pub type Reply = Result<Pcm, BatchError>;

/// Where a worker sends an utterance's [`Reply`]s.
pub type Respond = mpsc::UnboundedSender<Reply>;

/// Why a queued utterance produced no audio.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum BatchError {
    #[error("{0}")]
    Engine(String),
    #[error("the engine panicked while synthesizing this batch")]
    Panicked,
    #[error("the server is shutting down")]
    Shutdown,
}

/// One utterance waiting for a worker; `W` is what the worker needs to compute it, which
/// the batching decision never looks at.
pub struct Entry<W> {
    /// Which loaded voice computes it; only entries with the same key share a batch.
    pub voice_key: VoiceKey,
    /// The request it belongs to, for taking turns.
    pub request: u64,
    /// Padding in a batch grows with the length difference of its items; text length is a
    /// good enough proxy for the number of phonemes.
    pub cost: usize,
    pub respond: Respond,
    pub queued_at: Instant,
    pub work: W,
}

impl<W> Entry<W> {
    fn abandoned(&self) -> bool {
        self.respond.is_closed()
    }
}

/// How many batches back a request's last turn is remembered once it has nothing queued.
const REMEMBERED_BATCHES: u64 = 256;

/// Utterances waiting for a worker, oldest first.
pub struct State<W> {
    entries: VecDeque<Entry<W>>,
    max_size: usize,
    max_wait: Duration,
    /// When each request with queued entries was last in a batch (a batch counter).
    served: HashMap<u64, u64>,
    batches: u64,
    /// Batches running now, by request.
    computing: HashMap<u64, usize>,
    per_request: usize,
}

/// What [`State::next_batch`] removed from the queue.
pub struct Decision<W> {
    /// Entries to compute together, in arrival order; empty when nothing should run yet.
    pub batch: Vec<Entry<W>>,
    /// Entries dropped because their client went away (disconnect or timeout).
    pub abandoned: usize,
    /// The requests in `batch`, once each: hand them to [`State::finished`] when it is done.
    pub requests: Vec<u64>,
}

impl<W> State<W> {
    /// `per_request`: most batches one request may have running at once.
    pub fn new(max_size: usize, max_wait: Duration, per_request: usize) -> Self {
        Self {
            entries: VecDeque::new(),
            max_size: max_size.max(1),
            max_wait,
            served: HashMap::new(),
            batches: 0,
            computing: HashMap::new(),
            per_request: per_request.max(1),
        }
    }

    /// A batch of [`Decision::requests`] finished computing.
    pub fn finished(&mut self, requests: &[u64]) {
        for request in requests {
            if let Some(n) = self.computing.get_mut(request) {
                *n -= 1;
                if *n == 0 {
                    self.computing.remove(request);
                }
            }
        }
    }

    /// Whether the request already computes on as many workers as it may.
    fn at_its_share(&self, request: u64) -> bool {
        self.computing
            .get(&request)
            .is_some_and(|&n| n >= self.per_request)
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn append(&mut self, entry: Entry<W>) {
        self.entries.push_back(entry);
    }

    /// When the oldest entry that may run will have waited `max_wait`: the latest moment to
    /// look again (entries of requests at their share wait for a batch to finish instead).
    pub fn next_deadline(&self) -> Option<Instant> {
        self.entries
            .iter()
            .find(|e| !self.at_its_share(e.request))
            .map(|e| e.queued_at + self.max_wait)
    }

    /// Picks the next batch, assuming a worker is free. `idle` says no batch is running at all:
    /// then waiting for companions only adds latency, so whatever waits goes at once.
    ///
    /// Otherwise a voice's entries run once there are `max_size` of them or the oldest has
    /// waited `max_wait`. A batch is led by the entry whose turn it is (see the module docs);
    /// the rest are the next turns, closest to it in length first.
    pub fn next_batch(&mut self, now: Instant, idle: bool) -> Decision<W> {
        let before = self.entries.len();
        self.entries.retain(|e| !e.abandoned());
        let abandoned = before - self.entries.len();

        let Some(key) = self.ready_voice(now, idle) else {
            return Decision {
                batch: Vec::new(),
                abandoned,
                requests: Vec::new(),
            };
        };
        let ranks = self.ranks();
        // Whose turn it is: lower rank, then served longest ago (never = first), then age.
        let turn = |i: usize| {
            let request = self.entries[i].request;
            let last = self.served.get(&request).map_or(0, |&b| b + 1);
            (ranks[i], last, i)
        };
        let mut members: Vec<usize> = (0..self.entries.len())
            .filter(|&i| {
                let entry = &self.entries[i];
                entry.voice_key == key && !self.at_its_share(entry.request)
            })
            .collect();
        members.sort_by_key(|&i| turn(i));
        let lead = members[0];
        let target = self.entries[lead].cost;
        let mut others: Vec<usize> = members[1..].to_vec();
        others.sort_by_key(|&i| {
            let (rank, last, index) = turn(i);
            (rank, last, self.entries[i].cost.abs_diff(target), index)
        });
        let mut chosen: Vec<usize> = std::iter::once(lead)
            .chain(others.into_iter().take(self.max_size - 1))
            .collect();
        // Computed in this order (a CPU engine answers item by item): turns first.
        let order: Vec<usize> = {
            let mut order = chosen.clone();
            order.sort_by_key(|&i| turn(i));
            order
        };
        self.batches += 1;
        let mut requests: Vec<u64> = chosen.iter().map(|&i| self.entries[i].request).collect();
        requests.sort_unstable();
        requests.dedup();
        for &request in &requests {
            self.served.insert(request, self.batches);
            *self.computing.entry(request).or_insert(0) += 1;
        }
        chosen.sort_unstable();

        let mut taken: Vec<(usize, Entry<W>)> = Vec::with_capacity(chosen.len());
        for (removed, index) in chosen.into_iter().enumerate() {
            if let Some(entry) = self.entries.remove(index - removed) {
                taken.push((index, entry));
            }
        }
        taken.sort_by_key(|(index, _)| order.iter().position(|o| o == index));
        let batch = taken.into_iter().map(|(_, entry)| entry).collect();
        self.forget_finished_requests();
        Decision {
            batch,
            abandoned,
            requests,
        }
    }

    /// Turns are remembered for requests still waiting and for those served in the last
    /// [`REMEMBERED_BATCHES`] batches (a request whose whole window is being computed has
    /// nothing queued for a moment, and must not come back as new), so the table stays small.
    fn forget_finished_requests(&mut self) {
        let waiting: std::collections::HashSet<u64> =
            self.entries.iter().map(|e| e.request).collect();
        let recent = self.batches.saturating_sub(REMEMBERED_BATCHES);
        let computing = &self.computing;
        self.served.retain(|request, &mut batch| {
            batch > recent || waiting.contains(request) || computing.contains_key(request)
        });
    }

    /// For each entry, how many entries of the same request are queued ahead of it.
    fn ranks(&self) -> Vec<usize> {
        let mut seen: std::collections::HashMap<u64, usize> = std::collections::HashMap::new();
        self.entries
            .iter()
            .map(|e| {
                let rank = seen.entry(e.request).or_insert(0);
                *rank += 1;
                *rank - 1
            })
            .collect()
    }

    /// The voice whose entries should run now, checking voices in the order of their oldest entry.
    fn ready_voice(&self, now: Instant, idle: bool) -> Option<VoiceKey> {
        let mut seen: Vec<&VoiceKey> = Vec::new();
        let may_run = |e: &&Entry<W>| !self.at_its_share(e.request);
        for entry in self.entries.iter().filter(may_run) {
            let key = &entry.voice_key;
            if seen.contains(&key) {
                continue;
            }
            seen.push(key);
            let waited = now.saturating_duration_since(entry.queued_at);
            let count = self
                .entries
                .iter()
                .filter(may_run)
                .filter(|e| &e.voice_key == key)
                .count();
            if idle || count >= self.max_size || waited >= self.max_wait {
                return Some(key.clone());
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Harness {
        state: State<String>,
        receivers: Vec<mpsc::UnboundedReceiver<Reply>>,
        t0: Instant,
    }

    impl Harness {
        fn new(max_size: usize, wait_ms: u64) -> Self {
            Self {
                state: State::new(max_size, Duration::from_millis(wait_ms), usize::MAX),
                receivers: Vec::new(),
                t0: Instant::now(),
            }
        }

        fn push(&mut self, key: &str, text: &str, at_ms: u64) {
            // Each entry its own request, unless pushed with `push_for`.
            let request = 1000 + self.receivers.len() as u64;
            self.push_for(request, key, text, at_ms);
        }

        fn push_for(&mut self, request: u64, key: &str, text: &str, at_ms: u64) {
            let (tx, rx) = mpsc::unbounded_channel();
            self.receivers.push(rx);
            self.state.append(Entry {
                voice_key: VoiceKey::new("fake", key),
                request,
                cost: text.chars().count(),
                respond: tx,
                queued_at: self.t0 + Duration::from_millis(at_ms),
                work: text.to_string(),
            });
        }

        fn next(&mut self, at_ms: u64, idle: bool) -> Vec<String> {
            let now = self.t0 + Duration::from_millis(at_ms);
            self.state
                .next_batch(now, idle)
                .batch
                .into_iter()
                .map(|e| e.work)
                .collect()
        }
    }

    #[test]
    fn a_lone_request_on_an_idle_server_runs_at_once() {
        let mut h = Harness::new(8, 20);
        h.push("v", "hello", 0);
        assert_eq!(h.next(0, true), vec!["hello"]);
        assert!(h.state.is_empty());
    }

    #[test]
    fn while_busy_entries_wait_for_companions_until_the_timeout() {
        let mut h = Harness::new(8, 20);
        h.push("v", "a", 0);
        h.push("v", "b", 5);
        assert!(h.next(10, false).is_empty(), "not full, not timed out");
        assert_eq!(
            h.state.next_deadline(),
            Some(h.t0 + Duration::from_millis(20))
        );
        assert_eq!(h.next(20, false), vec!["a", "b"]);
    }

    #[test]
    fn a_full_batch_goes_without_waiting_and_respects_the_limit() {
        let mut h = Harness::new(3, 1000);
        for (i, t) in ["a", "b", "c", "d"].iter().enumerate() {
            h.push("v", t, i as u64);
        }
        assert_eq!(h.next(4, false), vec!["a", "b", "c"]);
        assert_eq!(h.state.len(), 1);
        assert!(h.next(5, false).is_empty());
    }

    #[test]
    fn voices_are_never_mixed_in_one_batch() {
        let mut h = Harness::new(8, 20);
        h.push("x", "x1", 0);
        h.push("y", "y1", 1);
        h.push("x", "x2", 2);
        assert_eq!(h.next(3, true), vec!["x1", "x2"]);
        assert_eq!(h.next(3, true), vec!["y1"]);
    }

    #[test]
    fn a_full_voice_runs_even_if_an_older_voice_is_still_waiting() {
        let mut h = Harness::new(2, 100);
        h.push("x", "x1", 0);
        h.push("y", "y1", 1);
        h.push("y", "y2", 2);
        assert_eq!(h.next(3, false), vec!["y1", "y2"]);
    }

    #[test]
    fn companions_are_chosen_by_similar_length() {
        let mut h = Harness::new(2, 0);
        h.push("v", "medium text", 0);
        h.push("v", "a much much longer piece of text", 1);
        h.push("v", "medium txt!", 2);
        assert_eq!(h.next(3, false), vec!["medium text", "medium txt!"]);
    }

    #[test]
    fn abandoned_entries_are_dropped_before_they_are_computed() {
        let mut h = Harness::new(8, 0);
        h.push("v", "gone", 0);
        h.push("v", "kept", 1);
        drop(h.receivers.remove(0));
        let decision = h.state.next_batch(h.t0 + Duration::from_millis(2), true);
        assert_eq!(decision.abandoned, 1);
        let texts: Vec<_> = decision.batch.into_iter().map(|e| e.work).collect();
        assert_eq!(texts, vec!["kept"]);
    }

    #[test]
    fn batch_size_one_means_no_batching() {
        let mut h = Harness::new(1, 0);
        h.push("v", "a", 0);
        h.push("v", "b", 0);
        assert_eq!(h.next(0, false), vec!["a"]);
        assert_eq!(h.next(0, false), vec!["b"]);
    }

    #[test]
    fn requests_take_turns_in_a_batch() {
        let mut h = Harness::new(8, 0);
        h.push_for(1, "v", "long one", 0);
        h.push_for(1, "v", "long two", 1);
        h.push_for(2, "v", "short", 2);
        assert_eq!(h.next(3, true), vec!["long one", "short", "long two"]);
    }

    #[test]
    fn without_batching_a_short_request_waits_for_one_sentence_of_a_long_one() {
        let mut h = Harness::new(1, 0);
        h.push_for(1, "v", "long one", 0);
        h.push_for(1, "v", "long two", 1);
        h.push_for(2, "v", "short", 2);
        assert_eq!(h.next(3, true), vec!["long one"]);
        // The long request refills its window as its sentences are delivered; it was served
        // last, so the short request goes next.
        h.push_for(1, "v", "long three", 4);
        assert_eq!(
            h.next(5, true),
            vec!["short"],
            "before the long request's second"
        );
        assert_eq!(h.next(6, true), vec!["long two"]);
        assert_eq!(h.next(7, true), vec!["long three"]);
    }

    #[test]
    fn a_batch_prefers_other_requests_over_a_second_sentence() {
        let mut h = Harness::new(2, 0);
        h.push_for(1, "v", "aaaa", 0);
        h.push_for(1, "v", "aaab", 1);
        h.push_for(2, "v", "a much longer text from someone else", 2);
        assert_eq!(
            h.next(3, true),
            vec!["aaaa", "a much longer text from someone else"]
        );
    }

    #[test]
    fn within_a_batch_the_request_served_longest_ago_goes_first() {
        let mut h = Harness::new(8, 0);
        h.push_for(1, "v", "long one", 0);
        h.push_for(1, "v", "long two", 1);
        assert_eq!(h.next(2, true), vec!["long one", "long two"]);
        h.push_for(1, "v", "long three", 3);
        h.push_for(2, "v", "short", 4);
        assert_eq!(h.next(5, true), vec!["short", "long three"]);
    }

    #[test]
    fn turns_are_forgotten_some_batches_after_their_requests() {
        let mut h = Harness::new(1, 0);
        for request in 0..2 * REMEMBERED_BATCHES {
            h.push_for(request, "v", "one", request);
            let now = h.t0 + Duration::from_millis(request);
            let decision = h.state.next_batch(now, true);
            assert_eq!(decision.batch.len(), 1);
            h.state.finished(&decision.requests);
        }
        assert!(h.state.computing.is_empty());
        assert_eq!(h.state.served.len() as u64, REMEMBERED_BATCHES);
    }

    #[test]
    fn a_request_at_its_share_of_workers_leaves_the_rest_to_others() {
        let mut h = Harness::new(1, 0);
        h.state.per_request = 1;
        h.push_for(1, "v", "long one", 0);
        h.push_for(1, "v", "long two", 1);
        let first = h.state.next_batch(h.t0 + Duration::from_millis(2), true);
        assert_eq!(first.requests, vec![1]);
        // The long request computes on one worker: a second worker gets nothing of it…
        assert!(h.next(3, false).is_empty());
        assert_eq!(h.state.next_deadline(), None, "nothing to wake up for");
        // …but takes a newcomer at once.
        h.push_for(2, "v", "short", 4);
        assert_eq!(h.next(30, false), vec!["short"]);
        h.state.finished(&first.requests);
        assert_eq!(h.next(31, true), vec!["long two"]);
    }
}
