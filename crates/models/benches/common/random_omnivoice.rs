//! The released OmniVoice's sizes with seeded random weights made in memory, for the benches:
//! the cost of a forward does not depend on the weights' values, so no checkpoint is needed.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use candle_core::{DType, Device, Result, Shape, Tensor};
use candle_nn::var_builder::SimpleBackend;
use candle_nn::VarBuilder;
use omnivoice_models::omnivoice::{BackboneConfig, Config};
use rand::{Rng, SeedableRng};

/// The released model's sizes (those of its `config.json`, docs/performance.md §13).
pub fn real_config() -> Config {
    Config {
        audio_vocab_size: 1025,
        audio_mask_id: 1024,
        num_audio_codebook: 8,
        backbone: BackboneConfig {
            vocab_size: 151_676,
            hidden_size: 1024,
            intermediate_size: 3072,
            num_hidden_layers: 28,
            num_attention_heads: 16,
            num_key_value_heads: 8,
            head_dim: 128,
            rms_norm_eps: 1e-6,
            rope_theta: 1e6,
        },
    }
}

/// The released codec's `audio_tokenizer/config.json`, the keys the decoder reads.
pub const CODEC_CONFIG: &str = r#"{
    "sample_rate": 24000, "codebook_size": 1024, "codebook_dim": 64,
    "target_bandwidths": [0.5, 1, 1.5, 2],
    "acoustic_model_config": {"hidden_size": 256, "decoder_hidden_size": 1024,
        "upsampling_ratios": [8, 5, 4, 2, 3], "downsampling_ratios": [8, 5, 4, 2, 3]},
    "semantic_model_config": {"hidden_size": 768}
}"#;

/// Every tensor a loader asks for, made on demand from a seed and its name: linear weights
/// uniform with variance 1/fan-in (activations keep their scale through 28 layers, and no
/// value drifts into denormals, which would time something else), norm scales and Snake
/// alphas 1, biases 0. Weight-normed spellings are reported absent, so plain weights are read.
pub struct Random;

impl SimpleBackend for Random {
    fn get(
        &self,
        s: Shape,
        name: &str,
        _: candle_nn::Init,
        dtype: DType,
        dev: &Device,
    ) -> Result<Tensor> {
        let n = s.elem_count();
        let leaf = name.rsplit('.').next().unwrap_or(name);
        let values: Vec<f32> = if name.ends_with("norm.weight") || leaf == "alpha" {
            vec![1.0; n]
        } else if leaf == "bias" {
            vec![0.0; n]
        } else {
            let mut hasher = DefaultHasher::new();
            name.hash(&mut hasher);
            let mut rng = rand::rngs::StdRng::seed_from_u64(hasher.finish());
            // Embedding rows are read, not multiplied: unit scale. Convolutions [out, in, k]
            // have fan-in in · k.
            let fan_in = if name.contains("embed") {
                1
            } else {
                s.dims()[1..].iter().product::<usize>().max(1)
            };
            let a = (3.0 / fan_in as f32).sqrt();
            (0..n).map(|_| rng.random_range(-a..a)).collect()
        };
        Tensor::from_vec(values, s, dev)?.to_dtype(dtype)
    }

    fn get_unchecked(&self, name: &str, _: DType, _: &Device) -> Result<Tensor> {
        candle_core::bail!("{name}: the random backend needs a shape")
    }

    fn contains_tensor(&self, name: &str) -> bool {
        !(name.contains("parametrizations")
            || name.ends_with("weight_g")
            || name.ends_with("weight_v"))
    }
}

pub fn random_vb() -> VarBuilder<'static> {
    VarBuilder::from_backend(Box::new(Random), DType::F32, Device::Cpu)
}
