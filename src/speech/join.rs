//! Sentence audio joined into one utterance: short pauses between sentences, and faded edges so
//! joins never click. Whole bodies and streams join the same way, so both sound identical.

use crate::engine::Pcm;

/// Silence between sentences, as natural speech pauses.
const SENTENCE_PAUSE_S: f32 = 0.2;
/// Fade at both ends of every sentence so joins never click.
const EDGE_FADE_S: f32 = 0.005;

/// Joins sentence audio with short pauses; returns the samples and their duration in seconds.
pub(super) fn join_sentences(pieces: &[Pcm], rate: u32) -> (Vec<f32>, f64) {
    let pause = (SENTENCE_PAUSE_S * rate as f32) as usize;
    let total: usize = pieces.iter().map(|p| p.samples.len()).sum::<usize>()
        + pause * pieces.len().saturating_sub(1);
    let mut out = Vec::with_capacity(total);
    for (i, piece) in pieces.iter().enumerate() {
        append_sentence(&mut out, &piece.samples, rate, i > 0);
    }
    let duration = out.len() as f64 / rate as f64;
    (out, duration)
}

/// Where each sentence starts in the audio [`join_sentences`] makes of them, in samples.
pub(super) fn sentence_starts(pieces: &[Pcm], rate: u32) -> Vec<usize> {
    let pause = (SENTENCE_PAUSE_S * rate as f32) as usize;
    let mut at = 0;
    pieces
        .iter()
        .enumerate()
        .map(|(i, piece)| {
            if i > 0 {
                at += pause;
            }
            let start = at;
            at += piece.samples.len();
            start
        })
        .collect()
}

/// Appends one sentence's audio, faded at both ends and, after another sentence, behind a pause.
pub(super) fn append_sentence(
    out: &mut Vec<f32>,
    sentence: &[f32],
    rate: u32,
    after_another: bool,
) {
    if after_another {
        out.resize(out.len() + (SENTENCE_PAUSE_S * rate as f32) as usize, 0.0);
    }
    let start = out.len();
    out.extend_from_slice(sentence);
    fade_edges(&mut out[start..], rate);
}

/// Linear fade-in and fade-out of a few milliseconds: sentence audio then starts and ends at
/// zero, so joining it to silence or to the next sentence never makes a step.
fn fade_edges(samples: &mut [f32], rate: u32) {
    let n = ((EDGE_FADE_S * rate as f32) as usize).min(samples.len() / 2);
    let len = samples.len();
    for i in 0..n {
        let gain = i as f32 / n as f32;
        samples[i] *= gain;
        samples[len - 1 - i] *= gain;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joined_sentences_have_pauses_and_start_and_end_at_zero() {
        let piece = |n| Pcm::new(vec![0.5; n], 1000);
        let (out, duration) = join_sentences(&[piece(100), piece(50)], 1000);
        assert_eq!(out.len(), 100 + 200 + 50);
        assert_eq!(sentence_starts(&[piece(100), piece(50)], 1000), [0, 300]);
        assert!((duration - 0.35).abs() < 1e-9);
        assert_eq!(out[0], 0.0);
        assert_eq!(out[99], 0.0);
        assert_eq!(out[300], 0.0);
        assert!(out[150] == 0.0 && out[50] == 0.5);
        let max_step = out
            .windows(2)
            .map(|w| (w[1] - w[0]).abs())
            .fold(0.0, f32::max);
        assert!(max_step <= 0.1 + 1e-6, "largest step {max_step}");
    }
}
