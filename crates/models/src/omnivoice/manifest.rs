//! A checkpoint's tensors checked against what the model asks for, without reading their
//! data: a server can refuse a wrong or truncated checkpoint at startup, naming the tensor,
//! instead of failing its first request after seconds of loading gigabytes.
//!
//! The check runs the model's own loading code over a [`SimpleBackend`] that answers from the
//! safetensors header alone (names, shapes) with zero-stride views, so the list of expected
//! tensors is never written twice.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

use candle_core::{DType, Device, Result, Shape, Tensor};
use candle_nn::var_builder::SimpleBackend;
use candle_nn::VarBuilder;

/// Headers larger than this are no checkpoint's (the release's is about 40 kB).
const MAX_HEADER: u64 = 64 << 20;

/// The tensors a safetensors file holds, by name, with their shapes. Errors leave naming the
/// file to the caller, which knows which file it read.
pub(crate) struct Manifest {
    shapes: HashMap<String, Vec<usize>>,
}

impl Manifest {
    /// Reads the header of `file`.
    pub fn read(file: &Path) -> std::result::Result<Self, String> {
        let mut f = std::fs::File::open(file).map_err(|e| e.to_string())?;
        let mut size = [0u8; 8];
        f.read_exact(&mut size)
            .map_err(|_| "too short for a safetensors header".to_string())?;
        let size = u64::from_le_bytes(size);
        if size > MAX_HEADER {
            return Err(format!("a header of {size} bytes is no safetensors header"));
        }
        let mut header = vec![0u8; size as usize];
        f.read_exact(&mut header)
            .map_err(|_| "truncated inside its safetensors header".to_string())?;
        let header: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(&header).map_err(|e| format!("bad safetensors header: {e}"))?;
        let data = f.metadata().map_err(|e| e.to_string())?.len() - 8 - size;
        let mut shapes = HashMap::new();
        for (name, entry) in header {
            if name == "__metadata__" {
                continue;
            }
            let shape = entry
                .get("shape")
                .and_then(|s| s.as_array())
                .and_then(|s| s.iter().map(|d| d.as_u64().map(|d| d as usize)).collect())
                .ok_or_else(|| format!("tensor {name} has no shape in the header"))?;
            let end = entry
                .get("data_offsets")
                .and_then(|o| o.get(1))
                .and_then(|o| o.as_u64())
                .ok_or_else(|| format!("tensor {name} has no data offsets in the header"))?;
            if end > data {
                return Err(format!(
                    "truncated: tensor {name} ends at byte {end} of the data, which has {data}"
                ));
            }
            shapes.insert(name, shape);
        }
        Ok(Self { shapes })
    }

    /// A builder whose tensors are this manifest's, as zero-stride views of the right shape.
    pub fn var_builder(self) -> VarBuilder<'static> {
        VarBuilder::from_backend(Box::new(self), DType::F32, Device::Cpu)
    }

    fn lookup(&self, name: &str) -> Result<&[usize]> {
        self.shapes
            .get(name)
            .map(Vec::as_slice)
            .ok_or_else(|| candle_core::Error::Msg(format!("no tensor {name}")))
    }
}

impl SimpleBackend for Manifest {
    fn get(
        &self,
        shape: Shape,
        name: &str,
        _: candle_nn::Init,
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor> {
        let found = self.lookup(name)?;
        if found != shape.dims() {
            candle_core::bail!(
                "tensor {name} is {found:?}, where the config makes it {:?}",
                shape.dims()
            );
        }
        Tensor::zeros((), dtype, device)?.broadcast_as(shape)
    }

    fn get_unchecked(&self, name: &str, dtype: DType, device: &Device) -> Result<Tensor> {
        let found = self.lookup(name)?.to_vec();
        Tensor::zeros((), dtype, device)?.broadcast_as(found)
    }

    fn contains_tensor(&self, name: &str) -> bool {
        self.shapes.contains_key(name)
    }
}
