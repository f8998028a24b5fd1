//! Sentence audio joined into one utterance: short pauses between sentences, and faded edges so
//! joins never click. Whole bodies ([`join_sentences`]) and streams join through the same
//! [`Joiner`], whole sentences or pieces of them, so both sound identical.

use crate::engine::Pcm;

use std::time::Duration;

/// Silence between sentences, as natural speech pauses.
pub(super) const SENTENCE_PAUSE: Duration = Duration::from_millis(200);
/// Fade at both ends of every sentence so joins never click.
const EDGE_FADE_S: f32 = 0.005;

/// The silences of a body: before each sentence (the first's opens the body), and after the
/// last.
#[derive(Debug, Clone, PartialEq, Default)]
pub(super) struct Pauses {
    pub before: Vec<Duration>,
    pub after: Duration,
}

impl Pauses {
    /// The silence before sentence `i`: as stated, or else the usual (none before the first,
    /// a sentence pause before each other).
    fn before(&self, i: usize) -> Duration {
        match self.before.get(i) {
            Some(pause) => *pause,
            None if i == 0 => Duration::ZERO,
            None => SENTENCE_PAUSE,
        }
    }
}

/// Joins sentence audio behind its pauses; returns the samples and their duration in seconds.
pub(super) fn join_sentences(pieces: &[Pcm], pauses: &Pauses, rate: u32) -> (Vec<f32>, f64) {
    let silence: usize = (0..pieces.len())
        .map(|i| samples(pauses.before(i), rate))
        .sum::<usize>()
        + samples(pauses.after, rate);
    let mut out =
        Vec::with_capacity(pieces.iter().map(|p| p.samples.len()).sum::<usize>() + silence);
    let mut joiner = Joiner::with_pauses(rate, pauses.clone());
    for piece in pieces {
        joiner.push(&piece.samples, &mut out);
        joiner.end_sentence(&mut out);
    }
    joiner.finish(&mut out);
    let duration = out.len() as f64 / rate as f64;
    (out, duration)
}

/// Where each sentence starts in the audio [`join_sentences`] makes of them, in samples, and
/// where that audio ends.
pub(super) fn sentence_starts(pieces: &[Pcm], pauses: &Pauses, rate: u32) -> (Vec<usize>, usize) {
    let mut at = 0;
    let starts = pieces
        .iter()
        .enumerate()
        .map(|(i, piece)| {
            at += samples(pauses.before(i), rate);
            let start = at;
            at += piece.samples.len();
            start
        })
        .collect();
    (starts, at + samples(pauses.after, rate))
}

fn samples(pause: Duration, rate: u32) -> usize {
    (pause.as_secs_f64() * f64::from(rate)).round() as usize
}

/// Joins sentences that arrive in pieces, handing out every sample as soon as its fade is
/// known: the fade-in once a sentence has more than both fades' worth, the fade-out when it
/// ends (the last fade's worth is held back until then).
pub(super) struct Joiner {
    rate: u32,
    fade: usize,
    /// Sentences started so far.
    sentences: usize,
    /// The current sentence's samples not yet handed out.
    held: Vec<f32>,
    /// Whether a sentence is open (started and not ended).
    open: bool,
    /// Whether the current sentence's start is handed out (faded in) already.
    started: bool,
    /// Samples handed out so far, pauses included.
    position: usize,
    /// The silence before each sentence and after the last.
    pauses: Pauses,
}

impl Joiner {
    /// A joiner with the usual pauses: none before the first sentence, a sentence pause
    /// before each other, none after the last.
    pub fn new(rate: u32) -> Self {
        Self::with_pauses(rate, Pauses::default())
    }

    /// A joiner that puts `pauses` before the sentences and after the last (at
    /// [`finish`](Self::finish)).
    pub fn with_pauses(rate: u32, pauses: Pauses) -> Self {
        Self {
            rate,
            fade: (EDGE_FADE_S * rate as f32) as usize,
            sentences: 0,
            held: Vec::new(),
            open: false,
            started: false,
            position: 0,
            pauses,
        }
    }

    /// Sets the silence before sentence `i` (counted from the first this joiner joined), for
    /// sentences whose pauses are known only as they come.
    pub fn set_pause_before(&mut self, i: usize, pause: Duration) {
        let usual = |at: usize| self.pauses.before(at);
        let filled: Vec<Duration> = (self.pauses.before.len()..i).map(usual).collect();
        self.pauses.before.extend(filled);
        match self.pauses.before.get_mut(i) {
            Some(slot) => *slot = pause,
            None => self.pauses.before.push(pause),
        }
    }

    /// Sets the silence after the last sentence.
    pub fn set_pause_after(&mut self, pause: Duration) {
        self.pauses.after = pause;
    }

    /// Every sentence has ended: the silence after the last.
    pub fn finish(&mut self, out: &mut Vec<f32>) {
        self.silence(self.pauses.after, out);
    }

    /// Samples handed out so far, pauses included: where the next sample will be.
    pub fn position(&self) -> usize {
        self.position
    }

    /// The next piece of the current sentence (the first piece starts a sentence): what can
    /// be handed out now, with the pause before the sentence if it is not the first. Returns
    /// the stream position where the sentence starts, when this piece started it.
    pub fn push(&mut self, piece: &[f32], out: &mut Vec<f32>) -> Option<usize> {
        let mut sentence_start = None;
        if !self.open {
            self.open = true;
            self.silence(self.pauses.before(self.sentences), out);
            self.sentences += 1;
            sentence_start = Some(self.position);
        }
        self.held.extend_from_slice(piece);
        if !self.started && self.held.len() > 2 * self.fade {
            fade_in(&mut self.held, self.fade);
            self.started = true;
        }
        if self.started {
            let ready = self.held.len() - self.fade;
            self.emit(ready, out);
        }
        sentence_start
    }

    /// The current sentence is complete: its faded end.
    pub fn end_sentence(&mut self, out: &mut Vec<f32>) {
        if self.started {
            // At least one fade's worth is held back.
            fade_out(&mut self.held, self.fade);
        } else {
            // Never longer than both fades: the fades shrink to half of it each.
            fade_edges(&mut self.held, self.rate);
        }
        let all = self.held.len();
        self.emit(all, out);
        self.started = false;
        self.open = false;
    }

    fn silence(&mut self, pause: Duration, out: &mut Vec<f32>) {
        let n = samples(pause, self.rate);
        out.resize(out.len() + n, 0.0);
        self.position += n;
    }

    fn emit(&mut self, n: usize, out: &mut Vec<f32>) {
        out.extend(self.held.drain(..n));
        self.position += n;
    }
}

/// Linear fade-in and fade-out of a few milliseconds: sentence audio then starts and ends at
/// zero, so joining it to silence or to the next sentence never makes a step.
fn fade_edges(samples: &mut [f32], rate: u32) {
    let n = ((EDGE_FADE_S * rate as f32) as usize).min(samples.len() / 2);
    fade_in(samples, n);
    fade_out(samples, n);
}

/// Gains 0, 1/n, … on the first `n` samples.
fn fade_in(samples: &mut [f32], n: usize) {
    for (i, sample) in samples.iter_mut().take(n).enumerate() {
        *sample *= i as f32 / n as f32;
    }
}

/// Gains …, 1/n, 0 on the last `n` samples.
fn fade_out(samples: &mut [f32], n: usize) {
    for (i, sample) in samples.iter_mut().rev().take(n).enumerate() {
        *sample *= i as f32 / n as f32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_set_as_sentences_come_keep_the_usual_ones_before() {
        let mut joiner = Joiner::new(1000);
        joiner.set_pause_before(2, Duration::from_secs(1));
        joiner.set_pause_before(0, Duration::from_millis(50));
        joiner.set_pause_after(Duration::from_millis(30));
        let mut out = Vec::new();
        let mut starts = Vec::new();
        for _ in 0..3 {
            starts.push(joiner.push(&[0.5; 100], &mut out).unwrap());
            joiner.end_sentence(&mut out);
        }
        joiner.finish(&mut out);
        // 50 ms, a sentence, the usual 200 ms, a sentence, the 1 s set, a sentence, 30 ms.
        assert_eq!(starts, [50, 50 + 100 + 200, 50 + 100 + 200 + 100 + 1000]);
        assert_eq!(out.len(), 50 + 3 * 100 + 200 + 1000 + 30);
    }

    #[test]
    fn sentences_joined_in_pieces_equal_sentences_joined_whole() {
        let rate = 1000; // fades of 5 samples, pauses of 200
        let sentence = |n: usize, k: f32| -> Vec<f32> {
            (0..n).map(|i| ((i as f32 * k).sin() + 1.1) * 0.4).collect()
        };
        let sentences = [sentence(100, 0.3), sentence(7, 0.7), sentence(64, 1.3)];
        let whole: Vec<Pcm> = sentences
            .iter()
            .map(|s| Pcm::new(s.clone(), rate))
            .collect();
        let pauses = Pauses::default();
        let (expected, _) = join_sentences(&whole, &pauses, rate);
        for cut in [1, 3, 8, 11, 50, 200] {
            let mut joiner = Joiner::new(rate);
            let mut out = Vec::new();
            let mut starts = Vec::new();
            for s in &sentences {
                for piece in s.chunks(cut) {
                    let before = out.len();
                    if let Some(start) = joiner.push(piece, &mut out) {
                        starts.push(start);
                    }
                    assert_eq!(joiner.position(), out.len());
                    // Everything but the held-back fade is out as soon as it can be.
                    assert!(out.len() >= before);
                }
                joiner.end_sentence(&mut out);
            }
            assert_eq!(out, expected, "pieces of {cut}");
            assert_eq!(
                starts,
                sentence_starts(&whole, &pauses, rate).0,
                "pieces of {cut}"
            );
        }
    }

    #[test]
    fn joined_sentences_have_pauses_and_start_and_end_at_zero() {
        let piece = |n| Pcm::new(vec![0.5; n], 1000);
        let pieces = [piece(100), piece(50)];
        let pauses = Pauses::default();
        let (out, duration) = join_sentences(&pieces, &pauses, 1000);
        assert_eq!(out.len(), 100 + 200 + 50);
        assert_eq!(sentence_starts(&pieces, &pauses, 1000), (vec![0, 300], 350));
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

    #[test]
    fn stated_pauses_open_close_and_separate_the_body() {
        let piece = |n| Pcm::new(vec![0.5; n], 1000);
        let pieces = [piece(100), piece(50), piece(10)];
        let ms = Duration::from_millis;
        let pauses = Pauses {
            before: vec![ms(30), ms(0), ms(1500)],
            after: ms(250),
        };
        let (out, duration) = join_sentences(&pieces, &pauses, 1000);
        assert_eq!(out.len(), 30 + 100 + 50 + 1500 + 10 + 250);
        assert!((duration - 1.94).abs() < 1e-9);
        let (starts, end) = sentence_starts(&pieces, &pauses, 1000);
        assert_eq!((starts, end), (vec![30, 130, 1680], 1940));
        assert!(out[..30].iter().all(|&s| s == 0.0));
        assert!(out[180..1680].iter().all(|&s| s == 0.0));
        assert_eq!(out[60], 0.5);
        // Streamed through a joiner told the same pauses: the same body.
        let mut joiner = Joiner::with_pauses(1000, pauses);
        let mut streamed = Vec::new();
        for piece in &pieces {
            for part in piece.samples.chunks(7) {
                joiner.push(part, &mut streamed);
            }
            joiner.end_sentence(&mut streamed);
        }
        joiner.finish(&mut streamed);
        assert_eq!(streamed, out);
    }
}
