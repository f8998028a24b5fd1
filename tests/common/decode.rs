//! Real decoders for every response format, shared by the encoder and HTTP tests:
//! symphonia for mp3/aac/flac/wav, libopus + an Ogg reader for opus, plain bytes for pcm; and
//! the lag-searching correlation that compares a lossy decode with its input.

use std::io::Cursor;

use omnivoice_server::audio::AudioFormat;
use symphonia::core::audio::SampleBuffer;
use symphonia::core::codecs::DecoderOptions;
use symphonia::core::errors::Error as SymphoniaError;
use symphonia::core::formats::FormatOptions;
use symphonia::core::io::MediaSourceStream;
use symphonia::core::meta::MetadataOptions;
use symphonia::core::probe::Hint;

pub struct Decoded {
    pub rate: u32,
    pub samples: Vec<f32>,
}

pub fn decode_with_symphonia(bytes: &[u8], extension: &str) -> Decoded {
    let source = MediaSourceStream::new(Box::new(Cursor::new(bytes.to_vec())), Default::default());
    let mut hint = Hint::new();
    hint.with_extension(extension);
    let format_options = FormatOptions {
        enable_gapless: true,
        ..Default::default()
    };
    let probed = symphonia::default::get_probe()
        .format(&hint, source, &format_options, &MetadataOptions::default())
        .unwrap_or_else(|err| panic!("symphonia cannot probe {extension}: {err}"));
    let mut reader = probed.format;
    let track = reader.default_track().expect("a track").clone();
    let mut decoder = symphonia::default::get_codecs()
        .make(&track.codec_params, &DecoderOptions::default())
        .expect("a decoder for the track");
    let mut rate = track.codec_params.sample_rate.unwrap_or(0);
    let mut samples = Vec::new();
    loop {
        let packet = match reader.next_packet() {
            Ok(packet) => packet,
            Err(SymphoniaError::IoError(err))
                if err.kind() == std::io::ErrorKind::UnexpectedEof =>
            {
                break
            }
            Err(err) => panic!("{extension}: demuxing failed: {err}"),
        };
        let audio = decoder
            .decode(&packet)
            .unwrap_or_else(|err| panic!("{extension}: decoding failed: {err}"));
        assert_eq!(audio.spec().channels.count(), 1, "{extension} must be mono");
        rate = audio.spec().rate;
        let mut buffer = SampleBuffer::<f32>::new(audio.capacity() as u64, *audio.spec());
        buffer.copy_interleaved_ref(audio);
        samples.extend_from_slice(buffer.samples());
    }
    Decoded { rate, samples }
}

/// Ogg Opus per RFC 7845: OpusHead, OpusTags, audio packets; decoded at 48 kHz with pre-skip
/// removed and the end trimmed to the last granule position.
pub fn decode_ogg_opus(bytes: &[u8]) -> (Decoded, u32) {
    let mut reader = ogg::PacketReader::new(Cursor::new(bytes.to_vec()));
    let head = reader.read_packet_expected().expect("OpusHead packet");
    assert_eq!(&head.data[..8], b"OpusHead");
    assert_eq!(head.data[9], 1, "mono");
    assert!(head.last_in_page(), "OpusHead must be alone on its page");
    let pre_skip = u16::from_le_bytes([head.data[10], head.data[11]]) as usize;
    let input_rate = u32::from_le_bytes(head.data[12..16].try_into().unwrap());
    let tags = reader.read_packet_expected().expect("OpusTags packet");
    assert_eq!(&tags.data[..8], b"OpusTags");
    assert!(tags.last_in_page(), "OpusTags must end its page");

    let mut decoder = opus::Decoder::new(48_000, opus::Channels::Mono).unwrap();
    let mut samples = Vec::new();
    let mut frame = vec![0f32; 5_760];
    let mut last_granule = 0;
    let mut saw_end = false;
    while let Some(packet) = reader.read_packet().expect("valid Ogg pages") {
        assert!(!saw_end, "packets after the end of stream");
        let n = decoder
            .decode_float(&packet.data, &mut frame, false)
            .unwrap();
        samples.extend_from_slice(&frame[..n]);
        if packet.last_in_page() {
            assert!(
                packet.absgp_page() >= last_granule,
                "granules must not decrease"
            );
            last_granule = packet.absgp_page();
        }
        saw_end = packet.last_in_stream();
    }
    assert!(saw_end, "the stream must end with an end-of-stream page");
    assert!(
        last_granule as usize <= samples.len(),
        "final granule beyond decoded audio"
    );
    samples.truncate(last_granule as usize);
    samples.drain(..pre_skip.min(samples.len()));
    (
        Decoded {
            rate: 48_000,
            samples,
        },
        input_rate,
    )
}

pub fn decode_raw_pcm(bytes: &[u8]) -> Decoded {
    assert_eq!(bytes.len() % 2, 0);
    Decoded {
        rate: 24_000,
        samples: bytes
            .chunks_exact(2)
            .map(|b| f32::from(i16::from_le_bytes([b[0], b[1]])) / 32768.0)
            .collect(),
    }
}

pub fn decode(format: AudioFormat, bytes: &[u8]) -> Decoded {
    match format {
        AudioFormat::Opus => {
            let (decoded, head_rate) = decode_ogg_opus(bytes);
            assert_eq!(head_rate, 24_000, "OpusHead records the coding rate");
            decoded
        }
        AudioFormat::Pcm => decode_raw_pcm(bytes),
        _ => decode_with_symphonia(bytes, format.extension()),
    }
}

/// The best normalized correlation between `decoded` and `reference` over lags up to
/// `max_lag` (lossy codecs and ADTS carry an encoder delay), and the lag that achieves it.
pub fn best_correlation(decoded: &[f32], reference: &[f32], max_lag: usize) -> (f32, usize) {
    let mut best = (f32::MIN, 0);
    for lag in 0..=max_lag {
        let len = reference.len().min(decoded.len().saturating_sub(lag));
        if len < reference.len() / 2 {
            break;
        }
        let (a, b) = (&decoded[lag..lag + len], &reference[..len]);
        let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        let norm =
            (a.iter().map(|x| x * x).sum::<f32>() * b.iter().map(|y| y * y).sum::<f32>()).sqrt();
        let correlation = dot / norm.max(f32::MIN_POSITIVE);
        if correlation > best.0 {
            best = (correlation, lag);
        }
    }
    best
}
