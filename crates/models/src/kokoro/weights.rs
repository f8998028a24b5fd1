//! Kokoro's parameters by name, restored to `f32` from whichever `.onnx` export holds them.
//!
//! Kokoro is distributed as ONNX graphs (kokoro-onnx's `kokoro-v1.0.onnx`, its fp16 and int8
//! files); this module turns any of them into one map of `f32` tensors under canonical names,
//! so the model code never sees quantization or export quirks. Each initializer is judged by
//! the node that consumes it, and dequantized the way that node would:
//!
//! - `ConvInteger` (input 1): uint8/int8 `q`, per-tensor `scale` (`<q>_scale`, the
//!   onnxruntime quantizer's name) and zero point (node input 3): `w = (q − zp) · scale`.
//!   Weight norm is already folded in. The float bias stays as stored (onnxruntime rounds it
//!   onto the `x_scale · w_scale` grid at run time; a float port adds it unrounded).
//! - `MatMulInteger` (input 1): int8 `[K, N]`, a scale per output column (`<q>_scale`), zero
//!   point input 3 → a linear weight, stored `[N, K]` like PyTorch's `nn.Linear`.
//! - `DynamicQuantizeLSTM`: `W` int8 `[2, in, 4H]` and `R` int8 `[2, H, 4H]` (the transpose of
//!   ONNX `LSTM`'s layout) with a scale and zero point per direction (inputs 8–11), float
//!   `B [2, 8H]` → ONNX layout `W [2, 4H, in]`, `R [2, 4H, H]`, gate order i, o, f, c.
//! - `Gather` of an int8 table followed by `DequantizeLinear`: `(q − zp) · scale` from the
//!   `DequantizeLinear` node.
//! - Float graphs: `Conv`/`ConvTranspose` inputs 1/2, `MatMul` input 1 (`[K, N]`, stored
//!   transposed), `Gemm` inputs 1/2 (respecting `transB`), `LSTM` inputs 1–3, `Gather` input 0;
//!   fp16/bf16 initializers are widened to `f32`.
//!
//! # Canonical names
//!
//! An initializer that carries its PyTorch state-dict name keeps it (quantized ones lose the
//! `_quantized` suffix); an anonymous one (`onnx::MatMul_6547`, `/encoder/F0.0/Mul_output_0`,
//! weight-norm results) is named after its consumer's module scope plus a role suffix:
//! `weight`/`bias` for convolutions, linears and embeddings; `W`, `R`, `B` for LSTMs (always).
//! Scopes like `/encoder/text_encoder/cnn.0/cnn.0.0/Conv` collapse to `text_encoder.cnn.0.0`,
//! the repeat suffix of a shared layer's `query_3` is dropped. The export wraps the model as
//! `encoder` (bert, bert_encoder, text_encoder, predictor — with the predictor's `F0`, `N`,
//! `F0_proj`, `N_proj` and `shared` hoisted to `encoder` in node names) and `decoder.decoder`;
//! both wrappers are removed, so names match hexgrad's `KModel` state dict (`bert.`,
//! `bert_encoder.`, `text_encoder.`, `predictor.`, `decoder.`) except that LSTMs are `W/R/B`
//! and weight-normed convolutions hold the folded `weight` (no `weight_g`/`weight_v`).
//!
//! The names in `kokoro-v1.0.int8.onnx` (430 tensors; `*` = every index in the range; `[C]`
//! per-channel shapes, Linear `[out, in]`, Conv `[out, in/groups, k]`, ConvTranspose
//! `[in, out/groups, k]`):
//!
//! | name | shape |
//! |---|---|
//! | `bert.embeddings.word_embeddings.weight` | [178, 128] |
//! | `bert.embeddings.position_embeddings.weight` | [512, 128] |
//! | `bert.embeddings.token_type_embeddings.weight` | [2, 128] |
//! | `bert.embeddings.LayerNorm.{weight,bias}` | [128] |
//! | `bert.encoder.embedding_hidden_mapping_in.{weight,bias}` | [768, 128], [768] |
//! | `bert.encoder.albert_layer_groups.0.albert_layers.0.` + `attention.{query,key,value,dense}.{weight,bias}` | [768, 768], [768] |
//! | … `attention.LayerNorm.{weight,bias}`, `full_layer_layer_norm.{weight,bias}` | [768] |
//! | … `ffn.{weight,bias}` / `ffn_output.{weight,bias}` | [2048, 768], [2048] / [768, 2048], [768] |
//! | `bert_encoder.{weight,bias}` | [512, 768], [512] |
//! | `text_encoder.embedding.weight` | [178, 512] |
//! | `text_encoder.cnn.{0,1,2}.0.{weight,bias}` | [512, 512, 5], [512] |
//! | `text_encoder.cnn.{0,1,2}.1.{gamma,beta}` | [512] |
//! | `text_encoder.lstm.{W,R,B}` | [2, 1024, 512], [2, 1024, 256], [2, 2048] |
//! | `predictor.text_encoder.lstms.{0,2,4}.{W,R,B}` | [2, 1024, 640], [2, 1024, 256], [2, 2048] |
//! | `predictor.text_encoder.lstms.{1,3,5}.fc.{weight,bias}` | [1024, 128], [1024] |
//! | `predictor.lstm.{W,R,B}`, `predictor.shared.{W,R,B}` | [2, 1024, 640], [2, 1024, 256], [2, 2048] |
//! | `predictor.duration_proj.linear_layer.{weight,bias}` | [50, 512], [50] |
//! | `predictor.{F0,N}.0.conv{1,2}.{weight,bias}` | [512, 512, 3], [512] |
//! | `predictor.{F0,N}.0.norm{1,2}.fc.{weight,bias}` | [1024, 128], [1024] |
//! | `predictor.{F0,N}.1.conv1.{weight,bias}` | [256, 512, 3], [256] |
//! | `predictor.{F0,N}.1.conv2.{weight,bias}` | [256, 256, 3], [256] |
//! | `predictor.{F0,N}.1.conv1x1.weight` | [256, 512, 1] |
//! | `predictor.{F0,N}.1.pool.{weight,bias}` | [512, 1, 3], [512] |
//! | `predictor.{F0,N}.1.norm1.fc.{weight,bias}` | [1024, 128], [1024] |
//! | `predictor.{F0,N}.1.norm2.fc.{weight,bias}` | [512, 128], [512] |
//! | `predictor.{F0,N}.2.conv{1,2}.{weight,bias}` | [256, 256, 3], [256] |
//! | `predictor.{F0,N}.2.norm{1,2}.fc.{weight,bias}` | [512, 128], [512] |
//! | `predictor.{F0,N}_proj.{weight,bias}` | [1, 256, 1], [1] |
//! | `decoder.F0_conv.{weight,bias}`, `decoder.N_conv.{weight,bias}` | [1, 1, 3], [1] |
//! | `decoder.asr_res.0.{weight,bias}` | [64, 512, 1], [64] |
//! | `decoder.encode.conv1.{weight,bias}` | [1024, 514, 3], [1024] |
//! | `decoder.encode.conv2.{weight,bias}` | [1024, 1024, 3], [1024] |
//! | `decoder.encode.conv1x1.weight` | [1024, 514, 1] |
//! | `decoder.encode.norm1.fc.{weight,bias}`, `decoder.encode.norm2.fc.{weight,bias}` | [1028, 128], [1028]; [2048, 128], [2048] |
//! | `decoder.decode.{0,1,2}.conv1.{weight,bias}` | [1024, 1090, 3], [1024] |
//! | `decoder.decode.{0,1,2}.conv2.{weight,bias}` | [1024, 1024, 3], [1024] |
//! | `decoder.decode.{0,1,2}.conv1x1.weight` | [1024, 1090, 1] |
//! | `decoder.decode.{0,1,2}.norm1.fc.{weight,bias}` / `norm2.fc` | [2180, 128], [2180] / [2048, 128], [2048] |
//! | `decoder.decode.3.conv1.{weight,bias}`, `conv2` | [512, 1090, 3], [512]; [512, 512, 3], [512] |
//! | `decoder.decode.3.conv1x1.weight` | [512, 1090, 1] |
//! | `decoder.decode.3.pool.{weight,bias}` | [1090, 1, 3], [1090] |
//! | `decoder.decode.3.norm1.fc.{weight,bias}` / `norm2.fc` | [2180, 128], [2180] / [1024, 128], [1024] |
//! | `decoder.generator.m_source.l_linear.{weight,bias}` | [1, 9], [1] |
//! | `decoder.generator.ups.0.{weight,bias}` | [512, 256, 20], [256] |
//! | `decoder.generator.ups.1.{weight,bias}` | [256, 128, 12], [128] |
//! | `decoder.generator.noise_convs.0.{weight,bias}` | [256, 22, 12], [256] |
//! | `decoder.generator.noise_convs.1.{weight,bias}` | [128, 22, 1], [128] |
//! | `decoder.generator.resblocks.{0,1,2}.convs{1,2}.{0,1,2}.{weight,bias}` | [256, 256, k], [256] (k = 3, 7, 11 for blocks 0, 1, 2) |
//! | `decoder.generator.resblocks.{0,1,2}.adain{1,2}.{0,1,2}.fc.{weight,bias}` | [512, 128], [512] |
//! | `decoder.generator.resblocks.{0,1,2}.alpha{1,2}.{0,1,2}` | [1, 256, 1] |
//! | `decoder.generator.resblocks.{3,4,5}.…` | as above with 128 channels (fc [256, 128]) |
//! | `decoder.generator.noise_res.0.{convs1,convs2}.*`, `adain{1,2}.*`, `alpha{1,2}.*` | 256 channels, k = 7 |
//! | `decoder.generator.noise_res.1.…` | 128 channels, k = 11 |
//! | `decoder.generator.conv_post.{weight,bias}` | [22, 128, 7], [22] |
//! | `decoder.generator.stft.window` | [20] (periodic Hann of the forward STFT) |
//! | `decoder.generator.stft.istft.stft.inverse_basis` | [22, 1, 20] |
//! | `decoder.generator.stft.istft.stft.window_sum` | [20] |
//!
//! [`Weights::names_with_prefix`] lists them; a test checks the count and a sample of this
//! table against the file.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use candle_core::{Device, Tensor};

use super::dequantize::{conv_attributes, plan_for, state_dict_name, ConvAttributes, Layout, Plan};
use crate::error::ModelError;
use crate::onnx::{consumers, read_graph, GraphProto, TensorProto};

/// Kokoro's parameters as `f32` tensors on one device, by canonical name (see the module doc):
/// the weights argument of [`super::Kokoro::load`].
#[derive(Clone)]
pub struct Weights {
    file: PathBuf,
    device: Device,
    tensors: HashMap<String, Tensor>,
    conv_attributes: HashMap<String, ConvAttributes>,
}

impl Weights {
    /// Reads and dequantizes a Kokoro `.onnx` file.
    pub fn from_onnx(path: &Path, device: &Device) -> Result<Self, ModelError> {
        let graph = read_graph(path)?;
        Self::from_graph(&graph, path, device)
    }

    /// Tensors already named canonically (synthetic weights in tests); `file` names the
    /// source in errors.
    #[cfg(test)]
    pub(crate) fn from_tensors(file: &Path, tensors: HashMap<String, Tensor>) -> Self {
        Self {
            file: file.to_path_buf(),
            device: Device::Cpu,
            tensors,
            conv_attributes: HashMap::new(),
        }
    }

    /// The tensor called `name`, or an error naming it and the file.
    pub(crate) fn get(&self, name: &str) -> Result<Tensor, ModelError> {
        self.tensors
            .get(name)
            .cloned()
            .ok_or_else(|| ModelError::MissingTensor {
                file: self.file.clone(),
                tensor: name.to_string(),
            })
    }

    /// [`Weights::get`], checked against the shape the model expects.
    pub(crate) fn get_shaped(&self, name: &str, shape: &[usize]) -> Result<Tensor, ModelError> {
        let t = self.get(name)?;
        if t.dims() != shape {
            return Err(ModelError::Tensor {
                file: self.file.clone(),
                tensor: name.to_string(),
                reason: format!("has shape {:?}, the model needs {shape:?}", t.dims()),
            });
        }
        Ok(t)
    }

    /// The names under `prefix`, sorted.
    #[cfg(test)]
    pub(crate) fn names_with_prefix(&self, prefix: &str) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .tensors
            .keys()
            .map(String::as_str)
            .filter(|n| n.starts_with(prefix))
            .collect();
        names.sort_unstable();
        names
    }

    /// The convolution attributes of module `module` (`decoder.generator.ups.0`), when the
    /// source was an ONNX graph.
    pub(crate) fn conv_attributes(&self, module: &str) -> Option<&ConvAttributes> {
        self.conv_attributes.get(module)
    }

    /// The file the weights came from.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// The device the tensors are on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    fn from_graph(graph: &GraphProto, path: &Path, device: &Device) -> Result<Self, ModelError> {
        let consumers = consumers(graph);
        let inits: HashMap<&str, &TensorProto> = graph
            .initializer
            .iter()
            .map(|t| (t.name.as_str(), t))
            .collect();
        let fail = |tensor: &str, reason: String| ModelError::Tensor {
            file: path.to_path_buf(),
            tensor: tensor.to_string(),
            reason,
        };

        // Plan: what each initializer becomes, judged from its consumers. Scales and zero
        // points are parts of the tensors they dequantize, not parameters of their own.
        let mut plans: Vec<(&TensorProto, Plan)> = Vec::new();
        let mut parts: HashSet<String> = HashSet::new();
        for init in &graph.initializer {
            let users = consumers
                .get(init.name.as_str())
                .map_or(&[][..], Vec::as_slice);
            let mut found: Option<Plan> = None;
            for &(node, index) in users {
                let Some(plan) = plan_for(init, node, index, &consumers)
                    .map_err(|reason| fail(&init.name, reason))?
                else {
                    continue;
                };
                match &found {
                    None => found = Some(plan),
                    Some(p) if *p == plan => {}
                    Some(p) => {
                        return Err(fail(
                            &init.name,
                            format!("feeds two parameters: {} and {}", p.name, plan.name),
                        ))
                    }
                }
            }
            if let Some(plan) = found {
                parts.extend(plan.parts().into_iter().map(String::from));
                plans.push((init, plan));
            }
        }
        // Float initializers that carry a state-dict name but feed no recognised node (Snake
        // alphas, quantized-conv biases, norms, the iSTFT buffers).
        for init in &graph.initializer {
            if !init.is_float()
                || parts.contains(&init.name)
                || plans.iter().any(|(t, _)| t.name == init.name)
                || !consumers.contains_key(init.name.as_str())
            {
                continue;
            }
            if let Some(name) = state_dict_name(&init.name) {
                plans.push((init, Plan::float(name, Layout::AsStored)));
            }
        }

        let mut tensors = HashMap::with_capacity(plans.len());
        for (init, plan) in plans {
            let tensor = plan
                .realize(init, &inits, device)
                .map_err(|reason| fail(&init.name, reason))?;
            if tensors.insert(plan.name.clone(), tensor).is_some() {
                return Err(fail(
                    &init.name,
                    format!("a second initializer maps to {}", plan.name),
                ));
            }
        }
        Ok(Self {
            file: path.to_path_buf(),
            device: device.clone(),
            tensors,
            conv_attributes: conv_attributes(graph),
        })
    }
}

#[cfg(test)]
mod tests;
