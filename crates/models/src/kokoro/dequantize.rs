//! How each initializer of a Kokoro ONNX export becomes one canonical `f32` parameter: the
//! node that consumes it decides its name (the module scope of the node) and how it is
//! dequantized (as that node would), see [`super::weights`]' doc for the rules and the names.
//!
//! It is its own file so that `weights.rs` stays the [`super::Weights`] type and the table
//! of names; this is the graph-reading stage under it, which knows ONNX operators and the
//! onnxruntime quantizer's conventions and nothing of the model.

use std::collections::HashMap;

use candle_core::{Device, Tensor};

use crate::onnx::{GraphProto, NodeProto, TensorProto};

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

/// How a stored tensor's axes become the canonical layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Layout {
    AsStored,
    /// A 2-d `[K, N]` matrix-product operand → `[N, K]`.
    Transpose2,
    /// `[D, A, B]` → `[D, B, A]` (DynamicQuantizeLSTM's W and R).
    TransposeLast2,
}

/// How the quantized values become `f32`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Dequant {
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
pub(super) struct Plan {
    pub(super) name: String,
    dequant: Dequant,
    layout: Layout,
}

impl Plan {
    pub(super) fn float(name: String, layout: Layout) -> Self {
        Self {
            name,
            dequant: Dequant::Float,
            layout,
        }
    }

    /// The initializers this plan reads besides the tensor itself.
    pub(super) fn parts(&self) -> Vec<&str> {
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

    pub(super) fn realize(
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
pub(super) fn plan_for(
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
pub(super) fn state_dict_name(name: &str) -> Option<String> {
    if name.contains('/') || name.contains("::") || name.ends_with(SCALE_SUFFIX) {
        return None;
    }
    let parts: Vec<&str> = name.split('.').collect();
    let stripped = strip_wrappers(&parts)?;
    Some(stripped.join("."))
}

/// A node's module scope, canonically named: `/encoder/text_encoder/cnn.0/cnn.0.0/Conv` →
/// `text_encoder.cnn.0.0`; `/encoder/bert/…/attention/query_3/MatMul` → `bert.….attention.query`.
pub(super) fn canonical_module(node_name: &str) -> Option<String> {
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

pub(super) fn conv_attributes(graph: &GraphProto) -> HashMap<String, ConvAttributes> {
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
