//! Voice profiles and voice files as front doors see them: the list of every voice OmniVoice
//! answers to, and the profiles saved, read, changed and deleted.
//!
//! Both live on disk ([`crate::profiles`]); every call here reaches the files on a blocking
//! thread, so that no front door touches the disk from an async worker, and none needs to know
//! where the stores are. Refusals are [`ProfileError`]s, in the store's own words: which
//! answer each becomes is the front door's to say.

use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;

use super::SpeechService;
use crate::audio::upload::Clip;
use crate::engine::omnivoice::{self, AUTO, DESIGN, PRESETS};
use crate::params::VoiceDefaults;
use crate::profiles::voice_files::VoiceFiles;
use crate::profiles::ProfileStore;

pub use crate::profiles::{check_id, ProfileChange, ProfileError, ProfileMeta};

/// The stores a service serves profiles and voice files from (the OmniVoice engine reads the
/// same ones, to speak them).
pub(super) struct VoiceStores {
    profiles: Arc<ProfileStore>,
    voice_files: Arc<VoiceFiles>,
}

/// A profile to save.
#[derive(Debug)]
pub struct NewProfile {
    pub id: String,
    /// A display name; the id when `None`.
    pub name: Option<String>,
    /// What the clip says.
    pub ref_text: Option<String>,
    pub clip: Clip,
    /// Replace a profile of that id (its clip, transcript, name and date) instead of refusing.
    pub overwrite: bool,
}

/// Every voice OmniVoice answers to, and what its designs may combine.
#[derive(Debug)]
pub struct VoiceCatalog {
    /// `auto`, the design pattern, the presets (by name), the voice files (by name), then the
    /// profiles (by id).
    pub voices: Vec<CatalogVoice>,
    /// The attributes a design may combine, by category, at most one of each.
    pub design_attributes: BTreeMap<String, Vec<String>>,
}

/// One voice of the [`VoiceCatalog`].
#[derive(Debug)]
pub enum CatalogVoice {
    /// A voice every OmniVoice server has: `auto`, the design pattern, a preset.
    BuiltIn {
        id: String,
        kind: BuiltInKind,
        description: String,
    },
    /// A voice file whose design OmniVoice can follow.
    File {
        name: String,
        /// The file's `description`, else its design.
        description: String,
        /// The design, in canonical form.
        instructions: String,
        /// The settings the file gives the voice.
        defaults: VoiceDefaults,
    },
    /// A voice profile, spoken as `clone:<id>`.
    Profile(ProfileMeta),
}

/// Which built-in voice a [`CatalogVoice::BuiltIn`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuiltInKind {
    /// No design: the model chooses.
    Auto,
    /// The pattern of a designed voice.
    Design,
    /// An OpenAI voice name, standing for a design.
    Preset,
}

impl BuiltInKind {
    /// The name the Python omnivoice-server lists it by.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Design => "design",
            Self::Preset => "preset",
        }
    }
}

impl SpeechService {
    /// Serves the profiles of `profiles` and the voice files of `voice_files` to the calls
    /// below. Called once, as the service is built: before it is cloned.
    ///
    /// # Panics
    ///
    /// When the service was cloned already.
    pub fn with_profiles(
        mut self,
        profiles: Arc<ProfileStore>,
        voice_files: Arc<VoiceFiles>,
    ) -> Self {
        Arc::get_mut(&mut self.inner)
            .expect("the stores are given before the service is shared")
            .voice_stores = Some(VoiceStores {
            profiles,
            voice_files,
        });
        self
    }

    /// Every voice OmniVoice answers to: `auto`, the design pattern, OpenAI's preset names, the
    /// voice files whose design it can follow, and every profile (a service without stores
    /// lists the first three).
    pub async fn voice_catalog(&self) -> Result<VoiceCatalog, ProfileError> {
        let stores = self.stores();
        let (files, profiles) = crate::blocking::run(move || {
            let Some((profiles, voice_files)) = stores else {
                return Ok((Vec::new(), Vec::new()));
            };
            Ok((voice_files.list(), profiles.list()?))
        })
        .await?;
        let mut voices = built_in_voices();
        // Listed as the engine serves them: only files whose design it can follow.
        voices.extend(files.into_iter().filter_map(|file| {
            let instructions = omnivoice::canonical_design(&file.design)?;
            Some(CatalogVoice::File {
                name: file.name,
                description: file.description.unwrap_or_else(|| instructions.clone()),
                instructions,
                defaults: file.defaults,
            })
        }));
        voices.extend(profiles.into_iter().map(CatalogVoice::Profile));
        Ok(VoiceCatalog {
            voices,
            design_attributes: omnivoice::design_attributes(),
        })
    }

    /// Saves a profile; one of that id must not exist unless `overwrite` says to replace it.
    pub async fn create_profile(&self, profile: NewProfile) -> Result<ProfileMeta, ProfileError> {
        self.on_profiles(move |store| {
            let NewProfile {
                id,
                name,
                ref_text,
                clip,
                overwrite,
            } = profile;
            if overwrite {
                store.replace(&id, name, ref_text, &clip)
            } else {
                store.create(&id, name, ref_text, &clip)
            }
        })
        .await
    }

    /// The profile `id`, without its clip.
    pub async fn profile(&self, id: &str) -> Result<ProfileMeta, ProfileError> {
        let id = id.to_string();
        self.on_profiles(move |store| store.meta(&id)).await
    }

    /// The clip of the profile `id`, as stored (WAV, unless the Python server stored it).
    pub async fn profile_clip(&self, id: &str) -> Result<Vec<u8>, ProfileError> {
        let id = id.to_string();
        self.on_profiles(move |store| store.get(&id).map(|profile| profile.audio))
            .await
    }

    /// Changes what `change` names of the profile `id` and keeps the rest.
    pub async fn update_profile(
        &self,
        id: &str,
        change: ProfileChange,
    ) -> Result<ProfileMeta, ProfileError> {
        let id = id.to_string();
        self.on_profiles(move |store| store.update(&id, change))
            .await
    }

    /// Deletes the profile `id`: its clip, metadata and cached codes.
    pub async fn delete_profile(&self, id: &str) -> Result<(), ProfileError> {
        let id = id.to_string();
        self.on_profiles(move |store| store.delete(&id)).await
    }

    fn stores(&self) -> Option<(Arc<ProfileStore>, Arc<VoiceFiles>)> {
        self.inner
            .voice_stores
            .as_ref()
            .map(|stores| (stores.profiles.clone(), stores.voice_files.clone()))
    }

    /// Runs `work` on the profile store on a blocking thread. A service built without one
    /// (a unit test's) fails every call, as a store that cannot be reached would.
    async fn on_profiles<T: Send + 'static>(
        &self,
        work: impl FnOnce(&ProfileStore) -> Result<T, ProfileError> + Send + 'static,
    ) -> Result<T, ProfileError> {
        let Some((store, _)) = self.stores() else {
            return Err(ProfileError::Storage {
                context: "this server keeps no voice profiles".into(),
                source: io::ErrorKind::Unsupported.into(),
            });
        };
        crate::blocking::run(move || work(&store)).await
    }
}

/// `auto`, the design pattern and the presets, by name, as the Python server lists them.
fn built_in_voices() -> Vec<CatalogVoice> {
    let mut voices = vec![
        CatalogVoice::BuiltIn {
            id: AUTO.into(),
            kind: BuiltInKind::Auto,
            description: "No design: the model chooses a voice itself, unless the request's \
                          `instructions` design one."
                .into(),
        },
        CatalogVoice::BuiltIn {
            id: format!("{DESIGN}<attributes>"),
            kind: BuiltInKind::Design,
            description: format!(
                "Voice design via attributes. Example: '{DESIGN}female, british accent'"
            ),
        },
    ];
    let mut presets = PRESETS.to_vec();
    presets.sort();
    voices.extend(
        presets
            .into_iter()
            .map(|(name, design)| CatalogVoice::BuiltIn {
                id: name.into(),
                kind: BuiltInKind::Preset,
                description: format!("OpenAI-compatible preset mapped to '{design}'"),
            }),
    );
    voices
}
