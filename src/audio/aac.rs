//! AAC-LC in ADTS framing, the `aac` response format, through Fraunhofer FDK AAC.
//!
//! ADTS is the only AAC transport that can be streamed without a container: every frame carries
//! its own header, so a client can start decoding from the first bytes. `fdk-aac` builds the
//! bundled library, so there is no system dependency. AAC-LC supports 22050 Hz directly, so
//! Piper voices are not resampled. ADTS cannot signal the encoder delay, so decoders output that
//! many samples of leading silence; the stream is flushed until the last real sample is out.

use fdk_aac::enc::{AudioObjectType, BitRate, ChannelMode, Encoder, EncoderParams, Transport};

use super::resample::StreamResampler;
use super::{to_i16_vec, AudioError, AudioFormat, StreamEncoder};

/// The sampling frequencies an ADTS header can index (ISO/IEC 14496-3, table 1.18) that FDK's
/// AAC-LC encoder accepts.
pub(super) const SAMPLE_RATES: [u32; 9] = [
    8_000, 11_025, 12_000, 16_000, 22_050, 24_000, 32_000, 44_100, 48_000,
];

/// 64 kbit/s CBR for mono speech, the same budget as the MP3 output.
const BITRATE: u32 = 64_000;

pub(super) struct AdtsEncoder {
    fdk: Encoder,
    resampler: StreamResampler,
    frame_len: u64,
    delay: u64,
    input_samples: u64,
    frames_out: u64,
    out_buffer: Vec<u8>,
}

fn fdk_error(err: impl std::fmt::Display) -> AudioError {
    AudioError::encoder(AudioFormat::Aac, err)
}

impl AdtsEncoder {
    pub(super) fn new(input_rate: u32, output_rate: u32) -> Result<Self, AudioError> {
        let fdk = Encoder::new(EncoderParams {
            bit_rate: BitRate::Cbr(BITRATE),
            sample_rate: output_rate,
            transport: Transport::Adts,
            channels: ChannelMode::Mono,
            audio_object_type: AudioObjectType::Mpeg4LowComplexity,
        })
        .map_err(fdk_error)?;
        let info = fdk.info().map_err(fdk_error)?;
        Ok(AdtsEncoder {
            frame_len: u64::from(info.frameLength),
            delay: u64::from(info.nDelay),
            out_buffer: vec![0; info.maxOutBufBytes as usize],
            fdk,
            resampler: StreamResampler::new(input_rate, output_rate)?,
            input_samples: 0,
            frames_out: 0,
        })
    }

    /// Feeds `pcm` completely; FDK consumes at most one frame of input and emits at most one
    /// ADTS frame per call, keeping any remainder buffered for the next call.
    fn encode(&mut self, pcm: &[i16]) -> Result<Vec<u8>, AudioError> {
        let mut bytes = Vec::new();
        let mut offset = 0;
        loop {
            let info = self
                .fdk
                .encode(&pcm[offset..], &mut self.out_buffer)
                .map_err(fdk_error)?;
            offset += info.input_consumed;
            if info.output_size > 0 {
                bytes.extend_from_slice(&self.out_buffer[..info.output_size]);
                self.frames_out += 1;
            }
            if info.input_consumed == 0 && info.output_size == 0 {
                break;
            }
        }
        if offset < pcm.len() {
            return Err(fdk_error(format!(
                "encoder stalled with {} samples unconsumed",
                pcm.len() - offset
            )));
        }
        Ok(bytes)
    }
}

impl StreamEncoder for AdtsEncoder {
    fn push(&mut self, samples: &[f32]) -> Result<Vec<u8>, AudioError> {
        let resampled = self.resampler.push(samples)?;
        self.input_samples += resampled.len() as u64;
        self.encode(&to_i16_vec(&resampled))
    }

    fn finish(mut self: Box<Self>) -> Result<Vec<u8>, AudioError> {
        let tail = self.resampler.finish()?;
        self.input_samples += tail.len() as u64;
        let mut bytes = self.encode(&to_i16_vec(&tail))?;
        // Decoded output lags the input by the codec delay; feed silence until the frame holding
        // the last real sample has been written.
        let silence = vec![0i16; self.frame_len as usize];
        let wanted_frames = (self.input_samples + self.delay).div_ceil(self.frame_len);
        let max_feeds =
            wanted_frames.saturating_sub(self.frames_out) + self.delay.div_ceil(self.frame_len) + 2;
        for _ in 0..max_feeds {
            if self.frames_out >= wanted_frames {
                break;
            }
            bytes.extend(self.encode(&silence)?);
        }
        if self.frames_out < wanted_frames {
            return Err(fdk_error("encoder did not flush its delay line"));
        }
        Ok(bytes)
    }

    fn sample_rate(&self) -> u32 {
        self.resampler.output_rate()
    }
}
