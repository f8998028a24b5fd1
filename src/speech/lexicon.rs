//! The server's pronunciation dictionary as it changes: one current version that requests
//! take a snapshot of, changed over the API and saved to its file before it takes effect.
//!
//! A change is written to a temporary file beside the dictionary's, synced and renamed over
//! it, so a crash leaves the old file or the new one, never half of one; and it becomes the
//! current version only once that succeeded, so what requests hear is always what a restart
//! would load. Cached audio needs no flush: its key holds a digest of the entries its text
//! uses (`Lexicon::digest_of`), so a change makes exactly the audio it affects miss.
//!
//! Replicas may share the file (one data volume). Each request's snapshot first compares the
//! file with the one it was read from (its size, time and inode: a rename makes a new inode),
//! and reads it again when another process changed it; a change takes an exclusive lock on a
//! file beside the dictionary, reads the latest, applies itself and saves before it lets go,
//! so two replicas changing it at once both land, one after the other.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use parking_lot::RwLock;
use sha2::{Digest, Sha256};

use super::error::{Failure, SpeechError};
use crate::text::lexicon::{self, Entry, Lexicon};

/// The dictionary, shared by every request.
pub struct LexiconStore {
    current: RwLock<Arc<Lexicon>>,
    /// Where changes are saved; `None` keeps them in memory only.
    file: Option<PathBuf>,
    /// The file as `current` was read from it or saved to it (`None`: there was none).
    read_from: parking_lot::Mutex<Option<Stamp>>,
    /// One change at a time: each is read, saved and published before the next starts.
    changing: tokio::sync::Mutex<()>,
}

/// The dictionary as clients see it.
#[derive(Debug, Clone)]
pub struct LexiconView {
    pub entries: Vec<Entry>,
    /// A digest of the whole dictionary: equal versions are equal dictionaries.
    pub version: String,
    /// Whether changes are saved to a file (`--lexicon`).
    pub persistent: bool,
}

impl LexiconStore {
    /// The dictionary in `file` (none yet: an empty one, written on the first change), or an
    /// empty one kept in memory. A file that cannot be read or holds a bad entry is an error
    /// naming it.
    pub fn open(file: Option<PathBuf>) -> Result<Self, LexiconFileError> {
        let stamp = file.as_deref().and_then(Stamp::of);
        let lexicon = match &file {
            Some(path) if stamp.is_some() => load(path)?,
            _ => Lexicon::default(),
        };
        Ok(Self {
            current: RwLock::new(Arc::new(lexicon)),
            file,
            read_from: parking_lot::Mutex::new(stamp),
            changing: tokio::sync::Mutex::new(()),
        })
    }

    /// The dictionary now: a request keeps the one it started with. With a file, this reads
    /// its metadata (and, when another process changed it, the file): call it off the async
    /// threads.
    pub fn current(&self) -> Arc<Lexicon> {
        self.follow_the_file();
        self.current.read().clone()
    }

    /// Reads the file again if another process (a replica on the same volume) changed it since
    /// it was read here. A file that became unreadable or invalid keeps the dictionary as it
    /// was, with a warning: the next good write is taken up.
    fn follow_the_file(&self) {
        let Some(path) = &self.file else {
            return;
        };
        let mut read_from = self.read_from.lock();
        self.take_up(read_if_changed(path, *read_from), &mut read_from);
    }

    /// Makes what [`read_if_changed`] found the current dictionary.
    fn take_up(&self, found: OnDisk, read_from: &mut Option<Stamp>) {
        match found {
            OnDisk::AsRead => {}
            OnDisk::Changed(lexicon, stamp) => {
                *self.current.write() = Arc::new(lexicon);
                *read_from = stamp;
            }
            OnDisk::Invalid(e) => tracing::warn!(
                error = %super::chain(&e),
                "the lexicon changed on disk and cannot be read; keeping the one loaded"
            ),
        }
    }

    /// The dictionary as clients see it (reading the file again if another process changed
    /// it, hence off the async threads).
    pub fn view(&self) -> LexiconView {
        self.view_of(&self.current())
    }

    /// Puts `entries` in (replacing those for the same word and language), or, with
    /// `replace`, makes them the whole dictionary.
    pub async fn put(
        &self,
        entries: Vec<Entry>,
        replace: bool,
    ) -> Result<LexiconView, SpeechError> {
        self.change(|current| {
            if replace {
                Lexicon::new(entries)
            } else {
                current.with(entries)
            }
            .map(Some)
            .map_err(SpeechError::InvalidLexicon)
        })
        .await
    }

    /// Removes the entries for `word` (of `language` only, when given).
    pub async fn remove(
        &self,
        word: &str,
        language: Option<&str>,
    ) -> Result<LexiconView, SpeechError> {
        self.change(|current| match current.without(word, language) {
            Some(fewer) => Ok(Some(fewer)),
            None => Err(SpeechError::LexiconEntryNotFound(format!(
                "The pronunciation dictionary has no entry for '{word}'{}.",
                language.map_or(String::new(), |l| format!(" in language '{l}'"))
            ))),
        })
        .await
    }

    /// Empties the dictionary.
    pub async fn clear(&self) -> Result<LexiconView, SpeechError> {
        self.change(|_| Ok(Some(Lexicon::default()))).await
    }

    async fn change(
        &self,
        make: impl FnOnce(&Lexicon) -> Result<Option<Lexicon>, SpeechError>,
    ) -> Result<LexiconView, SpeechError> {
        let _one_at_a_time = self.changing.lock().await;
        let Some(path) = self.file.clone() else {
            let current = self.current();
            let next = make(&current)?.map(Arc::new).unwrap_or(current);
            *self.current.write() = next.clone();
            return Ok(self.view_of(&next));
        };
        // Other processes' changes wait for this one, and this one starts from theirs.
        let lock = {
            let path = path.clone();
            crate::blocking::run(move || lock_beside(&path))
                .await
                .map_err(SpeechError::LexiconStorage)?
        };
        let known = *self.read_from.lock();
        let found = {
            let path = path.clone();
            crate::blocking::run(move || read_if_changed(&path, known)).await
        };
        self.take_up(found, &mut self.read_from.lock());
        let current = self.current.read().clone();
        let Some(next) = make(&current)? else {
            return Ok(self.view_of(&current));
        };
        let content = lexicon::file_content(&path.to_string_lossy(), next.entries());
        let saved = crate::blocking::run(move || {
            save(&path, content.as_bytes())?;
            Ok(Stamp::of(&path))
        })
        .await
        .map_err(SpeechError::LexiconStorage)?;
        drop(lock);
        *self.read_from.lock() = saved;
        let view = self.view_of(&next);
        *self.current.write() = Arc::new(next);
        Ok(view)
    }

    fn view_of(&self, current: &Lexicon) -> LexiconView {
        LexiconView {
            version: version_of(current.entries()),
            entries: current.entries().to_vec(),
            persistent: self.file.is_some(),
        }
    }
}

/// The dictionary's file, compared with the version read last.
enum OnDisk {
    /// The same file.
    AsRead,
    /// Another version (an empty dictionary when the file is gone), and its stamp.
    Changed(Lexicon, Option<Stamp>),
    /// Another version that cannot be read or holds a bad entry.
    Invalid(LexiconFileError),
}

fn read_if_changed(path: &Path, known: Option<Stamp>) -> OnDisk {
    let now = Stamp::of(path);
    if now == known {
        return OnDisk::AsRead;
    }
    match now {
        None => OnDisk::Changed(Lexicon::default(), None),
        Some(_) => match load(path) {
            Ok(lexicon) => OnDisk::Changed(lexicon, now),
            Err(e) => OnDisk::Invalid(e),
        },
    }
}

/// What identifies one version of a file without reading it: a write by rename makes a new
/// inode, and an edit in place changes the time or the size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    inode: u64,
    len: u64,
    modified: Option<SystemTime>,
}

impl Stamp {
    /// `None` when there is no file (or it cannot be looked at).
    fn of(path: &Path) -> Option<Self> {
        use std::os::unix::fs::MetadataExt;
        let metadata = std::fs::metadata(path).ok()?;
        Some(Self {
            inode: metadata.ino(),
            len: metadata.len(),
            modified: metadata.modified().ok(),
        })
    }
}

/// An exclusive lock on `<path>.lock`, held until the file is dropped: how processes sharing
/// the dictionary take turns to change it (flock; NFS clients lock on the server).
fn lock_beside(path: &Path) -> Result<File, Failure> {
    let mut name = path.as_os_str().to_os_string();
    name.push(".lock");
    let failed = |e: std::io::Error| {
        Failure::new(
            format_args!("locking the lexicon {} failed", path.display()),
            e,
        )
    };
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&name)
        .map_err(failed)?;
    file.lock().map_err(failed)?;
    Ok(file)
}

fn load(path: &Path) -> Result<Lexicon, LexiconFileError> {
    let at = || path.to_path_buf();
    let content = std::fs::read_to_string(path)
        .map_err(|source| LexiconFileError::Unreadable { path: at(), source })?;
    let entries = lexicon::parse_file(&path.to_string_lossy(), &content)
        .map_err(|source| LexiconFileError::Malformed { path: at(), source })?;
    Lexicon::new(entries).map_err(|source| LexiconFileError::BadEntry { path: at(), source })
}

/// Why the dictionary's file cannot be opened; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum LexiconFileError {
    #[error("cannot read the lexicon {}", path.display())]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the lexicon {} is not valid", path.display())]
    Malformed {
        path: PathBuf,
        #[source]
        source: lexicon::FileFormatError,
    },
    #[error("the lexicon {} is not valid: {}", path.display(), source.field)]
    BadEntry {
        path: PathBuf,
        #[source]
        source: lexicon::LexiconError,
    },
}

/// Writes `content` to `path` so that a reader (or a crash) sees the old file or the new one:
/// a temporary file in the same directory, synced, renamed over `path`, and the directory
/// synced so that the rename itself survives a power cut.
fn save(path: &Path, content: &[u8]) -> Result<(), Failure> {
    use std::io::Write;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let failed = |what: &str, e: std::io::Error| {
        Failure::new(
            format_args!("saving the lexicon {} failed ({what})", path.display()),
            e,
        )
    };
    let mut temp = tempfile::NamedTempFile::new_in(dir).map_err(|e| failed("temporary file", e))?;
    temp.write_all(content)
        .and_then(|()| temp.as_file().sync_all())
        .map_err(|e| failed("write", e))?;
    temp.persist(path).map_err(|e| failed("rename", e.error))?;
    if let Ok(dir) = std::fs::File::open(dir) {
        // Not every filesystem can sync a directory; the rename is done either way.
        let _ = dir.sync_all();
    }
    Ok(())
}

fn version_of(entries: &[Entry]) -> String {
    let canonical = serde_json::to_vec(entries).expect("entries serialize");
    let digest = Sha256::digest(&canonical);
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alias(word: &str, alias: &str) -> Entry {
        Entry {
            word: word.into(),
            alias: Some(alias.into()),
            ipa: None,
            language: None,
            case_sensitive: false,
        }
    }

    fn on_runtime(work: impl std::future::Future<Output = ()>) {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(work);
    }

    #[test]
    fn changes_are_saved_and_read_back_by_a_new_store() {
        on_runtime(async {
            let dir = tempfile::tempdir().unwrap();
            for name in ["lexicon.toml", "lexicon.json"] {
                let path = dir.path().join(name);
                let store = LexiconStore::open(Some(path.clone())).unwrap();
                assert!(store.view().entries.is_empty());
                let empty = store.view().version;
                let view = store
                    .put(
                        vec![alias("nginx", "engine x"), alias("Tom", "Thomas")],
                        false,
                    )
                    .await
                    .unwrap();
                assert_ne!(view.version, empty);
                store.remove("tom", None).await.unwrap();
                let again = LexiconStore::open(Some(path.clone())).unwrap();
                assert_eq!(again.view().entries, [alias("nginx", "engine x")], "{name}");
                assert_eq!(again.view().version, store.view().version);
                let leftovers: Vec<_> = std::fs::read_dir(dir.path())
                    .unwrap()
                    .map(|e| e.unwrap().file_name())
                    .filter(|n| !n.to_string_lossy().starts_with("lexicon."))
                    .collect();
                assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
            }
        });
    }

    #[test]
    fn a_refused_change_changes_nothing() {
        on_runtime(async {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("lexicon.toml");
            let store = LexiconStore::open(Some(path.clone())).unwrap();
            store.put(vec![alias("a", "b")], false).await.unwrap();
            let before = std::fs::read(&path).unwrap();
            let bad = Entry {
                ipa: Some("k1".into()),
                alias: None,
                ..alias("x", "")
            };
            let error = store.put(vec![bad], true).await.unwrap_err();
            assert!(
                matches!(&error, SpeechError::InvalidLexicon(e) if e.field == "entries[0].ipa")
            );
            assert!(matches!(
                store.remove("nobody", None).await,
                Err(SpeechError::LexiconEntryNotFound(_))
            ));
            assert_eq!(std::fs::read(&path).unwrap(), before);
            assert_eq!(store.current().entries().len(), 1);
        });
    }

    #[test]
    fn a_save_that_fails_is_an_error_and_is_not_applied() {
        on_runtime(async {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("missing-dir").join("lexicon.toml");
            let store = LexiconStore::open(Some(path)).unwrap();
            let error = store.put(vec![alias("a", "b")], false).await.unwrap_err();
            assert!(matches!(error, SpeechError::LexiconStorage(_)), "{error:?}");
            assert!(store.current().is_empty());
        });
    }

    /// Two stores on one file are two replicas on one volume: each sees the other's changes
    /// at its next read, and changes made at once both land.
    #[test]
    fn stores_sharing_a_file_follow_each_other() {
        on_runtime(async {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("lexicon.toml");
            let a = LexiconStore::open(Some(path.clone())).unwrap();
            let b = LexiconStore::open(Some(path.clone())).unwrap();
            a.put(vec![alias("nginx", "engine x")], false)
                .await
                .unwrap();
            assert_eq!(b.view().entries, [alias("nginx", "engine x")]);
            assert_eq!(b.view().version, a.view().version);
            b.remove("nginx", None).await.unwrap();
            assert!(a.current().is_empty(), "a removal on B is heard on A");

            let words: Vec<String> = (0..8).map(|i| format!("word{i}")).collect();
            let changes = words.iter().enumerate().map(|(i, word)| {
                let store = if i % 2 == 0 { &a } else { &b };
                store.put(vec![alias(word, "x")], false)
            });
            for change in futures::future::join_all(changes).await {
                change.unwrap();
            }
            for store in [&a, &b] {
                let mut heard: Vec<String> =
                    store.view().entries.into_iter().map(|e| e.word).collect();
                heard.sort();
                assert_eq!(heard, words, "no change lost");
            }

            // An edit by hand that breaks the file keeps what was loaded; deleting it empties.
            std::fs::write(&path, "[[entries]]\nword = \"a\"\n").unwrap();
            assert_eq!(a.current().entries().len(), words.len());
            std::fs::remove_file(&path).unwrap();
            assert!(b.current().is_empty());
        });
    }

    #[test]
    fn a_bad_file_is_refused_at_startup_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lexicon.toml");
        std::fs::write(&path, "[[entries]]\nword = \"a\"\n").unwrap();
        let error = super::super::chain(&LexiconStore::open(Some(path.clone())).err().unwrap());
        assert!(
            error.contains(&path.display().to_string()) && error.contains("entries[0].ipa"),
            "{error}"
        );
    }
}
