//! VITS inference in candle (the model behind Piper voices).

pub mod conv;
// PLACEHOLDER until the vits branch merges.
use candle_core::Device;
use std::path::Path;
pub struct VitsInput {
    pub ids: Vec<i64>,
    pub speaker: Option<u32>,
    pub length_scale: f32,
    pub noise_scale: f32,
    pub noise_w: f32,
    pub seed: u64,
}
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct VitsError(String);
pub struct Vits;
impl Vits {
    pub fn from_onnx(_p: &Path, _j: &serde_json::Value, _d: &Device) -> Result<Self, VitsError> {
        Err(VitsError("todo".into()))
    }
    pub fn from_safetensors(
        _p: &Path,
        _j: &serde_json::Value,
        _d: &Device,
    ) -> Result<Self, VitsError> {
        Err(VitsError("todo".into()))
    }
    pub fn save_safetensors(&self, _p: &Path) -> Result<(), VitsError> {
        Ok(())
    }
    pub fn sample_rate(&self) -> u32 {
        22050
    }
    pub fn synthesize(&self, _b: &[VitsInput]) -> Result<Vec<Vec<f32>>, VitsError> {
        Ok(vec![])
    }
}
