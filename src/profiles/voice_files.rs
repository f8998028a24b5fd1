//! The Python omnivoice-server's voice files: `<voice_file_dir>/<name>.txt`, a voice design
//! under a name, so that clients that can only send a `voice` string (every OpenAI client)
//! can still pick a designed voice. A file may also set the voice's generation settings:
//!
//! ```text
//! # studio-narrator.txt
//! male, middle-aged, low pitch, british accent
//! seed: 4242
//! speed: 0.95
//! ```
//!
//! A line `key: value` (or `key = value`) whose key is a known setting sets it; every other
//! line that is not a `#` comment is part of the design (lines joined with `, `). The settings
//! are defaults: anything a request sets itself wins. Files are read at every use (they are a
//! few lines), so voices can be added and edited without a restart; a file is parsed again
//! when its text changed. A file that cannot be used is skipped with a warning that says why,
//! once per version of it.
//!
//! This module reads files only; whether a design is valid is the engine's to say.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;
use sha2::{Digest, Sha256};

use crate::params::VoiceDefaults;

const SUFFIX: &str = ".txt";

/// A voice file, read.
#[derive(Debug, Clone, PartialEq)]
pub struct VoiceFile {
    /// The file's stem, and what clients call it by.
    pub name: String,
    /// The design as written (the engine canonicalizes it).
    pub design: String,
    pub description: Option<String>,
    pub defaults: VoiceDefaults,
    /// The first 12 hex digits of the content's sha256: a changed file is another voice.
    pub version: String,
}

/// The voice files of one directory.
#[derive(Debug)]
pub struct VoiceFiles {
    dir: PathBuf,
    /// Each file as last read: its text, and what it was.
    read: Mutex<HashMap<PathBuf, (String, Option<VoiceFile>)>>,
}

impl VoiceFiles {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            read: Mutex::new(HashMap::new()),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every usable voice file, by name.
    pub fn list(&self) -> Vec<VoiceFile> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| path.is_file() && path.to_string_lossy().ends_with(SUFFIX))
            .collect();
        paths.sort();
        paths.iter().filter_map(|path| self.load(path)).collect()
    }

    /// The voice file `name` (its case aside), if there is a usable one.
    pub fn get(&self, name: &str) -> Option<VoiceFile> {
        if !super::is_valid_name(name) {
            return None;
        }
        let exact = self.dir.join(format!("{name}{SUFFIX}"));
        if exact.is_file() {
            return self.load(&exact);
        }
        self.list()
            .into_iter()
            .find(|voice| voice.name.eq_ignore_ascii_case(name))
    }

    /// Why the file `name` cannot be used; `None` when it can, or there is none.
    pub fn problem(&self, name: &str) -> Option<String> {
        if !super::is_valid_name(name) {
            return None;
        }
        let path = self.dir.join(format!("{name}{SUFFIX}"));
        let text = std::fs::read_to_string(&path).ok()?;
        parse(&text, name).err()
    }

    /// The file as it is now, parsed again only when its text changed since the last read.
    fn load(&self, path: &Path) -> Option<VoiceFile> {
        let name = path.file_stem()?.to_string_lossy().to_string();
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %e, "ignoring a voice file");
                return None;
            }
        };
        let mut read = self.read.lock();
        if let Some((known, voice)) = read.get(path) {
            if *known == text {
                return voice.clone();
            }
        }
        let voice = if super::is_valid_name(&name) {
            parse(&text, &name)
                .map_err(
                    |why| tracing::warn!(file = %path.display(), "ignoring a voice file: {why}"),
                )
                .ok()
        } else {
            tracing::warn!(file = %path.display(), "ignoring a voice file: a name is 1 to 64 letters, digits, dashes or underscores");
            None
        };
        read.insert(path.to_path_buf(), (text, voice.clone()));
        voice
    }
}

/// A voice file's text, read as the Python server reads it; `Err` says what is wrong, by line.
pub fn parse(text: &str, name: &str) -> Result<VoiceFile, String> {
    let mut design_lines = Vec::new();
    let mut design = None;
    let mut description = None;
    let mut defaults = VoiceDefaults::default();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((key, value)) = setting(line) else {
            design_lines.push(line);
            continue;
        };
        let at = |why: String| format!("line {}: {why}", number + 1);
        let invalid = |what: &str| at(format!("'{key}' must be {what}, got '{value}'"));
        match key.as_str() {
            "instructions" => design = Some(value.to_string()),
            "description" => description = Some(value.to_string()),
            "language" => defaults.language = Some(value.to_string()),
            "seed" => defaults.seed = Some(value.parse().map_err(|_| invalid("a whole number"))?),
            "num_step" => {
                defaults.generation.num_step =
                    Some(value.parse().map_err(|_| invalid("a whole number"))?)
            }
            "speed" => defaults.speed = Some(value.parse().map_err(|_| invalid("a number"))?),
            "denoise" => {
                defaults.generation.denoise = Some(match value.to_ascii_lowercase().as_str() {
                    "true" | "yes" | "on" | "1" => true,
                    "false" | "no" | "off" | "0" => false,
                    _ => return Err(invalid("true or false")),
                })
            }
            float => {
                let slot = match float {
                    "guidance_scale" => &mut defaults.generation.guidance_scale,
                    "t_shift" => &mut defaults.generation.t_shift,
                    "position_temperature" => &mut defaults.generation.position_temperature,
                    "class_temperature" => &mut defaults.generation.class_temperature,
                    "duration" => &mut defaults.generation.duration,
                    _ => {
                        return Err(at(format!(
                            "unknown setting '{key}'. Known settings: {}",
                            KNOWN.join(", ")
                        )))
                    }
                };
                *slot = Some(value.parse().map_err(|_| invalid("a number"))?);
            }
        }
    }
    let design = design.unwrap_or_else(|| design_lines.join(", "));
    if design.trim().is_empty() {
        return Err("no voice attributes found".into());
    }
    Ok(VoiceFile {
        name: name.to_string(),
        design,
        description,
        defaults,
        version: format!("{:x}", Sha256::digest(text.as_bytes()))[..12].to_string(),
    })
}

/// The settings a file may set, the Python server's: those that shape the voice, never the
/// caller's (a file cannot set `response_format`).
const KNOWN: [&str; 12] = [
    "class_temperature",
    "denoise",
    "description",
    "duration",
    "guidance_scale",
    "instructions",
    "language",
    "num_step",
    "position_temperature",
    "seed",
    "speed",
    "t_shift",
];

/// `key: value` or `key = value`, the key an identifier (lowercased); other lines are design.
fn setting(line: &str) -> Option<(String, &str)> {
    let at = line.find([':', '='])?;
    let key = line[..at].trim();
    let value = line[at + 1..].trim();
    let identifier = key
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    (identifier && !value.is_empty()).then(|| (key.to_ascii_lowercase(), value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_a_design_and_its_settings() {
        let voice = parse(
            "# studio-narrator.txt\nmale, middle-aged\n  low pitch, british accent\nseed: 4242\n\
             Speed = 0.95\nnum_step: 16\ndenoise: off\nlanguage: en\ndescription: The narrator\n",
            "studio-narrator",
        )
        .unwrap();
        assert_eq!(voice.design, "male, middle-aged, low pitch, british accent");
        assert_eq!(voice.description.as_deref(), Some("The narrator"));
        assert_eq!(voice.defaults.seed, Some(4242));
        assert_eq!(voice.defaults.speed, Some(0.95));
        assert_eq!(voice.defaults.generation.num_step, Some(16));
        assert_eq!(voice.defaults.generation.denoise, Some(false));
        assert_eq!(voice.defaults.language.as_deref(), Some("en"));
        // `instructions:` is the design itself, over any design lines.
        let explicit = parse("female\ninstructions: male, low pitch", "x").unwrap();
        assert_eq!(explicit.design, "male, low pitch");
        assert_ne!(explicit.version, parse("female", "x").unwrap().version);
    }

    #[test]
    fn a_file_that_cannot_be_used_says_why_by_line() {
        let why = |text: &str| parse(text, "x").unwrap_err();
        assert!(why("male\nvolume: 3").starts_with("line 2: unknown setting 'volume'"));
        assert!(why("male\nseed: soon").contains("'seed' must be a whole number"));
        assert!(why("male\ndenoise: maybe").contains("true or false"));
        assert!(why("male\nguidance_scale: x").contains("a number"));
        assert_eq!(
            why("# only a comment\nseed: 3"),
            "no voice attributes found"
        );
    }

    #[test]
    fn files_are_read_again_when_they_change() {
        let dir = tempfile::tempdir().unwrap();
        let files = VoiceFiles::new(dir.path());
        assert!(files.list().is_empty());
        std::fs::write(dir.path().join("Narrator.txt"), "male").unwrap();
        std::fs::write(dir.path().join("bad name.txt"), "male").unwrap();
        std::fs::write(dir.path().join("broken.txt"), "male\nvolume: 3").unwrap();
        std::fs::write(dir.path().join("notes.md"), "male").unwrap();
        let names: Vec<String> = files.list().into_iter().map(|v| v.name).collect();
        assert_eq!(names, ["Narrator"]);
        assert_eq!(files.get("narrator").unwrap().design, "male", "case aside");
        assert!(files.problem("broken").unwrap().contains("volume"));
        assert_eq!(files.problem("Narrator"), None);
        // Changed, even within the same second and at the same size: read again.
        std::fs::write(dir.path().join("Narrator.txt"), "mela").unwrap();
        assert_eq!(files.get("Narrator").unwrap().design, "mela");
        assert_eq!(files.get("../etc/passwd"), None);
    }
}
