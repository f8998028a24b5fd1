//! The codec's encoder against the official code: `crates/models/tests/fixtures/omnivoice/
//! encoder.safetensors` (`scripts/omnivoice_encoder_fixtures.py`, transformers 5.24, f32) holds
//! the intermediates of `encode` for two clips through the tiny release-geometry codec of
//! `clone/audio_tokenizer/`.

use std::collections::HashMap;
use std::path::PathBuf;

use candle_core::{DType, Device, Tensor};
use candle_nn::{Module, VarBuilder};

use super::{CodecEncoder, EncoderConfig};
use crate::omnivoice::{CodecConfig, CodecDecoder};
use crate::test_support::max_abs_diff;

const CLIPS: [&str; 2] = ["long", "short"];

fn checkpoint() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/omnivoice/clone/audio_tokenizer")
}

fn configs(text: &str) -> (CodecConfig, EncoderConfig) {
    (
        CodecConfig::from_json(text).unwrap(),
        EncoderConfig::from_json(text).unwrap(),
    )
}

fn weights() -> VarBuilder<'static> {
    // SAFETY: a fixture file, mapped read-only for the test.
    unsafe {
        VarBuilder::from_mmaped_safetensors(
            &[checkpoint().join("model.safetensors")],
            DType::F32,
            &Device::Cpu,
        )
        .unwrap()
    }
}

fn encoder() -> CodecEncoder {
    let text = std::fs::read_to_string(checkpoint().join("config.json")).unwrap();
    let (codec, config) = configs(&text);
    CodecEncoder::load(&codec, &config, weights()).unwrap()
}

fn fixture() -> HashMap<String, Tensor> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/omnivoice/encoder.safetensors");
    candle_core::safetensors::load(path, &Device::Cpu).unwrap()
}

fn wave(f: &HashMap<String, Tensor>, clip: &str) -> Vec<f32> {
    f[&format!("{clip}.wave")].to_vec1().unwrap()
}

/// f32 throughout, rounding differing from torch's only by accumulation order (~1e-7 per
/// operation): measured worst 5e-7 on the semantic side and the residuals, 9.4e-5 on the DAC
/// encoder (peak 3.7, 25 convolutions over 11 520 samples; 2.5e-5 relative). 1e-4 relative to
/// the value's peak (at least 1) keeps headroom while a wrong tap, padding, stride or
/// activation moves values by ≥ 1e-2.
const TOLERANCE: f32 = 1e-4;

#[test]
fn intermediates_match_the_official_encode() {
    let e = encoder();
    let f = fixture();
    for clip in CLIPS {
        let get = |name: &str| f[&format!("{clip}.{name}")].clone();
        let wave = wave(&f, clip);
        let worst = |name: &str, ours: &Tensor| {
            let theirs = get(name);
            let peak: f32 = theirs
                .abs()
                .unwrap()
                .flatten_all()
                .unwrap()
                .max(0)
                .unwrap()
                .to_scalar()
                .unwrap();
            let d = max_abs_diff(ours, &theirs);
            assert!(
                d <= TOLERANCE * peak.max(1.0),
                "{clip}.{name}: off by {d} (peak {peak})"
            );
        };
        worst("semantic_features", &e.semantic_features(&wave).unwrap());
        // Each stage from the official input to it, so an error shows where it starts.
        let semantic = e
            .semantic
            .forward(&get("semantic_features").transpose(1, 2).unwrap())
            .unwrap();
        worst("semantic", &semantic);
        let frames = semantic.dim(2).unwrap();
        let padded = e.acoustic.output_length(wave.len()) != frames;
        let official_padded = get("padded").to_vec1::<i64>().unwrap()[0] == 1;
        assert_eq!(
            padded, official_padded,
            "{clip}: the half-hop padding decision"
        );
        let x = Tensor::new(wave.as_slice(), &Device::Cpu)
            .unwrap()
            .reshape((1, 1, ()))
            .unwrap();
        worst("acoustic", &e.acoustic.forward(&x).unwrap());
        let joined = Tensor::cat(&[get("acoustic"), get("semantic")], 1)
            .unwrap()
            .squeeze(0)
            .unwrap()
            .t()
            .unwrap();
        worst("fc", &e.fc.forward(&joined).unwrap());
        let codes = get("codes").to_dtype(DType::U32).unwrap();
        for (i, (project_in, codebook, project_out)) in e.quantizers.iter().enumerate() {
            let residual = get(&format!("residual.{i}"));
            let ids = super::nearest(&project_in.forward(&residual).unwrap(), codebook).unwrap();
            assert_eq!(
                ids.to_vec1::<u32>().unwrap(),
                codes.get(i).unwrap().to_vec1::<u32>().unwrap(),
                "{clip}: quantizer {i}"
            );
            if i + 1 < e.quantizers.len() {
                let picked = project_out
                    .forward(&codebook.index_select(&ids, 0).unwrap())
                    .unwrap();
                worst(
                    &format!("residual.{}", i + 1),
                    &(residual - picked).unwrap(),
                );
            }
        }
    }
}

#[test]
fn codes_match_the_official_encode_where_the_pick_is_clear() {
    let e = encoder();
    let f = fixture();
    let (mut clear, mut total) = (0, 0);
    for clip in CLIPS {
        let ours = e.encode(&wave(&f, clip)).unwrap().to_vec2::<u32>().unwrap();
        let theirs = f[&format!("{clip}.codes")].to_vec2::<i64>().unwrap();
        let margin = f[&format!("{clip}.margin")].to_vec2::<f32>().unwrap();
        assert_eq!((ours.len(), ours[0].len()), (theirs.len(), theirs[0].len()));
        for q in 0..ours.len() {
            for t in 0..ours[q].len() {
                total += 1;
                // Below 1e-3 between the best and second-best distance, f32 rounding may
                // rightly pick the other.
                if margin[q][t] > 1e-3 {
                    clear += 1;
                    assert_eq!(
                        ours[q][t] as i64, theirs[q][t],
                        "{clip}: quantizer {q}, frame {t}"
                    );
                }
            }
        }
    }
    assert!(
        clear * 10 >= total * 9,
        "only {clear} of {total} picks are clear"
    );
}

#[test]
fn codes_decode_back_to_audio_of_the_clip_length() {
    let e = encoder();
    let f = fixture();
    let text = std::fs::read_to_string(checkpoint().join("config.json")).unwrap();
    let decoder = CodecDecoder::load(&CodecConfig::from_json(&text).unwrap(), weights()).unwrap();
    let wave = wave(&f, "long");
    let audio = decoder
        .decode(&e.encode(&wave).unwrap())
        .unwrap()
        .to_vec1::<f32>()
        .unwrap();
    assert_eq!(audio.len(), wave.len());
    assert!(audio.iter().all(|s| s.is_finite()));
}

/// The release codec's sizes (DAC ratios [8, 5, 4, 2, 3], 8 quantizers of 1024 × 64, a
/// HuBERT-base) build over zero weights and give 25 frames for a second.
#[test]
fn the_release_geometry_gives_25_frames_a_second() {
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(checkpoint().join("config.json")).unwrap())
            .unwrap();
    json["codebook_size"] = 1024.into();
    json["codebook_dim"] = 64.into();
    json["target_bandwidths"] = serde_json::json!([0.5, 1, 1.5, 2]);
    let a = &mut json["acoustic_model_config"];
    a["encoder_hidden_size"] = 64.into();
    a["hidden_size"] = 256.into();
    a["decoder_hidden_size"] = 1024.into();
    let s = &mut json["semantic_model_config"];
    s["hidden_size"] = 768.into();
    s["conv_dim"] = serde_json::json!(vec![512; 7]);
    s["num_hidden_layers"] = 12.into();
    s["num_attention_heads"] = 12.into();
    s["intermediate_size"] = 3072.into();
    let (codec, config) = configs(&json.to_string());
    assert_eq!(
        (codec.num_quantizers, codec.hop_length, codec.hidden_size),
        (8, 960, 1024)
    );
    assert_eq!(config.semantic_downsample_factor, 2);
    let vb = VarBuilder::zeros(DType::F32, &Device::Cpu);
    let e = CodecEncoder::load(&codec, &config, vb).unwrap();
    assert_eq!(e.acoustic.output_length(24000), 25);
    let codes = e.encode(&vec![0.0; 24000]).unwrap();
    assert_eq!(codes.dims(), [8, 25]);
}
