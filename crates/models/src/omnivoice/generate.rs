//! Masked iterative decoding: T target frames × C codebooks start as the mask id and are
//! filled over `num_step` steps, each one forward over the conditional and (for guidance)
//! unconditional rows.
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

use std::cell::RefCell;

use candle_core::{Result, Tensor};
use rand::rngs::StdRng;
use rand::Rng;
use rayon::prelude::*;

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

/// One prompt being decoded: its row, how far through its schedule it is, and its noise.
/// Utterances step independently: [`OmniVoice::step`] advances any set of them by one step
/// each, in one packed forward, whatever step each is at, so a server can let a new one join
/// the others between two steps and hand back each as soon as it is done.
pub struct Utterance<R> {
    /// [C][L] host ids; the target's masked positions are filled in place step by step.
    ids: Vec<Vec<u32>>,
    /// [L], 1 at audio positions.
    audio: Vec<u8>,
    frames: usize,
    /// Positions to fix at each step.
    schedule: Vec<usize>,
    /// Steps taken.
    step: usize,
    decoding: Decoding,
    noise: R,
    /// The prompt's index in its [`OmniVoice::generate`] call: where replayed noise is read.
    item: usize,
}

impl<R> Utterance<R> {
    /// The target frames of its unconditional row: none without guidance, whose mix would
    /// weigh them by 0 (the official loop computes them all the same).
    fn unconditional_frames(&self) -> usize {
        if self.decoding.guidance_scale != 0.0 {
            self.frames
        } else {
            0
        }
    }
}

impl<R: Noise> Utterance<R> {
    /// Whether every step has been taken.
    pub fn is_done(&self) -> bool {
        self.step == self.schedule.len()
    }

    /// Positions it adds to a step's packed forward: its conditional row and, for guidance,
    /// its target again.
    pub fn positions(&self) -> usize {
        self.audio.len() + self.unconditional_frames()
    }

    /// Its frames, [C, frames] u32 (mask ids where no step has fixed one yet), and its noise
    /// source, to go on drawing from.
    pub fn into_frames(self, device: &candle_core::Device) -> Result<(Tensor, R)> {
        let len = self.audio.len();
        let frames: Vec<u32> = self
            .ids
            .iter()
            .flat_map(|row| row[len - self.frames..].iter().copied())
            .collect();
        let codebooks = self.ids.len();
        let frames = Tensor::from_vec(frames, (codebooks, self.frames), device)?;
        Ok((frames, self.noise))
    }
}

/// Decodes utterances to their last step: the model itself, one step after another, or a
/// server's scheduler that steps them together with others in flight.
pub trait Decoder {
    fn finish(&self, utterances: Vec<Utterance<StdRng>>) -> Result<Vec<Utterance<StdRng>>>;
}

impl Decoder for OmniVoice {
    fn finish(&self, utterances: Vec<Utterance<StdRng>>) -> Result<Vec<Utterance<StdRng>>> {
        self.run_to_end(utterances)
    }
}

impl OmniVoice {
    /// Decodes the target frames of every prompt together, each step one packed forward of
    /// all conditional rows and then the guided ones' unconditional rows (the frames alone). Returns each
    /// prompt's frames, [C, frames] u32. The prompts draw their noise from `rng` in turn, so
    /// a prompt's frames depend on the others in the batch; [`OmniVoice::utterance`]s with
    /// generators of their own do not.
    pub fn generate(
        &self,
        prompts: &[Prompt],
        decoding: &Decoding,
        rng: &mut impl Noise,
    ) -> Result<Vec<Tensor>> {
        let shared = RefCell::new(rng);
        let utterances = prompts
            .iter()
            .enumerate()
            .map(|(item, p)| self.utterance_at(p, decoding, Shared(&shared), item))
            .collect::<Result<Vec<_>>>()?;
        self.frames_of(self.run_to_end(utterances)?)
    }

    /// `prompt`'s target, all masked, to be decoded as `decoding` says with `noise`.
    pub fn utterance<R: Noise>(
        &self,
        prompt: &Prompt,
        decoding: &Decoding,
        noise: R,
    ) -> Result<Utterance<R>> {
        self.utterance_at(prompt, decoding, noise, 0)
    }

    fn utterance_at<R: Noise>(
        &self,
        prompt: &Prompt,
        decoding: &Decoding,
        noise: R,
        item: usize,
    ) -> Result<Utterance<R>> {
        let c = self.config();
        let (codebooks, mask) = (c.num_audio_codebook, c.audio_mask_id);
        let mut ids: Vec<Vec<u32>> = prompt.ids.to_vec2()?;
        let len = ids.first().map_or(0, Vec::len);
        let frames = prompt.frames;
        if ids.len() != codebooks || frames == 0 || frames > len {
            candle_core::bail!("a prompt must be [{codebooks}, L] with 0 < frames ≤ L");
        }
        let audio: Vec<u8> = prompt.audio.to_vec1()?;
        if audio.len() != len {
            candle_core::bail!("a prompt's audio flags must be [{len}]");
        }
        for row in &mut ids {
            row[len - frames..].fill(mask);
        }
        Ok(Utterance {
            ids,
            audio,
            frames,
            schedule: schedule(frames * codebooks, decoding.num_step, decoding.t_shift),
            step: 0,
            decoding: decoding.clone(),
            noise,
            item,
        })
    }

    /// Steps `utterances` together until each has taken its last step.
    pub fn run_to_end<R: Noise>(
        &self,
        mut utterances: Vec<Utterance<R>>,
    ) -> Result<Vec<Utterance<R>>> {
        // The caller waits for all the frames: the kernels may share each step's products
        // with a core no other worker computes on (as a whole-body VITS synthesis does).
        let _computing = crate::spare::computing();
        let _lending = self.device().is_cpu().then(crate::spare::lending);
        loop {
            let mut pending: Vec<&mut Utterance<R>> =
                utterances.iter_mut().filter(|u| !u.is_done()).collect();
            if pending.is_empty() {
                return Ok(utterances);
            }
            self.step(&mut pending)?;
        }
    }

    fn frames_of<R: Noise>(&self, utterances: Vec<Utterance<R>>) -> Result<Vec<Tensor>> {
        utterances
            .into_iter()
            .map(|u| Ok(u.into_frames(self.device())?.0))
            .collect()
    }

    /// One step of every utterance in `batch` that is not done, each at its own step: one
    /// packed forward of their conditional rows and then the guided ones' unconditional rows
    /// (the targets alone), the audio head read at the targets only, then each fixes its
    /// scheduled number of positions.
    pub fn step<R: Noise>(&self, batch: &mut [&mut Utterance<R>]) -> Result<()> {
        let mut batch: Vec<&mut Utterance<R>> = batch
            .iter_mut()
            .filter(|u| !u.is_done())
            .map(|u| &mut **u)
            .collect();
        if batch.is_empty() {
            return Ok(());
        }
        let c = self.config();
        let (codebooks, vocab, mask) = (c.num_audio_codebook, c.audio_vocab_size, c.audio_mask_id);
        let device = self.device();
        // Packed: every conditional row, then every target alone.
        let mut segments = Vec::with_capacity(2 * batch.len());
        let mut ids: Vec<Vec<u32>> = vec![Vec::new(); codebooks];
        let mut is_audio = Vec::new();
        let mut cond_at = Vec::with_capacity(batch.len());
        for u in &batch {
            cond_at.push(is_audio.len() + u.audio.len() - u.frames);
            segments.push(u.audio.len());
            for (packed, own) in ids.iter_mut().zip(&u.ids) {
                packed.extend_from_slice(own);
            }
            is_audio.extend_from_slice(&u.audio);
        }
        // The positions whose logits are scored: each utterance's conditional target, then
        // its unconditional one if it is guided.
        let mut read = Vec::new();
        for (u, &cond) in batch.iter().zip(&cond_at) {
            read.extend((cond..cond + u.frames).map(|p| p as u32));
            let frames = u.unconditional_frames();
            if frames == 0 {
                continue;
            }
            let uncond = is_audio.len();
            segments.push(frames);
            let from = u.audio.len() - frames;
            for (packed, own) in ids.iter_mut().zip(&u.ids) {
                packed.extend_from_slice(&own[from..]);
            }
            is_audio.extend_from_slice(&u.audio[from..]);
            read.extend((uncond..uncond + frames).map(|p| p as u32));
        }
        let n = is_audio.len();
        let rows = read.len();
        let ids = Tensor::from_vec(ids.concat(), (codebooks, n), device)?;
        let is_audio = Tensor::from_vec(is_audio, n, device)?;
        let read = Tensor::from_vec(read, rows, device)?;
        let logits = self
            .forward_at(&ids, &is_audio, &segments, &read)?
            .to_dtype(candle_core::DType::F32)?;
        // Greedy steps off the CPU are scored on the device: the host then receives two
        // numbers per position instead of [C, rows, V] (a quarter of a gigabyte for 32
        // utterances of 5 s, whose copy and scoring would otherwise be most of the step).
        let greedy = batch.iter().all(|u| u.decoding.class_temperature <= 0.0);
        let (logits, best) = if greedy && self.scores_on_device() {
            (Vec::new(), Some(best_on_device(&logits, &batch, mask)?))
        } else {
            // [C, rows, V] on the host, flat.
            (logits.flatten_all()?.to_vec1()?, None)
        };
        // This utterance's first row in the logits, and in the greedy choices (its
        // conditional target's).
        let (mut base, mut target) = (0, 0);
        for u in batch.iter_mut() {
            let count = u.schedule[u.step];
            let unconditional = u.unconditional_frames();
            if count > 0 {
                let frames = Frames {
                    logits: &logits,
                    best: best.as_ref().map(|b| (b, target)),
                    rows,
                    cond: base,
                    // Unguided, the conditional rows again: the mix never reads them.
                    uncond: base + unconditional,
                    frames: u.frames,
                    vocab,
                    mask,
                };
                let start = u.audio.len() - u.frames;
                let mut noise = Located {
                    noise: &mut u.noise,
                    step: u.step,
                    item: u.item,
                };
                frames.fix(&mut u.ids, start, count, &u.decoding, &mut noise);
            }
            u.step += 1;
            base += u.frames + unconditional;
            target += u.frames;
        }
        Ok(())
    }
}

/// One generator drawn from by every prompt of a [`OmniVoice::generate`] call, in turn.
struct Shared<'a, N>(&'a RefCell<N>);

impl<N: Noise> Noise for Shared<'_, &mut N> {
    fn uniform(&mut self, at: Draw) -> f32 {
        self.0.borrow_mut().uniform(at)
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

/// Each target position's greedy choice, computed on the device: [C, R] each, R the step's
/// target rows (each utterance's frames, one utterance after another).
struct Best {
    ids: Vec<Vec<u32>>,
    confidence: Vec<Vec<f32>>,
}

/// [`Frames::guided`]'s most likely id and its log probability at every target position of
/// a step, as tensor operations where the logits are ([C, rows, V], each utterance's
/// conditional target rows, then its unconditional ones if it is guided).
fn best_on_device<R>(logits: &Tensor, batch: &[&mut Utterance<R>], mask: u32) -> Result<Best> {
    use candle_core::D;
    use candle_nn::ops::log_softmax;
    let (device, vocab) = (logits.device(), logits.dim(2)?);
    let (mut cond, mut uncond, mut scale) = (Vec::new(), Vec::new(), Vec::new());
    let mut base = 0;
    for u in batch {
        let (frames, unconditional) = (u.frames as u32, u.unconditional_frames() as u32);
        cond.extend(base..base + frames);
        // Unguided (scale 0), the conditional rows stand in for the missing ones.
        let from = if unconditional == 0 {
            base
        } else {
            base + frames
        };
        uncond.extend(from..from + frames);
        scale.extend(std::iter::repeat_n(u.decoding.guidance_scale, u.frames));
        base += frames + unconditional;
    }
    let r = cond.len();
    let rows = |at: Vec<u32>| -> Result<Tensor> {
        log_softmax(
            &logits.index_select(&Tensor::from_vec(at, r, device)?, 1)?,
            D::Minus1,
        )
    };
    let (cond, uncond) = (rows(cond)?, rows(uncond)?);
    // cond + scale · (cond − uncond), each utterance at its own scale.
    let scale = Tensor::from_vec(scale, (1, r, 1), device)?;
    let mixed = (&cond + (&cond - &uncond)?.broadcast_mul(&scale)?)?;
    let mut never = vec![0f32; vocab];
    never[mask as usize] = f32::NEG_INFINITY;
    let guided =
        log_softmax(&mixed, D::Minus1)?.broadcast_add(&Tensor::from_vec(never, vocab, device)?)?;
    Ok(Best {
        ids: guided.argmax(D::Minus1)?.to_vec2()?,
        confidence: guided.max(D::Minus1)?.to_vec2()?,
    })
}

/// One prompt's target logits within a step's output.
struct Frames<'a> {
    /// [C, rows, V], flat; empty where the step was scored on the device.
    logits: &'a [f32],
    /// The step's greedy choices scored on the device, and this prompt's first row in them.
    best: Option<(&'a Best, usize)>,
    rows: usize,
    /// The first row of the conditional and of the unconditional target.
    cond: usize,
    uncond: usize,
    frames: usize,
    vocab: usize,
    mask: u32,
}

impl Frames<'_> {
    /// The logits of `codebook` at row `row`.
    fn row(&self, codebook: usize, row: usize) -> &[f32] {
        let at = (codebook * self.rows + row) * self.vocab;
        &self.logits[at..at + self.vocab]
    }

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
        // Every still-masked position, codebook-major: the order the noise is drawn in.
        let masked: Vec<(usize, usize)> = row
            .iter()
            .enumerate()
            .flat_map(|(codebook, ids)| {
                (0..self.frames)
                    .filter(move |&t| ids[start + t] == self.mask)
                    .map(move |t| (codebook, t))
            })
            .collect();
        // The guided distributions are nearly all of the host's work in a step (two log
        // softmaxes over the vocabulary per position): greedy predictions draw no noise, so
        // they are computed on every core, then scored in order below.
        let greedy: Option<Vec<(usize, f32)>> = match self.best {
            Some((best, at)) => Some(
                masked
                    .iter()
                    .map(|&(c, t)| (best.ids[c][at + t] as usize, best.confidence[c][at + t]))
                    .collect(),
            ),
            None => (d.class_temperature <= 0.0).then(|| {
                masked
                    .par_iter()
                    .map(|&(codebook, t)| argmax(&self.guided(codebook, t, d)))
                    .collect()
            }),
        };
        // (score, codebook, frame, prediction) of every still-masked position.
        let mut candidates: Vec<(f32, usize, usize, u32)> = Vec::with_capacity(masked.len());
        for (i, &(codebook, t)) in masked.iter().enumerate() {
            let (prediction, confidence) = match &greedy {
                Some(greedy) => (greedy[i].0 as u32, greedy[i].1),
                None => self.predict(codebook, t, d, noise),
            };
            let mut score = confidence - codebook as f32 * d.layer_penalty_factor;
            if d.position_temperature > 0.0 {
                score = score / d.position_temperature + noise.gumbel(codebook, t, None);
            }
            candidates.push((score, codebook, t, prediction));
        }
        // Highest first; among equal scores the earlier position (codebook-major), as
        // torch's topk over the flattened scores keeps it.
        candidates.sort_by(|a, b| b.0.total_cmp(&a.0).then((a.1, a.2).cmp(&(b.1, b.2))));
        for &(_, codebook, t, prediction) in candidates.iter().take(count) {
            row[codebook][start + t] = prediction;
        }
    }

    /// The guided log probabilities at (codebook, frame), the mask id's −∞.
    fn guided(&self, codebook: usize, t: usize, d: &Decoding) -> Vec<f32> {
        let cond = log_softmax(self.row(codebook, self.cond + t));
        let mut guided = if d.guidance_scale != 0.0 {
            let uncond = log_softmax(self.row(codebook, self.uncond + t));
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
        guided
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
        let guided = self.guided(codebook, t, d);
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
