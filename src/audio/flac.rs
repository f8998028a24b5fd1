//! Lossless FLAC output through the pure-Rust `flacenc`.
//!
//! `flacenc` encodes a whole source at once, but it also exposes its per-frame encoder, which is
//! all a stream needs: the `fLaC` marker and STREAMINFO go out first, then every complete
//! fixed-size block is encoded as a frame the moment it exists, and leftover samples wait for the
//! next push. A streamed STREAMINFO cannot know the length, frame sizes or MD5, so it leaves them
//! zero ("unknown"), which the format allows; the whole-file [`flac_file`] fills them in.

use flacenc::bitsink::MemSink;
use flacenc::component::{BitRepr, Stream};
use flacenc::error::{Verified, Verify};
use flacenc::source::{Fill, FrameBuf, MemSource};

use super::resample::StreamResampler;
use super::{to_i16, AudioError, AudioFormat, StreamEncoder};

/// The reference encoder's default block size: 4096 samples (186 ms at 22050 Hz).
const BLOCK_SIZE: usize = 4096;
const BITS_PER_SAMPLE: usize = 16;
const CHANNELS: usize = 1;

fn flac_error(err: impl std::fmt::Display) -> AudioError {
    AudioError::encoder(AudioFormat::Flac, err)
}

fn encoder_config() -> Result<Verified<flacenc::config::Encoder>, AudioError> {
    let mut config = flacenc::config::Encoder::default();
    config.block_size = BLOCK_SIZE;
    // Requests are already encoded in parallel; threads per request would only add overhead.
    config.multithread = false;
    config.into_verified().map_err(|(_, err)| flac_error(err))
}

fn to_bytes<T: BitRepr>(component: &T) -> Result<Vec<u8>, AudioError> {
    let mut sink = MemSink::<u8>::with_capacity(component.count_bits());
    component.write(&mut sink).map_err(flac_error)?;
    Ok(sink.into_inner())
}

pub(super) struct FlacStreamEncoder {
    config: Verified<flacenc::config::Encoder>,
    stream: Stream,
    resampler: StreamResampler,
    framebuf: FrameBuf,
    pending: Vec<i32>,
    frame_number: usize,
    header_sent: bool,
}

impl FlacStreamEncoder {
    pub(super) fn new(input_rate: u32, output_rate: u32) -> Result<Self, AudioError> {
        let mut stream =
            Stream::new(output_rate as usize, CHANNELS, BITS_PER_SAMPLE).map_err(flac_error)?;
        let info = stream.stream_info_mut();
        info.set_block_sizes(BLOCK_SIZE, BLOCK_SIZE)
            .map_err(flac_error)?;
        info.set_frame_sizes(0, 0).map_err(flac_error)?;
        Ok(FlacStreamEncoder {
            config: encoder_config()?,
            stream,
            resampler: StreamResampler::new(input_rate, output_rate)?,
            framebuf: FrameBuf::with_size(CHANNELS, BLOCK_SIZE).map_err(flac_error)?,
            pending: Vec::with_capacity(BLOCK_SIZE),
            frame_number: 0,
            header_sent: false,
        })
    }

    fn header(&mut self) -> Result<Vec<u8>, AudioError> {
        if std::mem::replace(&mut self.header_sent, true) {
            Ok(Vec::new())
        } else {
            to_bytes(&self.stream)
        }
    }

    fn encode_block(&mut self, block: &[i32]) -> Result<Vec<u8>, AudioError> {
        self.framebuf.fill_interleaved(block).map_err(flac_error)?;
        let frame = flacenc::encode_fixed_size_frame(
            &self.config,
            &self.framebuf,
            self.frame_number,
            self.stream.stream_info(),
        )
        .map_err(flac_error)?;
        self.frame_number += 1;
        to_bytes(&frame)
    }
}

impl StreamEncoder for FlacStreamEncoder {
    fn push(&mut self, samples: &[f32]) -> Result<Vec<u8>, AudioError> {
        let mut bytes = self.header()?;
        let resampled = self.resampler.push(samples)?;
        self.pending
            .extend(resampled.iter().map(|&s| i32::from(to_i16(s))));
        let pending = std::mem::take(&mut self.pending);
        let mut blocks = pending.chunks_exact(BLOCK_SIZE);
        for block in &mut blocks {
            bytes.extend(self.encode_block(block)?);
        }
        self.pending = blocks.remainder().to_vec();
        Ok(bytes)
    }

    fn finish(mut self: Box<Self>) -> Result<Vec<u8>, AudioError> {
        let mut bytes = self.push(&[])?;
        let tail = self.resampler.finish()?;
        self.pending
            .extend(tail.iter().map(|&s| i32::from(to_i16(s))));
        let pending = std::mem::take(&mut self.pending);
        for block in pending.chunks(BLOCK_SIZE) {
            bytes.extend(self.encode_block(block)?);
        }
        Ok(bytes)
    }

    fn sample_rate(&self) -> u32 {
        self.stream.stream_info().sample_rate() as u32
    }
}

/// A complete FLAC file with total length, frame sizes and MD5 in STREAMINFO; `samples` are
/// already at `sample_rate`.
pub(super) fn flac_file(samples: &[f32], sample_rate: u32) -> Result<Vec<u8>, AudioError> {
    let pcm: Vec<i32> = samples.iter().map(|&s| i32::from(to_i16(s))).collect();
    let source = MemSource::from_samples(&pcm, CHANNELS, BITS_PER_SAMPLE, sample_rate as usize);
    let mut stream = flacenc::encode_with_fixed_block_size(&encoder_config()?, source, BLOCK_SIZE)
        .map_err(flac_error)?;
    let info = stream.stream_info_mut();
    // flacenc lowers the minimum to the final block's size, but FLAC defines it over all blocks
    // except the last, and decoders reject minimums below 16 samples.
    info.set_block_sizes(BLOCK_SIZE, BLOCK_SIZE)
        .map_err(flac_error)?;
    if stream.frame_count() == 0 {
        // No frame replaced the initial "smallest frame" sentinel.
        stream
            .stream_info_mut()
            .set_frame_sizes(0, 0)
            .map_err(flac_error)?;
    }
    to_bytes(&stream)
}
