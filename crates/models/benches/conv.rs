//! Compares candle's CPU convolutions with `omnivoice_models::kernels` on the shapes of one
//! ~3 s utterance through the Piper VITS decoder (and the flow / duration predictor convs that
//! were slow in candle), in the same run so the ratios are not skewed by machine load. The
//! `routes` group times the kernels' own CPU paths against each other on the same shapes: the
//! measurements behind the routing rules in `src/vits/kernels/dispatch.rs`. The `precisions`
//! group times the direct kernel in `f32`, `bf16` and `int8` on the model's dominant shapes.
//!
//! Throughput is reported in elements per second where one element is one multiply-accumulate,
//! so criterion's "Gelem/s" reads as GMAC/s. Both sides run on one thread: `RAYON_NUM_THREADS`
//! is set to 1 unless given, because candle's own convolution otherwise uses every core.
//!
//! On a shared machine wall time mostly measures the other processes; `CONV_BENCH_CLOCK=thread`
//! measures this thread's CPU time instead (still affected by shared caches, but not by waiting
//! for a core).

use candle_core::{Device, Tensor};
use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::{BenchmarkId, Criterion, Throughput};
use omnivoice_models::kernels::{self, routes};
use std::hint::black_box;
use std::time::Duration;

/// Frames of a ~3 s utterance at 22.05 kHz (hop 256 = 8 · 8 · 4).
const FRAMES: usize = 251;

struct Conv {
    name: &'static str,
    c_in: usize,
    c_out: usize,
    len: usize,
    kernel: usize,
    dilation: usize,
    groups: usize,
}

struct ConvTranspose {
    name: &'static str,
    c_in: usize,
    c_out: usize,
    len: usize,
    kernel: usize,
    stride: usize,
    padding: usize,
}

fn convs() -> Vec<Conv> {
    let conv = |name, c_in, c_out, len, kernel, dilation, groups| Conv {
        name,
        c_in,
        c_out,
        len,
        kernel,
        dilation,
        groups,
    };
    vec![
        conv("conv_pre 192-256 k7", 192, 256, FRAMES, 7, 1, 1),
        conv("rb C128 k3 d1", 128, 128, FRAMES * 8, 3, 1, 1),
        conv("rb C128 k7 d12", 128, 128, FRAMES * 8, 7, 12, 1),
        conv("rb C64 k3 d1", 64, 64, FRAMES * 64, 3, 1, 1),
        conv("rb C64 k7 d12", 64, 64, FRAMES * 64, 7, 12, 1),
        conv("rb C32 k3 d1", 32, 32, FRAMES * 256, 3, 1, 1),
        conv("rb C32 k5 d6", 32, 32, FRAMES * 256, 5, 6, 1),
        conv("rb C32 k7 d12", 32, 32, FRAMES * 256, 7, 12, 1),
        conv("conv_post 32-1 k7", 32, 1, FRAMES * 256, 7, 1, 1),
        conv("flow 192-384 k5", 192, 384, FRAMES, 5, 1, 1),
        conv("flow 1x1 192-384", 192, 384, FRAMES, 1, 1, 1),
        conv("enc FFN 192-768 k3", 192, 768, 103, 3, 1, 1),
        conv("dp depthwise C192 k3 d9", 192, 192, 103, 3, 9, 192),
    ]
}

fn conv_transposes() -> Vec<ConvTranspose> {
    let up = |name, c_in, c_out, len, kernel, stride, padding| ConvTranspose {
        name,
        c_in,
        c_out,
        len,
        kernel,
        stride,
        padding,
    };
    vec![
        up("ups0 256-128 k16 s8", 256, 128, FRAMES, 16, 8, 4),
        up("ups1 128-64 k16 s8", 128, 64, FRAMES * 8, 16, 8, 4),
        up("ups2 64-32 k8 s4", 64, 32, FRAMES * 64, 8, 4, 2),
    ]
}

fn randn(dims: &[usize]) -> Tensor {
    Tensor::randn(0f32, 1f32, dims, &Device::Cpu).unwrap()
}

fn bench_conv1d<M: Measurement>(c: &mut Criterion<M>) {
    let mut group = c.benchmark_group("conv1d");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(3));
    for s in convs() {
        let x = randn(&[1, s.c_in, s.len]);
        let w = randn(&[s.c_out, s.c_in / s.groups, s.kernel]);
        let b = randn(&[s.c_out]);
        let padding = s.dilation * (s.kernel - 1) / 2;
        let macs = s.c_out * (s.c_in / s.groups) * s.kernel * s.len;
        group.throughput(Throughput::Elements(macs as u64));
        group.bench_function(BenchmarkId::new("candle", s.name), |bench| {
            bench.iter(|| {
                let y = x.conv1d(&w, padding, 1, s.dilation, s.groups).unwrap();
                black_box(y.broadcast_add(&b.reshape((1, (), 1)).unwrap()).unwrap())
            })
        });
        group.bench_function(BenchmarkId::new("fast", s.name), |bench| {
            bench.iter(|| {
                black_box(kernels::conv1d(
                    &x,
                    &w,
                    Some(&b),
                    padding,
                    s.dilation,
                    s.groups,
                ))
            })
        });
    }
    group.finish();
}

fn bench_conv_transpose1d<M: Measurement>(c: &mut Criterion<M>) {
    let mut group = c.benchmark_group("conv_transpose1d");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(3));
    for s in conv_transposes() {
        let x = randn(&[1, s.c_in, s.len]);
        let w = randn(&[s.c_in, s.c_out, s.kernel]);
        let b = randn(&[s.c_out]);
        let macs = s.c_in * s.c_out * s.kernel * s.len;
        group.throughput(Throughput::Elements(macs as u64));
        group.bench_function(BenchmarkId::new("candle", s.name), |bench| {
            bench.iter(|| {
                let y = x
                    .conv_transpose1d(&w, s.padding, 0, s.stride, 1, 1)
                    .unwrap();
                black_box(y.broadcast_add(&b.reshape((1, (), 1)).unwrap()).unwrap())
            })
        });
        group.bench_function(BenchmarkId::new("fast", s.name), |bench| {
            bench.iter(|| {
                black_box(kernels::conv_transpose1d(
                    &x,
                    &w,
                    Some(&b),
                    s.stride,
                    s.padding,
                ))
            })
        });
    }
    group.finish();
}

/// The convolutions of Piper's medium-voice HiFi-GAN decoder for one utterance: conv_pre, three
/// stages of (transposed conv, mean of three type-2 resblocks with kernels 3/5/7 and dilations
/// (1,2)/(2,6)/(3,12), each conv residual), conv_post. Activations are left out so the number is
/// the convolutions' share alone.
fn bench_decoder_sequence<M: Measurement>(c: &mut Criterion<M>) {
    let mut group = c.benchmark_group("decoder convs");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    let stages = [(256, 128, 16, 8, 4), (128, 64, 16, 8, 4), (64, 32, 8, 4, 2)];
    let resblocks = [(3, [1, 2]), (5, [2, 6]), (7, [3, 12])];
    let x0 = randn(&[1, 192, FRAMES]);
    let pre_w = randn(&[256, 192, 7]);
    let ups: Vec<(Tensor, usize, usize)> = stages
        .iter()
        .map(|&(ci, co, k, s, p)| (randn(&[ci, co, k]), s, p))
        .collect();
    // Small weights keep the residual sums bounded over the 18 layers.
    let rb_w: Vec<Vec<[Tensor; 2]>> = stages
        .iter()
        .map(|&(_, co, ..)| {
            let w = |k| (randn(&[co, co, k]) * 0.02).unwrap();
            resblocks.iter().map(|&(k, _)| [w(k), w(k)]).collect()
        })
        .collect();
    let post_w = randn(&[1, 32, 7]);

    type Conv1d = fn(&Tensor, &Tensor, usize, usize) -> Tensor;
    type ConvT = fn(&Tensor, &Tensor, usize, usize) -> Tensor;
    let run = |conv1d: Conv1d, conv_t: ConvT| {
        let mut x = conv1d(&x0, &pre_w, 3, 1);
        for ((w_up, stride, padding), rb) in ups.iter().zip(&rb_w) {
            x = conv_t(&x, w_up, *stride, *padding);
            let mut sum: Option<Tensor> = None;
            for (weights, &(k, dilations)) in rb.iter().zip(&resblocks) {
                let mut h = x.clone();
                for (w, d) in weights.iter().zip(dilations) {
                    h = (conv1d(&h, w, d * (k - 1) / 2, d) + &h).unwrap();
                }
                sum = Some(match sum {
                    Some(s) => (s + h).unwrap(),
                    None => h,
                });
            }
            x = (sum.unwrap() / 3.0).unwrap();
        }
        conv1d(&x, &post_w, 3, 1)
    };
    let candle_conv1d: Conv1d = |x, w, p, d| x.conv1d(w, p, 1, d, 1).unwrap();
    let candle_conv_t: ConvT = |x, w, s, p| x.conv_transpose1d(w, p, 0, s, 1, 1).unwrap();
    let fast_conv1d: Conv1d = |x, w, p, d| kernels::conv1d(x, w, None, p, d, 1).unwrap();
    let fast_conv_t: ConvT = |x, w, s, p| kernels::conv_transpose1d(x, w, None, s, p).unwrap();
    group.bench_function("candle", |b| {
        b.iter(|| black_box(run(candle_conv1d, candle_conv_t)))
    });
    group.bench_function("fast", |b| {
        b.iter(|| black_box(run(fast_conv1d, fast_conv_t)))
    });
    group.finish();
}

/// The direct kernel against per-tap matrix products on the model's shapes, each path forced:
/// decoder resblocks, flow, text encoder, and the decoder's upsamplers. They back the routing
/// rules (direct from 3 taps; transposed convolutions direct from 1024 input columns).
/// `CONV_BENCH_CLOCK=thread cargo bench --bench conv -- routes` measures thread CPU time.
fn bench_routes<M: Measurement>(c: &mut Criterion<M>) {
    let mut group = c.benchmark_group("routes");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(3));
    // (c_in, c_out, length, kernel, dilation)
    let convs = [
        (32usize, 32usize, 64256usize, 3usize, 1usize),
        (32, 32, 64256, 7, 12),
        (64, 64, 16064, 5, 6),
        (128, 128, 2008, 7, 12),
        (192, 384, 251, 5, 1),
        (192, 384, 251, 1, 1),
        (192, 256, 251, 7, 1),
        (192, 768, 103, 3, 1),
        (192, 192, 103, 1, 1),
    ];
    for (c_in, c_out, len, k, d) in convs {
        let x = randn(&[1, c_in, len]);
        let w = randn(&[c_out, c_in, k]);
        let b = randn(&[c_out]);
        let p = d * (k - 1) / 2;
        let name = format!("{c_in}-{c_out} k{k} d{d} x{len}");
        group.throughput(Throughput::Elements((c_in * c_out * k * len) as u64));
        group.bench_function(BenchmarkId::new("conv1d per-tap gemm", &name), |bench| {
            bench.iter(|| black_box(routes::conv1d_gemm(&x, &w, Some(&b), p, d, 1).unwrap()))
        });
        group.bench_function(BenchmarkId::new("conv1d direct", &name), |bench| {
            bench.iter(|| black_box(routes::conv1d_direct(&x, &w, Some(&b), p, d).unwrap()))
        });
    }
    // (c_in, c_out, length, kernel, stride)
    let upsamplers = [
        (256usize, 128usize, 251usize, 16usize, 8usize),
        (128, 64, 2008, 16, 8),
        (64, 32, 16064, 8, 4),
    ];
    for (c_in, c_out, len, k, stride) in upsamplers {
        let x = randn(&[1, c_in, len]);
        let w = randn(&[c_in, c_out, k]);
        let b = randn(&[c_out]);
        let p = (k - stride) / 2;
        let name = format!("{c_in}-{c_out} k{k} s{stride} x{len}");
        group.throughput(Throughput::Elements((c_in * c_out * k * len) as u64));
        group.bench_function(
            BenchmarkId::new("transposed per-tap gemm", &name),
            |bench| {
                bench.iter(|| {
                    black_box(routes::conv_transpose1d_gemm(&x, &w, Some(&b), stride, p).unwrap())
                })
            },
        );
        group.bench_function(BenchmarkId::new("transposed direct", &name), |bench| {
            bench.iter(|| {
                black_box(routes::conv_transpose1d_direct(&x, &w, Some(&b), stride, p).unwrap())
            })
        });
    }
    group.finish();
}

/// The direct kernel in each precision (weights packed once, outside the timing, as a loaded
/// model holds them): VITS's decoder resblocks, flow WaveNet and text encoder FFN, and
/// Kokoro's generator and decoder.
/// `cargo bench --bench conv -- precisions`.
fn bench_precisions<M: Measurement>(c: &mut Criterion<M>) {
    let mut group = c.benchmark_group("precisions");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(2));
    // (c_in, c_out, length, kernel, dilation)
    let convs = [
        (32usize, 32usize, 64256usize, 7usize, 12usize),
        (64, 64, 16064, 5, 3),
        (128, 128, 2008, 3, 1),
        (192, 384, 251, 5, 1),
        (192, 384, 251, 1, 1),
        (768, 192, 103, 3, 1),
        // Kokoro: the generator's last and first stages (2.5 s of audio), a decode block, and
        // the last stage over 4× the columns (a padded batch of four on one core).
        (128, 128, 12000, 11, 5),
        (256, 256, 2000, 7, 3),
        (128, 128, 12000, 7, 3),
        (256, 256, 2000, 11, 5),
        (128, 128, 12000, 3, 1),
        (256, 256, 2000, 3, 1),
        (1090, 1024, 100, 3, 1),
        (128, 128, 48000, 11, 5),
    ];
    for (c_in, c_out, len, k, d) in convs {
        let x = randn(&[1, c_in, len]);
        let w = (randn(&[c_out, c_in, k]) * 0.1).unwrap();
        let b = randn(&[c_out]);
        let p = d * (k - 1) / 2;
        let name = format!("{c_in}-{c_out} k{k} d{d} x{len}");
        group.throughput(Throughput::Elements((c_in * c_out * k * len) as u64));
        for precision in ["f32", "spectral", "bf16", "int8"] {
            let conv = routes::conv1d_direct_at(&w, Some(&b), p, d, precision).unwrap();
            conv(&x).unwrap();
            group.bench_function(BenchmarkId::new(precision, &name), |bench| {
                bench.iter(|| black_box(conv(&x).unwrap()))
            });
        }
    }
    group.finish();
}

/// A large square matrix product through candle (the same `gemm` crate the convolutions use):
/// the ceiling a convolution built on it can approach on this machine.
fn bench_matmul_ceiling<M: Measurement>(c: &mut Criterion<M>) {
    let mut group = c.benchmark_group("reference");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(3));
    let n = 768;
    let (a, b) = (randn(&[n, n]), randn(&[n, n]));
    group.throughput(Throughput::Elements((n * n * n) as u64));
    group.bench_function("matmul 768^3", |bench| {
        bench.iter(|| black_box(a.matmul(&b).unwrap()))
    });
    group.finish();
}

/// CPU time consumed by the calling thread, in nanoseconds.
struct ThreadCpuTime;

fn thread_cpu_nanos() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl Measurement for ThreadCpuTime {
    type Intermediate = u64;
    type Value = u64;

    fn start(&self) -> u64 {
        thread_cpu_nanos()
    }
    fn end(&self, start: u64) -> u64 {
        thread_cpu_nanos() - start
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, value: &u64) -> f64 {
        *value as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        // Same unit (nanoseconds) as wall time, so its formatting applies unchanged.
        WallTime.formatter()
    }
}

fn run_all<M: Measurement>(mut c: Criterion<M>) {
    bench_matmul_ceiling(&mut c);
    bench_conv1d(&mut c);
    bench_conv_transpose1d(&mut c);
    bench_decoder_sequence(&mut c);
    bench_routes(&mut c);
    bench_precisions(&mut c);
    c.final_summary();
}

fn main() {
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        // Single-threaded process start: no other thread reads the environment yet.
        std::env::set_var("RAYON_NUM_THREADS", "1");
    }
    let c = Criterion::default().configure_from_args();
    match std::env::var("CONV_BENCH_CLOCK").as_deref() {
        Ok("thread") => run_all(c.with_measurement(ThreadCpuTime)),
        _ => run_all(c),
    }
}
