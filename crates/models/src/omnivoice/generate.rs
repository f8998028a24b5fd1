//! Masked iterative decoding: T target frames × C codebooks start as the mask id and are
//! filled over `num_step` steps, each one forward over the conditional and unconditional rows.
//!
//! At a step, every masked position is predicted from classifier-free-guided log
//! probabilities, scored by its confidence less a penalty for later codebooks (coarse ones are
//! settled first), and the scheduled number of best-scored positions keep their prediction.
//! The schedule follows a shifted time grid (`t ↦ s·t / (1 + (s − 1)·t)`, s = 0.1): few
//! positions early, many late.
//!
//! With temperatures above 0, ids and positions are Gumbel-sampled. The uniforms come from a
//! [`Noise`] source (a generator when serving), so that the tests can replay the official
//! run's own uniforms and compare sampled frames exactly.

use candle_core::{Result, Tensor};
use rand::Rng;

use super::model::OmniVoice;

/// Where decoding's uniforms (for its Gumbel noise) come from. Every [`Rng`] is one, drawing in
/// turn and ignoring where the draw is for; a source that is not a generator (the official
/// run's recorded uniforms, in the tests) reads the uniform at that coordinate instead, since
/// the official loop draws whole tensors per step and item where ours draws per candidate.
pub trait Noise {
    /// A uniform in [0, 1).
    fn uniform(&mut self, at: Draw) -> f32;
}

impl<R: Rng + ?Sized> Noise for R {
    #[inline]
    fn uniform(&mut self, _at: Draw) -> f32 {
        self.random()
    }
}

/// What a uniform is drawn for: the official tensor's coordinate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Draw {
    pub step: usize,
    /// The prompt's index in the batch.
    pub item: usize,
    pub codebook: usize,
    /// Index among the prompt's target frames.
    pub frame: usize,
    /// The id whose log probability the noise is added to; `None` for the position's score.
    pub class: Option<usize>,
}

/// How frames are decoded; the defaults are the official ones.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoding {
    pub num_step: usize,
    /// Weight of (conditional − unconditional) log probabilities; 0 turns guidance off.
    pub guidance_scale: f32,
    pub t_shift: f32,
    /// Score taken off per codebook index.
    pub layer_penalty_factor: f32,
    /// Gumbel noise on the positions' scores (0: the best-scored always win).
    pub position_temperature: f32,
    /// Gumbel sampling among the top 10 % of ids (0: the most likely id).
    pub class_temperature: f32,
}

impl Default for Decoding {
    fn default() -> Self {
        Self {
            num_step: 32,
            guidance_scale: 2.0,
            t_shift: 0.1,
            layer_penalty_factor: 5.0,
            position_temperature: 5.0,
            class_temperature: 0.0,
        }
    }
}

/// One item to decode: the conditional row, whose last `frames` positions are the target.
pub struct Prompt {
    /// [C, L] u32; the target positions may hold anything (they start masked).
    pub ids: Tensor,
    /// [L] u8, 1 at audio positions (the target's included).
    pub audio: Tensor,
    pub frames: usize,
}

/// How many positions each step fixes, for `positions` in all: the official schedule, with
/// its arithmetic (the time grid in `f32` as torch's `linspace` builds it, differences and
/// products in `f64`), so that the counts agree exactly.
pub fn schedule(positions: usize, num_step: usize, t_shift: f32) -> Vec<usize> {
    let grid = shifted_grid(num_step, t_shift);
    let mut left = positions;
    (0..num_step)
        .map(|step| {
            let count = if step + 1 == num_step {
                left
            } else {
                let share = positions as f64 * (grid[step + 1] as f64 - grid[step] as f64);
                (share.ceil().max(0.0) as usize).min(left)
            };
            left -= count;
            count
        })
        .collect()
}

/// `linspace(0, 1, n + 1)` in `f32` (the second half counted back from the end, as torch
/// does), shifted.
fn shifted_grid(num_step: usize, shift: f32) -> Vec<f32> {
    let steps = num_step + 1;
    let step = 1.0f32 / num_step as f32;
    (0..steps)
        .map(|i| {
            let t = if i < steps / 2 {
                i as f32 * step
            } else {
                1.0 - (steps - 1 - i) as f32 * step
            };
            shift * t / (1.0 + (shift - 1.0) * t)
        })
        .collect()
}

impl OmniVoice {
    /// Decodes the target frames of every prompt together, each step one packed forward of
    /// all conditional rows and then all unconditional rows (the frames alone). Returns each
    /// prompt's frames, [C, frames] u32. The prompts draw their noise from `rng` in turn, so
    /// a prompt's frames depend on the others in the batch; [`OmniVoice::generate_each`] gives
    /// each its own generator.
    pub fn generate(
        &self,
        prompts: &[Prompt],
        decoding: &Decoding,
        rng: &mut impl Noise,
    ) -> Result<Vec<Tensor>> {
        self.decode_frames(prompts, decoding, Rngs::Shared(rng))
    }

    /// [`OmniVoice::generate`] with one generator per prompt (`rngs[i]` for `prompts[i]`), so
    /// that each prompt's frames are what it would get alone, whatever else is batched with it.
    pub fn generate_each<R: Noise>(
        &self,
        prompts: &[Prompt],
        decoding: &Decoding,
        rngs: &mut [R],
    ) -> Result<Vec<Tensor>> {
        if rngs.len() != prompts.len() {
            candle_core::bail!("{} generators for {} prompts", rngs.len(), prompts.len());
        }
        self.decode_frames(prompts, decoding, Rngs::Each(rngs))
    }

    fn decode_frames<R: Noise>(
        &self,
        prompts: &[Prompt],
        decoding: &Decoding,
        mut rngs: Rngs<'_, R>,
    ) -> Result<Vec<Tensor>> {
        let c = self.config();
        let (codebooks, vocab, mask) = (c.num_audio_codebook, c.audio_vocab_size, c.audio_mask_id);
        let device = self.device();
        // The caller waits for all the frames: the kernels may share each step's products
        // with a core no other worker computes on (as a whole-body VITS synthesis does).
        let _computing = crate::spare::computing();
        let _lending = device.is_cpu().then(crate::spare::lending);
        // Each row as host ids [C][L], so a step's choices are written in place.
        let mut rows: Vec<Vec<Vec<u32>>> = Vec::with_capacity(prompts.len());
        let mut audio: Vec<Vec<u8>> = Vec::with_capacity(prompts.len());
        for p in prompts {
            let mut ids: Vec<Vec<u32>> = p.ids.to_vec2()?;
            let len = ids.first().map_or(0, Vec::len);
            if ids.len() != codebooks || p.frames == 0 || p.frames > len {
                candle_core::bail!("a prompt must be [{codebooks}, L] with 0 < frames ≤ L");
            }
            for row in &mut ids {
                row[len - p.frames..].fill(mask);
            }
            rows.push(ids);
            audio.push(p.audio.to_vec1()?);
        }
        let schedules: Vec<Vec<usize>> = prompts
            .iter()
            .map(|p| schedule(p.frames * codebooks, decoding.num_step, decoding.t_shift))
            .collect();
        // Per step, how many positions of each prompt it fixes.
        let steps: Vec<Vec<usize>> = (0..decoding.num_step)
            .map(|step| schedules.iter().map(|s| s[step]).collect())
            .collect();
        for (step, counts) in steps.iter().enumerate() {
            // Packed: conditional rows, then each target alone.
            let mut segments = Vec::with_capacity(2 * prompts.len());
            let mut ids: Vec<Vec<u32>> = vec![Vec::new(); codebooks];
            let mut is_audio = Vec::new();
            for (row, a) in rows.iter().zip(&audio) {
                segments.push(a.len());
                for (packed, own) in ids.iter_mut().zip(row) {
                    packed.extend_from_slice(own);
                }
                is_audio.extend_from_slice(a);
            }
            for ((row, a), p) in rows.iter().zip(&audio).zip(prompts) {
                segments.push(p.frames);
                let from = a.len() - p.frames;
                for (packed, own) in ids.iter_mut().zip(row) {
                    packed.extend_from_slice(&own[from..]);
                }
                is_audio.extend_from_slice(&a[from..]);
            }
            let n = is_audio.len();
            let ids = Tensor::from_vec(ids.concat(), (codebooks, n), device)?;
            let is_audio = Tensor::from_vec(is_audio, n, device)?;
            // [C, N, V] on the host.
            let logits: Vec<Vec<Vec<f32>>> = self
                .forward(&ids, &is_audio, &segments)?
                .to_dtype(candle_core::DType::F32)?
                .to_vec3()?;
            let mut cond_start = 0;
            let mut uncond_start: usize = segments[..prompts.len()].iter().sum();
            for (i, p) in prompts.iter().enumerate() {
                let len = segments[i];
                let target = cond_start + len - p.frames;
                let count = counts[i];
                if count > 0 {
                    let frames = Frames {
                        logits: &logits,
                        cond: target,
                        uncond: uncond_start,
                        frames: p.frames,
                        vocab,
                        mask,
                    };
                    let row = &mut rows[i];
                    let mut noise = Located {
                        noise: rngs.get(i),
                        step,
                        item: i,
                    };
                    frames.fix(row, len - p.frames, count, decoding, &mut noise);
                }
                cond_start += len;
                uncond_start += p.frames;
            }
        }
        rows.iter()
            .zip(prompts)
            .map(|(row, p)| {
                let len = row[0].len();
                let frames: Vec<u32> = row
                    .iter()
                    .flat_map(|r| r[len - p.frames..].to_vec())
                    .collect();
                Tensor::from_vec(frames, (codebooks, p.frames), device)
            })
            .collect()
    }
}

/// Where each prompt's noise comes from.
enum Rngs<'a, R> {
    Shared(&'a mut R),
    Each(&'a mut [R]),
}

impl<R: Noise> Rngs<'_, R> {
    fn get(&mut self, prompt: usize) -> &mut R {
        match self {
            Rngs::Shared(rng) => rng,
            Rngs::Each(rngs) => &mut rngs[prompt],
        }
    }
}

/// One prompt's noise at one step, which completes each draw's coordinate.
struct Located<'a, R: ?Sized> {
    noise: &'a mut R,
    step: usize,
    item: usize,
}

impl<R: Noise + ?Sized> Located<'_, R> {
    /// −log(−log(u + 1e-10) + 1e-10), u uniform in [0, 1), as the official sampler draws it.
    #[inline]
    fn gumbel(&mut self, codebook: usize, frame: usize, class: Option<usize>) -> f32 {
        let u = self.noise.uniform(Draw {
            step: self.step,
            item: self.item,
            codebook,
            frame,
            class,
        });
        -(-(u + 1e-10).ln() + 1e-10).ln()
    }
}

/// One prompt's target logits within a step's packed output.
struct Frames<'a> {
    /// [C][N][V]
    logits: &'a [Vec<Vec<f32>>],
    /// First target position of the conditional and the unconditional row.
    cond: usize,
    uncond: usize,
    frames: usize,
    vocab: usize,
    mask: u32,
}

impl Frames<'_> {
    /// Fixes the `count` best-scored masked positions of `row` (whose target starts at
    /// `start`) to their predictions.
    fn fix(
        &self,
        row: &mut [Vec<u32>],
        start: usize,
        count: usize,
        d: &Decoding,
        noise: &mut Located<'_, impl Noise + ?Sized>,
    ) {
        // (score, codebook, frame, prediction) of every still-masked position.
        let mut candidates: Vec<(f32, usize, usize, u32)> = Vec::new();
        for (codebook, ids) in row.iter().enumerate() {
            for t in 0..self.frames {
                if ids[start + t] != self.mask {
                    continue;
                }
                let (prediction, confidence) = self.predict(codebook, t, d, noise);
                let mut score = confidence - codebook as f32 * d.layer_penalty_factor;
                if d.position_temperature > 0.0 {
                    score = score / d.position_temperature + noise.gumbel(codebook, t, None);
                }
                candidates.push((score, codebook, t, prediction));
            }
        }
        // Highest first; among equal scores the earlier position (codebook-major), as
        // torch's topk over the flattened scores keeps it.
        candidates.sort_by(|a, b| b.0.total_cmp(&a.0).then((a.1, a.2).cmp(&(b.1, b.2))));
        for &(_, codebook, t, prediction) in candidates.iter().take(count) {
            row[codebook][start + t] = prediction;
        }
    }

    /// The id to place at (codebook, frame) and its confidence: the guided log probability of
    /// the most likely id (the mask id excluded).
    fn predict(
        &self,
        codebook: usize,
        t: usize,
        d: &Decoding,
        noise: &mut Located<'_, impl Noise + ?Sized>,
    ) -> (u32, f32) {
        let cond = log_softmax(&self.logits[codebook][self.cond + t]);
        let mut guided = if d.guidance_scale != 0.0 {
            let uncond = log_softmax(&self.logits[codebook][self.uncond + t]);
            let mixed: Vec<f32> = cond
                .iter()
                .zip(&uncond)
                .map(|(c, u)| c + d.guidance_scale * (c - u))
                .collect();
            log_softmax(&mixed)
        } else {
            cond
        };
        guided[self.mask as usize] = f32::NEG_INFINITY;
        let (best, confidence) = argmax(&guided);
        let prediction = if d.class_temperature > 0.0 {
            // Gumbel sampling among the top 10 % of ids: the official filter sets the others
            // to −inf before adding noise to every id, so only the kept ids' uniforms matter,
            // each the one drawn at its own id.
            let keep = (0.1 * self.vocab as f64).ceil() as usize;
            let mut order: Vec<usize> = (0..guided.len()).collect();
            order.sort_by(|&a, &b| guided[b].total_cmp(&guided[a]));
            let noisy: Vec<(usize, f32)> = order[..keep]
                .iter()
                .map(|&id| {
                    let g = noise.gumbel(codebook, t, Some(id));
                    (id, guided[id] / d.class_temperature + g)
                })
                .collect();
            noisy
                .iter()
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .map_or(best, |&(id, _)| id)
        } else {
            best
        };
        (prediction as u32, confidence)
    }
}

fn log_softmax(x: &[f32]) -> Vec<f32> {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f32 = x.iter().map(|v| (v - max).exp()).sum();
    let log_sum = max + sum.ln();
    x.iter().map(|v| v - log_sum).collect()
}

/// The first index of the largest value, and the value.
fn argmax(x: &[f32]) -> (usize, f32) {
    let mut best = (0, f32::NEG_INFINITY);
    for (i, &v) in x.iter().enumerate() {
        if v > best.1 {
            best = (i, v);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_fixes_every_position_once_few_first() {
        for (positions, steps) in [(40, 6), (32, 6), (1000, 32), (8, 32)] {
            let counts = schedule(positions, steps, 0.1);
            assert_eq!(counts.len(), steps);
            assert_eq!(counts.iter().sum::<usize>(), positions);
            if positions >= 1000 {
                assert!(counts[0] < counts[steps - 2], "{counts:?}");
            }
        }
    }

    #[test]
    fn the_grid_is_the_official_one_to_the_bit() {
        // omnivoice 0.2.1's _get_time_steps(0, 1, 6, 0.1).tolist().
        let official = [
            0.0,
            0.019607843831181526,
            0.0476190522313118,
            0.09090909361839294,
            0.166666641831398,
            0.33333325386047363,
            0.9999997615814209,
        ];
        let ours: Vec<f64> = shifted_grid(6, 0.1).into_iter().map(f64::from).collect();
        assert_eq!(ours, official);
    }

    #[test]
    fn the_grid_runs_from_0_to_1_shifted_towards_0() {
        let grid = shifted_grid(4, 0.1);
        assert_eq!(grid[0], 0.0);
        // 0.1 / (1 − 0.9) in f32, as torch computes it: just under 1.
        assert!((grid[4] - 1.0).abs() < 1e-6, "{}", grid[4]);
        // t = 0.5 shifted: 0.05 / 0.55.
        assert!((grid[2] - 0.05 / 0.55).abs() < 1e-7);
    }
}
