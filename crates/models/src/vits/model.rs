//! The [`Vits`] model: its load ([`Vits::load`]) and its batched synthesis, from phoneme ids
//! to audio (text encoder → durations → prior → reverse flow → decoder). A file of its own so
//! that `mod.rs` only declares the modules and what they export, and the sub-networks, the
//! streaming path and the tests can all use the model without importing `mod.rs` back.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};

use super::config::VitsConfig;
use super::duration::DurationPredictor;
use super::flow::Flow;
use super::generator::Generator;
use super::layers::sequence_mask;
use super::text_encoder::TextEncoder;
use super::weights::{self, Weights};
use crate::error::ModelError;
use crate::kernels::Precision;
use crate::spare;

/// Longest audio one item may produce; guards against runaway durations (huge length_scale).
const MAX_SECONDS_PER_ITEM: usize = 600;

/// One utterance to synthesize.
#[derive(Debug, Clone, PartialEq)]
pub struct VitsInput {
    /// Phoneme ids (Piper's `phoneme_id_map` applied, including `^`, `_` and `$`).
    pub ids: Vec<i64>,
    /// Duration multiplier (> 1 is slower): Piper's `length_scale`, applied per phoneme. The
    /// voice's own (`VitsConfig::length_scale`) reproduces Piper.
    pub length_scale: f32,
    /// How this item is sampled.
    pub sampling: Sampling,
}

/// The knobs of one item's synthesis, apart from its ids.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampling {
    /// Divides the item's total number of frames (see [`frames_for_speed`]; 1.0 reproduces
    /// Piper exactly).
    pub speed: f32,
    /// Seeds this item's noise: the same seed gives the same audio.
    pub seed: u64,
    /// The speaker of a multi-speaker voice (`None` = 0).
    pub speaker: Option<u32>,
    /// Override of the voice's prior noise (`None` = the voice's own default).
    pub noise_scale: Option<f32>,
    /// Override of the voice's duration noise (`None` = the voice's own default).
    pub noise_w: Option<f32>,
}

impl Default for Sampling {
    fn default() -> Self {
        Self {
            speed: 1.0,
            seed: 0,
            speaker: None,
            noise_scale: None,
            noise_w: None,
        }
    }
}

/// One item's audio and the frames (of `hop_length` samples) each of its phoneme ids got;
/// they add up to the audio's length (an item with no frames at all still gets one).
#[derive(Debug, Clone, PartialEq)]
pub struct TimedAudio {
    pub samples: Vec<f32>,
    pub frames_per_id: Vec<usize>,
}

/// What the flow and the decoder start from: a batch's prior sample at frame rate.
pub(super) struct Prior {
    /// [B, C, F_max], zero past each item's frames.
    pub(super) z_p: Tensor,
    /// Each item's frame count.
    pub(super) frames: Vec<usize>,
    /// Speaker conditioning [B, gin, 1] for multi-speaker voices.
    pub(super) g: Option<Tensor>,
    /// Each item's frames per phoneme id (they add up to its frame count).
    pub(super) durations: Vec<Vec<usize>>,
}

/// A loaded VITS voice.
pub struct Vits {
    pub(super) config: VitsConfig,
    /// All parameters by state-dict name, kept for `save_safetensors`.
    weights: HashMap<String, Tensor>,
    text_encoder: TextEncoder,
    duration_predictor: DurationPredictor,
    pub(super) flow: Flow,
    pub(super) decoder: Generator,
    speaker_embedding: Option<Tensor>,
    pub(super) device: Device,
    /// What the flow's and decoder's convolutions run in.
    precision: Precision,
}

impl Vits {
    /// The voice of `weights` ([`Weights::from_onnx`], [`Weights::from_safetensors`]) as
    /// `config` ([`VitsConfig::from_weights`]) describes it, on the weights' device, its
    /// convolutions in `f32` (see [`Vits::with_precision`]).
    pub fn load(config: &VitsConfig, weights: Weights) -> Result<Self, ModelError> {
        let Weights {
            file,
            tensors,
            device,
            ..
        } = weights;
        let config = config.clone();
        let load_error = |source| ModelError::Load {
            file: file.clone(),
            source,
        };
        let vb = VarBuilder::from_tensors(tensors.clone(), DType::F32, &device);
        let text_encoder = TextEncoder::load(vb.pp("enc_p"), &config).map_err(load_error)?;
        let duration_predictor =
            DurationPredictor::load(vb.pp("dp"), &config).map_err(load_error)?;
        let flow = Flow::load(vb.pp("flow"), &config, Precision::F32).map_err(load_error)?;
        let decoder = Generator::load(vb.pp("dec"), &config, Precision::F32).map_err(load_error)?;
        let speaker_embedding = if config.gin_channels > 0 {
            Some(
                vb.get((config.num_speakers, config.gin_channels), "emb_g.weight")
                    .map_err(load_error)?,
            )
        } else {
            None
        };
        Ok(Self {
            config,
            weights: tensors,
            text_encoder,
            duration_predictor,
            flow,
            decoder,
            speaker_embedding,
            device,
            precision: Precision::F32,
        })
    }

    /// The same voice with the flow's and decoder's convolutions in `precision` — where the
    /// time goes; the text encoder and duration predictor stay `f32`. Reduced precisions are
    /// CPU kernels: on other devices the model stays `f32` (see [`Vits::precision`]). Which
    /// precision a CPU runs well is [`Precision::auto`]'s question, not this one's: a bf16
    /// model runs on any CPU, slowly where it lacks bf16 hardware.
    pub fn with_precision(self, precision: Precision) -> Result<Self, ModelError> {
        let precision = if matches!(self.device, Device::Cpu) {
            precision
        } else {
            Precision::F32
        };
        if precision == self.precision {
            return Ok(self);
        }
        let vb = VarBuilder::from_tensors(self.weights.clone(), DType::F32, &self.device);
        Ok(Self {
            flow: Flow::load(vb.pp("flow"), &self.config, precision)?,
            decoder: Generator::load(vb.pp("dec"), &self.config, precision)?,
            precision,
            ..self
        })
    }

    /// What the flow's and decoder's convolutions run in.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// Writes the voice's weights, and the structure values they do not show, to `path`
    /// (what [`Weights::from_safetensors`] reads).
    pub fn save_safetensors(&self, path: &Path) -> Result<(), ModelError> {
        let hints = weights::StructureHints {
            upsample_rates: Some(self.config.decoder.upsample_rates.clone()),
            resblock_dilations: Some(self.config.decoder.resblock_dilations.clone()),
            wavenet_dilation_rate: Some(self.config.flow.dilation_rate),
        };
        weights::save_safetensors(&self.weights, &hints, path)
    }

    pub fn config(&self) -> &VitsConfig {
        &self.config
    }

    pub fn sample_rate(&self) -> u32 {
        self.config.sample_rate
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    pub fn num_speakers(&self) -> usize {
        self.config.num_speakers
    }

    /// One batched forward pass over items of different lengths (padding + masks inside).
    /// Returns each item's audio with its EXACT sample count (hop × its own frames).
    pub fn synthesize(&self, batch: &[VitsInput]) -> Result<Vec<Vec<f32>>, ModelError> {
        Ok(self
            .synthesize_timed(batch)?
            .into_iter()
            .map(|item| item.samples)
            .collect())
    }

    /// [`synthesize`](Self::synthesize), with how long each phoneme id lasts: what word
    /// timestamps are computed from.
    pub fn synthesize_timed(&self, batch: &[VitsInput]) -> Result<Vec<TimedAudio>, ModelError> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let _computing = spare::computing();
        // The caller waits for the whole audio, so every stage may use spare cores (a
        // stream's later windows do not: they only have to stay ahead of its listener).
        let _lending = self.device.is_cpu().then(spare::lending);
        let Prior {
            z_p,
            frames,
            g,
            durations,
        } = self.prior(batch)?;
        let dev = &self.device;
        let f_max = z_p.dim(2)?;

        // 4. z = flow⁻¹(z_p), then decode; masks only matter when lengths differ.
        let y_mask = sequence_mask(&frames, f_max, dev)?;
        let z = self
            .flow
            .reverse(&z_p, &y_mask, g.as_ref())?
            .broadcast_mul(&y_mask)?;
        let decoder_masks = if frames.iter().all(|&f| f == f_max) {
            None
        } else {
            let mut masks = vec![y_mask.clone()];
            let mut scale = 1;
            for &u in &self.config.decoder.upsample_rates {
                scale *= u;
                let lens: Vec<usize> = frames.iter().map(|f| f * scale).collect();
                masks.push(sequence_mask(&lens, f_max * scale, dev)?);
            }
            Some(masks)
        };
        let audio = self
            .decoder
            .forward(&z, g.as_ref(), decoder_masks.as_deref())?;

        // 5. Each item keeps exactly hop × its own frames.
        let audio = audio.squeeze(1)?.to_vec2::<f32>()?;
        let hop = self.config.hop_length;
        Ok(audio
            .into_iter()
            .zip(&frames)
            .zip(durations)
            .map(|((mut row, &f), frames_per_id)| {
                row.truncate(f * hop);
                TimedAudio {
                    samples: row,
                    frames_per_id,
                }
            })
            .collect())
    }

    /// The parts that need the whole utterance: validates `batch` (non-empty), then text
    /// encoder → durations → the prior sampled at frame rate. Both noises come from each
    /// item's seeded generator, duration noise first, so every caller draws the same numbers.
    pub(super) fn prior(&self, batch: &[VitsInput]) -> Result<Prior, ModelError> {
        self.validate(batch)?;
        let dev = &self.device;
        let b = batch.len();
        let lengths: Vec<usize> = batch.iter().map(|item| item.ids.len()).collect();
        let t_max = *lengths.iter().max().expect("non-empty batch");
        let per_item = |f: &dyn Fn(&VitsInput) -> f32| -> candle_core::Result<Tensor> {
            Tensor::from_vec(batch.iter().map(f).collect::<Vec<f32>>(), (b, 1, 1), dev)
        };
        let length_scale = per_item(&|i| i.length_scale)?;
        let noise_scale = per_item(&|i| self.noise_scale(i))?;
        let noise_w = per_item(&|i| self.noise_w(i))?;

        // Padded ids [B, T] and text mask [B, 1, T].
        let mut ids = vec![0u32; b * t_max];
        for (row, item) in ids.chunks_mut(t_max).zip(batch) {
            for (dst, &id) in row.iter_mut().zip(&item.ids) {
                *dst = id as u32;
            }
        }
        let ids = Tensor::from_vec(ids, (b, t_max), dev)?;
        let x_mask = sequence_mask(&lengths, t_max, dev)?;
        let g = self.speaker_conditioning(batch)?; // [B, gin, 1]

        // 1. Text encoder: hidden [B, H, T], prior stats m_p, logs_p [B, C, T].
        let text = self.text_encoder.forward(&ids, &x_mask)?;

        // 2. Durations: logw = dp⁻¹(ε·noise_w | hidden); w = ⌈exp(logw)·length_scale⌉.
        let mut rngs: Vec<StdRng> = batch
            .iter()
            .map(|i| StdRng::seed_from_u64(i.sampling.seed))
            .collect();
        let duration_noise: Vec<Vec<f32>> = rngs
            .iter_mut()
            .zip(&lengths)
            .map(|(rng, &t)| gaussian(rng, 2 * t))
            .collect();
        let duration_noise = pad_rows(&duration_noise, &lengths, 2, t_max, dev)?;
        let logw = self.duration_predictor.log_durations(
            &text.hidden,
            &x_mask,
            g.as_ref(),
            &duration_noise.broadcast_mul(&noise_w)?,
        )?;
        let w = logw
            .exp()?
            .broadcast_mul(&x_mask)?
            .broadcast_mul(&length_scale)?
            .squeeze(1)?
            .to_vec2::<f32>()?;
        let durations: Vec<Vec<usize>> = w
            .iter()
            .zip(batch)
            .zip(&lengths)
            .map(|((row, item), &t)| frames_for_speed(&row[..t], item.sampling.speed))
            .collect();
        let frames: Vec<usize> = durations
            .iter()
            .map(|d| d.iter().sum::<usize>().max(1))
            .collect();
        let max_frames =
            MAX_SECONDS_PER_ITEM * self.config.sample_rate as usize / self.config.hop_length;
        if let Some(n) = frames.iter().position(|&f| f > max_frames) {
            return Err(ModelError::Input(format!(
                "item {n}: {} frames of audio exceed the {MAX_SECONDS_PER_ITEM} s limit",
                frames[n]
            )));
        }
        let f_max = *frames.iter().max().expect("non-empty batch");

        // 3. Expand the prior to frames: z_p = m_p[a(f)] + ε·exp(logs_p[a(f)])·noise_scale.
        let (m_p, logs_p) = self.expand_to_frames(&text.m_p, &text.logs_p, &durations, f_max)?;
        let c = self.config.inter_channels;
        let prior_noise: Vec<Vec<f32>> = rngs
            .iter_mut()
            .zip(&frames)
            .map(|(rng, &f)| gaussian(rng, c * f))
            .collect();
        let prior_noise = pad_rows(&prior_noise, &frames, c, f_max, dev)?;
        let z_p = (m_p
            + prior_noise
                .mul(&logs_p.exp()?)?
                .broadcast_mul(&noise_scale)?)?;
        Ok(Prior {
            z_p,
            frames,
            g,
            durations,
        })
    }

    /// The item's prior noise: its override, else the voice's default.
    fn noise_scale(&self, item: &VitsInput) -> f32 {
        item.sampling.noise_scale.unwrap_or(self.config.noise_scale)
    }

    /// The item's duration noise: its override, else the voice's default.
    fn noise_w(&self, item: &VitsInput) -> f32 {
        item.sampling.noise_w.unwrap_or(self.config.noise_w)
    }

    fn validate(&self, batch: &[VitsInput]) -> Result<(), ModelError> {
        for (n, item) in batch.iter().enumerate() {
            if item.ids.is_empty() {
                return Err(ModelError::Input(format!("item {n}: no phoneme ids")));
            }
            if let Some(bad) = item
                .ids
                .iter()
                .find(|&&id| id < 0 || id as usize >= self.config.n_vocab)
            {
                return Err(ModelError::Input(format!(
                    "item {n}: phoneme id {bad} outside 0..{}",
                    self.config.n_vocab
                )));
            }
            if !(item.sampling.speed.is_finite() && item.sampling.speed > 0.0) {
                return Err(ModelError::Input(format!(
                    "item {n}: speed must be positive, got {}",
                    item.sampling.speed
                )));
            }
            if !(item.length_scale.is_finite() && item.length_scale > 0.0) {
                return Err(ModelError::Input(format!(
                    "item {n}: length_scale must be positive, got {}",
                    item.length_scale
                )));
            }
            if !self.noise_scale(item).is_finite() || !self.noise_w(item).is_finite() {
                return Err(ModelError::Input(format!(
                    "item {n}: noise scales must be finite"
                )));
            }
            if let Some(s) = item.sampling.speaker {
                if s as usize >= self.config.num_speakers {
                    return Err(ModelError::Input(format!(
                        "item {n}: speaker {s} but the voice has {} speaker(s)",
                        self.config.num_speakers
                    )));
                }
            }
        }
        Ok(())
    }

    /// g = emb_g(speaker) as [B, gin, 1] for multi-speaker voices.
    fn speaker_conditioning(&self, batch: &[VitsInput]) -> candle_core::Result<Option<Tensor>> {
        let Some(table) = &self.speaker_embedding else {
            return Ok(None);
        };
        let ids: Vec<u32> = batch
            .iter()
            .map(|i| i.sampling.speaker.unwrap_or(0))
            .collect();
        let ids = Tensor::new(ids, &self.device)?;
        Ok(Some(table.index_select(&ids, 0)?.unsqueeze(2)?))
    }

    /// Repeats each token's prior stats for its duration (the monotonic alignment path):
    /// [B, C, T] → [B, C, F_max], zero past each item's frames.
    fn expand_to_frames(
        &self,
        m_p: &Tensor,
        logs_p: &Tensor,
        durations: &[Vec<usize>],
        f_max: usize,
    ) -> candle_core::Result<(Tensor, Tensor)> {
        let mut ms = Vec::with_capacity(durations.len());
        let mut logss = Vec::with_capacity(durations.len());
        for (b, d) in durations.iter().enumerate() {
            let mut index = Vec::with_capacity(f_max);
            for (token, &n) in d.iter().enumerate() {
                index.extend(std::iter::repeat_n(token as u32, n));
            }
            let assigned = index.len();
            index.resize(f_max, 0);
            let index = Tensor::new(index, &self.device)?;
            let keep = sequence_mask(&[assigned], f_max, &self.device)?.squeeze(0)?;
            ms.push(m_p.get(b)?.index_select(&index, 1)?.broadcast_mul(&keep)?);
            logss.push(
                logs_p
                    .get(b)?
                    .index_select(&index, 1)?
                    .broadcast_mul(&keep)?,
            );
        }
        Ok((Tensor::stack(&ms, 0)?, Tensor::stack(&logss, 0)?))
    }
}

/// `n` standard-normal samples.
fn gaussian(rng: &mut StdRng, n: usize) -> Vec<f32> {
    (0..n).map(|_| StandardNormal.sample(rng)).collect()
}

/// Per-item row-major `[channels, len_i]` data → zero-padded `[B, channels, max_len]`.
fn pad_rows(
    items: &[Vec<f32>],
    lengths: &[usize],
    channels: usize,
    max_len: usize,
    device: &Device,
) -> candle_core::Result<Tensor> {
    let mut data = vec![0f32; items.len() * channels * max_len];
    for (b, (item, &len)) in items.iter().zip(lengths).enumerate() {
        for c in 0..channels {
            let dst = (b * channels + c) * max_len;
            data[dst..dst + len].copy_from_slice(&item[c * len..(c + 1) * len]);
        }
    }
    Tensor::from_vec(data, (items.len(), channels, max_len), device)
}

/// Frames per phoneme for durations `w` (in frames, `length_scale` applied) at `speed`.
///
/// VITS rounds every phoneme up (`⌈w⌉`), so a plain `length_scale / speed` does not scale the
/// total: phonemes shorter than a frame still take a whole one, and "2× faster" comes out only
/// ~1.3× shorter. Away from speed 1 the durations are instead stretched so their total is the
/// natural total `Σ⌈w⌉ / speed`, and rounded cumulatively (each boundary to the nearest frame),
/// which keeps that total exactly. At speed 1 this is `⌈w⌉`, bit for bit what Piper computes.
pub fn frames_for_speed(w: &[f32], speed: f32) -> Vec<usize> {
    let natural: Vec<usize> = w.iter().map(|&d| d.max(0.0).ceil() as usize).collect();
    let total: usize = natural.iter().sum();
    let sum_w: f64 = w.iter().map(|&d| d.max(0.0) as f64).sum();
    if speed == 1.0 || total == 0 || sum_w <= 0.0 {
        return natural;
    }
    let stretch = (total as f64 / speed as f64).max(1.0) / sum_w;
    let mut end = 0.0f64;
    let mut previous = 0usize;
    w.iter()
        .map(|&d| {
            end += d.max(0.0) as f64 * stretch;
            let boundary = end.round() as usize;
            let frames = boundary - previous;
            previous = boundary;
            frames
        })
        .collect()
}
