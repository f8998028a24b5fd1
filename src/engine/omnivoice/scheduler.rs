//! Step-level batching: one thread steps every OmniVoice utterance in flight, whichever
//! request and voice it is for.
//!
//! A generation is 32 forwards (by default) of the whole model. Batched whole, a request that
//! arrives while another generates would wait for all of the other's steps, and two voices'
//! batches (which the batcher never mixes, since a batch is one voice's) would take turns.
//! Here each voice's batch hands its utterances to the scheduler and waits; every step is one
//! packed forward of all admitted utterances, each at its own step and with its own settings
//! ([`OmniVoice::step`]); a new one joins at the next step and a finished one is answered at
//! once. Each utterance draws from its own generator and the rows of a packed forward do not
//! mix, so its frames are the same whatever it shared its steps with.
//!
//! A step packs at most [`MAX_POSITIONS`] positions (one job alone may exceed it), so a burst
//! of long requests waits its turn at the door rather than growing one forward without bound.
//! And a job whose callers have all gone is dropped before the next step: a client that hangs
//! up stops costing forwards at once, not after the rest of its 32.

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::mpsc;
use std::sync::Arc;

use omnivoice_models::omnivoice::{Decoder, OmniVoice, Tts, Utterance};
use omnivoice_models::spare;
use rand::rngs::StdRng;

use crate::engine::Wanted;
use crate::metrics as m;

/// Most positions one step packs. A position costs about 40 KB of activations in the
/// released model's forward (hidden 1024, MLP 3072, f32), and a scored one 32 KB more of
/// logits (8 × 1025 f32), twice, as they are copied to the host: 8,192 positions, half of
/// them scored, is under 1 GB. That is eight 10-second sentences with their prompts, a full
/// batch of the batcher's.
pub const MAX_POSITIONS: usize = 8192;

type Answer = Result<Vec<Utterance<StdRng>>, String>;

/// What a job that nobody waits for any more is answered (and nobody reads).
const ABANDONED: &str = "abandoned: nobody waits for this audio any more";

/// The handle the voices decode through; dropping the last one ends the thread.
pub struct Scheduler {
    jobs: mpsc::Sender<Job>,
}

/// One caller's utterances (a round of its batch), answered together when all are done.
struct Job {
    utterances: Vec<Utterance<StdRng>>,
    reply: mpsc::Sender<Answer>,
    wanted: Wanted,
}

impl Job {
    fn positions(&self) -> usize {
        self.utterances.iter().map(Utterance::positions).sum()
    }

    fn is_done(&self) -> bool {
        self.utterances.iter().all(Utterance::is_done)
    }
}

impl Scheduler {
    /// Starts the thread that steps `tts`'s network.
    pub fn start(tts: Arc<Tts>) -> std::io::Result<Self> {
        let (jobs, incoming) = mpsc::channel();
        std::thread::Builder::new()
            .name("omnivoice-steps".into())
            .spawn(move || run(&tts, &incoming))?;
        Ok(Self { jobs })
    }

    /// The decoder for one batch, dropped between two steps once `wanted` says nobody waits.
    pub fn for_batch(&self, wanted: Wanted) -> BatchDecoder<'_> {
        BatchDecoder {
            scheduler: self,
            wanted,
        }
    }
}

/// A batch's way into the scheduler.
pub struct BatchDecoder<'a> {
    scheduler: &'a Scheduler,
    wanted: Wanted,
}

impl Decoder for BatchDecoder<'_> {
    fn finish(
        &self,
        utterances: Vec<Utterance<StdRng>>,
    ) -> candle_core::Result<Vec<Utterance<StdRng>>> {
        let stopped = || candle_core::Error::Msg("the OmniVoice scheduler has stopped".into());
        // All in at once, as jobs that each fit a step: they share steps as far as the
        // positions allow, and the rest wait at the door (a long text's later chunks).
        let mut answers = Vec::new();
        for utterances in jobs_within(utterances, MAX_POSITIONS) {
            let (reply, answer) = mpsc::channel();
            let job = Job {
                utterances,
                reply,
                wanted: self.wanted.clone(),
            };
            self.scheduler.jobs.send(job).map_err(|_| stopped())?;
            answers.push(answer);
        }
        let mut done = Vec::new();
        for answer in answers {
            let answer = answer.recv().map_err(|_| stopped())?;
            done.extend(answer.map_err(candle_core::Error::Msg)?);
        }
        Ok(done)
    }
}

/// `utterances` in order, cut into runs of at most `max_positions` positions each (one larger
/// than that alone).
fn jobs_within(
    utterances: Vec<Utterance<StdRng>>,
    max_positions: usize,
) -> Vec<Vec<Utterance<StdRng>>> {
    let mut jobs: Vec<Vec<Utterance<StdRng>>> = Vec::new();
    let mut packed = 0;
    for utterance in utterances {
        let size = utterance.positions();
        match jobs.last_mut() {
            Some(job) if packed + size <= max_positions => job.push(utterance),
            _ => {
                packed = 0;
                jobs.push(vec![utterance]);
            }
        }
        packed += size;
    }
    jobs
}

/// Steps until every handle is gone: waits while there is nothing to do, and between two
/// steps takes in whatever came meanwhile.
fn run(tts: &Tts, incoming: &mpsc::Receiver<Job>) {
    let mut steps = Steps::new(MAX_POSITIONS);
    loop {
        if steps.is_idle() {
            match incoming.recv() {
                Ok(job) => steps.queue(job),
                Err(_) => return,
            }
        }
        while let Ok(job) = incoming.try_recv() {
            steps.queue(job);
        }
        steps.step(tts.model());
    }
}

/// The scheduler's state, apart from its thread so that tests can step it by hand.
struct Steps {
    /// Jobs whose utterances are being stepped.
    active: Vec<Job>,
    /// Jobs waiting for room, first come first in.
    waiting: VecDeque<Job>,
    max_positions: usize,
}

impl Steps {
    fn new(max_positions: usize) -> Self {
        Self {
            active: Vec::new(),
            waiting: VecDeque::new(),
            max_positions,
        }
    }

    fn queue(&mut self, job: Job) {
        self.waiting.push_back(job);
    }

    fn is_idle(&self) -> bool {
        self.active.is_empty() && self.waiting.is_empty()
    }

    /// Moves waiting jobs in while the step stays within `max_positions`; a job too large for
    /// any step goes in alone.
    fn admit(&mut self) {
        let mut packed: usize = self.active.iter().map(Job::positions).sum();
        while let Some(next) = self.waiting.front() {
            let size = next.positions();
            if !self.active.is_empty() && packed + size > self.max_positions {
                break;
            }
            packed += size;
            self.active.extend(self.waiting.pop_front());
        }
    }

    /// Answers and forgets the jobs nobody waits for any more, admitted or not.
    fn drop_abandoned(&mut self) {
        let abandoned = |job: &Job| !job.wanted.still();
        let (gone, active): (Vec<Job>, Vec<Job>) = std::mem::take(&mut self.active)
            .into_iter()
            .partition(abandoned);
        self.active = active;
        let (gone_waiting, waiting): (VecDeque<Job>, VecDeque<Job>) =
            std::mem::take(&mut self.waiting)
                .into_iter()
                .partition(abandoned);
        self.waiting = waiting;
        for job in gone.into_iter().chain(gone_waiting) {
            metrics::counter!(m::REJECTED, "reason" => "abandoned_mid_generation")
                .increment(job.utterances.len() as u64);
            let _ = job.reply.send(Err(ABANDONED.into()));
        }
    }

    /// One step of every admitted utterance, in one forward; jobs now done are answered, and
    /// a failed step fails every job in it.
    fn step(&mut self, model: &OmniVoice) {
        self.drop_abandoned();
        self.admit();
        let mut batch: Vec<&mut Utterance<StdRng>> = self
            .active
            .iter_mut()
            .flat_map(|job| job.utterances.iter_mut())
            .filter(|u| !u.is_done())
            .collect();
        let size = batch.len();
        let stepped = {
            // This thread computes what callers wait for: the kernels may borrow spare cores.
            let _computing = spare::computing();
            let _lending = model.device().is_cpu().then(spare::lending);
            std::panic::catch_unwind(AssertUnwindSafe(|| model.step(&mut batch)))
        };
        if size > 0 {
            metrics::counter!(m::OMNIVOICE_STEPS).increment(1);
            metrics::histogram!(m::OMNIVOICE_STEP_UTTERANCES).record(size as f64);
        }
        let failure = match stepped {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(format!("a decoding step failed: {e}")),
            Err(panic) => {
                let message = panic
                    .downcast_ref::<&str>()
                    .copied()
                    .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                    .unwrap_or("(not a string)");
                Some(format!("a decoding step panicked: {message}"))
            }
        };
        if let Some(failure) = failure {
            tracing::error!(%failure, utterances = size, "OmniVoice step");
            for job in self.active.drain(..) {
                // The asker may be gone; nobody else is waiting for this.
                let _ = job.reply.send(Err(failure.clone()));
            }
            return;
        }
        let (done, active): (Vec<Job>, Vec<Job>) = std::mem::take(&mut self.active)
            .into_iter()
            .partition(Job::is_done);
        self.active = active;
        for job in done {
            let _ = job.reply.send(Ok(job.utterances));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use omnivoice_models::omnivoice::{Decoding, Prompt};
    use rand::SeedableRng;

    const CHECKPOINT: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crates/models/tests/fixtures/omnivoice/e2e"
    );

    fn tts() -> Tts {
        Tts::load(
            std::path::Path::new(CHECKPOINT),
            candle_core::DType::F32,
            &candle_core::Device::Cpu,
        )
        .unwrap()
    }

    /// A prompt of `text` tokens followed by `frames` target frames.
    fn prompt(tts: &Tts, text: usize, frames: usize) -> Prompt {
        let codebooks = tts.model().config().num_audio_codebook;
        let len = text + frames;
        let ids: Vec<u32> = (0..codebooks * len).map(|i| (i % 97) as u32 + 1).collect();
        let audio: Vec<u8> = (0..len).map(|p| u8::from(p >= text)).collect();
        let device = candle_core::Device::Cpu;
        Prompt {
            ids: candle_core::Tensor::from_vec(ids, (codebooks, len), &device).unwrap(),
            audio: candle_core::Tensor::from_vec(audio, len, &device).unwrap(),
            frames,
        }
    }

    fn decoding(num_step: usize) -> Decoding {
        Decoding {
            num_step,
            class_temperature: 1.0,
            ..Decoding::default()
        }
    }

    fn job(
        tts: &Tts,
        prompts: &[(usize, usize)],
        num_step: usize,
        seed: u64,
    ) -> (Job, mpsc::Receiver<Answer>) {
        let utterances = prompts
            .iter()
            .enumerate()
            .map(|(i, &(text, frames))| {
                let rng = StdRng::seed_from_u64(seed + i as u64);
                let p = prompt(tts, text, frames);
                tts.model().utterance(&p, &decoding(num_step), rng).unwrap()
            })
            .collect();
        let (reply, answer) = mpsc::channel();
        let job = Job {
            utterances,
            reply,
            wanted: Wanted::always(),
        };
        (job, answer)
    }

    fn ids(answer: Answer) -> Vec<Vec<Vec<u32>>> {
        answer
            .unwrap()
            .into_iter()
            .map(|u| {
                let (frames, _) = u.into_frames(&candle_core::Device::Cpu).unwrap();
                frames.to_vec2().unwrap()
            })
            .collect()
    }

    #[test]
    fn a_job_joins_at_the_next_step_and_is_answered_at_its_last() {
        let tts = tts();
        let model = tts.model();
        let alone = |prompts: &[(usize, usize)], steps, seed| {
            let (job, _) = job(&tts, prompts, steps, seed);
            model
                .run_to_end(job.utterances)
                .unwrap()
                .into_iter()
                .map(|u| u.into_frames(&candle_core::Device::Cpu).unwrap().0)
                .map(|f| f.to_vec2::<u32>().unwrap())
                .collect::<Vec<_>>()
        };
        let mut steps = Steps::new(MAX_POSITIONS);
        let (first, first_answer) = job(&tts, &[(5, 7), (3, 4)], 6, 10);
        let (second, second_answer) = job(&tts, &[(9, 5)], 4, 20);
        steps.queue(first);
        steps.step(model);
        steps.step(model);
        steps.queue(second);
        // The second takes its 4 steps beside the first's 3rd to 6th: both end at the 6th.
        for _ in 0..3 {
            steps.step(model);
            assert!(second_answer.try_recv().is_err());
        }
        steps.step(model);
        let second = ids(second_answer.try_recv().unwrap());
        let first = ids(first_answer.try_recv().unwrap());
        assert!(steps.is_idle());
        assert_eq!(first, alone(&[(5, 7), (3, 4)], 6, 10));
        assert_eq!(second, alone(&[(9, 5)], 4, 20));
        assert_ne!(second, alone(&[(9, 5)], 4, 21));
    }

    #[test]
    fn a_job_nobody_waits_for_is_dropped_before_the_next_step() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let tts = tts();
        let model = tts.model();
        let mut steps = Steps::new(MAX_POSITIONS);
        let listening = Arc::new(AtomicBool::new(true));
        let (mut left, left_answer) = job(&tts, &[(5, 6)], 8, 1);
        left.wanted = Wanted::new({
            let listening = listening.clone();
            move || listening.load(Ordering::SeqCst)
        });
        let (stays, stays_answer) = job(&tts, &[(4, 6)], 8, 2);
        steps.queue(left);
        steps.queue(stays);
        steps.step(model);
        steps.step(model);
        listening.store(false, Ordering::SeqCst);
        steps.step(model);
        assert_eq!(
            left_answer.try_recv().unwrap().err().as_deref(),
            Some(ABANDONED)
        );
        assert_eq!(steps.active.len(), 1);
        // The other goes on to its last step, with the frames it gets alone.
        for _ in 3..8 {
            steps.step(model);
        }
        let (alone, _) = job(&tts, &[(4, 6)], 8, 2);
        let alone = Ok(model.run_to_end(alone.utterances).unwrap());
        assert_eq!(ids(stays_answer.try_recv().unwrap()), ids(alone));
        assert!(steps.is_idle());
        // One that is given up before it was admitted never takes a step.
        let (mut late, late_answer) = job(&tts, &[(4, 6)], 8, 3);
        late.wanted = Wanted::new(|| false);
        steps.queue(late);
        steps.step(model);
        assert!(late_answer.try_recv().unwrap().is_err());
        assert!(steps.is_idle());
    }

    #[test]
    fn a_step_packs_no_more_than_its_positions_and_the_rest_wait_their_turn() {
        let tts = tts();
        let model = tts.model();
        // Each job packs (6 + 6) + 6 = 18 positions: two fit in 40, the third waits for
        // one of them to finish.
        let mut steps = Steps::new(40);
        let answers: Vec<_> = (0..3)
            .map(|i| {
                let (job, answer) = job(&tts, &[(6, 6)], 2, i);
                steps.queue(job);
                answer
            })
            .collect();
        steps.step(model);
        assert_eq!((steps.active.len(), steps.waiting.len()), (2, 1));
        steps.step(model);
        assert!(answers[0].try_recv().unwrap().is_ok());
        assert!(answers[1].try_recv().unwrap().is_ok());
        assert!(answers[2].try_recv().is_err());
        steps.step(model);
        steps.step(model);
        assert!(answers[2].try_recv().unwrap().is_ok());
        // A job larger than any step still runs, alone.
        let mut tight = Steps::new(10);
        let (job, answer) = job(&tts, &[(6, 6)], 1, 9);
        tight.queue(job);
        tight.step(model);
        assert!(answer.try_recv().unwrap().is_ok());
    }

    #[test]
    fn a_round_larger_than_a_step_goes_in_as_jobs_that_each_fit() {
        let tts = tts();
        // 18 positions each (see above): two fit in 40, then one, then one of 50 alone.
        let (round, _) = job(&tts, &[(6, 6), (6, 6), (6, 6), (30, 10)], 2, 1);
        let sizes: Vec<Vec<usize>> = jobs_within(round.utterances, 40)
            .iter()
            .map(|job| job.iter().map(Utterance::positions).collect())
            .collect();
        assert_eq!(sizes, [vec![18, 18], vec![18], vec![50]]);
    }

    #[test]
    fn the_thread_answers_concurrent_callers_with_their_own_frames() {
        let tts = Arc::new(tts());
        let scheduler = Arc::new(Scheduler::start(tts.clone()).unwrap());
        let callers: Vec<_> = (0..4u64)
            .map(|seed| {
                let (tts, scheduler) = (tts.clone(), scheduler.clone());
                std::thread::spawn(move || {
                    let utterances = || job(&tts, &[(4 + seed as usize, 5)], 5, seed).0.utterances;
                    let decoder = scheduler.for_batch(Wanted::always());
                    let frames = decoder.finish(utterances()).unwrap();
                    let alone = tts.model().run_to_end(utterances()).unwrap();
                    (frames, alone)
                })
            })
            .collect();
        for caller in callers {
            let (ours, alone) = caller.join().unwrap();
            assert_eq!(ids(Ok(ours)), ids(Ok(alone)));
        }
    }
}
