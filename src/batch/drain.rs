//! How fast the queue drains, so a refused client is told when to come back.
//!
//! A constant `Retry-After` is wrong both ways: too short under real overload (clients hammer
//! the server) and too long for a blip. The batcher records how long each batch took per
//! utterance; a refusal then says how long the utterances ahead would take to compute on all
//! workers. Plain data, no clock of its own, so tests drive it directly.

use std::time::Duration;

/// Before anything was measured; about one sentence of the default voice on one core.
const INITIAL_SECONDS_PER_UTTERANCE: f64 = 0.25;
/// Weight of the newest batch in the moving average.
const SMOOTHING: f64 = 0.2;
/// Bounds of a `Retry-After`: whole seconds, and never so long that a client gives up for good.
const MIN_RETRY: Duration = Duration::from_secs(1);
const MAX_RETRY: Duration = Duration::from_secs(60);

/// A moving average of compute time per utterance, on one worker.
#[derive(Debug, Clone)]
pub struct DrainRate {
    seconds_per_utterance: f64,
    workers: usize,
}

impl DrainRate {
    pub fn new(workers: usize) -> Self {
        Self {
            seconds_per_utterance: INITIAL_SECONDS_PER_UTTERANCE,
            workers: workers.max(1),
        }
    }

    /// One batch of `items` utterances took `took` on one worker.
    pub fn record(&mut self, items: usize, took: Duration) {
        if items == 0 {
            return;
        }
        let sample = took.as_secs_f64() / items as f64;
        self.seconds_per_utterance += SMOOTHING * (sample - self.seconds_per_utterance);
    }

    /// How long `queued` utterances take to compute on every worker, rounded up to whole
    /// seconds and bounded to 1–60 s.
    pub fn time_to_drain(&self, queued: usize) -> Duration {
        let seconds = queued as f64 * self.seconds_per_utterance / self.workers as f64;
        Duration::from_secs(seconds.ceil() as u64).clamp(MIN_RETRY, MAX_RETRY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_grows_with_the_queue_and_shrinks_with_workers() {
        let mut one = DrainRate::new(1);
        for _ in 0..50 {
            one.record(4, Duration::from_secs(2)); // 0.5 s per utterance
        }
        assert_eq!(one.time_to_drain(10), Duration::from_secs(5));
        assert_eq!(one.time_to_drain(40), Duration::from_secs(20));
        let mut two = DrainRate::new(2);
        for _ in 0..50 {
            two.record(4, Duration::from_secs(2));
        }
        assert_eq!(two.time_to_drain(40), Duration::from_secs(10));
    }

    #[test]
    fn retry_after_is_bounded() {
        let mut slow = DrainRate::new(1);
        for _ in 0..50 {
            slow.record(1, Duration::from_secs(30));
        }
        assert_eq!(slow.time_to_drain(1000), MAX_RETRY);
        let fast = DrainRate::new(8);
        assert_eq!(fast.time_to_drain(1), MIN_RETRY);
        assert_eq!(fast.time_to_drain(0), MIN_RETRY);
    }

    #[test]
    fn an_empty_batch_changes_nothing() {
        let mut rate = DrainRate::new(1);
        rate.record(0, Duration::from_secs(100));
        assert_eq!(rate.time_to_drain(4), Duration::from_secs(1));
    }
}
