//! Refusing, before any work, a job that cannot finish within the server's time limit.
//!
//! The character limit alone does not bound the work: 2,500 ideographs are within it and are
//! ten minutes of Mandarin, an hour of compute for a slow engine on a small CPU. Without this
//! check such a request was cut off at the time limit, a whole body as a 504 and a stream in
//! the middle of its audio, after minutes of work nobody could use. So the job's speech is
//! estimated from its text (how long a speaker takes over each kind of letter), multiplied by
//! each engine's measured real-time factor, and a job whose compute would not fit is a 400
//! that says so and what to do. Before an engine has computed anything its pace is unknown,
//! and its utterances count as free: the server warms each preloaded voice up at start, so
//! that is only a voice nobody has used yet.

use std::time::Duration;

use super::request::Job;
use super::{InvalidReason, SpeechError};
use crate::text::writing::{is_hangul, is_ideograph, is_kana};

/// Seconds of speech, at speed 1, per character of each kind, as Kokoro says them (measured
/// on 1,500 characters of English prose, 0.094 s a letter with the silences each sentence
/// brings, and on 600 ideographs read by a Mandarin voice, 0.25 s each): an ideograph is a
/// syllable, a kana a mora (about 8 a second), a Hangul block a syllable. Punctuation and
/// spaces cost nothing of their own.
const SECONDS_PER_IDEOGRAPH: f64 = 0.25;
const SECONDS_PER_KANA: f64 = 0.12;
const SECONDS_PER_HANGUL: f64 = 0.22;
const SECONDS_PER_LETTER: f64 = 0.09;

/// The share of the time limit a job may be expected to need: the estimate of its speech is
/// good to about a fifth either way, and the pace moves with the load while the job runs.
const HEADROOM: f64 = 0.8;

/// About how long `text` takes to say at speed 1.
pub(super) fn speaking_seconds(text: &str) -> f64 {
    text.chars()
        .map(|c| match c {
            c if is_ideograph(c) => SECONDS_PER_IDEOGRAPH,
            c if is_kana(c) => SECONDS_PER_KANA,
            c if is_hangul(c) => SECONDS_PER_HANGUL,
            c if c.is_alphanumeric() => SECONDS_PER_LETTER,
            _ => 0.0,
        })
        .sum()
}

/// About how long `job` is in speech (at the request's speed) and how many seconds of one
/// worker it takes, from each engine's real-time factor (`None`: not measured yet, counted
/// as free). One pass over the utterances gives both.
fn estimate(job: &Job, real_time_factor: impl Fn(&str) -> Option<f64>) -> (f64, f64) {
    let script = job.script();
    let speed = f64::from(job.params().speed);
    let (mut speech, mut compute) = (0.0, 0.0);
    for utterance in &script.utterances {
        let seconds = speaking_seconds(&utterance.spoken.text);
        speech += seconds / speed;
        let rate = speed * f64::from(utterance.rate);
        let engine = script.voices[utterance.voice].key.engine();
        compute += seconds / rate.max(f64::EPSILON) * real_time_factor(engine).unwrap_or(0.0);
    }
    (speech, compute)
}

/// `Ok` when `job` is expected to finish within `limit`; else the refusal that says why.
pub(super) fn check(
    job: &Job,
    limit: Duration,
    real_time_factor: impl Fn(&str) -> Option<f64>,
) -> Result<(), SpeechError> {
    let (speech, expected) = estimate(job, real_time_factor);
    let limit_s = limit.as_secs_f64();
    if expected <= HEADROOM * limit_s {
        return Ok(());
    }
    Err(SpeechError::invalid(
        "input",
        InvalidReason::TooLong,
        format!(
            "'input' is about {:.0} s of speech, which would take this server about {:.0} s to \
             synthesize at its current pace: longer than its request time limit of {:.0} s. \
             Send it in smaller requests (a paragraph each), or raise --request-timeout-s.",
            speech, expected, limit_s
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speech_is_counted_by_the_kind_of_letter() {
        let english = speaking_seconds("The quick brown fox jumps over the lazy dog.");
        assert!((2.0..4.0).contains(&english), "{english}");
        // Ten ideographs say more than ten letters, and punctuation says nothing.
        assert!(speaking_seconds("你好世界今天天气很好") > 2.0 * speaking_seconds("helloworld"));
        assert_eq!(speaking_seconds("!?.,;: —…"), 0.0);
        assert!(speaking_seconds("こんにちは") > 0.5);
        assert!(speaking_seconds("안녕하세요") > 0.5);
    }
}
