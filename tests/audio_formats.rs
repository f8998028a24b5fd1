//! Every `response_format` is checked by decoding the encoder's output with an independent,
//! real decoder (symphonia for mp3/aac/flac/wav, libopus + an Ogg reader for opus, hound for the
//! WAV header): the right rate, the right duration, and audio that still resembles the input.
//! Streaming is checked by pushing uneven chunks and comparing with the one-shot encoding.

use std::io::Cursor;

mod common;

use common::decode::{best_correlation, decode, decode_raw_pcm, decode_with_symphonia, Decoded};
use common::signal::{voice_like, voice_like_frames};
use omnivoice_server::audio::resample::resample;
use omnivoice_server::audio::{encode, stream_encoder, AudioFormat};

const RATE: u32 = 22_050;

/// The encoders' float → 16-bit convention.
fn to_pcm16(sample: f32) -> i16 {
    (sample.clamp(-1.0, 1.0) * 32767.0).round() as i16
}

fn rms(x: &[f32]) -> f32 {
    (x.iter().map(|s| s * s).sum::<f32>() / x.len().max(1) as f32).sqrt()
}

fn expected_rate(format: AudioFormat) -> u32 {
    match format {
        AudioFormat::Opus => 48_000, // decoders always run Opus at 48 kHz
        AudioFormat::Pcm => 24_000,
        _ => RATE,
    }
}

/// FDK's AAC-LC encoder delay at any rate. ADTS has no field for it (MP4 would carry it in an
/// edit list), so decoders play it as leading silence.
const AAC_PRIMING: usize = 2_048;

/// Rate, duration and likeness checks shared by the one-shot and streamed paths.
fn check_decoded(format: AudioFormat, decoded: &Decoded, input: &[f32], whole_file: bool) {
    assert_eq!(
        decoded.rate,
        expected_rate(format),
        "{format}: decoded rate"
    );
    let reference = resample(input, RATE, decoded.rate).unwrap();
    let lossless = matches!(
        format,
        AudioFormat::Wav | AudioFormat::Flac | AudioFormat::Pcm
    );
    let mut priming = 0;
    if lossless {
        assert_eq!(
            decoded.samples.len(),
            reference.len(),
            "{format}: exact length"
        );
        // Decoders scale 16-bit samples by 1/32768; the encoder's convention is clip, × 32767,
        // round. Undoing both must give back exactly the same integers.
        let mismatches = decoded
            .samples
            .iter()
            .zip(&reference)
            .filter(|&(&d, &r)| to_pcm16(d * 32768.0 / 32767.0) != to_pcm16(r))
            .count();
        assert_eq!(
            mismatches, 0,
            "{format}: samples differ from the quantized input"
        );
    } else {
        let (correlation, lag) = best_correlation(&decoded.samples, &reference, 4_096);
        let aligned = &decoded.samples[lag..(lag + reference.len()).min(decoded.samples.len())];
        let level = rms(aligned) / rms(&reference);
        eprintln!("{format}: correlation {correlation:.4} at lag {lag}, level ratio {level:.3}");
        assert!(
            correlation > 0.9,
            "{format}: correlation {correlation} (lag {lag})"
        );
        assert!((0.8..1.25).contains(&level), "{format}: RMS ratio {level}");
        if format == AudioFormat::Mp3 && whole_file {
            // The LAME Info frame tells the decoder to trim the codec delay and padding.
            assert_eq!(lag, 0, "mp3: gapless trimming");
            assert_eq!(decoded.samples.len(), reference.len(), "mp3: exact length");
        }
        if format == AudioFormat::Aac {
            assert!(
                lag.abs_diff(AAC_PRIMING) < 64,
                "aac: priming of {lag} samples"
            );
            priming = AAC_PRIMING;
            assert_eq!(
                decoded.samples.len() % 1024,
                0,
                "aac: whole 1024-sample frames"
            );
        }
    }
    let input_seconds = input.len() as f32 / RATE as f32;
    let played_seconds = (decoded.samples.len() - priming) as f32 / decoded.rate as f32;
    let error = (played_seconds - input_seconds).abs() / input_seconds;
    assert!(
        error < 0.05,
        "{format}: decoded {played_seconds:.4} s (+{priming} priming samples) for \
         {input_seconds:.4} s of input"
    );
}

#[test]
fn every_format_decodes_to_the_input() {
    let input = voice_like(2.0, RATE);
    for format in AudioFormat::ALL {
        let bytes = encode(format, &input, RATE).unwrap();
        let decoded = decode(format, &bytes);
        check_decoded(format, &decoded, &input, true);
    }
}

/// Uneven, sentence-like chunk sizes (including one of a single sample and one empty push).
fn split_unevenly(input: &[f32]) -> Vec<&[f32]> {
    let mut chunks = Vec::new();
    let mut rest = input;
    for size in [7_001, 1, 0, 15_313, 9_999] {
        let (head, tail) = rest.split_at(size.min(rest.len()));
        chunks.push(head);
        rest = tail;
    }
    chunks.push(rest);
    chunks
}

fn encode_streamed(format: AudioFormat, input: &[f32]) -> (Vec<u8>, u32) {
    let mut encoder = stream_encoder(format, RATE).unwrap();
    let rate = encoder.sample_rate();
    let mut bytes = Vec::new();
    for chunk in split_unevenly(input) {
        bytes.extend(encoder.push(chunk).unwrap());
    }
    bytes.extend(encoder.finish().unwrap());
    (bytes, rate)
}

#[test]
fn streamed_chunks_form_one_valid_file() {
    let input = voice_like(2.0, RATE);
    for format in AudioFormat::ALL {
        let (streamed, rate) = encode_streamed(format, &input);
        assert_eq!(
            rate,
            format.output_sample_rate(RATE),
            "{format}: sample_rate()"
        );
        let decoded = decode(format, &streamed);
        check_decoded(format, &decoded, &input, false);

        // The resampler and the frame buffers carry their state across pushes, so splitting the
        // input must not change the audio at all: no clicks at chunk boundaries.
        let whole = encode(format, &input, RATE).unwrap();
        match format {
            AudioFormat::Wav => assert_eq!(streamed[44..], whole[44..], "wav payload"),
            // The whole file starts with LAME's Info frame, then the same audio frames.
            AudioFormat::Mp3 => assert!(whole.ends_with(&streamed), "mp3 frames differ"),
            // FLAC's streamed STREAMINFO differs; Ogg pages end at every push.
            AudioFormat::Flac | AudioFormat::Opus => {
                let whole = decode(format, &whole);
                assert_eq!(
                    decoded.samples, whole.samples,
                    "{format}: decoded samples differ"
                );
            }
            _ => assert!(
                streamed == whole,
                "{format}: streamed bytes differ from one-shot"
            ),
        }
    }
}

#[test]
fn streamed_pcm_matches_one_shot_resampling_across_boundaries() {
    let input = voice_like(1.5, RATE);
    let (streamed, _) = encode_streamed(AudioFormat::Pcm, &input);
    let decoded = decode_raw_pcm(&streamed);
    let one_shot = resample(&input, RATE, 24_000).unwrap();
    assert_eq!(decoded.samples.len(), one_shot.len());
    let worst = decoded
        .samples
        .iter()
        .zip(&one_shot)
        .map(|(d, r)| (d * 32768.0 - r * 32767.0).abs())
        .fold(0.0f32, f32::max);
    assert!(worst <= 0.5 + 1e-3, "max deviation {worst} LSB");
}

#[test]
fn every_push_returns_bytes_a_client_can_use() {
    let input = voice_like(2.0, RATE);
    for format in [
        AudioFormat::Opus,
        AudioFormat::Mp3,
        AudioFormat::Aac,
        AudioFormat::Flac,
    ] {
        let mut encoder = stream_encoder(format, RATE).unwrap();
        let first = encoder.push(&input[..RATE as usize]).unwrap();
        // A second of audio is far more than any codec buffers: audio must flow before finish.
        assert!(
            first.len() > 1_000,
            "{format}: only {} bytes after 1 s",
            first.len()
        );
        match format {
            AudioFormat::Opus => assert_eq!(&first[..4], b"OggS"),
            AudioFormat::Flac => assert_eq!(&first[..4], b"fLaC"),
            AudioFormat::Mp3 | AudioFormat::Aac => {
                assert_eq!(first[0], 0xFF, "{format}: frame sync");
                assert_eq!(first[1] & 0xE0, 0xE0, "{format}: frame sync");
            }
            _ => unreachable!(),
        }
        if format == AudioFormat::Opus {
            // Whole pages only: the bytes end exactly where the next page starts.
            let second = encoder.push(&input[RATE as usize..]).unwrap();
            assert_eq!(&second[..4], b"OggS");
        }
    }
}

#[test]
fn wav_headers_are_truthful() {
    let input = voice_like(1.0, RATE);
    let whole = encode(AudioFormat::Wav, &input, RATE).unwrap();
    let reader = hound::WavReader::new(Cursor::new(&whole)).unwrap();
    let spec = reader.spec();
    assert_eq!(
        (spec.sample_rate, spec.channels, spec.bits_per_sample),
        (RATE, 1, 16)
    );
    assert_eq!(reader.len() as usize, input.len());
    assert_eq!(whole.len(), 44 + 2 * input.len());

    // The streamed header declares an unknown length (hound refuses that, symphonia and ffmpeg
    // accept it) but the same format fields.
    let (streamed, _) = encode_streamed(AudioFormat::Wav, &input);
    assert_eq!(&streamed[4..8], &[0xFF; 4]);
    assert_eq!(&streamed[40..44], &[0xFF; 4]);
    assert_eq!(streamed[8..40], whole[8..40]);
    assert_eq!(streamed.len(), whole.len());
    let decoded = decode_with_symphonia(&streamed, "wav");
    assert_eq!(decoded.rate, RATE);
    assert_eq!(decoded.samples.len(), input.len());
}

#[test]
fn pcm_is_two_bytes_per_sample_at_24k() {
    for seconds in [0.5f32, 1.0, 2.0] {
        let input = voice_like(seconds, RATE);
        let bytes = encode(AudioFormat::Pcm, &input, RATE).unwrap();
        let expected_frames = (input.len() as f64 * 24_000.0 / RATE as f64).round() as usize;
        assert_eq!(bytes.len(), 2 * expected_frames);
    }
    // Input already at 24 kHz passes through untouched.
    let input = voice_like(0.25, 24_000);
    let bytes = encode(AudioFormat::Pcm, &input, 24_000).unwrap();
    assert_eq!(bytes.len(), 2 * input.len());
}

#[test]
fn flac_streaminfo_is_complete_for_whole_files() {
    let input = voice_like(1.0, RATE);
    let whole = encode(AudioFormat::Flac, &input, RATE).unwrap();
    assert_eq!(&whole[..4], b"fLaC");
    // STREAMINFO: total samples are the low 36 bits of bytes 18..26 of the block data.
    let info = &whole[8..42];
    let packed = u64::from_be_bytes(info[10..18].try_into().unwrap());
    assert_eq!((packed >> 44) as u32, RATE, "sample rate");
    assert_eq!(packed & 0xF_FFFF_FFFF, input.len() as u64, "total samples");
    assert_ne!(&info[18..34], &[0u8; 16], "MD5 present");

    let (streamed, _) = encode_streamed(AudioFormat::Flac, &input);
    let info = &streamed[8..42];
    let packed = u64::from_be_bytes(info[10..18].try_into().unwrap());
    assert_eq!(packed & 0xF_FFFF_FFFF, 0, "streamed length is unknown");
}

#[test]
fn short_and_empty_inputs_still_make_valid_files() {
    for format in AudioFormat::ALL {
        for frames in [0usize, 1, 100, 4_097] {
            let input = voice_like_frames(frames, RATE);
            let bytes = encode(format, &input, RATE).unwrap();
            let mut encoder = stream_encoder(format, RATE).unwrap();
            let mut streamed = encoder.push(&input).unwrap();
            streamed.extend(encoder.finish().unwrap());
            if format == AudioFormat::Pcm && frames == 0 {
                assert!(bytes.is_empty() && streamed.is_empty());
                continue;
            }
            assert!(!bytes.is_empty(), "{format} with {frames} frames");
            if frames > 0 && !matches!(format, AudioFormat::Pcm) {
                let decoded = decode(format, &bytes);
                assert_eq!(
                    decoded.rate,
                    expected_rate(format),
                    "{format} with {frames} frames"
                );
            }
        }
    }
}

#[test]
fn content_types_extensions_and_names() {
    let expected = [
        (AudioFormat::Mp3, "mp3", "audio/mpeg", "mp3"),
        (AudioFormat::Opus, "opus", "audio/ogg", "opus"),
        (AudioFormat::Aac, "aac", "audio/aac", "aac"),
        (AudioFormat::Flac, "flac", "audio/flac", "flac"),
        (AudioFormat::Wav, "wav", "audio/wav", "wav"),
        (AudioFormat::Pcm, "pcm", "audio/pcm", "pcm"),
    ];
    assert_eq!(AudioFormat::ALL.len(), expected.len());
    for (format, name, content_type, extension) in expected {
        assert_eq!(AudioFormat::parse(name), Some(format));
        assert_eq!(format.as_str(), name);
        assert_eq!(format.content_type(), content_type);
        assert_eq!(format.extension(), extension);
        let parsed: AudioFormat = serde_json::from_str(&format!("\"{name}\"")).unwrap();
        assert_eq!(parsed, format);
    }
    assert_eq!(AudioFormat::parse("Mp3"), None);
    assert_eq!(AudioFormat::parse("wave"), None);
    assert!(serde_json::from_str::<AudioFormat>("\"ogg\"").is_err());
}

/// The same checks on real speech: the default Piper voice (22050 Hz) reading two sentences,
/// pushed in two chunks cut inside a word.
#[test]
fn real_speech_round_trips_through_every_format() {
    use omnivoice_server::engine::piper::PiperEngine;
    use omnivoice_server::engine::{Engine, SynthesisItem};
    let voices = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("voices");
    let engine = PiperEngine::new(&voices, candle_core::Device::Cpu)
        .with_precision(Some(omnivoice_models::kernels::Precision::F32));
    let voice = engine
        .load_voice("en_US-joe-medium")
        .expect("the default voice (scripts/setup.sh installs it)");
    assert_eq!(voice.info().sample_rate, RATE);
    let text = "The quick brown fox jumps over the lazy dog. Sphinx of black quartz, judge my vow!";
    let mut speech = Vec::new();
    voice
        .synthesize_each(&[SynthesisItem::new(text)], &mut |_, pcm| {
            speech = pcm.samples
        })
        .unwrap();
    assert!(speech.len() > RATE as usize * 3, "{} samples", speech.len());
    let (first, second) = speech.split_at(speech.len() * 2 / 5);
    for format in AudioFormat::ALL {
        let mut encoder = stream_encoder(format, RATE).unwrap();
        let mut bytes = encoder.push(first).unwrap();
        bytes.extend(encoder.push(second).unwrap());
        bytes.extend(encoder.finish().unwrap());
        check_decoded(format, &decode(format, &bytes), &speech, false);
        let whole = encode(format, &speech, RATE).unwrap();
        check_decoded(format, &decode(format, &whole), &speech, true);
    }
}
