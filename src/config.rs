//! Server settings from three sources, merged once at startup.
//!
//! Every setting is a command-line flag, an `OMNIVOICE_<NAME>` environment variable and a key of
//! the TOML file named by `--config`. Clap reads flags and environment variables together (a flag
//! wins over its variable); the file fills what neither gave; built-in defaults fill the rest.
//! The result, [`Settings`], is plain data that the rest of the server reads and never re-parses.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand, ValueEnum};
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

/// Flags of the server. Every field is optional here so that "not given" can fall through to
/// the config file and then to the default.
#[derive(Debug, Clone, Default, Args)]
pub struct ServeArgs {
    /// TOML config file (keys as in config.example.toml).
    #[arg(long, env = "OMNIVOICE_CONFIG", global = true)]
    pub config: Option<PathBuf>,
    /// Address to listen on [default: 127.0.0.1].
    #[arg(long, env = "OMNIVOICE_HOST")]
    pub host: Option<IpAddr>,
    /// Port to listen on; 0 picks a free one [default: 8880].
    #[arg(long, env = "OMNIVOICE_PORT")]
    pub port: Option<u16>,
    /// Log filter, e.g. info or omnivoice_server=debug [default: info].
    #[arg(long, env = "OMNIVOICE_LOG_LEVEL")]
    pub log_level: Option<String>,
    /// Log format [default: text].
    #[arg(long, env = "OMNIVOICE_LOG_FORMAT")]
    pub log_format: Option<LogFormat>,
    /// Compute device for neural engines [default: auto].
    #[arg(long, env = "OMNIVOICE_DEVICE")]
    pub device: Option<DeviceChoice>,
    /// Directory scanned for Piper voices (`*.onnx` + `*.onnx.json`) [default: ./voices].
    #[arg(long, env = "OMNIVOICE_VOICES_DIR")]
    pub voices_dir: Option<PathBuf>,
    /// Engine used for the OpenAI model names (tts-1, …) [default: piper].
    #[arg(long, env = "OMNIVOICE_DEFAULT_ENGINE")]
    pub default_engine: Option<String>,
    /// Voice used for OpenAI voice names (alloy, …) [default: en_US-joe-medium].
    #[arg(long, env = "OMNIVOICE_DEFAULT_VOICE")]
    pub default_voice: Option<String>,
    /// Longest accepted `input`, in characters [default: 4096].
    #[arg(long, env = "OMNIVOICE_MAX_INPUT_CHARS")]
    pub max_input_chars: Option<usize>,
    /// Seconds before a speech request is answered 504 [default: 120].
    #[arg(long, env = "OMNIVOICE_REQUEST_TIMEOUT_S")]
    pub request_timeout_s: Option<u64>,
    /// Inference workers running batches in parallel [default: physical cores].
    #[arg(long, env = "OMNIVOICE_MAX_CONCURRENT")]
    pub max_concurrent: Option<usize>,
    /// Accepted API key (repeatable; none = no auth). The variable takes a comma-separated list.
    #[arg(long = "api-key", env = "OMNIVOICE_API_KEYS", value_delimiter = ',')]
    pub api_keys: Vec<String>,
    /// Allowed CORS origin (repeatable, or `*`). The variable takes a comma-separated list.
    #[arg(
        long = "cors-origins",
        env = "OMNIVOICE_CORS_ORIGINS",
        value_delimiter = ','
    )]
    pub cors_origins: Vec<String>,
    /// Seconds to finish in-flight requests after SIGINT/SIGTERM [default: 10].
    #[arg(long, env = "OMNIVOICE_SHUTDOWN_TIMEOUT_S")]
    pub shutdown_timeout_s: Option<u64>,
    /// Group concurrent requests into batched forward passes [default: true].
    #[arg(long, env = "OMNIVOICE_BATCH_ENABLED", num_args = 0..=1, default_missing_value = "true")]
    pub batch_enabled: Option<bool>,
    /// Run every request on its own (batch size 1).
    #[arg(long, conflicts_with = "batch_enabled")]
    pub no_batch: bool,
    /// Most utterances in one forward pass [default: 8].
    #[arg(long, env = "OMNIVOICE_BATCH_MAX_SIZE")]
    pub batch_max_size: Option<usize>,
    /// Longest an utterance waits for companions, in ms [default: 20].
    #[arg(long, env = "OMNIVOICE_BATCH_TIMEOUT_MS")]
    pub batch_timeout_ms: Option<u64>,
    /// Most utterances waiting; beyond it requests get 429 [default: 256].
    #[arg(long, env = "OMNIVOICE_BATCH_QUEUE_SIZE")]
    pub batch_queue_size: Option<usize>,
    /// Keep finished audio in memory and answer repeats from it [default: true].
    #[arg(long, env = "OMNIVOICE_CACHE_ENABLED", num_args = 0..=1, default_missing_value = "true")]
    pub cache_enabled: Option<bool>,
    /// Turn the audio cache off.
    #[arg(long, conflicts_with = "cache_enabled")]
    pub no_cache: bool,
    /// Memory budget of the audio cache in MiB [default: 512].
    #[arg(long, env = "OMNIVOICE_CACHE_MAX_MB")]
    pub cache_max_mb: Option<u64>,
    /// Seconds a cached entry lives; 0 = no expiry [default: 3600].
    #[arg(long, env = "OMNIVOICE_CACHE_TTL_S")]
    pub cache_ttl_s: Option<u64>,
    /// Most voices kept loaded; the least recently used goes first [default: 4].
    #[arg(long, env = "OMNIVOICE_MAX_LOADED_VOICES")]
    pub max_loaded_voices: Option<usize>,
    /// Release the voices of other engines when a request switches engine [default: false].
    #[arg(long, env = "OMNIVOICE_SINGLE_ENGINE_RESIDENT", num_args = 0..=1, default_missing_value = "true")]
    pub single_engine_resident: Option<bool>,
    /// Release a voice unused for this many seconds; 0 = never [default: 0].
    #[arg(long, env = "OMNIVOICE_IDLE_UNLOAD_S")]
    pub idle_unload_s: Option<u64>,
    /// Voices loaded before the server reports ready (repeatable, `engine/voice` or a voice of
    /// the default engine; `none` loads nothing) [default: the default voice].
    #[arg(long, env = "OMNIVOICE_PRELOAD", value_delimiter = ',')]
    pub preload: Vec<String>,
    /// Seed used when a request gives none; unset = a random seed per request.
    #[arg(long, env = "OMNIVOICE_SEED")]
    pub seed: Option<u64>,
    /// Stream audio sentence by sentence (chunked) unless a request says `"stream": false`
    /// [default: true].
    #[arg(long, env = "OMNIVOICE_STREAM", num_args = 0..=1, default_missing_value = "true")]
    pub stream: Option<bool>,
    /// Answer every request with one whole body (`Content-Length`), never chunked.
    #[arg(long, conflicts_with = "stream")]
    pub no_stream: bool,
}

/// The config file: the same settings as the flags, by their long names with `_` for `-`,
/// plus the alias tables. Unknown keys are an error, so typos don't pass silently.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    host: Option<IpAddr>,
    port: Option<u16>,
    log_level: Option<String>,
    log_format: Option<LogFormat>,
    device: Option<DeviceChoice>,
    voices_dir: Option<PathBuf>,
    default_engine: Option<String>,
    default_voice: Option<String>,
    max_input_chars: Option<usize>,
    request_timeout_s: Option<u64>,
    max_concurrent: Option<usize>,
    api_keys: Option<Vec<String>>,
    cors_origins: Option<Vec<String>>,
    shutdown_timeout_s: Option<u64>,
    batch_enabled: Option<bool>,
    batch_max_size: Option<usize>,
    batch_timeout_ms: Option<u64>,
    batch_queue_size: Option<usize>,
    cache_enabled: Option<bool>,
    cache_max_mb: Option<u64>,
    cache_ttl_s: Option<u64>,
    max_loaded_voices: Option<usize>,
    single_engine_resident: Option<bool>,
    idle_unload_s: Option<u64>,
    preload: Option<Vec<String>>,
    seed: Option<u64>,
    stream: Option<bool>,
    #[serde(default)]
    models: AliasTable,
    #[serde(default)]
    voices: AliasTable,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AliasTable {
    #[serde(default)]
    aliases: BTreeMap<String, String>,
}

/// Effective settings of a running server.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    pub host: IpAddr,
    pub port: u16,
    pub log_level: String,
    pub log_format: LogFormat,
    pub device: DeviceChoice,
    pub voices_dir: PathBuf,
    pub default_engine: String,
    pub default_voice: String,
    pub max_input_chars: usize,
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
    pub preload: Vec<String>,
    pub seed: Option<u64>,
    pub stream: bool,
    /// Extra `model` names → engine ids, from `[models.aliases]`.
    pub model_aliases: BTreeMap<String, String>,
    /// OpenAI voice names (and any others) → voice ids, from `[voices.aliases]`.
    pub voice_aliases: BTreeMap<String, String>,
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
    pub ttl_s: u64,
}

/// A setting that cannot be used; the message names it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(String);

fn invalid(setting: &str, why: impl std::fmt::Display) -> ConfigError {
    ConfigError(format!("invalid setting '{setting}': {why}"))
}

impl Settings {
    /// Merges flags/env (`args`) over the config file over the defaults, then validates.
    pub fn resolve(args: &ServeArgs) -> Result<Self, ConfigError> {
        let file = match &args.config {
            Some(path) => read_file(path)?,
            None => FileConfig::default(),
        };
        let pick_list = |cli: &Vec<String>, file: Option<Vec<String>>| {
            if cli.is_empty() {
                file.unwrap_or_default()
            } else {
                cli.clone()
            }
        };
        let batch_enabled = if args.no_batch {
            false
        } else {
            args.batch_enabled.or(file.batch_enabled).unwrap_or(true)
        };
        let cache_enabled = if args.no_cache {
            false
        } else {
            args.cache_enabled.or(file.cache_enabled).unwrap_or(true)
        };
        let default_voice = args
            .default_voice
            .clone()
            .or(file.default_voice)
            .unwrap_or_else(|| "en_US-joe-medium".into());
        let settings = Settings {
            host: args.host.or(file.host).unwrap_or([127, 0, 0, 1].into()),
            port: args.port.or(file.port).unwrap_or(8880),
            log_level: args
                .log_level
                .clone()
                .or(file.log_level)
                .unwrap_or_else(|| "info".into()),
            log_format: args
                .log_format
                .or(file.log_format)
                .unwrap_or(LogFormat::Text),
            device: args.device.or(file.device).unwrap_or(DeviceChoice::Auto),
            voices_dir: args
                .voices_dir
                .clone()
                .or(file.voices_dir)
                .unwrap_or_else(|| "voices".into()),
            default_engine: args
                .default_engine
                .clone()
                .or(file.default_engine)
                .unwrap_or_else(|| "piper".into()),
            preload: {
                let list = pick_list(&args.preload, file.preload);
                if list.is_empty() {
                    vec![default_voice.clone()]
                } else {
                    list.into_iter().filter(|v| v != "none").collect()
                }
            },
            default_voice,
            max_input_chars: args
                .max_input_chars
                .or(file.max_input_chars)
                .unwrap_or(4096),
            request_timeout_s: args
                .request_timeout_s
                .or(file.request_timeout_s)
                .unwrap_or(120),
            max_concurrent: args
                .max_concurrent
                .or(file.max_concurrent)
                .unwrap_or_else(num_cpus::get_physical),
            api_keys: pick_list(&args.api_keys, file.api_keys),
            cors_origins: pick_list(&args.cors_origins, file.cors_origins),
            shutdown_timeout_s: args
                .shutdown_timeout_s
                .or(file.shutdown_timeout_s)
                .unwrap_or(10),
            batch: BatchSettings {
                enabled: batch_enabled,
                max_size: args.batch_max_size.or(file.batch_max_size).unwrap_or(8),
                timeout_ms: args
                    .batch_timeout_ms
                    .or(file.batch_timeout_ms)
                    .unwrap_or(20),
                queue_size: args
                    .batch_queue_size
                    .or(file.batch_queue_size)
                    .unwrap_or(256),
            },
            cache: CacheSettings {
                enabled: cache_enabled,
                max_mb: args.cache_max_mb.or(file.cache_max_mb).unwrap_or(512),
                ttl_s: args.cache_ttl_s.or(file.cache_ttl_s).unwrap_or(3600),
            },
            max_loaded_voices: args
                .max_loaded_voices
                .or(file.max_loaded_voices)
                .unwrap_or(4),
            single_engine_resident: args
                .single_engine_resident
                .or(file.single_engine_resident)
                .unwrap_or(false),
            idle_unload_s: args.idle_unload_s.or(file.idle_unload_s).unwrap_or(0),
            seed: args.seed.or(file.seed),
            stream: !args.no_stream && args.stream.or(file.stream).unwrap_or(true),
            model_aliases: file.models.aliases,
            voice_aliases: file.voices.aliases,
        };
        settings.validate()?;
        Ok(settings)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let positive = [
            ("max-input-chars", self.max_input_chars as u64),
            ("request-timeout-s", self.request_timeout_s),
            ("max-concurrent", self.max_concurrent as u64),
            ("batch-max-size", self.batch.max_size as u64),
            ("batch-queue-size", self.batch.queue_size as u64),
            ("max-loaded-voices", self.max_loaded_voices as u64),
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

fn read_file(path: &Path) -> Result<FileConfig, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| invalid("config", format!("cannot read {}: {e}", path.display())))?;
    toml::from_str(&text).map_err(|e| {
        let why = e.message().to_string();
        invalid("config", format!("{}: {why}", path.display()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> ServeArgs {
        let mut argv = vec!["omnivoice-server"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv).expect("valid command line").serve
    }

    fn write(text: &str) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), text).unwrap();
        file
    }

    #[test]
    fn defaults_apply_without_flags_or_file() {
        let s = Settings::resolve(&parse(&[])).unwrap();
        assert_eq!(s.port, 8880);
        assert_eq!(s.host.to_string(), "127.0.0.1");
        assert_eq!(s.max_input_chars, 4096);
        assert!(s.batch.enabled && s.cache.enabled);
        assert_eq!(s.batch.max_size, 8);
        assert_eq!(s.preload, vec!["en_US-joe-medium".to_string()]);
    }

    #[test]
    fn flag_beats_file_and_file_beats_default() {
        let file = write("port = 9000\nmax_input_chars = 100\nbatch_enabled = false\n");
        let path = file.path().to_str().unwrap();
        let s = Settings::resolve(&parse(&["--config", path, "--port", "9100"])).unwrap();
        assert_eq!(s.port, 9100, "flag wins");
        assert_eq!(s.max_input_chars, 100, "file wins over default");
        assert!(!s.batch.enabled);
        assert_eq!(s.effective_batch().max_size, 1);
    }

    #[test]
    fn unknown_file_key_names_it() {
        let file = write("prot = 9000\n");
        let err = Settings::resolve(&parse(&["--config", file.path().to_str().unwrap()]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("prot"), "{err}");
    }

    #[test]
    fn unreadable_file_is_an_error() {
        let err = Settings::resolve(&parse(&["--config", "/nonexistent/omnivoice.toml"]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("config") && err.contains("/nonexistent"),
            "{err}"
        );
    }

    #[test]
    fn zero_workers_are_rejected() {
        let err = Settings::resolve(&parse(&["--max-concurrent", "0"])).unwrap_err();
        assert!(err.to_string().contains("max-concurrent"));
    }

    #[test]
    fn bad_values_fail_in_clap() {
        for args in [["--port", "70000"], ["--device", "tpu"]] {
            let mut argv = vec!["omnivoice-server"];
            argv.extend_from_slice(&args);
            let err = Cli::try_parse_from(argv).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{args:?}");
        }
    }

    #[test]
    fn the_example_config_is_valid_and_matches_the_defaults() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/config.example.toml");
        let from_file = Settings::resolve(&parse(&["--config", path])).unwrap();
        let defaults = Settings::resolve(&parse(&[])).unwrap();
        assert_eq!(
            serde_json::to_value(&from_file).unwrap(),
            serde_json::to_value(&defaults).unwrap()
        );
    }

    #[test]
    fn alias_tables_come_from_the_file() {
        let file =
            write("[models.aliases]\nmy-tts = \"espeak\"\n[voices.aliases]\nalloy = \"en-us\"\n");
        let s = Settings::resolve(&parse(&["--config", file.path().to_str().unwrap()])).unwrap();
        assert_eq!(s.model_aliases["my-tts"], "espeak");
        assert_eq!(s.voice_aliases["alloy"], "en-us");
    }
}
