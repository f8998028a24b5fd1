//! Windowed synthesis: the first audio of an utterance before the rest of it is computed.
//!
//! The text encoder, the duration predictor and the prior need the whole utterance (attention,
//! the monotonic expansion); the flow and the decoder, where most of the time goes, only look
//! at a bounded neighbourhood of each frame. So after [`Vits::prior`] (which draws
//! the noise once, in the same order as [`Vits::synthesize`]) the flow and the decoder run as a
//! chain of pieces — each flow step, `conv_pre`, each upsampling stage, `conv_post` — pulled by
//! the output window by window. To extend its exact output, a piece runs on the next stretch
//! of its input widened on each side by its reach (derived from its loaded layers) and keeps
//! only the centre: the zero padding at a window's edges disturbs no output farther than the
//! reach from that edge, so the centre equals whole-utterance synthesis up to float rounding.
//! Cutting the chain into pieces keeps the recomputed halo of each piece to its own reach
//! instead of the whole chain's ([`Vits::receptive_field`] states both).

use candle_core::{Result as CandleResult, Tensor};

use super::layers::Reach;
use super::model::{Prior, Vits, VitsInput};
use crate::error::ModelError;
use crate::spare;

/// What [`Vits::synthesize_windowed`] reports once it is done.
#[derive(Debug, Clone, PartialEq)]
pub struct Windowed {
    /// Samples handed to the listener.
    pub samples: usize,
    /// Frames (of `hop_length` samples) each phoneme id got.
    pub frames_per_id: Vec<usize>,
}

/// What the flow and the decoder read around each frame, in frames, from the loaded layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceptiveField {
    /// All flow steps together.
    pub flow: Reach,
    /// The decoder, `conv_pre` to `conv_post`.
    pub decoder: Reach,
    /// Flow then decoder: the halo a window would need if they ran as one block.
    pub total: Reach,
}

impl Vits {
    /// One item's audio, window by window: `on_chunk` gets the first `first_frames` frames'
    /// samples (hop per frame), then `later_frames` at a time, and finally the rest. The chunks
    /// joined are [`Vits::synthesize`]'s audio for the item (equal within float rounding).
    /// `on_chunk` returning false stops the computation (the listener is gone). Returns how
    /// many samples went to `on_chunk` and, as [`Vits::synthesize_timed`] does, how long each
    /// phoneme id lasts. Computes one item at a time (the CPU path).
    pub fn synthesize_windowed(
        &self,
        item: &VitsInput,
        first_frames: usize,
        later_frames: usize,
        on_chunk: &mut dyn FnMut(&[f32]) -> bool,
    ) -> Result<Windowed, ModelError> {
        self.synthesize_windowed_timed(item, first_frames, later_frames, &mut |_| {}, on_chunk)
    }

    /// [`synthesize_windowed`](Self::synthesize_windowed), telling `on_durations` how many
    /// frames each phoneme id got as soon as that is known, before the first chunk: word
    /// timings can then go out with the audio instead of after it.
    pub fn synthesize_windowed_timed(
        &self,
        item: &VitsInput,
        first_frames: usize,
        later_frames: usize,
        on_durations: &mut dyn FnMut(&[usize]),
        on_chunk: &mut dyn FnMut(&[f32]) -> bool,
    ) -> Result<Windowed, ModelError> {
        if first_frames == 0 || later_frames == 0 {
            return Err(ModelError::Input(format!(
                "windows need at least one frame, got {first_frames} and {later_frames}"
            )));
        }
        let _computing = spare::computing();
        // Nothing can be sent before the prior is done: its kernels may use spare cores.
        let lending = self.device.is_cpu().then(spare::lending);
        let Prior {
            z_p,
            g,
            mut durations,
            ..
        } = self.prior(std::slice::from_ref(item))?;
        drop(lending);
        on_durations(durations.first().map_or(&[], Vec::as_slice));
        let chain = self.chain(z_p, g.as_ref(), self.piece_shapes())?;
        let hop = self.config.hop_length;
        let samples = chain.stream(first_frames * hop, later_frames * hop, on_chunk)?;
        Ok(Windowed {
            samples,
            frames_per_id: durations.pop().unwrap_or_default(),
        })
    }

    /// The reach of the flow and the decoder in frames (see [`ReceptiveField`]).
    pub fn receptive_field(&self) -> ReceptiveField {
        let flow_steps = self.flow.steps();
        let shapes = self.piece_shapes();
        let frames = |pieces: &[(usize, Reach)]| {
            pieces
                .iter()
                .rev()
                .fold(Reach::default(), |after, &(f, reach)| {
                    let after = Reach {
                        left: after.left.div_ceil(f),
                        right: after.right.div_ceil(f),
                    };
                    reach.then(after)
                })
        };
        ReceptiveField {
            flow: frames(&shapes[..flow_steps]),
            decoder: frames(&shapes[flow_steps..]),
            total: frames(&shapes),
        }
    }

    /// Each piece's upsampling factor and reach, in the order the chain runs them.
    fn piece_shapes(&self) -> Vec<(usize, Reach)> {
        let flow = (0..self.flow.steps()).map(|i| (1, self.flow.step_reach(i)));
        let decoder = (0..self.decoder.pieces()).map(|i| self.decoder.piece_shape(i));
        flow.chain(decoder).collect()
    }

    /// The flow steps and the decoder pieces over the prior `z_p` [1, C, F], with the
    /// factors and reaches in `shapes` (tests shrink them).
    fn chain<'a>(
        &'a self,
        z_p: Tensor,
        g: Option<&'a Tensor>,
        shapes: Vec<(usize, Reach)>,
    ) -> CandleResult<Chain<'a>> {
        let frames = z_p.dim(2)?;
        let mut total = frames;
        let mut pieces = Vec::new();
        for (i, (upsampling, reach)) in shapes.into_iter().enumerate() {
            let run: Run<'a> = match i.checked_sub(self.flow.steps()) {
                None => Box::new(move |z: &Tensor| {
                    let mask = Tensor::ones((1, 1, z.dim(2)?), z.dtype(), z.device())?;
                    self.flow.reverse_step(i, z, &mask, g)
                }),
                Some(piece) => Box::new(move |x: &Tensor| self.decoder.run_piece(piece, x, g)),
            };
            total *= upsampling;
            pieces.push(Piece {
                upsampling,
                reach,
                run,
                out: Exact::empty(total),
            });
        }
        Ok(Chain {
            source: Exact::complete(z_p)?,
            pieces,
        })
    }
}

/// What a piece computes: its input window → its output window.
type Run<'a> = Box<dyn Fn(&Tensor) -> CandleResult<Tensor> + 'a>;

/// One piece of the chain: input positions `m` become outputs `m·upsampling ..`.
struct Piece<'a> {
    upsampling: usize,
    reach: Reach,
    run: Run<'a>,
    out: Exact,
}

/// A signal computed exactly so far: positions `from..done` of `total` along the time axis are
/// kept (earlier ones are no longer read downstream), as the segments the pieces made, so that
/// new output is not copied again when it arrives.
struct Exact {
    segments: Vec<Tensor>,
    from: usize,
    done: usize,
    total: usize,
}

impl Exact {
    fn complete(signal: Tensor) -> CandleResult<Self> {
        let total = signal.dim(2)?;
        Ok(Self {
            segments: vec![signal],
            from: 0,
            done: total,
            total,
        })
    }

    fn empty(total: usize) -> Self {
        Self {
            segments: Vec::new(),
            from: 0,
            done: 0,
            total,
        }
    }

    /// Positions `start..end` as one contiguous tensor.
    fn slice(&self, start: usize, end: usize) -> CandleResult<Tensor> {
        assert!(
            self.from <= start && end <= self.done,
            "window outside the kept signal"
        );
        let mut parts = Vec::new();
        let mut position = self.from;
        for segment in &self.segments {
            let len = segment.dim(2)?;
            let (a, b) = (start.max(position), end.min(position + len));
            if a < b {
                parts.push(segment.narrow(2, a - position, b - a)?);
            }
            position += len;
        }
        match parts.as_slice() {
            [one] => one.contiguous(),
            _ => Tensor::cat(&parts, 2)?.contiguous(),
        }
    }

    fn push(&mut self, y: Tensor) -> CandleResult<()> {
        self.done += y.dim(2)?;
        self.segments.push(y);
        Ok(())
    }

    /// Drops positions before `position`.
    fn forget_before(&mut self, position: usize) -> CandleResult<()> {
        while self.from < position.min(self.done) {
            let len = self.segments[0].dim(2)?;
            let cut = position - self.from;
            if cut >= len {
                self.segments.remove(0);
                self.from += len;
            } else {
                self.segments[0] = self.segments[0].narrow(2, cut, len - cut)?;
                self.from = position;
            }
        }
        Ok(())
    }

    /// Everything kept, as samples, and forgets it.
    fn take_all(&mut self) -> CandleResult<Vec<f32>> {
        let mut samples = Vec::with_capacity(self.done - self.from);
        for segment in self.segments.drain(..) {
            samples.extend(segment.flatten_all()?.to_vec1::<f32>()?);
        }
        self.from = self.done;
        Ok(samples)
    }
}

/// The prior, then every piece, each keeping only what its successor still reads.
struct Chain<'a> {
    source: Exact,
    pieces: Vec<Piece<'a>>,
}

impl Chain<'_> {
    /// Hands the output to `on_chunk` in chunks of `first`, then `later` samples (the last
    /// one shorter), until done or `on_chunk` returns false; returns the samples handed over.
    fn stream(
        mut self,
        first: usize,
        later: usize,
        on_chunk: &mut dyn FnMut(&[f32]) -> bool,
    ) -> CandleResult<usize> {
        let total = self.pieces.last().expect("a decoder").out.total;
        let mut emitted = 0;
        let mut window_end = first;
        while emitted < total {
            // The first window holds back the first audio, as the prior did: its kernels may
            // use spare cores too. Later ones only need to stay ahead of the listener.
            let lending = (emitted == 0).then(spare::lending);
            let audio = self.next_output(window_end.min(total))?;
            drop(lending);
            emitted += audio.len();
            if !on_chunk(&audio) {
                break;
            }
            window_end += later;
        }
        Ok(emitted)
    }

    /// All audio samples not yet returned, computed at least up to sample `upto`.
    fn next_output(&mut self, upto: usize) -> CandleResult<Vec<f32>> {
        let last = self.pieces.len() - 1;
        self.advance(last, upto)?;
        self.pieces[last].out.take_all()
    }

    fn input(&mut self, piece: usize) -> &mut Exact {
        match piece {
            0 => &mut self.source,
            i => &mut self.pieces[i - 1].out,
        }
    }

    /// Extends piece `i`'s exact output to at least `upto` (whole input positions, so up to
    /// `upsampling − 1` more), pulling its input as far as its right reach needs.
    fn advance(&mut self, i: usize, upto: usize) -> CandleResult<()> {
        let piece = &self.pieces[i];
        if piece.out.done >= upto {
            return Ok(());
        }
        let (f, reach) = (piece.upsampling, piece.reach);
        let available = self.input(i).total;
        // Input positions [a, b) make the new outputs; the window adds the halo around them.
        let a = self.pieces[i].out.done / f;
        let b = upto.div_ceil(f).min(available);
        let start = a.saturating_sub(reach.left);
        let end = (b + reach.right).min(available);
        if i > 0 {
            self.advance(i - 1, end)?;
        }
        let x = self.input(i).slice(start, end)?;
        let y = (self.pieces[i].run)(&x)?.narrow(2, (a - start) * f, (b - a) * f)?;
        self.pieces[i].out.push(y)?;
        // This piece's next window starts `reach.left` before `b`.
        self.input(i).forget_before(b.saturating_sub(reach.left))
    }
}

#[cfg(test)]
mod tests;
