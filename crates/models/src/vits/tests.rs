//! Whole-model tests on tiny random VITS voices, so every architecture variant (resblock
//! type, speaker conditioning, duration predictor kind) runs without a real voice file.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{Device, Tensor};
use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Normal};

use super::model::*;
use super::*;
use crate::error::ModelError;

pub(super) struct Variant {
    pub resblock: ResBlockKind,
    pub speakers: usize,
    pub stochastic: bool,
}

const VOCAB: usize = 12;
const HIDDEN: usize = 8;
const INTER: usize = 6;
const FILTER: usize = 16;
const DP_FILTER: usize = 8;
const WN_LAYERS: usize = 3;
const GIN: usize = 5;
const DEC_CHANNELS: usize = 16;

struct Builder {
    rng: StdRng,
    tensors: HashMap<String, Tensor>,
}

impl Builder {
    fn add(&mut self, name: &str, shape: &[usize], std: f32) {
        let normal = Normal::new(0f32, std).unwrap();
        let n: usize = shape.iter().product();
        let data: Vec<f32> = (0..n).map(|_| normal.sample(&mut self.rng)).collect();
        let t = Tensor::from_vec(data, shape, &Device::Cpu).unwrap();
        self.tensors.insert(name.to_string(), t);
    }

    fn conv(&mut self, name: &str, out: usize, inp: usize, k: usize) {
        let std = 1.0 / ((inp * k) as f32).sqrt();
        self.add(&format!("{name}.weight"), &[out, inp, k], std);
        self.add(&format!("{name}.bias"), &[out], 0.05);
    }

    fn norm(&mut self, name: &str, c: usize) {
        let ones = Tensor::ones(c, candle_core::DType::F32, &Device::Cpu).unwrap();
        self.tensors.insert(format!("{name}.gamma"), ones);
        self.add(&format!("{name}.beta"), &[c], 0.05);
    }

    fn dds(&mut self, prefix: &str, c: usize) {
        for i in 0..3 {
            self.conv(&format!("{prefix}.convs_sep.{i}"), c, 1, 3);
            self.conv(&format!("{prefix}.convs_1x1.{i}"), c, c, 1);
            self.norm(&format!("{prefix}.norms_1.{i}"), c);
            self.norm(&format!("{prefix}.norms_2.{i}"), c);
        }
    }
}

fn tiny_voice(v: &Variant, seed: u64) -> HashMap<String, Tensor> {
    let mut b = Builder {
        rng: StdRng::seed_from_u64(seed),
        tensors: HashMap::new(),
    };
    b.add("enc_p.emb.weight", &[VOCAB, HIDDEN], 0.3);
    for i in 0..2 {
        let p = format!("enc_p.encoder.attn_layers.{i}");
        for c in ["q", "k", "v", "o"] {
            b.conv(&format!("{p}.conv_{c}"), HIDDEN, HIDDEN, 1);
        }
        b.add(&format!("{p}.emb_rel_k"), &[1, 9, HIDDEN / 2], 0.3);
        b.add(&format!("{p}.emb_rel_v"), &[1, 9, HIDDEN / 2], 0.3);
        b.conv(
            &format!("enc_p.encoder.ffn_layers.{i}.conv_1"),
            FILTER,
            HIDDEN,
            3,
        );
        b.conv(
            &format!("enc_p.encoder.ffn_layers.{i}.conv_2"),
            HIDDEN,
            FILTER,
            3,
        );
        b.norm(&format!("enc_p.encoder.norm_layers_1.{i}"), HIDDEN);
        b.norm(&format!("enc_p.encoder.norm_layers_2.{i}"), HIDDEN);
    }
    b.conv("enc_p.proj", 2 * INTER, HIDDEN, 1);

    if v.speakers > 1 {
        b.add("emb_g.weight", &[v.speakers, GIN], 1.0);
    }
    let multi = v.speakers > 1;
    if v.stochastic {
        b.conv("dp.pre", DP_FILTER, HIDDEN, 1);
        b.dds("dp.convs", DP_FILTER);
        b.conv("dp.proj", DP_FILTER, DP_FILTER, 1);
        b.add("dp.flows.0.m", &[2, 1], 0.1);
        b.add("dp.flows.0.logs", &[2, 1], 0.1);
        for i in [3, 5, 7] {
            b.conv(&format!("dp.flows.{i}.pre"), DP_FILTER, 1, 1);
            b.dds(&format!("dp.flows.{i}.convs"), DP_FILTER);
            b.conv(&format!("dp.flows.{i}.proj"), 29, DP_FILTER, 1);
        }
        if multi {
            b.conv("dp.cond", DP_FILTER, GIN, 1);
        }
    } else {
        b.conv("dp.conv_1", DP_FILTER, HIDDEN, 3);
        b.norm("dp.norm_1", DP_FILTER);
        b.conv("dp.conv_2", DP_FILTER, DP_FILTER, 3);
        b.norm("dp.norm_2", DP_FILTER);
        b.conv("dp.proj", 1, DP_FILTER, 1);
        if multi {
            b.conv("dp.cond", HIDDEN, GIN, 1);
        }
    }

    for i in [0, 2, 4, 6] {
        let p = format!("flow.flows.{i}");
        b.conv(&format!("{p}.pre"), HIDDEN, INTER / 2, 1);
        for l in 0..WN_LAYERS {
            b.conv(&format!("{p}.enc.in_layers.{l}"), 2 * HIDDEN, HIDDEN, 5);
            let out = if l + 1 < WN_LAYERS {
                2 * HIDDEN
            } else {
                HIDDEN
            };
            b.conv(&format!("{p}.enc.res_skip_layers.{l}"), out, HIDDEN, 1);
        }
        if multi {
            b.conv(
                &format!("{p}.enc.cond_layer"),
                2 * HIDDEN * WN_LAYERS,
                GIN,
                1,
            );
        }
        b.conv(&format!("{p}.post"), INTER / 2, HIDDEN, 1);
    }

    b.conv("dec.conv_pre", DEC_CHANNELS, INTER, 7);
    if multi {
        b.conv("dec.cond", DEC_CHANNELS, GIN, 1);
    }
    let kernels: &[usize] = match v.resblock {
        ResBlockKind::One => &[3, 7, 11],
        ResBlockKind::Two => &[3, 5, 7],
    };
    for (i, k_up) in [16usize, 16, 8].into_iter().enumerate() {
        let (c_in, c_out) = (DEC_CHANNELS >> i, DEC_CHANNELS >> (i + 1));
        b.add(&format!("dec.ups.{i}.weight"), &[c_in, c_out, k_up], 0.3);
        b.add(&format!("dec.ups.{i}.bias"), &[c_out], 0.05);
        for (j, &k) in kernels.iter().enumerate() {
            let p = format!("dec.resblocks.{}", i * kernels.len() + j);
            match v.resblock {
                ResBlockKind::One => {
                    for n in 0..3 {
                        b.conv(&format!("{p}.convs1.{n}"), c_out, c_out, k);
                        b.conv(&format!("{p}.convs2.{n}"), c_out, c_out, k);
                    }
                }
                ResBlockKind::Two => {
                    for n in 0..2 {
                        b.conv(&format!("{p}.convs.{n}"), c_out, c_out, k);
                    }
                }
            }
        }
    }
    b.add("dec.conv_post.weight", &[1, DEC_CHANNELS >> 3, 7], 0.3);
    b.tensors
}

fn voice_json(speakers: usize) -> serde_json::Value {
    serde_json::json!({
        "audio": {"sample_rate": 16000},
        "num_speakers": speakers,
        "inference": {"noise_scale": 0.667, "length_scale": 1.0, "noise_w": 0.8}
    })
}

/// The voice of `tensors` (named as in the state dict), loaded as from `file`.
fn from_tensors(
    tensors: HashMap<String, Tensor>,
    voice_json: &serde_json::Value,
    file: &Path,
) -> Result<Vits, ModelError> {
    let weights = Weights::from_tensors(tensors, file, &Device::Cpu);
    Vits::load(&VitsConfig::from_weights(&weights, voice_json)?, weights)
}

pub(super) fn load(v: &Variant) -> Vits {
    from_tensors(
        tiny_voice(v, 7),
        &voice_json(v.speakers),
        Path::new("tiny.safetensors"),
    )
    .unwrap()
}

pub(super) fn input(len: usize, seed: u64, speaker: Option<u32>) -> VitsInput {
    VitsInput {
        ids: (0..len as i64)
            .map(|i| (i * 5 + 1) % VOCAB as i64)
            .collect(),
        length_scale: 1.0,
        sampling: Sampling {
            speed: 1.0,
            seed,
            speaker,
            noise_scale: Some(0.667),
            noise_w: Some(0.8),
        },
    }
}

pub(super) fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Runs a padded batch and checks each item against its single-item run.
fn check_batch_matches_singles(vits: &Vits, batch: &[VitsInput]) {
    let together = vits.synthesize(batch).unwrap();
    assert_eq!(together.len(), batch.len());
    for (item, audio) in batch.iter().zip(&together) {
        let alone = vits
            .synthesize(std::slice::from_ref(item))
            .unwrap()
            .remove(0);
        assert!(
            !audio.is_empty() && audio.len() % 256 == 0,
            "len {}",
            audio.len()
        );
        assert_eq!(audio.len(), alone.len());
        let diff = max_abs_diff(audio, &alone);
        assert!(diff <= 1e-4, "batch vs single max diff {diff}");
        assert!(audio.iter().all(|x| x.is_finite() && x.abs() <= 1.0));
    }
}

#[test]
fn infers_the_tiny_architecture_from_shapes() {
    let vits = load(&Variant {
        resblock: ResBlockKind::One,
        speakers: 3,
        stochastic: false,
    });
    let c = vits.config();
    assert_eq!(
        (c.n_vocab, c.hidden_channels, c.inter_channels),
        (VOCAB, HIDDEN, INTER)
    );
    assert_eq!(
        (c.n_heads, c.n_layers, c.window_size, c.filter_channels),
        (2, 2, 4, FILTER)
    );
    assert_eq!(
        (c.num_speakers, c.gin_channels, c.hop_length),
        (3, GIN, 256)
    );
    assert_eq!(c.flow.couplings, vec![0, 2, 4, 6]);
    assert_eq!(c.flow.wavenet_layers, WN_LAYERS);
    assert!(c.flow.mean_only);
    assert_eq!(c.decoder.upsample_rates, vec![8, 8, 4]);
    assert_eq!(c.decoder.resblock, ResBlockKind::One);
    assert_eq!(c.decoder.resblock_kernel_sizes, vec![3, 7, 11]);
    assert_eq!(c.decoder.resblock_dilations, vec![vec![1, 3, 5]; 3]);
    assert!(!c.decoder.post_bias);
    assert!(matches!(
        c.duration_predictor,
        DurationPredictorConfig::Deterministic {
            filter_channels: DP_FILTER,
            kernel_size: 3
        }
    ));
    assert_eq!(vits.sample_rate(), 16000);
}

#[test]
fn single_speaker_resblock2_stochastic_batches_match_singles() {
    let vits = load(&Variant {
        resblock: ResBlockKind::Two,
        speakers: 1,
        stochastic: true,
    });
    let batch = [
        input(5, 1, None),
        input(17, 2, Some(0)),
        input(9, 3, None),
        input(1, 4, None),
    ];
    check_batch_matches_singles(&vits, &batch);
}

#[test]
fn every_id_gets_frames_that_add_up_to_the_audio() {
    let vits = load(&Variant {
        resblock: ResBlockKind::Two,
        speakers: 1,
        stochastic: true,
    });
    let batch = [input(5, 1, None), input(17, 2, None)];
    let timed = vits.synthesize_timed(&batch).unwrap();
    let plain = vits.synthesize(&batch).unwrap();
    for ((item, timed), plain) in batch.iter().zip(&timed).zip(&plain) {
        assert_eq!(timed.frames_per_id.len(), item.ids.len());
        let frames: usize = timed.frames_per_id.iter().sum();
        assert_eq!(
            frames.max(1) * vits.config().hop_length,
            timed.samples.len()
        );
        assert_eq!(&timed.samples, plain, "the same audio");
    }
}

#[test]
fn multi_speaker_resblock1_deterministic_batches_match_singles() {
    let vits = load(&Variant {
        resblock: ResBlockKind::One,
        speakers: 3,
        stochastic: false,
    });
    let batch = [
        input(6, 1, Some(2)),
        input(11, 2, Some(0)),
        input(3, 3, Some(1)),
    ];
    check_batch_matches_singles(&vits, &batch);
    // The speaker changes the audio.
    let a = vits.synthesize(&[input(6, 1, Some(0))]).unwrap().remove(0);
    let b = vits.synthesize(&[input(6, 1, Some(1))]).unwrap().remove(0);
    assert!(a.len() != b.len() || max_abs_diff(&a, &b) > 1e-3);
}

#[test]
fn multi_speaker_stochastic_seed_controls_noise() {
    let vits = load(&Variant {
        resblock: ResBlockKind::Two,
        speakers: 2,
        stochastic: true,
    });
    check_batch_matches_singles(&vits, &[input(8, 5, Some(1)), input(4, 6, Some(0))]);
    let run = |seed| {
        vits.synthesize(&[input(8, seed, Some(1))])
            .unwrap()
            .remove(0)
    };
    assert_eq!(run(11), run(11));
    let (a, b) = (run(11), run(12));
    assert!(a.len() != b.len() || max_abs_diff(&a, &b) > 1e-4);
}

#[test]
fn deterministic_predictor_durations_scale_with_length_scale() {
    let vits = load(&Variant {
        resblock: ResBlockKind::Two,
        speakers: 1,
        stochastic: false,
    });
    let mut item = input(10, 1, None);
    item.sampling.noise_scale = Some(0.0);
    let normal = vits.synthesize(&[item.clone()]).unwrap().remove(0);
    item.length_scale = 3.0;
    let slow = vits.synthesize(&[item]).unwrap().remove(0);
    // Per token ⌈3w⌉ ≥ ⌈w⌉ and ⌈3w⌉ ≥ 3w > 3(⌈w⌉ − 1).
    let (normal, slow) = (normal.len() / 256, slow.len() / 256);
    assert!(
        slow >= normal && slow + 3 * 10 > 3 * normal,
        "{slow} vs {normal}"
    );
}

#[test]
fn rejects_bad_inputs() {
    let single = load(&Variant {
        resblock: ResBlockKind::Two,
        speakers: 1,
        stochastic: true,
    });
    let err = |v: &Vits, i: VitsInput| v.synthesize(&[i]).unwrap_err().to_string();
    assert!(err(&single, input(3, 1, Some(1))).contains("speaker 1"));
    assert!(err(&single, input(0, 1, None)).contains("no phoneme ids"));
    let mut i = input(3, 1, None);
    i.ids[1] = VOCAB as i64;
    assert!(err(&single, i).contains("phoneme id"));
    let mut i = input(3, 1, None);
    i.length_scale = 0.0;
    assert!(err(&single, i).contains("length_scale"));
    let mut i = input(3, 1, None);
    i.length_scale = 1e7;
    assert!(err(&single, i).contains("limit"));
    assert!(single.synthesize(&[]).unwrap().is_empty());
}

#[test]
fn missing_tensor_error_names_file_and_tensor() {
    let v = Variant {
        resblock: ResBlockKind::Two,
        speakers: 1,
        stochastic: true,
    };
    let mut weights = tiny_voice(&v, 1);
    weights.remove("flow.flows.2.enc.in_layers.1.weight");
    let err = from_tensors(weights, &voice_json(1), Path::new("broken.onnx"))
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("broken.onnx") && err.contains("flow.flows.2.enc.in_layers.1.weight"),
        "{err}"
    );

    let mut weights = tiny_voice(&v, 1);
    weights.remove("dec.conv_pre.weight");
    let err = from_tensors(weights, &voice_json(1), Path::new("broken.onnx"))
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("broken.onnx") && err.contains("dec.conv_pre.weight"),
        "{err}"
    );
}

#[test]
fn safetensors_round_trip_gives_identical_audio() {
    let v = Variant {
        resblock: ResBlockKind::One,
        speakers: 2,
        stochastic: true,
    };
    let vits = load(&v);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.safetensors");
    vits.save_safetensors(&path).unwrap();
    let weights = Weights::from_safetensors(&path, &Device::Cpu).unwrap();
    let config = VitsConfig::from_weights(&weights, &voice_json(2)).unwrap();
    let again = Vits::load(&config, weights).unwrap();
    assert_eq!(again.config(), vits.config());
    let batch = [input(7, 3, Some(1)), input(4, 9, None)];
    assert_eq!(
        vits.synthesize(&batch).unwrap(),
        again.synthesize(&batch).unwrap()
    );
}

#[test]
fn speed_one_is_piper_rounding_and_other_speeds_scale_the_total() {
    let w = [0.3, 1.7, 0.05, 4.2, 0.9, 2.5, 0.0];
    let natural = super::frames_for_speed(&w, 1.0);
    assert_eq!(natural, vec![1, 2, 1, 5, 1, 3, 0]);
    let total: usize = natural.iter().sum();
    for speed in [0.25f32, 0.5, 0.8, 1.25, 2.0, 4.0] {
        let frames = super::frames_for_speed(&w, speed);
        let sum: usize = frames.iter().sum();
        let target = (total as f32 / speed).round() as usize;
        assert!(
            sum.abs_diff(target) <= 1,
            "speed {speed}: {sum} frames, target {target}"
        );
        assert_eq!(frames[6], 0, "masked phonemes stay empty");
    }
    let slower: usize = super::frames_for_speed(&w, 0.5).iter().sum();
    let faster: usize = super::frames_for_speed(&w, 2.0).iter().sum();
    assert!(slower >= 3 * faster, "{slower} vs {faster}");
}
