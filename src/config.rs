//! Server settings from four layers, merged once at startup.
//!
//! Every setting is written once, as a field of `Options`: clap reads its flag and its
//! `OMNIVOICE_<KEY>` environment variable (a flag wins over its variable), serde reads its key in
//! the TOML file named by `--config`, and both take the default from `Options::default()`. Clap
//! tells which values a flag or variable gave; only those override the file, and the file's
//! missing keys are the defaults. The result, [`Settings`], is plain data that the rest of the
//! server reads and never re-parses. The README's settings table is generated from the same
//! fields, and a test holds `config.example.toml` to them.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Display;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use clap::parser::ValueSource;
use clap::{ArgAction, ArgMatches, Args, FromArgMatches, Parser, Subcommand, ValueEnum};
use omnivoice_models::kernels::Precision;
use serde::{Deserialize, Serialize};

/// Command line of the `omnivoice-server` binary.
#[derive(Debug, Parser)]
#[command(
    name = "omnivoice-server",
    version,
    about = "OpenAI-compatible text-to-speech server"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Flags of `serve`, also accepted without the subcommand (serve is the default).
    #[command(flatten)]
    pub serve: ServeArgs,
}

impl Cli {
    /// Parses `argv` as [`Parser::try_parse_from`] does, but reads no `OMNIVOICE_*` variable:
    /// the settings come from the command line (and the file it names) alone. Tests use it, so
    /// that whatever the developer has set in their environment cannot change them.
    pub fn try_parse_args_only<I, T>(argv: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        // Clap reads each variable when the argument is built; forgetting it drops the value.
        fn forget_env(command: clap::Command) -> clap::Command {
            command
                .mut_args(|arg| arg.env(None))
                .mut_subcommands(forget_env)
        }
        let command = forget_env(<Self as clap::CommandFactory>::command());
        Self::from_arg_matches(&command.try_get_matches_from(argv)?)
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP server (the default).
    Serve(Box<ServeArgs>),
    /// Convert a Piper voice's ONNX weights to safetensors for faster loading.
    ConvertVoice {
        /// The voice's `.onnx` file (its `.onnx.json` must sit beside it).
        input: PathBuf,
        /// Where to write the `.safetensors` file.
        output: PathBuf,
    },
    /// Load the OmniVoice checkpoint, speak a known sentence and check that the audio is
    /// finite, audible, of the expected length and speech-like; exits non-zero otherwise.
    Selftest {
        /// The checkpoint directory (config.json, model.safetensors, tokenizer.json,
        /// audio_tokenizer/).
        #[arg(long, default_value = "voices/omnivoice")]
        omnivoice_dir: PathBuf,
        /// Arithmetic of the model's linear layers on the CPU.
        #[arg(long, value_enum, default_value_t = PrecisionChoice::Auto)]
        precision: PrecisionChoice,
        /// Decoding steps; fewer is quicker and still says whether the model works.
        #[arg(long, default_value_t = 32)]
        num_step: u32,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceChoice {
    Auto,
    Cpu,
    Cuda,
    Metal,
}

/// The arithmetic of the Piper voices' and the Kokoro model's convolutions on the CPU
/// ([`Precision`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PrecisionChoice {
    /// bf16 where the CPU computes it faster than f32 (AMX tiles), else f32.
    Auto,
    /// The reference: what onnxruntime computes.
    F32,
    /// bfloat16 products with f32 sums, on any CPU (slowly without bf16 hardware).
    Bf16,
    /// 8-bit products with i32 sums (Kokoro's decoder and generator, Piper's convolutions;
    /// OmniVoice runs f32), as kokoro-onnx's int8 file computes; slowly without AVX2.
    Int8,
}

/// The voices loaded before the server reports ready (written as `null` for the default
/// voice, else the list).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Preload {
    /// The default voice, whichever the engines choose.
    DefaultVoice,
    /// These (none for `--preload none`).
    Voices(Vec<String>),
}

impl PrecisionChoice {
    /// The precision asked for; `None` = whatever is fast on this CPU.
    pub fn requested(self) -> Option<Precision> {
        match self {
            PrecisionChoice::Auto => None,
            PrecisionChoice::F32 => Some(Precision::F32),
            PrecisionChoice::Bf16 => Some(Precision::Bf16),
            PrecisionChoice::Int8 => Some(Precision::Int8),
        }
    }
}

/// The defaults, for clap's `default_value_t`; serde's come from the same `Default`.
static DEFAULTS: LazyLock<Options> = LazyLock::new(Options::default);

/// Every setting, once. The field name is the file key and clap's argument id; the variable is
/// `OMNIVOICE_` and the key in capitals (a test holds both rules). An `Option` without a value
/// is "unset", and its help says what unset means. The doc comments are the `--help` text and
/// the README's description column.
#[derive(Debug, Clone, Args, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Options {
    /// Address to listen on; 0.0.0.0 for all interfaces
    #[arg(long, env = "OMNIVOICE_HOST", default_value_t = DEFAULTS.host)]
    host: IpAddr,
    /// Port to listen on; 0 picks a free one (printed on stdout)
    #[arg(long, env = "OMNIVOICE_PORT", default_value_t = DEFAULTS.port)]
    port: u16,
    /// Log filter, e.g. debug, warn or omnivoice_server=debug,info
    #[arg(long, env = "OMNIVOICE_LOG_LEVEL", default_value_t = DEFAULTS.log_level.clone())]
    log_level: String,
    /// Log format
    #[arg(long, env = "OMNIVOICE_LOG_FORMAT", value_enum, default_value_t = DEFAULTS.log_format)]
    log_format: LogFormat,
    /// Compute device for neural engines (cuda and metal need the cargo feature of that name)
    #[arg(long, env = "OMNIVOICE_DEVICE", value_enum, default_value_t = DEFAULTS.device)]
    device: DeviceChoice,
    /// Arithmetic of the Piper voices, the Kokoro model and OmniVoice (its linear layers; on AMX also attention; its codec where bf16 convolutions are faster) on the CPU: auto = bf16 where the CPU runs it faster (AMX, or AVX-512 bf16 timed at startup), else f32; only f32 is held to onnxruntime
    #[arg(long, env = "OMNIVOICE_PRECISION", value_enum, default_value_t = DEFAULTS.precision)]
    precision: PrecisionChoice,
    /// Directory scanned for Piper voices: <name>.onnx + <name>.onnx.json (+ <name>.safetensors)
    #[arg(long, env = "OMNIVOICE_VOICES_DIR", default_value_os_t = DEFAULTS.voices_dir.clone())]
    voices_dir: PathBuf,
    /// Directory of the Kokoro engine: a kokoro-v1.0(.int8|.fp16).onnx and voices/<id>.bin (or .npy, voices-v1.0.bin); unset = <voices_dir>/kokoro
    #[arg(long, env = "OMNIVOICE_KOKORO_DIR")]
    kokoro_dir: Option<PathBuf>,
    /// Directory of the Mandarin pinyin tables (characters.tsv, phrases.tsv; scripts/mandarin-assets.sh installs them) that Kokoro's zf_/zm_ voices need; unset = <voices_dir>/mandarin
    #[arg(long, env = "OMNIVOICE_MANDARIN_DIR")]
    mandarin_dir: Option<PathBuf>,
    /// Directory of the OmniVoice engine, the checkpoint as downloaded: config.json, model.safetensors, tokenizer.json and audio_tokenizer/; unset = <voices_dir>/omnivoice
    #[arg(long, env = "OMNIVOICE_OMNIVOICE_DIR")]
    omnivoice_dir: Option<PathBuf>,
    /// Engine behind OpenAI's model names (tts-1, tts-1-hd, gpt-4o-mini-tts); unset = kokoro when its model is installed, else piper
    #[arg(long, env = "OMNIVOICE_DEFAULT_ENGINE")]
    default_engine: Option<String>,
    /// Voice behind OpenAI's voice names (alloy, nova, …) unless [voices.aliases] maps them; unset = the default engine's own: af_heart (kokoro), alloy (omnivoice), en-us (espeak), en_US-joe-medium (piper)
    #[arg(long, env = "OMNIVOICE_DEFAULT_VOICE")]
    default_voice: Option<String>,
    /// Most voices kept loaded; the least recently used is released first
    #[arg(long, env = "OMNIVOICE_MAX_LOADED_VOICES", default_value_t = DEFAULTS.max_loaded_voices)]
    max_loaded_voices: usize,
    /// Release the voices of other engines when a request switches engine
    #[arg(long, env = "OMNIVOICE_SINGLE_ENGINE_RESIDENT", action = ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true",
          default_value_t = DEFAULTS.single_engine_resident)]
    single_engine_resident: bool,
    /// Release a voice unused for this many seconds; 0 = never
    #[arg(long, env = "OMNIVOICE_IDLE_UNLOAD_S", default_value_t = DEFAULTS.idle_unload_s)]
    idle_unload_s: u64,
    /// Voices loaded before /health reports ready: engine/voice or a voice of the default engine;
    /// none loads nothing; empty = the default voice
    #[arg(long, env = "OMNIVOICE_PRELOAD", value_delimiter = ',')]
    preload: Vec<String>,
    /// Seed used when a request gives none; unset = a random seed per request
    #[arg(long, env = "OMNIVOICE_SEED")]
    seed: Option<u64>,
    /// Longest accepted input, in characters; one more is a 400
    #[arg(long, env = "OMNIVOICE_MAX_INPUT_CHARS", default_value_t = DEFAULTS.max_input_chars)]
    max_input_chars: usize,
    /// Write out numbers, money, dates, times, units and symbols in English text before it is
    /// phonemized (docs/text-normalization.md); a request may still turn it off
    #[arg(long, env = "OMNIVOICE_NORMALIZE", action = ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true",
          default_value_t = DEFAULTS.normalize)]
    normalize: bool,
    /// How slashed dates like 12/01/2026 are read when both numbers could be the month: mdy
    /// (December first) or dmy (the twelfth of January); a request may choose its own
    #[arg(long, env = "OMNIVOICE_DATE_ORDER", default_value_t = DEFAULTS.date_order.clone())]
    date_order: String,
    /// Read each sentence of plain text in the language it is detected to be in, by the voice that [voices.by_language] names for that language (sentences of other languages keep the requested voice)
    #[arg(long, env = "OMNIVOICE_LANGUAGE_DETECT", action = ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true",
          default_value_t = DEFAULTS.language_detect)]
    language_detect: bool,
    /// Pronunciation dictionary file (TOML, or JSON when it ends in .json), loaded at startup and rewritten atomically by PUT/DELETE /v1/audio/lexicon; created on the first change; unset = the dictionary lives in memory only
    #[arg(long, env = "OMNIVOICE_LEXICON")]
    lexicon: Option<PathBuf>,
    /// Directory of the server's own data: voice profiles live in <data_dir>/profiles, where the Python omnivoice-server keeps them; unset = $XDG_DATA_HOME/omnivoice, else ~/.local/share/omnivoice (~/Library/Application Support/omnivoice on macOS)
    #[arg(long, env = "OMNIVOICE_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Directory of the voice profiles (POST /v1/voices/profiles), the Python omnivoice-server's setting of the same name; unset = <data_dir>/profiles
    #[arg(long, env = "OMNIVOICE_PROFILE_DIR")]
    profile_dir: Option<PathBuf>,
    /// Directory of voice files (<name>.txt: a voice design, and settings such as seed: 42), the Python omnivoice-server's --voice-dir: clients send the name as the voice; unset = <data_dir>/voices
    #[arg(long, env = "OMNIVOICE_VOICE_FILE_DIR")]
    voice_file_dir: Option<PathBuf>,
    /// Largest accepted upload of a reference clip, in bytes; a larger one is a 413
    #[arg(long, env = "OMNIVOICE_MAX_UPLOAD_BYTES", default_value_t = DEFAULTS.max_upload_bytes)]
    max_upload_bytes: u64,
    /// Seconds a speech request may take; one expected to take longer is a 400 before any work, one that still runs past it a 504
    #[arg(long, env = "OMNIVOICE_REQUEST_TIMEOUT_S", default_value_t = DEFAULTS.request_timeout_s)]
    request_timeout_s: u64,
    /// Accepted API key, sent as "Authorization: Bearer <key>"; none = no auth
    #[arg(long = "api-key", env = "OMNIVOICE_API_KEYS", value_delimiter = ',')]
    api_keys: Vec<String>,
    /// Serve the model and voice lists (GET /v1/models[/{id}], /v1/audio/models, /v1/audio/voices) without an API key
    #[arg(long, env = "OMNIVOICE_PUBLIC_DISCOVERY", action = ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true",
          default_value_t = DEFAULTS.public_discovery)]
    public_discovery: bool,
    /// Allowed browser origin for CORS, or *
    #[arg(
        long = "cors-origins",
        env = "OMNIVOICE_CORS_ORIGINS",
        value_delimiter = ','
    )]
    cors_origins: Vec<String>,
    /// Stream audio sentence by sentence unless a request says "stream": false
    #[arg(long, env = "OMNIVOICE_STREAM", action = ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true", default_value_t = DEFAULTS.stream)]
    stream: bool,
    /// Seconds to finish in-flight requests after SIGINT/SIGTERM
    #[arg(long, env = "OMNIVOICE_SHUTDOWN_TIMEOUT_S",
          default_value_t = DEFAULTS.shutdown_timeout_s)]
    shutdown_timeout_s: u64,
    /// Port of the Wyoming protocol server (Home Assistant), bound on --host; unset = off
    #[arg(long, env = "OMNIVOICE_WYOMING_PORT")]
    wyoming_port: Option<u16>,
    /// Most WebSocket text streams (/v1/audio/speech/stream) open at once; one more is closed with 1013
    #[arg(long, env = "OMNIVOICE_WS_MAX_CONNECTIONS", default_value_t = DEFAULTS.ws_max_connections)]
    ws_max_connections: usize,
    /// Seconds a WebSocket text stream may send nothing while nothing is left to speak; then it is closed
    #[arg(long, env = "OMNIVOICE_WS_IDLE_TIMEOUT_S", default_value_t = DEFAULTS.ws_idle_timeout_s)]
    ws_idle_timeout_s: u64,
    /// Most multi-speaker scripts (POST /v1/audio/script) read at once; one more is a 429 with Retry-After
    #[arg(long, env = "OMNIVOICE_MAX_SCRIPTS", default_value_t = DEFAULTS.max_scripts)]
    max_scripts: usize,
    /// Inference workers running batches in parallel; unset = one per physical core
    #[arg(long, env = "OMNIVOICE_MAX_CONCURRENT")]
    max_concurrent: Option<usize>,
    /// Group concurrent utterances of one voice into one forward pass
    #[arg(long, env = "OMNIVOICE_BATCH_ENABLED", action = ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true",
          default_value_t = DEFAULTS.batch_enabled)]
    batch_enabled: bool,
    /// Most utterances in one forward pass (at most 256)
    #[arg(long, env = "OMNIVOICE_BATCH_MAX_SIZE", default_value_t = DEFAULTS.batch_max_size)]
    batch_max_size: usize,
    /// Longest an utterance waits for companions, in ms (never on an idle server)
    #[arg(long, env = "OMNIVOICE_BATCH_TIMEOUT_MS", default_value_t = DEFAULTS.batch_timeout_ms)]
    batch_timeout_ms: u64,
    /// Most requests in progress at once, however long each is; beyond it requests get 429 with Retry-After
    #[arg(long, env = "OMNIVOICE_BATCH_QUEUE_SIZE", default_value_t = DEFAULTS.batch_queue_size)]
    batch_queue_size: usize,
    /// Keep finished, encoded audio in memory and answer repeats from it
    #[arg(long, env = "OMNIVOICE_CACHE_ENABLED", action = ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true",
          default_value_t = DEFAULTS.cache_enabled)]
    cache_enabled: bool,
    /// Memory budget of the audio cache in MiB; a larger entry is never cached
    #[arg(long, env = "OMNIVOICE_CACHE_MAX_MB", default_value_t = DEFAULTS.cache_max_mb)]
    cache_max_mb: u64,
    /// Seconds a cached entry lives; 0 = no expiry
    #[arg(long, env = "OMNIVOICE_CACHE_TTL_S", default_value_t = DEFAULTS.cache_ttl_s)]
    cache_ttl_s: u64,
    /// Redis URL of a second-level audio cache shared by replicas, e.g. redis://redis:6379/0; unset = off
    #[arg(long, env = "OMNIVOICE_REDIS_URL")]
    redis_url: Option<String>,
    /// Prefix of every Redis key the server writes; replicas that share audio use the same one
    #[arg(long, env = "OMNIVOICE_REDIS_PREFIX", default_value_t = DEFAULTS.redis_prefix.clone())]
    redis_prefix: String,
    /// Longest one Redis operation may take, in ms; then the request goes on without Redis
    #[arg(long, env = "OMNIVOICE_REDIS_TIMEOUT_MS", default_value_t = DEFAULTS.redis_timeout_ms)]
    redis_timeout_ms: u64,
    /// Largest body stored in Redis, in MiB; larger ones stay in this replica's memory only
    #[arg(long, env = "OMNIVOICE_REDIS_MAX_ENTRY_MB",
          default_value_t = DEFAULTS.redis_max_entry_mb)]
    redis_max_entry_mb: u64,
    /// Longest a request waits for an identical one that another replica is synthesizing, in ms; then it synthesizes itself
    #[arg(long, env = "OMNIVOICE_REDIS_LOCK_WAIT_MS",
          default_value_t = DEFAULTS.redis_lock_wait_ms)]
    redis_lock_wait_ms: u64,
    /// Consecutive Redis failures after which Redis is skipped for --redis-breaker-cooldown-ms
    #[arg(long, env = "OMNIVOICE_REDIS_BREAKER_FAILURES",
          default_value_t = DEFAULTS.redis_breaker_failures)]
    redis_breaker_failures: u32,
    /// How long Redis is skipped once the breaker opens, in ms; then one operation probes it
    #[arg(long, env = "OMNIVOICE_REDIS_BREAKER_COOLDOWN_MS",
          default_value_t = DEFAULTS.redis_breaker_cooldown_ms)]
    redis_breaker_cooldown_ms: u64,
    /// `[models.aliases]`: extra model names → engine ids (file only).
    #[arg(skip)]
    models: AliasTable,
    /// `[voices.aliases]`: voice names → voice ids; `[voices.by_language]`: language tags →
    /// the voice that reads them (file only).
    #[arg(skip)]
    voices: VoiceTables,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            host: [127, 0, 0, 1].into(),
            port: 8880,
            log_level: "info".into(),
            log_format: LogFormat::Text,
            device: DeviceChoice::Auto,
            precision: PrecisionChoice::Auto,
            voices_dir: "voices".into(),
            kokoro_dir: None,
            mandarin_dir: None,
            omnivoice_dir: None,
            default_engine: None,
            default_voice: None,
            max_loaded_voices: 4,
            single_engine_resident: false,
            idle_unload_s: 0,
            preload: Vec::new(),
            seed: None,
            max_input_chars: 4096,
            normalize: true,
            date_order: "mdy".into(),
            lexicon: None,
            language_detect: false,
            data_dir: None,
            profile_dir: None,
            voice_file_dir: None,
            // The Python omnivoice-server's limit (25 MB, its `max_ref_audio_mb`).
            max_upload_bytes: 25 * 1024 * 1024,
            request_timeout_s: 120,
            api_keys: Vec::new(),
            public_discovery: false,
            cors_origins: Vec::new(),
            stream: true,
            shutdown_timeout_s: 10,
            wyoming_port: None,
            ws_max_connections: 64,
            ws_idle_timeout_s: 60,
            max_scripts: 4,
            max_concurrent: None,
            batch_enabled: true,
            batch_max_size: 8,
            batch_timeout_ms: 20,
            batch_queue_size: 256,
            cache_enabled: true,
            cache_max_mb: 512,
            cache_ttl_s: 3600,
            redis_url: None,
            redis_prefix: "omnivoice:".into(),
            redis_timeout_ms: 100,
            redis_max_entry_mb: 8,
            redis_lock_wait_ms: 10_000,
            redis_breaker_failures: 3,
            redis_breaker_cooldown_ms: 1000,
            models: AliasTable::default(),
            voices: VoiceTables::default(),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct AliasTable {
    #[serde(default)]
    aliases: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct VoiceTables {
    #[serde(default)]
    aliases: BTreeMap<String, String>,
    #[serde(default)]
    by_language: BTreeMap<String, String>,
}

/// The settings that have a flag: clap's argument ids, which are also the file keys.
static FLAG_KEYS: LazyLock<Vec<String>> = LazyLock::new(|| {
    Options::augment_args(clap::Command::new("settings"))
        .get_arguments()
        .map(|arg| arg.get_id().to_string())
        .collect()
});

/// All flags of `serve`: the settings, and beside them the file to read and the off switches,
/// which are flags only.
#[derive(Debug, Clone, Args)]
struct Flags {
    /// TOML config file (keys as in config.example.toml)
    #[arg(long, env = "OMNIVOICE_CONFIG", global = true)]
    config: Option<PathBuf>,
    #[command(flatten)]
    options: Options,
    /// Run every request on its own (batch size 1)
    #[arg(long)]
    no_batch: bool,
    /// Turn the audio cache off
    #[arg(long)]
    no_cache: bool,
    /// Answer every request with one whole body (Content-Length), never chunked
    #[arg(long)]
    no_stream: bool,
}

/// Each off switch beside the setting it turns off. Not clap conflicts: clap counts a variable
/// as given, and a flag must beat a variable, so only two flags conflict.
const OFF_SWITCHES: [(&str, &str); 3] = [
    ("no_batch", "batch_enabled"),
    ("no_cache", "cache_enabled"),
    ("no_stream", "stream"),
];

/// Flags and variables of `serve` as parsed, with which of them were given, so that the config
/// file fills only the rest. Turn them into [`Settings`] with [`Settings::resolve`].
#[derive(Debug, Clone)]
pub struct ServeArgs {
    flags: Flags,
    /// Keys whose value came from a flag or an environment variable, not from a default.
    given: BTreeSet<String>,
}

impl FromArgMatches for ServeArgs {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        for (off, on) in OFF_SWITCHES {
            if matches.get_flag(off) && matches.value_source(on) == Some(ValueSource::CommandLine) {
                let flag = |id: &str| format!("--{}", id.replace('_', "-"));
                return Err(clap::Error::raw(
                    clap::error::ErrorKind::ArgumentConflict,
                    format!(
                        "the argument '{}' cannot be used with '{}'\n",
                        flag(off),
                        flag(on)
                    ),
                ));
            }
        }
        let given = FLAG_KEYS
            .iter()
            .filter(|key| {
                matches!(
                    matches.value_source(key),
                    Some(ValueSource::CommandLine | ValueSource::EnvVariable)
                )
            })
            .cloned()
            .collect();
        Ok(ServeArgs {
            flags: Flags::from_arg_matches(matches)?,
            given,
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl Args for ServeArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        Flags::augment_args(cmd)
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Flags::augment_args_for_update(cmd)
    }
}

impl ServeArgs {
    /// Each setting from the first layer that has it: flag or variable, file, default.
    fn layered(&self) -> Result<Options, ConfigError> {
        let base = match &self.flags.config {
            Some(path) => read_file(path)?,
            None => Options::default(),
        };
        if self.given.is_empty() {
            return Ok(base);
        }
        let mut merged = as_map(&base);
        let command_line = as_map(&self.flags.options);
        for key in &self.given {
            merged.insert(key.clone(), command_line[key.as_str()].clone());
        }
        Ok(serde_json::from_value(merged.into()).expect("settings read back what they wrote"))
    }
}

/// A value per key. JSON rather than TOML, because TOML has no null (unset) and no u64 seed.
fn as_map(options: &Options) -> serde_json::Map<String, serde_json::Value> {
    match serde_json::to_value(options) {
        Ok(serde_json::Value::Object(map)) => map,
        other => unreachable!("settings serialize as a map, not {other:?}"),
    }
}

/// Effective settings of a running server.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    pub host: IpAddr,
    pub port: u16,
    pub log_level: String,
    pub log_format: LogFormat,
    pub device: DeviceChoice,
    /// Arithmetic of the Piper voices on the CPU; what `auto` became is logged per voice.
    pub precision: PrecisionChoice,
    pub voices_dir: PathBuf,
    /// Where the Kokoro engine looks for its model and packs.
    pub kokoro_dir: PathBuf,
    /// Where the Mandarin front end reads its pinyin tables.
    pub mandarin_dir: PathBuf,
    /// Where the OmniVoice engine looks for its checkpoint.
    pub omnivoice_dir: PathBuf,
    /// The engine behind OpenAI's model names; `None`: the engines' own choice
    /// ([`crate::engine::defaults`]).
    pub default_engine: Option<String>,
    /// The voice behind OpenAI's voice names; `None`: the default engine's own.
    pub default_voice: Option<String>,
    pub max_input_chars: usize,
    /// Whether English text is written out before phonemizing.
    pub normalize: bool,
    /// `mdy` or `dmy`: how slashed dates are read.
    pub date_order: String,
    /// Where the pronunciation dictionary is kept; `None`: in memory only.
    pub lexicon: Option<PathBuf>,
    /// Whether each sentence is read in the language it is detected to be in.
    pub language_detect: bool,
    /// The server's own data directory.
    pub data_dir: PathBuf,
    /// Where voice profiles are kept (`<data_dir>/profiles` unless set).
    pub profile_dir: PathBuf,
    /// Where voice files are read (`<data_dir>/voices` unless set).
    pub voice_file_dir: PathBuf,
    /// Largest accepted reference clip upload, in bytes.
    pub max_upload_bytes: u64,
    pub request_timeout_s: u64,
    pub max_concurrent: usize,
    #[serde(skip)]
    pub api_keys: Vec<String>,
    pub cors_origins: Vec<String>,
    pub shutdown_timeout_s: u64,
    pub batch: BatchSettings,
    pub cache: CacheSettings,
    pub max_loaded_voices: usize,
    pub single_engine_resident: bool,
    pub idle_unload_s: u64,
    pub preload: Preload,
    pub seed: Option<u64>,
    pub stream: bool,
    /// Port of the Wyoming protocol server, on `host`; `None` = no Wyoming server.
    pub wyoming_port: Option<u16>,
    /// WebSocket text streams open at once.
    pub ws_max_connections: usize,
    /// Seconds a WebSocket text stream may wait for its client with nothing left to speak.
    pub ws_idle_timeout_s: u64,
    /// Multi-speaker scripts read at once.
    pub max_scripts: usize,
    /// Whether the model and voice lists are served without an API key.
    pub public_discovery: bool,
    /// Extra `model` names → engine ids, from `[models.aliases]`.
    pub model_aliases: BTreeMap<String, String>,
    /// OpenAI voice names (and any others) → voice ids, from `[voices.aliases]`.
    pub voice_aliases: BTreeMap<String, String>,
    /// Language tags → the voice that reads them, from `[voices.by_language]`.
    pub voices_by_language: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct BatchSettings {
    pub enabled: bool,
    pub max_size: usize,
    pub timeout_ms: u64,
    pub queue_size: usize,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CacheSettings {
    pub enabled: bool,
    pub max_mb: u64,
    /// Also the expiry of Redis entries.
    pub ttl_s: u64,
    /// The second layer, shared by replicas; `None` = memory only.
    pub redis: Option<RedisSettings>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RedisSettings {
    /// May hold a password: never shown by `/health`.
    #[serde(skip)]
    pub url: String,
    pub prefix: String,
    pub timeout_ms: u64,
    pub max_entry_mb: u64,
    pub lock_wait_ms: u64,
    pub breaker_failures: u32,
    pub breaker_cooldown_ms: u64,
}

/// A setting that cannot be used; the message names it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(String);

fn invalid(setting: &str, why: impl Display) -> ConfigError {
    ConfigError(format!("invalid setting '{setting}': {why}"))
}

impl Settings {
    /// Merges flags/env (`args`) over the config file over the defaults, then validates.
    pub fn resolve(args: &ServeArgs) -> Result<Self, ConfigError> {
        let o = args.layered()?;
        let kokoro_dir = o
            .kokoro_dir
            .clone()
            .unwrap_or_else(|| o.voices_dir.join("kokoro"));
        let mandarin_dir = o
            .mandarin_dir
            .clone()
            .unwrap_or_else(|| o.voices_dir.join("mandarin"));
        let omnivoice_dir = o
            .omnivoice_dir
            .clone()
            .unwrap_or_else(|| o.voices_dir.join("omnivoice"));
        let data_dir = o.data_dir.clone().unwrap_or_else(default_data_dir);
        let profile_dir = o
            .profile_dir
            .clone()
            .unwrap_or_else(|| data_dir.join("profiles"));
        let voice_file_dir = o
            .voice_file_dir
            .clone()
            .unwrap_or_else(|| data_dir.join("voices"));
        let preload = match o.preload.is_empty() {
            true => Preload::DefaultVoice,
            false => Preload::Voices(o.preload.into_iter().filter(|v| v != "none").collect()),
        };
        let settings = Settings {
            host: o.host,
            port: o.port,
            log_level: o.log_level,
            log_format: o.log_format,
            device: o.device,
            precision: o.precision,
            voices_dir: o.voices_dir,
            kokoro_dir,
            mandarin_dir,
            omnivoice_dir,
            default_engine: o.default_engine,
            default_voice: o.default_voice,
            max_input_chars: o.max_input_chars,
            normalize: o.normalize,
            date_order: o.date_order,
            lexicon: o.lexicon,
            language_detect: o.language_detect,
            data_dir,
            profile_dir,
            voice_file_dir,
            max_upload_bytes: o.max_upload_bytes,
            request_timeout_s: o.request_timeout_s,
            max_concurrent: o.max_concurrent.unwrap_or_else(num_cpus::get_physical),
            api_keys: o.api_keys,
            cors_origins: o.cors_origins,
            shutdown_timeout_s: o.shutdown_timeout_s,
            batch: BatchSettings {
                enabled: o.batch_enabled && !args.flags.no_batch,
                max_size: o.batch_max_size,
                timeout_ms: o.batch_timeout_ms,
                queue_size: o.batch_queue_size,
            },
            cache: CacheSettings {
                enabled: o.cache_enabled && !args.flags.no_cache,
                max_mb: o.cache_max_mb,
                ttl_s: o.cache_ttl_s,
                redis: o.redis_url.map(|url| RedisSettings {
                    url,
                    prefix: o.redis_prefix,
                    timeout_ms: o.redis_timeout_ms,
                    max_entry_mb: o.redis_max_entry_mb,
                    lock_wait_ms: o.redis_lock_wait_ms,
                    breaker_failures: o.redis_breaker_failures,
                    breaker_cooldown_ms: o.redis_breaker_cooldown_ms,
                }),
            },
            max_loaded_voices: o.max_loaded_voices,
            single_engine_resident: o.single_engine_resident,
            idle_unload_s: o.idle_unload_s,
            preload,
            seed: o.seed,
            stream: o.stream && !args.flags.no_stream,
            wyoming_port: o.wyoming_port,
            ws_max_connections: o.ws_max_connections,
            ws_idle_timeout_s: o.ws_idle_timeout_s,
            max_scripts: o.max_scripts,
            public_discovery: o.public_discovery,
            model_aliases: o.models.aliases,
            voice_aliases: o.voices.aliases,
            voices_by_language: o.voices.by_language,
        };
        settings.validate()?;
        Ok(settings)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if !matches!(self.date_order.as_str(), "mdy" | "dmy") {
            return Err(invalid("date-order", "must be mdy or dmy"));
        }
        let positive = [
            ("max-input-chars", self.max_input_chars as u64),
            ("request-timeout-s", self.request_timeout_s),
            ("max-concurrent", self.max_concurrent as u64),
            ("batch-max-size", self.batch.max_size as u64),
            ("batch-queue-size", self.batch.queue_size as u64),
            ("max-loaded-voices", self.max_loaded_voices as u64),
            ("ws-max-connections", self.ws_max_connections as u64),
            ("ws-idle-timeout-s", self.ws_idle_timeout_s),
            ("max-scripts", self.max_scripts as u64),
            ("max-upload-bytes", self.max_upload_bytes),
        ];
        for (name, value) in positive {
            if value == 0 {
                return Err(invalid(name, "must be at least 1"));
            }
        }
        if self.batch.max_size > 256 {
            return Err(invalid("batch-max-size", "must be at most 256"));
        }
        if self.log_level.trim().is_empty()
            || tracing_subscriber::EnvFilter::try_new(&self.log_level).is_err()
        {
            return Err(invalid(
                "log-level",
                format!("'{}' is not a log filter", self.log_level),
            ));
        }
        if self.api_keys.iter().any(|k| k.trim().is_empty()) {
            return Err(invalid("api-key", "keys must not be empty"));
        }
        if let Some(redis) = &self.cache.redis {
            let positive = [
                ("redis-timeout-ms", redis.timeout_ms),
                ("redis-max-entry-mb", redis.max_entry_mb),
                ("redis-breaker-failures", u64::from(redis.breaker_failures)),
            ];
            for (name, value) in positive {
                if value == 0 {
                    return Err(invalid(name, "must be at least 1"));
                }
            }
            // Parsing connects to nothing; it catches a typo before the first request would.
            if let Err(e) = redis::Client::open(redis.url.as_str()) {
                return Err(invalid(
                    "redis-url",
                    format!("'{}': {e}", redact(&redis.url)),
                ));
            }
        }
        if self.wyoming_port.is_some_and(|p| p != 0 && p == self.port) {
            return Err(invalid("wyoming-port", "must differ from port"));
        }
        Ok(())
    }

    /// The effective batch settings: disabled batching is batch size 1 without waiting.
    pub fn effective_batch(&self) -> BatchSettings {
        if self.batch.enabled {
            self.batch.clone()
        } else {
            BatchSettings {
                max_size: 1,
                timeout_ms: 0,
                ..self.batch.clone()
            }
        }
    }
}

/// Where the Python omnivoice-server keeps its data (`platformdirs.user_data_dir("omnivoice")`),
/// so that its profiles are found without a setting.
fn default_data_dir() -> PathBuf {
    let home = || std::env::var_os("HOME").map(PathBuf::from);
    if cfg!(target_os = "macos") {
        if let Some(home) = home() {
            return home.join("Library/Application Support/omnivoice");
        }
    }
    // The XDG rule: an unset, empty or relative XDG_DATA_HOME is ignored.
    let xdg = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    match (xdg, home()) {
        (Some(xdg), _) => xdg.join("omnivoice"),
        (None, Some(home)) => home.join(".local/share/omnivoice"),
        (None, None) => PathBuf::from("omnivoice-data"),
    }
}

/// A URL with its password (if any) blanked, for error messages and logs.
fn redact(url: &str) -> String {
    match (url.split_once("://"), url.rfind('@')) {
        (Some((scheme, _)), Some(at)) => format!("{scheme}://***{}", &url[at..]),
        _ => url.to_string(),
    }
}

/// Reads the config file; a bad value is named by its key, anything else by `config`.
fn read_file(path: &Path) -> Result<Options, ConfigError> {
    let in_file = |setting: &str, why: &dyn Display| {
        // toml's messages can span lines; the error must stay on one.
        let why = why
            .to_string()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        invalid(setting, format!("{}: {why}", path.display()))
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| in_file("config", &format!("cannot read it: {e}")))?;
    let table: toml::Table = toml::from_str(&text).map_err(|e| in_file("config", &e.message()))?;
    serde_path_to_error::deserialize(table).map_err(|e| {
        let key = e.path().to_string();
        let setting = if key == "." { "config" } else { key.as_str() };
        in_file(setting, e.inner())
    })
}

#[cfg(test)]
mod tests;
