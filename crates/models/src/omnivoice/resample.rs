//! torchaudio's `functional.resample` with its defaults (Hann-windowed sinc, 6 zero crossings,
//! roll-off 0.99), for one channel: the codec's encoder hears its semantic model's audio at
//! 16 kHz through exactly this filter, so a reference clip must be resampled the same way to
//! give the same codes.
//!
//! With both rates divided by their greatest common divisor, `orig` input samples become `new`
//! output samples, and output `j` of each such block is one fixed filter applied to the input
//! around it: `new` filters of `2·width + orig` taps, slid `orig` samples per block. That is
//! O(output length × taps), computed directly.

use std::f64::consts::PI;

const ZERO_CROSSINGS: f64 = 6.0;
const ROLLOFF: f64 = 0.99;

/// torchaudio.functional.resample with its defaults (sinc_interp_hann, lowpass_filter_width 6,
/// rolloff 0.99), one channel. Equal rates give the input back; a rate of 0 has no samples to
/// give, and gives an empty wave.
pub fn resample(wave: &[f32], from_hz: u32, to_hz: u32) -> Vec<f32> {
    if from_hz == to_hz {
        return wave.to_vec();
    }
    if from_hz == 0 || to_hz == 0 {
        return Vec::new();
    }
    let divisor = gcd(from_hz, to_hz);
    let filters = SincFilters::new((from_hz / divisor) as usize, (to_hz / divisor) as usize);
    filters.apply(wave)
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The `new` filters of one block, each `2·width + orig` taps.
struct SincFilters {
    orig: usize,
    new: usize,
    width: usize,
    /// [new][2·width + orig]
    taps: Vec<Vec<f32>>,
}

impl SincFilters {
    /// torchaudio's `_get_sinc_resample_kernel`, term for term in f32: torchaudio computes the
    /// filters in the waveform's dtype, and their rounding moves its output by up to 2e-5 from
    /// an exact filter's (11025 → 16000, whose filters are longest), far beyond the 1e-6 this
    /// port is held to.
    fn new(orig: usize, new: usize) -> Self {
        // Below both Nyquist frequencies, a little under; in f64 as Python computes it, then
        // f32 as torch multiplies a float32 tensor by it.
        let cutoff = orig.min(new) as f64 * ROLLOFF;
        let width = (ZERO_CROSSINGS * orig as f64 / cutoff).ceil() as usize;
        let scale = (cutoff / orig as f64) as f32;
        let (cutoff, crossings, pi) = (cutoff as f32, ZERO_CROSSINGS as f32, PI as f32);
        let len = 2 * width + orig;
        let taps = (0..new)
            .map(|j| {
                let phase = -(j as f32) / new as f32;
                (0..len)
                    .map(|m| {
                        let position = (m as f32 - width as f32) / orig as f32;
                        let t = ((phase + position) * cutoff).clamp(-crossings, crossings);
                        let window = (t * pi / crossings / 2.0).cos();
                        let window = window * window;
                        let t = t * pi;
                        let sinc = if t == 0.0 { 1.0 } else { t.sin() / t };
                        sinc * (window * scale)
                    })
                    .collect()
            })
            .collect();
        Self {
            orig,
            new,
            width,
            taps,
        }
    }

    /// The input padded with `width` zeros before and `width + orig` after, then block `k`'s
    /// output `j` is filter `j` against the padded input from `k·orig` on; torchaudio keeps the
    /// first ⌈new · len / orig⌉ outputs (that ratio rounded to f32 before the ceiling, as torch
    /// makes it a float32 tensor).
    fn apply(&self, wave: &[f32]) -> Vec<f32> {
        let (orig, new, width) = (self.orig, self.new, self.width);
        let blocks = wave.len() / orig + 1;
        let wanted = ((new as f64 * wave.len() as f64 / orig as f64) as f32).ceil() as usize;
        let wanted = wanted.min(blocks * new);
        let mut padded = vec![0f32; width + wave.len() + width + orig];
        padded[width..width + wave.len()].copy_from_slice(wave);
        let mut out = Vec::with_capacity(wanted);
        'blocks: for block in 0..blocks {
            let window = &padded[block * orig..];
            for filter in &self.taps {
                if out.len() == wanted {
                    break 'blocks;
                }
                let sum: f64 = filter
                    .iter()
                    .zip(window)
                    .map(|(&a, &b)| f64::from(a) * f64::from(b))
                    .sum();
                out.push(sum as f32);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_follow_the_ratio_rounded_up() {
        assert_eq!(resample(&[0.5; 24000], 24000, 16000).len(), 16000);
        assert_eq!(resample(&[0.5; 11025], 11025, 16000).len(), 16000);
        assert_eq!(resample(&[0.5; 7], 44100, 24000).len(), 4);
        assert_eq!(resample(&[0.5; 1], 8000, 24000).len(), 3);
        assert!(resample(&[], 8000, 24000).is_empty());
        assert!(resample(&[0.5; 3], 0, 24000).is_empty());
        assert_eq!(resample(&[0.25, 0.5], 16000, 16000), [0.25, 0.5]);
    }

    #[test]
    fn a_constant_stays_constant_away_from_the_edges() {
        // The filters sum to ≈ 1 at every phase (the sinc's DC gain, less the roll-off's
        // slight loss in the window's tails).
        let out = resample(&[1.0; 4410], 44100, 24000);
        for &y in &out[100..out.len() - 100] {
            assert!((y - 1.0).abs() < 1e-2, "{y}");
        }
    }
}
