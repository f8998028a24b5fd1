//! The decoding half of the Higgs-Audio-v2 audio tokenizer, OmniVoice's codec: 8 codebooks of
//! ids per frame back to 24 kHz audio.
//!
//! Residual vector quantization is undone by summing each codebook's entry (projected out of
//! the codebook's width); `fc2` keeps the acoustic part of that sum, and a DAC decoder
//! (Snake activations, transposed convolutions, dilated residual units) upsamples it to one
//! sample per `hop_length`-th of a frame. Higgs' DAC differs from the published one in two
//! places the official code adjusts after loading: every transposed convolution has an output
//! padding of `stride mod 2`, and there is no final tanh.

use std::path::Path;

use candle_core::{Module, Result, Tensor};
use candle_nn::{linear, Linear, VarBuilder};
use serde_json::Value;

use crate::error::{read_text, ModelError};
use crate::kernels::{
    self, conv1d_fused, conv_transpose1d_fused, InputMap, PackedPhaseCache, PackedWeightCache,
    Precision,
};
use crate::layers::weight_normed;

/// The codec's sizes, from `audio_tokenizer/config.json`. transformers derives some of them
/// from others rather than writing them: those are derived the same way.
#[derive(Debug, Clone, PartialEq)]
pub struct CodecConfig {
    pub sample_rate: u32,
    pub codebook_size: usize,
    pub codebook_dim: usize,
    pub num_quantizers: usize,
    /// Width of a quantized frame: the acoustic and the semantic parts together.
    pub hidden_size: usize,
    /// Width of the acoustic part, what the DAC decoder takes.
    pub acoustic_hidden_size: usize,
    pub decoder_hidden_size: usize,
    pub upsampling_ratios: Vec<usize>,
    /// Samples per frame: the product of the encoder's downsampling ratios.
    pub hop_length: usize,
}

impl CodecConfig {
    /// The codec checkpoint's `audio_tokenizer/config.json`.
    pub fn from_file(path: &Path) -> std::result::Result<Self, ModelError> {
        Self::from_json(&read_text(path)?).map_err(|e| e.in_file(path))
    }

    /// `audio_tokenizer/config.json`, as text.
    pub fn from_json(text: &str) -> std::result::Result<Self, ModelError> {
        let bad = |what: &str| ModelError::Config(format!("audio_tokenizer/config.json: {what}"));
        let json: Value = serde_json::from_str(text).map_err(|e| bad(&format!("not JSON: {e}")))?;
        let uint = |v: &Value, key: &str| -> std::result::Result<usize, ModelError> {
            v.get(key)
                .and_then(Value::as_u64)
                .filter(|&n| n > 0)
                .map(|n| n as usize)
                .ok_or_else(|| bad(&format!("{key} is missing or not a positive whole number")))
        };
        let list = |v: &Value, key: &str| -> std::result::Result<Vec<usize>, ModelError> {
            v.get(key)
                .and_then(Value::as_array)
                .and_then(|a| {
                    a.iter()
                        .map(|x| x.as_u64().filter(|&n| n > 0).map(|n| n as usize))
                        .collect::<Option<Vec<_>>>()
                })
                .filter(|a| !a.is_empty())
                .ok_or_else(|| {
                    bad(&format!(
                        "{key} is missing or not a list of positive numbers"
                    ))
                })
        };
        let acoustic = json
            .get("acoustic_model_config")
            .ok_or_else(|| bad("no acoustic_model_config"))?;
        let semantic = json
            .get("semantic_model_config")
            .ok_or_else(|| bad("no semantic_model_config"))?;
        let sample_rate = uint(&json, "sample_rate")?;
        let codebook_size = uint(&json, "codebook_size")?;
        let acoustic_hidden_size = uint(acoustic, "hidden_size")?;
        let hidden_size = acoustic_hidden_size + uint(semantic, "hidden_size")?;
        let hop_length = list(acoustic, "downsampling_ratios")?
            .iter()
            .product::<usize>();
        let codebook_dim = match json.get("codebook_dim") {
            None | Some(Value::Null) => hidden_size,
            Some(_) => uint(&json, "codebook_dim")?,
        };
        // As transformers derives it: the top bandwidth over the bits a frame of one
        // codebook carries.
        let num_quantizers = match json.get("num_quantizers") {
            Some(Value::Number(_)) => uint(&json, "num_quantizers")?,
            _ => {
                let top = json
                    .get("target_bandwidths")
                    .and_then(Value::as_array)
                    .and_then(|a| a.last())
                    .and_then(Value::as_f64)
                    .ok_or_else(|| bad("no target_bandwidths"))?;
                let frame_rate = sample_rate.div_ceil(hop_length) as f64;
                let bits = (codebook_size as f64).log2().ceil();
                ((1000.0 * top) / (frame_rate * bits)).floor() as usize
            }
        };
        if num_quantizers == 0 {
            return Err(bad("target_bandwidths give no quantizer"));
        }
        Ok(Self {
            sample_rate: sample_rate as u32,
            codebook_size,
            codebook_dim,
            num_quantizers,
            hidden_size,
            acoustic_hidden_size,
            decoder_hidden_size: uint(acoustic, "decoder_hidden_size")?,
            upsampling_ratios: list(acoustic, "upsampling_ratios")?,
            hop_length,
        })
    }
}

/// The codec's decoder: ids to audio.
pub struct CodecDecoder {
    config: CodecConfig,
    /// Per quantizer: its codebook [codebook_size, codebook_dim] and the projection out of it.
    quantizers: Vec<(Tensor, Linear)>,
    fc2: Linear,
    decoder: DacDecoder,
}

impl CodecDecoder {
    /// The decoder's tensors of the codec checkpoint (`audio_tokenizer/model.safetensors`),
    /// sized by `config`, on the VarBuilder's device and dtype.
    pub fn load(config: &CodecConfig, vb: VarBuilder) -> std::result::Result<Self, ModelError> {
        let c = config;
        let quantizers = (0..c.num_quantizers)
            .map(|i| {
                let q = vb.pp(format!("quantizer.quantizers.{i}"));
                Ok((
                    q.get((c.codebook_size, c.codebook_dim), "codebook.embed")?,
                    linear(c.codebook_dim, c.hidden_size, q.pp("project_out"))?,
                ))
            })
            .collect::<Result<_>>()?;
        Ok(Self {
            fc2: linear(c.hidden_size, c.acoustic_hidden_size, vb.pp("fc2"))?,
            decoder: DacDecoder::load(c, vb.pp("acoustic_decoder"))?,
            quantizers,
            config: config.clone(),
        })
    }

    pub fn config(&self) -> &CodecConfig {
        &self.config
    }

    /// The decoder's convolutions in `precision` on the CPU (bf16 on the AVX-512 and AMX
    /// kernels), their weights packed on first use; the quantizers' lookups and the `f32`
    /// sums, biases and Snakes stay `f32`. Off the CPU, or for `f32` tensors not on it, this
    /// changes nothing.
    pub fn with_precision(mut self, precision: Precision) -> Self {
        self.decoder.set_precision(precision);
        self
    }

    /// `codes`: [num_quantizers, T] u32 → audio, [T · hop_length] samples.
    pub fn decode(&self, codes: &Tensor) -> Result<Tensor> {
        let (quantizers, _frames) = codes.dims2()?;
        if quantizers != self.quantizers.len() {
            candle_core::bail!(
                "codes hold {quantizers} codebooks; the codec has {}",
                self.quantizers.len()
            );
        }
        // Σ over quantizers of project_out(codebook[id]): [T, hidden].
        let mut sum: Option<Tensor> = None;
        for (i, (codebook, project_out)) in self.quantizers.iter().enumerate() {
            let entries = codebook.index_select(&codes.get(i)?, 0)?;
            let part = project_out.forward(&entries)?;
            sum = Some(match sum {
                None => part,
                Some(s) => (s + part)?,
            });
        }
        let quantized = sum.expect("a codec has at least one quantizer");
        // [T, acoustic] → [1, acoustic, T] → [1, 1, T · hop]
        let acoustic = self.fc2.forward(&quantized)?.t()?.unsqueeze(0)?;
        self.decoder.forward(&acoustic)?.flatten_all()
    }
}

/// DAC's decoder: a wide convolution, upsampling blocks, Snake, and a convolution to one channel.
struct DacDecoder {
    conv1: Conv,
    blocks: Vec<DecoderBlock>,
    snake1: Snake,
    conv2: Conv,
}

impl DacDecoder {
    fn load(c: &CodecConfig, vb: VarBuilder) -> Result<Self> {
        let mut channels = c.decoder_hidden_size;
        let mut blocks = Vec::with_capacity(c.upsampling_ratios.len());
        for (i, &stride) in c.upsampling_ratios.iter().enumerate() {
            blocks.push(DecoderBlock::load(
                channels,
                stride,
                vb.pp(format!("block.{i}")),
            )?);
            channels /= 2;
        }
        Ok(Self {
            conv1: Conv::load(
                c.acoustic_hidden_size,
                c.decoder_hidden_size,
                7,
                3,
                1,
                vb.pp("conv1"),
            )?,
            blocks,
            snake1: Snake::load(channels, vb.pp("snake1"))?,
            conv2: Conv::load(channels, 1, 7, 3, 1, vb.pp("conv2"))?,
        })
    }

    fn set_precision(&mut self, precision: Precision) {
        self.conv1.cache = PackedWeightCache::new(precision);
        self.conv2.cache = PackedWeightCache::new(precision);
        for block in &mut self.blocks {
            block.conv_t1.cache = PackedPhaseCache::new(precision);
            for unit in &mut block.res_units {
                unit.conv1.cache = PackedWeightCache::new(precision);
                unit.conv2.cache = PackedWeightCache::new(precision);
            }
        }
    }

    /// [1, acoustic, T] → [1, 1, T · Π ratios]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut x = self.conv1.forward(x)?;
        for block in &self.blocks {
            x = block.forward(&x)?;
        }
        self.conv2.forward(&self.snake1.forward(&x)?)
    }
}

/// Snake, then a transposed convolution that upsamples by `stride` and halves the channels,
/// then residual units at dilations 1, 3 and 9.
struct DecoderBlock {
    snake1: Snake,
    conv_t1: TransposedConv,
    res_units: [ResidualUnit; 3],
}

impl DecoderBlock {
    fn load(channels: usize, stride: usize, vb: VarBuilder) -> Result<Self> {
        let out = channels / 2;
        let unit =
            |i: usize, dilation| ResidualUnit::load(out, dilation, vb.pp(format!("res_unit{i}")));
        Ok(Self {
            snake1: Snake::load(channels, vb.pp("snake1"))?,
            conv_t1: TransposedConv::load(channels, out, stride, vb.pp("conv_t1"))?,
            res_units: [unit(1, 1)?, unit(2, 3)?, unit(3, 9)?],
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut x = self.conv_t1.forward(&self.snake1.forward(x)?)?;
        for unit in &self.res_units {
            x = unit.forward(&x)?;
        }
        Ok(x)
    }
}

/// `x + conv_1×1(snake(conv_7(snake(x))))`, the 7-tap convolution dilated.
pub(super) struct ResidualUnit {
    snake1: Snake,
    conv1: Conv,
    snake2: Snake,
    conv2: Conv,
}

impl ResidualUnit {
    pub(super) fn load(channels: usize, dilation: usize, vb: VarBuilder) -> Result<Self> {
        Ok(Self {
            snake1: Snake::load(channels, vb.pp("snake1"))?,
            conv1: Conv::load(
                channels,
                channels,
                7,
                3 * dilation,
                dilation,
                vb.pp("conv1"),
            )?,
            snake2: Snake::load(channels, vb.pp("snake2"))?,
            conv2: Conv::load(channels, channels, 1, 0, 1, vb.pp("conv2"))?,
        })
    }

    pub(super) fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let y = self.conv1.forward(&self.snake1.forward(x)?)?;
        self.conv2.forward_added(&self.snake2.forward(&y)?, x)
    }
}

/// `x + sin²(αx) / (α + 1e-9)`, α per channel.
pub(super) struct Snake {
    alpha: Tensor,
}

impl Snake {
    pub(super) fn load(channels: usize, vb: VarBuilder) -> Result<Self> {
        Ok(Self {
            alpha: vb.get((1, channels, 1), "alpha")?,
        })
    }

    pub(super) fn forward(&self, x: &Tensor) -> Result<Tensor> {
        if let Some(y) = kernels::snake(x, &self.alpha)? {
            return Ok(y);
        }
        let wave = x.broadcast_mul(&self.alpha)?.sin()?.sqr()?;
        let inverse = (&self.alpha + 1e-9)?.recip()?;
        x + wave.broadcast_mul(&inverse)?
    }
}

/// A 1-D convolution with bias, same-length padding given.
struct Conv {
    weight: Tensor,
    bias: Tensor,
    padding: usize,
    dilation: usize,
    /// Its weights packed for the CPU kernels in the decoder's precision.
    cache: PackedWeightCache,
}

impl Conv {
    fn load(
        c_in: usize,
        c_out: usize,
        taps: usize,
        padding: usize,
        dilation: usize,
        vb: VarBuilder,
    ) -> Result<Self> {
        Ok(Self {
            weight: weight_normed(&vb, (c_out, c_in, taps), 0)?,
            bias: vb.get(c_out, "bias")?,
            padding,
            dilation,
            cache: PackedWeightCache::default(),
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.run(x, &[])
    }

    /// `residual + conv(x)`, the add fused into the convolution's write on the CPU.
    fn forward_added(&self, x: &Tensor, residual: &Tensor) -> Result<Tensor> {
        self.run(x, &[residual])
    }

    fn run(&self, x: &Tensor, residuals: &[&Tensor]) -> Result<Tensor> {
        conv1d_fused(
            x,
            &self.weight,
            Some(&self.bias),
            self.padding,
            self.dilation,
            &InputMap::IDENTITY,
            residuals,
            Some(&self.cache),
        )
    }
}

/// DAC's upsampling: kernel 2·stride, padding ⌈stride/2⌉, and Higgs' output padding of
/// stride mod 2, so that the output is exactly `stride` times the input.
struct TransposedConv {
    weight: Tensor,
    bias: Tensor,
    stride: usize,
    cache: PackedPhaseCache,
}

impl TransposedConv {
    fn load(c_in: usize, c_out: usize, stride: usize, vb: VarBuilder) -> Result<Self> {
        Ok(Self {
            weight: weight_normed(&vb, (c_in, c_out, 2 * stride), 0)?,
            bias: vb.get(c_out, "bias")?,
            stride,
            cache: PackedPhaseCache::default(),
        })
    }

    /// [1, C_in, T] → [1, C_out, T · stride]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let s = self.stride;
        let frames = x.dim(2)?;
        // The output padding of an odd stride is the one more sample that a zero input
        // column after the last gives (a zero adds nothing to the samples before it), so the
        // kernels, which have no output padding, run on the input so extended.
        let x = if s % 2 == 1 {
            x.pad_with_zeros(2, 0, 1)?
        } else {
            x.clone()
        };
        let y = conv_transpose1d_fused(
            &x,
            &self.weight,
            Some(&self.bias),
            s,
            s.div_ceil(2),
            &InputMap::IDENTITY,
            Some(&self.cache),
        )?;
        y.narrow(2, 0, frames * s)
    }
}
