//! Reads the weights out of a Piper `.onnx` export without onnxruntime or `protoc`.
//!
//! Only the handful of protobuf fields that carry parameters are declared (prost skips the
//! rest). PyTorch's exporter keeps state-dict names for most initializers but leaves some
//! anonymous (`onnx::Conv_1234`, weight-norm folded) or renamed (`sid`); those are named after
//! the node that consumes them, which is what makes the file loadable by parameter name.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{Device, Tensor};
use prost::bytes::Bytes;
use prost::Message;

use super::VitsError;

#[derive(Clone, PartialEq, Message)]
pub struct ModelProto {
    #[prost(message, optional, tag = "7")]
    pub graph: Option<GraphProto>,
}

#[derive(Clone, PartialEq, Message)]
pub struct GraphProto {
    #[prost(message, repeated, tag = "1")]
    pub node: Vec<NodeProto>,
    #[prost(message, repeated, tag = "5")]
    pub initializer: Vec<TensorProto>,
}

#[derive(Clone, PartialEq, Message)]
pub struct NodeProto {
    #[prost(string, repeated, tag = "1")]
    pub input: Vec<String>,
    #[prost(string, repeated, tag = "2")]
    pub output: Vec<String>,
    #[prost(string, tag = "3")]
    pub name: String,
    #[prost(string, tag = "4")]
    pub op_type: String,
    #[prost(message, repeated, tag = "5")]
    pub attribute: Vec<AttributeProto>,
}

#[derive(Clone, PartialEq, Message)]
pub struct AttributeProto {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(int64, tag = "3")]
    pub i: i64,
    #[prost(int64, repeated, tag = "8")]
    pub ints: Vec<i64>,
}

#[derive(Clone, PartialEq, Message)]
pub struct TensorProto {
    #[prost(int64, repeated, tag = "1")]
    pub dims: Vec<i64>,
    #[prost(int32, tag = "2")]
    pub data_type: i32,
    #[prost(float, repeated, tag = "4")]
    pub float_data: Vec<f32>,
    #[prost(int64, repeated, tag = "7")]
    pub int64_data: Vec<i64>,
    #[prost(string, tag = "8")]
    pub name: String,
    #[prost(bytes = "bytes", tag = "9")]
    pub raw_data: Bytes,
    #[prost(int32, tag = "14")]
    pub data_location: i32,
}

/// ONNX `TensorProto.DataType.FLOAT`.
const DATA_TYPE_FLOAT: i32 = 1;
/// ONNX `TensorProto.DataLocation.EXTERNAL`.
const DATA_LOCATION_EXTERNAL: i32 = 1;

/// The reverse ElementwiseAffine of the duration flow stores `exp(-logs)` as a graph constant.
const DP_AFFINE_MULTIPLIER: &str = "/dp/flows.0/Exp_output_0";
/// Top-level VITS modules whose parameters the exporter names with their state-dict name.
const MODULE_PREFIXES: [&str; 5] = ["enc_p.", "dp.", "flow.", "dec.", "emb_g."];

/// Attributes of one convolution node that the weights alone do not reveal.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConvAttributes {
    pub strides: Vec<i64>,
    pub dilations: Vec<i64>,
}

/// Parameters by VITS state-dict name, plus conv attributes by module path (`dec.ups.0`).
pub struct OnnxWeights {
    pub tensors: HashMap<String, Tensor>,
    pub conv_attributes: HashMap<String, ConvAttributes>,
}

/// Parses `path` and returns its float parameters under their VITS names.
pub fn read_weights(path: &Path, device: &Device) -> Result<OnnxWeights, VitsError> {
    let bytes = std::fs::read(path).map_err(|source| VitsError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let model = ModelProto::decode(Bytes::from(bytes)).map_err(|e| VitsError::Format {
        file: path.to_path_buf(),
        reason: format!("not an ONNX model: {e}"),
    })?;
    let graph = model.graph.ok_or_else(|| VitsError::Format {
        file: path.to_path_buf(),
        reason: "ONNX model has no graph".into(),
    })?;
    map_graph(&graph, path, device)
}

/// `/flow/flows.6/enc/in_layers.0/Conv` → `flow.flows.6.enc.in_layers.0`.
fn module_path(node_name: &str) -> Option<String> {
    let parts: Vec<&str> = node_name.trim_start_matches('/').split('/').collect();
    if parts.len() < 2 || parts.iter().any(|p| p.is_empty()) {
        return None;
    }
    Some(parts[..parts.len() - 1].join("."))
}

/// The parameter name an initializer feeds, judged from its consumer: conv input 1/2 are
/// weight/bias, an embedding `Gather` reads its table from input 0.
fn name_from_consumer(node: &NodeProto, input_index: usize) -> Option<String> {
    let suffix = match (node.op_type.as_str(), input_index) {
        ("Conv" | "ConvTranspose", 1) | ("Gather", 0) => "weight",
        ("Conv" | "ConvTranspose", 2) => "bias",
        _ => return None,
    };
    Some(format!("{}.{suffix}", module_path(&node.name)?))
}

fn map_graph(graph: &GraphProto, path: &Path, device: &Device) -> Result<OnnxWeights, VitsError> {
    let mut consumers: HashMap<&str, Vec<(&NodeProto, usize)>> = HashMap::new();
    let mut conv_attributes = HashMap::new();
    for node in &graph.node {
        for (i, input) in node.input.iter().enumerate() {
            consumers.entry(input.as_str()).or_default().push((node, i));
        }
        if node.op_type == "Conv" || node.op_type == "ConvTranspose" {
            if let Some(module) = module_path(&node.name) {
                let mut attrs = ConvAttributes::default();
                for a in &node.attribute {
                    match a.name.as_str() {
                        "strides" => attrs.strides = a.ints.clone(),
                        "dilations" => attrs.dilations = a.ints.clone(),
                        _ => {}
                    }
                }
                conv_attributes.insert(module, attrs);
            }
        }
    }

    let mut tensors = HashMap::new();
    for init in &graph.initializer {
        if init.data_type != DATA_TYPE_FLOAT {
            continue; // shape constants (int64/int32) carry no parameters
        }
        let fail = |reason: String| VitsError::Tensor {
            file: path.to_path_buf(),
            tensor: init.name.clone(),
            reason,
        };
        let name = if MODULE_PREFIXES.iter().any(|p| init.name.starts_with(p)) {
            init.name.clone()
        } else if init.name == DP_AFFINE_MULTIPLIER {
            "dp.flows.0.logs".to_string()
        } else {
            let named: Vec<String> = consumers
                .get(init.name.as_str())
                .into_iter()
                .flatten()
                .filter_map(|(node, i)| name_from_consumer(node, *i))
                .collect();
            match named.as_slice() {
                [] => continue, // a graph constant, not a parameter
                [one] => one.clone(),
                many => return Err(fail(format!("feeds several parameters: {many:?}"))),
            }
        };
        if init.data_location == DATA_LOCATION_EXTERNAL {
            return Err(fail("external tensor data is not supported".into()));
        }
        let mut values = float_values(init).map_err(&fail)?;
        if name == "dp.flows.0.logs" {
            // The graph holds C = exp(-logs); keep the state-dict parameter itself.
            values.iter_mut().for_each(|c| *c = -c.ln());
        }
        let dims: Vec<usize> = init.dims.iter().map(|&d| d as usize).collect();
        let tensor = Tensor::from_vec(values, dims, device).map_err(|e| fail(e.to_string()))?;
        if tensors.insert(name.clone(), tensor).is_some() {
            return Err(fail(format!("a second initializer maps to {name}")));
        }
    }
    Ok(OnnxWeights {
        tensors,
        conv_attributes,
    })
}

fn float_values(t: &TensorProto) -> Result<Vec<f32>, String> {
    let count: usize = t.dims.iter().map(|&d| d.max(0) as usize).product();
    let values: Vec<f32> = if !t.raw_data.is_empty() {
        t.raw_data
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect()
    } else {
        t.float_data.clone()
    };
    if values.len() != count {
        return Err(format!(
            "holds {} values but its shape {:?} needs {count}",
            values.len(),
            t.dims
        ));
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn float_init(name: &str, dims: &[i64], values: &[f32]) -> TensorProto {
        TensorProto {
            dims: dims.to_vec(),
            data_type: DATA_TYPE_FLOAT,
            name: name.into(),
            raw_data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
            ..Default::default()
        }
    }

    fn node(name: &str, op: &str, inputs: &[&str]) -> NodeProto {
        NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![format!("{name}_output_0")],
            name: name.into(),
            op_type: op.into(),
            attribute: vec![AttributeProto {
                name: "dilations".into(),
                i: 0,
                ints: vec![2],
            }],
        }
    }

    #[test]
    fn names_anonymous_tensors_from_their_consumers() {
        let graph = GraphProto {
            node: vec![
                node("/enc_p/emb/Gather", "Gather", &["sid", "input"]),
                node(
                    "/flow/flows.6/enc/in_layers.0/Conv",
                    "Conv",
                    &["x", "onnx::Conv_1", "flow.flows.6.enc.in_layers.0.bias"],
                ),
                node("/dp/flows.0/Mul", "Mul", &["z", DP_AFFINE_MULTIPLIER]),
                node("/dec/Add", "Add", &["a", "/dec/Constant_output_0"]),
            ],
            initializer: vec![
                float_init("sid", &[2, 1], &[1., 2.]),
                float_init("onnx::Conv_1", &[1, 1, 1], &[3.]),
                float_init("flow.flows.6.enc.in_layers.0.bias", &[1], &[4.]),
                float_init(DP_AFFINE_MULTIPLIER, &[2, 1], &[1., std::f32::consts::E]),
                float_init("/dec/Constant_output_0", &[], &[5.]),
            ],
        };
        // Encoding and decoding again exercises the hand-written message definitions.
        let bytes = ModelProto { graph: Some(graph) }.encode_to_vec();
        let graph = ModelProto::decode(bytes.as_slice()).unwrap().graph.unwrap();
        let w = map_graph(&graph, Path::new("t.onnx"), &Device::Cpu).unwrap();
        let mut names: Vec<_> = w.tensors.keys().cloned().collect();
        names.sort();
        assert_eq!(
            names,
            [
                "dp.flows.0.logs",
                "enc_p.emb.weight",
                "flow.flows.6.enc.in_layers.0.bias",
                "flow.flows.6.enc.in_layers.0.weight"
            ]
        );
        let logs = w.tensors["dp.flows.0.logs"].flatten_all().unwrap();
        let logs = logs.to_vec1::<f32>().unwrap();
        assert!(logs[0].abs() < 1e-7 && (logs[1] + 1.0).abs() < 1e-6);
        assert_eq!(
            w.conv_attributes["flow.flows.6.enc.in_layers.0"].dilations,
            vec![2]
        );
    }

    #[test]
    fn rejects_a_tensor_whose_data_does_not_fit_its_shape() {
        let graph = GraphProto {
            node: vec![],
            initializer: vec![float_init("dec.conv_pre.weight", &[2, 2], &[1.])],
        };
        let err = map_graph(&graph, Path::new("v.onnx"), &Device::Cpu)
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("v.onnx") && err.contains("dec.conv_pre.weight"),
            "{err}"
        );
    }
}
