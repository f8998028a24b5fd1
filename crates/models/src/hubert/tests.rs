//! HuBERT and the resampler before it against the official code:
//! `crates/models/tests/fixtures/omnivoice/hubert.safetensors` (`scripts/omnivoice_hubert_fixtures.py`,
//! transformers 5.24 and torchaudio 2.11 on torch 2.15, f32) holds torchaudio's resampling of
//! one wave at seven rate pairs and six lengths, the hidden states of the tiny codec's HuBERT
//! (`e2e/audio_tokenizer/`, `semantic_model.*`) on the 16 kHz input its
//! `_extract_semantic_features` builds, and those of a second tiny `HubertModel` with the
//! branches that one leaves untried (`wide.*`, config in `hubert_wide_config.json`).

use std::collections::HashMap;
use std::path::PathBuf;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;

use super::{Hubert, HubertConfig};
use crate::omnivoice::resample;
use crate::test_support::max_abs_diff;

/// f32 against f32, only the order of the sums differing (torch's oneDNN convolutions, BLAS
/// and SDPA against candle's kernels). Measured: 7.1e-7 at most on the tiny codec's HuBERT
/// (states up to 1.2), 1.7e-6 on the wide one (three layers, states up to 3.4). 1e-4 leaves a
/// margin of 50 and still fails on any wrong weight, norm, padding, head split or attention:
/// each moves the states by 0.15 or more (`every_part_of_the_forward_shows`).
const STATE_TOLERANCE: f32 = 1e-4;

/// The filters are computed in f32 term for term as torchaudio computes them; what differs is
/// the last bit of f32 sin and cos (glibc against SLEEF) and the convolution's sum (f64 here,
/// rounded once; f32 in oneDNN). Measured: 2.4e-7 at most on waves peaking at 1.2. Filters
/// computed exactly (in f64) would miss by up to 1.7e-5 at 11025 → 16000, so 1e-6 tells the
/// two apart; the HuBERT after it is held to 1e-4.
const RESAMPLE_TOLERANCE: f32 = 1e-6;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/omnivoice")
}

fn fixture() -> HashMap<String, Tensor> {
    candle_core::safetensors::load(fixtures().join("hubert.safetensors"), &Device::Cpu).unwrap()
}

/// The tiny codec's HuBERT: its config from the codec's JSON, its weights under
/// `semantic_model.`.
fn codec_hubert() -> (HubertConfig, Hubert) {
    let dir = fixtures().join("e2e/audio_tokenizer");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
    let config: HubertConfig =
        serde_json::from_value(json["semantic_model_config"].clone()).unwrap();
    let weights =
        candle_core::safetensors::load(dir.join("model.safetensors"), &Device::Cpu).unwrap();
    let vb = VarBuilder::from_tensors(weights, DType::F32, &Device::Cpu);
    let model = Hubert::load(&config, vb.pp("semantic_model")).unwrap();
    (config, model)
}

fn wide_config() -> HubertConfig {
    let text = std::fs::read_to_string(fixtures().join("hubert_wide_config.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The `wide.weights.*` tensors, under their `HubertModel` names.
fn wide_weights(f: &HashMap<String, Tensor>) -> HashMap<String, Tensor> {
    f.iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("wide.weights.")?.to_string(), v.clone())))
        .collect()
}

fn wide_hubert(
    config: &HubertConfig,
    weights: HashMap<String, Tensor>,
) -> Result<Hubert, crate::ModelError> {
    Hubert::load(
        config,
        VarBuilder::from_tensors(weights, DType::F32, &Device::Cpu),
    )
}

/// Checks each hidden state against `{prefix}.hidden_state.{i}`, returning the largest error.
fn compare_states(states: &[Tensor], f: &HashMap<String, Tensor>, prefix: &str) -> f32 {
    let expected: Vec<&Tensor> = (0..)
        .map_while(|i| f.get(&format!("{prefix}.hidden_state.{i}")))
        .collect();
    assert_eq!(
        states.len(),
        expected.len(),
        "{prefix}: number of hidden states"
    );
    states
        .iter()
        .zip(expected)
        .map(|(ours, theirs)| max_abs_diff(ours, theirs))
        .fold(0f32, f32::max)
}

#[test]
fn resampling_matches_torchaudio_at_every_rate_pair_and_length() {
    let f = fixture();
    let wave: Vec<f32> = f["resample.wave"].to_vec1().unwrap();
    let mut cases = 0;
    let mut worst = 0f32;
    for (name, expected) in &f {
        let Some(rest) = name.strip_prefix("resample.") else {
            continue;
        };
        let parts: Vec<usize> = rest.split('.').filter_map(|p| p.parse().ok()).collect();
        let [from, to, n] = parts[..] else {
            continue;
        };
        let expected: Vec<f32> = expected.to_vec1().unwrap();
        let ours = resample(&wave[..n], from as u32, to as u32);
        assert_eq!(ours.len(), expected.len(), "{name}: length");
        let error = ours
            .iter()
            .zip(&expected)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(error <= RESAMPLE_TOLERANCE, "{name}: {error}");
        worst = worst.max(error);
        cases += 1;
    }
    assert_eq!(cases, 7 * 6, "every rate pair at every length");
    eprintln!("resample: worst |error| {worst:e} over {cases} cases");
}

#[test]
fn the_codec_input_is_resampled_and_padded_as_the_official_code_does() {
    let f = fixture();
    let wave = &f["e2e.wave"];
    let (batch, _, _) = wave.dims3().unwrap();
    for b in 0..batch {
        let clip: Vec<f32> = wave
            .get(b)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        let ours = resample(&clip, 11025, 16000);
        let expected: Vec<f32> = f["e2e.resampled"].get(b).unwrap().to_vec1().unwrap();
        assert_eq!(ours.len(), expected.len());
        let error = ours
            .iter()
            .zip(&expected)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(error <= RESAMPLE_TOLERANCE, "clip {b}: {error}");
        // The HuBERT's input: 160 zeros each side.
        let input: Vec<f32> = f["e2e.input"].get(b).unwrap().to_vec1().unwrap();
        assert_eq!(input.len(), expected.len() + 320);
        assert!(input[..160]
            .iter()
            .chain(&input[input.len() - 160..])
            .all(|&x| x == 0.0));
        assert_eq!(&input[160..input.len() - 160], &expected[..]);
    }
}

#[test]
fn the_codec_hubert_gives_the_official_hidden_states_and_their_mean() {
    let f = fixture();
    let (config, model) = codec_hubert();
    let input = &f["e2e.input"];
    let states = model.hidden_states(input).unwrap();
    assert_eq!(states.len(), 1 + config.num_hidden_layers);
    assert_eq!(
        states[0].dims(),
        [2, config.frames(input.dim(1).unwrap()), 8]
    );
    let error = compare_states(&states, &f, "e2e");
    eprintln!("tiny codec's HuBERT: worst |error| {error:e}");
    assert!(error < STATE_TOLERANCE, "hidden states: {error}");

    let mean = model.mean_hidden_state(input).unwrap();
    let error = max_abs_diff(&mean, &f["e2e.mean"]);
    assert!(error < STATE_TOLERANCE, "mean: {error}");
    // What `_extract_semantic_features` returns: every n-th frame of the mean.
    let factor = f["e2e.semantic_downsample_factor"]
        .to_vec1::<i64>()
        .unwrap()[0] as usize;
    let kept: Vec<u32> = (0..mean.dim(1).unwrap() as u32).step_by(factor).collect();
    let kept = Tensor::new(kept.as_slice(), &Device::Cpu).unwrap();
    let features = mean.index_select(&kept, 1).unwrap();
    let error = max_abs_diff(&features, &f["e2e.semantic_features"]);
    assert!(error < STATE_TOLERANCE, "semantic features: {error}");
}

#[test]
fn a_deeper_model_with_conv_biases_odd_positional_kernel_and_older_weight_names_matches() {
    let f = fixture();
    let config = wide_config();
    assert!(config.conv_bias && config.num_conv_pos_embeddings % 2 == 1);
    assert_eq!(config.num_conv_pos_embedding_groups, 4);
    let weights = wide_weights(&f);
    assert!(weights.contains_key("encoder.pos_conv_embed.conv.weight_g"));
    let model = wide_hubert(&config, weights).unwrap();
    let input = &f["wide.input"];
    let states = model.hidden_states(input).unwrap();
    assert_eq!(states.len(), 4);
    assert_eq!(states[0].dims(), [2, config.frames(800), 16]);
    let error = compare_states(&states, &f, "wide");
    eprintln!("wide HuBERT: worst |error| {error:e}");
    assert!(error < STATE_TOLERANCE, "{error}");
}

#[test]
fn every_part_of_the_forward_shows() {
    // Each of these changes must move the states well past the tolerance, or the comparisons
    // above could not tell them from a right forward.
    let f = fixture();
    let input = &f["wide.input"];
    let error_with = |config: &HubertConfig, weights: HashMap<String, Tensor>| -> f32 {
        let model = wide_hubert(config, weights).unwrap();
        compare_states(&model.hidden_states(input).unwrap(), &f, "wide")
    };
    let config = wide_config();
    let scaled = |name: &str, factor: f64| {
        let mut weights = wide_weights(&f);
        let w = (&weights[name] * factor).unwrap();
        weights.insert(name.into(), w);
        weights
    };
    let cases = [
        (
            "pos conv magnitude",
            scaled("encoder.pos_conv_embed.conv.weight_g", 1.1),
        ),
        (
            "first conv's norm",
            scaled("feature_extractor.conv_layers.0.layer_norm.bias", 1.5),
        ),
        (
            "third conv's bias",
            scaled("feature_extractor.conv_layers.2.conv.bias", 1.5),
        ),
        (
            "uniform attention in the first layer",
            scaled("encoder.layers.0.attention.q_proj.weight", 0.0),
        ),
    ];
    for (what, weights) in cases {
        let error = error_with(&config, weights);
        eprintln!("{what}: {error}");
        assert!(error > 100.0 * STATE_TOLERANCE, "{what}: {error}");
    }
    let mut fewer_heads = config.clone();
    fewer_heads.num_attention_heads = 2;
    let error = error_with(&fewer_heads, wide_weights(&f));
    eprintln!("head split: {error}");
    assert!(error > 100.0 * STATE_TOLERANCE, "head split: {error}");
}

#[test]
fn hubert_base_loads_and_gives_49_frames_a_second() {
    // transformers' defaults are HuBERT-base, as the release's codec config spells it out.
    let json = r#"{"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
        "intermediate_size": 3072, "conv_dim": [512, 512, 512, 512, 512, 512, 512],
        "conv_kernel": [10, 3, 3, 3, 3, 2, 2], "conv_stride": [5, 2, 2, 2, 2, 2, 2],
        "num_conv_pos_embeddings": 128, "num_conv_pos_embedding_groups": 16,
        "feat_extract_norm": "group", "do_stable_layer_norm": false, "conv_bias": false}"#;
    let config: HubertConfig = serde_json::from_str(json).unwrap();
    let defaults = HubertConfig::default();
    assert_eq!(config.conv_dim, defaults.conv_dim);
    assert_eq!(config.conv_kernel, defaults.conv_kernel);
    assert_eq!(config.conv_stride, defaults.conv_stride);
    assert_eq!(
        (
            config.num_conv_pos_embeddings,
            config.num_conv_pos_embedding_groups
        ),
        (128, 16)
    );
    assert_eq!(config.frames(16000), 49);
    assert_eq!(config.frames(16000 + 320), 50, "the codec's padded second");
    assert_eq!(config.frames(399), 0, "shorter than the receptive field");

    // Every weight at its real shape (zeros), run over a 0.1 s input: 4 frames through 12
    // layers and the 128-tap positional convolution in 16 groups.
    let model = Hubert::load(&config, VarBuilder::zeros(DType::F32, &Device::Cpu)).unwrap();
    let input = Tensor::zeros((1, 1600), DType::F32, &Device::Cpu).unwrap();
    let states = model.hidden_states(&input).unwrap();
    assert_eq!(states.len(), 13);
    for state in &states {
        assert_eq!(state.dims(), [1, config.frames(1600), 768]);
    }
    assert_eq!(config.frames(1600), 4);

    // Too short for one frame: an error that says so, not a panic deep in a convolution.
    let short = Tensor::zeros((1, 399), DType::F32, &Device::Cpu).unwrap();
    let error = model.hidden_states(&short).err().unwrap().to_string();
    assert!(error.contains("399 samples make no frame"), "{error}");
    assert!(error.contains("needs 400"), "{error}");
    assert_eq!(config.frames(400), 1);
}

#[test]
fn what_this_port_does_not_compute_is_refused_by_name() {
    let refused = |edit: fn(&mut HubertConfig)| -> String {
        let mut config = wide_config();
        edit(&mut config);
        let f = fixture();
        wide_hubert(&config, wide_weights(&f))
            .err()
            .unwrap()
            .to_string()
    };
    assert!(refused(|c| c.do_stable_layer_norm = true).contains("do_stable_layer_norm"));
    assert!(refused(|c| c.feat_extract_norm = "layer".into()).contains("feat_extract_norm"));
    assert!(refused(|c| c.conv_pos_batch_norm = true).contains("conv_pos_batch_norm"));
    assert!(refused(|c| c.hidden_act = "relu".into()).contains("hidden_act"));
    assert!(refused(|c| c.conv_stride.pop().map(drop).unwrap()).contains("conv_stride"));
    assert!(refused(|c| c.num_attention_heads = 5).contains("num_attention_heads"));
    // A weight the config asks for and the file lacks is named.
    let error = refused(|c| c.num_hidden_layers = 4);
    assert!(error.contains("encoder.layers.3"), "{error}");
}
