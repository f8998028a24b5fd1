//! The `espeak` engine: espeak-ng's formant synthesizer behind the common [`Engine`] interface.
//!
//! It needs no model files and speaks every language espeak-ng knows, so it serves languages
//! without a Piper voice and is the fallback that always works. Loading a voice costs nothing:
//! the library holds all its data, a loaded voice is just a name (and, once it is first given
//! phonemes, the table of its phoneme names).

mod names;

use std::sync::Arc;

use crate::engine::{
    Engine, EngineError, Pcm, Phonemes, Pronunciation, SynthesisItem, Voice, VoiceInfo, WordTiming,
};
use crate::espeak::{self, EspeakError};
use crate::text::phonemize::{given_in, phonemize_with};
use crate::text::words;
use names::PhonemeNames;

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

    fn default_voice(&self) -> Option<&'static str> {
        Some("en-us")
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
        design: None,
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

impl FormantVoice {
    /// The espeak-ng voice that says text in `language`: this one when `None`.
    fn espeak_voice(&self, language: Option<&str>) -> &str {
        language
            .and_then(espeak::voice_of_language)
            .unwrap_or(&self.info.id)
    }

    /// `text` as espeak is given it: each pronunciation's words replaced by its phonemes in
    /// espeak's names within `[[ ]]`, and every other `[` made a `(`, so that only the
    /// phonemes given are read as phonemes. Beside it, for each character of that input and
    /// one past its end, the character of `text` it stands for: the phonemes stand for the
    /// words' first character.
    fn phoneme_input(
        voice: &str,
        text: &str,
        pronunciations: &[Pronunciation],
    ) -> Result<(String, Vec<Replaced>), EngineError> {
        let names = PhonemeNames::of(voice).ok_or_else(|| {
            EngineError::synthesis(format!(
                "the espeak-ng voice '{voice}' cannot say given phonemes"
            ))
        })?;
        let mut input = String::with_capacity(text.len());
        let mut replaced = Vec::new();
        let mut at = 0;
        let push_text = |input: &mut String, stretch: &str| {
            input.extend(stretch.chars().map(|c| if c == '[' { '(' } else { c }));
        };
        for pronunciation in given_in(text, pronunciations) {
            push_text(&mut input, &text[at..pronunciation.text.start]);
            let spelt = names.spell(&pronunciation.ipa).map_err(|symbol| {
                EngineError::synthesis(format!(
                    "the espeak-ng voice '{voice}' has no phoneme for '{symbol}'"
                ))
            })?;
            let start = input.chars().count();
            input.push_str(" [[");
            input.push_str(&spelt);
            input.push_str("]] ");
            replaced.push(Replaced {
                input: start..input.chars().count(),
                text: char_count(&text[..pronunciation.text.start])
                    ..char_count(&text[..pronunciation.text.end]),
            });
            at = pronunciation.text.end;
        }
        push_text(&mut input, &text[at..]);
        Ok((input, replaced))
    }
}

/// Where phonemes stand in espeak's input for words of the text, in characters.
struct Replaced {
    input: std::ops::Range<usize>,
    text: std::ops::Range<usize>,
}

fn char_count(text: &str) -> usize {
    text.chars().count()
}

/// The words espeak spoke from a phoneme input, placed back in the text it was made from: a
/// word within phonemes is the words they stand for, any other is shifted by what the
/// replacements before it added or removed.
fn words_in_text(
    spoken: Vec<espeak::SpokenWord>,
    replaced: &[Replaced],
) -> Vec<espeak::SpokenWord> {
    spoken
        .into_iter()
        .map(|word| {
            let before = replaced
                .iter()
                .take_while(|r| r.input.end <= word.char_start);
            let shift: isize = before
                .map(|r| r.text.len() as isize - r.input.len() as isize)
                .sum();
            match replaced.iter().find(|r| r.input.contains(&word.char_start)) {
                Some(r) => espeak::SpokenWord {
                    char_start: r.text.start,
                    chars: r.text.len(),
                    sample: word.sample,
                },
                None => espeak::SpokenWord {
                    char_start: (word.char_start as isize + shift).max(0) as usize,
                    ..word
                },
            }
        })
        .collect()
}

impl Voice for FormantVoice {
    fn info(&self) -> &VoiceInfo {
        &self.info
    }

    /// espeak-ng takes phonemes in its own names: a voice says those IPA symbols that it has
    /// names for.
    fn says_given_phonemes(&self, language: Option<&str>) -> bool {
        PhonemeNames::of(self.espeak_voice(language)).is_some()
    }

    fn unsayable(&self, ipa: &str, language: Option<&str>) -> Option<char> {
        PhonemeNames::of(self.espeak_voice(language))?
            .spell(ipa)
            .err()
    }

    /// espeak-ng reads any language it has, with that language's voice.
    fn reads_language(&self, language: &str) -> bool {
        espeak::voice_of_language(language).is_some()
    }

    fn phonemes(
        &self,
        text: &str,
        pronunciations: &[Pronunciation],
        language: Option<&str>,
    ) -> Result<Phonemes, EngineError> {
        let phonemes = phonemize_with(text, pronunciations, self.espeak_voice(language))
            .map_err(engine_error)?;
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
            let voice = self.espeak_voice(item.language.as_deref());
            let (samples, spoken) = if item.pronunciations.is_empty() {
                espeak::synthesize_with_words(&item.text, voice, rate)
            } else {
                let (input, replaced) =
                    Self::phoneme_input(voice, &item.text, &item.pronunciations)?;
                espeak::synthesize_with_phonemes(&input, voice, rate)
                    .map(|(samples, spoken)| (samples, words_in_text(spoken, &replaced)))
            }
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

#[cfg(test)]
mod phoneme_input_tests {
    use super::*;
    use unicode_normalization::UnicodeNormalization;

    fn voice(id: &str) -> FormantVoice {
        FormantVoice {
            info: EspeakEngine::new().find_voice(id).expect("espeak voice"),
        }
    }

    /// espeak's own IPA for words, spelt in its names, is said as that IPA again: the names
    /// learnt are the ones espeak reads back.
    #[test]
    fn ipa_spelt_in_names_is_said_as_that_ipa() {
        for (id, words) in [
            ("en-us", "hello world, butter thought father bird nation button little ahead hour near square poor cure judge measure singing"),
            ("en", "butter thought father bird nation little ahead hour near square poor goat lot bath"),
            ("de", "Bücher schön Häuser ich ach Zwölf Straße"),
            ("fr", "un bon vin blanc cœur huit"),
        ] {
            let names = PhonemeNames::of(id).expect("names learnt");
            for word in words.split([' ', ',']).filter(|w| !w.is_empty()) {
                let ipa = crate::text::phonemize::phonemize(word, id).unwrap();
                let ipa = ipa.trim_end_matches(|c: char| c.is_ascii_punctuation());
                let spelt = names.spell(ipa).unwrap_or_else(|c| panic!("{id}: no name for {c} in {ipa}"));
                let said = crate::espeak::phonemes_said(&format!("[[{spelt}]]"), id).unwrap();
                // espeak stresses a word given without stress marks, as it would stress any.
                let unstressed = !ipa.contains(['ˈ', 'ˌ']);
                let plain = |s: &str| -> String {
                    s.nfc().filter(|c| !(unstressed && matches!(c, 'ˈ' | 'ˌ'))).collect()
                };
                assert_eq!(plain(&said), plain(ipa), "{id}: {word} /{ipa}/ spelt {spelt}");
            }
        }
    }

    fn item(text: &str, pronunciations: Vec<Pronunciation>) -> SynthesisItem {
        SynthesisItem {
            word_timings: true,
            pronunciations,
            ..SynthesisItem::new(text)
        }
    }

    fn said(voice: &FormantVoice, item: &SynthesisItem) -> Pcm {
        let mut out = None;
        voice
            .synthesize_each(std::slice::from_ref(item), &mut |_, pcm| out = Some(pcm))
            .unwrap();
        out.unwrap()
    }

    /// Words given espeak's own IPA for other words sound exactly like those words, and their
    /// timings name the words as written.
    #[test]
    fn given_phonemes_are_said_and_timed_as_the_written_words() {
        let voice = voice("en-us");
        let banana = crate::text::phonemize::phonemize("banana", "en-us").unwrap();
        let text = "Say [Kokoro] now, please.";
        let start = text.find("Kokoro").unwrap();
        let given = item(
            text,
            vec![Pronunciation {
                text: start..start + "Kokoro".len(),
                ipa: banana.clone(),
            }],
        );
        let plain = said(&voice, &item("Say (banana) now, please.", Vec::new()));
        let given = said(&voice, &given);
        // The same phonemes, said through espeak's phoneme input: the same length and word
        // times to within a few milliseconds (its noise source is not reset between calls).
        let close = |a: usize, b: usize| a.abs_diff(b) <= espeak::SAMPLE_RATE as usize / 100;
        assert!(
            close(given.samples.len(), plain.samples.len()),
            "/{banana}/ is said as 'banana': {} samples against {}",
            given.samples.len(),
            plain.samples.len()
        );

        let words = given.words.unwrap();
        let written: Vec<&str> = words.iter().map(|w| &text[w.text.clone()]).collect();
        assert_eq!(written, ["Say", "Kokoro", "now", "please"]);
        let plain_words = plain.words.unwrap();
        for (given, plain) in words.iter().zip(&plain_words) {
            assert!(close(given.start, plain.start) && close(given.end, plain.end));
            assert!(given.start < given.end);
        }
    }

    #[test]
    fn a_symbol_the_voice_lacks_is_named_and_others_are_not() {
        let voice = voice("en-us");
        assert!(voice.says_given_phonemes(None));
        assert_eq!(voice.unsayable("kˈoʊkəɹoʊ", None), None);
        // A click is no phoneme of English.
        assert_eq!(voice.unsayable("kˈoʊǃə", None), Some('ǃ'));
        // German has its own names, and the voice reads German with them.
        assert!(voice.reads_language("de"));
        assert_eq!(voice.unsayable("ˈax", Some("de")), None);
        let item = item(
            "a Kokoro",
            vec![Pronunciation {
                text: 2..8,
                ipa: "ǃ".into(),
            }],
        );
        let error = voice
            .synthesize_each(std::slice::from_ref(&item), &mut |_, _| {})
            .unwrap_err();
        assert!(error.to_string().contains("no phoneme for 'ǃ'"), "{error}");
    }
}
