//! The kernels against candle's own convolutions, through the public entry points and through
//! each CPU path directly (so a routing change cannot turn a test into candle vs candle).

use super::dispatch::{
    conv1d, conv1d_fused, conv_transpose1d, conv_transpose1d_fused, residual_stack_sum,
};
use super::layer::{InputMap, PackedWeightCache, StackConv};
use super::shape::{Conv1dShape, ConvTranspose1dShape};
use super::{cpu, gemm};
use candle_core::{DType, Device, Tensor};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn random(rng: &mut StdRng, dims: &[usize]) -> Tensor {
    let n = dims.iter().product();
    let data: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    Tensor::from_vec(data, dims, &Device::Cpu).unwrap()
}

/// The strip-by-strip stage sum equals running its layers one by one over the whole signal:
/// one block of single-conv units (HiFi-GAN type 2), one of two-conv units (type 1), a
/// signal several strips long, a batch of two with a mask cutting the second item short.
#[test]
fn residual_stack_sum_matches_layer_by_layer() {
    let mut rng = StdRng::seed_from_u64(21);
    let (batch, c, len) = (2, 8, 40_000);
    // (kernel, dilations, convs per unit)
    let shapes = [(3usize, vec![1usize, 2], 1usize), (5, vec![3, 1], 2)];
    // Per block, per unit, per conv: weight, bias, dilation and its packing cache.
    type LayerWeights = (Tensor, Tensor, usize, PackedWeightCache);
    let weights: Vec<Vec<Vec<LayerWeights>>> = shapes
        .iter()
        .map(|(k, dilations, per_unit)| {
            dilations
                .iter()
                .map(|&d| {
                    (0..*per_unit)
                        .map(|n| {
                            let d = if n == 0 { d } else { 1 };
                            let w = (random(&mut rng, &[c, c, *k]) * 0.3).unwrap();
                            let b = random(&mut rng, &[c]);
                            (w, b, d, PackedWeightCache::default())
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    let blocks: Vec<Vec<Vec<StackConv>>> = weights
        .iter()
        .map(|block| {
            block
                .iter()
                .map(|unit| {
                    unit.iter()
                        .map(|(w, b, d, cache)| StackConv {
                            weight: w,
                            bias: Some(b),
                            padding: d * (w.dim(2).unwrap() - 1) / 2,
                            dilation: *d,
                            cache,
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    let y = random(&mut rng, &[batch, c, len]);
    let lengths = [len, len - 12_345];
    let mask: Vec<f32> = lengths
        .iter()
        .flat_map(|&l| (0..len).map(move |t| (t < l) as u8 as f32))
        .collect();
    let mask = Tensor::from_vec(mask, (batch, 1, len), &Device::Cpu).unwrap();
    let got = residual_stack_sum(&y, &blocks, 0.1, Some(&mask))
        .unwrap()
        .expect("a CPU f32 signal this long takes the strip path");
    let map = InputMap {
        scale: 1.0,
        leaky_slope: Some(0.1),
        mask: Some(&mask),
        channels: None,
    };
    let mut want: Option<Tensor> = None;
    for block in &blocks {
        let mut x = y.clone();
        for unit in block {
            let mut h = x.clone();
            for (n, conv) in unit.iter().enumerate() {
                let residuals: Vec<&Tensor> = if n + 1 == unit.len() {
                    vec![&x]
                } else {
                    vec![]
                };
                h = conv1d_fused(
                    &h,
                    conv.weight,
                    conv.bias,
                    conv.padding,
                    conv.dilation,
                    &map,
                    &residuals,
                    None,
                )
                .unwrap();
            }
            x = h;
        }
        want = Some(match want {
            Some(w) => (w + x).unwrap(),
            None => x,
        });
    }
    let err = relative_error(&got, &want.unwrap());
    assert!(err < 1e-5, "relative error {err}");
}

fn with_bias(y: Tensor, b: Option<&Tensor>) -> Tensor {
    match b {
        Some(b) => y.broadcast_add(&b.reshape((1, (), 1)).unwrap()).unwrap(),
        None => y,
    }
}

/// Largest difference relative to the reference output's largest magnitude.
fn relative_error(got: &Tensor, reference: &Tensor) -> f32 {
    assert_eq!(got.dims(), reference.dims());
    let scale = reference.abs().unwrap().max_all().unwrap();
    let scale = scale.to_scalar::<f32>().unwrap().max(1e-6);
    let diff = (got - reference).unwrap().abs().unwrap().max_all().unwrap();
    diff.to_scalar::<f32>().unwrap() / scale
}

/// Our CPU kernel, called directly so a routing change cannot turn a test into candle vs candle.
fn fast_conv1d(
    x: &Tensor,
    w: &Tensor,
    b: Option<&Tensor>,
    padding: usize,
    dilation: usize,
    groups: usize,
) -> Tensor {
    let shape = Conv1dShape::for_fast_path(x, w, b, padding, dilation, groups)
        .expect("test shapes are valid CPU f32 convolutions");
    gemm::conv1d(x, w, b, &shape).unwrap()
}

fn candle_conv1d(
    x: &Tensor,
    w: &Tensor,
    b: Option<&Tensor>,
    padding: usize,
    dilation: usize,
    groups: usize,
) -> Tensor {
    let y = x.conv1d(w, padding, 1, dilation, groups).unwrap();
    with_bias(y, b)
}

fn candle_conv_transpose1d(
    x: &Tensor,
    w: &Tensor,
    b: Option<&Tensor>,
    stride: usize,
    padding: usize,
) -> Tensor {
    let y = x.conv_transpose1d(w, padding, 0, stride, 1, 1).unwrap();
    with_bias(y, b)
}

/// (batch, c_in, c_out, length, kernel, padding, dilation, groups, bias)
type ConvCase = (usize, usize, usize, usize, usize, usize, usize, usize, bool);

fn check_conv1d(rng: &mut StdRng, case: ConvCase) {
    let (batch, c_in, c_out, len, k, padding, dilation, groups, with_bias) = case;
    let x = random(rng, &[batch, c_in, len]);
    let w = random(rng, &[c_out, c_in / groups, k]);
    let b = with_bias.then(|| random(rng, &[c_out]));
    let got = fast_conv1d(&x, &w, b.as_ref(), padding, dilation, groups);
    let want = candle_conv1d(&x, &w, b.as_ref(), padding, dilation, groups);
    let err = relative_error(&got, &want);
    assert!(err <= 1e-4, "conv1d {case:?}: relative error {err}");
    // The public entry point (which may route to candle) agrees too.
    let public = conv1d(&x, &w, b.as_ref(), padding, dilation, groups).unwrap();
    assert!(relative_error(&public, &want) <= 1e-4);
}

#[test]
fn conv1d_matches_candle_on_model_shapes() {
    let mut rng = StdRng::seed_from_u64(7);
    let cases: &[ConvCase] = &[
        // Lengths ≥ REPACK_MIN_COLUMNS exercise the repacked weight layout, shorter ones the
        // in-place one.
        // decoder resblocks (kernels 3/5/7, dilations 1..12, "same" padding), spanning tiles
        (1, 32, 32, 2500, 3, 1, 1, 1, true),
        (1, 32, 32, 2500, 7, 36, 12, 1, true),
        (1, 64, 64, 1200, 5, 6, 3, 1, true),
        (1, 128, 128, 700, 7, 18, 6, 1, true),
        (1, 128, 128, 300, 3, 2, 2, 1, false),
        // conv_pre, conv_post (one output channel)
        (1, 192, 256, 251, 7, 3, 1, 1, true),
        (1, 32, 1, 3000, 7, 3, 1, 1, false),
        // flow WaveNet and 1×1 projections, text encoder FFN
        (1, 192, 384, 251, 5, 2, 1, 1, true),
        (1, 192, 384, 251, 1, 0, 1, 1, true),
        (1, 384, 192, 251, 1, 0, 1, 1, false),
        (1, 192, 768, 103, 3, 1, 1, 1, true),
        // batches
        (4, 64, 64, 333, 3, 1, 1, 1, true),
        (8, 192, 192, 57, 5, 2, 1, 1, false),
    ];
    for &case in cases {
        check_conv1d(&mut rng, case);
    }
}

#[test]
fn conv1d_matches_candle_on_grouped_and_depthwise() {
    let mut rng = StdRng::seed_from_u64(11);
    let cases: &[ConvCase] = &[
        // duration predictor's depthwise convs
        (1, 192, 192, 100, 3, 1, 1, 192, true),
        (1, 192, 192, 100, 3, 3, 3, 192, true),
        (1, 192, 192, 100, 3, 9, 9, 192, false),
        (4, 192, 192, 37, 3, 9, 9, 192, true),
        // depthwise with a channel multiplier, and groups with several input channels
        (2, 4, 8, 50, 3, 1, 1, 4, true),
        (2, 8, 12, 50, 3, 2, 2, 2, true),
        (1, 1, 3, 40, 5, 2, 1, 1, true),
    ];
    for &case in cases {
        check_conv1d(&mut rng, case);
    }
}

#[test]
fn conv1d_matches_candle_on_padding_edge_cases() {
    let mut rng = StdRng::seed_from_u64(13);
    let cases: &[ConvCase] = &[
        // no padding: output shorter than input
        (2, 16, 24, 90, 3, 0, 1, 1, true),
        (1, 192, 192, 20, 3, 0, 4, 192, true),
        // padding wider than the kernel: border columns see no input at all
        (1, 16, 16, 30, 3, 5, 1, 1, true),
        (1, 8, 8, 30, 3, 5, 1, 8, true),
        // input shorter than the dilated kernel
        (1, 16, 16, 3, 7, 6, 2, 1, true),
        (1, 16, 16, 3, 7, 6, 2, 16, false),
    ];
    for &case in cases {
        check_conv1d(&mut rng, case);
    }
}

#[test]
fn conv1d_accepts_non_contiguous_inputs() {
    let mut rng = StdRng::seed_from_u64(17);
    let w = random(&mut rng, &[48, 32, 5]);
    let b = random(&mut rng, &[48]);
    // A window of a longer signal: rows are strided.
    let long = random(&mut rng, &[2, 32, 400]);
    let narrowed = long.narrow(2, 13, 300).unwrap();
    // A [B, L, C] tensor viewed as [B, C, L].
    let transposed = random(&mut rng, &[2, 300, 32]).transpose(1, 2).unwrap();
    for x in [&narrowed, &transposed] {
        assert!(!x.is_contiguous());
        let got = fast_conv1d(x, &w, Some(&b), 4, 2, 1);
        let want = candle_conv1d(x, &w, Some(&b), 4, 2, 1);
        assert!(relative_error(&got, &want) <= 1e-4);
    }
    let dw = random(&mut rng, &[32, 1, 3]);
    let got = fast_conv1d(&transposed, &dw, None, 3, 3, 32);
    let want = candle_conv1d(&transposed, &dw, None, 3, 3, 32);
    assert!(relative_error(&got, &want) <= 1e-4);
}

/// (batch, c_in, c_out, length, kernel, stride, padding, bias)
type TransposeCase = (usize, usize, usize, usize, usize, usize, usize, bool);

fn check_conv_transpose1d(rng: &mut StdRng, x: &Tensor, case: TransposeCase) {
    let (_, c_in, c_out, _, k, stride, padding, with_bias) = case;
    let w = random(rng, &[c_in, c_out, k]);
    let b = with_bias.then(|| random(rng, &[c_out]));
    let got = conv_transpose1d(x, &w, b.as_ref(), stride, padding).unwrap();
    let want = candle_conv_transpose1d(x, &w, b.as_ref(), stride, padding);
    let err = relative_error(&got, &want);
    assert!(
        err <= 1e-4,
        "conv_transpose1d {case:?}: relative error {err}"
    );
}

#[test]
fn conv_transpose1d_matches_candle() {
    let mut rng = StdRng::seed_from_u64(19);
    let cases: &[TransposeCase] = &[
        // decoder upsamplers (the last one spans several tiles per phase and, being longer
        // than REPACK_MIN_COLUMNS, uses the repacked weights)
        (1, 256, 128, 40, 16, 8, 4, true),
        (1, 128, 64, 100, 16, 8, 4, true),
        (1, 64, 32, 1500, 8, 4, 2, true),
        (3, 64, 32, 70, 8, 4, 2, false),
        // no padding; padding beyond a stride; stride larger than the kernel
        (1, 16, 8, 30, 4, 2, 0, true),
        (2, 16, 8, 30, 9, 2, 3, true),
        (1, 16, 8, 30, 3, 4, 0, true),
        (1, 16, 8, 30, 3, 4, 1, false),
        // stride 1 and a single input column
        (1, 16, 8, 30, 3, 1, 1, true),
        (1, 16, 8, 1, 8, 4, 0, true),
    ];
    for &case in cases {
        let (batch, c_in, _, len, ..) = case;
        let x = random(&mut rng, &[batch, c_in, len]);
        check_conv_transpose1d(&mut rng, &x, case);
    }
    // Non-contiguous input.
    let case = (2, 32, 16, 50, 8, 4, 2, true);
    let x = random(&mut rng, &[2, 50, 32]).transpose(1, 2).unwrap();
    check_conv_transpose1d(&mut rng, &x, case);
}

#[test]
fn input_map_scales_then_leaks_then_masks() {
    let x = Tensor::new(&[[[-2f32, 0., 3., 6.]]], &Device::Cpu).unwrap();
    let mask = Tensor::new(&[[[1f32, 1., 1., 0.]]], &Device::Cpu).unwrap();
    let map = InputMap {
        scale: 0.5,
        leaky_slope: Some(0.1),
        mask: Some(&mask),
        channels: None,
    };
    let y = map.apply(&x).unwrap().flatten_all().unwrap();
    assert_eq!(y.to_vec1::<f32>().unwrap(), vec![-0.1, 0., 1.5, 0.]);
}

/// A channel map (`Snake(AdaIN(·))`) through every precision's route — applied to the tensor
/// first for `f32`, as the bf16 and int8 kernels read their input — gives, bit for bit, what
/// the same convolution gives on the input with the map applied first; and conv_transpose's
/// route applies it too.
#[test]
fn a_channel_map_gives_what_applying_it_first_gives_in_every_precision() {
    use super::fast_math::{apply_channel_snakes, channel_snakes};
    use super::precision::Precision;
    use super::rows::{AdainSnake, Affine};
    let mut rng = StdRng::seed_from_u64(31);
    let (c_in, c_out, len, taps, dilation) = (40, 24, 700, 5, 3);
    let x = (random(&mut rng, &[1, c_in, len]) * 3.0).unwrap();
    let w = (random(&mut rng, &[c_out, c_in, taps]) * 0.2).unwrap();
    let b = random(&mut rng, &[c_out]);
    let residual = random(&mut rng, &[1, c_out, len]);
    let parameters: Vec<AdainSnake> = (0..c_in)
        .map(|c| AdainSnake {
            affine: Affine {
                scale: 0.7 + c as f32 / 30.0,
                shift: c as f32 / 20.0 - 1.0,
            },
            alpha: 0.5 + c as f32 / 25.0,
            inv_alpha: 1.0 / (0.5 + c as f32 / 25.0),
        })
        .collect();
    let snakes = channel_snakes(&x, &parameters, 1e-5).unwrap();
    let applied = apply_channel_snakes(&x, &snakes).unwrap();
    let map = InputMap::channel_snakes(&snakes);
    let padding = dilation * (taps - 1) / 2;
    for precision in [Precision::F32, Precision::Bf16, Precision::Int8] {
        let cache = PackedWeightCache::new(precision);
        let conv = |x: &Tensor, map: &InputMap| {
            let y = conv1d_fused(
                x,
                &w,
                Some(&b),
                padding,
                dilation,
                map,
                &[&residual],
                Some(&cache),
            );
            y.unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap()
        };
        let want = conv(&applied, &InputMap::IDENTITY);
        assert_eq!(conv(&x, &map), want, "{precision:?}");
    }
    let wt = (random(&mut rng, &[c_in, c_out, 8]) * 0.2).unwrap();
    let transposed = |x: &Tensor, map: &InputMap| {
        let y = conv_transpose1d_fused(x, &wt, None, 4, 2, map, None).unwrap();
        y.flatten_all().unwrap().to_vec1::<f32>().unwrap()
    };
    assert_eq!(
        transposed(&x, &map),
        transposed(&applied, &InputMap::IDENTITY)
    );
}

#[test]
fn conv1d_fused_matches_separate_ops() {
    let mut rng = StdRng::seed_from_u64(29);
    // (batch, c_in, c_out, length, kernel, padding, dilation)
    let cases = [
        (1, 32, 32, 3000, 7, 36, 12),
        (3, 16, 16, 200, 5, 6, 3),
        (2, 32, 1, 500, 7, 3, 1),
        (1, 8, 12, 5, 3, 4, 1),
    ];
    for (batch, c_in, c_out, len, k, padding, dilation) in cases {
        let x = random(&mut rng, &[batch, c_in, len]);
        let w = random(&mut rng, &[c_out, c_in, k]);
        let b = random(&mut rng, &[c_out]);
        let lengths: Vec<usize> = (0..batch).map(|i| len - i * len / 4).collect();
        let mask = lengths_mask(&lengths, len);
        let map = InputMap {
            scale: 1.0 / 3.0,
            leaky_slope: Some(0.1),
            mask: Some(&mask),
            channels: None,
        };
        let l_out = len + 2 * padding - dilation * (k - 1);
        let residual = random(&mut rng, &[batch, c_out, l_out]);
        let sum = random(&mut rng, &[batch, c_out, l_out]);
        for res in [&[][..], &[&residual], &[&residual, &sum]] {
            let cache = PackedWeightCache::default();
            let got =
                conv1d_fused(&x, &w, Some(&b), padding, dilation, &map, res, Some(&cache)).unwrap();
            let again =
                conv1d_fused(&x, &w, Some(&b), padding, dilation, &map, res, Some(&cache)).unwrap();
            assert_eq!(relative_error(&again, &got), 0.0);
            let mut want =
                candle_conv1d(&map.apply(&x).unwrap(), &w, Some(&b), padding, dilation, 1);
            for r in res {
                want = (want + *r).unwrap();
            }
            let err = relative_error(&got, &want);
            assert!(err <= 1e-4, "fused conv relative error {err}");
        }
    }
    // Non-contiguous input takes the same path.
    let x = random(&mut rng, &[1, 40, 16]).transpose(1, 2).unwrap();
    let w = random(&mut rng, &[16, 16, 3]);
    let map = InputMap {
        scale: 1.0,
        leaky_slope: Some(0.01),
        mask: None,
        channels: None,
    };
    let got = conv1d_fused(&x, &w, None, 1, 1, &map, &[], None).unwrap();
    let want = candle_conv1d(&map.apply(&x).unwrap(), &w, None, 1, 1, 1);
    assert!(relative_error(&got, &want) <= 1e-4);
}

#[test]
fn conv_transpose1d_fused_matches_separate_ops() {
    let mut rng = StdRng::seed_from_u64(31);
    // Long inputs take the direct phases; the short ones are called on them directly too.
    let cases: &[TransposeCase] = &[
        (1, 16, 8, 1100, 8, 4, 2, true),
        (2, 8, 4, 1030, 16, 8, 4, true),
        (1, 16, 8, 30, 9, 2, 3, true),
        (1, 16, 8, 30, 3, 4, 0, false),
        (2, 16, 8, 1, 8, 4, 0, true),
        (1, 6, 5, 40, 4, 2, 5, true),
    ];
    for &(batch, c_in, c_out, len, k, stride, padding, with_bias) in cases {
        let x = random(&mut rng, &[batch, c_in, len]);
        let w = random(&mut rng, &[c_in, c_out, k]);
        let b = with_bias.then(|| random(&mut rng, &[c_out]));
        let lengths: Vec<usize> = (0..batch).map(|i| len - i * len / 3).collect();
        let mask = lengths_mask(&lengths, len);
        let map = InputMap {
            scale: 0.5,
            leaky_slope: Some(0.1),
            mask: Some(&mask),
            channels: None,
        };
        // candle's reference one item at a time: for a batch of one-column inputs its own
        // batched transposed convolution mixes items up.
        let mapped = map.apply(&x).unwrap();
        let items: Vec<Tensor> = (0..batch)
            .map(|i| {
                let item = mapped.narrow(0, i, 1).unwrap();
                candle_conv_transpose1d(&item, &w, b.as_ref(), stride, padding)
            })
            .collect();
        let want = Tensor::cat(&items, 0).unwrap();
        let got = conv_transpose1d_fused(&x, &w, b.as_ref(), stride, padding, &map, None).unwrap();
        let err = relative_error(&got, &want);
        assert!(
            err <= 1e-4,
            "{batch} {c_in} {c_out} {len} {k} {stride} {padding}: {err}"
        );
        let shape =
            ConvTranspose1dShape::for_fast_path(&x, &w, b.as_ref(), stride, padding).unwrap();
        let direct = cpu::conv_transpose1d_direct(&x, &w, b.as_ref(), &shape, &map, None).unwrap();
        let err = relative_error(&direct, &want);
        assert!(
            err <= 1e-4,
            "direct {batch} {c_in} {c_out} {len} {k} {stride} {padding}: {err}"
        );
    }
}

#[test]
fn other_dtypes_use_candle_and_bad_shapes_are_errors() {
    let mut rng = StdRng::seed_from_u64(23);
    let x = random(&mut rng, &[1, 8, 20]);
    let w = random(&mut rng, &[4, 8, 3]);
    let want = conv1d(&x, &w, None, 1, 1, 1).unwrap();
    let x64 = x.to_dtype(DType::F64).unwrap();
    let w64 = w.to_dtype(DType::F64).unwrap();
    let got = conv1d(&x64, &w64, None, 1, 1, 1).unwrap();
    assert_eq!(got.dtype(), DType::F64);
    let got = got.to_dtype(DType::F32).unwrap();
    assert!(relative_error(&got, &want) <= 1e-5);

    let wrong_channels = random(&mut rng, &[4, 5, 3]);
    assert!(conv1d(&x, &wrong_channels, None, 1, 1, 1).is_err());
    let wrong_transposed = random(&mut rng, &[5, 4, 3]);
    assert!(conv_transpose1d(&x, &wrong_transposed, None, 2, 0).is_err());
}

/// With a spare core, kernels share their work in parts: the direct convolution (`f32` and
/// bf16) by output columns and the attention by heads, where each output value is computed by the same
/// code either way, so the parts join into exactly the one-thread result; the 1×1
/// (matrix-product) convolution by output channels, where gemm blocks each part's sums by
/// its own shape, within float rounding. Masks, residuals and padded batches included.
#[test]
fn kernels_shared_with_a_spare_core_match_one_thread() {
    let mut rng = StdRng::seed_from_u64(29);
    let values = |y: &Tensor| y.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    // (c_in, c_out, length, kernel): the text encoder's FFN, its projections, a decoder conv.
    for (c_in, c_out, len, k) in [
        (192, 768, 527, 3),
        (768, 192, 527, 3),
        (192, 192, 527, 1),
        (128, 128, 4500, 7),
    ] {
        let x = random(&mut rng, &[2, c_in, len]);
        let w = (random(&mut rng, &[c_out, c_in, k]) * 0.1).unwrap();
        let b = random(&mut rng, &[c_out]);
        let residual = random(&mut rng, &[2, c_out, len]);
        let mut mask = vec![1f32; 2 * len];
        mask[len + len / 2..].fill(0.0);
        let mask = Tensor::from_vec(mask, (2, 1, len), &Device::Cpu).unwrap();
        let map = InputMap {
            scale: 1.0,
            leaky_slope: Some(0.0),
            mask: Some(&mask),
            channels: None,
        };
        let direct = || conv1d_fused(&x, &w, Some(&b), k / 2, 1, &map, &[&residual], None);
        let products = || fast_conv1d(&x, &w, Some(&b), k / 2, 1, 1);
        let bf16_weights = PackedWeightCache::new(super::Precision::Bf16);
        let bf16 = || {
            let y = conv1d_fused(
                &x,
                &w,
                Some(&b),
                k / 2,
                1,
                &map,
                &[&residual],
                Some(&bf16_weights),
            );
            values(&y.unwrap())
        };
        let (one_direct, one_products, one_bf16) = (direct().unwrap(), products(), bf16());
        let _lending = crate::spare::lending_always();
        let case = (c_in, c_out, len, k);
        assert_eq!(
            values(&direct().unwrap()),
            values(&one_direct),
            "direct {case:?}"
        );
        assert_eq!(bf16(), one_bf16, "bf16 {case:?}");
        let err = relative_error(&products(), &one_products);
        assert!(err <= 1e-6, "products {case:?}: relative error {err}");
    }

    let (t, n_heads, head_dim, r) = (300, 2, 96, 4);
    let h = n_heads * head_dim;
    let q = random(&mut rng, &[2, h, t]);
    let (k, v) = (random(&mut rng, &[2, h, t]), random(&mut rng, &[2, h, t]));
    let (band_k, band_v) = (
        random(&mut rng, &[2 * r + 1, head_dim]),
        random(&mut rng, &[2 * r + 1, head_dim]),
    );
    let attend = || {
        super::relative_attention(&q, &k, &v, &band_k, &band_v, n_heads, &[t, 211])
            .unwrap()
            .expect("a CPU f32 kernel")
    };
    let one = attend();
    let _lending = crate::spare::lending_always();
    assert_eq!(values(&attend()), values(&one), "attention");
}

/// `[B, 1, T]`: 1 within each item's length, 0 past it (the models' padding masks).
fn lengths_mask(lengths: &[usize], len: usize) -> Tensor {
    let data: Vec<f32> = lengths
        .iter()
        .flat_map(|&l| (0..len).map(move |t| if t < l { 1.0 } else { 0.0 }))
        .collect();
    Tensor::from_vec(data, (lengths.len(), 1, len), &Device::Cpu).unwrap()
}

/// The kernel modules' imports form no circle: the plain types sit at the bottom, each kernel
/// imports only them and its own blocks, and the routing sits on top. An edge is any
/// `super::module` or `crate::kernels::module` path outside comments.
#[test]
fn module_imports_form_no_circle() {
    use std::collections::BTreeMap;
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/kernels");
    let sources: BTreeMap<String, String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "rs"))
        .filter(|path| !path.ends_with("mod.rs"))
        .map(|path| {
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&path).unwrap())
        })
        .collect();
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut imports: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (module, source) in &sources {
        let code: String = source
            .lines()
            .map(|line| line.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        let mut names = Vec::new();
        for prefix in ["super::", "crate::kernels::"] {
            for (at, _) in code.match_indices(prefix) {
                let rest = &code[at + prefix.len()..];
                match rest.strip_prefix('{') {
                    Some(group) => {
                        let group = &group[..group.find('}').unwrap_or(group.len())];
                        names.extend(group.split(',').map(ident));
                    }
                    None => names.push(ident(rest)),
                }
            }
        }
        let mut edges: Vec<&str> = sources
            .keys()
            .map(String::as_str)
            .filter(|other| *other != module && names.iter().any(|n| n == other))
            .collect();
        edges.dedup();
        imports.insert(module, edges);
    }
    // Depth-first search; a module met again while still on the path closes a circle.
    fn visit<'a>(
        module: &'a str,
        imports: &BTreeMap<&'a str, Vec<&'a str>>,
        path: &mut Vec<&'a str>,
        done: &mut Vec<&'a str>,
    ) {
        if let Some(at) = path.iter().position(|m| *m == module) {
            panic!("import circle: {} → {module}", path[at..].join(" → "));
        }
        if done.contains(&module) {
            return;
        }
        path.push(module);
        for next in &imports[module] {
            visit(next, imports, path, done);
        }
        path.pop();
        done.push(module);
    }
    let mut done = Vec::new();
    for module in imports.keys() {
        visit(module, &imports, &mut Vec::new(), &mut done);
    }
    // Bottom first, as each module's imports were finished before it.
    eprintln!("kernel modules, lowest layer first: {}", done.join(", "));
    assert!(imports["dispatch"].contains(&"cpu") && imports["rows"].is_empty());
}

/// A layer that let go of its tensor after packing computes what it computed before, in every
/// precision and through the spectra, in a single convolution and in a residual stack; every
/// call that would need the values it no longer has is an error, never zeros.
#[test]
fn released_weights_compute_the_same_and_paths_that_need_them_fail() {
    use super::dispatch::packed_and_released;
    use super::Precision;
    let mut rng = StdRng::seed_from_u64(45);
    // 128 channels at 7 taps: wide enough for the spectra.
    let (c, taps, len) = (128, 7, 300);
    let x = random(&mut rng, &[1, c, len]);
    let w = (random(&mut rng, &[c, c, taps]) * 0.1).unwrap();
    let b = random(&mut rng, &[c]);
    let caches = [
        PackedWeightCache::new(Precision::F32),
        PackedWeightCache::spectral(Precision::F32),
        PackedWeightCache::new(Precision::Bf16),
        PackedWeightCache::new(Precision::Int8),
    ];
    let map = InputMap {
        leaky_slope: Some(0.1),
        ..InputMap::IDENTITY
    };
    for cache in caches {
        let run = |w: &Tensor| {
            conv1d_fused(&x, w, Some(&b), 3, 1, &map, &[], Some(&cache))
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap()
        };
        let want = run(&w);
        let stand_in = packed_and_released(&w, &cache).unwrap();
        assert_eq!(stand_in.dims(), w.dims());
        assert!(stand_in.elem_count() > 1 && stand_in.stride() == [0, 0, 0]);
        assert!(run(&stand_in) == want, "{:?}", cache.precision());
        let stack = [vec![vec![StackConv {
            weight: &stand_in,
            bias: Some(&b),
            padding: 3,
            dilation: 1,
            cache: &cache,
        }]]];
        // Long enough for the strip-wise stage; its sum is the block's residual unit.
        let long = random(&mut rng, &[1, c, 40_000]);
        assert!(residual_stack_sum(&long, &stack, 0.1, None)
            .unwrap()
            .is_some());
    }
    let cache = PackedWeightCache::new(Precision::F32);
    let stand_in = packed_and_released(&w, &cache).unwrap();
    let needs_values = [
        conv1d(&x, &stand_in, Some(&b), 3, 1, 1),
        conv1d_fused(&x, &stand_in, Some(&b), 3, 1, &map, &[], None),
        conv1d_fused(
            &x,
            &stand_in,
            Some(&b),
            3,
            1,
            &map,
            &[],
            Some(&PackedWeightCache::new(Precision::Int8)),
        ),
        // Another device's input (an f64 tensor stands in for it) goes to candle's path.
        conv1d_fused(
            &x.to_dtype(DType::F64).unwrap(),
            &stand_in,
            Some(&b),
            3,
            1,
            &map,
            &[],
            Some(&cache),
        ),
    ];
    for (i, result) in needs_values.into_iter().enumerate() {
        let error = result.expect_err("no values to compute with").to_string();
        assert!(error.contains("released"), "call {i}: {error}");
    }
    // A weight the CPU kernels do not take stays as it is.
    let f64_weight = w.to_dtype(DType::F64).unwrap();
    let kept = packed_and_released(&f64_weight, &PackedWeightCache::default()).unwrap();
    assert_eq!(kept.stride(), f64_weight.stride());
}
