//! What the official code does to generated audio before returning it, reproduced exactly:
//! long pauses shortened and the edges trimmed (through pydub, so on 16-bit samples, in
//! millisecond steps), the level set (peak 0.5, or scaled to a quiet reference), then fades
//! and padding at both ends.
//!
//! pydub's arithmetic is followed to the sample, traps included: a segment's length is its
//! duration rounded (half to even) to whole milliseconds, and a slice that reaches past the
//! samples is filled with silence, so trimming can add up to 2 ms of zeros at an end. The
//! same silence rules prepare a cloning reference (`reference.rs`), with other lengths.

use super::text::{append_after_join, fade_out_before_join, join_fade, linspace};

/// The official post-processing's settings (`OmniVoiceGenerationConfig`).
#[derive(Debug, Clone, PartialEq)]
pub struct PostProcess {
    /// Shorten pauses over 500 ms and trim the edges to 100 ms (`postprocess_output`).
    pub trim_silence: bool,
    pub pad_duration: f32,
    pub fade_duration: f32,
}

impl Default for PostProcess {
    fn default() -> Self {
        Self {
            trim_silence: true,
            pad_duration: 0.1,
            fade_duration: 0.1,
        }
    }
}

/// pydub's silence threshold in the official silence removal, dBFS.
pub(super) const SILENCE_DBFS: f64 = -50.0;

impl PostProcess {
    /// `audio` as the official `_post_process_audio` returns it. `reference_rms`: the RMS of
    /// a cloning reference (a quiet one scales the output down); `None` peak-normalizes to 0.5.
    pub fn apply(&self, audio: &[f32], sample_rate: u32, reference_rms: Option<f32>) -> Vec<f32> {
        let mut audio = if self.trim_silence {
            remove_silence(audio, sample_rate, 500, 100, 100)
        } else {
            audio.to_vec()
        };
        match reference_rms {
            Some(rms) if rms < 0.1 => audio.iter_mut().for_each(|x| *x = *x * rms / 0.1),
            Some(_) => {}
            None => {
                let peak = audio.iter().fold(0f32, |m, x| m.max(x.abs()));
                if peak > 1e-6 {
                    audio.iter_mut().for_each(|x| *x = *x / peak * 0.5);
                }
            }
        }
        fade_and_pad(
            audio,
            (self.fade_duration as f64 * sample_rate as f64) as usize,
            (self.pad_duration as f64 * sample_rate as f64) as usize,
        )
    }
}

/// The official post-processing of a text's audio, done a piece at a time as it is streamed:
/// each piece is ready as soon as it is decoded, and nothing waits for the next.
///
/// The pieces are joined as the official code joins chunks ([`super::cross_fade`]: the piece
/// before fades out, 0.1 s of silence, the next fades in), and each is then processed as the
/// whole would be, with what only the whole could know replaced by what is known so far:
/// - pauses over 500 ms are shortened as in the whole; the stream's first and last edges are
///   trimmed to 100 ms, and the edges at a join keep up to 500 ms, as a pause there would;
/// - the level is the first piece's (peak 0.5), so that the voice keeps its loudness; a later
///   piece that would peak above 0.5 at it is brought down to 0.5 (the whole's ceiling). A
///   quiet reference scales every piece alike, as it does the whole;
/// - the fades and the padding go at the stream's two ends.
///
/// One piece alone is exactly [`PostProcess::apply`].
#[derive(Debug, Clone)]
pub struct Streamed {
    post: PostProcess,
    rate: u32,
    reference_rms: Option<f32>,
    /// The first piece's peak, which sets the level of the rest.
    first_peak: Option<f32>,
}

impl Streamed {
    pub fn new(post: PostProcess, rate: u32, reference_rms: Option<f32>) -> Self {
        Self {
            post,
            rate,
            reference_rms,
            first_peak: None,
        }
    }

    /// The next piece of the stream from the codec's audio of it, `first` and `last` saying
    /// where it lies.
    pub fn piece(&mut self, raw: &[f32], first: bool, last: bool) -> Vec<f32> {
        // The joins, as `cross_fade` makes them.
        let join = join_fade(self.rate);
        let mut audio = Vec::with_capacity(raw.len() + join);
        match first {
            true => audio.extend_from_slice(raw),
            false => append_after_join(&mut audio, raw, join),
        }
        if !last {
            fade_out_before_join(&mut audio, join);
        }
        if self.post.trim_silence {
            let lead = if first { 100 } else { 500 };
            let trail = if last { 100 } else { 500 };
            audio = remove_silence(&audio, self.rate, 500, lead, trail);
        }
        match self.reference_rms {
            Some(rms) if rms < 0.1 => audio.iter_mut().for_each(|x| *x = *x * rms / 0.1),
            Some(_) => {}
            None => {
                let peak = audio.iter().fold(0f32, |m, x| m.max(x.abs()));
                let level = *self.first_peak.get_or_insert(peak);
                let peak = level.max(peak);
                if peak > 1e-6 {
                    audio.iter_mut().for_each(|x| *x = *x / peak * 0.5);
                }
            }
        }
        let fade = (self.post.fade_duration as f64 * self.rate as f64) as usize;
        let pad = (self.post.pad_duration as f64 * self.rate as f64) as usize;
        if first && last {
            return fade_and_pad(audio, fade, pad);
        }
        // The fades and the padding at the stream's ends only.
        fade_ends(&mut audio, fade, first, last);
        let mut out = vec![0f32; if first { pad } else { 0 }];
        out.extend_from_slice(&audio);
        if last {
            out.resize(out.len() + pad, 0.0);
        }
        out
    }
}

/// The official `remove_silence(audio, rate, mid_sil, lead_sil, trail_sil)`: pauses over
/// `mid` ms cut to `mid` ms on each side of the sound (none cut when `mid` is 0), then the
/// edges trimmed to `lead` and `trail` ms of silence. Pieces are joined as they are, which is
/// pydub's join at 11025 samples/s and above (below, pydub would resample them).
pub(super) fn remove_silence(
    audio: &[f32],
    rate: u32,
    mid: i64,
    lead: i64,
    trail: i64,
) -> Vec<f32> {
    let mut wave = Segment::from_f32(audio, rate);
    if mid > 0 {
        let mut joined = Segment {
            samples: Vec::new(),
            rate,
        };
        for piece in split_on_silence(&wave, mid, mid, 10) {
            joined.samples.extend_from_slice(&piece.samples);
        }
        wave = joined;
    }
    remove_silence_edges(&wave, lead, trail).to_f32()
}

/// A pydub `AudioSegment`: 16-bit mono samples, addressed in milliseconds.
#[derive(Debug, Clone)]
pub(super) struct Segment {
    samples: Vec<i16>,
    rate: u32,
}

impl Segment {
    /// numpy's `(audio · 32768).clip(−32768, 32767).astype(int16)`: truncated toward zero.
    pub(super) fn from_f32(audio: &[f32], rate: u32) -> Self {
        let samples = audio
            .iter()
            .map(|&x| (x * 32768.0).clamp(-32768.0, 32767.0) as i16)
            .collect();
        Self { samples, rate }
    }

    /// The official `audiosegment_to_numpy`: each sample over 32768.
    pub(super) fn to_f32(&self) -> Vec<f32> {
        self.samples
            .iter()
            .map(|&s| f32::from(s) / 32768.0)
            .collect()
    }

    /// Its duration in whole milliseconds, rounded half to even as Python's `round`.
    pub(super) fn len_ms(&self) -> i64 {
        (1000.0 * (self.samples.len() as f64 / self.rate as f64)).round_ties_even() as i64
    }

    /// The sample at `ms` milliseconds: `int(ms · rate / 1000)`.
    fn frame(&self, ms: i64) -> i64 {
        (ms as f64 * (self.rate as f64 / 1000.0)) as i64
    }

    /// `segment[start:end]` in milliseconds, clamped to its length; samples missing at the
    /// end (its length was rounded up) are filled with silence, as pydub fills them.
    pub(super) fn slice(&self, start: i64, end: i64) -> Segment {
        let len = self.len_ms();
        let (start, end) = (start.min(len), end.min(len));
        let (from, to) = (self.frame(start), self.frame(end));
        let n = self.samples.len() as i64;
        let (a, b) = (from.clamp(0, n), to.clamp(0, n));
        let mut samples = if a < b {
            self.samples[a as usize..b as usize].to_vec()
        } else {
            Vec::new()
        };
        let missing = (to - from) - samples.len() as i64;
        if missing > 0 && !samples.is_empty() {
            samples.resize(samples.len() + missing as usize, 0);
        }
        Segment {
            samples,
            rate: self.rate,
        }
    }

    /// `audioop.rms`: the root mean square, truncated to an integer.
    fn rms(&self) -> u32 {
        if self.samples.is_empty() {
            return 0;
        }
        let sum: f64 = self
            .samples
            .iter()
            .map(|&s| f64::from(s) * f64::from(s))
            .sum();
        (sum / self.samples.len() as f64).sqrt() as u32
    }

    fn dbfs(&self) -> f64 {
        match self.rms() {
            0 => f64::NEG_INFINITY,
            rms => 20.0 * (rms as f64 / 32768.0).log10(),
        }
    }

    fn reversed(&self) -> Segment {
        Segment {
            samples: self.samples.iter().rev().copied().collect(),
            rate: self.rate,
        }
    }
}

/// pydub's `detect_silence`: [start, end] ms ranges at least `min_len` long whose windows are
/// all at or under `threshold_dbfs`.
fn detect_silence(seg: &Segment, min_len: i64, threshold_dbfs: f64, step: i64) -> Vec<[i64; 2]> {
    let len = seg.len_ms();
    if len < min_len {
        return Vec::new();
    }
    let threshold = 10f64.powf(threshold_dbfs / 20.0) * 32768.0;
    let last = len - min_len;
    let mut starts: Vec<i64> = (0..=last).step_by(step as usize).collect();
    if last % step != 0 {
        starts.push(last);
    }
    let silent: Vec<i64> = starts
        .into_iter()
        .filter(|&i| f64::from(seg.slice(i, i + min_len).rms()) <= threshold)
        .collect();
    let Some((&first, rest)) = silent.split_first() else {
        return Vec::new();
    };
    let mut ranges = Vec::new();
    let (mut previous, mut range_start) = (first, first);
    for &i in rest {
        let continuous = i == previous + step;
        let gap = i > previous + min_len;
        if !continuous && gap {
            ranges.push([range_start, previous + min_len]);
            range_start = i;
        }
        previous = i;
    }
    ranges.push([range_start, previous + min_len]);
    ranges
}

/// pydub's `detect_nonsilent`: [start, end] ms ranges between silences of `min_len` ms.
pub(super) fn detect_nonsilent(
    seg: &Segment,
    min_len: i64,
    threshold_dbfs: f64,
    step: i64,
) -> Vec<[i64; 2]> {
    let silent = detect_silence(seg, min_len, threshold_dbfs, step);
    let len = seg.len_ms();
    if silent.is_empty() {
        return vec![[0, len]];
    }
    if silent[0] == [0, len] {
        return Vec::new();
    }
    let mut ranges = Vec::new();
    let mut previous_end = 0;
    for &[start, end] in &silent {
        ranges.push([previous_end, start]);
        previous_end = end;
    }
    if silent.last().is_some_and(|r| r[1] != len) {
        ranges.push([previous_end, len]);
    }
    if ranges.first() == Some(&[0, 0]) {
        ranges.remove(0);
    }
    ranges
}

/// pydub's `split_on_silence`, keeping `keep` ms of silence around each piece (split evenly
/// where two pieces' margins overlap).
fn split_on_silence(seg: &Segment, min_len: i64, keep: i64, step: i64) -> Vec<Segment> {
    let mut ranges: Vec<[i64; 2]> = detect_nonsilent(seg, min_len, SILENCE_DBFS, step)
        .into_iter()
        .map(|[s, e]| [s - keep, e + keep])
        .collect();
    for i in 1..ranges.len() {
        let (last_end, next_start) = (ranges[i - 1][1], ranges[i][0]);
        if next_start < last_end {
            let middle = (last_end + next_start).div_euclid(2);
            ranges[i - 1][1] = middle;
            ranges[i][0] = middle;
        }
    }
    let len = seg.len_ms();
    ranges
        .into_iter()
        .map(|[s, e]| seg.slice(s.max(0), e.min(len)))
        .collect()
}

/// pydub's `detect_leading_silence` in 10 ms chunks.
fn leading_silence(seg: &Segment) -> i64 {
    let len = seg.len_ms();
    let mut trim = 0;
    while seg.slice(trim, trim + 10).dbfs() < SILENCE_DBFS && trim < len {
        trim += 10;
    }
    trim.min(len)
}

/// The official `remove_silence_edges`: edges trimmed to `lead` and `trail` ms of silence.
fn remove_silence_edges(seg: &Segment, lead: i64, trail: i64) -> Segment {
    let start = (leading_silence(seg) - lead).max(0);
    let seg = seg.slice(start, seg.len_ms());
    let reversed = seg.reversed();
    let start = (leading_silence(&reversed) - trail).max(0);
    reversed.slice(start, reversed.len_ms()).reversed()
}

/// The official `fade_and_pad_audio`: linear fades of up to `fade` samples, then `pad` zeros
/// on each side.
fn fade_and_pad(mut audio: Vec<f32>, fade: usize, pad: usize) -> Vec<f32> {
    if audio.is_empty() {
        return audio;
    }
    fade_ends(&mut audio, fade, true, true);
    let mut out = vec![0f32; pad];
    out.extend_from_slice(&audio);
    out.resize(out.len() + pad, 0.0);
    out
}

/// Linear fades (numpy's `linspace` in `f64`, then `f32`) of up to `fade` samples and at most
/// half the audio, in at the `start` and out at the `end`.
fn fade_ends(audio: &mut [f32], fade: usize, start: bool, end: bool) {
    let k = fade.min(audio.len() / 2);
    let n = audio.len();
    if start {
        for (x, w) in audio[..k].iter_mut().zip(linspace(0.0, 1.0, k)) {
            *x *= w;
        }
    }
    if end {
        for (x, w) in audio[n - k..].iter_mut().zip(linspace(1.0, 0.0, k)) {
            *x *= w;
        }
    }
}
