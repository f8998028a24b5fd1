//! The tensor plumbing every tensor-level kernel entry point shares: which tensors the kernels
//! take, and their values as plain slices.
//!
//! A leaf: the entry points ([`super::dispatch`], [`super::cpu`], [`super::gemm`], the
//! activations, the norm and the attention) all import it, and it imports none of them.

use candle_core::{Result, Storage, Tensor};

/// Whether the kernels can take `t`: a CPU tensor of `f32`s (anything else stays with candle).
pub(super) fn is_cpu_f32(t: &Tensor) -> bool {
    matches!(t.device(), candle_core::Device::Cpu) && t.dtype() == candle_core::DType::F32
}

/// A tensor with a weight's shape and no values: one zero broadcast to `shape`, which takes
/// four bytes whatever the shape. A layer keeps it in place of weights it has packed and
/// released ([`super::dispatch::packed_and_released`]): the routing still reads the shape.
pub(super) fn stand_in(shape: &candle_core::Shape) -> Result<Tensor> {
    Tensor::zeros((), candle_core::DType::F32, &candle_core::Device::Cpu)?.broadcast_as(shape)
}

/// Fails on a [`stand_in`], recognised by every stride zero over more than one element
/// (which no tensor read from a file has): every path that reads a weight's values calls it,
/// so a released layer is an error there, never a convolution of zeros.
pub(super) fn has_values(weight: &Tensor) -> Result<()> {
    if weight.elem_count() > 1 && weight.stride().iter().all(|&s| s == 0) {
        candle_core::bail!(
            "this convolution's weights were packed for the CPU kernels and released, and this \
             call needs them (another device or precision, or a path the kernels do not take)"
        );
    }
    Ok(())
}

/// Runs `f` on the tensor's elements in row-major order, without a copy when the tensor is
/// already contiguous.
pub(super) fn with_contiguous_f32<R>(t: &Tensor, f: impl FnOnce(&[f32]) -> R) -> Result<R> {
    let t = t.contiguous()?;
    let (storage, layout) = t.storage_and_layout();
    let Storage::Cpu(cpu) = &*storage else {
        candle_core::bail!("fast conv path needs a CPU tensor");
    };
    let data = cpu.as_slice::<f32>()?;
    let Some((start, end)) = layout.contiguous_offsets() else {
        candle_core::bail!("tensor is not contiguous after `contiguous()`");
    };
    Ok(f(&data[start..end]))
}

/// The bias as a vector, zeros when the layer has none.
pub(super) fn bias_or_zero(bias: Option<&Tensor>, c_out: usize) -> Result<Vec<f32>> {
    match bias {
        Some(b) => b.flatten_all()?.to_vec1::<f32>(),
        None => Ok(vec![0.0; c_out]),
    }
}
