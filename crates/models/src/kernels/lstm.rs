//! A bidirectional single-layer LSTM over one sequence, fused: the recurrences that candle's
//! tensor ops would run as a dozen small kernels and allocations per step run as one loop.
//!
//! The input projection of every step and both directions is one matrix product
//! (`[T, in] · [in, 8H]`), biases folded in; each step then adds the direction's recurrent
//! product (`[4H, H] · h`) and the gate arithmetic, in place. Weights are in ONNX `LSTM`
//! layout and gate order (i, o, f, c), which is what the Kokoro weights come in; `H` is the
//! hidden size per direction.
//!
//! Runs with `f32` accumulation and exact `exp`/`tanh`: an LSTM feeds its own error back at
//! every step, and the models' durations are rounded from its output. The two directions are
//! independent, so a spare core ([`crate::spare`]) takes one of them. Tensors on other
//! devices are computed here on the CPU and moved back.

use candle_core::{bail, DType, Device, Result, Tensor};

use super::gemm::product;
use super::rows::as_uninit;
use super::tensor::with_contiguous_f32;
use crate::spare::{self, SharedOut};

/// One bidirectional LSTM layer's parameters, prepared for [`BiLstm::forward`].
#[derive(Debug, Clone)]
pub struct BiLstm {
    input: usize,
    hidden: usize,
    /// `[in, 8H]`: forward then backward direction's `W` (ONNX `[2, 4H, in]`) transposed, so
    /// that the input projection reads it row by row: read in ONNX's layout, gemm gathered
    /// it with strides on every call, 20 % of Kokoro's prosody predictor.
    w_t: Vec<f32>,
    /// `[2, 4H, H]`.
    r: Vec<f32>,
    /// `[8H]`: `Wb + Rb` per direction.
    bias: Vec<f32>,
}

impl BiLstm {
    /// From ONNX `LSTM` tensors: `w` `[2, 4H, in]`, `r` `[2, 4H, H]`, `b` `[2, 8H]` (`Wb` then
    /// `Rb` per direction), gate order i, o, f, c.
    pub fn new(w: &Tensor, r: &Tensor, b: &Tensor) -> Result<Self> {
        let (dirs, gates, input) = w.dims3()?;
        let hidden = gates / 4;
        if dirs != 2 || gates != 4 * hidden || hidden == 0 {
            bail!("LSTM W must be [2, 4H, in], got {:?}", w.dims());
        }
        if r.dims() != [2, 4 * hidden, hidden] {
            bail!(
                "LSTM R must be [2, {}, {hidden}], got {:?}",
                4 * hidden,
                r.dims()
            );
        }
        if b.dims() != [2, 8 * hidden] {
            bail!("LSTM B must be [2, {}], got {:?}", 8 * hidden, b.dims());
        }
        let host = |t: &Tensor| -> Result<Vec<f32>> {
            t.to_device(&Device::Cpu)?
                .to_dtype(DType::F32)?
                .flatten_all()?
                .to_vec1::<f32>()
        };
        let b = host(b)?;
        let g = 4 * hidden;
        let bias = (0..2)
            .flat_map(|d| {
                let row = &b[d * 2 * g..(d + 1) * 2 * g];
                (0..g).map(move |i| row[i] + row[g + i])
            })
            .collect();
        Ok(Self {
            input,
            hidden,
            w_t: host(&w.reshape((8 * hidden, input))?.t()?.contiguous()?)?,
            r: host(r)?,
            bias,
        })
    }

    pub fn input_size(&self) -> usize {
        self.input
    }

    pub fn hidden_size(&self) -> usize {
        self.hidden
    }

    /// `x` `[T, in]` → `[T, 2H]`: each step's forward hidden state, then its backward one
    /// (the backward direction reads the sequence from its end), from zero initial states.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (steps, input) = x.dims2()?;
        if input != self.input {
            bail!(
                "LSTM input has {input} features, the layer takes {}",
                self.input
            );
        }
        let device = x.device().clone();
        let host = x.to_device(&Device::Cpu)?.to_dtype(DType::F32)?;
        let y = with_contiguous_f32(&host, |x| self.run(x, steps))?;
        Tensor::from_vec(y, (steps, 2 * self.hidden), &Device::Cpu)?.to_device(&device)
    }

    /// The recurrence over row-major `x` `[steps, in]`.
    fn run(&self, x: &[f32], steps: usize) -> Vec<f32> {
        let h = self.hidden;
        let g = 4 * h;
        // Input projection for all steps, both directions: xp[t] = W · x[t] + bias, [T, 8H].
        let mut xp: Vec<f32> = (0..steps).flat_map(|_| self.bias.iter().copied()).collect();
        if steps > 0 {
            // SAFETY: dst xp is [steps, 8H] row-major, lhs x is [steps, in] row-major, rhs is
            // W^T [in, 8H] row-major; each slice holds exactly that extent and xp is its own
            // allocation.
            unsafe {
                product(
                    (steps, 2 * g, self.input),
                    (xp.as_mut_ptr(), 1, 2 * g),
                    true,
                    (x.as_ptr(), 1, self.input),
                    (self.w_t.as_ptr(), 1, 2 * g),
                );
            }
        }
        let mut y = vec![0f32; steps * 2 * h];
        let out = SharedOut::new(as_uninit(&mut y));
        // The two directions never read each other's states, so a spare core runs one of them
        // whole: no hand-over per step.
        spare::in_parts(2, 1, steps * 2 * g * h, |directions| {
            for d in directions {
                self.direction(d, &xp, steps, out);
            }
        });
        y
    }

    /// Direction `d`'s recurrence (0 forward, 1 backward, which reads the sequence from its
    /// end) over the input projections `xp` `[steps, 8H]`, into its half of each row of `out`
    /// `[steps, 2H]`.
    fn direction(&self, d: usize, xp: &[f32], steps: usize, out: SharedOut<'_>) {
        let h = self.hidden;
        let g = 4 * h;
        let r = &self.r[d * g * h..(d + 1) * g * h];
        let mut state = State::new(h);
        let mut gates = vec![0f32; g];
        for s in 0..steps {
            let t = if d == 0 { s } else { steps - 1 - s };
            gates.copy_from_slice(&xp[t * 2 * g + d * g..][..g]);
            matvec_add(&mut gates, r, &state.h);
            state.update(&gates);
            // SAFETY: `out` is [steps, 2H]; row t's half d is written by this direction only,
            // and `state.h` is its own allocation.
            unsafe {
                std::ptr::copy_nonoverlapping(state.h.as_ptr(), out.get().add(t * 2 * h + d * h), h)
            };
        }
    }
}

/// One direction's hidden and cell state.
struct State {
    h: Vec<f32>,
    c: Vec<f32>,
}

impl State {
    fn new(hidden: usize) -> Self {
        Self {
            h: vec![0.0; hidden],
            c: vec![0.0; hidden],
        }
    }

    /// The gate arithmetic on pre-activations `z` `[4H]` (i, o, f, c).
    fn update(&mut self, z: &[f32]) {
        let h = self.h.len();
        let (zi, rest) = z.split_at(h);
        let (zo, rest) = rest.split_at(h);
        let (zf, zc) = rest.split_at(h);
        for j in 0..h {
            let i = sigmoid(zi[j]);
            let o = sigmoid(zo[j]);
            let f = sigmoid(zf[j]);
            let c = f * self.c[j] + i * zc[j].tanh();
            self.c[j] = c;
            self.h[j] = o * c.tanh();
        }
    }
}

/// `y += A · x` for row-major `A` `[y.len(), x.len()]`, with the widest vectors this CPU has.
/// A matrix-vector product is all the recurrence is, and a general matrix-product routine
/// spends more on packing a 1-column operand than on the arithmetic.
fn matvec_add(y: &mut [f32], a: &[f32], x: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2,fma")]
        fn wide(y: &mut [f32], a: &[f32], x: &[f32]) {
            matvec_add_slices(y, a, x)
        }
        if super::isa::avx2_fma() {
            // SAFETY: the CPU has AVX2 and FMA.
            return unsafe { wide(y, a, x) };
        }
    }
    matvec_add_slices(y, a, x)
}

/// Lanes summed separately: eight independent sums per row are what lets the compiler keep
/// them in one vector register (a single running sum would fix the order and stay scalar).
const LANES: usize = 8;

#[inline(always)]
fn matvec_add_slices(y: &mut [f32], a: &[f32], x: &[f32]) {
    let k = x.len();
    assert_eq!(a.len(), y.len() * k);
    let body = k - k % LANES;
    for (yi, row) in y.iter_mut().zip(a.chunks_exact(k)) {
        let mut acc = [0f32; LANES];
        for (rc, xc) in row[..body]
            .chunks_exact(LANES)
            .zip(x[..body].chunks_exact(LANES))
        {
            for j in 0..LANES {
                acc[j] += rc[j] * xc[j];
            }
        }
        let mut sum = acc.iter().sum::<f32>();
        for (r, v) in row[body..].iter().zip(&x[body..]) {
            sum += r * v;
        }
        *yi += sum;
    }
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A direct transcription of the ONNX LSTM equations, one direction at a time.
    fn reference(
        x: &[f32],
        steps: usize,
        input: usize,
        w: &[f32],
        r: &[f32],
        b: &[f32],
        hidden: usize,
    ) -> Vec<f32> {
        let g = 4 * hidden;
        let mut y = vec![0f32; steps * 2 * hidden];
        for d in 0..2 {
            let (mut h, mut c) = (vec![0f32; hidden], vec![0f32; hidden]);
            let order: Vec<usize> = if d == 0 {
                (0..steps).collect()
            } else {
                (0..steps).rev().collect()
            };
            for t in order {
                let mut z = vec![0f32; g];
                for (n, zn) in z.iter_mut().enumerate() {
                    let mut acc = b[d * 2 * g + n] + b[d * 2 * g + g + n];
                    for k in 0..input {
                        acc += w[(d * g + n) * input + k] * x[t * input + k];
                    }
                    for k in 0..hidden {
                        acc += r[(d * g + n) * hidden + k] * h[k];
                    }
                    *zn = acc;
                }
                for j in 0..hidden {
                    let i = sigmoid(z[j]);
                    let o = sigmoid(z[hidden + j]);
                    let f = sigmoid(z[2 * hidden + j]);
                    c[j] = f * c[j] + i * z[3 * hidden + j].tanh();
                    h[j] = o * c[j].tanh();
                }
                y[t * 2 * hidden + d * hidden..t * 2 * hidden + (d + 1) * hidden]
                    .copy_from_slice(&h);
            }
        }
        y
    }

    fn pseudo_random(n: usize, seed: u32, scale: f32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s as f32 / u32::MAX as f32 - 0.5) * 2.0 * scale
            })
            .collect()
    }

    #[test]
    fn fused_recurrence_matches_the_equations() {
        let (steps, input, hidden) = (7, 5, 3);
        let x = pseudo_random(steps * input, 1, 1.0);
        let w = pseudo_random(2 * 4 * hidden * input, 2, 0.7);
        let r = pseudo_random(2 * 4 * hidden * hidden, 3, 0.7);
        let b = pseudo_random(2 * 8 * hidden, 4, 0.3);
        let dev = Device::Cpu;
        let lstm = BiLstm::new(
            &Tensor::from_vec(w.clone(), (2, 4 * hidden, input), &dev).unwrap(),
            &Tensor::from_vec(r.clone(), (2, 4 * hidden, hidden), &dev).unwrap(),
            &Tensor::from_vec(b.clone(), (2, 8 * hidden), &dev).unwrap(),
        )
        .unwrap();
        let y = lstm
            .forward(&Tensor::from_vec(x.clone(), (steps, input), &dev).unwrap())
            .unwrap();
        assert_eq!(y.dims(), [steps, 2 * hidden]);
        let y = y.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let expected = reference(&x, steps, input, &w, &r, &b, hidden);
        for (a, e) in y.iter().zip(&expected) {
            assert!((a - e).abs() < 1e-5, "{a} vs {e}");
        }
        let empty = lstm
            .forward(&Tensor::zeros((0, input), DType::F32, &dev).unwrap())
            .unwrap();
        assert_eq!(empty.dims(), [0, 2 * hidden]);
    }

    /// With a spare core each direction runs on its own thread: the same output, bit for bit,
    /// as on one, on a sequence large enough to be shared.
    #[test]
    fn directions_on_two_cores_match_one() {
        let (steps, input, hidden) = (40, 16, 128);
        let dev = Device::Cpu;
        let lstm = BiLstm::new(
            &Tensor::from_vec(
                pseudo_random(8 * hidden * input, 5, 0.3),
                (2, 4 * hidden, input),
                &dev,
            )
            .unwrap(),
            &Tensor::from_vec(
                pseudo_random(8 * hidden * hidden, 6, 0.1),
                (2, 4 * hidden, hidden),
                &dev,
            )
            .unwrap(),
            &Tensor::from_vec(pseudo_random(16 * hidden, 7, 0.3), (2, 8 * hidden), &dev).unwrap(),
        )
        .unwrap();
        assert!(steps * 8 * hidden * hidden >= crate::spare::MIN_SPLIT_WORK);
        let x =
            Tensor::from_vec(pseudo_random(steps * input, 8, 1.0), (steps, input), &dev).unwrap();
        let run = || {
            lstm.forward(&x)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap()
        };
        let alone = run();
        let shared = {
            let _lending = crate::spare::lending_always();
            run()
        };
        assert_eq!(alone, shared);
        assert!(alone.iter().all(|v| v.is_finite() && v.abs() < 1.0));
    }

    /// onnxruntime's own `LSTM` op (`tests/fixtures/kokoro/lstm.npz`, from
    /// `scripts/kokoro_reference.py`): x `[T, 1, in]`, y `[T, 2, 1, H]`.
    #[test]
    fn matches_onnxruntime() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/kokoro/lstm.npz"
        );
        let arrays = Tensor::read_npz(path).unwrap();
        let get = |k: &str| arrays.iter().find(|(n, _)| n == k).unwrap().1.clone();
        let lstm = BiLstm::new(&get("w"), &get("r"), &get("b")).unwrap();
        let x = get("x");
        let (steps, _, input) = x.dims3().unwrap();
        let y = lstm.forward(&x.reshape((steps, input)).unwrap()).unwrap();
        let expected = get("y").reshape((steps, 2 * lstm.hidden_size())).unwrap();
        let diff = (y - expected).unwrap().abs().unwrap().max_all().unwrap();
        let diff = diff.to_scalar::<f32>().unwrap();
        eprintln!("BiLstm vs onnxruntime LSTM: max |diff| {diff:.2e}");
        assert!(diff < 1e-5, "{diff}");
    }

    #[test]
    fn refuses_mismatched_shapes() {
        let dev = Device::Cpu;
        let z = |s: &[usize]| Tensor::zeros(s, DType::F32, &dev).unwrap();
        assert!(BiLstm::new(&z(&[2, 8, 3]), &z(&[2, 8, 3]), &z(&[2, 16])).is_err());
        let lstm = BiLstm::new(&z(&[2, 8, 3]), &z(&[2, 8, 2]), &z(&[2, 16])).unwrap();
        assert!(lstm.forward(&z(&[4, 2])).is_err());
    }
}
