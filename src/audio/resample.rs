//! Sample-rate conversion that can run on a stream.
//!
//! Voices produce audio at their own rate (22050 Hz for Piper medium voices) but some formats fix
//! the rate (`pcm` is 24 kHz by OpenAI's contract, Opus runs at 24/48 kHz). Sentences arrive one
//! at a time, and resampling each on its own would restart the filter at every sentence boundary
//! and click. [`StreamResampler`] therefore keeps rubato's FFT resampler and its overlap state
//! alive across pushes and feeds it fixed-size chunks, so the output does not depend on how the
//! input was split: streamed output is sample-for-sample the one-shot output.

use rubato::{FftFixedInOut, Resampler};

use super::AudioError;

/// Input frames per FFT chunk: about 46 ms at 22050 Hz. Larger chunks cost latency, smaller ones
/// cost throughput; this is small next to a sentence of synthesis.
const CHUNK_FRAMES: usize = 1024;

pub struct StreamResampler {
    input_rate: u32,
    output_rate: u32,
    /// `None` when the rates are equal and samples pass through untouched.
    engine: Option<FftEngine>,
    input_frames: u64,
    output_frames: u64,
}

struct FftEngine {
    resampler: FftFixedInOut<f32>,
    /// Input waiting for a full chunk.
    pending: Vec<f32>,
    /// Leading output frames still to drop: the resampler's filter delay.
    delay_left: usize,
    output_buffer: Vec<Vec<f32>>,
}

impl StreamResampler {
    pub fn new(input_rate: u32, output_rate: u32) -> Result<Self, AudioError> {
        let engine = if input_rate == output_rate {
            None
        } else {
            let resampler =
                FftFixedInOut::new(input_rate as usize, output_rate as usize, CHUNK_FRAMES, 1)
                    .map_err(|err| AudioError::Resample {
                        from: input_rate,
                        to: output_rate,
                        reason: err.to_string(),
                    })?;
            Some(FftEngine {
                delay_left: resampler.output_delay(),
                output_buffer: resampler.output_buffer_allocate(true),
                pending: Vec::with_capacity(resampler.input_frames_max()),
                resampler,
            })
        };
        Ok(StreamResampler {
            input_rate,
            output_rate,
            engine,
            input_frames: 0,
            output_frames: 0,
        })
    }

    pub fn output_rate(&self) -> u32 {
        self.output_rate
    }

    /// Resamples what it can of `samples`; the rest waits for the next push or `finish`.
    pub fn push(&mut self, samples: &[f32]) -> Result<Vec<f32>, AudioError> {
        self.input_frames += samples.len() as u64;
        let Some(engine) = self.engine.as_mut() else {
            self.output_frames += samples.len() as u64;
            return Ok(samples.to_vec());
        };
        engine.pending.extend_from_slice(samples);
        let chunk = engine.resampler.input_frames_next();
        let mut output = Vec::with_capacity(
            samples.len() * self.output_rate as usize / self.input_rate as usize + 1,
        );
        let pending = std::mem::take(&mut engine.pending);
        let mut start = 0;
        while pending.len() - start >= chunk {
            let input = &pending[start..start + chunk];
            engine.run_chunk(input, &mut output, self.input_rate, self.output_rate)?;
            start += chunk;
        }
        engine.pending = pending;
        engine.pending.drain(..start);
        self.output_frames += output.len() as u64;
        Ok(output)
    }

    /// Flushes the filter: the total output is exactly `round(input × output_rate / input_rate)`
    /// frames, aligned with the input (the filter delay is removed).
    pub fn finish(&mut self) -> Result<Vec<f32>, AudioError> {
        let Some(engine) = self.engine.as_mut() else {
            return Ok(Vec::new());
        };
        let expected = (self.input_frames as u128 * self.output_rate as u128
            + self.input_rate as u128 / 2)
            / self.input_rate as u128;
        let expected = expected as u64;
        let chunk = engine.resampler.input_frames_next();
        let mut output = Vec::new();
        while self.output_frames + (output.len() as u64) < expected {
            let mut input = std::mem::take(&mut engine.pending);
            input.resize(chunk, 0.0);
            engine.run_chunk(&input, &mut output, self.input_rate, self.output_rate)?;
        }
        output.truncate((expected - self.output_frames) as usize);
        self.output_frames += output.len() as u64;
        Ok(output)
    }
}

impl FftEngine {
    fn run_chunk(
        &mut self,
        input: &[f32],
        output: &mut Vec<f32>,
        input_rate: u32,
        output_rate: u32,
    ) -> Result<(), AudioError> {
        let (_, written) = self
            .resampler
            .process_into_buffer(&[input], &mut self.output_buffer, None)
            .map_err(|err| AudioError::Resample {
                from: input_rate,
                to: output_rate,
                reason: err.to_string(),
            })?;
        let produced = &self.output_buffer[0][..written];
        let skip = self.delay_left.min(produced.len());
        self.delay_left -= skip;
        output.extend_from_slice(&produced[skip..]);
        Ok(())
    }
}

/// One-shot resampling; identical to pushing everything into a [`StreamResampler`] and finishing.
pub fn resample(
    samples: &[f32],
    input_rate: u32,
    output_rate: u32,
) -> Result<Vec<f32>, AudioError> {
    if input_rate == output_rate {
        return Ok(samples.to_vec());
    }
    let mut resampler = StreamResampler::new(input_rate, output_rate)?;
    let mut output = resampler.push(samples)?;
    output.extend(resampler.finish()?);
    Ok(output)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::f32::consts::TAU;

    fn sine(freq: f32, rate: u32, frames: usize) -> Vec<f32> {
        (0..frames)
            .map(|n| 0.5 * (TAU * freq * n as f32 / rate as f32).sin())
            .collect()
    }

    #[test]
    fn output_is_aligned_with_input_and_has_exact_length() {
        let freq = 440.0;
        let input = sine(freq, 22_050, 22_050);
        let output = resample(&input, 22_050, 24_000).unwrap();
        assert_eq!(output.len(), 24_000);
        // Project the output onto sin/cos at 440 Hz to measure its amplitude and phase; the
        // edges (where the tone starts and stops abruptly) are left out.
        let steady = 500..23_500;
        let (mut sin_part, mut cos_part) = (0.0f64, 0.0f64);
        for n in steady.clone() {
            let angle = (TAU * freq * n as f32 / 24_000.0) as f64;
            sin_part += output[n] as f64 * angle.sin();
            cos_part += output[n] as f64 * angle.cos();
        }
        let amplitude = 2.0 * sin_part.hypot(cos_part) / steady.len() as f64;
        let phase = cos_part.atan2(sin_part);
        let lag_samples = phase / (std::f64::consts::TAU * freq as f64 / 24_000.0);
        assert!((amplitude - 0.5).abs() < 2e-3, "amplitude {amplitude}");
        // The FFT filter is centred half an input sample off, which no whole-sample trim can
        // remove; a wrong delay compensation would be off by hundreds of samples.
        assert!(
            lag_samples.abs() < 1.0,
            "output shifted by {lag_samples} samples"
        );
        let residual = steady
            .map(|n| {
                let angle = (TAU * freq * n as f32 / 24_000.0) as f64 + phase;
                (output[n] as f64 - amplitude * angle.sin()).abs()
            })
            .fold(0.0f64, f64::max);
        assert!(residual < 2e-3, "distortion {residual}");
        // Phase is only known modulo one period; the tone must also start right away, not
        // after a stretch of filter delay.
        let onset_rms = (output[..100].iter().map(|s| s * s).sum::<f32>() / 100.0).sqrt();
        assert!(
            onset_rms > 0.3,
            "output starts late (RMS {onset_rms} in the first 100 samples)"
        );
    }

    #[test]
    fn streaming_matches_one_shot_for_any_split() {
        let input: Vec<f32> = sine(310.0, 22_050, 30_001)
            .iter()
            .zip(sine(1_250.0, 22_050, 30_001))
            .map(|(a, b)| a + 0.3 * b)
            .collect();
        let one_shot = resample(&input, 22_050, 48_000).unwrap();
        for splits in [&[1usize, 7_000, 333, 15_000][..], &[29_999], &[0, 10, 20]] {
            let mut resampler = StreamResampler::new(22_050, 48_000).unwrap();
            let mut streamed = Vec::new();
            let mut rest = &input[..];
            for &size in splits {
                let (head, tail) = rest.split_at(size.min(rest.len()));
                streamed.extend(resampler.push(head).unwrap());
                rest = tail;
            }
            streamed.extend(resampler.push(rest).unwrap());
            streamed.extend(resampler.finish().unwrap());
            assert_eq!(streamed, one_shot, "split {splits:?}");
        }
    }

    #[test]
    fn equal_rates_pass_through() {
        let input = sine(100.0, 22_050, 1_000);
        assert_eq!(resample(&input, 22_050, 22_050).unwrap(), input);
        let mut resampler = StreamResampler::new(24_000, 24_000).unwrap();
        assert_eq!(resampler.push(&input).unwrap(), input);
        assert!(resampler.finish().unwrap().is_empty());
    }

    #[test]
    fn tiny_and_empty_inputs() {
        assert!(resample(&[], 22_050, 24_000).unwrap().is_empty());
        assert_eq!(resample(&[0.1; 3], 22_050, 24_000).unwrap().len(), 3);
    }
}
