//! Uploaded reference clips (voice profiles, cloning): any common audio file in, mono `f32` out.
//!
//! Clients send the clip as `application/octet-stream` without a file name worth trusting, so
//! the container is told by its bytes (symphonia's probe reads the magic numbers): WAV (integer
//! PCM of 8 to 32 bits, float, ADPCM), FLAC, MP3, Ogg Vorbis, MP4/M4A (AAC) and Matroska/WebM
//! with one of those codecs. Opus has no decoder here, so Ogg Opus or WebM Opus is refused by
//! name. Every channel is averaged into one.
//!
//! The bytes come from strangers: every limit is checked while decoding, before the memory
//! they bound is spent (a file that claims to be short but decodes long stops at
//! [`MAX_SECONDS`]), a decoder's panic on malformed input becomes an error, and nothing here
//! knows HTTP (the API maps [`UploadError`] to statuses in one place).

use std::io::Cursor;
use std::panic::{catch_unwind, AssertUnwindSafe};

use symphonia::core::audio::SampleBuffer;
use symphonia::core::codecs::{DecoderOptions, CODEC_TYPE_NULL};
use symphonia::core::errors::Error as DecodeError;
use symphonia::core::formats::FormatOptions;
use symphonia::core::io::{MediaSourceStream, MediaSourceStreamOptions};
use symphonia::core::meta::MetadataOptions;
use symphonia::core::probe::Hint;

/// A decoded clip: mono samples, nominally in [-1, 1], at the file's own rate.
#[derive(Debug, Clone, PartialEq)]
pub struct Clip {
    pub samples: Vec<f32>,
    pub sample_rate: u32,
}

impl Clip {
    pub fn duration_seconds(&self) -> f64 {
        self.samples.len() as f64 / f64::from(self.sample_rate)
    }
}

/// Below this rate a voice loses what tells it apart; the Python omnivoice-server refuses
/// uploads under 8000 Hz too.
pub const MIN_SAMPLE_RATE: u32 = 8_000;

/// Above this rate nothing is gained for speech, and it bounds the samples a clip of
/// [`MAX_SECONDS`] may hold.
pub const MAX_SAMPLE_RATE: u32 = 192_000;

/// Shortest accepted clip. The Python omnivoice-server has no minimum (it only refuses files of
/// zero frames); half a second is less than one word, under which no voice can be learnt.
pub const MIN_SECONDS: f64 = 0.5;

/// Longest accepted clip. The Python server has no maximum beyond its 25 MiB upload limit; a
/// reference of a few seconds is what cloning uses, and a minute bounds the decoded samples
/// (at most 60 s × 192 kHz × 4 bytes ≈ 46 MB per request) whatever the file claims.
pub const MAX_SECONDS: f64 = 60.0;

/// Most channels accepted; more is no recording of a voice (and multiplies the work).
pub const MAX_CHANNELS: usize = 8;

/// Why an upload is no usable clip.
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    #[error("the audio file is empty")]
    Empty,
    #[error("the audio file is in no known format (WAV, FLAC, MP3, Ogg Vorbis, M4A/AAC are)")]
    UnknownFormat,
    #[error("the audio is encoded with {codec}, which this server cannot decode (use WAV, FLAC, MP3, Ogg Vorbis or M4A/AAC)")]
    UnsupportedCodec { codec: String },
    #[error("the audio file could not be decoded")]
    Undecodable(#[source] DecodeError),
    #[error("the audio file is corrupt: {0}")]
    Corrupt(String),
    #[error("the sample rate of {rate} Hz is too low (at least {MIN_SAMPLE_RATE} Hz)")]
    SampleRateTooLow { rate: u32 },
    #[error("the sample rate of {rate} Hz is too high (at most {MAX_SAMPLE_RATE} Hz)")]
    SampleRateTooHigh { rate: u32 },
    #[error("the audio has {channels} channels (at most {MAX_CHANNELS})")]
    TooManyChannels { channels: usize },
    #[error("the audio is {seconds:.2} s long, shorter than the minimum of {MIN_SECONDS} s")]
    TooShort { seconds: f64 },
    #[error("the audio is longer than the maximum of {MAX_SECONDS} s")]
    TooLong,
}

/// Decodes an uploaded audio file, whatever its format, into one mono clip.
pub fn decode_upload(bytes: &[u8]) -> Result<Clip, UploadError> {
    if bytes.is_empty() {
        return Err(UploadError::Empty);
    }
    // The decoders are written for trusted files; a panic on a hostile one is one more way of
    // being corrupt, not a reason to take the request (or a worker) down.
    match catch_unwind(AssertUnwindSafe(|| decode(bytes))) {
        Ok(result) => result,
        Err(_) => Err(UploadError::Corrupt(
            "the decoder failed on its contents".into(),
        )),
    }
}

fn decode(bytes: &[u8]) -> Result<Clip, UploadError> {
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
            DecodeError::Unsupported(_) => UploadError::UnknownFormat,
            // A format's marker was found, and the file ends inside the header after it.
            DecodeError::IoError(ref io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
                UploadError::Corrupt("it ends inside its header".into())
            }
            other => UploadError::Undecodable(other),
        })?;
    let mut format = probed.format;
    let track = format
        .tracks()
        .iter()
        .find(|t| t.codec_params.codec != CODEC_TYPE_NULL)
        .ok_or_else(|| UploadError::Corrupt("it holds no audio track".into()))?;
    let track_id = track.id;
    let params = track.codec_params.clone();
    // What the header claims is checked before any decoding; what the packets hold, below.
    if let Some(rate) = params.sample_rate {
        check_rate(rate)?;
    }
    if let Some(channels) = params.channels {
        check_channels(channels.count())?;
    }
    let mut decoder = symphonia::default::get_codecs()
        .make(&params, &DecoderOptions::default())
        .map_err(|e| match e {
            DecodeError::Unsupported(_) => UploadError::UnsupportedCodec {
                codec: codec_name(&params),
            },
            other => UploadError::Undecodable(other),
        })?;

    let mut mono: Vec<f32> = Vec::new();
    let mut rate: Option<u32> = None;
    let mut buffer: Option<SampleBuffer<f32>> = None;
    loop {
        let packet = match format.next_packet() {
            Ok(packet) => packet,
            // The end of the file, or of its readable part: a truncated file is a shorter clip.
            Err(DecodeError::IoError(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            // A chained stream starts over with new parameters; the first one is the clip.
            Err(DecodeError::ResetRequired) => break,
            Err(e) => return Err(UploadError::Undecodable(e)),
        };
        if packet.track_id() != track_id {
            continue;
        }
        let decoded = match decoder.decode(&packet) {
            Ok(decoded) => decoded,
            // One damaged packet (a broken MP3 frame) costs its few milliseconds, as players
            // skip it; a file of nothing but damage ends with no samples, refused below.
            Err(DecodeError::DecodeError(_)) => continue,
            Err(e) => return Err(UploadError::Undecodable(e)),
        };
        let spec = *decoded.spec();
        check_rate(spec.rate)?;
        check_channels(spec.channels.count())?;
        match rate {
            None => rate = Some(spec.rate),
            Some(r) if r != spec.rate => {
                return Err(UploadError::Corrupt(format!(
                    "its sample rate changes from {r} Hz to {} Hz",
                    spec.rate
                )))
            }
            Some(_) => {}
        }
        let max_samples = (MAX_SECONDS * f64::from(spec.rate)) as usize;
        if mono.len() + decoded.frames() > max_samples {
            return Err(UploadError::TooLong);
        }
        let channels = spec.channels.count().max(1);
        let needed = decoded.frames() * channels;
        let buffer = match &mut buffer {
            Some(b) if b.capacity() >= needed => b,
            slot => slot.insert(SampleBuffer::new(
                decoded.capacity().max(decoded.frames()) as u64,
                spec,
            )),
        };
        buffer.copy_interleaved_ref(decoded);
        mono.extend(
            buffer
                .samples()
                .chunks_exact(channels)
                .map(|frame| frame.iter().sum::<f32>() / channels as f32),
        );
    }
    let Some(sample_rate) = rate else {
        return Err(UploadError::TooShort { seconds: 0.0 });
    };
    if mono.iter().any(|s| !s.is_finite()) {
        return Err(UploadError::Corrupt(
            "it holds samples that are not numbers (NaN or infinite)".into(),
        ));
    }
    let clip = Clip {
        samples: mono,
        sample_rate,
    };
    let seconds = clip.duration_seconds();
    if seconds < MIN_SECONDS {
        return Err(UploadError::TooShort { seconds });
    }
    Ok(clip)
}

fn check_rate(rate: u32) -> Result<(), UploadError> {
    if rate < MIN_SAMPLE_RATE {
        Err(UploadError::SampleRateTooLow { rate })
    } else if rate > MAX_SAMPLE_RATE {
        Err(UploadError::SampleRateTooHigh { rate })
    } else {
        Ok(())
    }
}

fn check_channels(channels: usize) -> Result<(), UploadError> {
    if channels > MAX_CHANNELS {
        Err(UploadError::TooManyChannels { channels })
    } else {
        Ok(())
    }
}

/// The codec's short name, for the refusal of one that cannot be decoded.
fn codec_name(params: &symphonia::core::codecs::CodecParameters) -> String {
    symphonia::default::get_codecs()
        .get_codec(params.codec)
        .map(|d| d.short_name.to_string())
        .unwrap_or_else(|| {
            if params.codec == symphonia::core::codecs::CODEC_TYPE_OPUS {
                "Opus".into()
            } else {
                format!("an unknown codec ({})", params.codec)
            }
        })
}

/// How a stored clip's samples are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WavSamples {
    /// 16-bit integers: half the size, 96 dB of range, as most recordings come.
    Pcm16,
    /// 32-bit floats: the decoded samples exactly.
    Float32,
}

/// A clip as a complete mono WAV file at its own rate.
pub fn encode_wav(clip: &Clip, samples: WavSamples) -> Vec<u8> {
    let (bits, format) = match samples {
        WavSamples::Pcm16 => (16, hound::SampleFormat::Int),
        WavSamples::Float32 => (32, hound::SampleFormat::Float),
    };
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: clip.sample_rate,
        bits_per_sample: bits,
        sample_format: format,
    };
    let mut file = Cursor::new(Vec::with_capacity(
        44 + clip.samples.len() * bits as usize / 8,
    ));
    // Writing into memory cannot fail, and a decoded clip is far below WAV's 4 GiB limit.
    let written = (|| -> Result<(), hound::Error> {
        let mut writer = hound::WavWriter::new(&mut file, spec)?;
        for &sample in &clip.samples {
            match samples {
                WavSamples::Pcm16 => writer.write_sample(super::to_i16(sample))?,
                WavSamples::Float32 => writer.write_sample(sample)?,
            }
        }
        writer.finalize()
    })();
    debug_assert!(written.is_ok(), "{written:?}");
    file.into_inner()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(seconds: f64, rate: u32) -> Vec<f32> {
        let n = (seconds * f64::from(rate)) as usize;
        (0..n)
            .map(|i| 0.5 * (i as f32 * 440.0 * std::f32::consts::TAU / rate as f32).sin())
            .collect()
    }

    fn wav(spec: hound::WavSpec, frames: usize, sample: impl Fn(usize, u16) -> f64) -> Vec<u8> {
        let mut file = Cursor::new(Vec::new());
        let mut writer = hound::WavWriter::new(&mut file, spec).unwrap();
        for i in 0..frames {
            for c in 0..spec.channels {
                let v = sample(i, c);
                match (spec.sample_format, spec.bits_per_sample) {
                    (hound::SampleFormat::Float, _) => writer.write_sample(v as f32).unwrap(),
                    (_, 8) => writer.write_sample((v * 127.0).round() as i8).unwrap(),
                    (_, 16) => writer.write_sample((v * 32767.0).round() as i16).unwrap(),
                    (_, 24) => writer
                        .write_sample((v * 8_388_607.0).round() as i32)
                        .unwrap(),
                    (_, 32) => writer
                        .write_sample((v * 2_147_483_647.0).round() as i32)
                        .unwrap(),
                    other => panic!("{other:?}"),
                }
            }
        }
        writer.finalize().unwrap();
        file.into_inner()
    }

    fn spec(channels: u16, rate: u32, bits: u16, float: bool) -> hound::WavSpec {
        hound::WavSpec {
            channels,
            sample_rate: rate,
            bits_per_sample: bits,
            sample_format: if float {
                hound::SampleFormat::Float
            } else {
                hound::SampleFormat::Int
            },
        }
    }

    #[test]
    fn every_wav_sample_format_decodes_to_the_same_mono_signal() {
        let rate = 16_000;
        let frames = 12_000;
        let signal = |i: usize| 0.5 * (i as f64 * 0.05).sin();
        for (bits, float, tolerance) in [
            // One step of the format's quantization (8-bit: 1/127), plus rounding.
            (8, false, 1.0 / 127.0),
            (16, false, 1.0 / 32767.0),
            (24, false, 1e-6),
            (32, false, 1e-6),
            (32, true, 1e-7),
        ] {
            let bytes = wav(spec(1, rate, bits, float), frames, |i, _| signal(i));
            let clip = decode_upload(&bytes).unwrap_or_else(|e| panic!("{bits} {float}: {e}"));
            assert_eq!(clip.sample_rate, rate);
            assert_eq!(clip.samples.len(), frames, "{bits}-bit");
            for (i, s) in clip.samples.iter().enumerate() {
                let error = (f64::from(*s) - signal(i)).abs();
                assert!(
                    error <= tolerance,
                    "{bits}-bit float={float} sample {i}: off by {error}"
                );
            }
        }
    }

    #[test]
    fn channels_are_averaged() {
        let bytes = wav(spec(2, 22_050, 16, false), 22_050, |_, c| {
            if c == 0 {
                0.5
            } else {
                -0.25
            }
        });
        let clip = decode_upload(&bytes).unwrap();
        assert_eq!(clip.samples.len(), 22_050);
        // (0.5 − 0.25) / 2, each side quantized to 16 bits first.
        assert!(clip.samples.iter().all(|s| (s - 0.125).abs() < 1e-4));
    }

    #[test]
    fn flac_mp3_and_ogg_vorbis_are_told_by_their_bytes() {
        // Our own encoders write FLAC and MP3; only the format's recognition and the length
        // are checked here (each codec's accuracy is symphonia's business).
        let samples = tone(1.0, 24_000);
        for format in [
            crate::audio::AudioFormat::Flac,
            crate::audio::AudioFormat::Mp3,
        ] {
            let bytes = crate::audio::encode(format, &samples, 24_000).unwrap();
            let clip = decode_upload(&bytes).unwrap_or_else(|e| panic!("{format:?}: {e}"));
            let seconds = clip.duration_seconds();
            assert!((0.95..1.1).contains(&seconds), "{format:?}: {seconds} s");
        }
    }

    #[test]
    fn opus_is_refused_by_name() {
        let samples = tone(1.0, 24_000);
        let bytes =
            crate::audio::encode(crate::audio::AudioFormat::Opus, &samples, 24_000).unwrap();
        match decode_upload(&bytes) {
            Err(UploadError::UnsupportedCodec { codec }) => {
                assert!(codec.to_lowercase().contains("opus"), "{codec}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn limits_are_refused() {
        assert!(matches!(decode_upload(&[]), Err(UploadError::Empty)));
        let low = wav(spec(1, 4_000, 16, false), 4_000, |_, _| 0.1);
        assert!(matches!(
            decode_upload(&low),
            Err(UploadError::SampleRateTooLow { rate: 4_000 })
        ));
        let short = wav(spec(1, 16_000, 16, false), 7_999, |_, _| 0.1);
        assert!(matches!(
            decode_upload(&short),
            Err(UploadError::TooShort { .. })
        ));
        let long = wav(spec(1, 8_000, 16, false), 8_000 * 61, |_, _| 0.1);
        assert!(matches!(decode_upload(&long), Err(UploadError::TooLong)));
        let wide = wav(spec(9, 8_000, 16, false), 8_000, |_, _| 0.1);
        assert!(matches!(
            decode_upload(&wide),
            Err(UploadError::TooManyChannels { channels: 9 })
        ));
        let nan = wav(spec(1, 8_000, 32, true), 8_000, |i, _| {
            if i == 100 {
                f64::NAN
            } else {
                0.1
            }
        });
        assert!(matches!(decode_upload(&nan), Err(UploadError::Corrupt(_))));
    }

    /// Garbage, every truncation of a real file, and headers that lie: errors, never a panic
    /// or a runaway allocation.
    #[test]
    fn hostile_bytes_are_errors_not_panics() {
        let good = wav(spec(1, 16_000, 16, false), 16_000, |i, _| {
            (i as f64).sin() * 0.3
        });
        assert!(decode_upload(&good).is_ok());
        assert!(matches!(
            decode_upload(b"this is certainly not audio, just some text"),
            Err(UploadError::UnknownFormat)
        ));
        for cut in (0..200).chain((200..good.len()).step_by(997)) {
            // A cut inside the samples is a shorter, still valid, clip.
            let _ = decode_upload(&good[..cut]);
        }
        assert!(
            matches!(decode_upload(&good[..30]), Err(UploadError::Corrupt(_))),
            "a cut inside the header"
        );

        // A header claiming 4 GiB of data, 65535 channels, or a rate of 0.
        let mut huge = good.clone();
        huge[40..44].copy_from_slice(&u32::MAX.to_le_bytes());
        huge[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        let _ = decode_upload(&huge);
        let mut channels = good.clone();
        channels[22..24].copy_from_slice(&u16::MAX.to_le_bytes());
        assert!(decode_upload(&channels).is_err());
        let mut zero_rate = good.clone();
        zero_rate[24..28].copy_from_slice(&0u32.to_le_bytes());
        assert!(decode_upload(&zero_rate).is_err());

        // Deterministic pseudo-random bytes, bare and behind every format's magic number.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut noise = |n: usize| -> Vec<u8> {
            (0..n)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state as u8
                })
                .collect()
        };
        let magics: [&[u8]; 7] = [
            b"",
            b"RIFF\xff\xff\xff\xffWAVEfmt ",
            b"fLaC",
            b"ID3\x03\x00\x00\x00\x00\x00\x00",
            b"OggS\x00\x02",
            b"\x00\x00\x00\x20ftypM4A ",
            b"\x1aE\xdf\xa3",
        ];
        for magic in magics {
            for size in [1, 64, 4096] {
                let mut bytes = magic.to_vec();
                bytes.extend(noise(size));
                let _ = decode_upload(&bytes);
            }
        }
    }

    #[test]
    fn stored_wav_reads_back() {
        let clip = Clip {
            samples: tone(0.6, 24_000),
            sample_rate: 24_000,
        };
        let exact = decode_upload(&encode_wav(&clip, WavSamples::Float32)).unwrap();
        assert_eq!(exact, clip);
        let pcm = decode_upload(&encode_wav(&clip, WavSamples::Pcm16)).unwrap();
        assert_eq!(pcm.samples.len(), clip.samples.len());
        // Written as round(x · 32767), read back as n / 32768 (symphonia's scale): half a step
        // of rounding plus |x| / 32768 of scale, at most one step for |x| ≤ 1.
        let worst = pcm
            .samples
            .iter()
            .zip(&clip.samples)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        assert!(worst <= 1.0 / 32767.0, "{worst}");
    }
}
