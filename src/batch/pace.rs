//! How fast each engine speaks on this machine, so a request that cannot finish within the
//! server's time limit is refused before any work instead of cut off half way.
//!
//! The measure is the real-time factor: seconds of compute per second of audio, on one
//! worker, a moving average over the batches computed so far. It is per engine because the
//! engines differ by two orders of magnitude (Piper, Kokoro, OmniVoice), and it is measured,
//! not declared, because the same engine differs as much between CPUs and between an idle
//! and a loaded server. Plain data, no clock of its own, so tests drive it directly.

use std::collections::HashMap;
use std::time::Duration;

/// Weight of the newest batch in the moving average.
const SMOOTHING: f64 = 0.2;
/// Batches shorter than this say more about fixed costs than about speed.
const MIN_AUDIO_SECONDS: f64 = 0.2;

/// Real-time factors per engine; an engine nothing was measured for has none.
#[derive(Debug, Clone, Default)]
pub struct Pace {
    factors: HashMap<String, f64>,
}

impl Pace {
    /// A batch of `engine` took `took` on one worker for `audio_seconds` of audio.
    pub fn record(&mut self, engine: &str, took: Duration, audio_seconds: f64) {
        if audio_seconds < MIN_AUDIO_SECONDS {
            return;
        }
        let sample = took.as_secs_f64() / audio_seconds;
        match self.factors.get_mut(engine) {
            Some(factor) => *factor += SMOOTHING * (sample - *factor),
            None => {
                self.factors.insert(engine.to_string(), sample);
            }
        }
    }

    /// Seconds of compute per second of `engine`'s audio; `None` before its first batch.
    pub fn real_time_factor(&self, engine: &str) -> Option<f64> {
        self.factors.get(engine).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_batch_sets_the_pace_and_later_ones_move_it() {
        let mut pace = Pace::default();
        assert_eq!(pace.real_time_factor("kokoro"), None);
        pace.record("kokoro", Duration::from_secs(1), 10.0);
        assert!((pace.real_time_factor("kokoro").unwrap() - 0.1).abs() < 1e-9);
        for _ in 0..100 {
            pace.record("kokoro", Duration::from_secs(3), 10.0);
        }
        assert!((pace.real_time_factor("kokoro").unwrap() - 0.3).abs() < 1e-6);
        assert_eq!(pace.real_time_factor("piper"), None, "engines apart");
    }

    #[test]
    fn a_batch_with_almost_no_audio_changes_nothing() {
        let mut pace = Pace::default();
        pace.record("piper", Duration::from_secs(1), 0.05);
        assert_eq!(pace.real_time_factor("piper"), None);
    }
}
