// TEMPORARY STUB (replaced by the enc-codec2 branch)
use candle_core::{Result, Tensor};
use candle_nn::VarBuilder;
pub struct CodecEncoder;
impl CodecEncoder {
    pub fn load(_c: &super::CodecConfig, _vb: VarBuilder) -> Result<Self> { Ok(Self) }
    pub fn encode(&self, _w: &[f32]) -> Result<Tensor> { candle_core::bail!("stub") }
}
