//! The StyleTTS 2 decoder: aligned text features, F0 and energy → Kokoro's 24 kHz waveform.
//!
//! StyleTTS 2 (Li et al. 2023, arXiv:2306.07691) decodes speech from the text encoder's
//! features expanded to frames (`asr`), the predicted pitch F0 and energy N (two values per
//! frame) and the decoder half of the voice vector. `Decoder` in hexgrad/kokoro's
//! `istftnet.py`: F0 and N are brought to the frame rate by stride-2 convolutions and
//! concatenated to the features; an `AdainResBlk1d` encodes them to 1024 channels; four more
//! decode them, each seeing the features (through a 1×1 convolution to 64 channels), F0 and
//! N again, the last one upsampling ×2 to 512 channels; the iSTFTNet generator
//! ([`super::generator`]) turns that, with the F0 curve itself, into samples.
//!
//! [`Decoder::load`] reads the weights under `decoder.` from [`Weights`];
//! [`Decoder::forward`] is the whole stage for one utterance.

use candle_core::{Result, Tensor};

use super::blocks::{AdainResBlk1d, Conv1d, ConvSpec, ResBlkSpec};
use super::config::DecoderConfig;
use super::generator::{strided_conv, Generator};
use super::weights::Weights;
use crate::error::ModelError;
use crate::kernels::stft::StridedConv1d;
use crate::kernels::Precision;

/// The decoder (`decoder.*`) with its generator.
#[derive(Debug, Clone)]
pub(crate) struct Decoder {
    /// F0 and N from 2 values per frame to 1: Conv1d(1, 1, 3, stride 2, padding 1).
    f0_conv: StridedConv1d,
    n_conv: StridedConv1d,
    /// 1×1 convolution of `asr` to `asr_res` channels.
    asr_res: Conv1d,
    encode: AdainResBlk1d,
    decode: Vec<AdainResBlk1d>,
    generator: Generator,
    samples_per_frame: usize,
}

impl Decoder {
    pub(crate) fn load(w: &Weights, cfg: &DecoderConfig) -> std::result::Result<Self, ModelError> {
        let block = |name: String, dim_in, dim_out, upsample| {
            let spec = ResBlkSpec {
                dim_in,
                dim_out,
                style: cfg.style_dim,
                upsample,
            };
            AdainResBlk1d::load(w, &name, spec, cfg.norm_eps, cfg.leaky_slope)
        };
        // The concatenation before each decode block: x, asr_res, F0, N.
        let concat = cfg.hidden + cfg.asr_res + 2;
        let decode = (0..cfg.decode_blocks)
            .map(|i| {
                let last = i + 1 == cfg.decode_blocks;
                let out = if last {
                    cfg.upsample_initial_channel
                } else {
                    cfg.hidden
                };
                block(format!("decoder.decode.{i}"), concat, out, last)
            })
            .collect::<std::result::Result<_, _>>()?;
        Ok(Self {
            f0_conv: strided_conv(w, "decoder.F0_conv", 2, 1)?,
            n_conv: strided_conv(w, "decoder.N_conv", 2, 1)?,
            asr_res: Conv1d::load(
                w,
                "decoder.asr_res.0",
                (cfg.dim_in, cfg.asr_res, 1),
                ConvSpec::same(1),
            )?,
            encode: block("decoder.encode".into(), cfg.dim_in + 2, cfg.hidden, false)?,
            decode,
            generator: Generator::load(w, cfg, "decoder.generator")?,
            samples_per_frame: cfg.samples_per_frame(),
        })
    }

    /// Runs the decode blocks' and the generator's convolutions in `precision` (see
    /// [`Generator::in_precision`]). The F0/N and `asr_res` convolutions stay `f32`: they
    /// are a few multiply-adds per frame.
    pub(crate) fn in_precision(&mut self, precision: Precision) {
        self.encode.in_precision(precision);
        for block in &mut self.decode {
            block.in_precision(precision);
        }
        self.generator.in_precision(precision);
    }

    /// Packs the convolutions the direct kernel runs and keeps only their packed copies
    /// ([`Generator::release_unpacked`]).
    pub(crate) fn release_unpacked(&mut self) -> Result<()> {
        self.asr_res.release_unpacked()?;
        self.encode.release_unpacked()?;
        for block in &mut self.decode {
            block.release_unpacked()?;
        }
        self.generator.release_unpacked()
    }

    /// `asr` [1, 512, F], `f0` and `n` [1, 2F] (F0 in Hz), `style` [1, 128] (the decoder half
    /// of the voice vector) → samples [600·F].
    pub(crate) fn forward(
        &self,
        asr: &Tensor,
        f0: &Tensor,
        n: &Tensor,
        style: &Tensor,
    ) -> Result<Tensor> {
        let x = self.features(asr, f0, n, style)?; // [1, 512, 2F]
        let samples = self.generator.forward(&x, style, f0)?;
        debug_assert_eq!(samples.len(), asr.dim(2)? * self.samples_per_frame);
        let len = samples.len();
        Tensor::from_vec(samples, len, asr.device())
    }

    /// Everything before the generator: → [1, 512, 2F].
    fn features(&self, asr: &Tensor, f0: &Tensor, n: &Tensor, style: &Tensor) -> Result<Tensor> {
        let (_, _, frames) = asr.dims3()?;
        let f0 = f0.reshape((1, 1, ()))?; // [1, 1, 2F]
        let n = n.reshape((1, 1, ()))?;
        if f0.dim(2)? != 2 * frames || n.dim(2)? != 2 * frames {
            candle_core::bail!(
                "decoder: {frames} frames need 2·{frames} F0 and N values, got {} and {}",
                f0.dim(2)?,
                n.dim(2)?
            );
        }
        let f0 = self.f0_conv.forward(&f0)?; // [1, 1, F]
        let n = self.n_conv.forward(&n)?; // [1, 1, F]

        let x = Tensor::cat(&[asr, &f0, &n], 1)?; // [1, 514, F]
        let mut x = self.encode.forward(&x, style)?; // [1, 1024, F]
        let asr_res = self.asr_res.forward(asr)?; // [1, 64, F]
        for block in &self.decode {
            // StyleTTS 2 stops concatenating after the upsampling block; in Kokoro that block
            // is the last, so every block sees the features again.
            let input = Tensor::cat(&[&x, &asr_res, &f0, &n], 1)?; // [1, 1090, F]
            x = block.forward(&input, style)?; // [1, 1024, F], the last [1, 512, 2F]
        }
        Ok(x)
    }
}

#[cfg(test)]
mod tests {
    //! The decoder against the oracle's cases (`scripts/kokoro_reference.py`): its output
    //! before the generator elementwise, the audio by SNR and envelope.

    use std::sync::OnceLock;

    use candle_core::{Device, Tensor};

    use super::super::generator::tests::{relative_error, snr_db, weights, Fixture};
    use super::super::{Config, Kokoro};
    use super::*;

    fn decoder() -> &'static Decoder {
        static DECODER: OnceLock<Decoder> = OnceLock::new();
        DECODER.get_or_init(|| Decoder::load(weights(), &DecoderConfig::v1_0()).unwrap())
    }

    /// A case's decoder inputs: asr [1, 512, F] (for hello, which stores the text features
    /// and durations instead, expanded here), f0 and n [1, 2F], the style's decoder half.
    fn inputs(case: &Fixture, name: &str) -> (Tensor, Tensor, Tensor, Tensor) {
        let asr = if name == "emma" {
            case.get("asr")
        } else {
            let durations = case.get("pred_dur").to_vec1::<i64>().unwrap();
            let index: Vec<u32> = durations
                .iter()
                .enumerate()
                .flat_map(|(i, &d)| std::iter::repeat_n(i as u32, d as usize))
                .collect();
            let index = Tensor::new(index.as_slice(), &Device::Cpu).unwrap();
            case.get("t_en").index_select(&index, 1).unwrap()
        };
        let style = case.get("style").narrow(0, 0, 128).unwrap();
        (
            asr.unsqueeze(0).unwrap(),
            case.get("f0").unsqueeze(0).unwrap(),
            case.get("n").unsqueeze(0).unwrap(),
            style.unsqueeze(0).unwrap(),
        )
    }

    /// Correlation of the RMS envelopes over 600-sample frames (one alignment frame each).
    fn envelope_correlation(ours: &[f32], reference: &[f32]) -> f64 {
        let rms = |x: &[f32]| -> Vec<f64> {
            x.chunks(600)
                .map(|c| {
                    (c.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>() / c.len() as f64).sqrt()
                })
                .collect()
        };
        let (a, b) = (rms(ours), rms(reference));
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let (ma, mb) = (mean(&a), mean(&b));
        let cov: f64 = a.iter().zip(&b).map(|(x, y)| (x - ma) * (y - mb)).sum();
        let var = |v: &[f64], m: f64| v.iter().map(|x| (x - m).powi(2)).sum::<f64>();
        cov / (var(&a, ma) * var(&b, mb)).sqrt()
    }

    #[test]
    fn one_frame_is_600_samples() {
        assert_eq!(DecoderConfig::v1_0().samples_per_frame(), 600);
    }

    /// F0/N convolutions, encode, the four decode blocks: the generator's input, elementwise.
    #[test]
    fn decoder_output_matches_the_oracle() {
        let case = Fixture::load("emma");
        let (asr, f0, n, style) = inputs(&case, "emma");
        let x = decoder().features(&asr, &f0, &n, &style).unwrap();
        let ours = x.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let err = relative_error(&ours, &case.values("dec_out"));
        eprintln!("emma/dec_out: {:?}, max error {err:.2e} of max", x.dims());
        assert!(err <= 1e-3, "{err:.2e}");
    }

    /// The whole decoder: the audio has the oracle's length, and matches it to the numerical
    /// floor of the sine source (onnxruntime against itself: 30.8 dB).
    #[test]
    fn decoder_audio_matches_the_oracle() {
        for name in ["emma", "hello"] {
            let case = Fixture::load(name);
            let (asr, f0, n, style) = inputs(&case, name);
            let start = std::time::Instant::now();
            let audio = decoder().forward(&asr, &f0, &n, &style).unwrap();
            let elapsed = start.elapsed().as_secs_f64();
            let ours = audio.to_vec1::<f32>().unwrap();
            let reference = case.values("audio");
            assert_eq!(ours.len(), reference.len(), "{name}");
            let snr = snr_db(&ours, &reference);
            let envelope = envelope_correlation(&ours, &reference);
            eprintln!(
                "{name}/audio: {} samples in {elapsed:.2} s, SNR {snr:.1} dB, envelope \
                 correlation {envelope:.5}",
                ours.len()
            );
            // Measured 28.4 dB (emma) and 31.8 dB (hello), envelopes 0.99999 / 0.99998.
            assert!(snr >= 25.0, "{name}: {snr:.1} dB");
            assert!(envelope >= 0.9995, "{name}: {envelope:.5}");
        }
    }

    /// The whole model from phoneme ids: the oracle's durations and audio.
    #[test]
    fn kokoro_speaks_as_the_oracle() {
        let kokoro = Kokoro::load(&Config::v1_0(), weights().clone()).unwrap();
        let case = Fixture::load("hello");
        let ids = case.get("tokens").to_vec1::<i64>().unwrap();
        let tokens: Vec<u32> = ids[1..ids.len() - 1].iter().map(|&t| t as u32).collect();
        let style = case.values("style");
        let speed = case.get("speed").to_scalar::<f32>().unwrap();
        let out = kokoro.synthesize(&tokens, &style, speed).unwrap();
        let durations: Vec<u32> = case
            .get("pred_dur")
            .to_vec1::<i64>()
            .unwrap()
            .iter()
            .map(|&d| d as u32)
            .collect();
        assert_eq!(out.durations, durations);
        let reference = case.values("audio");
        assert_eq!(out.audio.len(), reference.len());
        let snr = snr_db(&out.audio, &reference);
        eprintln!("hello end to end: SNR {snr:.1} dB");
        assert!(snr >= 25.0, "{snr:.1} dB");
    }
}
