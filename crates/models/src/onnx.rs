//! Reads ONNX files without onnxruntime or `protoc`: the models load their weights straight
//! from the `.onnx` files they are distributed as.
//!
//! Only the protobuf fields that carry parameters, their consumers and the attributes the
//! models need are declared (prost skips the rest). Decoding from one [`Bytes`] buffer keeps
//! every `raw_data` a slice of the file, so reading a 100 MB model costs one read and no copy.
//! What each model makes of the graph (which initializer is which parameter, how quantized
//! ones are restored) lives with the model: `vits::onnx`, `kokoro::weights`.

use std::collections::HashMap;
use std::path::Path;

use prost::bytes::Bytes;
use prost::Message;

use crate::error::ModelError;

#[derive(Clone, PartialEq, Message)]
pub(crate) struct ModelProto {
    #[prost(message, optional, tag = "7")]
    pub graph: Option<GraphProto>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct GraphProto {
    #[prost(message, repeated, tag = "1")]
    pub node: Vec<NodeProto>,
    #[prost(message, repeated, tag = "5")]
    pub initializer: Vec<TensorProto>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct NodeProto {
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
pub(crate) struct AttributeProto {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(float, tag = "2")]
    pub f: f32,
    #[prost(int64, tag = "3")]
    pub i: i64,
    #[prost(bytes = "vec", tag = "4")]
    pub s: Vec<u8>,
    #[prost(float, repeated, tag = "7")]
    pub floats: Vec<f32>,
    #[prost(int64, repeated, tag = "8")]
    pub ints: Vec<i64>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct TensorProto {
    #[prost(int64, repeated, tag = "1")]
    pub dims: Vec<i64>,
    #[prost(int32, tag = "2")]
    pub data_type: i32,
    #[prost(float, repeated, tag = "4")]
    pub float_data: Vec<f32>,
    /// Also holds int8, uint8, int16, uint16, float16 and bfloat16 values, one per entry.
    #[prost(int32, repeated, tag = "5")]
    pub int32_data: Vec<i32>,
    #[prost(int64, repeated, tag = "7")]
    pub int64_data: Vec<i64>,
    #[prost(string, tag = "8")]
    pub name: String,
    #[prost(bytes = "bytes", tag = "9")]
    pub raw_data: Bytes,
    #[prost(double, repeated, tag = "10")]
    pub double_data: Vec<f64>,
    #[prost(int32, tag = "14")]
    pub data_location: i32,
}

/// `TensorProto.DataType` values this reader converts.
pub(crate) mod data_type {
    pub const FLOAT: i32 = 1;
    pub const UINT8: i32 = 2;
    pub const INT8: i32 = 3;
    pub const INT32: i32 = 6;
    pub const INT64: i32 = 7;
    pub const FLOAT16: i32 = 10;
    pub const DOUBLE: i32 = 11;
    pub const BFLOAT16: i32 = 16;
}

/// ONNX `TensorProto.DataLocation.EXTERNAL`.
const DATA_LOCATION_EXTERNAL: i32 = 1;

/// Reads and decodes `path`'s graph.
pub(crate) fn read_graph(path: &Path) -> Result<GraphProto, ModelError> {
    let bytes = std::fs::read(path).map_err(|source| ModelError::io(path, source))?;
    let model = ModelProto::decode(Bytes::from(bytes)).map_err(|e| {
        ModelError::format(
            path,
            format!("not an ONNX model (truncated or damaged?): {e}"),
        )
    })?;
    model
        .graph
        .ok_or_else(|| ModelError::format(path, "ONNX model has no graph"))
}

/// Every node input that names something, with the nodes that read it and at which position.
pub(crate) fn consumers(graph: &GraphProto) -> HashMap<&str, Vec<(&NodeProto, usize)>> {
    let mut map: HashMap<&str, Vec<(&NodeProto, usize)>> = HashMap::new();
    for node in &graph.node {
        for (i, input) in node.input.iter().enumerate() {
            if !input.is_empty() {
                map.entry(input.as_str()).or_default().push((node, i));
            }
        }
    }
    map
}

/// The module scope of a node exported from PyTorch: `/flow/flows.6/enc/in_layers.0/Conv` →
/// `flow.flows.6.enc.in_layers.0` (the last part is the op).
pub(crate) fn module_path(node_name: &str) -> Option<String> {
    let parts: Vec<&str> = node_name.trim_start_matches('/').split('/').collect();
    if parts.len() < 2 || parts.iter().any(|p| p.is_empty()) {
        return None;
    }
    Some(parts[..parts.len() - 1].join("."))
}

impl NodeProto {
    pub fn attribute(&self, name: &str) -> Option<&AttributeProto> {
        self.attribute.iter().find(|a| a.name == name)
    }
}

impl TensorProto {
    /// The shape, checked for negative dimensions.
    pub fn shape(&self) -> Result<Vec<usize>, String> {
        self.dims
            .iter()
            .map(|&d| {
                usize::try_from(d).map_err(|_| format!("negative dimension in {:?}", self.dims))
            })
            .collect()
    }

    pub fn element_count(&self) -> Result<usize, String> {
        Ok(self.shape()?.iter().product())
    }

    fn check_inline(&self) -> Result<(), String> {
        if self.data_location == DATA_LOCATION_EXTERNAL {
            return Err("external tensor data is not supported".into());
        }
        Ok(())
    }

    /// Checks that `values` holds exactly as many elements as the shape needs.
    fn fits<T>(&self, values: Vec<T>) -> Result<Vec<T>, String> {
        let count = self.element_count()?;
        if values.len() != count {
            return Err(format!(
                "holds {} values but its shape {:?} needs {count}",
                values.len(),
                self.dims
            ));
        }
        Ok(values)
    }

    /// The raw little-endian payload split into `width`-byte elements, checked for length.
    fn raw_chunks(&self, width: usize) -> Result<std::slice::ChunksExact<'_, u8>, String> {
        if !self.raw_data.len().is_multiple_of(width) {
            return Err(format!(
                "raw data of {} bytes is not a whole number of {width}-byte elements",
                self.raw_data.len()
            ));
        }
        Ok(self.raw_data.chunks_exact(width))
    }

    /// Any floating-point tensor (f32, f16, bf16, f64) as `f32`.
    pub fn to_f32(&self) -> Result<Vec<f32>, String> {
        self.check_inline()?;
        let raw = !self.raw_data.is_empty();
        let values: Vec<f32> = match self.data_type {
            data_type::FLOAT if raw => self
                .raw_chunks(4)?
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            data_type::FLOAT => self.float_data.clone(),
            data_type::FLOAT16 if raw => self
                .raw_chunks(2)?
                .map(|b| f16_to_f32(u16::from_le_bytes([b[0], b[1]])))
                .collect(),
            data_type::FLOAT16 => self
                .int32_data
                .iter()
                .map(|&v| f16_to_f32(v as u16))
                .collect(),
            data_type::BFLOAT16 if raw => self
                .raw_chunks(2)?
                .map(|b| f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16))
                .collect(),
            data_type::BFLOAT16 => self
                .int32_data
                .iter()
                .map(|&v| f32::from_bits(u32::from(v as u16) << 16))
                .collect(),
            data_type::DOUBLE if raw => self
                .raw_chunks(8)?
                .map(|b| f64::from_le_bytes(b.try_into().expect("8-byte chunk")) as f32)
                .collect(),
            data_type::DOUBLE => self.double_data.iter().map(|&v| v as f32).collect(),
            other => return Err(format!("data type {other} is not a floating-point type")),
        };
        self.fits(values)
    }

    /// Any integer tensor (int8, uint8, int32, int64) widened to `i64`.
    pub fn to_i64(&self) -> Result<Vec<i64>, String> {
        self.check_inline()?;
        let raw = !self.raw_data.is_empty();
        let values: Vec<i64> = match self.data_type {
            data_type::INT8 if raw => self.raw_data.iter().map(|&b| i64::from(b as i8)).collect(),
            data_type::UINT8 if raw => self.raw_data.iter().map(|&b| i64::from(b)).collect(),
            data_type::INT8 | data_type::INT32 | data_type::UINT8 if !raw => {
                self.int32_data.iter().map(|&v| i64::from(v)).collect()
            }
            data_type::INT32 => self
                .raw_chunks(4)?
                .map(|b| i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])))
                .collect(),
            data_type::INT64 if raw => self
                .raw_chunks(8)?
                .map(|b| i64::from_le_bytes(b.try_into().expect("8-byte chunk")))
                .collect(),
            data_type::INT64 => self.int64_data.clone(),
            other => return Err(format!("data type {other} is not an integer type")),
        };
        self.fits(values)
    }

    /// An 8-bit integer tensor as `f32` values, without the `i64` detour: the quantized
    /// weights are tens of millions of elements.
    pub fn int8_as_f32(&self) -> Result<Vec<f32>, String> {
        self.check_inline()?;
        let raw = !self.raw_data.is_empty();
        let values: Vec<f32> = match self.data_type {
            data_type::INT8 if raw => self.raw_data.iter().map(|&b| f32::from(b as i8)).collect(),
            data_type::UINT8 if raw => self.raw_data.iter().map(|&b| f32::from(b)).collect(),
            data_type::INT8 | data_type::UINT8 => {
                self.int32_data.iter().map(|&v| v as f32).collect()
            }
            other => return Err(format!("data type {other} is not an 8-bit integer type")),
        };
        self.fits(values)
    }

    pub fn is_float(&self) -> bool {
        matches!(
            self.data_type,
            data_type::FLOAT | data_type::FLOAT16 | data_type::BFLOAT16 | data_type::DOUBLE
        )
    }

    pub fn is_int8(&self) -> bool {
        matches!(self.data_type, data_type::INT8 | data_type::UINT8)
    }
}

/// IEEE half to single precision, subnormals and non-finite values included.
fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let mant = u32::from(h & 0x3ff);
    let bits = match (exp, mant) {
        (0, 0) => sign,
        (0, m) => {
            // Subnormal: value = m · 2^-24, renormalized for f32.
            let shift = m.leading_zeros() - 21; // m has 10 significant bits at most
            let m = (m << shift) & 0x3ff;
            let e = 127 - 15 + 1 - shift;
            sign | (e << 23) | (m << 13)
        }
        (0x1f, m) => sign | 0x7f80_0000 | (m << 13),
        (e, m) => sign | ((e + 127 - 15) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_precision_values_convert_exactly() {
        for (h, f) in [
            (0x3c00u16, 1.0f32),
            (0xc000, -2.0),
            (0x3555, 0.333_251_95),
            (0x7bff, 65504.0),
            (0x0001, 5.960_464_5e-8),
            (0x03ff, 6.097_555e-5),
            (0x8000, -0.0),
        ] {
            assert_eq!(f16_to_f32(h).to_bits(), f.to_bits(), "{h:#06x}");
        }
        assert!(f16_to_f32(0x7c00).is_infinite());
        assert!(f16_to_f32(0x7e00).is_nan());
    }

    #[test]
    fn typed_fields_and_raw_data_read_alike() {
        let raw = TensorProto {
            dims: vec![3],
            data_type: data_type::INT8,
            raw_data: Bytes::from(vec![0xffu8, 0x7f, 0x80]),
            ..Default::default()
        };
        let typed = TensorProto {
            dims: vec![3],
            data_type: data_type::INT8,
            int32_data: vec![-1, 127, -128],
            ..Default::default()
        };
        assert_eq!(raw.to_i64().unwrap(), vec![-1, 127, -128]);
        assert_eq!(typed.to_i64().unwrap(), vec![-1, 127, -128]);
        assert_eq!(raw.int8_as_f32().unwrap(), vec![-1.0, 127.0, -128.0]);
        let uint8 = TensorProto {
            data_type: data_type::UINT8,
            ..raw.clone()
        };
        assert_eq!(uint8.int8_as_f32().unwrap(), vec![255.0, 127.0, 128.0]);
        let half = TensorProto {
            dims: vec![2],
            data_type: data_type::FLOAT16,
            raw_data: Bytes::from(vec![0x00u8, 0x3c, 0x00, 0xc0]),
            ..Default::default()
        };
        assert_eq!(half.to_f32().unwrap(), vec![1.0, -2.0]);
    }

    #[test]
    fn a_short_payload_is_refused() {
        let t = TensorProto {
            dims: vec![2, 2],
            data_type: data_type::FLOAT,
            raw_data: Bytes::from(vec![0u8; 12]),
            ..Default::default()
        };
        assert!(t.to_f32().unwrap_err().contains("needs 4"));
        let odd = TensorProto {
            raw_data: Bytes::from(vec![0u8; 13]),
            ..t
        };
        assert!(odd.to_f32().unwrap_err().contains("13 bytes"));
    }

    #[test]
    fn a_damaged_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cut.onnx");
        let model = ModelProto {
            graph: Some(GraphProto {
                node: vec![],
                initializer: vec![TensorProto {
                    dims: vec![64],
                    data_type: data_type::FLOAT,
                    name: "w".into(),
                    raw_data: Bytes::from(vec![0u8; 256]),
                    ..Default::default()
                }],
            }),
        };
        let bytes = model.encode_to_vec();
        std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
        let err = read_graph(&path).unwrap_err().to_string();
        assert!(
            err.contains("cut.onnx") && err.contains("not an ONNX model"),
            "{err}"
        );
        let missing = read_graph(&dir.path().join("absent.onnx"))
            .unwrap_err()
            .to_string();
        assert!(missing.contains("absent.onnx"), "{missing}");
    }
}
