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

use crate::error::ModelError;
use crate::onnx::{consumers, read_graph, GraphProto, NodeProto, TensorProto};

/// Top-level modules of the export's `encoder` wrapper that are the predictor's children
/// (`predictor.F0Ntrain` inlined into the wrapper's forward).
const HOISTED_PREDICTOR_MODULES: [&str; 5] = ["F0", "N", "F0_proj", "N_proj", "shared"];
/// The onnxruntime quantizer's names for a quantized tensor and its scale; the f32 rewrite of
/// the int8 graph (`scripts/kokoro_reference.py rewrite`) appends `_dequantized`.
const QUANTIZED_SUFFIXES: [&str; 2] = ["_quantized_dequantized", "_quantized"];
const SCALE_SUFFIX: &str = "_scale";

/// Attributes of one convolution node, by canonical module name: what the weights alone do
/// not reveal, for cross-checking a [`super::config::Config`] against the file.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ConvAttributes {
    pub strides: Vec<i64>,
    pub dilations: Vec<i64>,
    pub pads: Vec<i64>,
    pub group: i64,
}

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

/// How a stored tensor's axes become the canonical layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    AsStored,
    /// A 2-d `[K, N]` matrix-product operand → `[N, K]`.
    Transpose2,
    /// `[D, A, B]` → `[D, B, A]` (DynamicQuantizeLSTM's W and R).
    TransposeLast2,
}

/// How the quantized values become `f32`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Dequant {
    Float,
    /// `(q − zp) · scale` with one scale and zero point for the whole tensor.
    PerTensor {
        scale: String,
        zero_point: Option<String>,
    },
    /// One scale and zero point per index of `axis` of the stored layout.
    PerAxis {
        axis: usize,
        scale: String,
        zero_point: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Plan {
    name: String,
    dequant: Dequant,
    layout: Layout,
}

impl Plan {
    fn float(name: String, layout: Layout) -> Self {
        Self {
            name,
            dequant: Dequant::Float,
            layout,
        }
    }

    /// The initializers this plan reads besides the tensor itself.
    fn parts(&self) -> Vec<&str> {
        match &self.dequant {
            Dequant::Float => vec![],
            Dequant::PerTensor { scale, zero_point }
            | Dequant::PerAxis {
                scale, zero_point, ..
            } => std::iter::once(scale.as_str())
                .chain(zero_point.as_deref())
                .collect(),
        }
    }

    fn realize(
        &self,
        init: &TensorProto,
        inits: &HashMap<&str, &TensorProto>,
        device: &Device,
    ) -> Result<Tensor, String> {
        let shape = init.shape()?;
        let lookup = |name: &str| -> Result<&TensorProto, String> {
            inits
                .get(name)
                .copied()
                .ok_or_else(|| format!("its quantization parameter {name} is not in the file"))
        };
        let mut values = match &self.dequant {
            Dequant::Float => init.to_f32()?,
            Dequant::PerTensor { scale, zero_point } => {
                let scale = single(lookup(scale)?.to_f32()?, scale)?;
                let zp = match zero_point {
                    Some(z) => single(lookup(z)?.to_i64()?, z)? as f32,
                    None => 0.0,
                };
                let mut q = init.int8_as_f32()?;
                q.iter_mut().for_each(|v| *v = (*v - zp) * scale);
                q
            }
            Dequant::PerAxis {
                axis,
                scale,
                zero_point,
            } => {
                let n = *shape.get(*axis).ok_or("has too few dimensions")?;
                let scales = lookup(scale)?.to_f32()?;
                let zps: Vec<f32> = match zero_point {
                    Some(z) => lookup(z)?.to_i64()?.into_iter().map(|v| v as f32).collect(),
                    None => vec![0.0; n],
                };
                let (scales, zps) = (
                    broadcast(scales, n, scale)?,
                    broadcast(zps, n, "zero point")?,
                );
                let inner: usize = shape[axis + 1..].iter().product();
                let mut q = init.int8_as_f32()?;
                if inner > 0 {
                    // Index c of the axis owns `inner` consecutive values, n of them per block.
                    for block in q.chunks_mut(n * inner) {
                        for (c, run) in block.chunks_mut(inner).enumerate() {
                            let (zp, s) = (zps[c], scales[c]);
                            run.iter_mut().for_each(|v| *v = (*v - zp) * s);
                        }
                    }
                }
                q
            }
        };
        let shape = match self.layout {
            Layout::AsStored => shape,
            Layout::Transpose2 => {
                let [k, n] = shape[..] else {
                    return Err(format!("is {shape:?}, not a matrix"));
                };
                values = transpose(&values, 1, k, n);
                vec![n, k]
            }
            Layout::TransposeLast2 => {
                let [d, a, b] = shape[..] else {
                    return Err(format!("is {shape:?}, not three-dimensional"));
                };
                values = transpose(&values, d, a, b);
                vec![d, b, a]
            }
        };
        Tensor::from_vec(values, shape, device).map_err(|e| e.to_string())
    }
}

/// What `init` is to `node`, which reads it as input `index`; `None` when it is no parameter
/// there (a shape, a scale, a graph constant).
fn plan_for(
    init: &TensorProto,
    node: &NodeProto,
    index: usize,
    consumers: &HashMap<&str, Vec<(&NodeProto, usize)>>,
) -> Result<Option<Plan>, String> {
    let input = |i: usize| node.input.get(i).filter(|s| !s.is_empty()).cloned();
    let module = || {
        canonical_module(&node.name)
            .ok_or_else(|| format!("its consumer {} has no module scope", node.name))
    };
    // A named initializer keeps its name; an anonymous one is named after its consumer.
    let named_or = |suffix: &str| -> Result<String, String> {
        match state_dict_name(without_quantized_suffix(&init.name)) {
            Some(name) => Ok(name),
            None => Ok(format!("{}.{suffix}", module()?)),
        }
    };
    let base_scale = || format!("{}{SCALE_SUFFIX}", without_quantized_suffix(&init.name));
    let op = node.op_type.as_str();
    let plan = match (op, index) {
        ("Conv" | "ConvTranspose", 1) if init.is_float() => {
            Plan::float(named_or("weight")?, Layout::AsStored)
        }
        ("Conv" | "ConvTranspose", 2) if init.is_float() => {
            Plan::float(named_or("bias")?, Layout::AsStored)
        }
        ("ConvInteger", 1) => Plan {
            name: named_or("weight")?,
            dequant: Dequant::PerTensor {
                scale: base_scale(),
                zero_point: input(3),
            },
            layout: Layout::AsStored,
        },
        ("MatMul", 1) if init.is_float() => Plan::float(named_or("weight")?, Layout::Transpose2),
        ("MatMulInteger", 1) => Plan {
            name: named_or("weight")?,
            dequant: Dequant::PerAxis {
                axis: 1,
                scale: base_scale(),
                zero_point: input(3),
            },
            layout: Layout::Transpose2,
        },
        ("Gemm", 1) if init.is_float() => {
            let trans_b = node.attribute("transB").is_some_and(|a| a.i != 0);
            let layout = if trans_b {
                Layout::AsStored
            } else {
                Layout::Transpose2
            };
            Plan::float(named_or("weight")?, layout)
        }
        ("Gemm", 2) if init.is_float() => Plan::float(named_or("bias")?, Layout::AsStored),
        ("LSTM", 1..=3) if init.is_float() => {
            let role = ["W", "R", "B"][index - 1];
            Plan::float(format!("{}.{role}", module()?), Layout::AsStored)
        }
        ("DynamicQuantizeLSTM", 1 | 2) => {
            let (role, scale, zp) = if index == 1 {
                ("W", 8, 9)
            } else {
                ("R", 10, 11)
            };
            Plan {
                name: format!("{}.{role}", module()?),
                dequant: Dequant::PerAxis {
                    axis: 0,
                    scale: input(scale).ok_or("its LSTM node has no weight scale")?,
                    zero_point: input(zp),
                },
                layout: Layout::TransposeLast2,
            }
        }
        ("DynamicQuantizeLSTM", 3) => Plan::float(format!("{}.B", module()?), Layout::AsStored),
        ("Gather", 0) if init.is_float() => Plan::float(named_or("weight")?, Layout::AsStored),
        ("Gather", 0) if init.is_int8() => {
            // The table's scale and zero point sit on the DequantizeLinear that reads the rows.
            let output = node.output.first().ok_or("its Gather has no output")?;
            let dq = consumers
                .get(output.as_str())
                .into_iter()
                .flatten()
                .find(|(n, i)| n.op_type == "DequantizeLinear" && *i == 0)
                .map(|(n, _)| *n)
                .ok_or("is an int8 table whose rows no DequantizeLinear reads")?;
            let dq_input = |i: usize| dq.input.get(i).filter(|s| !s.is_empty()).cloned();
            Plan {
                name: named_or("weight")?,
                dequant: Dequant::PerTensor {
                    scale: dq_input(1).ok_or("its DequantizeLinear has no scale")?,
                    zero_point: dq_input(2),
                },
                layout: Layout::AsStored,
            }
        }
        ("STFT", 2) if init.is_float() => {
            Plan::float(format!("{}.stft.window", module()?), Layout::AsStored)
        }
        _ => return Ok(None),
    };
    Ok(Some(plan))
}

fn without_quantized_suffix(name: &str) -> &str {
    QUANTIZED_SUFFIXES
        .iter()
        .find_map(|s| name.strip_suffix(s))
        .unwrap_or(name)
}

/// The canonical name of an initializer that carries a state-dict name (`encoder.bert.…`,
/// `decoder.decoder.…`), without the export's wrappers; `None` for anonymous ones.
fn state_dict_name(name: &str) -> Option<String> {
    if name.contains('/') || name.contains("::") || name.ends_with(SCALE_SUFFIX) {
        return None;
    }
    let parts: Vec<&str> = name.split('.').collect();
    let stripped = strip_wrappers(&parts)?;
    Some(stripped.join("."))
}

/// A node's module scope, canonically named: `/encoder/text_encoder/cnn.0/cnn.0.0/Conv` →
/// `text_encoder.cnn.0.0`; `/encoder/bert/…/attention/query_3/MatMul` → `bert.….attention.query`.
fn canonical_module(node_name: &str) -> Option<String> {
    let scopes: Vec<&str> = node_name.trim_start_matches('/').split('/').collect();
    if scopes.len() < 2 || scopes.iter().any(|p| p.is_empty()) {
        return None;
    }
    let scopes = &scopes[..scopes.len() - 1];
    let mut kept: Vec<&str> = Vec::with_capacity(scopes.len());
    for (i, scope) in scopes.iter().enumerate() {
        // `cnn.0/cnn.0.0`: a child scope that spells out its parent's name replaces it.
        if scopes
            .get(i + 1)
            .is_some_and(|next| next.starts_with(&format!("{scope}.")))
        {
            continue;
        }
        kept.push(strip_repeat_suffix(scope));
    }
    let dotted: Vec<&str> = kept.iter().flat_map(|s| s.split('.')).collect();
    Some(strip_wrappers(&dotted)?.join("."))
}

/// `query_3` → `query`: the exporter's suffix for the n-th call of one module.
fn strip_repeat_suffix(scope: &str) -> &str {
    match scope.rsplit_once('_') {
        Some((head, tail))
            if !head.is_empty() && !tail.is_empty() && tail.bytes().all(|b| b.is_ascii_digit()) =>
        {
            head
        }
        _ => scope,
    }
}

/// Removes the export's `encoder` / `decoder.decoder` wrappers from a dotted path, putting
/// the hoisted predictor modules back under `predictor`.
fn strip_wrappers<'a>(parts: &[&'a str]) -> Option<Vec<&'a str>> {
    match parts {
        ["encoder", first, ..] if HOISTED_PREDICTOR_MODULES.contains(first) => {
            let mut v = vec!["predictor"];
            v.extend_from_slice(&parts[1..]);
            Some(v)
        }
        ["encoder", _, ..] => Some(parts[1..].to_vec()),
        ["decoder", "decoder", _, ..] => Some(parts[1..].to_vec()),
        [] => None,
        _ => Some(parts.to_vec()),
    }
}

fn conv_attributes(graph: &GraphProto) -> HashMap<String, ConvAttributes> {
    let mut map = HashMap::new();
    for node in &graph.node {
        if !matches!(
            node.op_type.as_str(),
            "Conv" | "ConvInteger" | "ConvTranspose"
        ) {
            continue;
        }
        let Some(module) = canonical_module(&node.name) else {
            continue;
        };
        let ints = |name: &str| {
            node.attribute(name)
                .map(|a| a.ints.clone())
                .unwrap_or_default()
        };
        map.insert(
            module,
            ConvAttributes {
                strides: ints("strides"),
                dilations: ints("dilations"),
                pads: ints("pads"),
                group: node.attribute("group").map_or(1, |a| a.i),
            },
        );
    }
    map
}

fn single<T: Copy>(values: Vec<T>, name: &str) -> Result<T, String> {
    match values[..] {
        [v] => Ok(v),
        _ => Err(format!("{name} holds {} values, not one", values.len())),
    }
}

/// Per-axis parameters: `n` values, or one for all.
fn broadcast(values: Vec<f32>, n: usize, name: &str) -> Result<Vec<f32>, String> {
    match values.len() {
        len if len == n => Ok(values),
        1 => Ok(vec![values[0]; n]),
        len => Err(format!("{name} holds {len} values for an axis of {n}")),
    }
}

/// `batch` row-major `[rows, cols]` matrices, each transposed.
fn transpose(values: &[f32], batch: usize, rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0f32; values.len()];
    for b in 0..batch {
        let (src, dst) = (
            &values[b * rows * cols..(b + 1) * rows * cols],
            &mut out[b * rows * cols..(b + 1) * rows * cols],
        );
        for r in 0..rows {
            for c in 0..cols {
                dst[c * rows + r] = src[r * cols + c];
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::{data_type, AttributeProto};
    use prost::bytes::Bytes;

    fn init(name: &str, data_type: i32, dims: &[i64], raw: Vec<u8>) -> TensorProto {
        TensorProto {
            dims: dims.to_vec(),
            data_type,
            name: name.into(),
            raw_data: Bytes::from(raw),
            ..Default::default()
        }
    }

    fn f32s(name: &str, dims: &[i64], values: &[f32]) -> TensorProto {
        init(
            name,
            data_type::FLOAT,
            dims,
            values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        )
    }

    fn node(name: &str, op: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
        NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            name: name.into(),
            op_type: op.into(),
            attribute: vec![],
        }
    }

    fn values(w: &Weights, name: &str) -> (Vec<usize>, Vec<f32>) {
        let t = w.get(name).unwrap();
        (
            t.dims().to_vec(),
            t.flatten_all().unwrap().to_vec1().unwrap(),
        )
    }

    #[test]
    fn scopes_collapse_to_state_dict_modules() {
        for (node, module) in [
            ("/encoder/text_encoder/cnn.0/cnn.0.0/Conv_quant", "text_encoder.cnn.0.0"),
            ("/decoder/decoder/generator/ups.0/ConvTranspose", "decoder.generator.ups.0"),
            ("/decoder/decoder/asr_res/asr_res.0/Conv_quant", "decoder.asr_res.0"),
            ("/encoder/F0.1/conv1x1/Conv_quant", "predictor.F0.1.conv1x1"),
            ("/encoder/shared/LSTM_quant", "predictor.shared"),
            ("/encoder/N_proj/Conv_quant", "predictor.N_proj"),
            ("/encoder/predictor/lstm/LSTM_quant", "predictor.lstm"),
            (
                "/encoder/bert/encoder/albert_layer_groups.0/albert_layers.0/attention/query_11/MatMul_quant",
                "bert.encoder.albert_layer_groups.0.albert_layers.0.attention.query",
            ),
            (
                "/encoder/bert/encoder/albert_layer_groups.0/albert_layers.0/ffn_output/MatMul_quant",
                "bert.encoder.albert_layer_groups.0.albert_layers.0.ffn_output",
            ),
            ("/encoder/bert_encoder/MatMul_quant", "bert_encoder"),
            ("/predictor/F0.0/conv1/Conv", "predictor.F0.0.conv1"),
        ] {
            assert_eq!(canonical_module(node).as_deref(), Some(module), "{node}");
        }
        assert_eq!(
            state_dict_name("decoder.decoder.generator.resblocks.1.alpha2.0").as_deref(),
            Some("decoder.generator.resblocks.1.alpha2.0")
        );
        assert_eq!(
            state_dict_name("encoder.predictor.F0.0.conv1.bias").as_deref(),
            Some("predictor.F0.0.conv1.bias")
        );
        assert_eq!(state_dict_name("onnx::LSTM_6929"), None);
        assert_eq!(state_dict_name("encoder.bert_encoder.weight_scale"), None);
    }

    /// One of each quantized consumer, with values small enough to check by hand.
    #[test]
    fn dequantizes_each_consumer_as_onnxruntime_would() {
        let graph = GraphProto {
            node: vec![
                node(
                    "/encoder/text_encoder/cnn.0/cnn.0.0/Conv_quant",
                    "ConvInteger",
                    &[
                        "x",
                        "/encoder/text_encoder/cnn.0/Mul_output_0_quantized",
                        "xz",
                        "czp",
                    ],
                    &["c"],
                ),
                node(
                    "/encoder/bert_encoder/MatMul_quant",
                    "MatMulInteger",
                    &["x", "onnx::MatMul_1_quantized", "xz", "mzp"],
                    &["m"],
                ),
                node(
                    "/encoder/bert_encoder/MatMul_quant_scales_mul",
                    "Mul",
                    &["xs", "onnx::MatMul_1_scale"],
                    &["ms"],
                ),
                node(
                    "/encoder/shared/LSTM_quant",
                    "DynamicQuantizeLSTM",
                    &[
                        "x",
                        "lw_quantized",
                        "lr_quantized",
                        "lb",
                        "",
                        "",
                        "",
                        "",
                        "lws",
                        "lzp",
                        "lrs",
                        "lzp",
                    ],
                    &["y"],
                ),
                node(
                    "/encoder/bert/embeddings/word_embeddings/Gather_quant",
                    "Gather",
                    &[
                        "encoder.bert.embeddings.word_embeddings.weight_quantized",
                        "ids",
                    ],
                    &["g"],
                ),
                node(
                    "/encoder/bert/embeddings/word_embeddings/Gather_quant_DequantizeLinear",
                    "DequantizeLinear",
                    &[
                        "g",
                        "encoder.bert.embeddings.word_embeddings.weight_scale",
                        "gzp",
                    ],
                    &["e"],
                ),
                node(
                    "/decoder/decoder/generator/resblocks.0/Mul",
                    "Mul",
                    &["decoder.decoder.generator.resblocks.0.alpha1.0", "h"],
                    &["h2"],
                ),
                node(
                    "encoder.text_encoder.cnn.0.0.bias_tmp_qaunt",
                    "Div",
                    &["encoder.text_encoder.cnn.0.0.bias", "s"],
                    &["b"],
                ),
            ],
            initializer: vec![
                init(
                    "/encoder/text_encoder/cnn.0/Mul_output_0_quantized",
                    data_type::UINT8,
                    &[1, 2, 2],
                    vec![10, 12, 9, 255],
                ),
                init("czp", data_type::UINT8, &[], vec![10]),
                f32s(
                    "/encoder/text_encoder/cnn.0/Mul_output_0_scale",
                    &[],
                    &[0.5],
                ),
                // [K=2, N=3], per-column scales.
                init(
                    "onnx::MatMul_1_quantized",
                    data_type::INT8,
                    &[2, 3],
                    [1i8, 2, 3, -1, -2, -3].iter().map(|&v| v as u8).collect(),
                ),
                init("mzp", data_type::INT8, &[3], vec![0, 0, 0]),
                f32s("onnx::MatMul_1_scale", &[3], &[1.0, 10.0, 100.0]),
                // W [2 dirs, in=1, 4H=4], R [2, H=1, 4].
                init(
                    "lw_quantized",
                    data_type::INT8,
                    &[2, 1, 4],
                    vec![1, 2, 3, 4, 5, 6, 7, 8],
                ),
                init("lr_quantized", data_type::INT8, &[2, 1, 4], vec![1; 8]),
                f32s("lb", &[2, 8], &[0.25; 16]),
                f32s("lws", &[2], &[1.0, -1.0]),
                f32s("lrs", &[2], &[2.0, 3.0]),
                init("lzp", data_type::INT8, &[2], vec![0, 1]),
                init(
                    "encoder.bert.embeddings.word_embeddings.weight_quantized",
                    data_type::INT8,
                    &[2, 2],
                    [-3i8, 0, 3, 6].iter().map(|&v| v as u8).collect(),
                ),
                f32s(
                    "encoder.bert.embeddings.word_embeddings.weight_scale",
                    &[],
                    &[0.25],
                ),
                init("gzp", data_type::INT8, &[], vec![3]),
                f32s(
                    "decoder.decoder.generator.resblocks.0.alpha1.0",
                    &[1, 2, 1],
                    &[0.5, 2.0],
                ),
                f32s("encoder.text_encoder.cnn.0.0.bias", &[2], &[1.0, -1.0]),
            ],
        };
        let w = Weights::from_graph(&graph, Path::new("k.onnx"), &Device::Cpu).unwrap();
        assert_eq!(
            values(&w, "text_encoder.cnn.0.0.weight"),
            (vec![1, 2, 2], vec![0.0, 1.0, -0.5, 122.5])
        );
        // Stored [K, N] → [N, K], column n scaled by scale[n].
        assert_eq!(
            values(&w, "bert_encoder.weight"),
            (vec![3, 2], vec![1.0, -1.0, 20.0, -20.0, 300.0, -300.0])
        );
        // W [2, 1, 4] → [2, 4, 1]; direction 1 has scale −1, zero point 1.
        assert_eq!(
            values(&w, "predictor.shared.W"),
            (
                vec![2, 4, 1],
                vec![1.0, 2.0, 3.0, 4.0, -4.0, -5.0, -6.0, -7.0]
            )
        );
        assert_eq!(
            values(&w, "predictor.shared.R"),
            (vec![2, 4, 1], vec![2.0, 2.0, 2.0, 2.0, 0.0, 0.0, 0.0, 0.0])
        );
        assert_eq!(values(&w, "predictor.shared.B").0, vec![2, 8]);
        assert_eq!(
            values(&w, "bert.embeddings.word_embeddings.weight"),
            (vec![2, 2], vec![-1.5, -0.75, 0.0, 0.75])
        );
        assert_eq!(
            values(&w, "decoder.generator.resblocks.0.alpha1.0").1,
            vec![0.5, 2.0]
        );
        assert_eq!(values(&w, "text_encoder.cnn.0.0.bias").1, vec![1.0, -1.0]);
        // Scales and zero points are no parameters of their own.
        assert_eq!(w.tensors.len(), 8, "{:?}", w.names_with_prefix(""));
        let err = w.get("decoder.nothing").unwrap_err().to_string();
        assert!(
            err.contains("k.onnx") && err.contains("decoder.nothing"),
            "{err}"
        );
    }

    #[test]
    fn float_graphs_load_by_consumer_too() {
        let mut gemm = node(
            "/encoder/predictor/duration_proj/linear_layer/Gemm",
            "Gemm",
            &["x", "onnx::Gemm_1", "onnx::Gemm_2"],
            &["y"],
        );
        gemm.attribute.push(AttributeProto {
            name: "transB".into(),
            i: 1,
            ..Default::default()
        });
        let half: Vec<u8> = [0x3c00u16, 0xc000]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let graph = GraphProto {
            node: vec![
                gemm,
                node(
                    "/encoder/text_encoder/lstm/LSTM",
                    "LSTM",
                    &["x", "onnx::LSTM_1", "onnx::LSTM_2", "onnx::LSTM_3"],
                    &["y"],
                ),
                node(
                    "/decoder/decoder/generator/ups.0/ConvTranspose",
                    "ConvTranspose",
                    &["x", "/decoder/decoder/generator/Mul_output_0", "h"],
                    &["y"],
                ),
            ],
            initializer: vec![
                f32s("onnx::Gemm_1", &[1, 2], &[1.0, 2.0]),
                f32s("onnx::Gemm_2", &[1], &[3.0]),
                f32s("onnx::LSTM_1", &[2, 4, 1], &[0.0; 8]),
                f32s("onnx::LSTM_2", &[2, 4, 1], &[0.0; 8]),
                f32s("onnx::LSTM_3", &[2, 8], &[0.0; 16]),
                init(
                    "/decoder/decoder/generator/Mul_output_0",
                    data_type::FLOAT16,
                    &[1, 1, 2],
                    half,
                ),
            ],
        };
        let w = Weights::from_graph(&graph, Path::new("f.onnx"), &Device::Cpu).unwrap();
        assert_eq!(
            values(&w, "predictor.duration_proj.linear_layer.weight"),
            (vec![1, 2], vec![1.0, 2.0])
        );
        assert_eq!(
            values(&w, "predictor.duration_proj.linear_layer.bias").1,
            vec![3.0]
        );
        assert_eq!(values(&w, "text_encoder.lstm.W").0, vec![2, 4, 1]);
        assert_eq!(values(&w, "text_encoder.lstm.B").0, vec![2, 8]);
        assert_eq!(
            values(&w, "decoder.generator.ups.0.weight").1,
            vec![1.0, -2.0]
        );
    }

    #[test]
    fn a_missing_scale_is_an_error_naming_the_tensor() {
        let graph = GraphProto {
            node: vec![node(
                "/decoder/decoder/F0_conv/Conv_quant",
                "ConvInteger",
                &["x", "w_quantized"],
                &["y"],
            )],
            initializer: vec![init("w_quantized", data_type::UINT8, &[1, 1, 1], vec![3])],
        };
        let err = Weights::from_graph(&graph, Path::new("k.onnx"), &Device::Cpu)
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("k.onnx") && err.contains("w_quantized") && err.contains("w_scale"),
            "{err}"
        );
    }
}

#[cfg(test)]
mod real_file {
    use super::*;
    use crate::kokoro::testing::model_path;

    /// The shipped int8 file yields the names and shapes the module doc lists.
    #[test]
    fn the_int8_file_loads_under_the_documented_names() {
        let start = std::time::Instant::now();
        let w = Weights::from_onnx(&model_path(), &Device::Cpu).unwrap();
        eprintln!(
            "Weights::from_onnx: {:.0} ms",
            start.elapsed().as_secs_f64() * 1e3
        );
        assert_eq!(w.tensors.len(), 430, "{:?}", w.names_with_prefix(""));
        for (name, shape) in [
            ("bert.embeddings.word_embeddings.weight", &[178, 128][..]),
            (
                "bert.encoder.albert_layer_groups.0.albert_layers.0.ffn.weight",
                &[2048, 768],
            ),
            ("bert_encoder.weight", &[512, 768]),
            ("text_encoder.cnn.2.0.weight", &[512, 512, 5]),
            ("text_encoder.lstm.W", &[2, 1024, 512]),
            ("predictor.shared.R", &[2, 1024, 256]),
            ("predictor.text_encoder.lstms.5.fc.weight", &[1024, 128]),
            ("predictor.F0.1.pool.weight", &[512, 1, 3]),
            ("predictor.N_proj.weight", &[1, 256, 1]),
            ("decoder.decode.3.conv1x1.weight", &[512, 1090, 1]),
            ("decoder.generator.ups.0.weight", &[512, 256, 20]),
            (
                "decoder.generator.noise_res.1.convs1.2.weight",
                &[128, 128, 11],
            ),
            ("decoder.generator.resblocks.5.alpha2.2", &[1, 128, 1]),
            ("decoder.generator.m_source.l_linear.weight", &[1, 9]),
            ("decoder.generator.stft.window", &[20]),
            (
                "decoder.generator.stft.istft.stft.inverse_basis",
                &[22, 1, 20],
            ),
        ] {
            assert_eq!(w.get(name).unwrap().dims(), shape, "{name}");
        }
        let prefixes = [
            "bert.",
            "bert_encoder.",
            "text_encoder.",
            "predictor.",
            "decoder.",
        ];
        for name in w.names_with_prefix("") {
            assert!(prefixes.iter().any(|p| name.starts_with(p)), "{name}");
        }
        // The export's strides and dilations reach the model code through the attributes.
        let ups = w.conv_attributes("decoder.generator.ups.1").unwrap();
        assert_eq!(
            (ups.strides.as_slice(), ups.pads.as_slice()),
            (&[6][..], &[3, 3][..])
        );
        let dilated = w
            .conv_attributes("decoder.generator.resblocks.1.convs1.2")
            .unwrap();
        assert_eq!(dilated.dilations, vec![5]);
    }

    #[test]
    fn a_truncated_file_is_an_error_naming_it() {
        let bytes = std::fs::read(model_path()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let cut = dir.path().join("cut.onnx");
        std::fs::write(&cut, &bytes[..bytes.len() / 3]).unwrap();
        let err = Weights::from_onnx(&cut, &Device::Cpu)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("cut.onnx"), "{err}");
    }
}
