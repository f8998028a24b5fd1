//! MP3, OpenAI's default `response_format`, through LAME.
//!
//! `mp3lame-encoder` builds LAME 3.100 from its bundled source, so no system library is needed.
//! Speech from a 22/24 kHz voice is encoded at that rate (MPEG-2 Layer III) as 64 kbps CBR mono:
//! transparent for a TTS voice, and CBR keeps every frame self-contained for streaming. At
//! bitrates up to 96 kbps LAME's presets scale the input by 0.95 (-0.45 dB) so that decoders do
//! not clip; the decoded level is that much lower by design.
//!
//! LAME's Info frame (frame count, encoder delay and padding, which let players trim the
//! ~1100 samples of codec delay and show an exact duration) can only be filled in after the last
//! frame. A stream has sent its start long before that, so streams go without it; the whole-file
//! [`mp3_file`] writes it.

use std::num::NonZeroU32;

use mp3lame_encoder::{Bitrate, Builder, Encoder, FlushGap, Mode, MonoPcm, Quality};

use super::resample::StreamResampler;
use super::{to_i16_vec, AudioError, AudioFormat, StreamEncoder};

/// MPEG-1, MPEG-2 and MPEG-2.5 Layer III sample rates.
pub(super) const SAMPLE_RATES: [u32; 9] = [
    8_000, 11_025, 12_000, 16_000, 22_050, 24_000, 32_000, 44_100, 48_000,
];

/// LAME's documented worst case for the final flush.
const FLUSH_BUFFER_BYTES: usize = 7_200;

pub(super) struct Mp3Encoder {
    lame: Encoder,
    resampler: StreamResampler,
}

fn lame_error(err: impl std::fmt::Debug) -> AudioError {
    AudioError::encoder(AudioFormat::Mp3, format!("{err:?}"))
}

impl Mp3Encoder {
    pub(super) fn new(input_rate: u32, output_rate: u32) -> Result<Self, AudioError> {
        Self::with_info_frame(input_rate, output_rate, false)
    }

    fn with_info_frame(
        input_rate: u32,
        output_rate: u32,
        info_frame: bool,
    ) -> Result<Self, AudioError> {
        let mut builder = Builder::new().ok_or_else(|| lame_error("lame_init failed"))?;
        builder.set_num_channels(1).map_err(lame_error)?;
        builder.set_sample_rate(output_rate).map_err(lame_error)?;
        // Without this LAME may pick a lower output rate for the bitrate and resample itself.
        builder
            .set_output_sample_rate(NonZeroU32::new(output_rate))
            .map_err(lame_error)?;
        builder.set_mode(Mode::Mono).map_err(lame_error)?;
        builder
            .set_brate(bitrate_for(output_rate))
            .map_err(lame_error)?;
        builder.set_quality(Quality::NearBest).map_err(lame_error)?;
        builder
            .set_to_write_vbr_tag(info_frame)
            .map_err(lame_error)?;
        Ok(Mp3Encoder {
            lame: builder.build().map_err(lame_error)?,
            resampler: StreamResampler::new(input_rate, output_rate)?,
        })
    }

    fn encode(&mut self, samples: &[f32]) -> Result<Vec<u8>, AudioError> {
        let pcm = to_i16_vec(samples);
        let mut bytes = Vec::with_capacity(mp3lame_encoder::max_required_buffer_size(pcm.len()));
        self.lame
            .encode_to_vec(MonoPcm(&pcm), &mut bytes)
            .map_err(lame_error)?;
        Ok(bytes)
    }

    fn flush(&mut self) -> Result<Vec<u8>, AudioError> {
        let tail = self.resampler.finish()?;
        let mut bytes = self.encode(&tail)?;
        bytes.reserve(FLUSH_BUFFER_BYTES);
        self.lame
            .flush_to_vec::<FlushGap>(&mut bytes)
            .map_err(lame_error)?;
        Ok(bytes)
    }
}

/// A complete MP3 file whose first frame is a filled-in LAME Info frame.
pub(super) fn mp3_file(
    samples: &[f32],
    input_rate: u32,
    output_rate: u32,
) -> Result<Vec<u8>, AudioError> {
    let mut encoder = Mp3Encoder::with_info_frame(input_rate, output_rate, true)?;
    let mut file = encoder.push(samples)?;
    file.extend(encoder.flush()?);
    // LAME reserved the frame at the start of its output; it is only complete now.
    let mut info_frame = Vec::with_capacity(encoder.lame.lame_tag_size());
    encoder
        .lame
        .lame_tag_encode_to_vec(&mut info_frame)
        .ok_or_else(|| lame_error("no Info frame"))?;
    if info_frame.len() > file.len() {
        return Err(lame_error("Info frame larger than the file"));
    }
    file[..info_frame.len()].copy_from_slice(&info_frame);
    Ok(file)
}

/// 64 kbps for speech rates; MPEG-1 rates (32 kHz and up) get more headroom, and the 8–12 kHz
/// MPEG-2.5 rates cannot carry 64 kbps mono.
fn bitrate_for(sample_rate: u32) -> Bitrate {
    match sample_rate {
        r if r >= 32_000 => Bitrate::Kbps96,
        r if r >= 16_000 => Bitrate::Kbps64,
        _ => Bitrate::Kbps32,
    }
}

impl StreamEncoder for Mp3Encoder {
    fn push(&mut self, samples: &[f32]) -> Result<Vec<u8>, AudioError> {
        let resampled = self.resampler.push(samples)?;
        self.encode(&resampled)
    }

    fn finish(mut self: Box<Self>) -> Result<Vec<u8>, AudioError> {
        self.flush()
    }

    fn sample_rate(&self) -> u32 {
        self.resampler.output_rate()
    }
}
