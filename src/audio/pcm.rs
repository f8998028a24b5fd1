//! Uncompressed 16-bit output: `wav` and OpenAI's headerless `pcm`.
//!
//! Both carry the same little-endian samples; WAV adds a RIFF header. A stream cannot know its
//! length when the header goes out, so the streamed header uses 0xFFFFFFFF for the RIFF and data
//! sizes, the convention ffmpeg uses when writing WAV to a pipe and that common decoders accept.
//! The whole-file path writes exact sizes through `hound`.

use std::io::Cursor;

use super::resample::StreamResampler;
use super::{to_i16, AudioError, AudioFormat, StreamEncoder};

const UNKNOWN_LENGTH: u32 = u32::MAX;

pub(super) struct PcmEncoder {
    resampler: StreamResampler,
    /// The WAV header, until it has been sent with the first push.
    header: Option<Vec<u8>>,
}

impl PcmEncoder {
    pub(super) fn wav(input_rate: u32, output_rate: u32) -> Result<Self, AudioError> {
        Ok(PcmEncoder {
            resampler: StreamResampler::new(input_rate, output_rate)?,
            header: Some(streaming_wav_header(output_rate)),
        })
    }

    pub(super) fn raw(input_rate: u32, output_rate: u32) -> Result<Self, AudioError> {
        Ok(PcmEncoder {
            resampler: StreamResampler::new(input_rate, output_rate)?,
            header: None,
        })
    }

    fn emit(&mut self, samples: &[f32]) -> Vec<u8> {
        let mut bytes = self.header.take().unwrap_or_default();
        bytes.reserve(samples.len() * 2);
        for &sample in samples {
            bytes.extend_from_slice(&to_i16(sample).to_le_bytes());
        }
        bytes
    }
}

impl StreamEncoder for PcmEncoder {
    fn push(&mut self, samples: &[f32]) -> Result<Vec<u8>, AudioError> {
        let resampled = self.resampler.push(samples)?;
        Ok(self.emit(&resampled))
    }

    fn finish(mut self: Box<Self>) -> Result<Vec<u8>, AudioError> {
        let tail = self.resampler.finish()?;
        Ok(self.emit(&tail))
    }

    fn sample_rate(&self) -> u32 {
        self.resampler.output_rate()
    }
}

/// The canonical 44-byte header of a mono 16-bit PCM WAV file of unknown length.
fn streaming_wav_header(sample_rate: u32) -> Vec<u8> {
    const CHANNELS: u16 = 1;
    const BITS: u16 = 16;
    let block_align = CHANNELS * BITS / 8;
    let mut header = Vec::with_capacity(44);
    header.extend_from_slice(b"RIFF");
    header.extend_from_slice(&UNKNOWN_LENGTH.to_le_bytes());
    header.extend_from_slice(b"WAVE");
    header.extend_from_slice(b"fmt ");
    header.extend_from_slice(&16u32.to_le_bytes());
    header.extend_from_slice(&1u16.to_le_bytes()); // WAVE_FORMAT_PCM
    header.extend_from_slice(&CHANNELS.to_le_bytes());
    header.extend_from_slice(&sample_rate.to_le_bytes());
    header.extend_from_slice(&(sample_rate * block_align as u32).to_le_bytes());
    header.extend_from_slice(&block_align.to_le_bytes());
    header.extend_from_slice(&BITS.to_le_bytes());
    header.extend_from_slice(b"data");
    header.extend_from_slice(&UNKNOWN_LENGTH.to_le_bytes());
    header
}

/// A complete WAV file with exact sizes; `samples` are already at `sample_rate`.
pub(super) fn wav_file(samples: &[f32], sample_rate: u32) -> Result<Vec<u8>, AudioError> {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let wav_error = |err: hound::Error| AudioError::encoder(AudioFormat::Wav, err);
    let mut file = Cursor::new(Vec::with_capacity(44 + samples.len() * 2));
    let mut writer = hound::WavWriter::new(&mut file, spec).map_err(wav_error)?;
    let mut sample_writer = writer.get_i16_writer(samples.len() as u32);
    for &sample in samples {
        sample_writer.write_sample(to_i16(sample));
    }
    sample_writer.flush().map_err(wav_error)?;
    writer.finalize().map_err(wav_error)?;
    Ok(file.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streaming_header_matches_hound_except_lengths() {
        let exact = wav_file(&[0.25, -0.5], 22_050).unwrap();
        let streamed = streaming_wav_header(22_050);
        assert_eq!(exact.len(), 44 + 4);
        assert_eq!(&exact[8..40], &streamed[8..40]);
        assert_eq!(&exact[..4], &streamed[..4]);
        assert_eq!(&streamed[4..8], &[0xFF; 4]);
        assert_eq!(&streamed[40..44], &[0xFF; 4]);
        assert_eq!(&exact[44..], &[0x00, 0x20, 0x00, 0xC0]); // 8192, -16384 (rounded)
    }

    #[test]
    fn raw_pcm_is_little_endian_i16_at_24k() {
        let mut encoder = Box::new(PcmEncoder::raw(24_000, 24_000).unwrap());
        let bytes = encoder.push(&[1.0, -1.0, 0.0]).unwrap();
        assert_eq!(bytes, [0xFF, 0x7F, 0x01, 0x80, 0x00, 0x00]);
        assert!(encoder.finish().unwrap().is_empty());
    }
}
