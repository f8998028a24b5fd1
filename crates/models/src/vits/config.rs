//! Hyperparameters of a Piper/VITS voice, recovered from tensor shapes and the `.onnx.json`.
//!
//! A Piper export carries no model config: layer counts, channel widths and kernel sizes are
//! read off the weights, the sample rate and speaker count off the voice json, and the few
//! values that leave no trace in the weights (dilations, upsampling strides) come from the
//! ONNX conv attributes when available and otherwise from the standard VITS/Piper values.
//! Anything that does not fit a known variant is rejected with the file and tensor named.

use std::collections::HashMap;
use std::path::Path;

use candle_core::Tensor;

use super::weights::{StructureHints, Weights};
use crate::error::ModelError;

/// Kind of HiFi-GAN residual block in the decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResBlockKind {
    /// `convs1`/`convs2`: dilated conv then dilation-1 conv per step (Piper "high").
    One,
    /// `convs`: one dilated conv per step (Piper "low"/"medium").
    Two,
}

#[derive(Debug, Clone, PartialEq)]
pub enum DurationPredictorConfig {
    /// Flow-based predictor (`dp.flows.*`), sampled in reverse from noise.
    Stochastic {
        filter_channels: usize,
        kernel_size: usize,
        /// Layers of each dilated depth-separable conv stack.
        dds_layers: usize,
        /// Indices of the stored ConvFlows in `dp.flows` (ascending; index 1 is unused).
        conv_flows: Vec<usize>,
        num_bins: usize,
        tail_bound: f32,
    },
    /// Plain conv predictor (`dp.conv_1`, `dp.conv_2`, `dp.proj`) that outputs log-durations.
    Deterministic {
        filter_channels: usize,
        kernel_size: usize,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct FlowConfig {
    /// Indices of the residual coupling layers in `flow.flows` (ascending).
    pub couplings: Vec<usize>,
    pub hidden_channels: usize,
    pub kernel_size: usize,
    pub wavenet_layers: usize,
    pub dilation_rate: usize,
    /// Couplings predict only a mean shift (Piper: always).
    pub mean_only: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DecoderConfig {
    pub initial_channels: usize,
    pub pre_kernel_size: usize,
    pub post_kernel_size: usize,
    pub post_bias: bool,
    pub upsample_rates: Vec<usize>,
    pub upsample_kernel_sizes: Vec<usize>,
    pub resblock: ResBlockKind,
    pub resblock_kernel_sizes: Vec<usize>,
    /// One list of dilations per resblock kernel.
    pub resblock_dilations: Vec<Vec<usize>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct VitsConfig {
    pub sample_rate: u32,
    pub n_vocab: usize,
    pub hidden_channels: usize,
    /// Channels of the latent z (and of m_p, logs_p).
    pub inter_channels: usize,
    /// Text-encoder feed-forward width.
    pub filter_channels: usize,
    pub n_heads: usize,
    pub n_layers: usize,
    pub ffn_kernel_size: usize,
    /// Relative attention window (offsets −window..=window).
    pub window_size: usize,
    pub duration_predictor: DurationPredictorConfig,
    pub flow: FlowConfig,
    pub decoder: DecoderConfig,
    pub num_speakers: usize,
    /// Speaker-embedding width; 0 for single-speaker voices.
    pub gin_channels: usize,
    /// Audio samples per acoustic frame (product of the upsample rates).
    pub hop_length: usize,
    /// Defaults from the voice json `inference` section.
    pub noise_scale: f32,
    pub length_scale: f32,
    pub noise_w: f32,
}

/// Tail bound of the duration predictor's splines (a constant of the VITS architecture).
const SPLINE_TAIL_BOUND: f32 = 5.0;

struct Shapes<'a> {
    tensors: &'a HashMap<String, Tensor>,
    file: &'a Path,
}

impl Shapes<'_> {
    fn has(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    fn get(&self, name: &str) -> Result<&[usize], ModelError> {
        self.tensors
            .get(name)
            .map(|t| t.dims())
            .ok_or_else(|| ModelError::MissingTensor {
                file: self.file.to_path_buf(),
                tensor: name.to_string(),
            })
    }

    /// Shape of `name`, required to have `rank` dimensions.
    fn dims(&self, name: &str, rank: usize) -> Result<Vec<usize>, ModelError> {
        let dims = self.get(name)?.to_vec();
        if dims.len() != rank {
            return Err(self.unsupported(name, format!("expected rank {rank}, got {dims:?}")));
        }
        Ok(dims)
    }

    /// Number of consecutive indices i = 0, 1, … for which `pattern(i)` exists.
    fn count(&self, pattern: impl Fn(usize) -> String) -> usize {
        (0..).take_while(|&i| self.has(&pattern(i))).count()
    }

    fn unsupported(&self, tensor: &str, reason: String) -> ModelError {
        ModelError::Tensor {
            file: self.file.to_path_buf(),
            tensor: tensor.to_string(),
            reason,
        }
    }
}

impl VitsConfig {
    /// The config of the voice whose weights are `weights`, with its `.onnx.json`
    /// (`voice_json`): the sizes read off the tensors' shapes, the structure values from the
    /// file's records where it has them, the rest from the json (see the module doc).
    pub fn from_weights(
        weights: &Weights,
        voice_json: &serde_json::Value,
    ) -> Result<Self, ModelError> {
        Self::infer(&weights.tensors, voice_json, &weights.hints, &weights.file)
    }

    /// Infers the configuration of the weights in `tensors` (read from `file`).
    fn infer(
        tensors: &HashMap<String, Tensor>,
        voice_json: &serde_json::Value,
        hints: &StructureHints,
        file: &Path,
    ) -> Result<Self, ModelError> {
        let s = Shapes { tensors, file };

        // Text encoder.
        let emb = s.dims("enc_p.emb.weight", 2)?;
        let (n_vocab, hidden) = (emb[0], emb[1]);
        let attn = |i: usize| format!("enc_p.encoder.attn_layers.{i}.conv_q.weight");
        let n_layers = s.count(attn);
        if n_layers == 0 {
            s.get(&attn(0))?;
        }
        let rel_name = "enc_p.encoder.attn_layers.0.emb_rel_k";
        let rel = s.dims(rel_name, 3)?;
        if rel[0] != 1 || rel[1] % 2 == 0 || rel[2] == 0 || hidden % rel[2] != 0 {
            return Err(s.unsupported(
                rel_name,
                format!("expected [1, 2·window+1, hidden/heads], got {rel:?}"),
            ));
        }
        let ffn_name = "enc_p.encoder.ffn_layers.0.conv_1.weight";
        let ffn = s.dims(ffn_name, 3)?;
        require_odd(&s, ffn_name, ffn[2])?;
        let proj = s.dims("enc_p.proj.weight", 3)?;
        if proj[0] % 2 != 0 {
            return Err(s.unsupported("enc_p.proj.weight", "odd output channels".into()));
        }
        let inter = proj[0] / 2;

        // Speakers.
        let json_speakers = voice_json
            .get("num_speakers")
            .and_then(|v| v.as_u64())
            .unwrap_or(1) as usize;
        let (num_speakers, gin_channels) = if s.has("emb_g.weight") {
            let g = s.dims("emb_g.weight", 2)?;
            if g[0] != json_speakers {
                return Err(s.unsupported(
                    "emb_g.weight",
                    format!("{} speakers but the voice json says {json_speakers}", g[0]),
                ));
            }
            (g[0], g[1])
        } else {
            if json_speakers > 1 {
                s.get("emb_g.weight")?;
            }
            (1, 0)
        };

        let duration_predictor = if s.has("dp.flows.0.m") || s.has("dp.pre.weight") {
            let pre = s.dims("dp.pre.weight", 3)?;
            let sep_name = "dp.convs.convs_sep.0.weight";
            let sep = s.dims(sep_name, 3)?;
            require_odd(&s, sep_name, sep[2])?;
            let dds_layers = s.count(|i| format!("dp.convs.convs_sep.{i}.weight"));
            let conv_flows: Vec<usize> = (1..32)
                .filter(|i| s.has(&format!("dp.flows.{i}.pre.weight")))
                .collect();
            let first = format!(
                "dp.flows.{}.proj.weight",
                conv_flows.first().copied().unwrap_or(3)
            );
            let flow_proj = s.dims(&first, 3)?;
            if (flow_proj[0] + 1) % 3 != 0 {
                return Err(s.unsupported(&first, "expected 3·bins − 1 outputs".into()));
            }
            s.get("dp.flows.0.m")?;
            s.get("dp.flows.0.logs")?;
            DurationPredictorConfig::Stochastic {
                filter_channels: pre[0],
                kernel_size: sep[2],
                dds_layers,
                conv_flows,
                num_bins: (flow_proj[0] + 1) / 3,
                tail_bound: SPLINE_TAIL_BOUND,
            }
        } else {
            let conv = s.dims("dp.conv_1.weight", 3)?;
            require_odd(&s, "dp.conv_1.weight", conv[2])?;
            DurationPredictorConfig::Deterministic {
                filter_channels: conv[0],
                kernel_size: conv[2],
            }
        };

        // Flow.
        let couplings: Vec<usize> = (0..64)
            .filter(|i| s.has(&format!("flow.flows.{i}.pre.weight")))
            .collect();
        let first = couplings.first().copied().unwrap_or(0);
        let pre = s.dims(&format!("flow.flows.{first}.pre.weight"), 3)?;
        let in_name = format!("flow.flows.{first}.enc.in_layers.0.weight");
        let in_layer = s.dims(&in_name, 3)?;
        require_odd(&s, &in_name, in_layer[2])?;
        let post_name = format!("flow.flows.{first}.post.weight");
        let post = s.dims(&post_name, 3)?;
        let half = inter / 2;
        let mean_only = match post[0] {
            p if p == half => true,
            p if p == 2 * half => false,
            p => return Err(s.unsupported(&post_name, format!("{p} outputs for {half} channels"))),
        };
        let flow = FlowConfig {
            hidden_channels: pre[0],
            kernel_size: in_layer[2],
            wavenet_layers: s.count(|i| format!("flow.flows.{first}.enc.in_layers.{i}.weight")),
            dilation_rate: hints.wavenet_dilation_rate.unwrap_or(1),
            mean_only,
            couplings,
        };

        let decoder = infer_decoder(&s, hints)?;
        let hop_length = decoder.upsample_rates.iter().product();

        let sample_rate = voice_json
            .pointer("/audio/sample_rate")
            .and_then(|v| v.as_u64())
            .ok_or_else(|| ModelError::Config("voice json lacks audio.sample_rate".into()))?
            as u32;
        let inference = |key: &str, default: f32| {
            voice_json
                .pointer(&format!("/inference/{key}"))
                .and_then(|v| v.as_f64())
                .map_or(default, |v| v as f32)
        };

        Ok(Self {
            sample_rate,
            n_vocab,
            hidden_channels: hidden,
            inter_channels: inter,
            filter_channels: ffn[0],
            n_heads: hidden / rel[2],
            n_layers,
            ffn_kernel_size: ffn[2],
            window_size: (rel[1] - 1) / 2,
            duration_predictor,
            flow,
            decoder,
            num_speakers,
            gin_channels,
            hop_length,
            noise_scale: inference("noise_scale", 0.667),
            length_scale: inference("length_scale", 1.0),
            noise_w: inference("noise_w", 0.8),
        })
    }
}

fn require_odd(s: &Shapes, name: &str, kernel: usize) -> Result<(), ModelError> {
    if kernel % 2 == 1 {
        Ok(())
    } else {
        Err(s.unsupported(name, format!("even kernel size {kernel} is not supported")))
    }
}

fn infer_decoder(s: &Shapes, hints: &StructureHints) -> Result<DecoderConfig, ModelError> {
    let pre = s.dims("dec.conv_pre.weight", 3)?;
    require_odd(s, "dec.conv_pre.weight", pre[2])?;
    let post = s.dims("dec.conv_post.weight", 3)?;
    require_odd(s, "dec.conv_post.weight", post[2])?;

    let n_ups = s.count(|i| format!("dec.ups.{i}.weight"));
    if n_ups == 0 {
        s.get("dec.ups.0.weight")?;
    }
    let mut upsample_kernel_sizes = Vec::new();
    for i in 0..n_ups {
        upsample_kernel_sizes.push(s.dims(&format!("dec.ups.{i}.weight"), 3)?[2]);
    }
    // Piper/VITS exports use kernel = 2 × stride, so the stride is implied when not recorded.
    let upsample_rates = match &hints.upsample_rates {
        Some(rates) => rates.clone(),
        None => upsample_kernel_sizes.iter().map(|k| k / 2).collect(),
    };
    for (i, (&u, &k)) in upsample_rates
        .iter()
        .zip(&upsample_kernel_sizes)
        .enumerate()
    {
        if u == 0 || k < u || (k - u) % 2 != 0 {
            return Err(s.unsupported(
                &format!("dec.ups.{i}.weight"),
                format!("kernel {k} with stride {u} does not upsample exactly"),
            ));
        }
    }

    let (resblock, conv) = if s.has("dec.resblocks.0.convs1.0.weight") {
        (ResBlockKind::One, "convs1")
    } else {
        s.get("dec.resblocks.0.convs.0.weight")?;
        (ResBlockKind::Two, "convs")
    };
    let n_resblocks = s.count(|i| format!("dec.resblocks.{i}.{conv}.0.weight"));
    if !n_resblocks.is_multiple_of(n_ups) {
        return Err(s.unsupported(
            &format!("dec.resblocks.{n_resblocks}.{conv}.0.weight"),
            format!("{n_resblocks} resblocks do not divide into {n_ups} stages"),
        ));
    }
    let kernels_per_stage = n_resblocks / n_ups;
    let mut resblock_kernel_sizes = Vec::new();
    let mut steps = Vec::new();
    for j in 0..kernels_per_stage {
        let name = format!("dec.resblocks.{j}.{conv}.0.weight");
        let k = s.dims(&name, 3)?[2];
        require_odd(s, &name, k)?;
        resblock_kernel_sizes.push(k);
        steps.push(s.count(|n| format!("dec.resblocks.{j}.{conv}.{n}.weight")));
    }
    let resblock_dilations = match &hints.resblock_dilations {
        Some(d) => d.clone(),
        None => standard_dilations(resblock, kernels_per_stage).ok_or_else(|| {
            s.unsupported(
                &format!("dec.resblocks.0.{conv}.0.weight"),
                format!("no standard dilations for {kernels_per_stage} resblock kernels"),
            )
        })?,
    };
    for (j, d) in resblock_dilations.iter().enumerate() {
        if j >= steps.len() || d.len() != steps[j] {
            return Err(s.unsupported(
                &format!("dec.resblocks.{j}.{conv}.0.weight"),
                format!("dilations {d:?} do not match the stored convolutions"),
            ));
        }
    }

    Ok(DecoderConfig {
        initial_channels: pre[0],
        pre_kernel_size: pre[2],
        post_kernel_size: post[2],
        post_bias: s.has("dec.conv_post.bias"),
        upsample_rates,
        upsample_kernel_sizes,
        resblock,
        resblock_kernel_sizes,
        resblock_dilations,
    })
}

/// The dilations every released VITS/Piper config uses for each resblock type.
fn standard_dilations(kind: ResBlockKind, kernels: usize) -> Option<Vec<Vec<usize>>> {
    match (kind, kernels) {
        (ResBlockKind::One, n) => Some(vec![vec![1, 3, 5]; n]),
        (ResBlockKind::Two, 3) => Some(vec![vec![1, 2], vec![2, 6], vec![3, 12]]),
        _ => None,
    }
}
