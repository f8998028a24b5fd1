//! The server's pronunciation dictionary as it changes: one current version that requests
//! take a snapshot of, changed over the API and saved to its file before it takes effect.
//!
//! A change is written to a temporary file beside the dictionary's, synced and renamed over
//! it, so a crash leaves the old file or the new one, never half of one; and it becomes the
//! current version only once that succeeded, so what requests hear is always what a restart
//! would load. Cached audio needs no flush: its key holds a digest of the entries its text
//! uses (`Lexicon::digest_of`), so a change makes exactly the audio it affects miss.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;
use sha2::{Digest, Sha256};

use super::error::{Failure, SpeechError};
use crate::text::lexicon::{self, Entry, Lexicon};

/// The dictionary, shared by every request.
pub struct LexiconStore {
    current: RwLock<Arc<Lexicon>>,
    /// Where changes are saved; `None` keeps them in memory only.
    file: Option<PathBuf>,
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
        let lexicon = match &file {
            Some(path) if path.exists() => load(path)?,
            _ => Lexicon::default(),
        };
        Ok(Self {
            current: RwLock::new(Arc::new(lexicon)),
            file,
            changing: tokio::sync::Mutex::new(()),
        })
    }

    /// The dictionary now: a request keeps the one it started with.
    pub fn current(&self) -> Arc<Lexicon> {
        self.current.read().clone()
    }

    pub fn view(&self) -> LexiconView {
        let current = self.current();
        LexiconView {
            version: version_of(current.entries()),
            entries: current.entries().to_vec(),
            persistent: self.file.is_some(),
        }
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
        let current = self.current();
        let Some(next) = make(&current)? else {
            return Ok(self.view());
        };
        if let Some(path) = self.file.clone() {
            let content = lexicon::file_content(&path.to_string_lossy(), next.entries());
            crate::blocking::run(move || save(&path, content.as_bytes()))
                .await
                .map_err(SpeechError::LexiconStorage)?;
        }
        *self.current.write() = Arc::new(next);
        Ok(self.view())
    }
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
