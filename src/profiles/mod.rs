//! Voice profiles on disk: a reference clip and its transcript, saved under a name, for
//! cloning a voice again and again.
//!
//! The layout is the Python omnivoice-server's, so that its profiles are read unchanged and it
//! can read ours: `<profile_dir>/<id>/ref_audio.wav` and `<id>/meta.json`
//! (`{"name", "ref_text", "created_at"}`, `created_at` as Python's `isoformat()` of a UTC time,
//! two-space-indented JSON). Keys this server does not know are kept when it rewrites a file.
//! Python stored whatever bytes were uploaded under `ref_audio.wav` (an MP3, say); this store
//! writes 16-bit WAV, and [`Profile::audio`] is the file as it is, for
//! [`crate::audio::upload::decode_upload`] to read whichever it is. Encoded reference codes are
//! cached beside the clip (`codes-<fingerprint>-<audio sha256>.bin`), so a changed clip or
//! codec never meets stale codes; they go with the profile.
//!
//! Crashes never leave half a profile visible. Every file is written and synced in
//! `<profile_dir>/.staging/` before it is renamed into place (and the directory synced):
//! - a new profile is built there whole and renamed to `<id>` in one step;
//! - a change is built there as `build-…`, then renamed to `commit-<id>`: that rename is the
//!   commit. Its files then replace the live ones one by one. Whoever opens the store next
//!   finishes a commit a crash interrupted (redo), and deletes every other leftover (an
//!   uncommitted build: the old version stays);
//! - a deleted profile is renamed out of the listing first, then removed.
//!
//! `.staging` holds no `meta.json`, so neither this store nor the Python server lists it.
//!
//! Readers see one version whole through a per-store read-write lock rather than by hashing
//! and retrying: the window in which a change has replaced the clip but not yet the metadata
//! exists on disk whatever we do (two files cannot be renamed at once), and the lock keeps
//! every reader out of it, in one step and without retries; it also serializes the changes,
//! which must read the metadata they amend. The lock is per process: two servers must not
//! share a profile directory (nor may the Python server write to it while this one runs).
//! The IO blocks; async callers go through [`crate::blocking::run`].

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::audio::upload::{encode_wav, Clip, WavSamples};

mod timestamp;
pub mod voice_files;

/// The clip's file name, the Python server's.
pub const AUDIO_FILE: &str = "ref_audio.wav";
/// The metadata's file name, the Python server's.
pub const META_FILE: &str = "meta.json";
const STAGING: &str = ".staging";
const COMMIT: &str = "commit-";
const CODES_PREFIX: &str = "codes-";
const CODES_SUFFIX: &str = ".bin";
/// The longest id, and fingerprint (the Python server's rule for ids).
const MAX_ID_CHARS: usize = 64;

/// What a profile is, without its clip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileMeta {
    /// The directory's name, and what clients call it by (`clone:<id>`).
    pub id: String,
    /// A display name; the id unless one was given (the Python server always uses the id).
    pub name: String,
    /// What the clip says; `None` when not given.
    pub ref_text: Option<String>,
    /// When the profile was created, as the Python server writes it
    /// (`2026-12-03T10:42:15.123456+00:00`); `None` if its file has no date.
    pub created_at: Option<String>,
}

/// One version of a profile: the metadata and the clip that belong together.
#[derive(Debug, Clone)]
pub struct Profile {
    pub meta: ProfileMeta,
    /// `ref_audio.wav` as it is on disk: WAV when this store wrote it, any upload format when
    /// the Python server did.
    pub audio: Vec<u8>,
    /// SHA-256 of `audio`, lowercase hex: the key of its cached codes.
    pub audio_sha256: String,
}

/// What an update changes; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct ProfileChange {
    pub name: Option<String>,
    /// An empty transcript removes it.
    pub ref_text: Option<String>,
    /// A new clip. Without a new `ref_text` with it, the old transcript goes too: it said
    /// what the old clip says, and a wrong transcript misleads cloning worse than none (the
    /// Python server drops it likewise).
    pub clip: Option<Clip>,
}

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("'{0}' is no valid profile id: 1 to {MAX_ID_CHARS} letters, digits, '-' or '_'")]
    InvalidId(String),
    #[error(
        "'{0}' is no valid codes fingerprint: 1 to {MAX_ID_CHARS} letters, digits, '-' or '_'"
    )]
    InvalidFingerprint(String),
    #[error("the voice profile '{0}' already exists")]
    Exists(String),
    #[error("there is no voice profile '{0}'")]
    NotFound(String),
    #[error("voice profile storage failed: {context}")]
    Storage {
        context: String,
        #[source]
        source: io::Error,
    },
}

/// `meta.json` as the Python server writes it, plus whatever else a file holds.
#[derive(Debug, Serialize, Deserialize)]
struct MetaFile {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    ref_text: Option<String>,
    #[serde(default)]
    created_at: Option<String>,
    #[serde(flatten)]
    other: serde_json::Map<String, serde_json::Value>,
}

impl MetaFile {
    fn into_meta(self, id: &str) -> ProfileMeta {
        ProfileMeta {
            id: id.to_string(),
            name: self.name.unwrap_or_else(|| id.to_string()),
            ref_text: self.ref_text,
            created_at: self.created_at,
        }
    }
}

/// The voice profiles of one directory.
pub struct ProfileStore {
    dir: PathBuf,
    /// Readers share it; a change holds it alone from its first read to its last rename.
    lock: RwLock<()>,
}

impl ProfileStore {
    /// The store over `dir` (`<data_dir>/profiles`), finishing a change a crash interrupted
    /// and removing every other leftover of one. A directory that does not exist yet is made
    /// by the first profile saved.
    pub fn open(dir: impl Into<PathBuf>) -> io::Result<Self> {
        let store = Self {
            dir: dir.into(),
            lock: RwLock::new(()),
        };
        store.recover()?;
        Ok(store)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every complete profile (metadata and clip present, metadata readable), by id.
    pub fn list(&self) -> Result<Vec<ProfileMeta>, ProfileError> {
        let _read = self.lock.read();
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(storage(format!("cannot list {}", self.dir.display()), e)),
        };
        let mut profiles = Vec::new();
        for entry in entries {
            let entry =
                entry.map_err(|e| storage(format!("cannot list {}", self.dir.display()), e))?;
            let Some(id) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            if !is_valid_name(&id) || !entry.path().join(AUDIO_FILE).is_file() {
                continue;
            }
            if let Some(meta) = self.read_meta(&id) {
                profiles.push(meta.into_meta(&id));
            }
        }
        profiles.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(profiles)
    }

    /// What a profile is, without reading its clip: for answers that do not carry it. Like
    /// [`list`](Self::list), only a complete profile (metadata and clip present) counts.
    pub fn meta(&self, id: &str) -> Result<ProfileMeta, ProfileError> {
        check_id(id)?;
        let _read = self.lock.read();
        self.read_meta(id)
            .filter(|_| self.dir.join(id).join(AUDIO_FILE).is_file())
            .map(|meta| meta.into_meta(id))
            .ok_or_else(|| ProfileError::NotFound(id.to_string()))
    }

    /// One profile: metadata and clip of the same version.
    pub fn get(&self, id: &str) -> Result<Profile, ProfileError> {
        check_id(id)?;
        let _read = self.lock.read();
        let meta = self
            .read_meta(id)
            .ok_or_else(|| ProfileError::NotFound(id.to_string()))?;
        let audio = match fs::read(self.dir.join(id).join(AUDIO_FILE)) {
            Ok(audio) => audio,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(ProfileError::NotFound(id.to_string()))
            }
            Err(e) => return Err(storage(format!("cannot read the clip of '{id}'"), e)),
        };
        Ok(Profile {
            meta: meta.into_meta(id),
            audio_sha256: sha256_hex(&audio),
            audio,
        })
    }

    /// Saves a new profile; one of that id must not exist (in any state).
    pub fn create(
        &self,
        id: &str,
        name: Option<String>,
        ref_text: Option<String>,
        clip: &Clip,
    ) -> Result<ProfileMeta, ProfileError> {
        check_id(id)?;
        let _write = self.lock.write();
        if self.dir.join(id).symlink_metadata().is_ok() {
            return Err(ProfileError::Exists(id.to_string()));
        }
        let meta = new_meta(name, ref_text);
        if !self.create_locked(id, &encode_clip(clip), &meta)? {
            return Err(ProfileError::Exists(id.to_string()));
        }
        Ok(meta.into_meta(id))
    }

    /// Saves a profile whether or not one of that id exists (the Python server's
    /// `overwrite=true`): a new clip, transcript, name and creation date.
    pub fn replace(
        &self,
        id: &str,
        name: Option<String>,
        ref_text: Option<String>,
        clip: &Clip,
    ) -> Result<ProfileMeta, ProfileError> {
        check_id(id)?;
        let _write = self.lock.write();
        let meta = new_meta(name, ref_text);
        let audio = encode_clip(clip);
        if self.dir.join(id).is_dir() {
            self.commit_locked(id, Some(&audio), &meta)?;
        } else {
            // A file of that name, say; never made by this store.
            let _ = fs::remove_file(self.dir.join(id));
            if !self.create_locked(id, &audio, &meta)? {
                // Made meanwhile by another process on this directory: replaced all the same.
                self.commit_locked(id, Some(&audio), &meta)?;
            }
        }
        Ok(meta.into_meta(id))
    }

    /// Changes what `change` names and keeps the rest (the creation date too).
    pub fn update(&self, id: &str, change: ProfileChange) -> Result<ProfileMeta, ProfileError> {
        check_id(id)?;
        let _write = self.lock.write();
        let mut meta = self
            .read_meta(id)
            .filter(|_| self.dir.join(id).join(AUDIO_FILE).is_file())
            .ok_or_else(|| ProfileError::NotFound(id.to_string()))?;
        if let Some(name) = change.name {
            meta.name = Some(name);
        }
        if change.ref_text.is_some() || change.clip.is_some() {
            meta.ref_text = change.ref_text.filter(|t| !t.trim().is_empty());
        }
        let audio = change.clip.as_ref().map(encode_clip);
        self.commit_locked(id, audio.as_deref(), &meta)?;
        Ok(meta.into_meta(id))
    }

    /// Removes a profile and its cached codes; any directory of that id counts (so a broken
    /// one can be cleared).
    pub fn delete(&self, id: &str) -> Result<(), ProfileError> {
        check_id(id)?;
        let _write = self.lock.write();
        let live = self.dir.join(id);
        if !live.is_dir() {
            return Err(ProfileError::NotFound(id.to_string()));
        }
        let staging = self.staging()?;
        let trash = staging.join(format!("trash-{}", uuid::Uuid::new_v4()));
        fs::rename(&live, &trash).map_err(|e| storage(format!("cannot remove '{id}'"), e))?;
        sync_dir(&self.dir).map_err(|e| storage(format!("cannot remove '{id}'"), e))?;
        // Gone from every listing now; what is left is cleared at the next open if this fails.
        if let Err(e) = fs::remove_dir_all(&trash) {
            tracing::warn!(error = %e, dir = %trash.display(), "could not remove a deleted profile's files");
        }
        Ok(())
    }

    /// The codes cached for this profile's clip (by its SHA-256) and this codec
    /// (`fingerprint`), if any.
    pub fn codes(&self, id: &str, audio_sha256: &str, fingerprint: &str) -> Option<Vec<u8>> {
        if !is_valid_name(id) || !is_valid_name(fingerprint) || !is_sha256_hex(audio_sha256) {
            return None;
        }
        let _read = self.lock.read();
        fs::read(
            self.dir
                .join(id)
                .join(codes_file(fingerprint, audio_sha256)),
        )
        .ok()
    }

    /// Caches `bytes` as the codes of this profile's clip for this codec. Codes of a clip the
    /// profile no longer has (it changed since it was read) are not stored.
    pub fn store_codes(
        &self,
        id: &str,
        audio_sha256: &str,
        fingerprint: &str,
        bytes: &[u8],
    ) -> Result<(), ProfileError> {
        check_id(id)?;
        if !is_valid_name(fingerprint) {
            return Err(ProfileError::InvalidFingerprint(fingerprint.to_string()));
        }
        let _read = self.lock.read();
        let live = self.dir.join(id);
        let audio = match fs::read(live.join(AUDIO_FILE)) {
            Ok(audio) => audio,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(ProfileError::NotFound(id.to_string()))
            }
            Err(e) => return Err(storage(format!("cannot read the clip of '{id}'"), e)),
        };
        if sha256_hex(&audio) != audio_sha256 {
            return Ok(());
        }
        let context = || format!("cannot cache the codes of '{id}'");
        let staging = self.staging()?;
        let temporary = staging.join(format!("file-{}", uuid::Uuid::new_v4()));
        write_synced(&temporary, bytes).map_err(|e| storage(context(), e))?;
        fs::rename(&temporary, live.join(codes_file(fingerprint, audio_sha256)))
            .map_err(|e| storage(context(), e))?;
        sync_dir(&live).map_err(|e| storage(context(), e))
    }

    /// `<dir>/.staging`, made (with `<dir>`) if missing.
    fn staging(&self) -> Result<PathBuf, ProfileError> {
        let staging = self.dir.join(STAGING);
        fs::create_dir_all(&staging)
            .map_err(|e| storage(format!("cannot make {}", staging.display()), e))?;
        Ok(staging)
    }

    /// The metadata of `id`, if it has a readable `meta.json` (the Python server, too, skips
    /// a profile whose file it cannot parse).
    fn read_meta(&self, id: &str) -> Option<MetaFile> {
        let path = self.dir.join(id).join(META_FILE);
        let text = fs::read(&path).ok()?;
        match serde_json::from_slice::<MetaFile>(&text) {
            Ok(meta) => Some(meta),
            Err(e) => {
                tracing::warn!(error = %e, file = %path.display(), "unreadable voice profile metadata; the profile is skipped");
                None
            }
        }
    }

    /// Builds a whole profile in the staging directory and renames it into place; `false`
    /// when a profile of that id appeared meanwhile (another process on the same directory,
    /// as replicas on one volume are), which is then left as it is.
    fn create_locked(&self, id: &str, audio: &[u8], meta: &MetaFile) -> Result<bool, ProfileError> {
        let context = || format!("cannot save '{id}'");
        let staging = self.staging()?;
        let build = staging.join(format!("new-{}", uuid::Uuid::new_v4()));
        let live = self.dir.join(id);
        let built = (|| {
            fs::create_dir(&build)?;
            write_synced(&build.join(AUDIO_FILE), audio)?;
            write_synced(&build.join(META_FILE), &meta_json(meta))?;
            sync_dir(&build)?;
            // A directory is renamed onto an existing one only if that one is empty: a
            // profile made meanwhile is never replaced by accident.
            if let Err(e) = fs::rename(&build, &live) {
                return match live.symlink_metadata() {
                    Ok(_) => Ok(false),
                    Err(_) => Err(e),
                };
            }
            sync_dir(&self.dir).map(|()| true)
        })();
        if !matches!(built, Ok(true)) {
            let _ = fs::remove_dir_all(&build);
        }
        built.map_err(|e| storage(context(), e))
    }

    /// Replaces `id`'s metadata, and its clip when one is given, by a committed redo record.
    fn commit_locked(
        &self,
        id: &str,
        audio: Option<&[u8]>,
        meta: &MetaFile,
    ) -> Result<(), ProfileError> {
        let context = || format!("cannot save '{id}'");
        let staging = self.staging()?;
        let commit = staging.join(format!("{COMMIT}{id}"));
        if commit.exists() {
            // An earlier change that failed half-way here: finish it before this one.
            self.roll_forward(id).map_err(|e| storage(context(), e))?;
        }
        let build = staging.join(format!("build-{}", uuid::Uuid::new_v4()));
        let built = (|| {
            fs::create_dir(&build)?;
            if let Some(audio) = audio {
                write_synced(&build.join(AUDIO_FILE), audio)?;
            }
            write_synced(&build.join(META_FILE), &meta_json(meta))?;
            sync_dir(&build)?;
            fs::rename(&build, &commit)?;
            sync_dir(&staging)
        })();
        if built.is_err() {
            let _ = fs::remove_dir_all(&build);
        }
        built.map_err(|e| storage(context(), e))?;
        self.roll_forward(id).map_err(|e| storage(context(), e))
    }

    /// Moves the files of `commit-<id>` over the live ones, clip first, drops the codes of any
    /// other clip, and removes the record. Safe to repeat after a crash at any point.
    fn roll_forward(&self, id: &str) -> io::Result<()> {
        let staging = self.dir.join(STAGING);
        let commit = staging.join(format!("{COMMIT}{id}"));
        let live = self.dir.join(id);
        if live.is_dir() {
            for file in [AUDIO_FILE, META_FILE] {
                let from = commit.join(file);
                if from.exists() {
                    fs::rename(&from, live.join(file))?;
                }
            }
            sync_dir(&live)?;
            drop_stale_codes(&live)?;
        }
        fs::remove_dir_all(&commit)?;
        sync_dir(&staging)
    }

    /// Finishes committed changes and clears every other leftover of the staging directory.
    fn recover(&self) -> io::Result<()> {
        let staging = self.dir.join(STAGING);
        let entries = match fs::read_dir(&staging) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        let mut names = Vec::new();
        for entry in entries {
            names.push(entry?.file_name());
        }
        for name in names {
            let path = staging.join(&name);
            let committed = name
                .to_str()
                .and_then(|n| n.strip_prefix(COMMIT))
                .filter(|id| is_valid_name(id));
            if let Some(id) = committed {
                tracing::info!(
                    profile = id,
                    "finishing a voice profile change that a stop interrupted"
                );
                self.roll_forward(id)?;
            } else {
                tracing::info!(path = %path.display(), "removing an unfinished voice profile write");
                if path.is_dir() {
                    fs::remove_dir_all(&path)?;
                } else {
                    fs::remove_file(&path)?;
                }
            }
        }
        Ok(())
    }
}

fn new_meta(name: Option<String>, ref_text: Option<String>) -> MetaFile {
    MetaFile {
        name,
        ref_text: ref_text.filter(|t| !t.trim().is_empty()),
        created_at: Some(timestamp::now_isoformat()),
        other: serde_json::Map::new(),
    }
}

/// Two-space-indented JSON, keys in the Python server's order: its own files are byte for
/// byte what `json.dumps(meta, ensure_ascii=False, indent=2)` writes.
fn meta_json(meta: &MetaFile) -> Vec<u8> {
    serde_json::to_vec_pretty(meta).expect("a map of strings serializes")
}

/// Profiles are stored as 16-bit WAV: what most recordings are, readable by any tool, and
/// below the resolution any codec keeps.
fn encode_clip(clip: &Clip) -> Vec<u8> {
    encode_wav(clip, WavSamples::Pcm16)
}

/// Removes the cached codes of every clip but the one now in `live`.
fn drop_stale_codes(live: &Path) -> io::Result<()> {
    let current = match fs::read(live.join(AUDIO_FILE)) {
        Ok(audio) => sha256_hex(&audio),
        Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e),
    };
    for entry in fs::read_dir(live)? {
        let name = entry?.file_name();
        let Some(name) = name.to_str() else { continue };
        let stale = name
            .strip_prefix(CODES_PREFIX)
            .and_then(|rest| rest.strip_suffix(CODES_SUFFIX))
            .is_some_and(|rest| !rest.ends_with(&format!("-{current}")) || current.is_empty());
        if stale {
            fs::remove_file(live.join(name))?;
        }
    }
    Ok(())
}

fn codes_file(fingerprint: &str, audio_sha256: &str) -> String {
    format!("{CODES_PREFIX}{fingerprint}-{audio_sha256}{CODES_SUFFIX}")
}

/// Refuses an id that [`is_valid_name`] refuses, in the error every store method gives it.
pub fn check_id(id: &str) -> Result<(), ProfileError> {
    if is_valid_name(id) {
        Ok(())
    } else {
        Err(ProfileError::InvalidId(id.to_string()))
    }
}

/// `^[a-zA-Z0-9_-]{1,64}$`, the Python server's rule: safe as a file name and in a URL.
pub fn is_valid_name(name: &str) -> bool {
    (1..=MAX_ID_CHARS).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn storage(context: String, source: io::Error) -> ProfileError {
    ProfileError::Storage { context, source }
}

fn write_synced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = File::create(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Makes a directory's entries (a rename into it) durable.
fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        File::open(dir)?.sync_all()
    }
    // Windows cannot open a directory as a file; its renames are journaled by NTFS.
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
