//! A circuit breaker in front of Redis, so that a dead or frozen Redis costs requests nothing.
//!
//! Each Redis operation already has a timeout, but a timeout on every request is still a
//! timeout on every request. After `failures` consecutive failures the breaker opens: Redis is
//! skipped outright for `cooldown`; then one operation is let through as a probe, and its
//! result closes the breaker or opens it for another cooldown. A probe that never reports
//! (its request went away) does not wedge the breaker: after another cooldown a new probe goes.

use parking_lot::Mutex;
use std::time::{Duration, Instant};

use crate::metrics as m;

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    Closed { failures: u32 },
    Open { until: Instant },
    Probing { since: Instant },
}

/// What the breaker says to one operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Go ahead, and report the result.
    Try,
    /// Redis is taken to be down: do without it.
    Skip,
}

/// The state as `/health` and the gauge name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Position {
    Closed,
    Open,
    HalfOpen,
}

impl Position {
    pub fn as_str(self) -> &'static str {
        match self {
            Position::Closed => "closed",
            Position::Open => "open",
            Position::HalfOpen => "half_open",
        }
    }
}

pub struct Breaker {
    state: Mutex<State>,
    failures: u32,
    cooldown: Duration,
}

impl Breaker {
    pub fn new(failures: u32, cooldown: Duration) -> Self {
        set_gauge(Position::Closed);
        Self {
            state: Mutex::new(State::Closed { failures: 0 }),
            failures: failures.max(1),
            cooldown,
        }
    }

    pub fn admit(&self, now: Instant) -> Verdict {
        let mut state = self.lock();
        match *state {
            State::Closed { .. } => Verdict::Try,
            State::Open { until } if now < until => Verdict::Skip,
            State::Probing { since } if now < since + self.cooldown => Verdict::Skip,
            State::Open { .. } | State::Probing { .. } => {
                *state = State::Probing { since: now };
                set_gauge(Position::HalfOpen);
                Verdict::Try
            }
        }
    }

    pub fn succeeded(&self) {
        let mut state = self.lock();
        if !matches!(*state, State::Closed { .. }) {
            tracing::info!("redis answers again; the shared cache is back");
            set_gauge(Position::Closed);
        }
        *state = State::Closed { failures: 0 };
    }

    pub fn failed(&self, now: Instant) {
        let mut state = self.lock();
        let open = match *state {
            State::Closed { failures } if failures + 1 < self.failures => {
                *state = State::Closed {
                    failures: failures + 1,
                };
                false
            }
            State::Closed { .. } | State::Probing { .. } => true,
            // Operations admitted before the breaker opened report late; they change nothing.
            State::Open { .. } => false,
        };
        if open {
            if matches!(*state, State::Closed { .. }) {
                tracing::warn!(
                    cooldown_ms = self.cooldown.as_millis() as u64,
                    "redis keeps failing; skipping the shared cache for a while"
                );
            }
            *state = State::Open {
                until: now + self.cooldown,
            };
            set_gauge(Position::Open);
        }
    }

    pub fn position(&self) -> Position {
        match *self.lock() {
            State::Closed { .. } => Position::Closed,
            State::Open { .. } => Position::Open,
            State::Probing { .. } => Position::HalfOpen,
        }
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, State> {
        self.state.lock()
    }
}

fn set_gauge(position: Position) {
    let value = match position {
        Position::Closed => 0.0,
        Position::Open => 1.0,
        Position::HalfOpen => 2.0,
    };
    metrics::gauge!(m::REDIS_BREAKER_STATE).set(value);
}

#[cfg(test)]
mod tests {
    use super::*;

    const COOLDOWN: Duration = Duration::from_secs(1);

    #[test]
    fn opens_after_consecutive_failures_only() {
        let breaker = Breaker::new(3, COOLDOWN);
        let t = Instant::now();
        breaker.failed(t);
        breaker.failed(t);
        breaker.succeeded();
        breaker.failed(t);
        breaker.failed(t);
        assert_eq!(breaker.admit(t), Verdict::Try, "a success reset the count");
        breaker.failed(t);
        assert_eq!(breaker.position(), Position::Open);
        assert_eq!(breaker.admit(t + COOLDOWN / 2), Verdict::Skip);
    }

    #[test]
    fn after_the_cooldown_one_probe_decides() {
        let breaker = Breaker::new(1, COOLDOWN);
        let t = Instant::now();
        breaker.failed(t);
        let later = t + COOLDOWN;
        assert_eq!(breaker.admit(later), Verdict::Try, "the probe");
        assert_eq!(breaker.admit(later), Verdict::Skip, "one probe at a time");
        breaker.failed(later);
        assert_eq!(breaker.position(), Position::Open);
        assert_eq!(breaker.admit(later + COOLDOWN / 2), Verdict::Skip);
        assert_eq!(breaker.admit(later + COOLDOWN), Verdict::Try);
        breaker.succeeded();
        assert_eq!(breaker.position(), Position::Closed);
        assert_eq!(breaker.admit(later + COOLDOWN), Verdict::Try);
    }

    #[test]
    fn a_lost_probe_is_replaced_after_a_cooldown() {
        let breaker = Breaker::new(1, COOLDOWN);
        let t = Instant::now();
        breaker.failed(t);
        assert_eq!(breaker.admit(t + COOLDOWN), Verdict::Try);
        // That probe's request went away without reporting.
        assert_eq!(breaker.admit(t + COOLDOWN * 3 / 2), Verdict::Skip);
        assert_eq!(breaker.admit(t + COOLDOWN * 2), Verdict::Try);
    }
}
