//! The bf16 kernels against the definition: each block kind this CPU has (AMX, AVX-512,
//! portable) against an `f64` sum of the same bf16-rounded operands, which must agree to `f32`
//! rounding; and the bf16 entry points against candle's `f32` convolutions, which must agree
//! within what rounding both operands to 8 significant bits allows.

use super::bf16::{self, from_bf16, to_bf16, Bf16Weights};
use super::dispatch::{conv1d_fused, conv_transpose1d_fused, residual_stack_sum};
use super::layer::{InputMap, PackedPhaseCache, PackedWeightCache, StackConv};
use super::precision::Precision;
use super::rows::{Rows, RowsMut, SampleMap};
use candle_core::{Device, Tensor};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn random(rng: &mut StdRng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

fn round(v: f32) -> f64 {
    from_bf16(to_bf16(v)) as f64
}

fn mapped(map: &SampleMap, v: f32, t: usize) -> f32 {
    let v = v * map.scale;
    let v = match map.leaky_slope {
        Some(s) => v.max(v * s),
        None => v,
    };
    map.mask.map_or(v, |m| v * m[t])
}

/// One case of `out[co, j] = start + bias + Σ residuals + Σ w · map(x[j + offset + k·d])` in
/// f64 over bf16-rounded weights and mapped inputs.
#[allow(clippy::too_many_arguments)]
fn reference(
    x: &[f32],
    l_in: usize,
    w: &[f32],
    (c_out, c_in, taps): (usize, usize, usize),
    bias: &[f32],
    start: Option<&[f32]>,
    residuals: &[&[f32]],
    offset: isize,
    dilation: usize,
    l_out: usize,
    map: &SampleMap,
) -> Vec<f32> {
    let mut out = vec![0f32; c_out * l_out];
    for co in 0..c_out {
        for j in 0..l_out {
            let i = co * l_out + j;
            let mut s = bias[co] as f64 + residuals.iter().map(|r| r[i] as f64).sum::<f64>();
            s += start.map_or(0.0, |st| st[i] as f64);
            for ci in 0..c_in {
                for k in 0..taps {
                    let t = j as isize + offset + (k * dilation) as isize;
                    if t >= 0 && (t as usize) < l_in {
                        let v = mapped(map, x[ci * l_in + t as usize], t as usize);
                        s += round(w[(co * c_in + ci) * taps + k]) * round(v);
                    }
                }
            }
            out[i] = s as f32;
        }
    }
    out
}

fn worst(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max)
}

#[test]
fn every_block_kind_sums_the_rounded_operands() {
    let mut rng = StdRng::seed_from_u64(41);
    // (c_in, c_out, l_in, taps, dilation, padding): decoder and flow shapes, odd channel
    // counts and a row count that fills no block, pointwise, an input shorter than the kernel,
    // several input tiles (128 channels × 2100 columns).
    let cases = [
        (32, 32, 1500, 7, 12, 36),
        (64, 64, 301, 5, 3, 6),
        (17, 9, 50, 3, 1, 1),
        (192, 384, 251, 5, 1, 2),
        (192, 40, 37, 1, 1, 0),
        (5, 16, 3, 7, 2, 6),
        (128, 20, 2100, 3, 1, 1),
    ];
    for isa in bf16::isas_for_tests() {
        for (n, &(c_in, c_out, l_in, taps, dilation, padding)) in cases.iter().enumerate() {
            let x = random(&mut rng, c_in * l_in);
            let w = random(&mut rng, c_out * c_in * taps);
            let bias = random(&mut rng, c_out);
            let l_out = l_in + 2 * padding - dilation * (taps - 1);
            let residual = random(&mut rng, c_out * l_out);
            let start = random(&mut rng, c_out * l_out);
            let mask: Vec<f32> = (0..l_in).map(|t| (t < l_in * 2 / 3) as u8 as f32).collect();
            let map = if n % 2 == 0 {
                SampleMap::IDENTITY
            } else {
                SampleMap {
                    scale: 1.0 / 3.0,
                    leaky_slope: Some(0.1),
                    mask: Some(&mask),
                    channels: None,
                }
            };
            let accumulate = n % 3 == 1;
            let residuals: &[&[f32]] = if n % 2 == 1 { &[&residual] } else { &[] };
            let want = reference(
                &x,
                l_in,
                &w,
                (c_out, c_in, taps),
                &bias,
                accumulate.then_some(&start[..]),
                residuals,
                -(padding as isize),
                dilation,
                l_out,
                &map,
            );
            let packed = Bf16Weights::new(&w, c_out, c_in, taps, isa);
            let mut got = start.clone();
            let res: Vec<Rows> = residuals
                .iter()
                .map(|r| Rows::contiguous(r, l_out))
                .collect();
            bf16::conv1d_rows(
                RowsMut::new(&mut got, l_out, l_out),
                accumulate,
                Rows::contiguous(&x, l_in),
                -(padding as isize),
                &packed,
                &bias,
                dilation,
                &map,
                &res,
            );
            let worst = worst(&got, &want);
            assert!(worst < 2e-4, "{isa:?} case {n}: max |diff| {worst}");
        }
    }
}

/// Relative RMS error of `got` against `want`.
fn relative_error(got: &Tensor, want: &Tensor) -> f32 {
    let diff = (got - want).unwrap().sqr().unwrap().mean_all().unwrap();
    let scale = want.sqr().unwrap().mean_all().unwrap();
    (diff.to_scalar::<f32>().unwrap() / scale.to_scalar::<f32>().unwrap()).sqrt()
}

fn tensor(rng: &mut StdRng, dims: &[usize]) -> Tensor {
    let n = dims.iter().product();
    Tensor::from_vec(random(rng, n), dims, &Device::Cpu).unwrap()
}

/// Rounding both operands to bf16 (relative error ≤ 2^-9 each) leaves a sum of n products
/// with independent errors a relative RMS error near 2^-9·√2 ≈ 0.3 %; 1 % leaves room for
/// unlucky cancellations and catches any real mistake (a wrong tap or channel is ≫ 10 %).
const BF16_TOLERANCE: f32 = 0.01;

#[test]
fn bf16_entry_points_agree_with_f32_within_rounding() {
    let mut rng = StdRng::seed_from_u64(43);
    let dev = &Device::Cpu;
    // The decoder's fused residual step, batch of 2 with a mask.
    let (batch, c, len, k, d) = (2, 64, 3000, 5, 3);
    let x = tensor(&mut rng, &[batch, c, len]);
    let w = (tensor(&mut rng, &[c, c, k]) * 0.2).unwrap();
    let b = tensor(&mut rng, &[c]);
    let mask: Vec<f32> = (0..batch * len)
        .map(|i| (i % len < len - 700 * (i / len)) as u8 as f32)
        .collect();
    let mask = Tensor::from_vec(mask, (batch, 1, len), dev).unwrap();
    let map = InputMap {
        scale: 0.5,
        leaky_slope: Some(0.1),
        mask: Some(&mask),
        channels: None,
    };
    let padding = d * (k - 1) / 2;
    let fused = |cache: &PackedWeightCache| {
        conv1d_fused(&x, &w, Some(&b), padding, d, &map, &[&x], Some(cache)).unwrap()
    };
    let want = fused(&PackedWeightCache::default());
    let got = fused(&PackedWeightCache::new(Precision::Bf16));
    let err = relative_error(&got, &want);
    assert!(err < BF16_TOLERANCE, "fused conv: {err}");
    assert!(err > 0.0, "bf16 must actually round");

    // A decoder stage's strip-wise multi-receptive-field sum.
    let (c, len) = (32, 40_000);
    let y = tensor(&mut rng, &[1, c, len]);
    let layers: Vec<(Tensor, Tensor, usize)> = [(3usize, 1usize), (3, 2), (7, 3), (7, 12)]
        .iter()
        .map(|&(k, d)| {
            let w = (tensor(&mut rng, &[c, c, k]) * 0.15).unwrap();
            (w, tensor(&mut rng, &[c]), d)
        })
        .collect();
    let stack = |precision: Precision| {
        let caches: Vec<PackedWeightCache> = layers
            .iter()
            .map(|_| PackedWeightCache::new(precision))
            .collect();
        let conv = |i: usize| StackConv {
            weight: &layers[i].0,
            bias: Some(&layers[i].1),
            padding: layers[i].2 * (layers[i].0.dim(2).unwrap() - 1) / 2,
            dilation: layers[i].2,
            cache: &caches[i],
        };
        let blocks = vec![
            vec![vec![conv(0)], vec![conv(1)]],
            vec![vec![conv(2)], vec![conv(3)]],
        ];
        residual_stack_sum(&y, &blocks, 0.1, None)
            .unwrap()
            .expect("a signal this long takes the strip path")
    };
    let err = relative_error(&stack(Precision::Bf16), &stack(Precision::F32));
    assert!(err < BF16_TOLERANCE, "stage sum: {err}");

    // The upsampling transposed convolutions, short (per-tap products in f32) and long.
    for (c_in, c_out, len, k, stride) in [(256, 128, 251, 16, 8), (64, 32, 1500, 8, 4)] {
        let x = tensor(&mut rng, &[1, c_in, len]);
        let w = (tensor(&mut rng, &[c_in, c_out, k]) * 0.1).unwrap();
        let b = tensor(&mut rng, &[c_out]);
        let map = InputMap {
            scale: 1.0 / 3.0,
            leaky_slope: Some(0.1),
            mask: None,
            channels: None,
        };
        let padding = (k - stride) / 2;
        let run = |cache: Option<&PackedPhaseCache>| {
            conv_transpose1d_fused(&x, &w, Some(&b), stride, padding, &map, cache).unwrap()
        };
        let want = run(None);
        let cache = PackedPhaseCache::new(Precision::Bf16);
        let got = run(Some(&cache));
        let err = relative_error(&got, &want);
        assert!(err < BF16_TOLERANCE, "transposed {c_in}→{c_out}: {err}");
        // The cached phases give the same result again.
        assert_eq!(
            run(Some(&cache)).to_vec3::<f32>().unwrap(),
            got.to_vec3::<f32>().unwrap()
        );
    }
}

/// `auto` takes bf16 exactly where its hardware beats `f32`: always with AMX, never without
/// any bf16 hardware, and with only AVX-512 bf16 exactly when the startup timing said bf16 won
/// (the rule for every case on any CPU; this CPU's own choice against the timing it made,
/// which runs here whenever the CPU has AVX-512 bf16 but no usable AMX, or
/// `OMNIVOICE_KERNEL_ISA=avx512` hides it).
#[test]
fn auto_takes_bf16_only_where_the_hardware_is_faster() {
    use super::bf16::{bf16_isa, Bf16Isa};
    use super::precision::{avx512_timing, choose, Bf16Timing};
    for wins in [false, true] {
        let unasked = || -> bool { panic!("only AVX-512 alone needs the timing") };
        assert_eq!(choose(Bf16Isa::Amx, unasked), Precision::Bf16);
        assert_eq!(choose(Bf16Isa::Portable, unasked), Precision::F32);
        let want = if wins {
            Precision::Bf16
        } else {
            Precision::F32
        };
        assert_eq!(choose(Bf16Isa::Avx512, || wins), want, "timing said {wins}");
    }
    let timing = |bf16_secs| Bf16Timing {
        f32_secs: 1.0,
        bf16_secs,
    };
    assert!(timing(0.8).bf16_wins(), "20 % faster and more counts");
    assert!(!timing(0.9).bf16_wins(), "a near tie does not");
    assert!(!timing(1.5).bf16_wins());

    let auto = Precision::auto();
    match bf16_isa() {
        Bf16Isa::Amx => assert_eq!(auto, Precision::Bf16),
        Bf16Isa::Portable => assert_eq!(auto, Precision::F32),
        Bf16Isa::Avx512 => {
            let measured = avx512_timing();
            eprintln!("AVX-512 bf16 against f32: {measured:?}, auto {auto}");
            assert!(measured.f32_secs > 0.0 && measured.bf16_secs > 0.0);
            assert!(measured.f32_secs.is_finite() && measured.bf16_secs.is_finite());
            assert_eq!(auto == Precision::Bf16, measured.bf16_wins());
        }
    }
    assert!(Precision::F32.has_hardware());
    assert_eq!(
        Precision::Bf16.has_hardware(),
        bf16_isa() != Bf16Isa::Portable
    );
}
