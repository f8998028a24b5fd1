//! The stored form of a cached body in Redis: the bytes with what a front door says about
//! them, in a small versioned binary envelope that checks itself.
//!
//! Redis is shared with other replicas, other versions of this server and whatever else an
//! operator points at it, so a value read back is untrusted until it proves otherwise: it must
//! start with this format's magic and version, name the key it was stored under (a value
//! copied or renamed to another key is foreign), have the length it claims and match its
//! checksum. Anything else is no value at all: the caller counts it and synthesizes.

use bytes::Bytes;

use super::{CachedAudio, KeyHash};

const MAGIC: &[u8; 4] = b"OVCA";
/// 2 added the flags byte.
const VERSION: u8 = 2;
/// magic, version, flags, sample rate (u32), duration (f64), key (32 bytes), body length (u64).
const HEADER: usize = 4 + 1 + 1 + 4 + 8 + 32 + 8;
/// A flag: the audio sounded like no speech.
const NO_SPEECH: u8 = 1;
/// CRC-32 of everything before it: cheap enough for megabytes, and corruption is all it is
/// for (the key check above refuses values stored for another request).
const TRAILER: usize = 4;

/// The envelope of `audio` stored under `key`.
pub fn seal(key: &KeyHash, audio: &CachedAudio) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + audio.bytes.len() + TRAILER);
    out.extend_from_slice(MAGIC);
    out.push(VERSION);
    out.push(if audio.no_speech { NO_SPEECH } else { 0 });
    out.extend_from_slice(&audio.sample_rate.to_le_bytes());
    out.extend_from_slice(&audio.duration_s.to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&(audio.bytes.len() as u64).to_le_bytes());
    out.extend_from_slice(&audio.bytes);
    let checksum = crc32fast::hash(&out);
    out.extend_from_slice(&checksum.to_le_bytes());
    out
}

/// Why a stored value was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("not an envelope of this server (wrong magic or too short)")]
    Foreign,
    #[error("an envelope of another format version")]
    OtherVersion,
    #[error("stored for another key")]
    OtherKey,
    #[error("length or checksum does not match")]
    Corrupt,
}

/// The audio in `value`, if it is an intact envelope stored under `key`. The body is a view
/// of `value`, not a copy.
pub fn open(key: &KeyHash, value: Bytes) -> Result<CachedAudio, Refused> {
    if value.len() < HEADER + TRAILER || &value[..4] != MAGIC {
        return Err(Refused::Foreign);
    }
    if value[4] != VERSION {
        return Err(Refused::OtherVersion);
    }
    let (sealed, checksum) = value.split_at(value.len() - TRAILER);
    if crc32fast::hash(sealed).to_le_bytes() != checksum {
        return Err(Refused::Corrupt);
    }
    let field = |at: usize, n: usize| &value[at..at + n];
    if field(18, 32) != key {
        return Err(Refused::OtherKey);
    }
    let flags = value[5];
    let sample_rate = u32::from_le_bytes(field(6, 4).try_into().expect("4 bytes"));
    let duration_s = f64::from_le_bytes(field(10, 8).try_into().expect("8 bytes"));
    let length = u64::from_le_bytes(field(50, 8).try_into().expect("8 bytes"));
    if length != (sealed.len() - HEADER) as u64 || !duration_s.is_finite() {
        return Err(Refused::Corrupt);
    }
    Ok(CachedAudio {
        bytes: value.slice(HEADER..sealed.len()),
        sample_rate,
        duration_s,
        no_speech: flags & NO_SPEECH != 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn audio() -> CachedAudio {
        CachedAudio {
            bytes: Bytes::from((0..=255u8).cycle().take(1000).collect::<Vec<_>>()),
            sample_rate: 22050,
            duration_s: 1.25,
            no_speech: true,
        }
    }

    #[test]
    fn a_sealed_value_opens_to_the_same_audio() {
        let key = [9; 32];
        let opened = open(&key, Bytes::from(seal(&key, &audio()))).unwrap();
        assert_eq!(opened.bytes, audio().bytes);
        assert_eq!(opened.sample_rate, 22050);
        assert_eq!(opened.duration_s, 1.25);
        assert!(opened.no_speech);
    }

    #[test]
    fn any_flipped_byte_is_refused() {
        let key = [9; 32];
        let sealed = seal(&key, &audio());
        for at in [0, 4, 5, 6, 12, 20, 50, HEADER + 10, sealed.len() - 1] {
            let mut bad = sealed.clone();
            bad[at] ^= 0x40;
            assert!(open(&key, Bytes::from(bad)).is_err(), "byte {at}");
        }
    }

    #[test]
    fn foreign_truncated_and_misplaced_values_are_refused() {
        let key = [9; 32];
        let sealed = seal(&key, &audio());
        assert_eq!(
            open(&key, Bytes::from_static(b"garbage")).err(),
            Some(Refused::Foreign)
        );
        let truncated = Bytes::copy_from_slice(&sealed[..sealed.len() - 10]);
        assert_eq!(open(&key, truncated).err(), Some(Refused::Corrupt));
        assert_eq!(
            open(&[8; 32], Bytes::from(sealed.clone())).err(),
            Some(Refused::OtherKey)
        );
        let mut newer = sealed;
        newer[4] = VERSION + 1;
        assert_eq!(
            open(&key, Bytes::from(newer)).err(),
            Some(Refused::OtherVersion)
        );
    }
}
