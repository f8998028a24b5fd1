//! How far one waveform is from another: the measures behind the reduced-precision quality
//! gates (`tests/vits_precision.rs`, `tests/kokoro_precision.rs`) and the `vits` bench's
//! quality columns. Shared by path, so it is not a test target of its own.
#![allow(dead_code)]

use realfft::RealFftPlanner;

/// `10·log10(Σ reference² / Σ (signal − reference)²)`.
pub fn snr_db(reference: &[f32], signal: &[f32]) -> f64 {
    let power: f64 = reference.iter().map(|&v| (v as f64).powi(2)).sum();
    let noise: f64 = reference
        .iter()
        .zip(signal)
        .map(|(&r, &s)| (s as f64 - r as f64).powi(2))
        .sum();
    10.0 * (power / noise.max(1e-30)).log10()
}

/// The default voice's sample rate, which the mel bands assume.
pub const SAMPLE_RATE: f64 = 22050.0;
const N_FFT: usize = 1024;
const HOP: usize = 256;
const MELS: usize = 80;
/// Levels more than this far below the loudest mel bin of the reference count as this far:
/// near-silent bins would otherwise dominate a log distance with differences nobody hears.
const FLOOR_DB: f64 = 80.0;

/// Power mel spectrogram in dB: Hann-windowed frames of `N_FFT` every `HOP` samples, 80
/// triangular HTK mel bands from 0 to 8 kHz.
fn log_mel(audio: &[f32], sample_rate: f64) -> Vec<[f64; MELS]> {
    let mel = |hz: f64| 2595.0 * (1.0 + hz / 700.0).log10();
    let hz = |mel: f64| 700.0 * (10f64.powf(mel / 2595.0) - 1.0);
    let edges: Vec<f64> = (0..MELS + 2)
        .map(|i| hz(mel(8000.0) * i as f64 / (MELS + 1) as f64))
        .collect();
    let bins = N_FFT / 2 + 1;
    let bin_hz = |b: usize| b as f64 * sample_rate / N_FFT as f64;
    let weights: Vec<Vec<f64>> = (0..MELS)
        .map(|m| {
            let (lo, mid, hi) = (edges[m], edges[m + 1], edges[m + 2]);
            (0..bins)
                .map(|b| {
                    let f = bin_hz(b);
                    ((f - lo) / (mid - lo)).min((hi - f) / (hi - mid)).max(0.0)
                })
                .collect()
        })
        .collect();
    let window: Vec<f32> = (0..N_FFT)
        .map(|i| (0.5 - 0.5 * (2.0 * std::f64::consts::PI * i as f64 / N_FFT as f64).cos()) as f32)
        .collect();
    let fft = RealFftPlanner::<f32>::new().plan_fft_forward(N_FFT);
    let mut frame = fft.make_input_vec();
    let mut spectrum = fft.make_output_vec();
    let mut out = Vec::new();
    for start in (0..audio.len().saturating_sub(N_FFT) + 1).step_by(HOP) {
        for (i, v) in frame.iter_mut().enumerate() {
            *v = audio.get(start + i).copied().unwrap_or(0.0) * window[i];
        }
        fft.process(&mut frame, &mut spectrum).unwrap();
        let power: Vec<f64> = spectrum.iter().map(|c| c.norm_sqr() as f64).collect();
        let mut bands = [0f64; MELS];
        for (band, w) in bands.iter_mut().zip(&weights) {
            let p: f64 = w.iter().zip(&power).map(|(w, p)| w * p).sum();
            *band = 10.0 * p.max(1e-20).log10();
        }
        out.push(bands);
    }
    out
}

/// Mean over frames of the RMS difference (dB) between the two log-mel spectra, both floored
/// at [`FLOOR_DB`] below the reference's loudest bin.
pub fn log_mel_distance_db(reference: &[f32], signal: &[f32]) -> f64 {
    log_mel_distance_db_at(SAMPLE_RATE, reference, signal)
}

/// [`log_mel_distance_db`] for signals at `sample_rate` (Kokoro's 24 kHz).
pub fn log_mel_distance_db_at(sample_rate: f64, reference: &[f32], signal: &[f32]) -> f64 {
    let (a, b) = (
        log_mel(reference, sample_rate),
        log_mel(signal, sample_rate),
    );
    let top = a.iter().flatten().copied().fold(f64::MIN, f64::max);
    let floor = top - FLOOR_DB;
    let frames = a.len().min(b.len());
    let total: f64 = a
        .iter()
        .zip(&b)
        .map(|(fa, fb)| {
            let sq: f64 = fa
                .iter()
                .zip(fb)
                .map(|(&x, &y)| (x.max(floor) - y.max(floor)).powi(2))
                .sum();
            (sq / MELS as f64).sqrt()
        })
        .sum();
    total / frames as f64
}

/// The worst SNR and log-mel distance over a set of comparisons, for the quality gates.
pub struct Worst {
    snr: f64,
    mel: f64,
}

impl Worst {
    pub fn new() -> Self {
        Self {
            snr: f64::INFINITY,
            mel: 0.0,
        }
    }

    /// Measures `signal` against `reference` (both at `sample_rate`), prints both measures
    /// under `label` and keeps the worse of each.
    pub fn add(&mut self, label: &str, sample_rate: f64, reference: &[f32], signal: &[f32]) {
        let snr = snr_db(reference, signal);
        let mel = log_mel_distance_db_at(sample_rate, reference, signal);
        eprintln!(
            "{label}: {:.2} s, SNR {snr:.1} dB, log-mel distance {mel:.3} dB",
            reference.len() as f64 / sample_rate
        );
        self.snr = self.snr.min(snr);
        self.mel = self.mel.max(mel);
    }

    /// Fails unless the worst SNR is at least `min_snr_db` and the worst log-mel distance at
    /// most `max_log_mel_db`.
    pub fn assert_within(&self, min_snr_db: f64, max_log_mel_db: f64) {
        let (snr, mel) = (self.snr, self.mel);
        eprintln!("worst: SNR {snr:.1} dB, log-mel distance {mel:.3} dB");
        assert!(snr >= min_snr_db, "SNR {snr:.1} dB < {min_snr_db} dB");
        assert!(
            mel <= max_log_mel_db,
            "log-mel distance {mel:.3} dB > {max_log_mel_db} dB"
        );
    }
}
