//! The languages of Kokoro's voices, named by the first letter of a voice id (`a` in
//! `af_heart`): which espeak-ng voice phonemizes each, and which ones this server can speak at
//! all.
//!
//! Kokoro's own pipeline phonemizes English with misaki's dictionaries (espeak-ng for words
//! they lack), Japanese and Mandarin with dictionary G2P, and every other language with
//! espeak-ng alone. This server reads Japanese and Mandarin with dictionary G2P of its own
//! ([`crate::text::japanese`], `crate::text::mandarin`) once their dictionaries are installed;
//! until then their voices are listed but not spoken: espeak's readings are not what those
//! voices were trained on.

/// A language of Kokoro v1.0's voice packs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Language {
    AmericanEnglish,
    BritishEnglish,
    Spanish,
    French,
    Hindi,
    Italian,
    Japanese,
    BrazilianPortuguese,
    Mandarin,
}

impl Language {
    pub const ALL: [Language; 9] = [
        Self::AmericanEnglish,
        Self::BritishEnglish,
        Self::Spanish,
        Self::French,
        Self::Hindi,
        Self::Italian,
        Self::Japanese,
        Self::BrazilianPortuguese,
        Self::Mandarin,
    ];

    /// The language a voice id's first letter names (`a` = American English … `z` = Mandarin),
    /// the convention of Kokoro's voice files and of hexgrad's pipeline (`lang_code`).
    pub fn from_code(code: char) -> Option<Self> {
        Self::ALL.into_iter().find(|l| l.code() == code)
    }

    /// The language a BCP 47 tag names (`es`, `pt-BR`, `en_GB`): exactly, else by its primary
    /// language (`en` is American English, `pt` Brazilian Portuguese).
    pub fn from_tag(tag: &str) -> Option<Self> {
        let tag = tag.replace('_', "-");
        let primary = tag.split('-').next().unwrap_or_default();
        Self::ALL
            .into_iter()
            .find(|l| l.tag().eq_ignore_ascii_case(&tag))
            .or_else(|| {
                Self::ALL.into_iter().find(|l| {
                    l.tag()
                        .split('-')
                        .next()
                        .is_some_and(|p| p.eq_ignore_ascii_case(primary))
                })
            })
    }

    pub fn code(self) -> char {
        match self {
            Self::AmericanEnglish => 'a',
            Self::BritishEnglish => 'b',
            Self::Spanish => 'e',
            Self::French => 'f',
            Self::Hindi => 'h',
            Self::Italian => 'i',
            Self::Japanese => 'j',
            Self::BrazilianPortuguese => 'p',
            Self::Mandarin => 'z',
        }
    }

    /// BCP-47 tag, what `VoiceInfo::language` reports.
    pub fn tag(self) -> &'static str {
        match self {
            Self::AmericanEnglish => "en-US",
            Self::BritishEnglish => "en-GB",
            Self::Spanish => "es",
            Self::French => "fr",
            Self::Hindi => "hi",
            Self::Italian => "it",
            Self::Japanese => "ja",
            Self::BrazilianPortuguese => "pt-BR",
            Self::Mandarin => "zh",
        }
    }

    /// The espeak-ng voice that phonemizes the language, by the name [`crate::espeak`] selects
    /// voices by (the voice file's: British English is `en`, espeak's `en-gb`); `None` where
    /// Kokoro needs a dictionary G2P this server does not have.
    pub fn espeak_voice(self) -> Option<&'static str> {
        match self {
            Self::AmericanEnglish => Some("en-us"),
            Self::BritishEnglish => Some("en"),
            Self::Spanish => Some("es"),
            Self::French => Some("fr"),
            Self::Hindi => Some("hi"),
            Self::Italian => Some("it"),
            Self::BrazilianPortuguese => Some("pt-br"),
            Self::Japanese | Self::Mandarin => None,
        }
    }

    /// Whether this server can phonemize the language: with espeak-ng, or (Japanese, Mandarin)
    /// with a dictionary G2P of its own, once its dictionary is installed and open.
    pub fn is_supported(self) -> bool {
        self.unsupported_reason().is_none()
    }

    /// Why this server lists the language's voices but cannot speak them, in a sentence for a
    /// client reading the voice list; `None` for a language it speaks. Mandarin's names the
    /// script that installs its pinyin tables while they are missing.
    pub fn unsupported_reason(self) -> Option<String> {
        match self {
            Self::Japanese if crate::text::japanese::loaded().is_none() => Some(
                "Japanese needs the UniDic dictionary that scripts/setup.sh installs into the Kokoro directory's japanese/ folder; it is not installed or did not open.".into(),
            ),
            Self::Mandarin => crate::text::mandarin::missing(),
            _ => None,
        }
    }
}

impl std::fmt::Display for Language {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.tag())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_name_languages_exactly_or_by_their_primary_language() {
        assert_eq!(
            Language::from_tag("pt-BR"),
            Some(Language::BrazilianPortuguese)
        );
        assert_eq!(Language::from_tag("en_gb"), Some(Language::BritishEnglish));
        assert_eq!(Language::from_tag("en"), Some(Language::AmericanEnglish));
        assert_eq!(Language::from_tag("es-MX"), Some(Language::Spanish));
        assert_eq!(
            Language::from_tag("pt"),
            Some(Language::BrazilianPortuguese)
        );
        assert_eq!(Language::from_tag("de"), None);
        assert_eq!(Language::from_tag(""), None);
    }

    #[test]
    fn codes_round_trip_and_unknown_codes_are_none() {
        for language in Language::ALL {
            assert_eq!(Language::from_code(language.code()), Some(language));
        }
        for code in ['c', 'x', 'A', 'é', '_'] {
            assert_eq!(Language::from_code(code), None, "{code}");
        }
    }

    /// Japanese depends on its dictionary having been opened, which no unit test does.
    #[test]
    fn japanese_without_its_dictionary_is_not_supported() {
        // Mandarin's support follows its installed tables (`text::mandarin::missing`).
        let unsupported: Vec<Language> = Language::ALL
            .into_iter()
            .filter(|l| !l.is_supported() && *l != Language::Mandarin)
            .collect();
        assert_eq!(unsupported, [Language::Japanese]);
        assert_eq!(
            Language::Mandarin.is_supported(),
            crate::text::mandarin::missing().is_none()
        );
        for language in Language::ALL {
            assert_eq!(
                language.unsupported_reason().is_some(),
                !language.is_supported(),
                "{language}: a reason exactly when unsupported"
            );
        }
    }

    /// Every espeak voice named here exists in the installed espeak-ng, so no supported
    /// language fails at its first sentence.
    #[test]
    fn espeak_voices_exist() {
        let installed = crate::espeak::list_voices();
        for language in Language::ALL {
            if let Some(voice) = language.espeak_voice() {
                let found = installed.iter().find(|v| v.name == voice);
                let found = found.unwrap_or_else(|| panic!("{language}: no espeak voice {voice}"));
                let wanted = language.tag().to_lowercase();
                let wanted = if wanted == "fr" {
                    "fr-fr".into()
                } else {
                    wanted
                };
                assert!(
                    found.languages.contains(&wanted),
                    "{voice} speaks {:?}, not {wanted}",
                    found.languages
                );
            }
        }
    }
}
