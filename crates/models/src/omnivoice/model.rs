//! The OmniVoice network: one forward over a packed batch, from ids to audio logits.
//!
//! Each position is a text token or an audio frame. A text position is embedded by the Qwen3
//! vocabulary; an audio frame by the sum of its codebooks' embeddings, each codebook with rows
//! of its own in one table (`codebook · audio_vocab_size + id`). The bidirectional body then
//! gives every position, and the audio head reads logits for all codebooks of it.

use candle_core::{DType, Device, Module, Result, Tensor};
use candle_nn::{embedding, Embedding, VarBuilder};

use super::backbone::{Backbone, Proj};
use super::config::Config;
use crate::error::ModelError;
use crate::kernels::Precision;

pub struct OmniVoice {
    config: Config,
    embed_tokens: Embedding,
    audio_embeddings: Embedding,
    backbone: Backbone,
    audio_heads: Proj,
    precision: Precision,
    /// Whether greedy decoding steps are scored where the logits are (off the CPU): then
    /// only each position's best id and confidence come to the host.
    scores_on_device: bool,
}

impl OmniVoice {
    /// The network of `config` from the checkpoint's `model.safetensors` as `vb` reads it
    /// (`VarBuilder::from_mmaped_safetensors`: f32, bf16 or f16, computed in the VarBuilder's
    /// dtype, on its device; a bench builds one in memory). Each tensor is read by its name in
    /// the official checkpoint and checked against the size `config` gives it: a missing or
    /// mis-shaped one is an error that names it.
    pub fn load(config: &Config, vb: VarBuilder) -> std::result::Result<Self, ModelError> {
        let b = &config.backbone;
        let llm = vb.pp("llm");
        let rows = config.num_audio_codebook * config.audio_vocab_size;
        Ok(Self {
            embed_tokens: embedding(b.vocab_size, b.hidden_size, llm.pp("embed_tokens"))?,
            backbone: Backbone::load(llm, b)?,
            audio_embeddings: embedding(rows, b.hidden_size, vb.pp("audio_embeddings"))?,
            audio_heads: Proj::load(b.hidden_size, rows, vb.pp("audio_heads"))?,
            precision: match vb.dtype() {
                DType::BF16 => Precision::Bf16,
                _ => Precision::F32,
            },
            scores_on_device: !vb.device().is_cpu(),
            config: config.clone(),
        })
    }

    /// The same model with the backbone's linear layers and the audio head in `precision`:
    /// they are nearly all of its work. Embeddings, norms, RoPE and attention stay `f32`.
    /// Reduced precisions are CPU kernels for a model loaded in `f32`: on other devices and
    /// dtypes the model stays as it is (a GPU runs bf16 as the weights' own dtype: load them
    /// so, and [`OmniVoice::precision`] says bf16). The packed bf16 weights replace the `f32` ones (which
    /// would double the memory), so going back to `f32` is an error: load the model again.
    /// Which precision pays on a CPU is [`Precision::auto`]'s question.
    pub fn with_precision(mut self, precision: Precision) -> std::result::Result<Self, ModelError> {
        let eligible =
            self.device().is_cpu() && self.embed_tokens.embeddings().dtype() == DType::F32;
        if !eligible {
            return Ok(self);
        }
        let precision = if precision == Precision::Bf16 {
            precision
        } else {
            Precision::F32
        };
        if precision == self.precision {
            // In `f32` the layers still go to the host-row kernels, once.
            self.backbone.in_precision(precision)?;
            return Ok(self);
        }
        if self.precision != Precision::F32 {
            return Err(candle_core::Error::Msg(format!(
                "the model's weights are packed in {}; load it again for {precision}",
                self.precision
            ))
            .into());
        }
        self.backbone.in_precision(precision)?;
        self.audio_heads.in_precision(precision)?;
        self.precision = precision;
        Ok(self)
    }

    /// What the linear layers run in.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn device(&self) -> &Device {
        self.embed_tokens.embeddings().device()
    }

    /// The audio logits of a packed batch.
    ///
    /// - `ids`: [C, N] u32, the codebooks of every position; at a text position row 0 holds
    ///   the text token (the other rows are not read).
    /// - `audio`: [N] u8, 1 where the position is an audio frame.
    /// - `segments`: the lengths of the batch's rows, one after another (summing to N).
    ///
    /// Returns [C, N, audio_vocab_size].
    pub fn forward(&self, ids: &Tensor, audio: &Tensor, segments: &[usize]) -> Result<Tensor> {
        let h = self.hidden(ids, audio, segments)?;
        self.head(&h)
    }

    /// [`OmniVoice::forward`]'s logits at the positions `at` ([M] u32) only, [C, M, V]:
    /// decoding scores the target frames, and the audio head over a prompt's text would be
    /// work and memory (32 KB a position) thrown away.
    pub fn forward_at(
        &self,
        ids: &Tensor,
        audio: &Tensor,
        segments: &[usize],
        at: &Tensor,
    ) -> Result<Tensor> {
        let h = self.hidden(ids, audio, segments)?;
        self.head(&h.index_select(at, 0)?)
    }

    /// [N, hidden]: the body's output at every position.
    fn hidden(&self, ids: &Tensor, audio: &Tensor, segments: &[usize]) -> Result<Tensor> {
        let c = &self.config;
        let (codebooks, n) = ids.dims2()?;
        if codebooks != c.num_audio_codebook || audio.dims1()? != n {
            candle_core::bail!(
                "ids must be [{}, N] and audio [N]; got {:?} and {:?}",
                c.num_audio_codebook,
                ids.shape(),
                audio.shape()
            );
        }
        if segments.iter().sum::<usize>() != n {
            candle_core::bail!("segments of {segments:?} do not cover {n} positions");
        }
        let hidden = c.backbone.hidden_size;
        // [N, hidden]: the text embedding of row 0 (also looked up at audio positions, where
        // it holds an audio id, and then not used).
        let text = self.embed_tokens.forward(&ids.get(0)?)?;
        // [C, N] → each codebook's id in its own rows of the shared table → [N, hidden].
        let offsets = Tensor::arange(0u32, codebooks as u32, ids.device())?
            .affine(c.audio_vocab_size as f64, 0.0)?
            .unsqueeze(1)?;
        let is_audio = audio.to_dtype(DType::U32)?.unsqueeze(0)?;
        let shifted = ids.broadcast_mul(&is_audio)?.broadcast_add(&offsets)?;
        let frames = self.audio_embeddings.forward(&shifted)?.sum(0)?;
        let chosen = audio.unsqueeze(1)?.broadcast_as((n, hidden))?;
        let x = chosen.where_cond(&frames, &text)?;
        self.backbone.forward(&x, segments)
    }

    /// [M, hidden] → [M, C · V] → [C, M, V]
    fn head(&self, h: &Tensor) -> Result<Tensor> {
        let c = &self.config;
        let m = h.dim(0)?;
        self.audio_heads
            .forward(h)?
            .reshape((m, c.num_audio_codebook, c.audio_vocab_size))?
            .transpose(0, 1)?
            .contiguous()
    }

    pub(super) fn scores_on_device(&self) -> bool {
        self.scores_on_device
    }

    /// The same model scoring greedy steps with tensor operations, as off the CPU.
    #[cfg(test)]
    pub(super) fn with_scoring_on_device(mut self) -> Self {
        self.scores_on_device = true;
        self
    }

    #[cfg(test)]
    pub(super) fn with_plain_attention(mut self) -> Self {
        self.backbone = self.backbone.with_plain_attention();
        self
    }
}
