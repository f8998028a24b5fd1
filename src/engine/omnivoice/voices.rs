//! The names OmniVoice's voices go by: `auto` (the model picks a voice), a designed voice
//! (`design:female, low pitch, british accent`), and OpenAI's preset names, which stand for
//! the same designs as in the Python omnivoice-server, so its users hear the voices they know.
//!
//! A design is checked, and written in its canonical form, by the model's own rules
//! ([`omnivoice_models::omnivoice::resolve_instruct`]): two spellings of one design are one
//! voice, one cache entry and one batch.

use omnivoice_models::omnivoice::{resolve_instruct, InstructError};

/// The voice that leaves the choice to the model.
pub const AUTO: &str = "auto";

/// What a designed voice's id starts with.
pub const DESIGN: &str = "design:";

/// OpenAI's voice names and the designs they stand for (the Python omnivoice-server's table).
pub const PRESETS: [(&str, &str); 13] = [
    (
        "alloy",
        "female, young adult, moderate pitch, american accent",
    ),
    ("ash", "male, young adult, low pitch, american accent"),
    ("ballad", "male, middle-aged, low pitch, british accent"),
    ("cedar", "male, middle-aged, low pitch, american accent"),
    (
        "coral",
        "female, young adult, high pitch, australian accent",
    ),
    ("echo", "male, middle-aged, moderate pitch, canadian accent"),
    (
        "fable",
        "female, middle-aged, moderate pitch, british accent",
    ),
    (
        "marin",
        "female, middle-aged, moderate pitch, canadian accent",
    ),
    ("nova", "female, young adult, high pitch, american accent"),
    ("onyx", "male, middle-aged, very low pitch, british accent"),
    ("sage", "female, elderly, low pitch, british accent"),
    (
        "shimmer",
        "female, young adult, very high pitch, american accent",
    ),
    ("verse", "male, young adult, moderate pitch, british accent"),
];

/// What a voice id asks the model for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// No instruct: the model picks.
    Auto,
    /// A preset name and its design.
    Preset(&'static str, &'static str),
    /// A design in canonical form.
    Design(String),
}

impl Choice {
    /// The voice id clients name it by (a design's in canonical form).
    pub fn id(&self) -> String {
        match self {
            Choice::Auto => AUTO.to_string(),
            Choice::Preset(name, _) => name.to_string(),
            Choice::Design(design) => format!("{DESIGN}{design}"),
        }
    }

    /// The instruct the model is given; `None` for auto.
    pub fn instruct(&self) -> Option<&str> {
        match self {
            Choice::Auto => None,
            Choice::Preset(_, design) => Some(design),
            Choice::Design(design) => Some(design),
        }
    }

    /// `female` or `male` when the design says.
    pub fn gender(&self) -> Option<&'static str> {
        let design = self.instruct()?;
        let items: Vec<&str> = design.split([',', '，']).map(str::trim).collect();
        if items.iter().any(|i| *i == "female" || *i == "女") {
            Some("female")
        } else if items.iter().any(|i| *i == "male" || *i == "男") {
            Some("male")
        } else {
            None
        }
    }
}

/// Why a name is no OmniVoice voice.
#[derive(Debug, Clone, PartialEq)]
pub enum NameError {
    /// Not one of the names at all.
    Unknown,
    /// A design the model does not know (the message names each item and the nearest valid one).
    Design(String),
}

/// The voice a client's name (`auto`, a preset, `design:…`) stands for. A bare design without
/// the prefix is taken too, as the Python server takes it.
pub fn parse(name: &str) -> Result<Choice, NameError> {
    let name = name.trim();
    let lowered = name.to_lowercase();
    if lowered == AUTO {
        return Ok(Choice::Auto);
    }
    if let Some(&(preset, design)) = PRESETS.iter().find(|(p, _)| *p == lowered) {
        return Ok(Choice::Preset(preset, design));
    }
    let (design, prefixed) = match name.get(..DESIGN.len()) {
        Some(head) if head.eq_ignore_ascii_case(DESIGN) => (&name[DESIGN.len()..], true),
        _ => (name, false),
    };
    match design_of(design) {
        Ok(Some(design)) => Ok(Choice::Design(design)),
        // `design:` with nothing after it asks for no design.
        Ok(None) if prefixed => Ok(Choice::Auto),
        Ok(None) => Err(NameError::Unknown),
        Err(e) if prefixed => Err(NameError::Design(e.to_string())),
        // A name that looks like no design at all (no comma, no known word) stays unknown.
        Err(_) => Err(NameError::Unknown),
    }
}

/// A design (the `instructions` of a request, or a voice's attributes) in canonical form;
/// `None` when it is empty. English items are the canonical form unless the design names a
/// Chinese dialect.
pub fn design_of(design: &str) -> Result<Option<String>, InstructError> {
    resolve_instruct(design, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_the_python_servers_designs_and_valid() {
        for (name, design) in PRESETS {
            assert_eq!(
                design_of(design).unwrap().as_deref(),
                Some(design),
                "{name}'s design is canonical"
            );
            assert_eq!(parse(name), Ok(Choice::Preset(name, design)));
        }
        assert_eq!(parse("Alloy").unwrap().id(), "alloy");
    }

    #[test]
    fn designs_are_one_voice_however_written() {
        let a = parse("design:Female,  british accent").unwrap();
        let b = parse("design:female, british accent").unwrap();
        assert_eq!(a, b);
        assert_eq!(a.id(), "design:female, british accent");
        assert_eq!(a.gender(), Some("female"));
        assert_eq!(parse("female, british accent").unwrap(), a);
        assert_eq!(parse("auto"), Ok(Choice::Auto));
        assert_eq!(parse("design:"), Ok(Choice::Auto));
    }

    #[test]
    fn a_bad_design_says_what_is_wrong_and_an_unknown_name_stays_unknown() {
        match parse("design:femal, british accent") {
            Err(NameError::Design(message)) => {
                assert!(message.contains("femal"), "{message}");
                assert!(message.contains("female"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(parse("af_heart"), Err(NameError::Unknown));
        assert!(matches!(
            parse("design:male, female"),
            Err(NameError::Design(_))
        ));
    }
}
