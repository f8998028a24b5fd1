//! Audio encoders for every OpenAI `response_format`.
//!
//! Engines hand over mono `f32` samples at the voice's native rate, one sentence at a time. The
//! HTTP layer wants bytes it can send immediately, so each format is an incremental
//! [`StreamEncoder`]: every byte string it returns extends one valid file, and the first bytes
//! reach the client while later sentences are still being synthesized. [`encode`] is the
//! whole-file variant for callers that have all samples up front; it can write exact lengths into
//! headers that a stream must leave open.
//!
//! All encoders are native libraries (LAME, libopus, FDK AAC, flacenc, hound); nothing shells out.

mod aac;
mod flac;
mod mp3;
mod ogg_opus;
mod pcm;
pub mod resample;
pub mod speech_like;
pub mod upload;

use std::fmt;

/// The `response_format` values of OpenAI's `POST /v1/audio/speech`; MP3 is the API's default.
#[derive(
    Debug, Default, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum AudioFormat {
    #[default]
    Mp3,
    Opus,
    Aac,
    Flac,
    Wav,
    Pcm,
    /// Headerless 16-bit samples at the voice's own rate, for protocols that carry the rate
    /// themselves (Wyoming). Not an OpenAI format: not in [`AudioFormat::ALL`], not parsed.
    PcmNative,
}

impl AudioFormat {
    pub const ALL: [AudioFormat; 6] = [
        AudioFormat::Mp3,
        AudioFormat::Opus,
        AudioFormat::Aac,
        AudioFormat::Flac,
        AudioFormat::Wav,
        AudioFormat::Pcm,
    ];

    /// Parses the exact lowercase names OpenAI uses; anything else is `None`.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|format| format.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AudioFormat::Mp3 => "mp3",
            AudioFormat::Opus => "opus",
            AudioFormat::Aac => "aac",
            AudioFormat::Flac => "flac",
            AudioFormat::Wav => "wav",
            AudioFormat::Pcm => "pcm",
            AudioFormat::PcmNative => "pcm_native",
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            AudioFormat::Mp3 => "audio/mpeg",
            AudioFormat::Opus => "audio/ogg",
            AudioFormat::Aac => "audio/aac",
            AudioFormat::Flac => "audio/flac",
            AudioFormat::Wav => "audio/wav",
            AudioFormat::Pcm | AudioFormat::PcmNative => "audio/pcm",
        }
    }

    /// File name extension for `Content-Disposition`. Ogg Opus files conventionally end in
    /// `.opus`, ADTS streams in `.aac`, and headerless samples in `.pcm`.
    pub fn extension(self) -> &'static str {
        self.as_str()
    }

    /// Sample rate of the encoded audio for a voice whose native rate is `native`.
    ///
    /// `pcm` is always 24 kHz because OpenAI documents it that way and clients hard-code it. Opus
    /// only runs at 8/12/16/24/48 kHz. MP3 and AAC keep the native rate when their standards list
    /// it (22050 Hz is a valid MPEG-2 and AAC rate), which avoids a resampling pass.
    pub fn output_sample_rate(self, native: u32) -> u32 {
        match self {
            AudioFormat::Pcm => 24_000,
            AudioFormat::Opus => match native {
                8_000 | 12_000 | 16_000 | 24_000 | 48_000 => native,
                _ if native < 24_000 => 24_000,
                _ => 48_000,
            },
            AudioFormat::Mp3 => nearest_supported(native, &mp3::SAMPLE_RATES),
            AudioFormat::Aac => nearest_supported(native, &aac::SAMPLE_RATES),
            AudioFormat::Flac | AudioFormat::Wav | AudioFormat::PcmNative => native,
        }
    }
}

impl fmt::Display for AudioFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `native` if the codec supports it, else the lowest supported rate above it (so no bandwidth is
/// lost), else the highest supported rate.
fn nearest_supported(native: u32, supported: &[u32]) -> u32 {
    let mut above = supported.iter().copied().filter(|&rate| rate >= native);
    above
        .next()
        .or_else(|| supported.iter().copied().max())
        .expect("codec rate tables are not empty")
}

#[derive(Debug, thiserror::Error)]
pub enum AudioError {
    #[error("cannot resample {from} Hz to {to} Hz: {reason}")]
    Resample { from: u32, to: u32, reason: String },
    #[error("{format} encoder: {reason}")]
    Encoder { format: AudioFormat, reason: String },
}

impl AudioError {
    fn encoder(format: AudioFormat, reason: impl fmt::Display) -> Self {
        AudioError::Encoder {
            format,
            reason: reason.to_string(),
        }
    }
}

/// Incremental encoder: feed sentence-sized chunks as they are synthesized; every returned byte
/// string can be sent to the client at once; the concatenation of all returned bytes (including
/// `finish`) is one valid file.
pub trait StreamEncoder: Send {
    fn push(&mut self, samples: &[f32]) -> Result<Vec<u8>, AudioError>;
    fn finish(self: Box<Self>) -> Result<Vec<u8>, AudioError>;
    /// Rate of the encoded audio.
    fn sample_rate(&self) -> u32;
}

/// A streaming encoder for `format` fed with mono samples at `input_rate`.
pub fn stream_encoder(
    format: AudioFormat,
    input_rate: u32,
) -> Result<Box<dyn StreamEncoder>, AudioError> {
    let output_rate = format.output_sample_rate(input_rate);
    Ok(match format {
        AudioFormat::Mp3 => Box::new(mp3::Mp3Encoder::new(input_rate, output_rate)?),
        AudioFormat::Opus => Box::new(ogg_opus::OggOpusEncoder::new(input_rate, output_rate)?),
        AudioFormat::Aac => Box::new(aac::AdtsEncoder::new(input_rate, output_rate)?),
        AudioFormat::Flac => Box::new(flac::FlacStreamEncoder::new(input_rate, output_rate)?),
        AudioFormat::Wav => Box::new(pcm::PcmEncoder::wav(input_rate, output_rate)?),
        AudioFormat::Pcm | AudioFormat::PcmNative => {
            Box::new(pcm::PcmEncoder::raw(input_rate, output_rate)?)
        }
    })
}

/// Whole-file encode (not streamed). WAV gets exact RIFF sizes, FLAC a complete STREAMINFO
/// (length, MD5) and MP3 a LAME Info frame (gapless trimming, exact duration) here; a streamed
/// WAV uses the 0xFFFFFFFF "unknown length" convention in its header, a streamed FLAC leaves the
/// length unknown and a streamed MP3 has no Info frame. Opus, AAC and PCM bytes are identical to
/// the streamed ones.
pub fn encode(
    format: AudioFormat,
    samples: &[f32],
    input_rate: u32,
) -> Result<Vec<u8>, AudioError> {
    let output_rate = format.output_sample_rate(input_rate);
    match format {
        AudioFormat::Wav => {
            let resampled = resample::resample(samples, input_rate, output_rate)?;
            pcm::wav_file(&resampled, output_rate)
        }
        AudioFormat::Flac => {
            let resampled = resample::resample(samples, input_rate, output_rate)?;
            flac::flac_file(&resampled, output_rate)
        }
        AudioFormat::Mp3 => mp3::mp3_file(samples, input_rate, output_rate),
        _ => {
            let mut encoder = stream_encoder(format, input_rate)?;
            let mut bytes = encoder.push(samples)?;
            bytes.extend(encoder.finish()?);
            Ok(bytes)
        }
    }
}

/// The project-wide float → 16-bit convention: clip to [-1, 1], scale by 32767, round.
fn to_i16(sample: f32) -> i16 {
    (sample.clamp(-1.0, 1.0) * 32767.0).round() as i16
}

fn to_i16_vec(samples: &[f32]) -> Vec<i16> {
    samples.iter().copied().map(to_i16).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_fail() {
        for format in AudioFormat::ALL {
            assert_eq!(AudioFormat::parse(format.as_str()), Some(format));
            let json = serde_json::to_string(&format).unwrap();
            assert_eq!(json, format!("\"{}\"", format.as_str()));
        }
        assert_eq!(AudioFormat::default(), AudioFormat::Mp3);
        assert_eq!(AudioFormat::parse("MP3"), None);
        assert_eq!(AudioFormat::parse("ogg"), None);
        assert_eq!(AudioFormat::parse(""), None);
    }

    #[test]
    fn output_rates_follow_codec_tables() {
        assert_eq!(AudioFormat::Pcm.output_sample_rate(22_050), 24_000);
        assert_eq!(AudioFormat::Pcm.output_sample_rate(48_000), 24_000);
        assert_eq!(AudioFormat::Opus.output_sample_rate(22_050), 24_000);
        assert_eq!(AudioFormat::Opus.output_sample_rate(16_000), 16_000);
        assert_eq!(AudioFormat::Opus.output_sample_rate(44_100), 48_000);
        assert_eq!(AudioFormat::Mp3.output_sample_rate(22_050), 22_050);
        assert_eq!(AudioFormat::Mp3.output_sample_rate(24_000), 24_000);
        assert_eq!(AudioFormat::Mp3.output_sample_rate(23_000), 24_000);
        assert_eq!(AudioFormat::Mp3.output_sample_rate(96_000), 48_000);
        assert_eq!(AudioFormat::Aac.output_sample_rate(22_050), 22_050);
        assert_eq!(AudioFormat::Wav.output_sample_rate(22_050), 22_050);
        assert_eq!(AudioFormat::Flac.output_sample_rate(16_000), 16_000);
    }

    #[test]
    fn sample_conversion_clips_and_rounds() {
        assert_eq!(to_i16(0.0), 0);
        assert_eq!(to_i16(1.0), 32767);
        assert_eq!(to_i16(-1.0), -32767);
        assert_eq!(to_i16(3.5), 32767);
        assert_eq!(to_i16(-7.0), -32767);
        assert_eq!(to_i16(0.5), 16384); // 16383.5 rounds away from zero
        assert_eq!(to_i16(f32::NAN), 0);
    }
}
