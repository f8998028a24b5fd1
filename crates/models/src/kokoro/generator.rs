//! The iSTFTNet generator: decoder features [1, 512, 2F] and F0 [1, 2F] → waveform [600·F].
//!
//! Kokoro's vocoder is StyleTTS 2's (Li et al. 2023, arXiv:2306.07691) iSTFTNet generator
//! (Kaneko et al. 2022, arXiv:2203.02395), `Generator` in hexgrad/kokoro's `istftnet.py`:
//! HiFi-GAN's transposed-convolution stages, but only up to a fifth of the sample rate, where
//! `conv_post` predicts 11 log-magnitudes and 11 phases per frame and an inverse STFT
//! (n_fft 20, hop 5) makes the samples. Into each stage it adds a harmonic source in the
//! manner of the neural source-filter models (Wang et al. 2019, arXiv:1904.12088): nine
//! sines on the predicted F0, merged into one excitation, whose STFT passes through a
//! strided convolution and a residual block to the stage's rate. Its residual blocks
//! (`AdaINResBlock1`) are HiFi-GAN's with AdaIN on the style vector before each convolution
//! and Snake activations (`x + sin²(αx)/α`, Ziyin et al. 2020) instead of LeakyReLU.
//!
//! It computes what the exported graph `kokoro-v1.0.int8.onnx` computes, which differs from
//! the PyTorch code in three places: the sine source has no random initial phase and no
//! additive noise; the source's phase is `atan(im / re)` corrected by quadrant with `Where`
//! (not `atan2`); and the inverse STFT is torch-stft's recipe with a frozen normalizer (see
//! [`super::signal::InverseStft`]). The source's STFT is computed as onnxruntime computes it
//! ([`crate::kernels::stft`]): where the source is silent the network reads the phase of the
//! transform's rounding noise, so that noise has to be onnxruntime's. The weight-free steps
//! are checked against onnxruntime runs of those subgraphs
//! (`scripts/kokoro_generator_fixtures.py`).

use candle_core::{Device, Result, Tensor};

use super::blocks::AdaIn1d;
use super::config::DecoderConfig;
use super::signal::{phase_of, reflect_pad, HarmonicSource, InverseStft};
use super::weights::Weights;
use crate::error::ModelError;
use crate::kernels::stft::{Stft, StridedConv1d};
use crate::kernels::{self, InputMap, PackedPhaseCache, PackedWeightCache, Precision};
use crate::layers::FusedConv1d;

/// Loading fails with the file's and the weight's name.
type LoadResult<T> = std::result::Result<T, ModelError>;

/// LeakyReLU slope before each upsampling stage.
const LRELU_SLOPE: f64 = 0.1;
/// PyTorch's default LeakyReLU slope, before `conv_post`.
const POST_LRELU_SLOPE: f64 = 0.01;

/// Refuses a file whose convolution `module` slides otherwise than this code computes it
/// (stride, padding at each end, dilation), when the file says (ONNX graphs do).
fn check_conv(
    w: &Weights,
    module: &str,
    stride: usize,
    padding: usize,
    dilation: usize,
) -> LoadResult<()> {
    let Some(a) = w.conv_attributes(module) else {
        return Ok(());
    };
    let all = |values: &[i64], want: usize| values.iter().all(|&v| v == want as i64);
    if all(&a.strides, stride) && all(&a.pads, padding) && all(&a.dilations, dilation) {
        return Ok(());
    }
    Err(ModelError::Tensor {
        file: w.file().to_path_buf(),
        tensor: module.to_string(),
        reason: format!(
            "the graph's convolution has strides {:?}, pads {:?}, dilations {:?}; this port \
             computes stride {stride}, padding {padding}, dilation {dilation}",
            a.strides, a.pads, a.dilations
        ),
    })
}

/// A stride-1 convolution with 'same' padding: the shared [`FusedConv1d`], loaded by name
/// and checked against the graph's attributes.
#[derive(Debug, Clone)]
pub(super) struct Conv(FusedConv1d);

impl Conv {
    /// `name.weight` [C_out, C_in, K] and `name.bias`; padding keeps the length.
    pub(super) fn load(w: &Weights, name: &str, dilation: usize) -> LoadResult<Self> {
        let weight = w.get(&format!("{name}.weight"))?;
        let bias = w.get(&format!("{name}.bias"))?;
        let taps = weight.dim(2)?;
        let padding = dilation * (taps - 1) / 2;
        check_conv(w, name, 1, padding, dilation)?;
        let cache = PackedWeightCache::spectral(Precision::F32);
        Ok(Self(FusedConv1d::new(weight, Some(bias), dilation, cache)?))
    }

    /// `Σ residuals + conv(map(x))`: [B, C_in, L] → [B, C_out, L].
    fn forward(&self, x: &Tensor, map: &InputMap<'_>, residuals: &[&Tensor]) -> Result<Tensor> {
        self.0.forward_fused(x, map, residuals)
    }

    fn release_unpacked(&mut self) -> Result<()> {
        self.0.release_unpacked()
    }

    /// The same convolution with its weights packed for `precision` (on first use).
    fn in_precision(&mut self, precision: Precision) {
        self.0 = self
            .0
            .clone()
            .with_cache(PackedWeightCache::spectral(precision));
    }
}

/// A strided convolution (`noise_convs`, the decoder's F0/N convolutions) loaded by name.
pub(super) fn strided_conv(
    w: &Weights,
    name: &str,
    stride: usize,
    padding: usize,
) -> LoadResult<StridedConv1d> {
    check_conv(w, name, stride, padding, 1)?;
    let weight = w.get(&format!("{name}.weight"))?;
    let bias = w.get(&format!("{name}.bias"))?;
    Ok(StridedConv1d::new(&weight, Some(&bias), stride, padding)?)
}

/// A Snake activation's per-channel α, with the 1/α the graph stores next to it.
#[derive(Debug, Clone)]
struct Snake {
    alpha: Vec<f32>,
    inv_alpha: Vec<f32>,
}

impl Snake {
    fn load(w: &Weights, name: &str, channels: usize) -> LoadResult<Self> {
        let alpha = w
            .get_shaped(name, &[1, channels, 1])?
            .flatten_all()?
            .to_vec1::<f32>()?;
        let inv_alpha = alpha.iter().map(|a| 1.0 / a).collect();
        Ok(Self { alpha, inv_alpha })
    }
}

/// `(1 + γ, β)` of an AdaIN for style `s`, one value per channel.
fn scale_shift(adain: &AdaIn1d, s: &Tensor) -> Result<(Vec<f32>, Vec<f32>)> {
    let (scale, shift) = adain.affine(s)?;
    Ok((
        scale.flatten_all()?.to_vec1::<f32>()?,
        shift.flatten_all()?.to_vec1::<f32>()?,
    ))
}

/// `Snake(AdaIN(x, s))` for `x` [1, C, T], `y = (1 + γ)·(x − μ)/√(σ² + ε) + β` with the
/// mean and biased variance over time, then `y + sin²(α·y)/α`, as the input map of the
/// convolution that reads it: the statistics are taken here, and the rest is applied as the
/// convolution reads its input ([`kernels::channel_snakes`]). The generator runs it before
/// every one of its 48 residual convolutions, on up to 128 × 120·F samples, and a pass of its
/// own wrote the whole signal once more each time.
fn snake_map(
    x: &Tensor,
    scale: &[f32],
    shift: &[f32],
    snake: &Snake,
    eps: f32,
) -> Result<Vec<kernels::ChannelSnake>> {
    let channels = scale.len();
    if shift.len() != channels || snake.alpha.len() != channels {
        candle_core::bail!(
            "snake_map: {channels} scales for {} alphas",
            snake.alpha.len()
        );
    }
    let parameters: Vec<kernels::AdainSnake> = (0..channels)
        .map(|c| kernels::AdainSnake {
            affine: kernels::Affine {
                scale: scale[c],
                shift: shift[c],
            },
            alpha: snake.alpha[c],
            inv_alpha: snake.inv_alpha[c],
        })
        .collect();
    // A host kernel: on another device the signal makes a round trip.
    kernels::channel_snakes(&x.to_device(&Device::Cpu)?, &parameters, eps)
}

/// One step of `AdaINResBlock1`: `x + conv2(Snake(AdaIN2(conv1(Snake(AdaIN1(x))))))`.
#[derive(Debug, Clone)]
struct SnakeStep {
    adain1: AdaIn1d,
    snake1: Snake,
    conv1: Conv,
    adain2: AdaIn1d,
    snake2: Snake,
    conv2: Conv,
}

/// `AdaINResBlock1`: three steps, the first convolution of each dilated (1, 3, 5).
#[derive(Debug, Clone)]
struct SnakeResBlock {
    steps: Vec<SnakeStep>,
    /// The instance norms' epsilon.
    eps: f32,
}

impl SnakeResBlock {
    fn load(
        w: &Weights,
        name: &str,
        channels: usize,
        dilations: &[usize],
        cfg: &DecoderConfig,
    ) -> LoadResult<Self> {
        let adain = |kind: &str, j: usize| {
            AdaIn1d::load(
                w,
                &format!("{name}.{kind}.{j}"),
                cfg.style_dim,
                channels,
                cfg.norm_eps,
            )
        };
        let steps = dilations
            .iter()
            .enumerate()
            .map(|(j, &d)| {
                Ok(SnakeStep {
                    adain1: adain("adain1", j)?,
                    snake1: Snake::load(w, &format!("{name}.alpha1.{j}"), channels)?,
                    conv1: Conv::load(w, &format!("{name}.convs1.{j}"), d)?,
                    adain2: adain("adain2", j)?,
                    snake2: Snake::load(w, &format!("{name}.alpha2.{j}"), channels)?,
                    conv2: Conv::load(w, &format!("{name}.convs2.{j}"), 1)?,
                })
            })
            .collect::<LoadResult<_>>()?;
        Ok(Self {
            steps,
            eps: cfg.norm_eps as f32,
        })
    }

    /// `x` [1, C, T] → [1, C, T]; with `sum`, returns `sum + block(x)` (the last
    /// convolution adds it), for a stage's multi-receptive-field sum.
    fn forward(&self, x: &Tensor, s: &Tensor, sum: Option<&Tensor>) -> Result<Tensor> {
        let mut x = x.clone();
        for (j, step) in self.steps.iter().enumerate() {
            let (g1, b1) = scale_shift(&step.adain1, s)?;
            let snakes = snake_map(&x, &g1, &b1, &step.snake1, self.eps)?;
            let xt = step
                .conv1
                .forward(&x, &InputMap::channel_snakes(&snakes), &[])?;
            let (g2, b2) = scale_shift(&step.adain2, s)?;
            let snakes = snake_map(&xt, &g2, &b2, &step.snake2, self.eps)?;
            let last = j + 1 == self.steps.len();
            let residuals: Vec<&Tensor> = std::iter::once(&x).chain(sum.filter(|_| last)).collect();
            x = step
                .conv2
                .forward(&xt, &InputMap::channel_snakes(&snakes), &residuals)?;
        }
        Ok(x)
    }

    fn release_unpacked(&mut self) -> Result<()> {
        for step in &mut self.steps {
            step.conv1.release_unpacked()?;
            step.conv2.release_unpacked()?;
        }
        Ok(())
    }

    fn in_precision(&mut self, precision: Precision) {
        for step in &mut self.steps {
            step.conv1.in_precision(precision);
            step.conv2.in_precision(precision);
        }
    }
}

/// `ups[i]`: a transposed convolution that upsamples by `stride`.
#[derive(Debug, Clone)]
struct Upsample {
    /// [C_in, C_out, K]
    weight: Tensor,
    bias: Tensor,
    stride: usize,
    padding: usize,
    packed: PackedPhaseCache,
}

/// One upsampling stage: `ups[i]`, the source branch `noise_convs[i]` + `noise_res[i]` added
/// to it, then the mean of its three residual blocks.
#[derive(Debug, Clone)]
struct Stage {
    upsample: Upsample,
    /// Takes the source spectrum [1, 22, 120F + 1] to this stage's rate.
    noise_conv: StridedConv1d,
    noise_res: SnakeResBlock,
    resblocks: Vec<SnakeResBlock>,
    /// The last stage prepends one reflected sample (`ReflectionPad1d((1, 0))`), which
    /// brings 120·F samples to the source spectrum's 120·F + 1 frames.
    reflect_left: bool,
}

/// The iSTFTNet generator (`decoder.generator`).
#[derive(Debug, Clone)]
pub(super) struct Generator {
    source: HarmonicSource,
    /// The STFT of the reflect-padded source, as onnxruntime computes it.
    analysis: Stft,
    n_fft: usize,
    stages: Vec<Stage>,
    conv_post: Conv,
    istft: InverseStft,
}

impl Generator {
    /// `prefix` is the generator's module (`decoder.generator`).
    pub(super) fn load(w: &Weights, cfg: &DecoderConfig, prefix: &str) -> LoadResult<Self> {
        let n_stages = cfg.upsample_rates.len();
        let mut stages = Vec::with_capacity(n_stages);
        for (i, (&rate, &kernel)) in cfg
            .upsample_rates
            .iter()
            .zip(&cfg.upsample_kernel_sizes)
            .enumerate()
        {
            let ch = cfg.upsample_initial_channel >> (i + 1);
            let name = format!("{prefix}.ups.{i}");
            check_conv(w, &name, rate, (kernel - rate) / 2, 1)?;
            let upsample = Upsample {
                weight: w.get_shaped(&format!("{name}.weight"), &[2 * ch, ch, kernel])?,
                bias: w.get_shaped(&format!("{name}.bias"), &[ch])?,
                stride: rate,
                padding: (kernel - rate) / 2,
                packed: PackedPhaseCache::new(Precision::F32),
            };
            // The source spectrum has 120·F + 1 frames; stage i runs at 2F·Π rates[..=i],
            // so every stage but the last takes it down by the rates still to come.
            let stride: usize = cfg.upsample_rates[i + 1..].iter().product();
            let noise_padding = if stride > 1 { stride.div_ceil(2) } else { 0 };
            let noise_conv = strided_conv(
                w,
                &format!("{prefix}.noise_convs.{i}"),
                stride,
                noise_padding,
            )?;
            let noise_res = SnakeResBlock::load(
                w,
                &format!("{prefix}.noise_res.{i}"),
                ch,
                &cfg.noise_res_dilations,
                cfg,
            )?;
            let resblocks = cfg
                .resblock_dilation_sizes
                .iter()
                .enumerate()
                .map(|(j, dilations)| {
                    let k = i * cfg.resblock_dilation_sizes.len() + j;
                    SnakeResBlock::load(w, &format!("{prefix}.resblocks.{k}"), ch, dilations, cfg)
                })
                .collect::<LoadResult<_>>()?;
            stages.push(Stage {
                upsample,
                noise_conv,
                noise_res,
                resblocks,
                reflect_left: i + 1 == n_stages,
            });
        }
        let merge = w
            .get_shaped(
                &format!("{prefix}.m_source.l_linear.weight"),
                &[1, cfg.harmonics],
            )?
            .flatten_all()?
            .to_vec1::<f32>()?;
        let merge_bias = w
            .get_shaped(&format!("{prefix}.m_source.l_linear.bias"), &[1])?
            .flatten_all()?
            .to_vec1::<f32>()?;
        let source = HarmonicSource {
            upsample: cfg.upsample_rates.iter().product::<usize>() * cfg.hop,
            sample_rate: cfg.sample_rate as f32,
            sine_amp: cfg.sine_amp,
            voiced_threshold: cfg.voiced_threshold,
            merge,
            merge_bias: merge_bias[0],
        };
        let window = w
            .get_shaped(&format!("{prefix}.stft.window"), &[cfg.n_fft])?
            .to_vec1::<f32>()?;
        let analysis = Stft::new(window, cfg.hop);
        let bins = cfg.n_fft / 2 + 1;
        let istft = InverseStft {
            basis: w.get_shaped(
                &format!("{prefix}.stft.istft.stft.inverse_basis"),
                &[2 * bins, 1, cfg.n_fft],
            )?,
            window_sum: w
                .get(&format!("{prefix}.stft.istft.stft.window_sum"))?
                .flatten_all()?
                .to_vec1::<f32>()?,
            hop: cfg.hop,
            n_fft: cfg.n_fft,
        };
        Ok(Self {
            source,
            analysis,
            n_fft: cfg.n_fft,
            stages,
            conv_post: Conv::load(w, &format!("{prefix}.conv_post"), 1)?,
            istft,
        })
    }

    /// Runs the residual blocks' and upsampling convolutions (nearly all of the generator's
    /// multiply-adds) in `precision`. `conv_post` stays `f32`: it writes the phases the
    /// inverse STFT turns into samples, for a fraction of a percent of the work.
    pub(super) fn in_precision(&mut self, precision: Precision) {
        for stage in &mut self.stages {
            stage.upsample.packed = PackedPhaseCache::new(precision);
            stage.noise_res.in_precision(precision);
            for block in &mut stage.resblocks {
                block.in_precision(precision);
            }
        }
    }

    /// Packs the stride-1 convolutions now and keeps only their packed copies (see
    /// [`crate::kernels::packed_and_released`]); the upsampling ones keep their tensors
    /// (their short inputs go through candle's products in `f32`).
    pub(super) fn release_unpacked(&mut self) -> Result<()> {
        for stage in &mut self.stages {
            stage.noise_res.release_unpacked()?;
            for block in &mut stage.resblocks {
                block.release_unpacked()?;
            }
        }
        self.conv_post.release_unpacked()
    }

    /// The harmonic source's spectrum `[|X|; ∠X]` [1, 2·bins, 120F + 1] from the excitation
    /// [600F]: reflect-padded by n_fft/2, STFT with the periodic Hann window.
    fn source_spectrum(&self, source: &[f32], device: &Device) -> Result<Tensor> {
        let padded = reflect_pad(source, self.n_fft / 2);
        let (re, im) = self.analysis.forward(&padded);
        let (bins, frames) = (self.analysis.bins(), self.analysis.frames(padded.len()));
        let magnitude = re.iter().zip(&im).map(|(&r, &i)| (r * r + i * i).sqrt());
        let phase = re.iter().zip(&im).map(|(&r, &i)| phase_of(r, i));
        let har: Vec<f32> = magnitude.chain(phase).collect();
        Tensor::from_vec(har, (1, 2 * bins, frames), device)
    }

    /// `x` [1, 512, 2F] (the decoder's output), style `s` [1, 128], `f0` [1, 2F] (Hz) →
    /// samples [600·F].
    pub(super) fn forward(&self, x: &Tensor, s: &Tensor, f0: &Tensor) -> Result<Vec<f32>> {
        let f0 = f0.flatten_all()?.to_vec1::<f32>()?;
        let source = self.source.forward(&f0); // [600F]
        let har = self.source_spectrum(&source, x.device())?; // [1, 22, 120F + 1]
        let post = self.spectrum(x, s, &har)?; // [1, 22, 120F + 1]
        let bins = self.n_fft / 2 + 1;
        self.istft
            .forward(&post.narrow(1, 0, bins)?, &post.narrow(1, bins, bins)?)
    }

    /// The network from the decoder's output `x` [1, 512, 2F] and the source spectrum `har`
    /// [1, 22, K] to `conv_post`'s output [1, 22, K] (K = 120F + 1): log-magnitudes, then
    /// phases before their sine.
    fn spectrum(&self, x: &Tensor, s: &Tensor, har: &Tensor) -> Result<Tensor> {
        // `x` holds the sum of `count` resblock outputs; their mean is taken by the next
        // convolution's input map (LeakyReLU(s/n) = LeakyReLU(s)/n).
        let mut x = x.clone();
        let mut count = 1usize;
        for stage in &self.stages {
            let x_source = stage.noise_conv.forward(har)?; // [1, C, L]
            let x_source = stage.noise_res.forward(&x_source, s, None)?;
            let up = &stage.upsample;
            let map = InputMap {
                scale: 1.0 / count as f64,
                leaky_slope: Some(LRELU_SLOPE),
                mask: None,
                channels: None,
            };
            let mut y = kernels::conv_transpose1d_fused(
                &x,
                &up.weight,
                Some(&up.bias),
                up.stride,
                up.padding,
                &map,
                Some(&up.packed),
            )?; // [1, C, L_prev · rate]
            if stage.reflect_left {
                y = Tensor::cat(&[&y.narrow(2, 1, 1)?, &y], 2)?; // [1, C, L]
            }
            let y = (y + x_source)?;
            let mut sum: Option<Tensor> = None;
            for block in &stage.resblocks {
                sum = Some(block.forward(&y, s, sum.as_ref())?);
            }
            count = stage.resblocks.len().max(1);
            x = sum.unwrap_or(y);
        }
        let map = InputMap {
            scale: 1.0 / count as f64,
            leaky_slope: Some(POST_LRELU_SLOPE),
            mask: None,
            channels: None,
        };
        self.conv_post.forward(&x, &map, &[])
    }
}

#[cfg(test)]
pub(super) mod tests {
    //! The generator's steps against onnxruntime: the weight-free ones on subgraphs of the
    //! shipped file (`scripts/kokoro_generator_fixtures.py`) and the Resize units of
    //! `scripts/kokoro_reference.py`; the network on the oracle's emma case.

    use std::path::PathBuf;
    use std::sync::OnceLock;

    use candle_core::{Device, Tensor};

    use super::super::config::DecoderConfig;
    use super::super::signal::{resize_linear, resize_nearest};
    use super::super::testing::model_path;
    use super::super::weights::Weights;
    use super::*;

    /// The weights of the real model, read once per test binary.
    pub(in super::super) fn weights() -> &'static Weights {
        static WEIGHTS: OnceLock<Weights> = OnceLock::new();
        WEIGHTS.get_or_init(|| Weights::from_onnx(&model_path(), &Device::Cpu).unwrap())
    }

    fn generator() -> &'static Generator {
        static GENERATOR: OnceLock<Generator> = OnceLock::new();
        GENERATOR.get_or_init(|| {
            Generator::load(weights(), &DecoderConfig::v1_0(), "decoder.generator").unwrap()
        })
    }

    /// The arrays of `tests/fixtures/kokoro/<name>.npz`.
    pub(in super::super) struct Fixture {
        name: String,
        arrays: Vec<(String, Tensor)>,
    }

    impl Fixture {
        pub(in super::super) fn load(name: &str) -> Self {
            let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/kokoro")
                .join(format!("{name}.npz"));
            let arrays =
                Tensor::read_npz(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            Self {
                name: name.to_string(),
                arrays,
            }
        }

        pub(in super::super) fn get(&self, key: &str) -> Tensor {
            self.arrays
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, t)| t.clone())
                .unwrap_or_else(|| panic!("{}.npz has no {key}", self.name))
        }

        pub(in super::super) fn values(&self, key: &str) -> Vec<f32> {
            self.get(key)
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap()
        }

        pub(in super::super) fn scalar(&self, key: &str) -> i64 {
            self.get(key).to_scalar::<i64>().unwrap()
        }
    }

    /// max |a − b| / max |b|.
    pub(in super::super) fn relative_error(ours: &[f32], reference: &[f32]) -> f32 {
        assert_eq!(ours.len(), reference.len(), "lengths differ");
        let scale = reference.iter().fold(0f32, |m, v| m.max(v.abs()));
        let diff = ours
            .iter()
            .zip(reference)
            .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        diff / scale
    }

    /// Signal-to-noise ratio of `ours` against `reference`, in dB.
    pub(in super::super) fn snr_db(ours: &[f32], reference: &[f32]) -> f64 {
        assert_eq!(ours.len(), reference.len(), "lengths differ");
        let signal: f64 = reference.iter().map(|&v| f64::from(v).powi(2)).sum();
        let noise: f64 = ours
            .iter()
            .zip(reference)
            .map(|(&a, &b)| f64::from(a - b).powi(2))
            .sum();
        10.0 * (signal / noise).log10()
    }

    /// The load-time check reads the graph's attributes: the real ones pass, others fail.
    #[test]
    fn convolutions_are_checked_against_the_graph() {
        let w = weights();
        check_conv(w, "decoder.generator.noise_convs.0", 6, 3, 1).unwrap();
        check_conv(w, "decoder.generator.resblocks.1.convs1.2", 1, 15, 5).unwrap();
        let err = check_conv(w, "decoder.generator.noise_convs.0", 5, 3, 1).unwrap_err();
        assert!(err.to_string().contains("strides [6]"), "{err}");
    }

    /// Each Resize configuration of the graph (the oracle's units) as the source computes it.
    #[test]
    fn resizes_match_onnxruntime() {
        for name in [
            "resize_nearest_x300",
            "resize_linear_down300",
            "resize_linear_x300",
        ] {
            let f = Fixture::load(name);
            let x = f.get("x").squeeze(0).unwrap().to_vec2::<f32>().unwrap();
            let y = f.get("y").squeeze(0).unwrap().to_vec2::<f32>().unwrap();
            let scale = f.values("scales")[2];
            for (x, y) in x.iter().zip(&y) {
                let ours = if name.starts_with("resize_nearest") {
                    resize_nearest(x, scale as usize)
                } else {
                    resize_linear(x, (x.len() as f32 * scale).floor() as usize, scale)
                };
                let err = relative_error(&ours, y);
                eprintln!(
                    "{name}: {} → {}, max error {err:.2e} of max |y|",
                    x.len(),
                    y.len()
                );
                assert!(err <= 1e-6, "{name}: {err:.2e}");
            }
        }
    }

    /// The sine source on an F0 curve with silence, the voicing threshold and two voiced
    /// stretches, against its subgraph of the shipped file.
    #[test]
    fn harmonic_source_matches_the_graph() {
        let f = Fixture::load("generator_source");
        let ours = generator().source.forward(&f.values("f0"));
        let reference = f.values("har_source");
        let err = relative_error(&ours, &reference);
        let max_abs = ours
            .iter()
            .zip(&reference)
            .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        eprintln!("har_source: max |Δ| {max_abs:.2e}, relative {err:.2e}");
        assert!(max_abs <= 1e-4, "{max_abs:.2e}");
        // Unvoiced samples (F0 ≤ 10 Hz, here the first 900) are exactly tanh(bias).
        let bias = generator().source.merge_bias.tanh();
        assert!(ours[..900].iter().all(|&v| v == bias));
    }

    /// The source's STFT magnitude and Atan/Where phase, from the graph's own source signal.
    #[test]
    fn source_spectrum_matches_the_graph() {
        let f = Fixture::load("generator_source");
        let har = generator()
            .source_spectrum(&f.values("har_source"), &Device::Cpu)
            .unwrap();
        let reference = f.get("har");
        assert_eq!(har.dims()[1..], *reference.dims());
        let ours = har.squeeze(0).unwrap().to_vec2::<f32>().unwrap();
        let reference = reference.to_vec2::<f32>().unwrap();
        let (mag, phase) = ours.split_at(11);
        let (mag_ref, phase_ref) = reference.split_at(11);
        let mag_err = relative_error(&mag.concat(), &mag_ref.concat());
        // The STFT is onnxruntime's operation for operation, so even the phases of the bins
        // that hold only rounding noise (silence; the DC and Nyquist bins' imaginary parts)
        // agree, up to ±2π where the graph's phase sits at ±π.
        let mut worst = 0f32;
        let mut differing = 0usize;
        for (row, row_ref) in phase.iter().zip(phase_ref) {
            for (&p, &q) in row.iter().zip(row_ref) {
                let d = (p - q).rem_euclid(std::f32::consts::TAU);
                let d = d.min(std::f32::consts::TAU - d);
                worst = worst.max(d);
                differing += usize::from(p != q);
            }
        }
        eprintln!(
            "har: magnitude max error {mag_err:.2e} of max; phase max |Δ| {worst:.2e} rad, \
             {differing} of {} values not identical",
            11 * phase[0].len()
        );
        assert!(mag_err <= 1e-6, "{mag_err:.2e}");
        assert!(worst <= 1e-5, "{worst:.2e}");
    }

    /// The exported iSTFT (basis, frozen window_sum, ×4, trim) from the graph's conv_post.
    #[test]
    fn inverse_stft_matches_the_graph() {
        let f = Fixture::load("generator_net");
        let post = f.get("conv_post").unsqueeze(0).unwrap();
        let ours = generator()
            .istft
            .forward(
                &post.narrow(1, 0, 11).unwrap(),
                &post.narrow(1, 11, 11).unwrap(),
            )
            .unwrap();
        let err = relative_error(&ours, &f.values("audio"));
        eprintln!("istft: {} samples, max error {err:.2e} of max", ours.len());
        assert!(err <= 1e-5, "{err:.2e}");
    }

    /// The network from the decoder output to conv_post, given the graph's own source
    /// spectrum: every convolution, AdaIN and Snake, with no phase noise in between.
    #[test]
    fn network_matches_the_graph() {
        let f = Fixture::load("generator_net");
        let x = f.get("dec_out").unsqueeze(0).unwrap();
        let style = f.get("style").unsqueeze(0).unwrap();
        let har = f.get("har").unsqueeze(0).unwrap();
        let post = generator().spectrum(&x, &style, &har).unwrap();
        let ours = post.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let reference = f.values("conv_post");
        let err = relative_error(&ours, &reference);
        let snr = snr_db(&ours, &reference);
        eprintln!("conv_post: max error {err:.2e} of max, SNR {snr:.1} dB");
        assert!(err <= 1e-4, "{err:.2e}");

        // The whole generator from F0 on these voiced frames, its own source included.
        let audio = generator().forward(&x, &style, &f.get("f0")).unwrap();
        let snr = snr_db(&audio, &f.values("audio"));
        eprintln!("generator from F0: audio SNR {snr:.1} dB");
        // Measured 32.2 dB; the floor is the sine phase's (see `generator_matches_the_oracle`).
        assert!(snr >= 28.0, "{snr:.1} dB");
    }

    /// The oracle's emma case through the generator from the decoder output it stored:
    /// the source (one-frame crop), conv_post (crop) and the audio.
    #[test]
    fn generator_matches_the_oracle() {
        let case = Fixture::load("emma");
        let g = generator();
        let f0 = case.values("f0");
        let a = case.scalar("crop_frame") as usize;
        let source = g.source.forward(&f0);
        let source_err = relative_error(
            &source[600 * a..600 * (a + 1)],
            &case.values("har_source_crop"),
        );

        let x = case.get("dec_out").unsqueeze(0).unwrap();
        let style = case
            .get("style")
            .narrow(0, 0, 128)
            .unwrap()
            .unsqueeze(0)
            .unwrap();
        let har = g.source_spectrum(&source, &Device::Cpu).unwrap();
        let post = g.spectrum(&x, &style, &har).unwrap();
        let post_crop = post
            .narrow(2, 120 * a, 120)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        let post_ref = case.values("conv_post_crop");
        let post_err = relative_error(&post_crop, &post_ref);
        let post_snr = snr_db(&post_crop, &post_ref);

        let audio = g
            .forward(
                &x,
                &style,
                &Tensor::new(f0.as_slice(), &Device::Cpu).unwrap(),
            )
            .unwrap();
        let reference = case.values("audio");
        assert_eq!(audio.len(), reference.len());
        let snr = snr_db(&audio, &reference);
        eprintln!(
            "emma: har_source crop {source_err:.2e}; conv_post crop max error {post_err:.2e} of \
             max, SNR {post_snr:.1} dB; audio SNR {snr:.1} dB"
        );
        // onnxruntime against itself (other graph optimizations) gives 30.8 dB: the sine
        // phase grows to ~1e4 rad and turns tiny F0 differences into phase differences.
        // Measured: conv_post crop 45.5 dB, audio 28.4 dB.
        assert!(source_err <= 1e-3, "{source_err:.2e}");
        assert!(post_snr >= 38.0, "conv_post crop {post_snr:.1} dB");
        assert!(snr >= 25.0, "audio {snr:.1} dB");
    }
}
