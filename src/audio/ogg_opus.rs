//! Opus in an Ogg container (RFC 7845), the `opus` response format.
//!
//! libopus only produces raw packets; browsers and players expect them in Ogg pages behind an
//! `OpusHead` and an `OpusTags` packet. The stream runs at 24 kHz for 22/24 kHz voices (no
//! bandwidth is lost and it is the rate Opus' speech modes are tuned for), in 20 ms frames.
//! Granule positions count 48 kHz samples as the RFC requires whatever the coding rate; the
//! encoder's look-ahead is announced as pre-skip and the final page's granule position trims the
//! zero padding of the last frame, so decoders reproduce the exact input length. Every push ends
//! with a page flush, so each returned byte string is a run of whole pages.

use ogg::writing::{PacketWriteEndInfo, PacketWriter};

use super::resample::StreamResampler;
use super::{AudioError, AudioFormat, StreamEncoder};

/// Ogg needs a stream serial; a file holds a single logical stream, so any constant is valid and
/// keeps the output deterministic (and cacheable).
const STREAM_SERIAL: u32 = 0x6f76_7376;
const GRANULE_RATE: u32 = 48_000;
const FRAMES_PER_SECOND: u32 = 50; // 20 ms frames
/// 32 kbit/s VBR: near-transparent for mono speech at 24 kHz.
const BITRATE: i32 = 32_000;
/// Upper bound for one Opus packet recommended by the libopus documentation.
const MAX_PACKET_BYTES: usize = 4_000;

pub(super) struct OggOpusEncoder {
    opus: opus::Encoder,
    resampler: StreamResampler,
    writer: PacketWriter<'static, Vec<u8>>,
    frame_len: usize,
    /// 48 kHz ticks per sample at the coding rate.
    granule_scale: u64,
    /// Encoder look-ahead at the coding rate; the pre-skip in 48 kHz ticks is this × scale.
    lookahead: u64,
    pending: Vec<f32>,
    /// Real (not padding) samples received at the coding rate.
    input_samples: u64,
    /// Samples encoded so far at the coding rate, padding included.
    encoded_samples: u64,
    packet: Vec<u8>,
}

fn opus_error(err: impl std::fmt::Display) -> AudioError {
    AudioError::encoder(AudioFormat::Opus, err)
}

impl OggOpusEncoder {
    pub(super) fn new(input_rate: u32, output_rate: u32) -> Result<Self, AudioError> {
        if !GRANULE_RATE.is_multiple_of(output_rate) {
            return Err(opus_error(format!("unsupported rate {output_rate} Hz")));
        }
        let mut opus =
            opus::Encoder::new(output_rate, opus::Channels::Mono, opus::Application::Audio)
                .map_err(opus_error)?;
        opus.set_bitrate(opus::Bitrate::Bits(BITRATE))
            .map_err(opus_error)?;
        opus.set_signal(opus::Signal::Voice).map_err(opus_error)?;
        let lookahead = opus.get_lookahead().map_err(opus_error)?;
        let lookahead = u64::try_from(lookahead).map_err(opus_error)?;
        let granule_scale = u64::from(GRANULE_RATE / output_rate);

        let mut writer = PacketWriter::new(Vec::new());
        let pre_skip = u16::try_from(lookahead * granule_scale).map_err(opus_error)?;
        writer
            .write_packet(
                opus_head(pre_skip, output_rate),
                STREAM_SERIAL,
                PacketWriteEndInfo::EndPage,
                0,
            )
            .map_err(opus_error)?;
        writer
            .write_packet(opus_tags(), STREAM_SERIAL, PacketWriteEndInfo::EndPage, 0)
            .map_err(opus_error)?;

        Ok(OggOpusEncoder {
            opus,
            resampler: StreamResampler::new(input_rate, output_rate)?,
            writer,
            frame_len: (output_rate / FRAMES_PER_SECOND) as usize,
            granule_scale,
            lookahead,
            pending: Vec::new(),
            input_samples: 0,
            encoded_samples: 0,
            packet: vec![0; MAX_PACKET_BYTES],
        })
    }

    /// Encodes every whole frame in `pending` and writes the packets, ending the page (or the
    /// stream, with `end_granule` as its final granule position) after the last one.
    fn write_frames(&mut self, end_granule: Option<u64>) -> Result<Vec<u8>, AudioError> {
        let frames = self.pending.len() / self.frame_len;
        for index in 0..frames {
            let frame = &self.pending[index * self.frame_len..(index + 1) * self.frame_len];
            let clipped: Vec<f32> = frame.iter().map(|s| s.clamp(-1.0, 1.0)).collect();
            let size = self
                .opus
                .encode_float(&clipped, &mut self.packet)
                .map_err(opus_error)?;
            self.encoded_samples += self.frame_len as u64;
            let last = index + 1 == frames;
            let (end_info, granule) = match (last, end_granule) {
                (true, Some(end)) => (PacketWriteEndInfo::EndStream, end),
                (true, None) => (
                    PacketWriteEndInfo::EndPage,
                    self.encoded_samples * self.granule_scale,
                ),
                (false, _) => (
                    PacketWriteEndInfo::NormalPacket,
                    self.encoded_samples * self.granule_scale,
                ),
            };
            self.writer
                .write_packet(
                    self.packet[..size].to_vec(),
                    STREAM_SERIAL,
                    end_info,
                    granule,
                )
                .map_err(opus_error)?;
        }
        self.pending.drain(..frames * self.frame_len);
        Ok(std::mem::take(self.writer.inner_mut()))
    }
}

/// The identification header: version 1, mono, channel mapping family 0.
fn opus_head(pre_skip: u16, input_rate: u32) -> Vec<u8> {
    let mut head = Vec::with_capacity(19);
    head.extend_from_slice(b"OpusHead");
    head.push(1);
    head.push(1);
    head.extend_from_slice(&pre_skip.to_le_bytes());
    head.extend_from_slice(&input_rate.to_le_bytes());
    head.extend_from_slice(&0i16.to_le_bytes()); // output gain
    head.push(0);
    head
}

/// The comment header: vendor string, no user comments.
fn opus_tags() -> Vec<u8> {
    let vendor = format!("omnivoice-server (libopus {})", opus::version());
    let mut tags = Vec::with_capacity(16 + vendor.len());
    tags.extend_from_slice(b"OpusTags");
    tags.extend_from_slice(&(vendor.len() as u32).to_le_bytes());
    tags.extend_from_slice(vendor.as_bytes());
    tags.extend_from_slice(&0u32.to_le_bytes());
    tags
}

impl StreamEncoder for OggOpusEncoder {
    fn push(&mut self, samples: &[f32]) -> Result<Vec<u8>, AudioError> {
        let resampled = self.resampler.push(samples)?;
        self.input_samples += resampled.len() as u64;
        self.pending.extend(resampled);
        self.write_frames(None)
    }

    fn finish(mut self: Box<Self>) -> Result<Vec<u8>, AudioError> {
        let tail = self.resampler.finish()?;
        self.input_samples += tail.len() as u64;
        self.pending.extend(tail);
        // The decoder's output lags by the look-ahead, so encode that much padding after the last
        // real sample, rounded up to whole frames (at least one, so the stream has an end page).
        let needed = self.input_samples + self.lookahead - self.encoded_samples;
        let frames = (needed as usize).div_ceil(self.frame_len).max(1);
        self.pending.resize(frames * self.frame_len, 0.0);
        let end_granule = (self.lookahead + self.input_samples) * self.granule_scale;
        self.write_frames(Some(end_granule))
    }

    fn sample_rate(&self) -> u32 {
        self.resampler.output_rate()
    }
}
