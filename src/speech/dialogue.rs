//! Multi-speaker scripts: many short lines, each read in its speaker's voice, as one piece of
//! audio or as one track per speaker (the Python omnivoice-server's `/v1/audio/script`).
//!
//! A script is no special kind of work: each line is an ordinary request through
//! [`SpeechService::speak`], so its sentences batch with other traffic, repeated lines come
//! from the audio cache and the queue's limits hold. What belongs to the script alone lives
//! here: the limits on its shape, which voice each speaker keeps (voices of any engine may
//! meet in one script), a few lines in flight at a time, the pauses where the speaker
//! changes, what a failed line does to the rest, and how many scripts are read at once. A
//! speaker whose voice would drift from line to line (OmniVoice without a clone) keeps the
//! voice of its first line: that line is the reference of its later ones ([`OneVoice`]).

use std::collections::HashMap;
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::stream::{self, StreamExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::one_voice::{OneVoice, Turn};
use super::{Failure, Request, SpeechError, SpeechService};
use crate::audio::{self, AudioFormat};

/// Most lines in one script.
pub const MAX_LINES: usize = 100;
/// Most characters in one line (the server's `--max-input-chars` may allow fewer).
pub const MAX_LINE_CHARS: usize = 10_000;
/// Most characters in all lines together.
pub const MAX_SCRIPT_CHARS: usize = 50_000;
/// Most distinct speakers in one script.
pub const MAX_SPEAKERS: usize = 10;
/// Longest speaker id; ids are ASCII letters, digits, `_` and `-`.
pub const MAX_SPEAKER_ID_CHARS: usize = 64;
/// Silence where the speaker changes, in seconds.
pub const PAUSE_S: RangeInclusive<f64> = 0.0..=5.0;
pub const DEFAULT_PAUSE_S: f64 = 0.5;
/// Longest script accepted, by its estimated length: a bound on the audio (and the memory it
/// takes) before any of it is computed.
pub const MAX_ESTIMATED_S: f64 = 600.0;
/// Seconds of speech per character at speed 1, on the long side (the Python server's estimate).
const ESTIMATED_S_PER_CHAR: f64 = 0.08;
/// Lines of one script being synthesized at once: enough that a batching engine gets several
/// lines of it in one pass, few enough that one script does not crowd out other requests.
pub const LINES_IN_FLIGHT: usize = 4;
/// What a client is told to wait when every script slot is taken: a short script's time.
const BUSY_RETRY_AFTER: Duration = Duration::from_secs(2);

/// A script as a client asked for it, before validation.
#[derive(Debug, Clone, Default)]
pub struct Dialogue {
    /// The engine of voices that do not name one; `None`: the default engine.
    pub model: Option<String>,
    pub lines: Vec<Line>,
    /// The voice of speakers whose first line names none; `None`: the server's default voice.
    pub default_voice: Option<String>,
    /// The speed of lines that state none; `None`: 1.0.
    pub speed: Option<f64>,
    /// `None`: wav (the Python server's default for scripts).
    pub response_format: Option<String>,
    /// `single_track` (the default) or `multi_track`.
    pub output_format: Option<String>,
    /// `None`: [`DEFAULT_PAUSE_S`].
    pub pause_between_speakers: Option<f64>,
    /// `abort` (the default) or `skip`.
    pub on_error: Option<String>,
    pub seed: Option<u64>,
    /// `false` neither reads nor writes the audio cache.
    pub use_cache: bool,
}

/// One line of a script.
#[derive(Debug, Clone, Default)]
pub struct Line {
    pub speaker: String,
    pub text: String,
    /// The speaker's voice, when this is the speaker's first line; later lines keep it.
    pub voice: Option<String>,
    pub speed: Option<f64>,
}

/// How the audio comes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// One file, the lines in order.
    SingleTrack,
    /// One file per speaker, each as long as the script, silent where others speak.
    MultiTrack,
}

/// What a line that cannot be spoken does to the script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OnError {
    Abort,
    Skip,
}

/// A script read.
#[derive(Debug)]
pub struct Reading {
    pub format: AudioFormat,
    pub layout: Layout,
    /// Rate of the encoded audio (every track's).
    pub sample_rate: u32,
    pub duration_s: f64,
    /// The lines spoken, in order, where they sit in the audio.
    pub placed: Vec<Placed>,
    /// The lines left out (`on_error: skip`), in order.
    pub skipped: Vec<Skipped>,
    /// The script's audio: one file, or one per speaker in order of first line spoken.
    pub audio: Audio,
}

impl Reading {
    /// Distinct speakers among the lines spoken.
    pub fn speakers(&self) -> usize {
        let mut speakers: Vec<&str> = self.placed.iter().map(|p| p.speaker.as_str()).collect();
        speakers.sort_unstable();
        speakers.dedup();
        speakers.len()
    }
}

/// Where a line sits in the script's audio, in samples of the encoded rate.
#[derive(Debug, Clone)]
pub struct Placed {
    /// The line's position in the request.
    pub index: usize,
    pub speaker: String,
    pub offset: usize,
    pub length: usize,
}

/// A line left out, and why.
#[derive(Debug, Clone)]
pub struct Skipped {
    pub index: usize,
    /// The request field at fault (`script[3].voice`, `default_voice`, …).
    pub param: String,
    pub error: SpeechError,
}

#[derive(Debug)]
pub enum Audio {
    Single(Bytes),
    /// Speaker id and that speaker's track.
    Tracks(Vec<(String, Bytes)>),
}

/// Why a script was refused or not read.
#[derive(Debug, thiserror::Error)]
pub enum DialogueError {
    /// The script breaks a rule of its shape; `param` is the field path (`script[3].text`).
    #[error("{message}")]
    Invalid { param: String, message: String },
    /// Every script slot is taken.
    #[error(
        "The server is reading its limit of {limit} script(s) at once; retry in a few seconds."
    )]
    Busy { limit: usize, retry_after: Duration },
    /// A line could not be spoken (the first, with `on_error: abort`; with `skip`, the first
    /// of lines that all failed).
    #[error("{}", line_message(*index, *every_line, source))]
    Line {
        index: usize,
        param: String,
        every_line: bool,
        #[source]
        source: SpeechError,
    },
    /// The script's audio could not be put together.
    #[error(transparent)]
    Speech(#[from] SpeechError),
}

fn line_message(index: usize, every_line: bool, source: &SpeechError) -> String {
    if every_line {
        format!("Every segment failed; the first, segment {index}: {source}")
    } else {
        format!("Segment {index} failed: {source}")
    }
}

impl DialogueError {
    fn invalid(param: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid {
            param: param.into(),
            message: message.into(),
        }
    }
}

/// Reads scripts, a bounded number at once.
#[derive(Clone)]
pub struct Dialogues {
    speech: SpeechService,
    slots: Arc<Semaphore>,
    limit: usize,
    max_line_chars: usize,
}

/// A line's job: its index, speaker, and the fields its voice and speed came from.
type LineJob = (usize, String, super::Job, String, String);

/// A line ready to be spoken, or refused before any synthesis.
struct Planned {
    index: usize,
    speaker: String,
    request: Request,
    /// Where the speaker's voice came from, for errors about it.
    voice_param: String,
    /// Where the line's speed came from.
    speed_param: String,
}

impl Dialogues {
    /// `max_in_flight` scripts are read at once; lines longer than `max_input_chars` (or
    /// [`MAX_LINE_CHARS`]) are refused.
    pub fn new(speech: SpeechService, max_in_flight: usize, max_input_chars: usize) -> Self {
        let limit = max_in_flight.clamp(1, Semaphore::MAX_PERMITS);
        Self {
            speech,
            slots: Arc::new(Semaphore::new(limit)),
            limit,
            max_line_chars: max_input_chars.min(MAX_LINE_CHARS),
        }
    }

    /// Reads `dialogue`. Dropping the future stops it: lines not yet spoken are never
    /// computed.
    pub async fn read(&self, dialogue: Dialogue) -> Result<Reading, DialogueError> {
        let _slot = self.take_slot()?;
        // Choosing the lines' voices may read voice files: on a blocking thread.
        let this = self.clone();
        let (jobs, mut skipped, shape) =
            crate::blocking::run(move || this.prepare_lines(dialogue)).await?;
        let Some(native) = jobs
            .iter()
            .map(|(_, _, job, ..)| job.voice().sample_rate)
            .max()
        else {
            return Err(every_line_failed(skipped));
        };
        // One rate for every engine's voices: the highest, as the format writes it, so that
        // encoding resamples nothing and offsets are exact in the file's own samples.
        let rate = shape.format.output_sample_rate(native);
        let speech = &self.speech;
        let turns = turns(speech, &jobs);
        let mut spoken_lines = stream::iter(jobs.into_iter().zip(turns))
            .map(
                |((index, speaker, job, voice_param, speed_param), turn)| async move {
                    let spoken = speak_at(speech, job, turn, rate).await;
                    (index, speaker, voice_param, speed_param, spoken)
                },
            )
            .buffered(LINES_IN_FLIGHT);
        let mut spoken = Vec::new();
        while let Some((index, speaker, voice_param, speed_param, result)) =
            spoken_lines.next().await
        {
            match result {
                Ok(samples) => spoken.push((index, speaker, samples)),
                Err(error) => {
                    let param = param_of(&error, index, &voice_param, &speed_param);
                    refuse_or_skip(shape.on_error, index, param, error, &mut skipped)?;
                }
            }
        }
        drop(spoken_lines);
        if spoken.is_empty() {
            return Err(every_line_failed(skipped));
        }
        skipped.sort_by_key(|s| s.index);
        let pause = (shape.pause_s * f64::from(rate)).round() as usize;
        let (placed, audio) =
            crate::blocking::run(move || assemble(spoken, pause, rate, shape.format, shape.layout))
                .await?;
        let length = placed.last().map_or(0, |p| p.offset + p.length);
        Ok(Reading {
            format: shape.format,
            layout: shape.layout,
            sample_rate: rate,
            duration_s: length as f64 / f64::from(rate),
            placed,
            skipped,
            audio,
        })
    }

    /// The jobs of `dialogue`'s lines, those refused (when the script skips them) and the
    /// script-wide choices.
    fn prepare_lines(
        &self,
        dialogue: Dialogue,
    ) -> Result<(Vec<LineJob>, Vec<Skipped>, Shape), DialogueError> {
        let (plan, shape) = self.plan(dialogue)?;
        let mut skipped = Vec::new();
        let mut jobs = Vec::with_capacity(plan.len());
        for line in plan {
            let voice_param = line.voice_param.clone();
            let speed_param = line.speed_param.clone();
            match self.speech.prepare_here(line.request) {
                Ok(job) => jobs.push((line.index, line.speaker, job, voice_param, speed_param)),
                Err(error) => {
                    let param = param_of(&error, line.index, &voice_param, &speed_param);
                    refuse_or_skip(shape.on_error, line.index, param, error, &mut skipped)?;
                }
            }
        }
        Ok((jobs, skipped, shape))
    }

    fn take_slot(&self) -> Result<OwnedSemaphorePermit, DialogueError> {
        self.slots.clone().try_acquire_owned().map_err(|_| {
            metrics::counter!(crate::metrics::REJECTED, "reason" => "scripts_full").increment(1);
            DialogueError::Busy {
                limit: self.limit,
                retry_after: BUSY_RETRY_AFTER,
            }
        })
    }

    /// Checks the script's shape and gives each line its request, each speaker the voice of
    /// its first line (the Python server's rule: a later line's voice does not change it).
    fn plan(&self, dialogue: Dialogue) -> Result<(Vec<Planned>, Shape), DialogueError> {
        let shape = Shape::of(&dialogue)?;
        let lines = &dialogue.lines;
        if lines.is_empty() {
            return Err(DialogueError::invalid(
                "script",
                "'script' must hold at least one segment.",
            ));
        }
        if lines.len() > MAX_LINES {
            return Err(DialogueError::invalid(
                "script",
                format!(
                    "'script' has {} segments; the limit is {MAX_LINES}.",
                    lines.len()
                ),
            ));
        }
        let speed_range =
            f64::from(*crate::params::SPEED.start())..=f64::from(*crate::params::SPEED.end());
        let check_speed = |param: &str, speed: Option<f64>| match speed {
            Some(s) if !speed_range.contains(&s) => Err(DialogueError::invalid(
                param,
                format!(
                    "'{param}' must be between {} and {}, got {s}.",
                    speed_range.start(),
                    speed_range.end()
                ),
            )),
            _ => Ok(()),
        };
        check_speed("speed", dialogue.speed)?;
        if let Some(voice) = &dialogue.default_voice {
            if voice.trim().is_empty() {
                return Err(DialogueError::invalid(
                    "default_voice",
                    "'default_voice' must not be blank.",
                ));
            }
        }
        let mut total_chars = 0;
        let mut estimated_s = 0.0;
        let mut speakers: Vec<(&str, String, String)> = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            let speaker = &line.speaker;
            if speaker.is_empty()
                || speaker.len() > MAX_SPEAKER_ID_CHARS
                || !speaker
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            {
                return Err(DialogueError::invalid(
                    format!("script[{i}].speaker"),
                    format!(
                        "Invalid speaker id '{speaker}': use 1 to {MAX_SPEAKER_ID_CHARS} letters, \
                         digits, '_' or '-'."
                    ),
                ));
            }
            let chars = line.text.chars().count();
            if line.text.trim().is_empty() {
                return Err(DialogueError::invalid(
                    format!("script[{i}].text"),
                    format!("'script[{i}].text' must contain text to speak."),
                ));
            }
            if chars > self.max_line_chars {
                return Err(DialogueError::invalid(
                    format!("script[{i}].text"),
                    format!(
                        "'script[{i}].text' is {chars} characters long; the limit is {}.",
                        self.max_line_chars
                    ),
                ));
            }
            if line.voice.as_deref().is_some_and(|v| v.trim().is_empty()) {
                return Err(DialogueError::invalid(
                    format!("script[{i}].voice"),
                    format!("'script[{i}].voice' must not be blank."),
                ));
            }
            check_speed(&format!("script[{i}].speed"), line.speed)?;
            total_chars += chars;
            let speed = line.speed.or(dialogue.speed).unwrap_or(1.0);
            estimated_s += chars as f64 * ESTIMATED_S_PER_CHAR / speed;
            if !speakers.iter().any(|(s, ..)| s == speaker) {
                let (voice, param) = match (&line.voice, &dialogue.default_voice) {
                    (Some(voice), _) => (voice.clone(), format!("script[{i}].voice")),
                    (None, Some(voice)) => (voice.clone(), "default_voice".to_string()),
                    (None, None) => (String::new(), "model".to_string()),
                };
                speakers.push((speaker, voice, param));
            }
        }
        if total_chars > MAX_SCRIPT_CHARS {
            return Err(DialogueError::invalid(
                "script",
                format!(
                    "The script is {total_chars} characters long; the limit is {MAX_SCRIPT_CHARS}."
                ),
            ));
        }
        if speakers.len() > MAX_SPEAKERS {
            return Err(DialogueError::invalid(
                "script",
                format!(
                    "The script has {} distinct speakers; the limit is {MAX_SPEAKERS}.",
                    speakers.len()
                ),
            ));
        }
        // Worst case: a pause before every line.
        estimated_s += (lines.len() - 1) as f64 * shape.pause_s;
        if estimated_s > MAX_ESTIMATED_S {
            return Err(DialogueError::invalid(
                "script",
                format!(
                    "The script would last about {estimated_s:.0} s; the limit is \
                     {MAX_ESTIMATED_S:.0} s. Split it into several requests."
                ),
            ));
        }
        let model = dialogue.model.clone().unwrap_or_else(|| "tts-1".into());
        let plan = lines
            .iter()
            .enumerate()
            .map(|(index, line)| {
                let (_, voice, voice_param) = speakers
                    .iter()
                    .find(|(s, ..)| *s == line.speaker)
                    .expect("every speaker was noted");
                let (model, voice) = self.engine_of(&model, voice);
                Planned {
                    index,
                    speaker: line.speaker.clone(),
                    request: Request {
                        model,
                        voice,
                        input: line.text.clone(),
                        speed: line.speed.or(dialogue.speed),
                        seed: dialogue.seed,
                        use_cache: dialogue.use_cache,
                        native_pcm: true,
                        ..Request::default()
                    },
                    voice_param: voice_param.clone(),
                    speed_param: if line.speed.is_some() {
                        format!("script[{index}].speed")
                    } else {
                        "speed".into()
                    },
                }
            })
            .collect();
        Ok((plan, shape))
    }

    /// The engine (as a `model`) and voice name that `voice` means in a script of `model`:
    /// `engine/voice` names its engine; a name `model`'s engine knows is its; a voice id of
    /// another engine is that engine's. An empty name is the server's default voice.
    fn engine_of(&self, model: &str, voice: &str) -> (String, String) {
        let registry = &self.speech.inner.registry;
        // The Python server's spelling of OpenAI's voice names.
        let voice = voice.strip_prefix("openai:").unwrap_or(voice).trim();
        if voice.is_empty() {
            return match registry.engine_for_model(model) {
                Some(engine) if engine == registry.default_engine() => {
                    (model.to_string(), registry.default_voice().to_string())
                }
                // Another engine's stand-in for the default voice.
                _ => (model.to_string(), "alloy".to_string()),
            };
        }
        if let Some((engine, name)) = voice.split_once('/') {
            if registry.engine_ids().iter().any(|id| id == engine) {
                return (engine.to_string(), name.to_string());
            }
        }
        if registry.resolve(model, voice).is_err() {
            if let Some(engine) = registry.engine_of_voice(voice) {
                return (engine, voice.to_string());
            }
        }
        (model.to_string(), voice.to_string())
    }
}

/// The script-wide choices, checked.
#[derive(Debug, Clone, Copy)]
struct Shape {
    format: AudioFormat,
    layout: Layout,
    pause_s: f64,
    on_error: OnError,
}

impl Shape {
    fn of(dialogue: &Dialogue) -> Result<Self, DialogueError> {
        let format = match dialogue.response_format.as_deref() {
            None => AudioFormat::Wav,
            Some(name) => AudioFormat::parse(name).ok_or_else(|| {
                let valid: Vec<&str> = AudioFormat::ALL.iter().map(|f| f.as_str()).collect();
                DialogueError::invalid(
                    "response_format",
                    format!(
                        "Unsupported response_format '{name}'. Supported: {}.",
                        valid.join(", ")
                    ),
                )
            })?,
        };
        let layout = match dialogue.output_format.as_deref() {
            None | Some("single_track") => Layout::SingleTrack,
            Some("multi_track") => Layout::MultiTrack,
            Some(other) => {
                return Err(DialogueError::invalid(
                    "output_format",
                    format!(
                        "Unknown output_format '{other}'. Supported: single_track, multi_track."
                    ),
                ))
            }
        };
        let on_error = match dialogue.on_error.as_deref() {
            None | Some("abort") => OnError::Abort,
            Some("skip") => OnError::Skip,
            Some(other) => {
                return Err(DialogueError::invalid(
                    "on_error",
                    format!("Unknown on_error '{other}'. Supported: abort, skip."),
                ))
            }
        };
        let pause_s = dialogue.pause_between_speakers.unwrap_or(DEFAULT_PAUSE_S);
        if !PAUSE_S.contains(&pause_s) {
            return Err(DialogueError::invalid(
                "pause_between_speakers",
                format!(
                    "'pause_between_speakers' must be between {} and {} seconds, got {pause_s}.",
                    PAUSE_S.start(),
                    PAUSE_S.end()
                ),
            ));
        }
        Ok(Self {
            format,
            layout,
            pause_s,
            on_error,
        })
    }
}

/// The request field a line's error is about, as the script names it.
fn param_of(error: &SpeechError, index: usize, voice_param: &str, speed_param: &str) -> String {
    match error {
        SpeechError::UnknownVoice(_) | SpeechError::UnknownModel(_) => voice_param.to_string(),
        SpeechError::Invalid { param, .. } => match *param {
            "input" => format!("script[{index}].text"),
            "speed" => speed_param.to_string(),
            "voice" | "model" | "language" => voice_param.to_string(),
            other => other.to_string(),
        },
        _ => format!("script[{index}]"),
    }
}

/// Whether a line's failure is the line's own (its voice, its text, the engine on it) rather
/// than the server's state (full, stopping), which no line should be skipped for.
fn is_the_lines_own(error: &SpeechError) -> bool {
    matches!(
        error,
        SpeechError::Invalid { .. }
            | SpeechError::UnknownModel(_)
            | SpeechError::UnknownVoice(_)
            | SpeechError::VoiceLoad(_)
            | SpeechError::Engine(_)
    )
}

fn refuse_or_skip(
    on_error: OnError,
    index: usize,
    param: String,
    error: SpeechError,
    skipped: &mut Vec<Skipped>,
) -> Result<(), DialogueError> {
    if on_error == OnError::Skip && is_the_lines_own(&error) {
        tracing::debug!(segment = index, error = %error, "script segment skipped");
        skipped.push(Skipped {
            index,
            param,
            error,
        });
        return Ok(());
    }
    Err(DialogueError::Line {
        index,
        param,
        every_line: false,
        source: error,
    })
}

fn every_line_failed(mut skipped: Vec<Skipped>) -> DialogueError {
    skipped.sort_by_key(|s| s.index);
    let first = skipped
        .into_iter()
        .next()
        .expect("a script without spoken lines skipped them all");
    DialogueError::Line {
        index: first.index,
        param: first.param,
        every_line: true,
        source: first.error,
    }
}

/// Each line's turn in its speaker's voice: a speaker whose voice would drift keeps its first
/// line's ([`OneVoice`]).
fn turns(
    speech: &SpeechService,
    jobs: &[(usize, String, super::Job, String, String)],
) -> Vec<Turn> {
    let mut voices: HashMap<&str, OneVoice> = HashMap::new();
    jobs.iter()
        .map(|(_, speaker, job, ..)| {
            voices
                .entry(speaker)
                .or_insert_with(|| OneVoice::new(speech.drifts(job)))
                .next()
        })
        .collect()
}

/// A line's samples at `rate`.
async fn speak_at(
    speech: &SpeechService,
    job: super::Job,
    turn: Turn,
    rate: u32,
) -> Result<Vec<f32>, SpeechError> {
    let audio = match turn.continuation().await {
        None => speech.speak(job).await?.audio,
        Some(continuation) => {
            let (audio, left) = speech.speak_continuing(&job, continuation).await?;
            turn.leave(left.as_ref());
            Arc::new(audio)
        }
    };
    let audio = &audio;
    // Native PCM: 16-bit little-endian samples at the voice's rate.
    let samples: Vec<f32> = audio
        .bytes
        .chunks_exact(2)
        .map(|pair| f32::from(i16::from_le_bytes([pair[0], pair[1]])) / 32767.0)
        .collect();
    audio::resample::resample(&samples, audio.sample_rate, rate).map_err(|e| {
        SpeechError::Engine(Failure::new(
            format_args!(
                "resampling {} Hz audio to {rate} Hz failed",
                audio.sample_rate
            ),
            e,
        ))
    })
}

/// The lines placed behind their pauses (a pause wherever the speaker changes, none between
/// lines of one speaker, as the Python server does) and encoded.
fn assemble(
    spoken: Vec<(usize, String, Vec<f32>)>,
    pause: usize,
    rate: u32,
    format: AudioFormat,
    layout: Layout,
) -> Result<(Vec<Placed>, Audio), SpeechError> {
    let mut placed: Vec<Placed> = Vec::with_capacity(spoken.len());
    let mut at = 0;
    for (index, speaker, samples) in &spoken {
        if placed.last().is_some_and(|p| p.speaker != *speaker) {
            at += pause;
        }
        placed.push(Placed {
            index: *index,
            speaker: speaker.clone(),
            offset: at,
            length: samples.len(),
        });
        at += samples.len();
    }
    let length = at;
    let encode = |samples: &[f32]| {
        audio::encode(format, samples, rate)
            .map(Bytes::from)
            .map_err(|e| {
                SpeechError::Encoding(Failure::new(
                    format_args!("encoding {} failed", format.as_str()),
                    e,
                ))
            })
    };
    let audio = match layout {
        Layout::SingleTrack => {
            let mut track = vec![0.0; length];
            for (p, (_, _, samples)) in placed.iter().zip(&spoken) {
                track[p.offset..p.offset + p.length].copy_from_slice(samples);
            }
            Audio::Single(encode(&track)?)
        }
        Layout::MultiTrack => {
            let mut speakers: Vec<&str> = Vec::new();
            for p in &placed {
                if !speakers.contains(&p.speaker.as_str()) {
                    speakers.push(&p.speaker);
                }
            }
            // One track at a time: only one script-long buffer is held.
            let mut tracks = Vec::with_capacity(speakers.len());
            for speaker in speakers {
                let mut track = vec![0.0; length];
                for (p, (_, _, samples)) in placed.iter().zip(&spoken) {
                    if p.speaker == speaker {
                        track[p.offset..p.offset + p.length].copy_from_slice(samples);
                    }
                }
                tracks.push((speaker.to_string(), encode(&track)?));
            }
            Audio::Tracks(tracks)
        }
    };
    Ok((placed, audio))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(speaker: &str, n: usize) -> (usize, String, Vec<f32>) {
        (0, speaker.to_string(), vec![0.5; n])
    }

    #[test]
    fn pauses_sit_where_the_speaker_changes_only() {
        let spoken = vec![line("a", 10), line("a", 5), line("b", 7), line("a", 3)];
        let (placed, audio) =
            assemble(spoken, 4, 24_000, AudioFormat::Pcm, Layout::SingleTrack).unwrap();
        let offsets: Vec<usize> = placed.iter().map(|p| p.offset).collect();
        assert_eq!(offsets, [0, 10, 19, 30]);
        let Audio::Single(bytes) = audio else {
            panic!("one track")
        };
        assert_eq!(bytes.len(), 33 * 2);
        let silent: Vec<bool> = bytes.chunks(2).map(|s| s == [0, 0]).collect();
        assert!(silent[15..19].iter().all(|&s| s) && !silent[14] && !silent[19]);
        assert!(silent[26..30].iter().all(|&s| s) && !silent[25] && !silent[30]);
    }

    #[test]
    fn every_track_lasts_the_whole_script() {
        let spoken = vec![line("a", 10), line("b", 7), line("a", 3)];
        let (_, audio) = assemble(spoken, 2, 24_000, AudioFormat::Pcm, Layout::MultiTrack).unwrap();
        let Audio::Tracks(tracks) = audio else {
            panic!("tracks")
        };
        let names: Vec<&str> = tracks.iter().map(|(s, _)| s.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        for (_, bytes) in &tracks {
            assert_eq!(bytes.len(), 24 * 2);
        }
        let b: Vec<bool> = tracks[1].1.chunks(2).map(|s| s != [0, 0]).collect();
        assert_eq!(b.iter().filter(|&&v| v).count(), 7);
        assert!(b[12..19].iter().all(|&v| v));
    }
}
