//! OpenAI's voice names under `model: "kokoro"`: each stands for one real Kokoro pack, so a
//! client written for OpenAI's API gets distinct voices rather than one default for all.
//!
//! Five names have a Kokoro pack of their own name, of the gender and accent OpenAI's voice
//! has: alloy, nova, echo, onyx, fable. For the others there is none, so each goes to a pack
//! of the OpenAI voice's gender and accent whose character is closest, preferring the packs
//! hexgrad's notes grade best, and no pack serves two names:
//!
//! | OpenAI | pack | why |
//! |---|---|---|
//! | ash | am_michael | warm American male; one of the better-graded male packs |
//! | ballad | bm_george | the British-sounding, storytelling male voice: the best British male pack |
//! | coral | af_heart | warm, friendly American female: Kokoro's flagship pack |
//! | sage | af_sarah | calm, mature American female |
//! | shimmer | af_bella | bright, clear American female; graded next to af_heart |
//! | verse | am_puck | expressive, lively American male |
//! | marin | af_kore | a natural, conversational American female |
//! | cedar | am_fenrir | a deep, steady American male |
//!
//! Kokoro-FastAPI maps these names differently (alloy to am_adam, echo to af_bella …, across
//! genders); this table keeps each name's gender and accent instead.

/// OpenAI voice name and the Kokoro v1.0 pack it means, in OpenAI's order.
pub const OPENAI_VOICES: [(&str, &str); 13] = [
    ("alloy", "af_alloy"),
    ("ash", "am_michael"),
    ("ballad", "bm_george"),
    ("coral", "af_heart"),
    ("echo", "am_echo"),
    ("fable", "bm_fable"),
    ("nova", "af_nova"),
    ("onyx", "am_onyx"),
    ("sage", "af_sarah"),
    ("shimmer", "af_bella"),
    ("verse", "am_puck"),
    ("marin", "af_kore"),
    ("cedar", "am_fenrir"),
];

/// The pack an OpenAI voice name stands for (exact, lowercase, as OpenAI's API spells them).
pub fn openai_voice(name: &str) -> Option<&'static str> {
    OPENAI_VOICES
        .iter()
        .find(|(openai, _)| *openai == name)
        .map(|&(_, pack)| pack)
}

/// Kokoro v1.0's 54 packs, as kokoro-js 1.2.1 ships them in `voices/`.
#[cfg(test)]
pub(super) const V1_0_VOICES: [&str; 54] = [
    "af_alloy",
    "af_aoede",
    "af_bella",
    "af_heart",
    "af_jessica",
    "af_kore",
    "af_nicole",
    "af_nova",
    "af_river",
    "af_sarah",
    "af_sky",
    "am_adam",
    "am_echo",
    "am_eric",
    "am_fenrir",
    "am_liam",
    "am_michael",
    "am_onyx",
    "am_puck",
    "am_santa",
    "bf_alice",
    "bf_emma",
    "bf_isabella",
    "bf_lily",
    "bm_daniel",
    "bm_fable",
    "bm_george",
    "bm_lewis",
    "ef_dora",
    "em_alex",
    "em_santa",
    "ff_siwis",
    "hf_alpha",
    "hf_beta",
    "hm_omega",
    "hm_psi",
    "if_sara",
    "im_nicola",
    "jf_alpha",
    "jf_gongitsune",
    "jf_nezumi",
    "jf_tebukuro",
    "jm_kumo",
    "pf_dora",
    "pm_alex",
    "pm_santa",
    "zf_xiaobei",
    "zf_xiaoni",
    "zf_xiaoxiao",
    "zf_xiaoyi",
    "zm_yunjian",
    "zm_yunxi",
    "zm_yunxia",
    "zm_yunyang",
];

#[cfg(test)]
mod tests {
    use super::super::language::Language;
    use super::super::packs::{Gender, VoiceTraits};
    use super::*;

    #[test]
    fn every_openai_name_the_server_knows_is_mapped() {
        let names: Vec<&str> = OPENAI_VOICES.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, crate::engine::registry::OPENAI_VOICES);
    }

    #[test]
    fn targets_are_real_distinct_english_packs_of_the_right_gender() {
        let female = ["alloy", "coral", "nova", "sage", "shimmer", "marin"];
        let mut seen = std::collections::BTreeSet::new();
        for (name, pack) in OPENAI_VOICES {
            assert!(V1_0_VOICES.contains(&pack), "{name} → {pack}: no such pack");
            assert!(seen.insert(pack), "{pack} serves two names");
            let traits = VoiceTraits::of(pack).unwrap();
            assert!(matches!(
                traits.language,
                Language::AmericanEnglish | Language::BritishEnglish
            ));
            let gender = if female.contains(&name) {
                Gender::Female
            } else {
                Gender::Male
            };
            assert_eq!(traits.gender, gender, "{name} → {pack}");
        }
    }

    #[test]
    fn the_fixed_five_and_unknown_names() {
        for (name, pack) in [
            ("alloy", "af_alloy"),
            ("nova", "af_nova"),
            ("echo", "am_echo"),
            ("onyx", "am_onyx"),
            ("fable", "bm_fable"),
        ] {
            assert_eq!(openai_voice(name), Some(pack));
        }
        assert_eq!(openai_voice("Alloy"), None);
        assert_eq!(openai_voice("af_alloy"), None);
        assert_eq!(openai_voice(""), None);
    }
}
