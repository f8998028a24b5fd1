//! StyleTTS 2's text encoder: the phoneme features the decoder reads once aligned to frames.
//!
//! Embedding → `n_layer` × (Conv1d(k = 5) → LayerNorm over channels → LeakyReLU(0.2)) →
//! a bidirectional LSTM. Separate from PL-BERT, which feeds only the prosody predictor.

use candle_core::{Result, Tensor};

use super::blocks::{layer_norm_rows, leaky_relu, Conv1d, ConvSpec};
use super::config::Config;
use super::weights::Weights;
use crate::error::ModelError;
use crate::kernels::BiLstm;

#[derive(Debug, Clone)]
struct CnnLayer {
    conv: Conv1d,
    gamma: Tensor,
    beta: Tensor,
}

#[derive(Debug, Clone)]
pub(crate) struct TextEncoder {
    embedding: Tensor,
    cnn: Vec<CnnLayer>,
    lstm: BiLstm,
    eps: f64,
    slope: f64,
}

impl TextEncoder {
    /// `text_encoder.*`.
    pub fn load(w: &Weights, c: &Config) -> std::result::Result<Self, ModelError> {
        let (ch, k) = (c.hidden, c.text_encoder_kernel_size);
        let cnn = (0..c.n_layer)
            .map(|i| {
                Ok(CnnLayer {
                    conv: Conv1d::load(
                        w,
                        &format!("text_encoder.cnn.{i}.0"),
                        (ch, ch, k),
                        ConvSpec::same(k),
                    )?,
                    gamma: w.get_shaped(&format!("text_encoder.cnn.{i}.1.gamma"), &[ch])?,
                    beta: w.get_shaped(&format!("text_encoder.cnn.{i}.1.beta"), &[ch])?,
                })
            })
            .collect::<std::result::Result<Vec<_>, ModelError>>()?;
        Ok(Self {
            embedding: w.get_shaped("text_encoder.embedding.weight", &[c.n_token, ch])?,
            cnn,
            lstm: load_lstm(w, "text_encoder.lstm", ch, ch / 2)?,
            eps: c.norm_eps,
            slope: c.leaky_slope,
        })
    }

    /// See [`Conv1d::release_unpacked`].
    pub fn release_unpacked(&mut self) -> Result<()> {
        for layer in &mut self.cnn {
            layer.conv.release_unpacked()?;
        }
        Ok(())
    }

    /// `ids` `[T]` (pads included) → `t_en` `[1, 512, T]`.
    pub fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        let mut x = self.embedding.index_select(ids, 0)?.t()?.unsqueeze(0)?; // [1, C, T]
        for layer in &self.cnn {
            let y = layer.conv.forward(&x)?.squeeze(0)?.t()?; // [T, C]
            let y = layer_norm_rows(&y, self.eps)?
                .broadcast_mul(&layer.gamma)?
                .broadcast_add(&layer.beta)?;
            x = leaky_relu(&y, self.slope)?.t()?.unsqueeze(0)?;
        }
        let x = x.squeeze(0)?.t()?.contiguous()?; // [T, C]
        self.lstm.forward(&x)?.t()?.unsqueeze(0) // [1, C, T]
    }
}

/// `<prefix>.{W,R,B}` as one [`BiLstm`], checked against the expected sizes.
pub(crate) fn load_lstm(
    w: &Weights,
    prefix: &str,
    input: usize,
    hidden: usize,
) -> std::result::Result<BiLstm, ModelError> {
    let g = 4 * hidden;
    let wt = w.get_shaped(&format!("{prefix}.W"), &[2, g, input])?;
    let r = w.get_shaped(&format!("{prefix}.R"), &[2, g, hidden])?;
    let b = w.get_shaped(&format!("{prefix}.B"), &[2, 2 * g])?;
    Ok(BiLstm::new(&wt, &r, &b)?)
}
