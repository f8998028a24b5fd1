//! Clips that clients upload (a voice to clone): decoded from whatever format they are in,
//! told by their bytes, since existing clients send `application/octet-stream` named `audio`
//! with no extension. The bytes are untrusted: every way they can be wrong is an error that
//! says what is wrong, and how much is decoded is bounded whatever a header claims.

use std::io::Cursor;

use symphonia::core::audio::SampleBuffer;
use symphonia::core::codecs::{DecoderOptions, CODEC_TYPE_NULL};
use symphonia::core::errors::Error as SymphoniaError;
use symphonia::core::formats::FormatOptions;
use symphonia::core::io::{MediaSourceStream, MediaSourceStreamOptions};
use symphonia::core::meta::MetadataOptions;
use symphonia::core::probe::Hint;

/// Below this a clip has lost the band a voice lives in (the Python server's floor too).
pub const MIN_SAMPLE_RATE: u32 = 8_000;

/// A clip shorter than this holds too little of a voice to clone it.
pub const MIN_SECONDS: f64 = 0.5;

/// Decoding stops here: the official code trims references to 20 s and advises 3 to 10, and
/// a bound keeps a small file that claims hours (or a long silent one) from costing memory.
pub const MAX_SECONDS: f64 = 60.0;

/// Channels a clip may have (they are averaged to one).
const MAX_CHANNELS: usize = 8;

/// A decoded clip: mono samples in [-1, 1] at their own rate.
#[derive(Debug, Clone, PartialEq)]
pub struct Clip {
    pub samples: Vec<f32>,
    pub sample_rate: u32,
}

impl Clip {
    pub fn duration_s(&self) -> f64 {
        self.samples.len() as f64 / f64::from(self.sample_rate)
    }
}

/// Why an upload is no usable clip; the message is for the client.
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    #[error("The clip is empty.")]
    Empty,
    #[error("The clip is not audio this server reads (WAV, FLAC, MP3 or Ogg Vorbis).")]
    UnknownFormat,
    #[error("The clip cannot be decoded: {0}.")]
    Corrupt(String),
    #[error("The clip's sample rate of {0} Hz is too low: at least {MIN_SAMPLE_RATE} Hz.")]
    SampleRate(u32),
    #[error("The clip has {0} channels; at most {MAX_CHANNELS} are read.")]
    Channels(usize),
    #[error("The clip lasts {0:.2} s: at least {MIN_SECONDS} s of audio is needed.")]
    TooShort(f64),
    #[error("The clip lasts more than {MAX_SECONDS} s: send 3 to 20 seconds of speech.")]
    TooLong,
}

/// Decodes an uploaded clip, recognising its format from its bytes.
pub fn decode(bytes: &[u8]) -> Result<Clip, UploadError> {
    if bytes.is_empty() {
        return Err(UploadError::Empty);
    }
    let source = MediaSourceStream::new(
        Box::new(Cursor::new(bytes.to_vec())),
        MediaSourceStreamOptions::default(),
    );
    let probed = symphonia::default::get_probe()
        .format(
            &Hint::new(),
            source,
            &FormatOptions::default(),
            &MetadataOptions::default(),
        )
        .map_err(|e| match e {
            SymphoniaError::Unsupported(_) => UploadError::UnknownFormat,
            other => UploadError::Corrupt(other.to_string()),
        })?;
    let mut format = probed.format;
    let track = format
        .tracks()
        .iter()
        .find(|t| t.codec_params.codec != CODEC_TYPE_NULL)
        .ok_or(UploadError::UnknownFormat)?;
    let track_id = track.id;
    let params = track.codec_params.clone();
    let sample_rate = params
        .sample_rate
        .ok_or_else(|| UploadError::Corrupt("no sample rate".into()))?;
    if sample_rate < MIN_SAMPLE_RATE {
        return Err(UploadError::SampleRate(sample_rate));
    }
    let mut decoder = symphonia::default::get_codecs()
        .make(&params, &DecoderOptions::default())
        .map_err(|_| UploadError::UnknownFormat)?;
    let max_samples = (MAX_SECONDS * f64::from(sample_rate)) as usize;
    let mut samples: Vec<f32> = Vec::new();
    loop {
        let packet = match format.next_packet() {
            Ok(packet) => packet,
            // The end of the stream (symphonia reports it as an I/O error).
            Err(SymphoniaError::IoError(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                break
            }
            Err(SymphoniaError::ResetRequired) => break,
            Err(e) => return Err(UploadError::Corrupt(e.to_string())),
        };
        if packet.track_id() != track_id {
            continue;
        }
        let decoded = match decoder.decode(&packet) {
            Ok(decoded) => decoded,
            // A damaged packet in an otherwise good file is skipped, as players do.
            Err(SymphoniaError::DecodeError(_)) => continue,
            Err(e) => return Err(UploadError::Corrupt(e.to_string())),
        };
        let spec = *decoded.spec();
        let channels = spec.channels.count();
        if channels == 0 || channels > MAX_CHANNELS {
            return Err(UploadError::Channels(channels));
        }
        if spec.rate != sample_rate {
            return Err(UploadError::Corrupt("the sample rate changes mid-stream".into()));
        }
        let mut buffer = SampleBuffer::<f32>::new(decoded.capacity() as u64, spec);
        buffer.copy_interleaved_ref(decoded);
        // Channels averaged to one, as the official code does.
        samples.extend(
            buffer
                .samples()
                .chunks_exact(channels)
                .map(|frame| frame.iter().sum::<f32>() / channels as f32),
        );
        if samples.len() > max_samples {
            return Err(UploadError::TooLong);
        }
    }
    if samples.iter().any(|s| !s.is_finite()) {
        return Err(UploadError::Corrupt("samples that are not numbers".into()));
    }
    let clip = Clip {
        samples,
        sample_rate,
    };
    if clip.duration_s() < MIN_SECONDS {
        return Err(UploadError::TooShort(clip.duration_s()));
    }
    Ok(clip)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wav(rate: u32, channels: u16, seconds: f64) -> Vec<u8> {
        let spec = hound::WavSpec {
            channels,
            sample_rate: rate,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let mut out = Cursor::new(Vec::new());
        let mut writer = hound::WavWriter::new(&mut out, spec).unwrap();
        let frames = (seconds * f64::from(rate)) as usize;
        for i in 0..frames {
            let value = ((i as f64 * 0.05).sin() * 8000.0) as i16;
            for c in 0..channels {
                writer.write_sample(if c == 0 { value } else { -value / 2 }).unwrap();
            }
        }
        writer.finalize().unwrap();
        out.into_inner()
    }

    #[test]
    fn a_wav_is_read_at_its_rate_and_its_channels_averaged() {
        let clip = decode(&wav(16_000, 2, 1.0)).unwrap();
        assert_eq!(clip.sample_rate, 16_000);
        assert_eq!(clip.samples.len(), 16_000);
        // (v + (-v/2)) / 2 = v/4
        let expected = ((1.0f64 * 0.05).sin() * 8000.0) as i16;
        let expected = (f32::from(expected) + f32::from(-expected / 2)) / 2.0 / 32768.0;
        assert!((clip.samples[1] - expected).abs() < 1e-6);
    }

    #[test]
    fn flac_is_recognised_by_its_bytes() {
        let clip = decode(&wav(22_050, 1, 0.8)).unwrap();
        let flac = crate::audio::encode(crate::audio::AudioFormat::Flac, &clip.samples, 22_050)
            .unwrap();
        let back = decode(&flac).unwrap();
        assert_eq!(back.sample_rate, 22_050);
        assert_eq!(back.samples.len(), clip.samples.len());
    }

    #[test]
    fn mp3_is_recognised_by_its_bytes() {
        let clip = decode(&wav(24_000, 1, 1.0)).unwrap();
        let mp3 =
            crate::audio::encode(crate::audio::AudioFormat::Mp3, &clip.samples, 24_000).unwrap();
        let back = decode(&mp3).unwrap();
        assert_eq!(back.sample_rate, 24_000);
        // The encoder's priming and padding add at most a few frames of 1152 samples.
        let extra = back.samples.len() as i64 - clip.samples.len() as i64;
        assert!((0..=4 * 1152).contains(&extra), "{extra} more samples");
    }

    #[test]
    fn every_bad_upload_is_a_clear_error() {
        assert!(matches!(decode(b""), Err(UploadError::Empty)));
        assert!(matches!(
            decode(b"definitely not audio, just words"),
            Err(UploadError::UnknownFormat)
        ));
        assert!(matches!(decode(&wav(4_000, 1, 1.0)), Err(UploadError::SampleRate(4000))));
        assert!(matches!(decode(&wav(16_000, 1, 0.2)), Err(UploadError::TooShort(_))));
        assert!(matches!(decode(&wav(8_000, 1, 61.0)), Err(UploadError::TooLong)));
        let mut truncated = wav(16_000, 1, 1.0);
        truncated.truncate(40);
        assert!(decode(&truncated).is_err());
        // A header that claims far more than the file holds.
        let mut lying = wav(16_000, 1, 1.0);
        lying[40..44].copy_from_slice(&u32::MAX.to_le_bytes());
        if let Ok(clip) = decode(&lying) {
            assert!(clip.samples.len() <= 16_000, "{} samples", clip.samples.len());
        }
    }

    #[test]
    fn hostile_bytes_never_panic() {
        let good = wav(16_000, 1, 0.6);
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for round in 0..300 {
            let mut bytes = good.clone();
            for _ in 0..(1 + round % 16) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let at = (state as usize) % bytes.len().min(200);
                bytes[at] = (state >> 32) as u8;
            }
            bytes.truncate(bytes.len() - (state as usize % 500));
            let _ = decode(&bytes);
        }
    }
}
