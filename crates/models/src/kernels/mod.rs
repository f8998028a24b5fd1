//! The CPU kernels behind the models' convolutions, linear layers and activations, kept apart
//! from the models.
//!
//! The model code (`crate::vits::layers`, `crate::kokoro::generator`, …) reads like the paper
//! and calls convolutions through [`conv1d`], [`conv_transpose1d`] and their fused forms; this
//! module decides how they run, which is where the decoder spends most of its time. candle's CPU
//! convolution unfolds the whole input (im2col) before one big matrix product, which for the
//! decoder's long signals (tens of thousands of samples) streams hundreds of megabytes through
//! memory, and it runs grouped convolutions as one tiny convolution per group. For `f32` on the
//! CPU we instead:
//!
//! - run convolutions with 3 or more taps through the direct kernel ([`direct`], its register
//!   blocks in [`block`]), which writes each output once; the fused entry points also fold an
//!   elementwise input map (scale, LeakyReLU, mask) and residual adds into it, which is how the
//!   decoder's `x + conv(LeakyReLU(x))` steps run in one pass;
//! - write pointwise and grouped convolutions as one matrix product per tap ([`gemm`]), and
//!   depthwise ones as a direct loop;
//! - split transposed convolutions into `stride` phases, each an ordinary small convolution;
//! - run a decoder stage's multi-receptive-field sum strip by strip while it is in cache
//!   ([`strips`]);
//! - compute `tanh` and the WaveNet gate with a vectorizable `exp` ([`fast_math`]);
//! - run the text encoder's relative attention as strided products over the convolutions'
//!   layout, without the [T, T] copies the tensor formulation makes ([`attention`]);
//! - normalize over channels in place, with the residual add before and the GELU after
//!   fused in ([`norm`]);
//! - run a bidirectional LSTM as one input-projection product plus one fused loop over the
//!   steps ([`BiLstm`], in `lstm`);
//! - run a transformer's linear layers in bf16 over row-major positions ([`Bf16Linear`], in
//!   `linear`), the same register block as the bf16 convolutions with its operands swapped
//!   (on AMX, `tile_gemm`'s row-major tile product, which can also add its output to a
//!   residual stream or apply SwiGLU as it writes), their attention over packed segments as
//!   products ([`packed_attention`]; on AMX in bf16, `tile_attention`), and the steps
//!   between them as row kernels ([`transformer`]).
//!
//! A layer can also be loaded in a reduced [`Precision`] ([`precision`]): its weights are
//! then packed in bfloat16 and its direct convolutions run through [`bf16`] (AVX-512) or
//! [`amx`] (AMX tiles), with `f32` sums, bias, residuals and activations.
//!
//! [`dispatch`] routes each call; [`cpu`] turns tensors into the slices the kernels work on.
//! The modules are layered, and a test keeps their imports free of circles: at the bottom the
//! plain types ([`rows`], [`tensor`], [`shape`], [`isa`]); above them the kernels ([`direct`]
//! with its [`block`]s, [`bf16`] with [`amx`], `int8`), which know nothing of each other;
//! then [`precision`], which packs a layer's weights and hands each call to its kernel; then
//! [`layer`], [`strips`], [`cpu`] and [`gemm`]; [`dispatch`] (and [`paths`]) on top.
//!
//! Each kernel picks its instruction set at run time; `OMNIVOICE_KERNEL_ISA` (`portable`,
//! `avx2`, `avx512`, `amx`) caps them all ([`isa`]), and [`isa_report`] names the paths in use.
//!
//! Other devices and dtypes keep candle's implementation (the fused entry points then run the
//! map and adds as tensor ops). Everything runs on the caller's thread, whatever
//! `RAYON_NUM_THREADS` says: the server runs several inference workers side by side, so each
//! convolution must not also fan out over all cores. The exception is [`spare`]: inside a
//! [`lending`] scope (a whole-body synthesis, a stream's stages before its first audio), the
//! `f32` direct and matrix-product convolutions and the attention share their work with a
//! core that no worker is computing on, when there is one.

mod aligned;
mod amx;
mod attention;
mod bf16;
#[cfg(test)]
mod bf16_tests;
mod block;
mod cpu;
mod direct;
mod dispatch;
mod fast_math;
mod gemm;
mod int8;
#[cfg(test)]
mod int8_tests;
mod isa;
mod layer;
mod linear;
mod lstm;
mod norm;
pub(crate) mod packed_attention;
mod paths;
mod precision;
pub(crate) mod row_linear;
mod rows;
mod shape;
mod spectral;
pub(crate) mod stft;
mod strips;
mod tensor;
#[cfg(test)]
mod testing;
#[cfg(test)]
mod tests;
mod tile_attention;
mod tile_gemm;
pub(crate) mod transformer;

pub(crate) use attention::relative_attention;
pub use dispatch::{conv1d, conv_transpose1d};
pub(crate) use dispatch::{
    conv1d_fused, conv_transpose1d_fused, packed_and_released, residual_stack_sum,
};
pub(crate) use fast_math::{channel_snakes, gated_tanh, gelu_tanh, snake, tanh};
pub(crate) use layer::{InputMap, PackedPhaseCache, PackedWeightCache, StackConv};
pub(crate) use linear::Bf16Linear;
pub use lstm::BiLstm;
pub(crate) use norm::channel_norm;
pub use paths::isa_report;
pub use precision::Precision;
pub(crate) use row_linear::RowLinear;
pub(crate) use rows::{AdainSnake, Affine, ChannelSnake};
pub(crate) use tile_gemm::Output as LinearOutput;

/// The CPU paths forced one by one, for `benches/conv.rs`; not part of the production surface.
#[cfg(feature = "bench-kernels")]
pub use dispatch::routes;
