//! The `espeak` engine: espeak-ng's formant synthesizer behind the common [`Engine`] interface.
//!
//! It needs no model files and speaks every language espeak-ng knows, so it serves languages
//! without a Piper voice and is the fallback that always works. Loading a voice costs nothing:
//! the library holds all its data, a loaded voice is just a name.

use std::sync::Arc;

use crate::engine::{Engine, EngineError, Pcm, SynthesisItem, Voice, VoiceInfo};
use crate::espeak::{self, EspeakError};

const ENGINE_ID: &str = "espeak";

/// espeak-ng voices, named as `espeak-ng -v` names them (`en-us`, `de`, `fr`, …).
#[derive(Debug, Default, Clone)]
pub struct EspeakEngine;

impl EspeakEngine {
    pub fn new() -> Self {
        Self
    }
}

impl Engine for EspeakEngine {
    fn id(&self) -> &str {
        ENGINE_ID
    }

    fn voices(&self) -> Vec<VoiceInfo> {
        espeak::list_voices().iter().map(voice_info).collect()
    }

    fn load_voice(&self, voice: &str) -> Result<Arc<dyn Voice>, EngineError> {
        let wanted = voice.to_lowercase();
        let found = espeak::list_voices()
            .into_iter()
            .find(|v| v.name == wanted)
            .ok_or_else(|| EngineError::UnknownVoice(voice.to_string()))?;
        Ok(Arc::new(FormantVoice {
            info: voice_info(&found),
        }))
    }
}

fn voice_info(voice: &espeak::EspeakVoice) -> VoiceInfo {
    VoiceInfo {
        id: voice.name.clone(),
        engine: ENGINE_ID.to_string(),
        language: language_tag(voice.languages.first().unwrap_or(&voice.name)),
        sample_rate: espeak::SAMPLE_RATE,
        speakers: Vec::new(),
    }
}

/// espeak's lowercase language codes in BCP-47 casing: `en-us` → `en-US`, `sr-latn` → `sr-Latn`;
/// private-use parts after `x` stay as they are.
fn language_tag(code: &str) -> String {
    let mut parts = Vec::new();
    let mut private = false;
    for (i, part) in code.split('-').enumerate() {
        private |= part.eq_ignore_ascii_case("x");
        let is_alpha = part.chars().all(|c| c.is_ascii_alphabetic());
        parts.push(if i == 0 || private || !is_alpha {
            part.to_lowercase()
        } else if part.len() == 2 {
            part.to_uppercase()
        } else if part.len() == 4 {
            let (first, rest) = part.split_at(1);
            first.to_uppercase() + &rest.to_lowercase()
        } else {
            part.to_lowercase()
        });
    }
    parts.join("-")
}

struct FormantVoice {
    info: VoiceInfo,
}

impl Voice for FormantVoice {
    fn info(&self) -> &VoiceInfo {
        &self.info
    }

    fn synthesize_each(
        &self,
        batch: &[SynthesisItem],
        done: &mut dyn FnMut(usize, Pcm),
    ) -> Result<(), EngineError> {
        for (index, item) in batch.iter().enumerate() {
            let rate = espeak::rate_for_speed(item.params.speed);
            let samples =
                espeak::synthesize(&item.text, &self.info.id, rate).map_err(|e| match e {
                    EspeakError::UnknownVoice(v) => EngineError::UnknownVoice(v),
                    other => EngineError::Synthesis(other.to_string()),
                })?;
            done(
                index,
                Pcm {
                    samples: samples.iter().map(|&s| f32::from(s) / 32768.0).collect(),
                    sample_rate: espeak::SAMPLE_RATE,
                },
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::language_tag;

    #[test]
    fn language_tags_use_bcp47_casing() {
        assert_eq!(language_tag("en-us"), "en-US");
        assert_eq!(language_tag("de"), "de");
        assert_eq!(language_tag("sr-latn"), "sr-Latn");
        assert_eq!(language_tag("en-gb-x-rp"), "en-GB-x-rp");
        assert_eq!(language_tag("es-419"), "es-419");
        assert_eq!(language_tag("cmn-latn-pinyin"), "cmn-Latn-pinyin");
    }
}
