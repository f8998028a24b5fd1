//! The encoding half of the Higgs-Audio-v2 audio tokenizer: a reference waveform to 8 codebooks
//! of ids per frame, what voice cloning conditions on.
//!
//! Two branches meet per frame: HuBERT's mean hidden state (at 16 kHz, every
//! `semantic_downsample_factor`-th frame) refined by a small convolutional `SemanticEncoder`, and
//! a DAC encoder over the raw wave. `fc` mixes their concatenation, and residual vector
//! quantization picks, per codebook, the nearest entry to what the previous ones left.

use std::path::Path;

use candle_core::{Module, Result, Tensor, D};
use candle_nn::{linear, Linear, VarBuilder};
use serde_json::Value;

use super::codec::{CodecConfig, ResidualUnit, Snake};
use crate::error::{read_text, ModelError};
use crate::hubert::{Hubert, HubertConfig};
use crate::layers::weight_normed;

/// The encoder-only sizes of `audio_tokenizer/config.json`, defaults as transformers has them.
#[derive(Debug, Clone)]
pub struct EncoderConfig {
    pub semantic_sample_rate: u32,
    pub semantic_hidden_size: usize,
    pub semantic_downsample_factor: usize,
    pub kernel_size: usize,
    pub unit_kernel_size: usize,
    pub strides: Vec<usize>,
    pub channel_ratios: Vec<f64>,
    pub block_dilations: Vec<usize>,
    pub encoder_hidden_size: usize,
    pub downsampling_ratios: Vec<usize>,
    pub hubert: HubertConfig,
}

impl EncoderConfig {
    /// The codec checkpoint's `audio_tokenizer/config.json`.
    pub fn from_file(path: &Path) -> std::result::Result<Self, ModelError> {
        Self::from_json(&read_text(path)?).map_err(|e| e.in_file(path))
    }

    /// `audio_tokenizer/config.json`, as text.
    pub fn from_json(text: &str) -> std::result::Result<Self, ModelError> {
        let bad = |what: &str| ModelError::Config(format!("audio_tokenizer/config.json: {what}"));
        let json: Value = serde_json::from_str(text).map_err(|e| bad(&format!("not JSON: {e}")))?;
        let uint =
            |v: &Value, key: &str, default: usize| -> std::result::Result<usize, ModelError> {
                match v.get(key) {
                    None | Some(Value::Null) => Ok(default),
                    Some(x) => x
                        .as_u64()
                        .filter(|&n| n > 0)
                        .map(|n| n as usize)
                        .ok_or_else(|| bad(&format!("{key} is not a positive whole number"))),
                }
            };
        let uints = |v: &Value,
                     key: &str,
                     default: &[usize]|
         -> std::result::Result<Vec<usize>, ModelError> {
            match v.get(key) {
                None | Some(Value::Null) => Ok(default.to_vec()),
                Some(x) => x
                    .as_array()
                    .and_then(|a| {
                        a.iter()
                            .map(|n| n.as_u64().filter(|&n| n > 0).map(|n| n as usize))
                            .collect::<Option<Vec<_>>>()
                    })
                    .ok_or_else(|| bad(&format!("{key} is not a list of positive numbers"))),
            }
        };
        let acoustic = json
            .get("acoustic_model_config")
            .ok_or_else(|| bad("no acoustic_model_config"))?;
        let semantic = json
            .get("semantic_model_config")
            .ok_or_else(|| bad("no semantic_model_config"))?;
        let hubert: HubertConfig = serde_json::from_value(semantic.clone())
            .map_err(|e| bad(&format!("semantic_model_config: {e}")))?;
        let sample_rate = uint(&json, "sample_rate", 24000)?;
        let semantic_sample_rate = uint(&json, "semantic_sample_rate", 16000)?;
        let downsampling_ratios = uints(acoustic, "downsampling_ratios", &[8, 5, 4, 2, 3])?;
        let hop: usize = downsampling_ratios.iter().product();
        let downsample_factor = uint(&json, "downsample_factor", 320)?;
        // As transformers derives it: HuBERT frames (one per `downsample_factor` samples at the
        // semantic rate) per codec frame.
        let semantic_downsample_factor =
            ((hop * semantic_sample_rate) / sample_rate / downsample_factor).max(1);
        let strides = uints(&json, "strides", &[1, 1])?;
        let channel_ratios = match json.get("channel_ratios").and_then(Value::as_array) {
            None => vec![1.0; strides.len()],
            Some(a) => a
                .iter()
                .map(|x| {
                    x.as_f64()
                        .ok_or_else(|| bad("channel_ratios are not numbers"))
                })
                .collect::<std::result::Result<_, _>>()?,
        };
        if channel_ratios.len() != strides.len() {
            return Err(bad("strides and channel_ratios differ in length"));
        }
        Ok(Self {
            semantic_sample_rate: semantic_sample_rate as u32,
            semantic_hidden_size: uint(semantic, "hidden_size", 768)?,
            semantic_downsample_factor,
            kernel_size: uint(&json, "kernel_size", 3)?,
            unit_kernel_size: uint(&json, "unit_kernel_size", 3)?,
            strides,
            channel_ratios,
            block_dilations: uints(&json, "block_dilations", &[1, 1])?,
            encoder_hidden_size: uint(acoustic, "encoder_hidden_size", 64)?,
            downsampling_ratios,
            hubert,
        })
    }
}

/// The codec's encoder: audio to ids.
pub struct CodecEncoder {
    codec: CodecConfig,
    config: EncoderConfig,
    hubert: Hubert,
    semantic: SemanticEncoder,
    acoustic: DacEncoder,
    fc: Linear,
    /// Per quantizer: project_in, its codebook [codebook_size, codebook_dim], project_out.
    quantizers: Vec<(Linear, Tensor, Linear)>,
}

impl CodecEncoder {
    /// The encoder's tensors of the codec checkpoint (`audio_tokenizer/` as the VarBuilder root).
    pub fn load(
        codec: &CodecConfig,
        config: &EncoderConfig,
        vb: VarBuilder,
    ) -> std::result::Result<Self, ModelError> {
        let c = codec;
        let quantizers = (0..c.num_quantizers)
            .map(|i| {
                let q = vb.pp(format!("quantizer.quantizers.{i}"));
                Ok((
                    linear(c.hidden_size, c.codebook_dim, q.pp("project_in"))?,
                    q.get((c.codebook_size, c.codebook_dim), "codebook.embed")?,
                    linear(c.codebook_dim, c.hidden_size, q.pp("project_out"))?,
                ))
            })
            .collect::<Result<_>>()?;
        Ok(Self {
            hubert: Hubert::load(&config.hubert, vb.pp("semantic_model"))?,
            semantic: SemanticEncoder::load(config, vb.pp("encoder_semantic"))?,
            acoustic: DacEncoder::load(c, config, vb.pp("acoustic_encoder"))?,
            fc: linear(c.hidden_size, c.hidden_size, vb.pp("fc"))?,
            quantizers,
            codec: codec.clone(),
            config: config.clone(),
        })
    }

    /// The official `encode`: `wave` mono at the codec's rate, a whole number of hops →
    /// codes [num_quantizers, frames] u32.
    pub fn encode(&self, wave: &[f32]) -> Result<Tensor> {
        let features = self.semantic_features(wave)?;
        self.encode_with_semantic_features(wave, &features)
    }

    /// HuBERT's mean hidden state over the wave resampled to the semantic rate and padded by
    /// 160 samples each side, every `semantic_downsample_factor`-th frame: [1, frames, hidden].
    fn semantic_features(&self, wave: &[f32]) -> Result<Tensor> {
        let mut input = super::resample(
            wave,
            self.codec.sample_rate,
            self.config.semantic_sample_rate,
        );
        input.splice(0..0, std::iter::repeat_n(0.0, 160));
        input.extend(std::iter::repeat_n(0.0, 160));
        let input = Tensor::from_vec(input.clone(), (1, input.len()), self.fc.weight().device())?;
        let states = self.hubert.hidden_states(&input)?;
        let mean = (Tensor::stack(&states, 1)?.sum(1)? / states.len() as f64)?;
        let frames = mean.dim(1)?;
        let step = self.config.semantic_downsample_factor;
        let picked: Vec<u32> = (0..frames).step_by(step).map(|i| i as u32).collect();
        let picked = Tensor::new(picked, mean.device())?;
        mean.index_select(&picked, 1)
    }

    /// `encode` past HuBERT: `features` [1, frames, semantic hidden] as `semantic_features`
    /// makes them.
    pub(crate) fn encode_with_semantic_features(
        &self,
        wave: &[f32],
        features: &Tensor,
    ) -> Result<Tensor> {
        let device = self.fc.weight().device();
        // [1, semantic, frames]
        let semantic = self.semantic.forward(&features.transpose(1, 2)?)?;
        let frames = semantic.dim(2)?;
        let wave_t = Tensor::new(wave, device)?.reshape((1, 1, wave.len()))?;
        // The official code pads by half a hop each side only when the unpadded wave would not
        // give as many frames as the semantic branch.
        let wave_t = if self.acoustic.output_length(wave.len()) != frames {
            let pad = self.codec.hop_length / 2;
            wave_t.pad_with_zeros(D::Minus1, pad, pad)?
        } else {
            wave_t
        };
        let acoustic = self.acoustic.forward(&wave_t)?;
        // [1, hidden, frames] → [frames, hidden]
        let joined = Tensor::cat(&[acoustic, semantic], 1)?.squeeze(0)?.t()?;
        let mut residual = self.fc.forward(&joined)?;
        let mut codes = Vec::with_capacity(self.quantizers.len());
        for (project_in, codebook, project_out) in &self.quantizers {
            let ids = nearest(&project_in.forward(&residual)?, codebook)?;
            let picked = project_out.forward(&codebook.index_select(&ids, 0)?)?;
            residual = (residual - picked)?;
            codes.push(ids);
        }
        Tensor::stack(&codes, 0)
    }
}

/// Per row of `x` [T, dim], the index of the nearest `codebook` [K, dim] row by Euclidean
/// distance, the lowest on ties as torch's `max` picks. The distance is formed the way the
/// official code forms it (‖x‖² − 2x·e + ‖e‖²) so near-ties break the same way.
fn nearest(x: &Tensor, codebook: &Tensor) -> Result<Tensor> {
    let x_sq = x.sqr()?.sum_keepdim(1)?;
    let e_sq = codebook.sqr()?.sum(1)?.unsqueeze(0)?;
    let cross = (x.matmul(&codebook.t()?)? * 2.0)?;
    let distance = x_sq.broadcast_sub(&cross)?.broadcast_add(&e_sq)?;
    let distance = distance.to_vec2::<f32>()?;
    let ids: Vec<u32> = distance
        .iter()
        .map(|row| {
            let mut best = 0;
            for (k, &d) in row.iter().enumerate() {
                if d < row[best] {
                    best = k;
                }
            }
            best as u32
        })
        .collect();
    Tensor::new(ids, x.device())
}

/// A weight-normed 1-D convolution with bias and a stride, as DAC's encoder has them.
struct StridedConv {
    weight: Tensor,
    bias: Option<Tensor>,
    stride: usize,
    padding: usize,
    dilation: usize,
}

impl StridedConv {
    #[allow(clippy::too_many_arguments)]
    fn load(
        c_in: usize,
        c_out: usize,
        taps: usize,
        stride: usize,
        padding: usize,
        dilation: usize,
        bias: bool,
        vb: VarBuilder,
    ) -> Result<Self> {
        Ok(Self {
            weight: weight_normed(&vb, (c_out, c_in, taps), 0)?,
            bias: if bias {
                Some(vb.get(c_out, "bias")?)
            } else {
                None
            },
            stride,
            padding,
            dilation,
        })
    }

    fn taps(&self) -> usize {
        self.weight.dim(2).unwrap_or(1)
    }

    fn output_length(&self, n: usize) -> usize {
        let span = self.dilation * (self.taps() - 1) + 1;
        (n + 2 * self.padding).saturating_sub(span) / self.stride + 1
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        // The crate's kernels cover stride 1, most of the encoder's work; strided ones go to
        // candle.
        if self.stride == 1 {
            return crate::kernels::conv1d(
                x,
                &self.weight,
                self.bias.as_ref(),
                self.padding,
                self.dilation,
                1,
            );
        }
        let y = x.conv1d(&self.weight, self.padding, self.stride, self.dilation, 1)?;
        match &self.bias {
            Some(b) => y.broadcast_add(&b.reshape((1, (), 1))?),
            None => Ok(y),
        }
    }
}

/// DAC's encoder: a 7-tap convolution, blocks of residual units then a strided convolution
/// doubling the channels, Snake, and a 3-tap convolution to the acoustic width.
struct DacEncoder {
    conv1: StridedConv,
    blocks: Vec<(Vec<ResidualUnit>, Snake, StridedConv)>,
    snake1: Snake,
    conv2: StridedConv,
}

impl DacEncoder {
    fn load(c: &CodecConfig, e: &EncoderConfig, vb: VarBuilder) -> Result<Self> {
        let mut channels = e.encoder_hidden_size;
        let mut blocks = Vec::new();
        for (i, &stride) in e.downsampling_ratios.iter().enumerate() {
            let b = vb.pp(format!("block.{i}"));
            let units = [(1, 1), (2, 3), (3, 9)]
                .iter()
                .map(|&(n, d)| ResidualUnit::load(channels, d, b.pp(format!("res_unit{n}"))))
                .collect::<Result<Vec<_>>>()?;
            let snake = Snake::load(channels, b.pp("snake1"))?;
            let conv = StridedConv::load(
                channels,
                channels * 2,
                2 * stride,
                stride,
                stride.div_ceil(2),
                1,
                true,
                b.pp("conv1"),
            )?;
            blocks.push((units, snake, conv));
            channels *= 2;
        }
        Ok(Self {
            conv1: StridedConv::load(1, e.encoder_hidden_size, 7, 1, 3, 1, true, vb.pp("conv1"))?,
            blocks,
            snake1: Snake::load(channels, vb.pp("snake1"))?,
            conv2: StridedConv::load(
                channels,
                c.acoustic_hidden_size,
                3,
                1,
                1,
                1,
                true,
                vb.pp("conv2"),
            )?,
        })
    }

    /// Frames out of `samples` in, through every convolution as `_get_conv1d_output_lengths`.
    fn output_length(&self, samples: usize) -> usize {
        // Residual units keep the length; only the block convolutions change it.
        let mut n = self.conv1.output_length(samples);
        for (_, _, conv) in &self.blocks {
            n = conv.output_length(n);
        }
        self.conv2.output_length(n)
    }

    /// [1, 1, samples] → [1, acoustic, frames]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut x = self.conv1.forward(x)?;
        for (units, snake, conv) in &self.blocks {
            for unit in units {
                x = unit.forward(&x)?;
            }
            x = conv.forward(&snake.forward(&x)?)?;
        }
        self.conv2.forward(&self.snake1.forward(&x)?)
    }
}

/// `x + conv_1×1(elu(conv_k(elu(x))))`, no biases: the semantic branch's residual unit.
struct EluUnit {
    conv1: StridedConv,
    conv2: StridedConv,
}

impl EluUnit {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let y = self.conv1.forward(&x.elu(1.0)?)?;
        x + self.conv2.forward(&y.elu(1.0)?)?
    }
}

/// The semantic branch after HuBERT: a convolution, then blocks of residual units each ending
/// in a (possibly strided) convolution to the block's width.
struct SemanticEncoder {
    conv: StridedConv,
    blocks: Vec<(Vec<EluUnit>, StridedConv)>,
}

impl SemanticEncoder {
    fn load(e: &EncoderConfig, vb: VarBuilder) -> Result<Self> {
        let h = e.semantic_hidden_size;
        let k = e.kernel_size;
        let mut blocks = Vec::new();
        let mut c_in = h;
        for (i, (&stride, &ratio)) in e.strides.iter().zip(&e.channel_ratios).enumerate() {
            let b = vb.pp(format!("conv_blocks.{i}"));
            let units = e
                .block_dilations
                .iter()
                .enumerate()
                .map(|(j, &d)| {
                    let u = b.pp(format!("res_units.{j}"));
                    let pad = (e.unit_kernel_size - 1) / 2 * d;
                    Ok(EluUnit {
                        conv1: StridedConv::load(
                            c_in,
                            c_in,
                            e.unit_kernel_size,
                            1,
                            pad,
                            d,
                            false,
                            u.pp("conv1"),
                        )?,
                        conv2: StridedConv::load(c_in, c_in, 1, 1, 0, 1, false, u.pp("conv2"))?,
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            let c_out = (h as f64 * ratio) as usize;
            // A stride of 1 keeps 3 taps rather than 2·stride.
            let taps = if stride == 1 { 3 } else { 2 * stride };
            let conv = StridedConv::load(
                c_in,
                c_out,
                taps,
                stride,
                (taps - 1) / 2,
                1,
                true,
                b.pp("conv"),
            )?;
            blocks.push((units, conv));
            c_in = c_out;
        }
        Ok(Self {
            conv: StridedConv::load(h, h, k, 1, k / 2, 1, false, vb.pp("conv"))?,
            blocks,
        })
    }

    /// [1, semantic, frames] → [1, semantic · last ratio, frames / Π strides]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut x = self.conv.forward(x)?;
        for (units, conv) in &self.blocks {
            for unit in units {
                x = unit.forward(&x)?;
            }
            x = conv.forward(&x)?;
        }
        Ok(x)
    }
}

#[cfg(test)]
#[path = "encoder_tests.rs"]
mod tests;
