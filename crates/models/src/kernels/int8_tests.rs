//! The int8 kernels against the `f32` kernel on random data: every int8 block kind this CPU
//! has (AMX-INT8, AVX-512 VNNI, AVX-VNNI, AVX2, portable; `OMNIVOICE_KERNEL_ISA` caps which)
//! must compute the same integer sums, so the same outputs, and each must stay within what
//! 8-bit operands allow of the `f32` direct kernel's output.

use super::bf16::Bf16Isa;
use super::direct::{self, PackedWeights};
use super::int8::{self, Int8Isa, Int8Weights};
use super::precision::{choose_allowing_int8, Precision};
use super::rows::{Rows, RowsMut, SampleMap};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn random(rng: &mut StdRng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

/// A convolution's operands: channels and lengths that are and are not multiples of the
/// blocks' 4-channel quads, 8 and 32 rows and 32 columns.
struct Case {
    c_in: usize,
    c_out: usize,
    l_in: usize,
    taps: usize,
    dilation: usize,
    x: Vec<f32>,
    w: Vec<f32>,
    bias: Vec<f32>,
    residual: Vec<f32>,
    start: Vec<f32>,
    mask: Vec<f32>,
}

impl Case {
    fn new(
        rng: &mut StdRng,
        (c_in, c_out, l_in, taps, dilation): (usize, usize, usize, usize, usize),
    ) -> Self {
        Case {
            c_in,
            c_out,
            l_in,
            taps,
            dilation,
            x: random(rng, c_in * l_in),
            w: random(rng, c_out * c_in * taps),
            bias: random(rng, c_out),
            residual: random(rng, c_out * l_in),
            start: random(rng, c_out * l_in),
            mask: (0..l_in)
                .map(|t| if t % 97 < 90 { 1.0 } else { 0.0 })
                .collect(),
        }
    }

    fn map(&self) -> SampleMap<'_> {
        SampleMap {
            scale: 0.7,
            leaky_slope: Some(0.1),
            mask: Some(&self.mask),
            channels: None,
        }
    }

    /// `start + conv(map(x)) + residual`, same length as the input, through `run`.
    fn run(
        &self,
        run: impl FnOnce(RowsMut<'_>, Rows<'_>, isize, &SampleMap<'_>, &[Rows<'_>]),
    ) -> Vec<f32> {
        let mut out = self.start.clone();
        let padding = (self.dilation * (self.taps - 1) / 2) as isize;
        run(
            RowsMut::new(&mut out, self.l_in, self.l_in),
            Rows::contiguous(&self.x, self.l_in),
            -padding,
            &self.map(),
            &[Rows::contiguous(&self.residual, self.l_in)],
        );
        out
    }

    fn int8(&self, isa: Int8Isa) -> Vec<f32> {
        let w = Int8Weights::new(&self.w, self.c_out, self.c_in, self.taps, isa);
        self.run(|out, x, offset, map, residuals| {
            int8::conv1d_rows(
                out,
                true,
                x,
                offset,
                &w,
                &self.bias,
                self.dilation,
                map,
                residuals,
            )
        })
    }

    fn f32(&self) -> Vec<f32> {
        let w = PackedWeights::new(&self.w, self.c_out, self.c_in, self.taps);
        self.run(|out, x, offset, map, residuals| {
            direct::conv1d_rows(
                out,
                true,
                x,
                offset,
                &w,
                &self.bias,
                self.dilation,
                map,
                residuals,
            )
        })
    }
}

/// (c_in, c_out, l_in, taps, dilation): Kokoro's generator resblock (several AMX chunks), odd
/// channel counts, fewer rows than a block, a pointwise layer, a tile-spanning length.
const SHAPES: [(usize, usize, usize, usize, usize); 5] = [
    (128, 128, 150, 11, 5),
    (13, 40, 300, 3, 1),
    (70, 20, 100, 1, 1),
    (3, 8, 50, 5, 2),
    (32, 32, 2_500, 7, 3),
];

/// The sums are exact integers, so each block kind must give the portable block's output bit
/// for bit, whatever its instructions.
#[test]
fn every_int8_block_kind_computes_the_portable_sums() {
    let mut rng = StdRng::seed_from_u64(45);
    let kinds: Vec<Int8Isa> = Int8Isa::ALL.into_iter().filter(|k| k.available()).collect();
    eprintln!(
        "int8 block kinds on this CPU: {kinds:?} (best: {:?})",
        int8::int8_isa()
    );
    assert!(kinds.contains(&Int8Isa::Portable));
    for shape in SHAPES {
        let case = Case::new(&mut rng, shape);
        let portable = case.int8(Int8Isa::Portable);
        for &kind in &kinds {
            let got = case.int8(kind);
            let differ = got.iter().zip(&portable).filter(|(a, b)| a != b).count();
            assert_eq!(
                differ, 0,
                "{kind:?} on {shape:?}: {differ} outputs differ from portable"
            );
        }
    }
}

/// Against the `f32` kernel on the same operands: within what 8-bit weights and activations
/// allow (relative RMS error around 1 %), and not equal (int8 must actually quantize).
#[test]
fn every_int8_block_kind_stays_within_quantization_error_of_f32() {
    let mut rng = StdRng::seed_from_u64(46);
    for shape in SHAPES {
        let case = Case::new(&mut rng, shape);
        let want = case.f32();
        // The error of the convolution alone: the start and residual cancel.
        let base: Vec<f32> = case
            .start
            .iter()
            .zip(&case.residual)
            .map(|(s, r)| s + r)
            .collect();
        let power: f64 = want
            .iter()
            .zip(&base)
            .map(|(w, b)| ((w - b) as f64).powi(2))
            .sum();
        for kind in Int8Isa::ALL.into_iter().filter(|k| k.available()) {
            let got = case.int8(kind);
            let err: f64 = got
                .iter()
                .zip(&want)
                .map(|(g, w)| ((g - w) as f64).powi(2))
                .sum();
            let relative = (err / power).sqrt();
            assert!(
                relative < 0.03,
                "{kind:?} on {shape:?}: relative RMS error {relative}"
            );
            assert!(
                relative > 1e-4,
                "{kind:?} on {shape:?}: int8 must quantize: {relative}"
            );
        }
    }
}

/// Where int8 may be `auto` (a model whose int8 passed its gate): bf16 wherever AMX is, int8
/// where AVX-512 VNNI is the best int8 block, the plain rule (not asked otherwise) elsewhere.
#[test]
fn auto_takes_int8_only_where_it_was_measured_faster() {
    let unasked = || -> Precision { panic!("the plain rule must not be asked") };
    assert_eq!(
        choose_allowing_int8(Bf16Isa::Amx, Int8Isa::Amx, unasked),
        Precision::Bf16
    );
    for bf16 in [Bf16Isa::Avx512, Bf16Isa::Portable] {
        assert_eq!(
            choose_allowing_int8(bf16, Int8Isa::Avx512Vnni, unasked),
            Precision::Int8
        );
        for int8 in [Int8Isa::AvxVnni, Int8Isa::Avx2, Int8Isa::Portable] {
            for plain in [Precision::F32, Precision::Bf16] {
                assert_eq!(choose_allowing_int8(bf16, int8, || plain), plain);
            }
        }
    }
}

/// With a spare core some of a convolution's column tiles are computed there: the parts are
/// cut at whole tiles, so each tile is quantized with the scale one thread gives it and the
/// output is the same, bit for bit, on every block kind.
#[test]
fn a_spare_core_computes_the_same_tiles() {
    let mut rng = StdRng::seed_from_u64(11);
    // Long enough for several tiles, and more work than a shared call needs.
    let case = Case::new(&mut rng, (64, 64, 6_000, 7, 3));
    const { assert!(64 * 64 * 7 * 6_000 >= crate::spare::MIN_SPLIT_WORK) };
    for kind in Int8Isa::ALL.into_iter().filter(|k| k.available()) {
        let alone = case.int8(kind);
        let shared = {
            let _lending = crate::spare::lending_always();
            case.int8(kind)
        };
        assert!(
            alone == shared,
            "{kind:?}: the shared call computed other values"
        );
    }
}

/// The input map with its running maximum, in vectors where the CPU has them, gives exactly
/// the values (and maximum) of the map applied value by value, for every kind of map and
/// lengths that leave a partial vector.
#[test]
fn the_map_with_its_maximum_matches_the_plain_map() {
    let mut rng = StdRng::seed_from_u64(47);
    let mask: Vec<f32> = random(&mut rng, 80);
    for (leaky_slope, mask) in [
        (None, None),
        (Some(0.2), None),
        (None, Some(&mask[..])),
        (Some(0.01), Some(&mask[..])),
    ] {
        let map = SampleMap {
            scale: 1.3,
            leaky_slope,
            mask,
            channels: None,
        };
        for (len, t0) in [(1, 0), (16, 3), (37, 40), (64, 16)] {
            let src = random(&mut rng, len);
            let mut want = vec![0f32; len];
            map.apply_slice(&mut want, &src, t0);
            let want_max = want.iter().fold(0.25f32, |m, v| m.max(v.abs()));
            let mut got = vec![f32::NAN; len];
            let got_max =
                int8::map_with_max(&map, &mut got, &src, t0, 0, 0.25, int8::avx512_vectors());
            assert_eq!(got, want, "{map:?}, {len} values from {t0}");
            assert_eq!(got_max, want_max, "{map:?}, {len} values from {t0}");
        }
    }
}

/// The channels' `Snake(AdaIN(·))` applied as the int8 kernel reads its input gives, bit for
/// bit, what the kernel gives on the input with the map applied to the whole tensor first (the
/// other kernels' route), on every block kind; and it is not the identity.
#[test]
fn the_channel_map_in_the_kernel_matches_the_map_applied_first() {
    use super::fast_math::{apply_channel_snakes, channel_snakes};
    use super::rows::{AdainSnake, Affine};
    use candle_core::{Device, Tensor};
    let mut rng = StdRng::seed_from_u64(48);
    for shape in SHAPES {
        let case = Case::new(&mut rng, shape);
        let parameters: Vec<AdainSnake> = (0..case.c_in)
            .map(|c| AdainSnake {
                affine: Affine {
                    scale: 0.8 + c as f32 / 50.0,
                    shift: c as f32 / 40.0 - 0.3,
                },
                alpha: 0.4 + c as f32 / 30.0,
                inv_alpha: 1.0 / (0.4 + c as f32 / 30.0),
            })
            .collect();
        // The channel map alone, and after a sample map (scale, LeakyReLU and mask).
        let sample_map = case.map();
        let mut after_map = case.x.clone();
        for (dst, src) in after_map
            .chunks_exact_mut(case.l_in)
            .zip(case.x.chunks_exact(case.l_in))
        {
            sample_map.apply_slice(dst, src, 0);
        }
        let tensor =
            |v: &[f32]| Tensor::from_slice(v, (1, case.c_in, case.l_in), &Device::Cpu).unwrap();
        let snakes = channel_snakes(&tensor(&case.x), &parameters, 1e-5).unwrap();
        let applied = |v: &[f32]| -> Vec<f32> {
            apply_channel_snakes(&tensor(v), &snakes)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap()
        };
        let (mapped, mapped_after) = (applied(&case.x), applied(&after_map));
        assert_ne!(mapped, case.x);
        let padding = (case.dilation * (case.taps - 1) / 2) as isize;
        for isa in Int8Isa::ALL.into_iter().filter(|k| k.available()) {
            let w = Int8Weights::new(&case.w, case.c_out, case.c_in, case.taps, isa);
            let run = |input: &[f32], map: &SampleMap<'_>| {
                let mut out = case.start.clone();
                int8::conv1d_rows(
                    RowsMut::new(&mut out, case.l_in, case.l_in),
                    true,
                    Rows::contiguous(input, case.l_in),
                    -padding,
                    &w,
                    &case.bias,
                    case.dilation,
                    map,
                    &[Rows::contiguous(&case.residual, case.l_in)],
                );
                out
            };
            let fused = SampleMap {
                channels: Some(&snakes),
                ..SampleMap::IDENTITY
            };
            let want = run(&mapped, &SampleMap::IDENTITY);
            assert_eq!(run(&case.x, &fused), want, "{isa:?} on {shape:?}");
            let fused_after = SampleMap {
                channels: Some(&snakes),
                ..sample_map
            };
            let want = run(&mapped_after, &SampleMap::IDENTITY);
            assert_eq!(
                run(&case.x, &fused_after),
                want,
                "{isa:?} on {shape:?}, after a sample map"
            );
        }
    }
}
