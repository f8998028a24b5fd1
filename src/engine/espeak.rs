//! The `espeak` engine: espeak-ng's formant synthesizer behind the common [`Engine`] interface.
//!
//! It needs no model files and speaks every language espeak-ng knows, so it serves languages
//! without a Piper voice and is the fallback that always works. Loading a voice costs nothing:
//! the library holds all its data, a loaded voice is just a name.

use std::sync::Arc;

use crate::engine::{
    Engine, EngineError, Pcm, Phonemes, Pronunciation, SynthesisItem, Voice, VoiceInfo, WordTiming,
};
use crate::espeak::{self, EspeakError};
use crate::text::words;

const ENGINE_ID: &str = "espeak";

/// espeak-ng voices, named as `espeak-ng -v` names them (`en-us`, `de`, `fr`, …).
///
/// The voice list is read at construction: requests are validated against it on async
/// threads, and reading it from the library would wait for whatever synthesis holds the
/// library's lock.
#[derive(Debug, Clone)]
pub struct EspeakEngine {
    voices: Arc<[VoiceInfo]>,
}

impl EspeakEngine {
    pub fn new() -> Self {
        Self {
            voices: espeak::list_voices().iter().map(voice_info).collect(),
        }
    }
}

impl Default for EspeakEngine {
    fn default() -> Self {
        Self::new()
    }
}

impl Engine for EspeakEngine {
    fn id(&self) -> &str {
        ENGINE_ID
    }

    fn voices(&self) -> Vec<VoiceInfo> {
        self.voices.to_vec()
    }

    fn find_voice(&self, voice: &str) -> Option<VoiceInfo> {
        self.voices.iter().find(|v| v.id == voice).cloned()
    }

    fn load_voice(&self, voice: &str) -> Result<Arc<dyn Voice>, EngineError> {
        let wanted = voice.to_lowercase();
        let info = self
            .voices
            .iter()
            .find(|v| v.id == wanted)
            .cloned()
            .ok_or_else(|| EngineError::UnknownVoice(voice.to_string()))?;
        Ok(Arc::new(FormantVoice { info }))
    }
}

fn voice_info(voice: &espeak::EspeakVoice) -> VoiceInfo {
    VoiceInfo {
        id: voice.name.clone(),
        engine: ENGINE_ID.to_string(),
        language: language_tag(voice.languages.first().unwrap_or(&voice.name)),
        sample_rate: espeak::SAMPLE_RATE,
        speakers: Vec::new(),
        gender: None,
        unsupported: None,
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

    /// espeak-ng takes phonemes only in its own mnemonics, not IPA.
    fn says_given_phonemes(&self) -> bool {
        false
    }

    fn phonemes(
        &self,
        text: &str,
        _pronunciations: &[Pronunciation],
    ) -> Result<Phonemes, EngineError> {
        let phonemes = crate::text::phonemize(text, &self.info.id).map_err(engine_error)?;
        Ok(Phonemes {
            phonemes,
            ids: Vec::new(),
        })
    }

    fn synthesize_each(
        &self,
        batch: &[SynthesisItem],
        done: &mut dyn FnMut(usize, Pcm),
    ) -> Result<(), EngineError> {
        for (index, item) in batch.iter().enumerate() {
            let rate = espeak::rate_for_speed(item.params.speed);
            let (samples, spoken) = espeak::synthesize_with_words(&item.text, &self.info.id, rate)
                .map_err(engine_error)?;
            let mut pcm = Pcm::new(
                samples.iter().map(|&s| f32::from(s) / 32768.0).collect(),
                espeak::SAMPLE_RATE,
            );
            if item.word_timings {
                pcm.words = Some(word_timings(&item.text, &spoken, &samples));
            }
            done(index, pcm);
        }
        Ok(())
    }
}

/// An espeak-ng failure as the engine reports it: a voice espeak-ng lacks is an unknown voice.
fn engine_error(e: EspeakError) -> EngineError {
    match e {
        EspeakError::UnknownVoice(v) => EngineError::UnknownVoice(v),
        other => EngineError::synthesis(other),
    }
}

/// Below this a sample counts as silence when a word's end is looked for (about -40 dB).
const SILENCE: i16 = 330;

/// The written words of `text` with the times espeak spoke them: a word starts at its first
/// word event and lasts until the next spoken word starts, less the silence before it. A
/// word espeak gave no event of its own (it joins some short words to the one before) gets
/// no time of its own, at the end of the word before; tokens without letters or digits and
/// without an event ("—") are not spoken words.
fn word_timings(text: &str, spoken: &[espeak::SpokenWord], samples: &[i16]) -> Vec<WordTiming> {
    let byte_of_char: Vec<usize> = text
        .char_indices()
        .map(|(at, _)| at)
        .chain([text.len()])
        .collect();
    let written = words::written_words(text);
    let mut starts: Vec<Option<usize>> = vec![None; written.len()];
    let mut word = 0;
    for event in spoken.iter().filter(|e| e.chars > 0) {
        let at = byte_of_char[event.char_start.min(byte_of_char.len() - 1)];
        while word < written.len() && written[word].end <= at {
            word += 1;
        }
        if let Some(start) = starts.get_mut(word) {
            if written[word].start <= at + event.chars && start.is_none() {
                *start = Some(event.sample.min(samples.len()));
            }
        }
    }
    let mut timings = Vec::new();
    let mut previous_end = 0;
    for (i, range) in written.iter().enumerate() {
        let Some(start) = starts[i] else {
            if text[range.clone()].chars().any(char::is_alphanumeric) {
                timings.push(WordTiming {
                    text: range.clone(),
                    start: previous_end,
                    end: previous_end,
                });
            }
            continue;
        };
        let start = start.max(previous_end);
        let next = starts[i + 1..]
            .iter()
            .flatten()
            .next()
            .copied()
            .unwrap_or(samples.len())
            .max(start);
        let end = samples[start..next]
            .iter()
            .rposition(|s| s.unsigned_abs() > SILENCE as u16)
            .map_or(start, |last| start + last + 1);
        timings.push(WordTiming {
            text: range.clone(),
            start,
            end,
        });
        previous_end = end;
    }
    timings
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
