//! 1-D convolutions used by every VITS block.
//!
//! All model code calls convolutions through these two functions so that one place decides how
//! they run: this is where the decoder spends most of its time.

use candle_core::{Result, Tensor};

/// `x` [B, C_in, L], `weight` [C_out, C_in / groups, K], `bias` [C_out]; stride 1.
/// Returns [B, C_out, L + 2·padding − dilation·(K − 1)].
pub fn conv1d(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    padding: usize,
    dilation: usize,
    groups: usize,
) -> Result<Tensor> {
    let y = x.conv1d(weight, padding, 1, dilation, groups)?;
    match bias {
        Some(b) => y.broadcast_add(&b.reshape((1, (), 1))?),
        None => Ok(y),
    }
}

/// `x` [B, C_in, L], `weight` [C_in, C_out, K] (PyTorch's ConvTranspose1d layout), `bias` [C_out].
/// Returns [B, C_out, (L − 1)·stride − 2·padding + K].
pub fn conv_transpose1d(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: usize,
    padding: usize,
) -> Result<Tensor> {
    let y = x.conv_transpose1d(weight, padding, 0, stride, 1, 1)?;
    match bias {
        Some(b) => y.broadcast_add(&b.reshape((1, (), 1))?),
        None => Ok(y),
    }
}
