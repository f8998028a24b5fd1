//! A speech request as any front door states it, and its validated form.
//!
//! Every rule about what may be asked lives here: input length, formats, ranges, which voice
//! a model and voice name mean. A front door fills in a [`Request`] from its own wire format;
//! only [`SpeechService::prepare`](super::SpeechService::prepare) turns it into a [`Job`], so
//! nothing unvalidated reaches the cache, the batcher or an engine.

use crate::audio::AudioFormat;
use crate::engine::registry::{Registry, ResolvedVoice};
use crate::params::{Generation, SynthesisParams};
use std::sync::Arc;

use crate::text::english::{DateOrder, ReadingOptions};
use crate::text::lexicon::Lexicon;

use super::error::{InvalidReason, SpeechError};
use super::script::{no_voice_speaks, LanguageSettings, Reader, Script, Voices};

/// What a client asked for, before validation.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// An engine id, an OpenAI model name or a configured alias.
    pub model: String,
    /// A voice id (`voice` or `voice:speaker`), an OpenAI voice name or an alias.
    pub voice: String,
    pub input: String,
    /// `None` means mp3, as OpenAI's default.
    pub response_format: Option<String>,
    /// `None` means 1.0.
    pub speed: Option<f64>,
    /// `None` means the server's `--seed`, or a fresh random seed.
    pub seed: Option<u64>,
    pub noise_scale: Option<f32>,
    pub noise_w: Option<f32>,
    /// `false` neither reads nor writes the audio cache.
    pub use_cache: bool,
    /// Raw 16-bit samples at the voice's own rate instead of `response_format`, for front
    /// doors whose protocol states the rate itself.
    pub native_pcm: bool,
    /// `Some(false)` speaks the text without writing out numbers, dates and symbols;
    /// `None` means the server's setting.
    pub normalize: Option<bool>,
    /// `mdy` or `dmy`, for slashed dates; `None` means the server's setting.
    pub date_order: Option<String>,
    /// The language the input is written in (a tag: `de`, `pt-BR`): it chooses the voice
    /// when `voice` is an alias (an OpenAI name, say). `None`: the voice's own.
    pub language: Option<String>,
    /// `text` or `ssml`; `None`: SSML when the input starts with `<speak>`.
    pub input_format: Option<String>,
    /// A voice design (`female, low pitch`), for engines that follow one (OmniVoice's: it
    /// then decides the voice); other engines accept it and have no use for it.
    pub instructions: Option<String>,
    /// OmniVoice's generation fields; refused for other engines.
    pub generation: Generation,
}

/// A validated request: a known voice, a supported format and parameters in range.
#[derive(Debug, Clone)]
pub struct Job {
    voice: ResolvedVoice,
    input: String,
    format: AudioFormat,
    params: SynthesisParams,
    use_cache: bool,
    /// How English text is written out before it is phonemized; `None` when the request or
    /// the server turned that off.
    reading: Option<ReadingOptions>,
    /// The pronunciation dictionary as it was when the request came.
    lexicon: Arc<Lexicon>,
    /// The input as it will be read: empty for text that arrives later.
    script: Arc<Script>,
    /// Bracketed tags the voice will read as words though they look like sound cues.
    unknown_cues: Vec<String>,
    /// Whether the request named its voice outright (no alias, no default): text that voice
    /// cannot read is then refused, never handed to another voice.
    voice_named_outright: bool,
}

impl Job {
    pub fn voice(&self) -> &ResolvedVoice {
        &self.voice
    }

    pub fn input(&self) -> &str {
        &self.input
    }

    pub fn format(&self) -> AudioFormat {
        self.format
    }

    /// Bracketed tags in the input that look like sound cues (`[laughter]`) but that the
    /// voice reads as words: a likely typo, worth telling the client.
    pub fn unknown_cues(&self) -> &[String] {
        &self.unknown_cues
    }

    pub fn params(&self) -> &SynthesisParams {
        &self.params
    }

    pub fn use_cache(&self) -> bool {
        self.use_cache
    }

    pub fn reading(&self) -> Option<&ReadingOptions> {
        self.reading.as_ref()
    }

    /// Whether the request named its voice outright (see [`Voices::outright`]).
    pub(super) fn voice_named_outright(&self) -> bool {
        self.voice_named_outright
    }

    pub fn lexicon(&self) -> &Lexicon {
        &self.lexicon
    }

    pub(super) fn script(&self) -> &Script {
        &self.script
    }

    /// The languages the input is read in, in the order first heard (BCP 47 tags).
    pub fn languages(&self) -> Vec<String> {
        if self.script.utterances.is_empty() {
            // Text that arrives later: the voice's own, until it does.
            vec![self.voice.reading_language().replace('_', "-")]
        } else {
            self.script.languages()
        }
    }
}

/// Limits that come from the server's settings rather than from the domain.
pub(super) struct Limits {
    pub max_input_chars: usize,
    pub default_seed: Option<u64>,
    pub text: TextSettings,
}

/// The server's own choices about reading text (English written out, languages), which a
/// request may override.
#[derive(Debug, Clone, Default)]
pub struct TextSettings {
    /// Whether numbers, money, dates and symbols are written out.
    pub normalize: bool,
    pub reading: ReadingOptions,
    /// Which voices read which languages, and whether sentences' languages are detected.
    pub languages: LanguageSettings,
}

pub(super) fn validate(
    request: Request,
    registry: &Registry,
    limits: &Limits,
    lexicon: Arc<Lexicon>,
) -> Result<Job, SpeechError> {
    if request.input.trim().is_empty() {
        return Err(SpeechError::invalid(
            "input",
            InvalidReason::Empty,
            "'input' must contain text to speak.",
        ));
    }
    let chars = request.input.chars().count();
    if chars > limits.max_input_chars {
        return Err(SpeechError::invalid(
            "input",
            InvalidReason::TooLong,
            format!(
                "'input' is {chars} characters long; the limit is {}.",
                limits.max_input_chars
            ),
        ));
    }
    let ssml = is_ssml_format(request.input_format.as_deref())?
        .unwrap_or_else(|| crate::text::ssml::is_ssml(&request.input));
    let mut job = validate_settings(request, registry, limits, lexicon)?;
    let reader = Reader {
        voices: Voices {
            registry,
            voice: &job.voice,
            languages: &limits.text.languages,
            outright: job.voice_named_outright,
        },
        reading: job.reading.as_ref(),
        lexicon: &job.lexicon,
    };
    let script = reader.script(&job.input, ssml)?;
    if script.utterances.is_empty() {
        return Err(SpeechError::invalid(
            "input",
            InvalidReason::Empty,
            "input contains nothing that can be spoken",
        ));
    }
    job.script = Arc::new(script);
    Ok(job)
}

/// Whether `input_format` says SSML (`ssml`) or plain text (`text`); `None` when unset, for
/// the caller to decide.
pub(super) fn is_ssml_format(input_format: Option<&str>) -> Result<Option<bool>, SpeechError> {
    match input_format {
        None => Ok(None),
        Some("ssml") => Ok(Some(true)),
        Some("text") => Ok(Some(false)),
        Some(other) => Err(SpeechError::invalid(
            "input_format",
            InvalidReason::Unsupported,
            format!("Unknown input_format '{other}'. Supported: text, ssml."),
        )),
    }
}

/// Everything but the input: for text that arrives later, piece by piece (whoever feeds it
/// bounds how much waits).
pub(super) fn validate_settings(
    request: Request,
    registry: &Registry,
    limits: &Limits,
    lexicon: Arc<Lexicon>,
) -> Result<Job, SpeechError> {
    let format = match request.response_format.as_deref() {
        _ if request.native_pcm => AudioFormat::PcmNative,
        None => AudioFormat::Mp3,
        Some(name) => AudioFormat::parse(name).ok_or_else(|| {
            let valid: Vec<&str> = AudioFormat::ALL.iter().map(|f| f.as_str()).collect();
            SpeechError::invalid(
                "response_format",
                InvalidReason::Unsupported,
                format!(
                    "Unsupported response_format '{name}'. Supported: {}.",
                    valid.join(", ")
                ),
            )
        })?,
    };
    let mut params = SynthesisParams {
        // Out-of-range f64s stay out of range as f32 (or become infinite), so the check below
        // still sees them.
        speed: request.speed.unwrap_or(1.0) as f32,
        seed: request.seed.or(limits.default_seed),
        speaker: None,
        noise_scale: request.noise_scale,
        noise_w: request.noise_w,
        generation: request.generation,
    };
    params.validate()?;
    let voice = registry.resolve(&request.model, &request.voice)?;
    let voice = match request.instructions.as_deref() {
        None => voice,
        Some(instructions) => registry.instructed(&voice, instructions)?.unwrap_or(voice),
    };
    let mut language = request.language.clone();
    if let Some(defaults) = registry.defaults_of(&voice) {
        // The voice's own settings (a voice file's) fill what the request left unset.
        if request.speed.is_none() {
            params.speed = defaults.speed.map_or(params.speed, |speed| speed as f32);
        }
        params.seed = request.seed.or(defaults.seed).or(limits.default_seed);
        params.generation = params.generation.or(defaults.generation);
        language = language.or(defaults.language);
        params.validate()?;
    }
    if params.generation.is_set() && !registry.takes_generation(&voice) {
        return Err(SpeechError::invalid(
            "model",
            InvalidReason::Unsupported,
            format!(
                "The generation fields (num_step, guidance_scale, duration, …) are OmniVoice's; \
                 the {} engine has no use for them.",
                voice.key.engine()
            ),
        ));
    }
    let reading = reading(&request, limits)?;
    let voice = match language.as_deref() {
        None => voice,
        Some(tag) => voice_of_language(tag, voice, &request.voice, registry, limits)?,
    };
    let voice_named_outright =
        !(request.voice.trim().is_empty() || registry.is_alias(&request.voice));
    params.speaker = voice.speaker;
    let script = Arc::new(Script::of(voice.clone(), Vec::new()));
    let unknown_cues = registry.unknown_cues(&voice, &request.input);
    Ok(Job {
        voice,
        unknown_cues,
        input: request.input,
        format,
        params,
        use_cache: request.use_cache,
        reading,
        lexicon,
        script,
        voice_named_outright,
    })
}

/// The voice for a request in language `tag`: the one an alias stands for in that language,
/// or the voice named, reading `tag` when it is not its own (whether it can is the engine's to
/// say, once it is loaded).
fn voice_of_language(
    tag: &str,
    named: ResolvedVoice,
    requested: &str,
    registry: &Registry,
    limits: &Limits,
) -> Result<ResolvedVoice, SpeechError> {
    if named.language == crate::engine::MULTILINGUAL {
        // The model knows languages by id and by name (`en`, `English`); whether it knows
        // this one is its to say, once it is loaded.
        if tag.trim().is_empty() || tag.len() > 64 {
            return Err(SpeechError::invalid(
                "language",
                InvalidReason::Unsupported,
                format!("'{tag}' is no language id or name."),
            ));
        }
        return Ok(ResolvedVoice {
            reads_in: Some(tag.trim().to_string()),
            ..named
        });
    }
    let tag = kokoro_lang_code(tag).unwrap_or(tag);
    if tag.len() > 35 || !crate::text::ssml::is_language_tag(tag) {
        return Err(SpeechError::invalid(
            "language",
            InvalidReason::Unsupported,
            format!("'{tag}' is not a language tag such as 'en', 'de' or 'pt-BR'."),
        ));
    }
    let alias = requested.trim().is_empty() || registry.is_alias(requested);
    let voices = Voices {
        registry,
        voice: &named,
        languages: &limits.text.languages,
        outright: !alias,
    };
    match voices.voice_for(tag) {
        Some(voice) if alias || voice == named => Ok(voice),
        _ if alias => Err(no_voice_speaks("language", tag)),
        _ => Ok(ResolvedVoice {
            reads_in: Some(tag.to_string()),
            ..named
        }),
    }
}

/// The language a Kokoro-FastAPI `lang_code` (one letter, as Kokoro's voice names begin)
/// stands for.
fn kokoro_lang_code(code: &str) -> Option<&'static str> {
    Some(match code {
        "a" => "en-US",
        "b" => "en-GB",
        "e" => "es",
        "f" => "fr",
        "h" => "hi",
        "i" => "it",
        "j" => "ja",
        "p" => "pt-BR",
        "z" => "zh",
        _ => return None,
    })
}

/// The reading options of English text, unless the request or the server turned it off.
fn reading(request: &Request, limits: &Limits) -> Result<Option<ReadingOptions>, SpeechError> {
    let date_order = match request.date_order.as_deref() {
        None => None,
        Some(name) => Some(DateOrder::parse(name).ok_or_else(|| {
            SpeechError::invalid(
                "normalization_options.date_order",
                InvalidReason::Unsupported,
                format!("Unknown date_order '{name}'. Supported: mdy, dmy."),
            )
        })?),
    };
    let server = &limits.text;
    let on = request.normalize.unwrap_or(server.normalize);
    Ok(on.then(|| ReadingOptions {
        date_order: date_order.unwrap_or(server.reading.date_order),
    }))
}
