//! Reads the weights out of a Piper `.onnx` export without onnxruntime or `protoc`.
//!
//! The protobuf reading is shared ([`crate::onnx`]); this module knows VITS. PyTorch's
//! exporter keeps state-dict names for most initializers but leaves some anonymous
//! (`onnx::Conv_1234`, weight-norm folded) or renamed (`sid`); those are named after the node
//! that consumes them, which is what makes the file loadable by parameter name.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{Device, Tensor};

use crate::error::ModelError;
use crate::onnx::{consumers, module_path, read_graph, GraphProto, NodeProto};

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
pub fn read_weights(path: &Path, device: &Device) -> Result<OnnxWeights, ModelError> {
    let graph = read_graph(path)?;
    map_graph(&graph, path, device)
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

fn map_graph(graph: &GraphProto, path: &Path, device: &Device) -> Result<OnnxWeights, ModelError> {
    let consumers = consumers(graph);
    let mut conv_attributes = HashMap::new();
    for node in &graph.node {
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
        if init.data_type != crate::onnx::data_type::FLOAT {
            continue; // shape constants (int64/int32) carry no parameters
        }
        let fail = |reason: String| ModelError::Tensor {
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
        let mut values = init.to_f32().map_err(&fail)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::{data_type, AttributeProto, ModelProto, TensorProto};
    use prost::Message;

    fn float_init(name: &str, dims: &[i64], values: &[f32]) -> TensorProto {
        TensorProto {
            dims: dims.to_vec(),
            data_type: data_type::FLOAT,
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
                ints: vec![2],
                ..Default::default()
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
