//! What symbols a voice was trained on (its config's `phoneme_type`): the types read here, and
//! why a voice of another type is refused rather than misread.

/// What a voice's `phoneme_id_map` is keyed by: its config's `phoneme_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PhonemeType {
    /// espeak-ng's IPA: Piper's default, and what a config without the field means.
    Espeak,
    /// The text's own characters, NFD (voices trained without a phonemizer).
    Text,
}

/// piper1-gpl's phoneme types beyond `espeak` and `text`, with what it reads each with.
const OTHER_PIPER_TYPES: &[(&str, &str)] = &[
    (
        "pinyin",
        "Chinese pinyin that the g2pW model picks for each character in context",
    ),
    ("japanese", "OpenJTalk's readings and pitch accent"),
    (
        "hebrew",
        "vowel points restored by the Nakdimon model and a Hebrew IPA converter",
    ),
];

impl PhonemeType {
    /// The voice's phoneme type, or why this server would misread the voice.
    pub(super) fn of(config: &serde_json::Value) -> Result<Self, String> {
        let name = match config.get("phoneme_type") {
            None => return Ok(Self::Espeak),
            Some(serde_json::Value::String(name)) => name.as_str(),
            // Piper's implementations disagree on a null (an error, or `text`): refused.
            Some(other) => {
                let shown: String = other.to_string().chars().take(40).collect();
                return Err(format!(
                    "phoneme_type {shown} is not the name of a phoneme type; the voice would be misread"
                ));
            }
        };
        match name {
            "espeak" => Ok(Self::Espeak),
            "text" => Ok(Self::Text),
            other => {
                let shown: String = other
                    .chars()
                    .take(40)
                    .flat_map(char::escape_debug)
                    .collect();
                let refused = format!(
                    "phoneme_type '{shown}' is not supported by this server; the voice would be misread"
                );
                Err(match OTHER_PIPER_TYPES.iter().find(|(n, _)| *n == other) {
                    Some((_, what)) => format!("{refused} (Piper reads it with {what})"),
                    None => refused,
                })
            }
        }
    }
}
