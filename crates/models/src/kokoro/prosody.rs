//! StyleTTS 2's prosody predictor: how long each phoneme lasts, and the pitch (F0) and energy
//! (N) curves of the frames it lasts for, all conditioned on the prosody half of the voice.
//!
//! - The duration encoder interleaves bidirectional LSTMs with AdaLayerNorm on the style,
//!   re-appending the style after each norm: `d` `[T, 512 + 128]`.
//! - Durations: another BiLSTM over `d`, a projection to 50 bins, and
//!   `round(Σ sigmoid / speed)` frames per token (half to even, at least one).
//! - F0 and N: `d` repeated per frame (the alignment), the shared BiLSTM, then two stacks of
//!   three [`AdainResBlk1d`] (the middle one doubles the frame rate) and a 1×1 projection each.

use candle_core::{Result, Tensor};

use super::blocks::{layer_norm_rows, AdainResBlk1d, Conv1d, ConvSpec, Linear, ResBlkSpec};
use super::config::Config;
use super::text_encoder::load_lstm;
use super::weights::Weights;
use crate::error::ModelError;
use crate::kernels::BiLstm;

/// `AdaLayerNorm`: layer norm over channels with the style's scale and shift,
/// `(1 + γ(s)) · LN(x) + β(s)`.
#[derive(Debug, Clone)]
struct AdaLayerNorm {
    fc: Linear,
    channels: usize,
    eps: f64,
}

impl AdaLayerNorm {
    /// `x` `[T, C]`, `s` `[1, style]` → `[T, C]`.
    fn forward(&self, x: &Tensor, s: &Tensor) -> Result<Tensor> {
        let h = self.fc.forward(s)?; // [1, 2C]
        let gamma = (h.narrow(1, 0, self.channels)? + 1.0)?;
        let beta = h.narrow(1, self.channels, self.channels)?;
        layer_norm_rows(x, self.eps)?
            .broadcast_mul(&gamma)?
            .broadcast_add(&beta)
    }
}

/// One F0 or N branch: three residual blocks and the projection to one channel.
#[derive(Debug, Clone)]
struct CurveBranch {
    blocks: Vec<AdainResBlk1d>,
    proj: Conv1d,
}

impl CurveBranch {
    fn load(w: &Weights, name: &str, c: &Config) -> std::result::Result<Self, ModelError> {
        let (h, style) = (c.hidden, c.style_dim);
        let specs = [(h, h, false), (h, h / 2, true), (h / 2, h / 2, false)];
        let blocks = specs
            .iter()
            .enumerate()
            .map(|(i, &(dim_in, dim_out, upsample))| {
                let spec = ResBlkSpec {
                    dim_in,
                    dim_out,
                    style,
                    upsample,
                };
                AdainResBlk1d::load(
                    w,
                    &format!("predictor.{name}.{i}"),
                    spec,
                    c.norm_eps,
                    c.leaky_slope,
                )
            })
            .collect::<std::result::Result<Vec<_>, ModelError>>()?;
        let proj = Conv1d::load(
            w,
            &format!("predictor.{name}_proj"),
            (h / 2, 1, 1),
            ConvSpec::same(1),
        )?;
        Ok(Self { blocks, proj })
    }

    fn release_unpacked(&mut self) -> Result<()> {
        for block in &mut self.blocks {
            block.release_unpacked()?;
        }
        self.proj.release_unpacked()
    }

    /// `x` `[1, 512, F]`, `s` `[1, 128]` → `[2F]`.
    fn forward(&self, x: &Tensor, s: &Tensor) -> Result<Tensor> {
        let mut x = x.clone();
        for block in &self.blocks {
            x = block.forward(&x, s)?;
        }
        self.proj.forward(&x)?.flatten_all()
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Prosody {
    /// `predictor.text_encoder.lstms.{0,2,4}` and the AdaLayerNorms `{1,3,5}`, in order.
    encoder: Vec<(BiLstm, AdaLayerNorm)>,
    lstm: BiLstm,
    duration_proj: Linear,
    shared: BiLstm,
    f0: CurveBranch,
    n: CurveBranch,
}

impl Prosody {
    /// `predictor.*`.
    pub fn load(w: &Weights, c: &Config) -> std::result::Result<Self, ModelError> {
        let (h, style) = (c.hidden, c.style_dim);
        let encoder = (0..c.n_layer)
            .map(|i| {
                let lstm = load_lstm(
                    w,
                    &format!("predictor.text_encoder.lstms.{}", 2 * i),
                    h + style,
                    h / 2,
                )?;
                let norm = AdaLayerNorm {
                    fc: Linear::load(
                        w,
                        &format!("predictor.text_encoder.lstms.{}.fc", 2 * i + 1),
                        style,
                        2 * h,
                    )?,
                    channels: h,
                    eps: c.norm_eps,
                };
                Ok((lstm, norm))
            })
            .collect::<std::result::Result<Vec<_>, ModelError>>()?;
        Ok(Self {
            encoder,
            lstm: load_lstm(w, "predictor.lstm", h + style, h / 2)?,
            duration_proj: Linear::load(w, "predictor.duration_proj.linear_layer", h, c.max_dur)?,
            shared: load_lstm(w, "predictor.shared", h + style, h / 2)?,
            f0: CurveBranch::load(w, "F0", c)?,
            n: CurveBranch::load(w, "N", c)?,
        })
    }

    /// The F0 and N branches' convolutions packed, their tensors released (see
    /// [`Conv1d::release_unpacked`]).
    pub fn release_unpacked(&mut self) -> Result<()> {
        self.f0.release_unpacked()?;
        self.n.release_unpacked()
    }

    /// The duration encoder: `d_en` `[T, 512]` (projected PL-BERT), `s` `[1, 128]` →
    /// `d` `[T, 640]`, the style appended to every position.
    pub fn encode(&self, d_en: &Tensor, s: &Tensor) -> Result<Tensor> {
        let t = d_en.dim(0)?;
        let style = s.broadcast_as((t, s.dim(1)?))?;
        let mut x = Tensor::cat(&[d_en, &style], 1)?; // [T, 640]
        for (lstm, norm) in &self.encoder {
            let y = lstm.forward(&x)?; // [T, 512]
            let y = norm.forward(&y, s)?;
            x = Tensor::cat(&[&y, &style], 1)?;
        }
        Ok(x)
    }

    /// The duration logits `[T, 50]` of encoded tokens `d` `[T, 640]`.
    pub fn duration_logits(&self, d: &Tensor) -> Result<Tensor> {
        self.duration_proj.forward(&self.lstm.forward(d)?)
    }

    /// `d` `[T, 640]` repeated per frame `en` `[640, F]`, `s` `[1, 128]` → F0 and N `[2F]`.
    pub fn curves(&self, en: &Tensor, s: &Tensor) -> Result<(Tensor, Tensor)> {
        let x = self.shared.forward(&en.t()?.contiguous()?)?; // [F, 512]
        let x = x.t()?.unsqueeze(0)?.contiguous()?; // [1, 512, F]
        Ok((self.f0.forward(&x, s)?, self.n.forward(&x, s)?))
    }
}

/// Frames per token from the duration logits `[T, 50]`: `round(Σ sigmoid / speed)`, half to
/// even as onnxruntime's `Round` (and `torch.round`), at least 1.
pub(crate) fn durations(logits: &Tensor, speed: f32) -> Result<Vec<u32>> {
    let sums = candle_nn::ops::sigmoid(logits)?.sum(1)?.to_vec1::<f32>()?;
    Ok(sums
        .into_iter()
        .map(|v| (v / speed).round_ties_even().max(1.0) as u32)
        .collect())
}

/// Repeats column `i` of `x` `[C, T]` `durations[i]` times: `[C, Σ durations]`, the
/// product with StyleTTS 2's hard alignment matrix without building it.
pub(crate) fn expand(x: &Tensor, durations: &[u32]) -> Result<Tensor> {
    let index: Vec<u32> = durations
        .iter()
        .enumerate()
        .flat_map(|(i, &d)| std::iter::repeat_n(i as u32, d as usize))
        .collect();
    let index = Tensor::from_vec(
        index,
        durations.iter().map(|&d| d as usize).sum::<usize>(),
        x.device(),
    )?;
    x.contiguous()?.index_select(&index, 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn durations_round_half_to_even_and_never_drop_a_token() {
        // Logits that make each Σ sigmoid exactly k/2: 0 → 1/2 per bin.
        let dev = Device::Cpu;
        let row = |bins_at_zero: usize| -> Vec<f32> {
            (0..4)
                .map(|i| if i < bins_at_zero { 0.0 } else { -1e4 })
                .collect()
        };
        let logits = Tensor::new(vec![row(1), row(3), row(4), row(0)], &dev).unwrap();
        // Σ = 0.5, 1.5, 2.0, 0 → 0 → 1 (floor of one), 2, 2, 1.
        assert_eq!(durations(&logits, 1.0).unwrap(), vec![1, 2, 2, 1]);
        // Σ / 0.5 = 1, 3, 4, 0 → 1, 3, 4, 1.
        assert_eq!(durations(&logits, 0.5).unwrap(), vec![1, 3, 4, 1]);
    }

    #[test]
    fn expand_repeats_columns() {
        let x = Tensor::new(&[[1f32, 2.0, 3.0], [4.0, 5.0, 6.0]], &Device::Cpu).unwrap();
        let y = expand(&x, &[2, 1, 3]).unwrap().to_vec2::<f32>().unwrap();
        assert_eq!(
            y,
            vec![
                vec![1.0, 1.0, 2.0, 3.0, 3.0, 3.0],
                vec![4.0, 4.0, 5.0, 6.0, 6.0, 6.0]
            ]
        );
    }
}
