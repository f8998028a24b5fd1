//! Kokoro v1.0's hyperparameters, written down once.
//!
//! The ONNX files carry weights but not the architecture's numbers (the shapes show most of
//! them, not strides, epsilons or how often ALBERT's shared layer runs), and there is only one
//! Kokoro v1.0: the values are constants of the release (its `config.json`), checked against
//! the weight shapes at load so a different file is refused rather than misread. The
//! decoder's and generator's own numbers are [`DecoderConfig`], here so that both read them
//! from below.

/// The decoder's and generator's numbers. The iSTFTNet ones are Kokoro v1.0's `config.json`
/// (`istftnet`); the widths and the sine source's constants are fixed in `istftnet.py`.
#[derive(Debug, Clone, PartialEq)]
pub struct DecoderConfig {
    /// Channels of `asr`, the text features per frame.
    pub dim_in: usize,
    /// The decoder half of the voice vector.
    pub style_dim: usize,
    /// Width of `encode` and of `decode.0..=2`.
    pub hidden: usize,
    /// Channels of `asr_res`, the features concatenated again before each decode block.
    pub asr_res: usize,
    /// Decode blocks (the last one upsamples ×2 to `upsample_initial_channel`).
    pub decode_blocks: usize,
    pub upsample_rates: Vec<usize>,
    pub upsample_kernel_sizes: Vec<usize>,
    pub upsample_initial_channel: usize,
    pub resblock_kernel_sizes: Vec<usize>,
    pub resblock_dilation_sizes: Vec<Vec<usize>>,
    /// Dilations of the source branch's residual blocks (`noise_res`).
    pub noise_res_dilations: Vec<usize>,
    pub n_fft: usize,
    pub hop: usize,
    pub sample_rate: u32,
    /// Sines in the harmonic source: the fundamental and 8 overtones.
    pub harmonics: usize,
    pub sine_amp: f32,
    /// F0 (Hz) above which a sample counts as voiced.
    pub voiced_threshold: f32,
    /// Epsilon of the instance norms inside AdaIN.
    pub norm_eps: f64,
    /// Negative slope of the AdainResBlk1d LeakyReLUs.
    pub leaky_slope: f64,
}

impl DecoderConfig {
    /// Kokoro v1.0 as released.
    pub fn v1_0() -> Self {
        Self {
            dim_in: 512,
            style_dim: 128,
            hidden: 1024,
            asr_res: 64,
            decode_blocks: 4,
            upsample_rates: vec![10, 6],
            upsample_kernel_sizes: vec![20, 12],
            upsample_initial_channel: 512,
            resblock_kernel_sizes: vec![3, 7, 11],
            resblock_dilation_sizes: vec![vec![1, 3, 5]; 3],
            noise_res_dilations: vec![1, 3, 5],
            n_fft: 20,
            hop: 5,
            sample_rate: 24_000,
            harmonics: 9,
            sine_amp: 0.1,
            voiced_threshold: 10.0,
            norm_eps: 1e-5,
            leaky_slope: 0.2,
        }
    }

    /// Output samples per alignment frame: ×2 in the last decode block, then the generator's
    /// upsampling and hop (2 · 10 · 6 · 5 = 600).
    pub fn samples_per_frame(&self) -> usize {
        2 * self.upsample_rates.iter().product::<usize>() * self.hop
    }
}

impl Default for DecoderConfig {
    fn default() -> Self {
        Self::v1_0()
    }
}

/// The PL-BERT text encoder: ALBERT with one shared layer applied `layers` times.
#[derive(Debug, Clone, PartialEq)]
pub struct AlbertConfig {
    /// Embedding width (before `embedding_hidden_mapping_in`).
    pub embedding: usize,
    pub hidden: usize,
    pub heads: usize,
    pub intermediate: usize,
    /// Applications of the one shared layer.
    pub layers: usize,
    pub max_positions: usize,
    /// LayerNorm epsilon throughout ALBERT (1e-12, HF's default).
    pub layer_norm_eps: f64,
}

/// Kokoro-82M v1.0.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Phoneme vocabulary size; id 0 is the pad that opens and closes every input.
    pub n_token: usize,
    /// Width of the text and duration encoders and the prosody predictor.
    pub hidden: usize,
    /// Each half of the 256-wide voice vector: `[..128]` conditions the decoder (timbre),
    /// `[128..]` the prosody predictor.
    pub style_dim: usize,
    /// Duration bins: a token's duration is the sum of `max_dur` sigmoids.
    pub max_dur: usize,
    /// Layers of the text encoder's CNN and of the duration encoder.
    pub n_layer: usize,
    pub text_encoder_kernel_size: usize,
    /// Negative slope of the text encoder's and the AdaIN blocks' LeakyReLU.
    pub leaky_slope: f64,
    /// Epsilon of the text encoder's LayerNorm, AdaLayerNorm and instance norms.
    pub norm_eps: f64,
    pub albert: AlbertConfig,
    /// The decoder and iSTFTNet generator (sample rate, upsampling, source).
    pub decoder: DecoderConfig,
    pub sample_rate: u32,
    /// Output samples per alignment frame: 2 (decoder) × Π upsample rates × hop.
    pub samples_per_frame: usize,
}

impl Config {
    /// Kokoro v1.0 as released.
    pub fn v1_0() -> Self {
        let decoder = DecoderConfig::v1_0();
        Self {
            n_token: 178,
            hidden: 512,
            style_dim: 128,
            max_dur: 50,
            n_layer: 3,
            text_encoder_kernel_size: 5,
            leaky_slope: 0.2,
            norm_eps: 1e-5,
            albert: AlbertConfig {
                embedding: 128,
                hidden: 768,
                heads: 12,
                intermediate: 2048,
                layers: 12,
                max_positions: 512,
                layer_norm_eps: 1e-12,
            },
            sample_rate: decoder.sample_rate,
            samples_per_frame: decoder.samples_per_frame(),
            decoder,
        }
    }

    /// The whole voice vector: decoder half then predictor half.
    pub fn voice_dim(&self) -> usize {
        2 * self.style_dim
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_frame_is_600_samples_at_24_khz() {
        let c = Config::v1_0();
        assert_eq!(c.samples_per_frame, 600);
        assert_eq!(c.sample_rate as usize / c.samples_per_frame, 40);
        assert_eq!(c.voice_dim(), 256);
        assert_eq!(c.decoder.style_dim, c.style_dim);
        assert_eq!(c.decoder.dim_in, c.hidden);
    }
}
